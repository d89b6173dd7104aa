//! What the sampler remembers of each process between cycles: enough to skip a process that is
//! not a VM, and a VM's open counter files and last readings.

use std::collections::HashMap;

use crate::channel::Channel;
use crate::cpu::CgroupCpu;
use crate::discover::{Family, VmIdentity};
use crate::guest_agent::schedule::GuestAgent;
use crate::procfs::{OpenFile, SwitchesFile};
use crate::wire::{CpuSource, DeliveredFacts};

pub(super) enum Tracked {
    /// Not a VM. Its name is read again for a few cycles, then it costs nothing until the next
    /// full rescan.
    Other {
        comm: String,
        rechecks_left: u8,
    },
    Vm(Box<VmState>),
}

impl Tracked {
    pub fn vm(&self) -> Option<&VmState> {
        match self {
            Tracked::Vm(vm) => Some(vm),
            Tracked::Other { .. } => None,
        }
    }

    pub fn vm_mut(&mut self) -> Option<&mut VmState> {
        match self {
            Tracked::Vm(vm) => Some(vm),
            Tracked::Other { .. } => None,
        }
    }
}

pub(super) struct VmState {
    /// Process start time, in clock ticks after boot: with the pid, the process's identity.
    pub start_ticks: u64,
    pub family: &'static Family,
    pub identity: VmIdentity,
    /// `/proc/<pid>/stat`, open for as long as this process lives.
    pub stat: OpenFile,
    /// Thread count when the threads were last listed; a change means listing them again.
    pub listed_threads: Option<u64>,
    pub threads: HashMap<u32, Thread>,
    /// Counters at the previous cycle.
    pub previous: Option<Counters>,
    /// The guest probe's channel, when the VM has one.
    pub channel: Option<Channel>,
    /// The VM's own guest agent, when it may have one.
    pub guest_agent: Option<GuestAgent>,
    /// Facts received and not yet reported.
    pub unreported_facts: Option<DeliveredFacts>,
    /// Where its CPU time is read.
    pub cpu: CpuCounter,
    /// Whether the process holds a KVM VM; looked at again on full rescans until it does (QEMU
    /// creates its VM just after it starts). `None`: its descriptors could not be read.
    pub uses_kvm: Option<bool>,
    /// The descriptor of its KVM VM, which names its statistics in KVM's debugfs.
    pub kvm_vm_fd: Option<u32>,
    /// Whether it holds a vhost device (`/dev/vhost-net`, ...), whose workers are its threads
    /// from Linux 6.4 and kernel threads outside it before.
    pub holds_vhost: bool,
    /// Whether KVM's halt-polling counters of its VM could be read at the last cycle.
    pub halt_poll_unreadable: bool,
    /// Whether its libvirt definition was read for who it is.
    pub libvirt_metadata: Metadata,
    /// Its probe or guest agent sockets this agent may not connect to; looked at on full rescans.
    pub channels_denied: Vec<String>,
    /// What QEMU's vCPU thread names say ran them (`CPU 0/KVM`: true, `CPU 0/TCG`: false), for
    /// when the process's descriptors cannot be read.
    pub kvm_by_thread_names: Option<bool>,
}

/// Whether a domain's definition was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Metadata {
    #[default]
    NotRead,
    Read,
    /// libvirt did not answer: read again on the next full rescan.
    Failed,
}

/// A VM process's CPU counter, chosen when it is first seen.
pub(super) enum CpuCounter {
    Cgroup(CgroupCpu),
    /// Its threads' run times: the last reading of each, and the running total so far (none
    /// before the first reading).
    Schedstat {
        last_run_ns: HashMap<u32, u64>,
        total_ns: Option<u64>,
    },
    StatTicks,
}

impl CpuCounter {
    pub fn source(&self) -> CpuSource {
        match self {
            CpuCounter::Cgroup(_) => CpuSource::Cgroup,
            CpuCounter::Schedstat { .. } => CpuSource::Schedstat,
            CpuCounter::StatTicks => CpuSource::StatTicks,
        }
    }
}

/// Which part of a VM a thread's CPU time counts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Vcpu,
    /// A QEMU I/O thread (`IO <id>`).
    IoThread,
    /// A vhost worker living as a thread of the VM process (`vhost-<pid>`).
    Vhost,
    /// Anything else: the emulator's main loop and helpers, counted as what is left.
    Emulator,
}

impl Part {
    /// The part a thread of this name belongs to, given whether its family calls it a vCPU.
    pub fn of(name: &str, is_vcpu: bool) -> Part {
        if is_vcpu {
            Part::Vcpu
        } else if name.starts_with("IO ") {
            Part::IoThread
        } else if name
            .strip_prefix("vhost-")
            .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        {
            Part::Vhost
        } else {
            Part::Emulator
        }
    }
}

pub(super) struct Thread {
    pub part: Part,
    /// Its `schedstat`, open for its run time when the VM's CPU is counted from its threads.
    pub run: Option<OpenFile>,
    /// Where its context switches are read, opened when it is first counted.
    pub switches: Option<(OpenFile, SwitchesFile)>,
}

pub(super) struct Counters {
    /// CPU time the process used so far, in nanoseconds, from its `CpuCounter`.
    pub cpu_ns: u64,
    /// Context switches so far of each counted thread.
    pub switches: HashMap<u32, u64>,
    /// Run time so far, in nanoseconds, of each thread that is not the emulator's, where
    /// `schedstat` gives it.
    pub part_run_ns: HashMap<u32, u64>,
    /// Time KVM has spent halt-polling its vCPUs so far, in nanoseconds, where debugfs gives it.
    pub halt_poll_ns: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_told_apart_by_their_names() {
        let cases = [
            ("CPU 0/KVM", true, Part::Vcpu),
            ("IO iothread0", false, Part::IoThread),
            ("IO mon_iothread", false, Part::IoThread),
            ("vhost-4242", false, Part::Vhost),
            ("vhost-", false, Part::Emulator),
            ("vhost-net", false, Part::Emulator),
            ("qemu-system-x86", false, Part::Emulator),
            ("worker", false, Part::Emulator),
            ("call_rcu", false, Part::Emulator),
            ("IOthread", false, Part::Emulator),
        ];
        for (name, is_vcpu, part) in cases {
            assert_eq!(Part::of(name, is_vcpu), part, "{name}");
        }
    }
}
