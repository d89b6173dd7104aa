//! A VM's threads: which of them are its vCPUs, and how often they were switched to.

use std::collections::HashMap;

use super::tracked::{Part, Thread, VmState};
use crate::procfs::ProcFs;
use crate::wire::{MAX_VCPUS, WakeupsSource};

/// What one cycle read of a VM's threads.
pub(super) struct Counted {
    pub vcpus: u32,
    pub source: WakeupsSource,
    pub switches: HashMap<u32, u64>,
    /// Run times read with the switches (from the same `schedstat`), and of the I/O and vhost
    /// threads, so that the CPU count does not read those threads' files a second time.
    pub run_ns: HashMap<u32, u64>,
}

/// Reads the context switches of the VM's vCPU threads, or of all its threads when none has a
/// recognisable vCPU name. The threads are listed (and new ones named) only when their number
/// changed or a counter stopped reading.
pub(super) fn count_threads(
    proc: &mut ProcFs,
    pid: u32,
    vm: &mut VmState,
    num_threads: u64,
) -> Counted {
    if vm.threads.is_empty() || vm.listed_threads != Some(num_threads) {
        list_threads(proc, pid, vm, num_threads);
    }
    let vcpu_threads =
        (vm.threads.values().filter(|t| t.part == Part::Vcpu).count() as u32).min(MAX_VCPUS);
    let (source, vcpus) = if vcpu_threads > 0 {
        (WakeupsSource::VcpuThreads, vcpu_threads)
    } else {
        (
            WakeupsSource::WholeProcess,
            vm.identity.vcpus_hint.unwrap_or(1).max(1),
        )
    };
    let mut switches = HashMap::new();
    let mut run_ns = HashMap::new();
    let mut gone = Vec::new();
    for (&tid, thread) in vm.threads.iter_mut() {
        if vcpu_threads > 0 && matches!(thread.part, Part::IoThread | Part::Vhost) {
            // Only its run time, for the VM's split of its CPU.
            if thread.run.is_none() {
                thread.run = proc.open_thread_schedstat(pid, tid);
            }
            match thread.run.as_ref().and_then(|f| proc.read_run_ns(f)) {
                Some(ns) => {
                    run_ns.insert(tid, ns);
                }
                None => gone.push(tid),
            }
            continue;
        }
        if !(thread.part == Part::Vcpu || vcpu_threads == 0) {
            continue;
        }
        if thread.switches.is_none() {
            thread.switches = proc.open_thread_switches(pid, tid);
        }
        match &thread.switches {
            Some((file, kind)) => match proc.read_thread_counters(file, *kind) {
                Some(counters) => {
                    switches.insert(tid, counters.switches);
                    if let Some(ns) = counters.run_ns {
                        run_ns.insert(tid, ns);
                    }
                }
                None => gone.push(tid),
            },
            None => gone.push(tid),
        }
    }
    if !gone.is_empty() {
        for tid in gone {
            vm.threads.remove(&tid);
        }
        vm.listed_threads = None; // list again next cycle
    }
    Counted {
        vcpus,
        source,
        switches,
        run_ns,
    }
}

/// Lists the VM's threads again: forgets those that ended, and names the new ones to tell its
/// vCPUs (and, by QEMU's names, whether they run on KVM).
fn list_threads(proc: &mut ProcFs, pid: u32, vm: &mut VmState, num_threads: u64) {
    let tids = proc.tids(pid).unwrap_or_default();
    vm.threads.retain(|tid, _| tids.contains(tid));
    for &tid in &tids {
        if !vm.threads.contains_key(&tid) {
            let name = proc.thread_name(pid, tid);
            let is_vcpu = name
                .as_deref()
                .is_some_and(|name| (vm.family.vcpu_index)(name).is_some());
            if is_vcpu && let Some(name) = &name {
                vm.kvm_by_thread_names = kvm_by_thread_name(name).or(vm.kvm_by_thread_names);
            }
            vm.threads.insert(
                tid,
                Thread {
                    part: Part::of(name.as_deref().unwrap_or(""), is_vcpu),
                    run: None,
                    switches: None,
                },
            );
        }
    }
    vm.listed_threads = Some(num_threads);
}

/// The accelerator a QEMU vCPU thread's name gives (`CPU 0/KVM`, `CPU 1/TCG`): whether it is KVM.
fn kvm_by_thread_name(name: &str) -> Option<bool> {
    match name.rsplit_once('/')?.1 {
        "KVM" => Some(true),
        "TCG" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_thread_names_tell_kvm_from_tcg_and_other_names_tell_nothing() {
        assert_eq!(kvm_by_thread_name("CPU 0/KVM"), Some(true));
        assert_eq!(kvm_by_thread_name("CPU 12/TCG"), Some(false));
        assert_eq!(kvm_by_thread_name("CPU 0/HVF"), None);
        assert_eq!(kvm_by_thread_name("fc_vcpu 0"), None);
    }
}
