//! QEMU, plain or under libvirt or Proxmox VE.
//!
//! vCPU threads are named `CPU <n>/KVM` (or `/TCG`, `/HVF`, ...) when QEMU runs with
//! `-name ...,debug-threads=on`, which libvirt and Proxmox set by default.

use super::args::{flag_value, flag_values, split_options};
use super::identity::{Family, ProcessView, VmIdentity};
use crate::wire::normalise_uuid;
use crate::wire::{Hypervisor, Platform};

pub const FAMILY: Family = Family {
    recognise,
    vcpu_index,
};

fn is_qemu_program(name: &str) -> bool {
    name.starts_with("qemu-system-") || name == "qemu-kvm" || name == "kvm"
}

fn recognise(p: &ProcessView) -> Option<VmIdentity> {
    // `comm` is truncated to 15 bytes ("qemu-system-x86") and `-name ...,process=X` renames it,
    // so argv[0] is asked too.
    if !(is_qemu_program(p.comm) || is_qemu_program(p.program())) {
        return None;
    }
    let name = flag_value(p.argv, "-name").and_then(|v| {
        let options = split_options(v);
        let guest = options.iter().find_map(|o| o.strip_prefix("guest="));
        let bare = options.iter().find(|o| !o.contains('='));
        guest.or(bare.map(String::as_str)).map(str::to_string)
    });
    let proxmox_id = flag_value(p.argv, "-id");
    let given_name = name.clone();
    let name = name
        .or_else(|| proxmox_id.map(|id| format!("vm{id}")))
        .unwrap_or_else(|| format!("qemu-{}", p.pid));
    let mut id = VmIdentity::new(Hypervisor::Qemu, name);
    id.uuid = flag_value(p.argv, "-uuid").and_then(normalise_uuid);
    id.vcpus_hint = flag_value(p.argv, "-smp").and_then(smp_cpus);
    id.boot_args = flag_value(p.argv, "-append").map(str::to_string);
    id.probe_channel = probe_channel(p.argv);
    id.guest_agent_socket = guest_agent_socket(p.argv);
    id.guest_agent_port = !virtserial_chardevs(p.argv, GUEST_AGENT_PORT).is_empty();
    id.vm_config = super::qemu_config::from_argv(p.argv, p.program());
    id.config_file = proxmox_id.and_then(super::qemu_config::proxmox_conf_path);
    id.platform = proxmox_id.map(|vmid| {
        Platform {
            kind: "proxmox".into(),
            name: given_name,
            group: None,
            flavor: None,
            id: Some(vmid.to_string()),
        }
        .cleaned()
    });
    id.management = if proxmox_id.is_some() {
        Some("proxmox".into())
    } else if p.argv.iter().any(|a| a.contains("/libvirt/")) {
        // libvirt's monitor socket and domain directories live under .../libvirt/qemu/.
        Some("libvirt".into())
    } else {
        None
    };
    Some(id)
}

/// A `-device` or `-chardev` value as a list of options, driver or backend first: QEMU's
/// `a,b=c` form, or the JSON form libvirt uses (`{"driver":"virtserialport","name":...}`).
fn options_of(value: &str) -> Vec<String> {
    if !value.trim_start().starts_with('{') {
        return split_options(value);
    }
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str(value) else {
        return Vec::new();
    };
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let first = map
        .get("driver")
        .or_else(|| map.get("backend"))
        .map(text)
        .unwrap_or_default();
    std::iter::once(first)
        .chain(
            map.iter()
                .filter(|(k, _)| *k != "driver" && *k != "backend")
                .map(|(k, v)| format!("{k}={}", text(v))),
        )
        .collect()
}

/// The chardev ids of virtio-serial ports whose name starts with `port`.
fn virtserial_chardevs(argv: &[String], port: &str) -> Vec<String> {
    flag_values(argv, "-device")
        .map(options_of)
        .filter(|o| o.first().is_some_and(|d| d == "virtserialport"))
        .filter(|o| {
            o.iter().any(|kv| {
                kv.strip_prefix("name=")
                    .is_some_and(|n| n.starts_with(port))
            })
        })
        .filter_map(|o| {
            o.iter()
                .find_map(|kv| kv.strip_prefix("chardev=").map(str::to_string))
        })
        .collect()
}

/// The UNIX socket behind the chardev of a virtio-serial port whose name starts with `port`,
/// or of a socket chardev `also` accepts by its id and path. Newer libvirt hands QEMU the
/// listening socket as `fd=N` instead of a path: that is returned as `fd:N`, for the sampler to
/// resolve through `/proc`.
fn virtserial_socket(
    argv: &[String],
    port: &str,
    also: impl Fn(&str, &str) -> bool,
) -> Option<String> {
    let ports = virtserial_chardevs(argv, port);
    flag_values(argv, "-chardev").find_map(|value| {
        let options = options_of(value);
        if options.first().map(String::as_str) != Some("socket") {
            return None;
        }
        let get = |key: &str| options.iter().find_map(|kv| kv.strip_prefix(key));
        let id = get("id=").unwrap_or("");
        let path = get("path=");
        let wanted = ports.iter().any(|p| p == id) || path.is_some_and(|path| also(id, path));
        if !wanted {
            return None;
        }
        path.map(str::to_string)
            .or_else(|| get("fd=").map(|fd| format!("fd:{fd}")))
    })
}

/// The UNIX socket of the guest probe's channel: a socket chardev whose id or path says
/// "tickscope", or that a virtio-serial port named `org.tickscope.*` uses (libvirt's `<channel>`
/// names its chardevs `charchannelN`), or a `-serial unix:` path that says "tickscope".
fn probe_channel(argv: &[String]) -> Option<String> {
    virtserial_socket(argv, "org.tickscope.", |id, path| {
        id.contains("tickscope") || path.contains("tickscope")
    })
    .or_else(|| {
        flag_values(argv, "-serial")
            .filter_map(|v| v.strip_prefix("unix:"))
            .map(|v| split_options(v).swap_remove(0))
            .find(|path| path.contains("tickscope"))
    })
}

const GUEST_AGENT_PORT: &str = "org.qemu.guest_agent.";

/// The UNIX socket of qemu-guest-agent's port (`org.qemu.guest_agent.0`).
fn guest_agent_socket(argv: &[String]) -> Option<String> {
    virtserial_socket(argv, GUEST_AGENT_PORT, |_, _| false)
}

/// vCPUs from `-smp`: `N`, `cpus=N`, or the product of the topology when only that is given.
fn smp_cpus(value: &str) -> Option<u32> {
    let options = split_options(value);
    let mut topology = 1u32;
    let mut has_topology = false;
    for option in &options {
        if let Ok(n) = option.parse::<u32>() {
            return Some(n);
        }
        match option.split_once('=') {
            Some(("cpus", n)) => return n.parse().ok(),
            Some(("sockets" | "dies" | "clusters" | "cores" | "threads", n)) => {
                topology = topology.checked_mul(n.parse().ok()?)?;
                has_topology = true;
            }
            _ => {}
        }
    }
    has_topology.then_some(topology)
}

fn vcpu_index(thread: &str) -> Option<u32> {
    let (index, accel) = thread.strip_prefix("CPU ")?.split_once('/')?;
    (!accel.is_empty()).then_some(())?;
    index.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::args::argv;

    fn identify(comm: &str, line: &str) -> Option<VmIdentity> {
        let a = argv(line);
        recognise(&ProcessView {
            pid: 99,
            comm,
            argv: &a,
        })
    }

    #[test]
    fn libvirt_command_line_gives_name_uuid_vcpus_and_management() {
        let id = identify(
            "qemu-system-x86",
            "/usr/bin/qemu-system-x86_64 -name guest=web-01,debug-threads=on -S \
             -object secret,id=masterKey0,file=/var/lib/libvirt/qemu/domain-3-web-01/master-key.aes \
             -machine pc-q35-7.2 -m 2048 -smp 4,sockets=4,cores=1,threads=1 \
             -uuid 7D3B2C1A-0000-4000-8000-00000000ABCD -no-user-config",
        )
        .unwrap();
        assert_eq!(id.name, "web-01");
        assert_eq!(
            id.uuid.as_deref(),
            Some("7d3b2c1a-0000-4000-8000-00000000abcd")
        );
        assert_eq!(id.vcpus_hint, Some(4));
        assert_eq!(id.management.as_deref(), Some("libvirt"));
    }

    #[test]
    fn proxmox_command_line_is_recognised_by_its_id() {
        let id = identify(
            "kvm",
            "/usr/bin/kvm -id 104 -name db-02,debug-threads=on -smp 2,sockets=1,cores=2,maxcpus=2 \
             -uuid 0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9",
        )
        .unwrap();
        assert_eq!(id.name, "db-02");
        assert_eq!(id.management.as_deref(), Some("proxmox"));
        assert_eq!(id.vcpus_hint, Some(2));
    }

    #[test]
    fn plain_qemu_with_direct_kernel_boot_reports_its_boot_args() {
        let a: Vec<String> = [
            "qemu-system-x86_64",
            "-accel",
            "tcg",
            "-smp",
            "2",
            "-kernel",
            "vmlinuz",
            "-append",
            "console=ttyS0 nohz=off",
        ]
        .map(String::from)
        .to_vec();
        let id = recognise(&ProcessView {
            pid: 7,
            comm: "qemu-system-x86",
            argv: &a,
        })
        .unwrap();
        assert_eq!(id.name, "qemu-7");
        assert_eq!(id.boot_args.as_deref(), Some("console=ttyS0 nohz=off"));
        assert_eq!(id.management, None);
        assert_eq!(id.uuid, None);
    }

    #[test]
    fn renamed_process_is_still_found_by_argv0() {
        let id = identify("web-01", "qemu-system-aarch64 -name web-01,process=web-01").unwrap();
        assert_eq!(id.name, "web-01");
    }

    #[test]
    fn doubled_commas_are_literal_in_names() {
        let id = identify(
            "qemu-system-x86",
            "qemu-system-x86_64 -name guest=a,,b,debug-threads=on",
        )
        .unwrap();
        assert_eq!(id.name, "a,b");
    }

    #[test]
    fn probe_channels_are_found_in_each_spelling() {
        let cases = [
            (
                "qemu-system-x86_64 -chardev socket,id=tickscope0,path=/run/tickscope/web.sock,server=on,wait=off -device virtio-serial -device virtserialport,chardev=tickscope0,name=org.tickscope.probe.0",
                Some("/run/tickscope/web.sock"),
            ),
            // libvirt's <channel type='unix'> with the tickscope target name.
            (
                "qemu-system-x86_64 -chardev socket,id=charchannel1,fd=33,server=on,wait=off -chardev socket,id=charchannel0,path=/var/lib/libvirt/qemu/channel/target/domain-4-web/org.tickscope.probe.0,server=on,wait=off -device virtserialport,bus=virtio-serial0.0,nr=1,chardev=charchannel0,id=channel0,name=org.tickscope.probe.0",
                Some("/var/lib/libvirt/qemu/channel/target/domain-4-web/org.tickscope.probe.0"),
            ),
            (
                "qemu-system-x86_64 -serial file:/tmp/console.log -serial unix:/tmp/t/tickscope-a.sock,server=on,wait=off",
                Some("/tmp/t/tickscope-a.sock"),
            ),
            // qemu-guest-agent's channel is not the probe's.
            (
                "qemu-system-x86_64 -chardev socket,id=qga0,path=/run/qga.sock,server=on,wait=off -device virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
                None,
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(probe_channel(&argv(line)).as_deref(), expected, "{line}");
        }
    }

    #[test]
    fn the_guest_agent_socket_is_found_by_its_port_name() {
        let proxmox = argv(
            "/usr/bin/kvm -id 100 -chardev socket,path=/var/run/qemu-server/100.qga,server=on,wait=off,id=qga0 -device virtio-serial,id=qga0bus -device virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
        );
        assert_eq!(
            guest_agent_socket(&proxmox).as_deref(),
            Some("/var/run/qemu-server/100.qga")
        );
        assert_eq!(probe_channel(&proxmox), None);
        assert_eq!(guest_agent_socket(&argv("qemu-system-x86_64 -m 256")), None);
    }

    #[test]
    fn modern_libvirt_json_devices_and_socket_fds_are_understood() {
        let a: Vec<String> = [
            "/usr/bin/qemu-system-x86_64",
            "-name",
            "guest=web,debug-threads=on",
            "-chardev",
            "socket,id=charchannel0,fd=33,server=on,wait=off",
            "-device",
            r#"{"driver":"virtserialport","bus":"virtio-serial0.0","nr":1,"chardev":"charchannel0","id":"channel0","name":"org.tickscope.probe.0"}"#,
            "-chardev",
            "socket,id=charchannel1,fd=34,server=on,wait=off",
            "-device",
            r#"{"driver":"virtserialport","bus":"virtio-serial0.0","nr":2,"chardev":"charchannel1","id":"channel1","name":"org.qemu.guest_agent.0"}"#,
        ]
        .map(String::from)
        .to_vec();
        let id = recognise(&ProcessView {
            pid: 1,
            comm: "qemu-system-x86",
            argv: &a,
        })
        .unwrap();
        assert_eq!(id.probe_channel.as_deref(), Some("fd:33"));
        assert_eq!(id.guest_agent_socket.as_deref(), Some("fd:34"));
        assert!(id.guest_agent_port);
    }

    #[test]
    fn smp_forms() {
        for (value, cpus) in [
            ("2", Some(2)),
            ("cpus=8,maxcpus=16", Some(8)),
            ("sockets=2,cores=4,threads=2", Some(16)),
            ("maxcpus=4", None),
            ("sockets=x", None),
        ] {
            assert_eq!(smp_cpus(value), cpus, "-smp {value}");
        }
    }

    #[test]
    fn vcpu_thread_names() {
        for (thread, index) in [
            ("CPU 0/KVM", Some(0)),
            ("CPU 13/TCG", Some(13)),
            ("CPU 1/HVF", Some(1)),
            ("CPU x/KVM", None),
            ("CPU 0/", None),
            ("call_rcu", None),
            ("IO mon_iothread", None),
            ("worker", None),
        ] {
            assert_eq!(vcpu_index(thread), index, "{thread}");
        }
    }
}
