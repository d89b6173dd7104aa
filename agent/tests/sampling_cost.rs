//! What one sampling cycle costs the kernel, counted in `/proc` files read: the figure that makes
//! the agent's CPU per cycle (and, on a busy host, how often it is preempted) grow with the VMs.

use std::fs;
use std::path::Path;

use tickscope_agent::sampler::Sampler;

const CLK_TCK: u64 = 100;

/// A QEMU process with a main thread and two vCPU threads, each thread's `schedstat` holding
/// `(run ns, switches)`.
fn write_qemu(root: &Path, pid: u32, threads: [(u64, u64); 3]) {
    let dir = root.join(pid.to_string());
    let names = ["qemu-system-x86", "CPU 0/KVM", "CPU 1/KVM"];
    for (i, (name, (run_ns, switches))) in names.iter().zip(threads).enumerate() {
        let task = dir.join(format!("task/{}", pid + i as u32));
        fs::create_dir_all(&task).unwrap();
        fs::write(task.join("comm"), format!("{name}\n")).unwrap();
        // Rewritten in place, as the kernel does: the sampler keeps the files open.
        fs::write(
            task.join("schedstat"),
            format!("{run_ns} 1000 {switches}\n"),
        )
        .unwrap();
    }
    fs::write(
        dir.join("stat"),
        format!(
            "{pid} (qemu-system-x86) S 1 {pid} 1 0 -1 4194560 100 0 0 0 50 50 0 0 20 0 3 0 777 100000 100"
        ),
    )
    .unwrap();
    fs::write(
        dir.join("cmdline"),
        [
            "qemu-system-x86_64",
            "-name",
            "guest=cost,debug-threads=on",
            "-smp",
            "2",
            "",
        ]
        .join("\0"),
    )
    .unwrap();
}

#[test]
fn a_vm_costs_one_stat_and_one_schedstat_per_thread_each_cycle_and_its_cpu_is_exact() {
    let proc = tempfile::tempdir().unwrap();
    let pid = 4000;
    write_qemu(
        proc.path(),
        pid,
        [(1_000_000, 10), (2_000_000, 20), (3_000_000, 30)],
    );
    let mut sampler = Sampler::new(proc.path(), CLK_TCK);
    assert!(sampler.cycle().unwrap().is_none());
    write_qemu(
        proc.path(),
        pid,
        [(1_500_000, 11), (4_000_000, 30), (3_250_000, 45)],
    );
    sampler.cycle().unwrap().unwrap();

    // Steady state: nothing new to identify, open or list.
    write_qemu(
        proc.path(),
        pid,
        [(2_000_000, 12), (9_000_000, 50), (3_250_000, 46)],
    );
    let before = sampler.proc_files_read();
    let measured = sampler.cycle().unwrap().unwrap();
    let read = sampler.proc_files_read() - before;

    let g = &measured.guests[0];
    // Every thread's run time counts (0.5 + 5 + 0 ms), the vCPU threads' switches only.
    assert_eq!(g.host_cpu_seconds, 0.0055);
    assert_eq!(g.vcpu_wakeups, 20 + 1);
    // The vCPU threads' schedstat gives their switches and run time in one read: one stat,
    // one schedstat per thread. Reading it twice would be 6.
    assert_eq!(read, 1 + 3, "files read in one steady cycle");
}
