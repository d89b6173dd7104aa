//! A process seen for the first time: whether it is a VM, and if so everything read of it once
//! (its name made safe to send, its channels, where its CPU time is counted), so that every later
//! cycle only reads its counters.

use std::collections::HashMap;
use std::path::PathBuf;

use super::cpu_time::choose_counter;
use super::tracked::{Tracked, VmState};
use super::unseen::denied_sockets;
use crate::channel::Channel;
use crate::cpu::CgroupMounts;
use crate::discover::{self, ProcessView, VmIdentity};
use crate::guest_agent::schedule::{GuestAgent, Via};
use crate::procfs::{OpenFile, ProcFs, ProcStat};
use crate::wire::{
    Hypervisor, MAX_BOOT_ARGS_CHARS, MAX_LABEL_CHARS, MAX_NAME_CHARS, MAX_VCPUS, clean_text,
};

/// Cycles during which a new process that is not a VM is looked at again: launchers (libvirt,
/// Proxmox) fork, prepare, then exec QEMU under the same pid, which changes its name.
const NEW_PROCESS_RECHECKS: u8 = 3;

/// The host's settings a new VM is identified with.
pub(super) struct Identifier {
    /// Where probe channel sockets are found by convention (`<uuid>.sock` or `<name>.sock`),
    /// for VMs whose command line does not name one.
    pub channel_dir: Option<PathBuf>,
    /// The libvirt connection guest agents of libvirt domains are asked through.
    pub libvirt_uri: String,
    /// Where the cgroup hierarchies that count CPU are mounted, if anywhere.
    pub cgroup_mounts: CgroupMounts,
}

impl Identifier {
    /// What the process `pid` is, first seen in cycle `cycle` with `stat` read from `file`, its
    /// open `/proc/<pid>/stat` (kept if it is a VM).
    pub fn identify(
        &self,
        proc: &mut ProcFs,
        pid: u32,
        stat: &ProcStat,
        file: OpenFile,
        cycle: u64,
    ) -> Tracked {
        let comm = stat.comm.as_str();
        let argv = proc.cmdline(pid);
        let view = ProcessView {
            pid,
            comm,
            argv: &argv,
        };
        let Some((family, mut identity)) = discover::recognise(&view) else {
            return Tracked::Other {
                comm: comm.to_string(),
                rechecks_left: NEW_PROCESS_RECHECKS,
            };
        };
        if let Some(text) = identity
            .config_file
            .clone()
            .and_then(|config| proc.read_config_file(pid, &config))
        {
            match identity.hypervisor {
                Hypervisor::Vmware => discover::vmware::apply_vmx(&mut identity, &text),
                _ => discover::qemu_config::apply_proxmox_conf(&mut identity.vm_config, &text),
            }
        }
        // Names and command lines are set by whoever started the VM: make them safe to send
        // once, here, rather than on every report. A blank name or an absurd vCPU count would
        // get the whole host's reports refused.
        identity.name = clean_text(&identity.name, MAX_NAME_CHARS);
        if identity.name.trim().is_empty() {
            identity.name = format!("{}-{pid}", identity.hypervisor.as_str());
        }
        identity.vcpus_hint = identity.vcpus_hint.map(|n| n.clamp(1, MAX_VCPUS));
        // libvirt passes listening sockets as descriptors: find their paths.
        let resolve = |socket: Option<String>| {
            let socket = socket?;
            match socket.strip_prefix("fd:") {
                Some(fd) => proc.socket_path_of_fd(pid, fd.parse().ok()?),
                None => Some(socket),
            }
        };
        identity.probe_channel =
            resolve(identity.probe_channel.take()).or_else(|| self.conventional_channel(&identity));
        identity.guest_agent_socket = resolve(identity.guest_agent_socket.take());
        identity.boot_args = identity
            .boot_args
            .map(|args| clean_text(&args, MAX_BOOT_ARGS_CHARS));
        identity.management = identity.management.map(|m| clean_text(&m, MAX_LABEL_CHARS));
        let fds = proc.vm_fds(pid);
        if identity.management.as_deref() == Some("libvirt")
            && let Some(platform) = proc
                .cgroups(pid)
                .and_then(|cgroups| super::platform::kubevirt(&cgroups, &identity.name))
        {
            identity.management = Some("kubevirt".into());
            identity.platform = Some(platform);
        }
        Tracked::Vm(Box::new(VmState {
            start_ticks: stat.start_ticks,
            cpu: choose_counter(proc, &self.cgroup_mounts, pid),
            family,
            stat: file,
            listed_threads: None,
            threads: HashMap::new(),
            previous: None,
            channel: identity.probe_channel.clone().map(Channel::new),
            // Asked in this very cycle: its answer goes out with the VM's first sample (what
            // `once` prints), and a slow agent is asked again soon.
            guest_agent: Via::for_vm(&identity, &self.libvirt_uri)
                .map(|via| GuestAgent::new(via, cycle)),
            unreported_facts: None,
            uses_kvm: fds.map(|fds| fds.kvm_vm_fd.is_some()),
            kvm_vm_fd: fds.and_then(|fds| fds.kvm_vm_fd),
            holds_vhost: fds.is_some_and(|fds| fds.vhost),
            halt_poll_unreadable: false,
            libvirt_metadata: Default::default(),
            kvm_by_thread_names: None,
            channels_denied: denied_sockets(&identity),
            identity,
        }))
    }

    fn conventional_channel(&self, identity: &VmIdentity) -> Option<String> {
        let dir = self.channel_dir.as_ref()?;
        let by_name = identity.name.replace('/', "_");
        identity
            .uuid
            .iter()
            .chain(std::iter::once(&by_name))
            .map(|stem| dir.join(format!("{stem}.sock")))
            .find(|path| path.exists())
            .map(|path| path.to_string_lossy().into_owned())
    }
}
