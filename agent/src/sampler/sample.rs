//! A VM's sample: what it did between two cycles, from the counters read at each.

use super::tracked::{Counters, VmState};
use crate::wire::{GuestSample, ProcessTotals, WakeupsSource};

/// What the VM did since `previous`, with its running totals `now`, its vCPUs and which threads
/// its wake-ups were counted from; takes the facts not yet reported with it.
pub(super) fn sample(
    pid: u32,
    vm: &mut VmState,
    previous: &Counters,
    now: &Counters,
    (vcpus, wakeups_source): (u32, WakeupsSource),
) -> GuestSample {
    GuestSample {
        hypervisor: vm.identity.hypervisor,
        management: vm.identity.management.clone(),
        name: vm.identity.name.clone(),
        uuid: vm.identity.uuid.clone(),
        pid,
        vcpus,
        host_cpu_seconds: now.cpu_ns.saturating_sub(previous.cpu_ns) as f64 / 1e9,
        cpu_source: Some(vm.cpu.source()),
        vcpu_wakeups: wakeups_between(previous, now),
        wakeups_source,
        boot_args: vm.identity.boot_args.clone(),
        // Either source saying KVM is right: the descriptor scan can run before QEMU created
        // its VM, and names say nothing without debug-threads.
        uses_kvm: if vm.uses_kvm == Some(true) || vm.kvm_by_thread_names == Some(true) {
            Some(true)
        } else {
            vm.uses_kvm.or(vm.kvm_by_thread_names)
        },
        vm_config: (!vm.identity.vm_config.is_empty()).then(|| vm.identity.vm_config.clone()),
        facts: vm.unreported_facts.take(),
        totals: Some(ProcessTotals {
            start_ticks: vm.start_ticks,
            host_cpu_seconds: now.cpu_ns as f64 / 1e9,
            vcpu_wakeups: now.switches.values().sum(),
        }),
    }
}

/// Wake-ups of the threads counted at both ends of the interval. A thread that started or ended
/// inside the interval is left out rather than guessed at.
fn wakeups_between(previous: &Counters, now: &Counters) -> u64 {
    now.switches
        .iter()
        .filter_map(|(tid, &count)| Some(count.saturating_sub(*previous.switches.get(tid)?)))
        .sum()
}
