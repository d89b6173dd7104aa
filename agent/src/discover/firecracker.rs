//! Firecracker microVMs: `firecracker --id <id>`, vCPU threads `fc_vcpu <n>`.

use super::args::{flag_value, index_after};
use super::identity::{Family, ProcessView, VmIdentity};
use crate::wire::Hypervisor;

pub const FAMILY: Family = Family {
    recognise,
    vcpu_index,
};

fn recognise(p: &ProcessView) -> Option<VmIdentity> {
    if p.comm != "firecracker" && p.program() != "firecracker" {
        return None;
    }
    let name =
        flag_value(p.argv, "--id").map_or_else(|| format!("firecracker-{}", p.pid), str::to_string);
    Some(VmIdentity::new(Hypervisor::Firecracker, name))
}

fn vcpu_index(thread: &str) -> Option<u32> {
    index_after(thread, "fc_vcpu ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::args::argv;

    #[test]
    fn id_names_the_microvm() {
        let a = argv("/usr/bin/firecracker --id fn-42 --api-sock /run/fc/fn-42.sock");
        let id = recognise(&ProcessView {
            pid: 8,
            comm: "firecracker",
            argv: &a,
        })
        .unwrap();
        assert_eq!(id.name, "fn-42");
        let a = argv("/usr/bin/firecracker --api-sock /run/fc.sock");
        let id = recognise(&ProcessView {
            pid: 8,
            comm: "firecracker",
            argv: &a,
        })
        .unwrap();
        assert_eq!(id.name, "firecracker-8");
    }

    #[test]
    fn vcpu_threads() {
        assert_eq!(vcpu_index("fc_vcpu 1"), Some(1));
        assert_eq!(vcpu_index("fc_api"), None);
        assert_eq!(vcpu_index("firecracker"), None);
    }
}
