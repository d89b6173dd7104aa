//! What the agent costs on a host: run with `cargo bench -p tickscope-agent`.
//!
//! 1. Starts VM-like processes (argv `qemu-system-x86_64 -name guest=bench-N`, two threads named
//!    `CPU n/KVM` that wake ten times a second) and measures the CPU time of one sampling cycle,
//!    ours against a naive sampler that reads every process's stat and cmdline and every VM
//!    thread's name and status on every cycle, in the same run.
//! 2. Runs the real `tickscope-agent run` binary at a 10 s interval against a local HTTP sink
//!    and reads its peak RSS, its CPU per cycle and its own wake-ups per second from /proc.
//! 3. At the same time, on the same machine with the same processes, runs Prometheus's node
//!    exporter (Debian's `prometheus-node-exporter`, default collectors) scraped every 10 s, and
//!    reads the same figures for it, when it is installed.
//!
//! Environment: BENCH_VMS (default 50), BENCH_CYCLES (200), BENCH_RUN_SECONDS (31).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tickscope_agent::discover::{self, ProcessView};
use tickscope_agent::host::clock_ticks_per_second;
use tickscope_agent::procfs::ProcFs;
use tickscope_agent::sampler::Sampler;

const FAKE_VM_ENV: &str = "TICKSCOPE_BENCH_FAKE_VM";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// In a child: pretend to be a 2-vCPU QEMU until killed.
fn fake_vm() -> ! {
    for i in 0..2 {
        std::thread::Builder::new()
            .name(format!("CPU {i}/KVM"))
            .spawn(|| {
                loop {
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
            .unwrap();
    }
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The obvious way to do the same job: look at everything, every cycle.
fn naive_cycle(proc: &mut ProcFs) -> usize {
    let mut vms = 0;
    for pid in proc.pids().unwrap() {
        let Some(stat) = proc.stat(pid) else { continue };
        let argv = proc.cmdline(pid);
        let view = ProcessView {
            pid,
            comm: &stat.comm,
            argv: &argv,
        };
        let Some((family, _)) = discover::recognise(&view) else {
            continue;
        };
        vms += 1;
        for tid in proc.tids(pid).unwrap_or_default() {
            if proc
                .thread_name(pid, tid)
                .is_some_and(|name| (family.vcpu_index)(&name).is_some())
            {
                std::hint::black_box(proc.thread_switches(pid, tid));
            }
        }
    }
    vms
}

/// Mean CPU time of `cycles` calls, in microseconds.
fn cpu_us_per_cycle(cycles: u64, mut f: impl FnMut()) -> f64 {
    f(); // warm up: first identification of every process
    let start = thread_cpu_ns();
    for _ in 0..cycles {
        f();
    }
    (thread_cpu_ns() - start) as f64 / cycles as f64 / 1000.0
}

fn proc_status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Context switches of all the process's threads so far.
fn switches(pid: u32) -> u64 {
    let mut proc = ProcFs::new("/proc");
    proc.tids(pid)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|tid| proc.thread_switches(pid, tid))
        .sum()
}

/// Voluntary and involuntary (preempted) context switches of all the process's live threads so
/// far, from each thread's `status`: a wake-up the agent asks for (its sleep ending, an answer
/// arriving) is voluntary; on a busy host the scheduler also preempts a running agent, more
/// often the longer its cycle runs.
fn switch_kinds(pid: u32) -> (u64, u64) {
    let proc = ProcFs::new("/proc");
    let mut sum = (0, 0);
    for tid in proc.tids(pid).unwrap_or_default() {
        let status =
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap_or_default();
        let field = |key: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        sum.0 += field("voluntary_ctxt_switches:");
        sum.1 += field("nonvoluntary_ctxt_switches:");
    }
    sum
}

/// CPU time of all the process's threads so far, in nanoseconds (schedstat's first field).
fn cpu_ns(pid: u32) -> u64 {
    ProcFs::new("/proc")
        .tids(pid)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|tid| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
            text.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

/// A minimal HTTP endpoint that accepts every report, so the agent runs its real loop.
fn start_sink() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 19\r\n\r\n{\"status\":\"stored\"}";
                    if reader.get_mut().write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

fn main() {
    if std::env::var_os(FAKE_VM_ENV).is_some() {
        fake_vm();
    }
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list of tests: there are none
    }
    let vm_count = env_or("BENCH_VMS", 50);
    let cycles = env_or("BENCH_CYCLES", 200);
    let run_seconds = env_or("BENCH_RUN_SECONDS", 31);
    let me = std::env::current_exe().unwrap();

    let mut children = Children(Vec::new());
    for i in 0..vm_count {
        let mut command = Command::new(&me);
        #[cfg(unix)]
        std::os::unix::process::CommandExt::arg0(&mut command, "qemu-system-x86_64");
        command
            .args([
                "-name",
                &format!("guest=bench-{i},debug-threads=on"),
                "-smp",
                "2",
            ])
            .env(FAKE_VM_ENV, "1")
            .stdout(Stdio::null());
        children.0.push(command.spawn().unwrap());
    }
    std::thread::sleep(Duration::from_millis(500));
    let processes = ProcFs::new("/proc").pids().unwrap().len();

    let mut sampler = Sampler::new("/proc", clock_ticks_per_second());
    let mut found = 0;
    // The first cycle identifies every process: /proc files are counted from the next one.
    sampler.cycle().unwrap();
    let files_before = sampler.proc_files_read();
    let ours = cpu_us_per_cycle(cycles, || {
        if let Some(m) = sampler.cycle().unwrap() {
            found = m.guests.len();
        }
    });
    // `cycles` measured plus one warm-up, all steady.
    let files_per_cycle = (sampler.proc_files_read() - files_before) as f64 / (cycles + 1) as f64;
    let mut proc = ProcFs::new("/proc");
    let mut naive_found = 0;
    let naive = cpu_us_per_cycle(cycles, || naive_found = naive_cycle(&mut proc));
    assert!(
        found >= vm_count as usize && naive_found >= vm_count as usize,
        "the bench VMs were not all found: {found} / {naive_found} of {vm_count}"
    );

    println!(
        "tickscope-agent sampling cost, {vm_count} VM-like processes ({processes} processes in all), {cycles} cycles"
    );
    println!("  ours:  {ours:8.1} µs CPU per cycle   (target < 1000 µs per 50 VMs)");
    println!(
        "  naive: {naive:8.1} µs CPU per cycle   (every process's stat + cmdline, every cycle)"
    );
    println!("  ratio ours / naive: {:.3}", ours / naive);
    println!(
        "  /proc files read per cycle (ours): {files_per_cycle:.0}, {:.1} per VM",
        files_per_cycle / vm_count as f64
    );

    // The real binary in its real loop.
    let sink = start_sink();
    let interval_s = 10;
    let spool = tempfile::tempdir().unwrap();
    let mut agent = Command::new(env!("CARGO_BIN_EXE_tickscope-agent"))
        .args([
            "run",
            "--interval",
            &interval_s.to_string(),
            "--server",
            &sink,
            "--token",
            "bench",
            "--spool-dir",
        ])
        .arg(spool.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = agent.id();
    let exporter = NodeExporter::start(interval_s);
    // Skip start-up, then count over whole intervals.
    std::thread::sleep(Duration::from_secs(1));
    let (switches_0, cpu_0, t0) = (switches(pid), cpu_ns(pid), Instant::now());
    let kinds_0 = switch_kinds(pid);
    let exporter_0 = exporter.as_ref().map(|e| (switches(e.pid), cpu_ns(e.pid)));
    std::thread::sleep(Duration::from_secs(run_seconds.saturating_sub(1).max(1)));
    let (switches_1, cpu_1, elapsed) = (switches(pid), cpu_ns(pid), t0.elapsed());
    let kinds_1 = switch_kinds(pid);
    let peak_rss_kib = proc_status_kib(pid, "VmHWM:");
    let _ = agent.kill();
    let _ = agent.wait();
    let exporter_figures = exporter.zip(exporter_0).map(|(e, (switches_0, cpu_0))| {
        let (switches_1, cpu_1) = (switches(e.pid), cpu_ns(e.pid));
        let figures = (
            proc_status_kib(e.pid, "VmHWM:"),
            (switches_1 - switches_0) as f64 / elapsed.as_secs_f64(),
            (cpu_1 - cpu_0) as f64 / 1e6 / (elapsed.as_secs_f64() / interval_s as f64).max(1.0),
            e.scrapes(),
        );
        drop(e);
        figures
    });
    let agent_cycles = (elapsed.as_secs_f64() / interval_s as f64).max(1.0);
    let wakeups_per_s = (switches_1 - switches_0) as f64 / elapsed.as_secs_f64();
    let cpu_ms_per_cycle = (cpu_1 - cpu_0) as f64 / 1e6 / agent_cycles;

    println!(
        "tickscope-agent run --interval {interval_s}, {:.0} s with {vm_count} VMs:",
        elapsed.as_secs_f64()
    );
    println!(
        "  peak RSS:            {:8.1} MiB   (target < 10 MiB)",
        peak_rss_kib as f64 / 1024.0
    );
    println!("  own wake-ups:        {wakeups_per_s:8.2} per second   (target ≤ 1)");
    println!(
        "    of which voluntary {:.2} (sleep ends, answers), preempted {:.2} (load on the host)",
        (kinds_1.0 - kinds_0.0) as f64 / elapsed.as_secs_f64(),
        (kinds_1.1 - kinds_0.1) as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  CPU per cycle:       {cpu_ms_per_cycle:8.2} ms, sampling plus building and sending the report"
    );
    match exporter_figures {
        Some((rss_kib, wakeups, cpu_ms, scrapes)) => {
            println!(
                "prometheus-node-exporter (default collectors), scraped every {interval_s} s, same {:.0} s ({scrapes} scrapes):",
                elapsed.as_secs_f64()
            );
            println!(
                "  peak RSS:            {:8.1} MiB   (ratio agent / exporter {:.2})",
                rss_kib as f64 / 1024.0,
                peak_rss_kib as f64 / rss_kib as f64
            );
            println!(
                "  own wake-ups:        {wakeups:8.2} per second   (ratio {:.2})",
                wakeups_per_s / wakeups
            );
            println!(
                "  CPU per interval:    {cpu_ms:8.2} ms, one scrape   (ratio agent / exporter {:.2})",
                cpu_ms_per_cycle / cpu_ms
            );
        }
        None => println!(
            "prometheus-node-exporter is not installed (apt-get install prometheus-node-exporter): no comparison"
        ),
    }
}

/// Debian's node exporter on a free port, scraped every interval by a thread, as Prometheus
/// would.
struct NodeExporter {
    child: Child,
    pid: u32,
    scrapes: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl NodeExporter {
    fn start(interval_s: u64) -> Option<NodeExporter> {
        let binary = "/usr/bin/prometheus-node-exporter";
        if !std::path::Path::new(binary).exists() {
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let address = format!("127.0.0.1:{port}");
        let child = Command::new(binary)
            .arg(format!("--web.listen-address={address}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let pid = child.id();
        let scrapes = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = scrapes.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            loop {
                if let Ok(mut stream) = std::net::TcpStream::connect(&address) {
                    let request = format!(
                        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
                    );
                    if stream.write_all(request.as_bytes()).is_ok() {
                        let mut body = Vec::new();
                        let _ = stream.read_to_end(&mut body);
                        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_secs(interval_s));
            }
        });
        Some(NodeExporter {
            child,
            pid,
            scrapes,
        })
    }

    fn scrapes(&self) -> u64 {
        self.scrapes.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for NodeExporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
