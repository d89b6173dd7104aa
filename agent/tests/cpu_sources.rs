//! The VM's CPU time from the exact counters agrees with `/proc/<pid>/stat`'s ticks on a real
//! process: a shell spinning under QEMU's name, stopped (SIGSTOP) at both ends of the interval
//! so that neither reading races the other.

use std::process::{Child, Command};
use std::thread::sleep;
use std::time::Duration;

use tickscope_agent::host;
use tickscope_agent::procfs::ProcFs;
use tickscope_agent::sampler::Sampler;
use tickscope_agent::wire::CpuSource;

struct Spinner(Child);

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill only sends a signal to our own child.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0);
}

#[test]
fn exact_cpu_agrees_with_proc_stat_ticks_over_a_long_interval() {
    // argv[0] is what the agent recognises QEMU by when the command name is another.
    let spinner = Spinner(
        Command::new("bash")
            .args([
                "-c",
                "exec -a qemu-system-x86_64 sh -c 'while :; do :; done'",
            ])
            .spawn()
            .expect("bash"),
    );
    let pid = spinner.0.id();
    sleep(Duration::from_millis(300)); // exec'd, and has run
    let clk_tck = host::clock_ticks_per_second();
    let mut proc = ProcFs::new("/proc");
    let ticks = |proc: &mut ProcFs| proc.stat(pid).expect("the spinner's stat").cpu_ticks;

    signal(pid, libc::SIGSTOP);
    sleep(Duration::from_millis(50));
    let mut sampler = Sampler::new("/proc", clk_tck);
    sampler.cycle().unwrap();
    let before = ticks(&mut proc);
    signal(pid, libc::SIGCONT);
    sleep(Duration::from_secs(3));
    signal(pid, libc::SIGSTOP);
    sleep(Duration::from_millis(50));
    let measured = sampler.cycle().unwrap().unwrap();
    let after = ticks(&mut proc);
    signal(pid, libc::SIGCONT);

    let g = measured
        .guests
        .iter()
        .find(|g| g.pid == pid)
        .expect("the spinner is taken for a QEMU VM");
    assert!(
        matches!(g.cpu_source, Some(CpuSource::Cgroup | CpuSource::Schedstat)),
        "{:?}",
        g.cpu_source
    );
    let from_ticks_s = (after - before) as f64 / clk_tck as f64;
    let tick_s = 1.0 / clk_tck as f64;
    println!(
        "{:?}: {:.4} s; /proc/<pid>/stat: {from_ticks_s:.2} s",
        g.cpu_source, g.host_cpu_seconds
    );
    assert!(from_ticks_s > 0.2, "the spinner ran: {from_ticks_s} s");
    // Each end of the tick count is truncated to a whole tick.
    assert!(
        (g.host_cpu_seconds - from_ticks_s).abs() <= 2.0 * tick_s,
        "{} s against {from_ticks_s} s",
        g.host_cpu_seconds
    );
}
