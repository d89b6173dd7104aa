//! Recognising VM processes and their vCPU threads, one module per hypervisor family.
//!
//! Each family is a signature: a pure function from a process's name and arguments to a VM
//! identity, and one from a thread name to a vCPU index. Sampling (`crate::sampler`) walks
//! `/proc` and asks each family in turn.

pub mod cloud_hypervisor;
pub mod firecracker;
pub mod qemu;
pub mod virtualbox;
pub mod vmware;

use crate::wire::Hypervisor;

/// What discovery needs to know about a process.
#[derive(Debug, Clone, Copy)]
pub struct ProcessView<'a> {
    pub pid: u32,
    /// `/proc/<pid>/stat` command name (15 bytes at most).
    pub comm: &'a str,
    /// `/proc/<pid>/cmdline`, argv[0] first.
    pub argv: &'a [String],
}

impl ProcessView<'_> {
    /// The file name of argv[0], which survives where `comm` is truncated or renamed.
    pub fn program(&self) -> &str {
        self.argv
            .first()
            .map(|a| a.rsplit('/').next().unwrap_or(a))
            .unwrap_or("")
    }
}

/// Who a VM process is, as far as its command line tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmIdentity {
    pub hypervisor: Hypervisor,
    pub name: String,
    pub uuid: Option<String>,
    pub management: Option<String>,
    /// vCPUs named on the command line, used when the threads do not say.
    pub vcpus_hint: Option<u32>,
    /// Guest kernel command line, when the hypervisor boots the kernel directly.
    pub boot_args: Option<String>,
    /// A configuration file that may hold a better name and the UUID (VMware's `.vmx`).
    pub config_file: Option<String>,
    /// The host end (a UNIX socket) of the guest probe's serial channel, when the VM has one.
    pub probe_channel: Option<String>,
    /// qemu-guest-agent's socket, when the VM has the port.
    pub guest_agent_socket: Option<String>,
    /// Whether the VM has a qemu-guest-agent port at all (libvirt is asked through virsh).
    pub guest_agent_port: bool,
}

impl VmIdentity {
    pub fn new(hypervisor: Hypervisor, name: impl Into<String>) -> Self {
        VmIdentity {
            hypervisor,
            name: name.into(),
            uuid: None,
            management: None,
            vcpus_hint: None,
            boot_args: None,
            config_file: None,
            probe_channel: None,
            guest_agent_socket: None,
            guest_agent_port: false,
        }
    }
}

/// A hypervisor family's signature.
pub struct Family {
    /// Recognises the family's VM processes.
    pub recognise: fn(&ProcessView) -> Option<VmIdentity>,
    /// The vCPU index a thread name stands for, if it is a vCPU thread of this family.
    pub vcpu_index: fn(&str) -> Option<u32>,
}

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

/// The value of `--flag value` or `--flag=value` (also single-dash `-flag value`).
pub(crate) fn flag_value<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    let mut args = argv.iter().skip(1);
    while let Some(arg) = args.next() {
        if arg == flag {
            return args.next().map(String::as_str);
        }
        if let Some(value) = arg.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            return Some(value);
        }
    }
    None
}

/// Every value of a flag that may repeat (`-chardev a -chardev b`).
pub(crate) fn flag_values<'a>(argv: &'a [String], flag: &'a str) -> impl Iterator<Item = &'a str> {
    argv.windows(2)
        .filter(move |pair| pair[0] == flag)
        .map(|pair| pair[1].as_str())
}

/// Parses a trailing number from a thread name after a fixed prefix: `prefix` + digits.
pub(crate) fn index_after(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// The file name of a path without its extension, for names taken from sockets and configs.
pub(crate) fn file_stem(path: &str) -> Option<&str> {
    let file = path.rsplit('/').next()?;
    let stem = file.rsplit_once('.').map_or(file, |(stem, _)| stem);
    (!stem.is_empty()).then_some(stem)
}

#[cfg(test)]
pub(crate) fn argv(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_in_both_spellings_are_found() {
        let a = argv("fc --id vm1 --api-sock=/run/fc.sock");
        assert_eq!(flag_value(&a, "--id"), Some("vm1"));
        assert_eq!(flag_value(&a, "--api-sock"), Some("/run/fc.sock"));
        assert_eq!(flag_value(&a, "--missing"), None);
        // A flag at the very end has no value.
        assert_eq!(flag_value(&argv("fc --id"), "--id"), None);
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
