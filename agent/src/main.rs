//! `tickscope-agent`: measures the VMs on this host and reports them to a tickscope server.

use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use tickscope_agent::client::{Client, Sender};
use tickscope_agent::host;
use tickscope_agent::report::Reporter;
use tickscope_agent::sampler::Sampler;
use tickscope_agent::spool::{Bounds, Spool};
use tickscope_agent::wire::MAX_SPOOL_AGE_S;

#[derive(Parser)]
#[command(
    version,
    about = "Finds the VMs on this host, measures the host CPU they use and how often their vCPUs wake, and reports to a tickscope server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure every interval and report to the server, until stopped.
    Run {
        /// The server's base URL, e.g. http://tickscope.example:8080
        #[arg(long, env = "TICKSCOPE_SERVER")]
        server: String,
        /// An agent token (`tickscope-server token add NAME --role agent`).
        #[arg(long, env = "TICKSCOPE_TOKEN", hide_env_values = true)]
        token: String,
        #[command(flatten)]
        measure: MeasureArgs,
        #[command(flatten)]
        spool: SpoolArgs,
        #[command(flatten)]
        tls: TlsArgs,
    },
    /// Measure one interval and print the report as JSON on stdout; no server needed.
    Once {
        #[command(flatten)]
        measure: MeasureArgs,
    },
    /// Inside a Linux guest: collect its kernel timer facts and deliver them through a serial
    /// channel to the host agent, or straight to the server with a guest token.
    Guest(GuestArgs),
    /// Load-test a server: a simulated fleet of hosts and guests reporting in real time, one
    /// agent token per host (`tickscope-server token add sim-host --role agent --count N`).
    Simulate(SimulateArgs),
}

#[derive(clap::Args)]
struct SimulateArgs {
    /// The server's base URL.
    #[arg(long, env = "TICKSCOPE_SERVER")]
    server: String,
    /// A file of agent tokens, one per line, one per host in order: each host reports with its
    /// own, as real agents do.
    #[arg(long)]
    tokens_file: PathBuf,
    /// Hosts to simulate, named `<prefix>-0001` on (the names `token add --count` binds).
    #[arg(long, default_value_t = 10)]
    hosts: usize,
    #[arg(long, default_value_t = 10)]
    guests_per_host: usize,
    #[arg(long, default_value = "sim-host")]
    host_prefix: String,
    /// Seconds between one host's reports.
    #[arg(long, default_value_t = 10.0)]
    interval: f64,
    /// Seed of the fleet's make-up and noise: the same seed, the same fleet.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many seconds (default: run until stopped).
    #[arg(long)]
    duration: Option<f64>,
    /// Threads sending reports.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Leave the reports sent in the first this many seconds out of the latency percentiles
    /// (the `latency_ms` line): connections being opened, a server warming up.
    #[arg(long, default_value_t = 0.0)]
    warm_up: f64,
}

#[derive(clap::Args)]
struct GuestArgs {
    /// Print the facts once as JSON on stdout and exit.
    #[arg(long)]
    once: bool,
    /// A serial or virtio-serial port to write the facts to, one JSON line per interval
    /// (e.g. /dev/virtio-ports/org.tickscope.probe.0 or /dev/ttyS1).
    #[arg(long, env = "TICKSCOPE_CHANNEL")]
    channel: Option<PathBuf>,
    /// The server's base URL, to post the facts straight to it.
    #[arg(long, env = "TICKSCOPE_SERVER")]
    server: Option<String>,
    /// A guest token (`tickscope-server token add NAME --role guest`).
    #[arg(long, env = "TICKSCOPE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(flatten)]
    tls: TlsArgs,
    /// Seconds between deliveries.
    #[arg(long, default_value_t = 60.0)]
    interval: f64,
    /// Seconds over which the tick rate, idle time and timer interrupts are measured.
    #[arg(long, default_value_t = 1.0)]
    measure: f64,
    /// Where the guest's filesystem is rooted.
    #[arg(long, default_value = "/", hide = true)]
    root: PathBuf,
}

/// Whom to trust for an https:// server.
#[derive(clap::Args)]
struct TlsArgs {
    /// A PEM file of the certificate authorities to trust instead of the public ones, for a
    /// server whose certificate a private CA signed. The server's certificate is always checked.
    #[arg(long, env = "TICKSCOPE_CA_FILE")]
    ca_file: Option<PathBuf>,
}

impl TlsArgs {
    fn client(&self, server: &str, token: &str) -> Result<Client> {
        let Some(path) = &self.ca_file else {
            return Ok(Client::new(server, token));
        };
        let pem = std::fs::read(path)
            .with_context(|| format!("cannot read the CA file {}", path.display()))?;
        Client::with_ca(server, token, &pem)
            .map_err(|e| anyhow::anyhow!("the CA file {}: {e}", path.display()))
    }
}

/// Where reports wait until the server has them.
#[derive(clap::Args)]
struct SpoolArgs {
    /// The spool directory: every report is written here before it is sent, and kept until the
    /// server acknowledged it (systemd's StateDirectory=tickscope-agent gives this default).
    #[arg(
        long,
        env = "TICKSCOPE_SPOOL_DIR",
        default_value = "/var/lib/tickscope-agent/spool"
    )]
    spool_dir: PathBuf,
    /// Most the spool keeps, in KiB; the oldest reports are dropped (and counted) beyond it.
    #[arg(long, default_value_t = 64 * 1024)]
    spool_max_kib: u64,
    /// Oldest report the spool keeps, in hours.
    #[arg(long, default_value_t = 24.0)]
    spool_max_hours: f64,
}

impl SpoolArgs {
    fn open(&self, run_id: String) -> Result<Spool> {
        let max_age = seconds(
            "spool-max-hours",
            self.spool_max_hours * 3600.0,
            60.0,
            MAX_SPOOL_AGE_S as f64,
        )?;
        if self.spool_max_kib == 0 {
            bail!("--spool-max-kib must be at least 1");
        }
        let bounds = Bounds {
            max_bytes: self.spool_max_kib.saturating_mul(1024),
            max_age,
        };
        Spool::open(&self.spool_dir, bounds, run_id).with_context(|| {
            format!(
                "cannot open the spool in {} (set --spool-dir or TICKSCOPE_SPOOL_DIR to a writable directory)",
                self.spool_dir.display()
            )
        })
    }
}

#[derive(clap::Args)]
struct MeasureArgs {
    /// Length of one measurement interval, in seconds.
    #[arg(long, env = "TICKSCOPE_INTERVAL", default_value_t = 10.0)]
    interval: f64,
    /// Name this host reports as (default: its hostname).
    #[arg(long, env = "TICKSCOPE_HOST_NAME")]
    host_name: Option<String>,
    /// Where guest probe channels are found for VMs whose command line names none:
    /// `<dir>/<VM UUID>.sock` or `<dir>/<VM name>.sock`.
    #[arg(
        long,
        env = "TICKSCOPE_CHANNEL_DIR",
        default_value = "/run/tickscope/channels"
    )]
    channel_dir: PathBuf,
    /// The libvirt connection to ask guest agents of libvirt domains through (its guest-info
    /// API) and to read their definitions from (`virsh dumpxml`); neither taints a domain.
    #[arg(
        long,
        env = "TICKSCOPE_LIBVIRT_URI",
        default_value = tickscope_agent::sampler::DEFAULT_LIBVIRT_URI
    )]
    libvirt_uri: String,
    /// Where debugfs is mounted: KVM's per-VM halt-polling counters are under `<dir>/kvm/`.
    #[arg(
        long,
        env = "TICKSCOPE_DEBUGFS",
        default_value = tickscope_agent::sampler::DEFAULT_DEBUGFS
    )]
    debugfs: PathBuf,
    /// Where procfs is mounted.
    #[arg(long, default_value = "/proc", hide = true)]
    proc_root: PathBuf,
}

impl MeasureArgs {
    fn interval(&self) -> Result<Duration> {
        seconds("interval", self.interval, 0.1, 3600.0)
    }

    fn sampler(&self) -> Sampler {
        Sampler::new(&self.proc_root, host::clock_ticks_per_second())
            .with_channel_dir(&self.channel_dir)
            .with_libvirt_uri(&self.libvirt_uri)
            .with_debugfs(&self.debugfs)
    }
}

fn main() -> Result<()> {
    raise_open_file_limit();
    match Cli::parse().command {
        Command::Once { measure } => once(&measure),
        Command::Run {
            server,
            token,
            measure,
            spool,
            tls,
        } => run(&server, &token, &measure, &spool, &tls),
        Command::Guest(args) => guest(&args),
        Command::Simulate(args) => simulate(&args),
    }
}

fn simulate(args: &SimulateArgs) -> Result<()> {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use tickscope_agent::simulate::{self, send};

    let interval = seconds("interval", args.interval, 0.1, 3600.0)?;
    let tokens: Vec<String> = std::fs::read_to_string(&args.tokens_file)
        .with_context(|| format!("cannot read {}", args.tokens_file.display()))?
        .lines()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    if tokens.len() < args.hosts {
        bail!(
            "{} has {} token(s) for {} hosts: make one per host with `tickscope-server token add {} --role agent --count {}`",
            args.tokens_file.display(),
            tokens.len(),
            args.hosts,
            args.host_prefix,
            args.hosts
        );
    }
    let threads = args.threads.clamp(1, args.hosts.max(1));
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let run_ms = args
        .duration
        .map_or(30 * 86_400_000, |s| (s * 1000.0) as i64);
    let fleet = simulate::random_fleet(
        args.seed,
        &args.host_prefix,
        args.hosts,
        args.guests_per_host,
        now_ms,
        run_ms,
    );
    let until = args
        .duration
        .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let latency_from = Instant::now() + seconds("warm-up", args.warm_up, 0.0, 86_400.0)?;
    let counts = Arc::new(send::Counts::default());
    eprintln!(
        "simulating {} hosts x {} guests, a report per host every {:.1} s, to {}",
        args.hosts, args.guests_per_host, args.interval, args.server
    );
    let progress = counts.clone();
    thread::spawn(move || {
        let started = Instant::now();
        loop {
            thread::sleep(Duration::from_secs(10));
            let sent = progress.sent.load(Ordering::Relaxed);
            let failed = progress.failed.load(Ordering::Relaxed);
            let latency_ms =
                progress.latency_us.load(Ordering::Relaxed) as f64 / 1000.0 / sent.max(1) as f64;
            eprintln!(
                "{:.0} s: {sent} reports taken, {failed} failed, {latency_ms:.1} ms each on average",
                started.elapsed().as_secs_f64()
            );
            // Since the warm-up, for a long run watched as it goes.
            eprintln!("{}", progress.latencies.summary());
        }
    });
    let schedule = send::Schedule {
        interval,
        threads,
        until,
        latency_from,
    };
    send::run(
        send::agents(&args.server, fleet, tokens, args.seed),
        &schedule,
        counts.clone(),
    );
    let failed = counts.failed.load(Ordering::Relaxed);
    println!(
        "{} reports taken, {failed} failed",
        counts.sent.load(Ordering::Relaxed)
    );
    // The reports taken after the warm-up, in one line for scripts (scripts/capacity.sh).
    println!("{}", counts.latencies.summary());
    if failed > 0 {
        bail!("{failed} report(s) were not taken");
    }
    Ok(())
}

/// Writes one line to a serial or virtio-serial port without ever blocking: a virtio port with
/// no host end connected blocks writers, and the probe must go on (to its server, and to the
/// next delivery). The port is opened for each line, so a port that was reset is no obstacle.
fn write_line(port: &std::path::Path, line: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(port)?;
    match file.write(line.as_bytes()) {
        Ok(n) if n == line.len() => Ok(()),
        // A cut line is ended, so the host drops it rather than gluing it to the next one.
        Ok(_) => {
            let _ = file.write_all(b"\n");
            Err(std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                "the port took only part of the line",
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(std::io::Error::new(
            e.kind(),
            "the port is full, or nobody is connected at the host end",
        )),
        Err(e) => Err(e),
    }
}

fn seconds(name: &str, value: f64, min: f64, max: f64) -> Result<Duration> {
    if !(value.is_finite() && (min..=max).contains(&value)) {
        bail!("--{name} must be between {min} and {max} seconds, not {value}");
    }
    Ok(Duration::from_secs_f64(value))
}

fn guest(args: &GuestArgs) -> Result<()> {
    let measure = seconds("measure", args.measure, 0.1, 60.0)?;
    let mut probe = tickscope_agent::guest::Probe::new(&args.root);
    if args.once {
        println!("{}", serde_json::to_string_pretty(&probe.collect(measure))?);
        return Ok(());
    }
    let interval = seconds("interval", args.interval, 1.0, 86_400.0)?;
    let client = match (&args.server, &args.token) {
        (Some(server), Some(token)) => Some(args.tls.client(server, token)?),
        (Some(_), None) => bail!("--server needs --token (a guest token)"),
        _ => None,
    };
    if client.is_none() && args.channel.is_none() {
        bail!("say where the facts go: --channel PATH, --server URL --token TOKEN, or --once");
    }
    loop {
        let started = Instant::now();
        let facts = probe.collect(measure);
        if let Some(channel) = &args.channel
            && let Err(e) = write_line(channel, &(serde_json::to_string(&facts)? + "\n"))
        {
            eprintln!(
                "tickscope-agent guest: facts not delivered to {}: {e}",
                channel.display()
            );
        }
        if let Some(client) = &client
            && let Err(e) = client.send_facts(facts)
        {
            eprintln!("tickscope-agent guest: {e}");
        }
        thread::sleep(interval.saturating_sub(started.elapsed()));
    }
}

fn once(args: &MeasureArgs) -> Result<()> {
    let interval = args.interval()?;
    let mut sampler = args.sampler();
    sampler.cycle().context("cannot read the process table")?;
    thread::sleep(interval);
    let measured = sampler
        .cycle()
        .context("cannot read the process table")?
        .context("the sampler gave no interval")?;
    let mut seen = BlindSpotLog::default();
    seen.note(&measured.blind_spots);
    let learnt = measured.guests.iter().filter(|g| g.facts.is_some()).count();
    let report = Reporter::new(host::agent_info())
        .report(host::host_info(args.host_name.as_deref()), measured);
    eprintln!(
        "tickscope-agent once: {} VM(s), {learnt} with facts from the guest, {} blind spot(s)",
        report.guests.len(),
        report.host.blind_spots.len()
    );
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn run(
    server: &str,
    token: &str,
    args: &MeasureArgs,
    spool: &SpoolArgs,
    tls: &TlsArgs,
) -> Result<()> {
    let interval = args.interval()?;
    if token.trim().is_empty() {
        bail!(
            "--token (or TICKSCOPE_TOKEN) is empty: create one with `tickscope-server token add NAME --role agent`"
        );
    }
    let mut sampler = args.sampler();
    let agent = host::agent_info();
    let spool = spool.open(agent.run_id.clone())?;
    let waiting = spool.pending()?.len();
    // The first retry after a failure waits one interval, then two, four... up to 5 minutes.
    let mut sender = Sender::new(tls.client(server, token)?, spool, interval);
    let mut reporter = Reporter::new(agent);
    eprintln!(
        "tickscope-agent {}: reporting to {server} every {:?}; {waiting} report(s) waiting in the spool",
        env!("CARGO_PKG_VERSION"),
        interval
    );
    // Deadlines advance by exactly one interval so the schedule does not drift with the time
    // each cycle takes; between them the agent sleeps and wakes once.
    let mut deadline = Instant::now();
    let mut blind_spots = BlindSpotLog::default();
    loop {
        if let Some(measured) = sampler.cycle().context("cannot read the process table")? {
            blind_spots.note(&measured.blind_spots);
            let guests = measured.guests.len();
            let report = reporter.report(host::host_info(args.host_name.as_deref()), measured);
            let delivery = sender
                .submit(report, Instant::now())
                .context("cannot write to the spool")?;
            for reason in &delivery.rejected {
                eprintln!("tickscope-agent: {reason}");
            }
            if let Some(error) = &delivery.error {
                eprintln!(
                    "tickscope-agent: {error}; {} report(s) wait in the spool ({} dropped so far), next try in {:?}, {guests} guest(s) this interval",
                    delivery.pending,
                    sender.spool().state().dropped,
                    delivery.retry_in.unwrap_or_default()
                );
            }
        }
        deadline += interval;
        let now = Instant::now();
        if deadline > now {
            thread::sleep(deadline - now);
        } else {
            // Fell behind (suspend, overload): start a fresh schedule rather than burst.
            deadline = now;
        }
    }
}

/// Says once what the agent cannot see, with the fix, and again when it can.
#[derive(Default)]
struct BlindSpotLog {
    logged: Vec<tickscope_agent::wire::BlindSpotCheck>,
}

impl BlindSpotLog {
    fn note(&mut self, spots: &[tickscope_agent::wire::BlindSpot]) {
        for spot in spots.iter().filter(|s| !self.logged.contains(&s.check)) {
            eprintln!(
                "tickscope-agent: blind spot {}: {} Fix: {}",
                spot.check.as_str(),
                spot.detail,
                spot.fix
            );
        }
        for gone in self
            .logged
            .iter()
            .filter(|c| !spots.iter().any(|s| s.check == **c))
        {
            eprintln!("tickscope-agent: blind spot {} resolved", gone.as_str());
        }
        self.logged = spots.iter().map(|s| s.check).collect();
    }
}

/// The sampler keeps each VM's counter files open (one plus one per vCPU): lift the soft limit on
/// open files to the hard one, as a host with hundreds of VMs would otherwise exhaust 1024.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
