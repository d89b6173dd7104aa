//! `tickscope-agent simulate`: a simulated fleet reporting to a real server, one agent per
//! host, each with its own token, every interval in real time: a load test of the server's
//! ingest, analysis and pages. No spool: a report the server does not take is counted as
//! failed and not sent again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use super::fleet::{HostSpec, SimulatedHost};
use super::latency::Latencies;
use crate::client::Client;
use crate::clock::unix_ms;

/// What the senders did so far.
#[derive(Default)]
pub struct Counts {
    pub sent: AtomicU64,
    pub failed: AtomicU64,
    /// Summed time of the successful posts, in microseconds.
    pub latency_us: AtomicU64,
    /// Each successful post's time, from [`Schedule::latency_from`] on.
    pub latencies: Latencies,
}

/// When and how hard to send.
pub struct Schedule {
    /// Between one host's reports.
    pub interval: Duration,
    /// Threads sending; hosts are spread evenly over them.
    pub threads: usize,
    /// When to stop; never if `None`.
    pub until: Option<Instant>,
    /// Posts started before this are left out of [`Counts::latencies`]: the first ones open
    /// connections, and a load test measures the server once it is warm.
    pub latency_from: Instant,
}

/// The simulated hosts of `hosts`, each with the client that posts with its own token.
pub fn agents(
    server: &str,
    hosts: Vec<HostSpec>,
    tokens: Vec<String>,
    seed: u64,
) -> Vec<(SimulatedHost, Client)> {
    let version = format!("{} (simulated)", env!("CARGO_PKG_VERSION"));
    hosts
        .into_iter()
        .zip(tokens)
        .enumerate()
        .map(|(i, (spec, token))| {
            let host = SimulatedHost::new(spec, seed.wrapping_add(i as u64), &version);
            (host, Client::new(server, &token))
        })
        .collect()
}

/// Reports every host's interval, each host at its own offset within the interval: the hosts
/// spread evenly over it, as independent agents are, whatever the number of threads.
pub fn run(agents: Vec<(SimulatedHost, Client)>, schedule: &Schedule, counts: Arc<Counts>) {
    let threads = schedule.threads.max(1);
    let (interval, until, latency_from) =
        (schedule.interval, schedule.until, schedule.latency_from);
    let hosts = agents.len();
    let mut groups: Vec<Vec<(SimulatedHost, Client)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, agent) in agents.into_iter().enumerate() {
        groups[i % threads].push(agent);
    }
    let handles: Vec<_> = groups
        .into_iter()
        .enumerate()
        .map(|(g, group)| {
            let counts = counts.clone();
            let spread = Spread {
                group: g,
                groups: threads,
                hosts,
            };
            thread::spawn(move || send_group(group, spread, interval, until, latency_from, &counts))
        })
        .collect();
    for handle in handles {
        let _ = handle.join();
    }
}

/// Where a thread's hosts fall among all: host `k` of group `group` is host
/// `k × groups + group` of the fleet (they are dealt round-robin).
#[derive(Clone, Copy)]
struct Spread {
    group: usize,
    groups: usize,
    hosts: usize,
}

impl Spread {
    /// When host `k` of this group sends, from the start of an interval: the fleet's hosts one
    /// after another at equal steps. Each thread sending its `k`-th host at `k/n` of the
    /// interval (as before) sent one host of every thread at once: bursts of as many reports
    /// as threads, ten times an interval, which a page read then met or missed by its phase.
    fn offset(self, k: usize, interval: Duration) -> Duration {
        interval * (k * self.groups + self.group) as u32 / self.hosts.max(1) as u32
    }
}

fn send_group(
    mut group: Vec<(SimulatedHost, Client)>,
    spread: Spread,
    interval: Duration,
    until: Option<Instant>,
    latency_from: Instant,
    counts: &Counts,
) {
    let interval_ms = interval.as_millis() as i64;
    let mut next = Instant::now() + interval;
    loop {
        for (k, (host, client)) in group.iter_mut().enumerate() {
            let due = next + spread.offset(k, interval);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
            if until.is_some_and(|until| Instant::now() >= until) {
                return;
            }
            let report = host.report(unix_ms(SystemTime::now()), interval_ms);
            let json = serde_json::to_vec(&report).expect("a report serialises");
            let started = Instant::now();
            match client.post_report(json) {
                Ok(()) => {
                    let latency = started.elapsed();
                    counts.sent.fetch_add(1, Ordering::Relaxed);
                    counts
                        .latency_us
                        .fetch_add(latency.as_micros() as u64, Ordering::Relaxed);
                    if started >= latency_from {
                        counts.latencies.record(latency);
                    }
                }
                Err(e) => {
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    // When it failed, so that failures can be laid beside the server's log.
                    let failed_at_s = unix_ms(SystemTime::now()) as f64 / 1000.0;
                    let waited_ms = started.elapsed().as_millis();
                    eprintln!(
                        "{failed_at_s:.3} {}: after {waited_ms} ms: {e}",
                        host.name()
                    );
                }
            }
        }
        next += interval;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleets_hosts_send_one_after_another_at_equal_steps() {
        let interval = Duration::from_secs(10);
        for (hosts, groups) in [(7, 3), (1_500, 150), (20, 1), (3, 8)] {
            // Dealt round-robin, as `run` deals them: host i is host i / groups of group i % groups.
            let offsets: Vec<Duration> = (0..hosts)
                .map(|i| {
                    let spread = Spread {
                        group: i % groups,
                        groups,
                        hosts,
                    };
                    spread.offset(i / groups, interval)
                })
                .collect();
            for (i, offset) in offsets.iter().enumerate() {
                assert_eq!(
                    *offset,
                    interval * i as u32 / hosts as u32,
                    "{hosts} hosts, host {i}"
                );
            }
            assert!(
                offsets.windows(2).all(|w| w[0] < w[1]),
                "{hosts} hosts: one after another"
            );
        }
    }
}
