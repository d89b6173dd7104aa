//! cloud-hypervisor: `comm` is truncated to `cloud-hyperviso`; vCPU threads are `vcpu<n>`.
//! The VM is named after its API socket, the one per-VM path on its command line.

use super::args::{file_stem, flag_value, index_after};
use super::identity::{Family, ProcessView, VmIdentity};
use crate::wire::Hypervisor;

pub const FAMILY: Family = Family {
    recognise,
    vcpu_index,
};

fn recognise(p: &ProcessView) -> Option<VmIdentity> {
    if p.comm != "cloud-hyperviso" && p.program() != "cloud-hypervisor" {
        return None;
    }
    // `--api-socket /run/x.sock` or `--api-socket path=/run/x.sock[,fd=..]`.
    let socket = flag_value(p.argv, "--api-socket").map(|v| {
        v.split(',')
            .find_map(|o| o.strip_prefix("path="))
            .unwrap_or(v)
    });
    let name = socket
        .and_then(file_stem)
        .map_or_else(|| format!("cloud-hypervisor-{}", p.pid), str::to_string);
    let mut id = VmIdentity::new(Hypervisor::CloudHypervisor, name);
    id.vcpus_hint = flag_value(p.argv, "--cpus").and_then(|v| {
        v.split(',')
            .find_map(|o| o.strip_prefix("boot="))
            .and_then(|n| n.parse().ok())
    });
    id.boot_args = flag_value(p.argv, "--cmdline").map(str::to_string);
    // `--serial socket=/run/tickscope/x.sock`: a serial port on a UNIX socket, the probe's channel.
    id.probe_channel = ["--serial", "--console"]
        .iter()
        .filter_map(|flag| flag_value(p.argv, flag)?.strip_prefix("socket="))
        .find(|path| path.contains("tickscope"))
        .map(str::to_string);
    Some(id)
}

fn vcpu_index(thread: &str) -> Option<u32> {
    index_after(thread, "vcpu")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_socket_names_the_vm_and_cpus_boot_counts_vcpus() {
        let a: Vec<String> = [
            "cloud-hypervisor",
            "--api-socket",
            "path=/run/ch/edge-7.sock",
            "--cpus",
            "boot=2,max=4",
            "--kernel",
            "/var/lib/ch/vmlinux",
            "--cmdline",
            "console=hvc0 root=/dev/vda1",
            "--serial",
            "socket=/run/tickscope/edge-7.sock",
        ]
        .map(String::from)
        .to_vec();
        let id = recognise(&ProcessView {
            pid: 9,
            comm: "cloud-hyperviso",
            argv: &a,
        })
        .unwrap();
        assert_eq!(id.name, "edge-7");
        assert_eq!(id.vcpus_hint, Some(2));
        assert_eq!(id.boot_args.as_deref(), Some("console=hvc0 root=/dev/vda1"));
        assert_eq!(
            id.probe_channel.as_deref(),
            Some("/run/tickscope/edge-7.sock")
        );
    }

    #[test]
    fn vcpu_threads() {
        assert_eq!(vcpu_index("vcpu0"), Some(0));
        assert_eq!(vcpu_index("vcpu12"), Some(12));
        assert_eq!(vcpu_index("vmm"), None);
        assert_eq!(vcpu_index("http-server"), None);
    }
}
