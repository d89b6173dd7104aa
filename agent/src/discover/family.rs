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
