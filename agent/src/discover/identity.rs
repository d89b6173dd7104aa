//! What discovery reads of a process, what it makes of it, and the shape of a family's signature.

use crate::wire::{Hypervisor, Platform, VmConfig};

/// What discovery needs to know about a process.
#[derive(Debug, Clone, Copy)]
pub struct ProcessView<'a> {
    pub pid: u32,
    /// `/proc/<pid>/stat` command name (15 bytes at most).
    pub comm: &'a str,
    /// `/proc/<pid>/cmdline`, `argv[0]` first.
    pub argv: &'a [String],
}

impl ProcessView<'_> {
    /// The file name of `argv[0]`, which survives where `comm` is truncated or renamed.
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
    /// A configuration file that may hold a better name and the UUID (VMware's `.vmx`), or the
    /// guest's OS (Proxmox's `<vmid>.conf`).
    pub config_file: Option<String>,
    /// What the command line and the configuration file say of the VM's setup.
    pub vm_config: VmConfig,
    /// Who the VM is on the platform that runs it, where that tells.
    pub platform: Option<Platform>,
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
            vm_config: VmConfig::default(),
            platform: None,
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
