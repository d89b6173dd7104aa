//! A VM process's host CPU time: which counter it is read from, chosen once, and reading it.

use std::collections::HashMap;

use super::tracked::{CpuCounter, VmState};
use crate::cpu::CgroupMounts;
use crate::procfs::ProcFs;

/// The most exact counter the VM's CPU time can be read from: its own cgroup's, else its
/// threads' run times from `schedstat` (its main thread has run, so a run time of 0 is a kernel
/// that does not keep them), else its stat ticks.
pub(super) fn choose_counter(
    proc: &mut ProcFs,
    cgroup_mounts: &CgroupMounts,
    pid: u32,
) -> CpuCounter {
    match proc
        .cgroups(pid)
        .and_then(|text| cgroup_mounts.vm_counter(pid, &text))
    {
        Some(counter) => CpuCounter::Cgroup(counter),
        None if proc
            .open_thread_schedstat(pid, pid)
            .and_then(|f| proc.read_run_ns(&f))
            .is_some_and(|ns| ns > 0) =>
        {
            CpuCounter::Schedstat {
                last_run_ns: HashMap::new(),
                total_ns: None,
            }
        }
        None => CpuCounter::StatTicks,
    }
}

/// The VM process's CPU time so far in nanoseconds, from its counter. Counted from threads, a
/// thread seen for the first time adds all its run time (it started since the last cycle, or
/// this is the first), and one that ended loses its run since it was last read. `read_now`
/// holds the run times this cycle already read (with the vCPU threads' switches); only the
/// other threads' `schedstat` is read here. `stat` is the process's stat ticks and `CLK_TCK`.
pub(super) fn read_cpu_ns(
    proc: &mut ProcFs,
    pid: u32,
    vm: &mut VmState,
    (stat_ticks, clk_tck): (u64, f64),
    read_now: &HashMap<u32, u64>,
) -> Option<u64> {
    match &mut vm.cpu {
        CpuCounter::Cgroup(counter) => counter.read_ns(&mut Vec::new()),
        CpuCounter::StatTicks => Some((stat_ticks as f64 * 1e9 / clk_tck) as u64),
        CpuCounter::Schedstat {
            last_run_ns,
            total_ns,
        } => {
            let mut gone = Vec::new();
            // The first reading starts the total at what the process has used so far by its
            // stat ticks (dead threads included), so that the total means the same after the
            // agent restarts; from then on the threads' run times add to it exactly.
            let first = total_ns.is_none();
            let mut total = total_ns.unwrap_or((stat_ticks as f64 * 1e9 / clk_tck) as u64);
            for (&tid, thread) in vm.threads.iter_mut() {
                let run_ns = match read_now.get(&tid) {
                    Some(&ns) => Some(ns),
                    None => {
                        if thread.run.is_none() {
                            thread.run = proc.open_thread_schedstat(pid, tid);
                        }
                        thread.run.as_ref().and_then(|f| proc.read_run_ns(f))
                    }
                };
                let Some(run_ns) = run_ns else {
                    gone.push(tid);
                    continue;
                };
                // A thread seen before counts from its last reading (kept even while it could
                // not be read, so that it is never counted twice), a new one in full.
                let before = last_run_ns.insert(tid, run_ns).unwrap_or(0);
                if !first {
                    total = total.saturating_add(run_ns.saturating_sub(before));
                }
            }
            *total_ns = Some(total);
            // Readings of threads long gone are dropped once they outnumber the live ones.
            if last_run_ns.len() > 2 * vm.threads.len() + 64 {
                last_run_ns.retain(|tid, _| proc.thread_exists(pid, *tid));
            }
            if !gone.is_empty() {
                // A thread ended: another may have started in its place with the count
                // unchanged, so the threads are listed again next cycle.
                for tid in gone {
                    vm.threads.remove(&tid);
                }
                vm.listed_threads = None;
            }
            Some(total)
        }
    }
}
