//! `tickscope-agent`: measures the VMs on this host and reports them to a tickscope server.

use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use tickscope_agent::client::Client;
use tickscope_agent::host;
use tickscope_agent::report::Reporter;
use tickscope_agent::sampler::Sampler;

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
    },
    /// Measure one interval and print the report as JSON on stdout; no server needed.
    Once {
        #[command(flatten)]
        measure: MeasureArgs,
    },
}

#[derive(clap::Args)]
struct MeasureArgs {
    /// Length of one measurement interval, in seconds.
    #[arg(long, env = "TICKSCOPE_INTERVAL", default_value_t = 10.0)]
    interval: f64,
    /// Name this host reports as (default: its hostname).
    #[arg(long, env = "TICKSCOPE_HOST_NAME")]
    host_name: Option<String>,
    /// Where procfs is mounted.
    #[arg(long, default_value = "/proc", hide = true)]
    proc_root: PathBuf,
}

impl MeasureArgs {
    fn interval(&self) -> Result<Duration> {
        if !(self.interval.is_finite() && (0.1..=3600.0).contains(&self.interval)) {
            bail!(
                "--interval must be between 0.1 and 3600 seconds, not {}",
                self.interval
            );
        }
        Ok(Duration::from_secs_f64(self.interval))
    }

    fn sampler(&self) -> Sampler {
        Sampler::new(&self.proc_root, host::clock_ticks_per_second())
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
        } => run(&server, &token, &measure),
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
    let report = Reporter::new(host::agent_info())
        .report(host::host_info(args.host_name.as_deref()), measured);
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn run(server: &str, token: &str, args: &MeasureArgs) -> Result<()> {
    let interval = args.interval()?;
    if token.trim().is_empty() {
        bail!(
            "--token (or TICKSCOPE_TOKEN) is empty: create one with `tickscope-server token add NAME --role agent`"
        );
    }
    let mut sampler = args.sampler();
    let mut reporter = Reporter::new(host::agent_info());
    let mut client = Client::new(server, token);
    eprintln!(
        "tickscope-agent {}: reporting to {server} every {:?}",
        env!("CARGO_PKG_VERSION"),
        interval
    );
    // Deadlines advance by exactly one interval so the schedule does not drift with the time
    // each cycle takes; between them the agent sleeps and wakes once.
    let mut deadline = Instant::now();
    loop {
        if let Some(measured) = sampler.cycle().context("cannot read the process table")? {
            let guests = measured.guests.len();
            let report = reporter.report(host::host_info(args.host_name.as_deref()), measured);
            let delivery = client.send(report);
            for reason in &delivery.rejected {
                eprintln!("tickscope-agent: {reason}");
            }
            if let Some(error) = &delivery.error {
                eprintln!(
                    "tickscope-agent: {error}; {} report(s) kept to resend ({} dropped so far), {guests} guest(s) this interval",
                    delivery.pending,
                    client.dropped()
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
