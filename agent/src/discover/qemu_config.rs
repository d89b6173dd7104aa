//! What a QEMU command line (and a Proxmox VM's configuration file) says about the VM's setup
//! that decides what its idle vCPUs cost: the Hyper-V enlightenments a Windows guest is given,
//! whether the machine has an emulated HPET, and the OS Proxmox was told the guest runs.
//!
//! QEMU's docs/system/i386/hyperv.rst names the enlightenments (`hv-stimer` needs `hv-synic`,
//! `hv-vpindex` and `hv-time`); older command lines write them `hv_stimer`, newer ones
//! `hv-stimer=on`. The x86 `pc` and `q35` machines have an HPET unless `-no-hpet` (older QEMU)
//! or `-machine ...,hpet=off` says otherwise; `microvm` has none.

use super::args::{flag_values, split_options};
use crate::wire::VmConfig;

/// The VM's setup as its command line gives it. The OS hint comes from Proxmox's file, read
/// later (see [`apply_proxmox_conf`]).
pub fn from_argv(argv: &[String], program: &str) -> VmConfig {
    VmConfig {
        hyperv: Some(hyperv_flags(argv)),
        hpet: hpet(argv, program),
        os_hint: None,
    }
    .cleaned()
}

/// The enlightenments of the last `-cpu` (QEMU takes the last), by their names without `hv-`.
/// A CPU model with none (QEMU's default) gives none.
fn hyperv_flags(argv: &[String]) -> Vec<String> {
    let Some(cpu) = flag_values(argv, "-cpu").last() else {
        return Vec::new();
    };
    split_options(cpu)
        .iter()
        .skip(1) // the model
        .filter_map(|option| {
            // `+hv_relaxed` and `-hv_relaxed` are the old way to turn a feature on and off.
            let (on, option) = match option.as_bytes().first() {
                Some(b'-') => (false, &option[1..]),
                Some(b'+') => (true, &option[1..]),
                _ => (true, option.as_str()),
            };
            let (name, value) = option.split_once('=').unwrap_or((option, ""));
            let name = name.replace('_', "-");
            let flag = name.strip_prefix("hv-")?;
            let off = matches!(value, "off" | "false" | "no");
            (on && !off).then(|| flag.to_string())
        })
        .collect()
}

/// Whether the machine has an HPET: only said for x86 machines whose default is known.
fn hpet(argv: &[String], program: &str) -> Option<bool> {
    if argv.iter().any(|a| a == "-no-hpet") {
        return Some(false);
    }
    let x86 = program.contains("x86_64")
        || program.contains("i386")
        || program == "qemu-kvm"
        || program == "kvm";
    // `-machine` may be given more than once; QEMU merges them, a later value winning.
    let mut machine_type: Option<String> = None;
    let mut hpet: Option<bool> = None;
    let machine_values = argv
        .windows(2)
        .filter(|pair| pair[0] == "-machine" || pair[0] == "-M")
        .map(|pair| pair[1].as_str());
    for value in machine_values {
        for option in split_options(value) {
            match option.split_once('=') {
                Some(("hpet", v)) => hpet = Some(matches!(v, "on" | "true" | "yes")),
                Some(("type", t)) => machine_type = Some(t.to_string()),
                None if !option.is_empty() => machine_type = Some(option),
                _ => {}
            }
        }
    }
    if hpet.is_some() {
        return hpet;
    }
    if !x86 {
        return None;
    }
    match machine_type.as_deref() {
        None => Some(true),
        Some(t) if t.contains("microvm") => Some(false),
        Some(t) if t.starts_with("pc") || t.starts_with("q35") => Some(true),
        // isapc, xenfv, ...: not known here.
        Some(_) => None,
    }
}

/// Proxmox VE keeps each VM's configuration in `/etc/pve/qemu-server/<vmid>.conf`, with
/// `-id <vmid>` on the command line.
pub fn proxmox_conf_path(vmid: &str) -> Option<String> {
    (!vmid.is_empty() && vmid.len() <= 10 && vmid.bytes().all(|b| b.is_ascii_digit()))
        .then(|| format!("/etc/pve/qemu-server/{vmid}.conf"))
}

/// The `ostype:` of a Proxmox VM's configuration (`win10`, `l26`, ...): the current settings
/// only, before the first `[snapshot]` section.
pub fn apply_proxmox_conf(config: &mut VmConfig, text: &str) {
    let ostype = text
        .lines()
        .take_while(|line| !line.starts_with('['))
        .find_map(|line| line.strip_prefix("ostype:"))
        .map(|v| v.trim().to_string());
    if ostype.is_some() {
        config.os_hint = ostype;
        *config = std::mem::take(config).cleaned();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::args::argv;

    fn config(line: &str) -> VmConfig {
        let a = argv(line);
        let program = a[0].rsplit('/').next().unwrap().to_string();
        from_argv(&a, &program)
    }

    fn flags(list: &[&str]) -> Option<Vec<String>> {
        Some(list.iter().map(|f| f.to_string()).collect())
    }

    #[test]
    fn enlightenments_are_read_in_every_spelling_qemu_has_had() {
        // virt-manager's Windows 10 domain, as libvirt 9 hands it to QEMU 7.2.
        let libvirt = config(
            "/usr/bin/qemu-system-x86_64 -name guest=win10,debug-threads=on \
             -machine pc-q35-7.2,usb=off,vmport=off,dump-guest-core=off,memory-backend=pc.ram,hpet=off,acpi=on \
             -accel kvm -cpu host,migratable=on,hv-time=on,hv-relaxed=on,hv-vapic=on,hv-spinlocks=0x1fff \
             -m 4096 -smp 2,sockets=2,cores=1,threads=1",
        );
        assert_eq!(
            libvirt.hyperv,
            flags(&["relaxed", "spinlocks", "time", "vapic"]),
            "virt-manager's default set has no stimer"
        );
        assert_eq!(libvirt.hpet, Some(false));
        // Proxmox VE 8 with `ostype: win11`: the old underscore spelling, `+` for KVM's own.
        let proxmox = config(
            "/usr/bin/kvm -id 105 -name win-srv,debug-threads=on -no-shutdown \
             -cpu kvm64,enforce,hv_ipi,hv_relaxed,hv_reset,hv_runtime,hv_spinlocks=0x1fff,hv_stimer,hv_synic,hv_time,hv_vapic,hv_vpindex,+kvm_pv_eoi,+kvm_pv_unhalt,+lahf_lm,+sep \
             -m 8192 -machine type=pc-q35-8.1+pve0",
        );
        assert_eq!(
            proxmox.hyperv,
            flags(&[
                "ipi",
                "relaxed",
                "reset",
                "runtime",
                "spinlocks",
                "stimer",
                "synic",
                "time",
                "vapic",
                "vpindex"
            ])
        );
        assert_eq!(proxmox.hpet, Some(true), "q35 has an HPET by default");
        // Turned off again, in both the old and the new way; passthrough stands for all.
        let off = config("qemu-system-x86_64 -cpu host,hv-stimer=off,-hv_synic,hv-passthrough");
        assert_eq!(off.hyperv, flags(&["passthrough"]));
        // The last -cpu counts.
        let last = config("qemu-system-x86_64 -cpu host,hv-stimer -cpu qemu64");
        assert_eq!(last.hyperv, flags(&[]));
    }

    #[test]
    fn a_linux_guest_without_cpu_flags_has_no_enlightenments_and_the_default_hpet() {
        let plain = config("qemu-system-x86_64 -accel tcg -m 256 -kernel vmlinuz");
        assert_eq!(plain.hyperv, flags(&[]));
        assert_eq!(plain.hpet, Some(true));
        assert_eq!(plain.os_hint, None);
    }

    #[test]
    fn hpet_follows_no_hpet_the_machine_option_and_the_machine_type() {
        let cases = [
            ("qemu-system-x86_64 -no-hpet -machine pc", Some(false)),
            ("qemu-system-x86_64 -machine q35,hpet=off", Some(false)),
            ("qemu-system-x86_64 -M pc -machine hpet=on", Some(true)),
            // In command-line order, whichever spelling: the later one wins.
            (
                "qemu-system-x86_64 -machine hpet=on -M q35,hpet=off",
                Some(false),
            ),
            (
                "qemu-system-x86_64 -M q35,hpet=off -machine hpet=on",
                Some(true),
            ),
            (
                "qemu-system-x86_64 -machine microvm,x-option-roms=off",
                Some(false),
            ),
            ("qemu-system-x86_64 -machine isapc", None),
            ("qemu-system-aarch64 -machine virt", None),
            ("qemu-system-aarch64 -machine virt,hpet=off", Some(false)),
            ("/usr/bin/kvm -machine type=pc-i440fx-8.1+pve0", Some(true)),
        ];
        for (line, expected) in cases {
            assert_eq!(config(line).hpet, expected, "{line}");
        }
    }

    #[test]
    fn proxmox_ostype_comes_from_the_current_settings_not_a_snapshot() {
        assert_eq!(
            proxmox_conf_path("105").as_deref(),
            Some("/etc/pve/qemu-server/105.conf")
        );
        assert_eq!(proxmox_conf_path("../../etc/shadow"), None);
        assert_eq!(proxmox_conf_path(""), None);
        let mut config = VmConfig::default();
        apply_proxmox_conf(
            &mut config,
            "boot: order=scsi0\ncores: 2\nname: win-srv\nostype: win11\n\n[before-upgrade]\nostype: win10\n",
        );
        assert_eq!(config.os_hint.as_deref(), Some("win11"));
        let mut linux = VmConfig::default();
        apply_proxmox_conf(&mut linux, "[snap]\nostype: win10\n");
        assert_eq!(linux.os_hint, None, "only a snapshot names an OS");
    }
}
