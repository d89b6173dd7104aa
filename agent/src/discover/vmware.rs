//! VMware Workstation / Player: one `vmware-vmx` process per VM, named by its `.vmx` file, with
//! vCPU threads `vmx-vcpu-<n>`. The `.vmx` file, when readable, gives the display name, the
//! BIOS UUID and the vCPU count.

use super::args::{file_stem, index_after};
use super::identity::{Family, ProcessView, VmIdentity};
use crate::wire::Hypervisor;
use crate::wire::normalise_uuid;

pub const FAMILY: Family = Family {
    recognise,
    vcpu_index,
};

fn recognise(p: &ProcessView) -> Option<VmIdentity> {
    if p.comm != "vmware-vmx" && p.program() != "vmware-vmx" {
        return None;
    }
    let vmx = p.argv.iter().skip(1).rev().find(|a| a.ends_with(".vmx"));
    let name = vmx
        .and_then(|path| file_stem(path))
        .map_or_else(|| format!("vmware-{}", p.pid), str::to_string);
    let mut id = VmIdentity::new(Hypervisor::Vmware, name);
    id.config_file = vmx.cloned();
    Some(id)
}

fn vcpu_index(thread: &str) -> Option<u32> {
    index_after(thread, "vmx-vcpu-")
}

/// Improves an identity from the VM's `.vmx` file (`key = "value"` lines). A serial port set to
/// a named pipe (a UNIX socket on Linux hosts) whose path says "tickscope" is the probe channel.
/// `guestOS` is the OS the VM was created for (`windows9-64`, `debian12-64`); a VM has an HPET
/// only with `hpet0.present = "TRUE"`.
pub fn apply_vmx(id: &mut VmIdentity, vmx: &str) {
    let mut pipes = Vec::new();
    id.vm_config.hpet = Some(false);
    for line in vmx.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"');
        match key.trim().to_ascii_lowercase().as_str() {
            "displayname" if !value.is_empty() => id.name = value.to_string(),
            "uuid.bios" => id.uuid = bios_uuid(value),
            "numvcpus" => id.vcpus_hint = value.parse().ok(),
            "guestos" if !value.is_empty() => id.vm_config.os_hint = Some(value.to_string()),
            "hpet0.present" => id.vm_config.hpet = Some(value.eq_ignore_ascii_case("true")),
            key if key.starts_with("serial") && key.ends_with(".filename") => {
                pipes.push(value.to_string());
            }
            _ => {}
        }
    }
    id.probe_channel = pipes.into_iter().find(|path| path.contains("tickscope"));
    id.vm_config = std::mem::take(&mut id.vm_config).cleaned();
}

/// `uuid.bios = "56 4d 9a 3b 12 34 56 78-9a bc de f0 12 34 56 78"`: sixteen hex bytes, written
/// here in the usual 8-4-4-4-12 form in the order VMware lists them.
fn bios_uuid(value: &str) -> Option<String> {
    let hex: String = value.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    if hex.len() != 32 {
        return None;
    }
    normalise_uuid(&format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmx_path_with_spaces_names_the_vm() {
        let a: Vec<String> = [
            "/usr/lib/vmware/bin/vmware-vmx",
            "-s",
            "vmx.stdio.keep=TRUE",
            "-#",
            "product=1;name=VMware Workstation;version=17.5.0",
            "-@",
            "duplex=3;msgs=ui",
            "/home/ana/vmware/Fedora Core 6/Fedora Core 6.vmx",
        ]
        .map(String::from)
        .to_vec();
        let id = recognise(&ProcessView {
            pid: 3,
            comm: "vmware-vmx",
            argv: &a,
        })
        .unwrap();
        assert_eq!(id.name, "Fedora Core 6");
        assert_eq!(
            id.config_file.as_deref(),
            Some("/home/ana/vmware/Fedora Core 6/Fedora Core 6.vmx")
        );
    }

    #[test]
    fn vmx_file_supplies_display_name_uuid_and_vcpus() {
        let mut id = VmIdentity::new(Hypervisor::Vmware, "fc6");
        apply_vmx(
            &mut id,
            ".encoding = \"UTF-8\"\ndisplayName = \"FC6 HZ=1000\"\nnumvcpus = \"2\"\n\
             serial1.fileType = \"pipe\"\nserial1.fileName = \"/run/tickscope/fc6.sock\"\n\
             uuid.bios = \"56 4d 9a 3b 12 34 56 78-9a bc de f0 12 34 56 78\"\n",
        );
        assert_eq!(id.name, "FC6 HZ=1000");
        assert_eq!(id.vcpus_hint, Some(2));
        assert_eq!(id.probe_channel.as_deref(), Some("/run/tickscope/fc6.sock"));
        assert_eq!(id.vm_config.hpet, Some(false), "no hpet0.present: none");
        assert_eq!(id.vm_config.os_hint, None);
        apply_vmx(
            &mut id,
            "guestOS = \"windows9srv-64\"\nhpet0.present = \"TRUE\"\n",
        );
        assert_eq!(id.vm_config.hpet, Some(true));
        assert_eq!(id.vm_config.os_hint.as_deref(), Some("windows9srv-64"));
        assert_eq!(
            id.uuid.as_deref(),
            Some("564d9a3b-1234-5678-9abc-def012345678")
        );
    }

    #[test]
    fn vcpu_threads() {
        assert_eq!(vcpu_index("vmx-vcpu-0"), Some(0));
        assert_eq!(vcpu_index("vmx-vthread-1"), None);
        assert_eq!(vcpu_index("vmx-mks"), None);
    }
}
