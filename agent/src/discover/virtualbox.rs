//! VirtualBox: `VBoxHeadless` (headless and vboxmanage-started VMs) and `VirtualBoxVM` (GUI).
//! vCPU threads are the emulation threads, `EMT` for a single-CPU VM and `EMT-<n>` otherwise.

use super::args::{flag_value, index_after};
use super::identity::{Family, ProcessView, VmIdentity};
use crate::wire::Hypervisor;
use crate::wire::normalise_uuid;

pub const FAMILY: Family = Family {
    recognise,
    vcpu_index,
};

fn recognise(p: &ProcessView) -> Option<VmIdentity> {
    let is_vbox = |n: &str| n == "VBoxHeadless" || n == "VirtualBoxVM";
    if !(is_vbox(p.comm) || is_vbox(p.program())) {
        return None;
    }
    let startvm = ["--startvm", "-startvm", "-s"]
        .iter()
        .find_map(|flag| flag_value(p.argv, flag));
    let comment = ["--comment", "-comment"]
        .iter()
        .find_map(|flag| flag_value(p.argv, flag));
    // --startvm takes a name or a UUID; the frontends put the VM's name in --comment.
    let name = comment
        .or(startvm)
        .map_or_else(|| format!("virtualbox-{}", p.pid), str::to_string);
    let mut id = VmIdentity::new(Hypervisor::Virtualbox, name);
    id.uuid = startvm.and_then(normalise_uuid);
    Some(id)
}

fn vcpu_index(thread: &str) -> Option<u32> {
    if thread == "EMT" {
        return Some(0);
    }
    index_after(thread, "EMT-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::args::argv;

    #[test]
    fn headless_vm_takes_name_from_comment_and_uuid_from_startvm() {
        let a = argv(
            "/usr/lib/virtualbox/VBoxHeadless --comment slitaz --startvm \
             3f1e2d4c-5b6a-4798-8a9b-0c1d2e3f4a5b --vrde config",
        );
        let id = recognise(&ProcessView {
            pid: 5,
            comm: "VBoxHeadless",
            argv: &a,
        })
        .unwrap();
        assert_eq!(id.name, "slitaz");
        assert_eq!(
            id.uuid.as_deref(),
            Some("3f1e2d4c-5b6a-4798-8a9b-0c1d2e3f4a5b")
        );
    }

    #[test]
    fn gui_vm_started_by_name_has_no_uuid() {
        let a = argv("/usr/lib/virtualbox/VirtualBoxVM --startvm justX");
        let id = recognise(&ProcessView {
            pid: 5,
            comm: "VirtualBoxVM",
            argv: &a,
        })
        .unwrap();
        assert_eq!(id.name, "justX");
        assert_eq!(id.uuid, None);
    }

    #[test]
    fn emulation_threads_are_vcpus() {
        assert_eq!(vcpu_index("EMT"), Some(0));
        assert_eq!(vcpu_index("EMT-3"), Some(3));
        assert_eq!(vcpu_index("EMT-x"), None);
        assert_eq!(vcpu_index("VBoxSVCWatcher"), None);
    }
}
