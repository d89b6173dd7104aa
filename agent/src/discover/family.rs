//! Every family the agent knows, and which one a process belongs to.

use super::identity::{Family, ProcessView, VmIdentity};
use super::{cloud_hypervisor, firecracker, qemu, virtualbox, vmware};

/// Every family the agent knows, asked in this order.
pub const FAMILIES: &[Family] = &[
    qemu::FAMILY,
    virtualbox::FAMILY,
    vmware::FAMILY,
    firecracker::FAMILY,
    cloud_hypervisor::FAMILY,
];

/// Finds the family a process belongs to, with its identity.
pub fn recognise(process: &ProcessView) -> Option<(&'static Family, VmIdentity)> {
    FAMILIES
        .iter()
        .find_map(|family| (family.recognise)(process).map(|id| (family, id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::args::argv;
    use crate::wire::Hypervisor;

    /// A VM process of the family, as `/proc` shows it (`comm`, command line). A `match`, not a
    /// table, so that a family added to the wire crate's list does not compile here until it has
    /// a process to be recognised by.
    fn a_vm_of(family: Hypervisor) -> Option<(&'static str, &'static str)> {
        match family {
            Hypervisor::Qemu => Some((
                "qemu-system-x86",
                "/usr/bin/qemu-system-x86_64 -name guest=web1 -m 512",
            )),
            Hypervisor::Virtualbox => Some((
                "VBoxHeadless",
                "/usr/lib/virtualbox/VBoxHeadless --comment web1 --startvm web1",
            )),
            Hypervisor::Vmware => Some((
                "vmware-vmx",
                "/usr/lib/vmware/bin/vmware-vmx -s a=b /vms/web1/web1.vmx",
            )),
            Hypervisor::Firecracker => Some(("firecracker", "firecracker --id web1")),
            Hypervisor::CloudHypervisor => Some((
                "cloud-hyperviso",
                "cloud-hypervisor --api-socket /run/web1.sock",
            )),
            // What a newer agent sends: no process on this host is of it.
            Hypervisor::Other => None,
        }
    }

    #[test]
    fn every_family_but_other_has_its_own_recogniser() {
        let mut recognisers = Vec::new();
        for family in Hypervisor::ALL {
            let Some((comm, line)) = a_vm_of(family) else {
                assert_eq!(family, Hypervisor::Other);
                continue;
            };
            let a = argv(line);
            let p = ProcessView {
                pid: 1,
                comm,
                argv: &a,
            };
            let (recogniser, id) =
                recognise(&p).unwrap_or_else(|| panic!("no recogniser takes a {family:?} VM"));
            assert_eq!(id.hypervisor, family, "{line}");
            assert_eq!(id.name, "web1", "{family:?}");
            recognisers.push(recogniser as *const Family);
        }
        recognisers.sort_unstable();
        recognisers.dedup();
        assert_eq!(
            recognisers.len(),
            FAMILIES.len(),
            "each recogniser takes one family's VMs"
        );
    }

    #[test]
    fn unrelated_processes_are_not_vms() {
        for (comm, line) in [
            ("bash", "/bin/bash -l"),
            ("sshd", "sshd: root@pts/0"),
            ("qemu-img", "qemu-img convert a b"),
            ("qemu-nbd", "qemu-nbd -c /dev/nbd0 x.qcow2"),
            ("kworker/0:1", ""),
        ] {
            let a = argv(line);
            let p = ProcessView {
                pid: 1,
                comm,
                argv: &a,
            };
            assert!(recognise(&p).is_none(), "{comm} taken for a VM");
        }
    }
}
