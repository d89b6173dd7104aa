//! A VM's sample: what it did between two cycles, from the counters read at each.

use super::tracked::{Counters, Part, VmState};
use crate::wire::{CpuParts, GuestSample, ProcessTotals, WakeupsSource};

/// What the VM did since `previous`, with its running totals `now`, its vCPUs and which threads
/// its wake-ups were counted from; takes the facts not yet reported with it.
pub(super) fn sample(
    pid: u32,
    vm: &mut VmState,
    previous: &Counters,
    now: &Counters,
    (vcpus, wakeups_source): (u32, WakeupsSource),
) -> GuestSample {
    let host_cpu_seconds = now.cpu_ns.saturating_sub(previous.cpu_ns) as f64 / 1e9;
    GuestSample {
        cpu_parts: cpu_parts(vm, previous, now, host_cpu_seconds, wakeups_source),
        // A counter that went back is another VM's (the same pid and descriptor again).
        halt_poll_seconds: now
            .halt_poll_ns
            .zip(previous.halt_poll_ns)
            .and_then(|(now, then)| now.checked_sub(then))
            .map(|ns| ns as f64 / 1e9),
        hypervisor: vm.identity.hypervisor,
        management: vm.identity.management.clone(),
        name: vm.identity.name.clone(),
        uuid: vm.identity.uuid.clone(),
        pid,
        vcpus,
        host_cpu_seconds,
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
        platform: vm.identity.platform.clone(),
        facts: vm.unreported_facts.take(),
        totals: Some(ProcessTotals {
            start_ticks: vm.start_ticks,
            host_cpu_seconds: now.cpu_ns as f64 / 1e9,
            vcpu_wakeups: now.switches.values().sum(),
        }),
    }
}

/// Where the VM's CPU went: each part's threads' run time over the interval, the emulator what
/// is left of the VM's CPU. Only when every vCPU thread's run time was read at both ends: a
/// split missing a vCPU would blame the emulator for it. An I/O or vhost thread that started or
/// ended inside the interval is left out (its time falls to the emulator).
fn cpu_parts(
    vm: &VmState,
    previous: &Counters,
    now: &Counters,
    host_cpu_s: f64,
    source: WakeupsSource,
) -> Option<CpuParts> {
    if source != WakeupsSource::VcpuThreads {
        return None;
    }
    let (mut vcpus_ns, mut iothreads_ns, mut vhost_ns) = (0u64, 0u64, 0u64);
    for (tid, thread) in &vm.threads {
        let ran = now
            .part_run_ns
            .get(tid)
            .zip(previous.part_run_ns.get(tid))
            .map(|(now, then)| now.saturating_sub(*then));
        match (thread.part, ran) {
            (Part::Vcpu, None) => return None,
            (Part::Vcpu, Some(ns)) => vcpus_ns += ns,
            (Part::IoThread, Some(ns)) => iothreads_ns += ns,
            (Part::Vhost, Some(ns)) => vhost_ns += ns,
            _ => {}
        }
    }
    let s = |ns: u64| ns as f64 / 1e9;
    // The run times and the VM's counter are read a moment apart: the parts may exceed it by
    // a little, and the emulator is then none.
    let counted_s = s(vcpus_ns) + s(iothreads_ns) + s(vhost_ns);
    Some(CpuParts {
        vcpus_s: s(vcpus_ns),
        iothreads_s: s(iothreads_ns),
        vhost_s: s(vhost_ns),
        emulator_s: (host_cpu_s - counted_s).max(0.0),
    })
}

/// Wake-ups of the threads counted at both ends of the interval. A thread that started or ended
/// inside the interval is left out rather than guessed at.
fn wakeups_between(previous: &Counters, now: &Counters) -> u64 {
    now.switches
        .iter()
        .filter_map(|(tid, &count)| Some(count.saturating_sub(*previous.switches.get(tid)?)))
        .sum()
}
