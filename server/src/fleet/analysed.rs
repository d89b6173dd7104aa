//! Loading the fleet: each active guest's stored window, analysed, and the ranking.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;
use tickscope_agent::wire::{FactsSource, GuestFacts};

use crate::analysis::kernel::KernelFacts;
use crate::analysis::{self, Interval, Verdict, Window, idle};

use crate::db::{Db, FactsRow, GuestRow, GuestScope, IdleReading, IntervalRow};
use crate::domain::{GuestId, HostId};
use crate::error::AppResult;

/// Samples from this far back (before a guest's newest one) are averaged into its figures.
pub const ANALYSIS_WINDOW_MS: i64 = 5 * 60 * 1000;
/// Guests not reported for this long are left out of the ranking (shut down or moved).
pub const ACTIVE_WITHIN_MS: i64 = 15 * 60 * 1000;

/// One guest with what the analysis made of it.
#[derive(Debug, Clone, Serialize)]
pub struct AnalysedGuest {
    pub id: GuestId,
    pub name: String,
    pub uuid: Option<String>,
    pub host: String,
    pub host_id: HostId,
    pub hypervisor: String,
    pub management: Option<String>,
    pub vcpus: u32,
    pub pid: i64,
    pub boot_args: Option<String>,
    /// Whether it runs on KVM (false: another accelerator, such as QEMU's TCG), when known.
    pub uses_kvm: Option<bool>,
    /// Where the agent read its CPU time (`cgroup`, `schedstat`, `stat_ticks`), when it said.
    pub cpu_source: Option<String>,
    pub last_seen_ms: i64,
    /// How many report intervals the figures average over.
    pub intervals: i64,
    pub window_s: f64,
    /// When the analysis ran (server clock): the figures are as of then. Not serialised with
    /// the rest: two analyses of the same stored data conclude the same whenever they ran.
    #[serde(skip)]
    pub analysed_ms: i64,
    /// What the guest reported about its kernel, from its best source.
    pub kernel: Option<KernelFacts>,
    pub verdict: Verdict,
}

impl AnalysedGuest {
    pub fn wasted_cpu_pct(&self) -> f64 {
        self.verdict.waste.wasted_cpu_pct
    }

    /// Where the lookback window its verdict was judged over starts: the analysis window up to
    /// its last report (which ends it).
    pub fn window_start_ms(&self) -> i64 {
        self.last_seen_ms - ANALYSIS_WINDOW_MS
    }
}

/// Facts older than this are not used: the probe delivers every minute and guest agents are
/// asked every 10 minutes (an hour at most when they do not answer).
pub const FACTS_MAX_AGE_MS: i64 = 2 * 60 * 60 * 1000;

/// Preference among sources: the probe knows everything, guest agents only the release.
pub(crate) fn source_rank(source: &str) -> u8 {
    match FactsSource::from_name(source) {
        FactsSource::ProbeChannel | FactsSource::ProbeDirect => 3,
        FactsSource::QemuGuestAgent => 2,
        FactsSource::VirtualboxProperties => 1,
        FactsSource::Other => 0,
    }
}

/// Each guest's facts from its best fresh source; but when a newer source reports another
/// kernel release, the guest was upgraded since the better source last spoke, and the newer
/// one wins. Facts received before the guest's current VM process was first reported belong
/// to an earlier boot and are not used at all.
fn best_facts(rows: Vec<FactsRow>, now_ms: i64) -> HashMap<GuestId, KernelFacts> {
    let mut by_guest: HashMap<GuestId, Vec<(String, i64, GuestFacts)>> = HashMap::new();
    for row in rows {
        if row
            .process_since_ms
            .is_some_and(|since_ms| row.received_ms < since_ms)
        {
            continue;
        }
        if let Ok(facts) = serde_json::from_str::<GuestFacts>(&row.facts_json) {
            by_guest
                .entry(row.guest_id)
                .or_default()
                .push((row.source, row.received_ms, facts));
        }
    }
    by_guest
        .into_iter()
        .filter_map(|(guest_id, candidates)| {
            let candidates = candidates.iter().map(|(s, at, f)| (s.as_str(), *at, f));
            Some((guest_id, choose_facts(candidates, now_ms)?))
        })
        .collect()
}

/// One guest's facts at `now_ms` from candidates (source, received ms, facts): see
/// [`best_facts`]. Candidates older than `FACTS_MAX_AGE_MS` are not used.
pub(crate) fn choose_facts<'a>(
    candidates: impl Iterator<Item = (&'a str, i64, &'a GuestFacts)>,
    now_ms: i64,
) -> Option<KernelFacts> {
    let fresh: Vec<(&str, i64, &GuestFacts)> = candidates
        .filter(|(_, received_ms, _)| now_ms - received_ms <= FACTS_MAX_AGE_MS)
        .collect();
    let best = fresh
        .iter()
        .max_by_key(|(source, received_ms, _)| (source_rank(source), *received_ms))?;
    let upgraded = fresh
        .iter()
        .filter(|(_, received_ms, facts)| {
            *received_ms > best.1
                && facts.kernel_release.is_some()
                && best.2.kernel_release.is_some()
                && facts.kernel_release != best.2.kernel_release
        })
        .max_by_key(|(_, received_ms, _)| *received_ms);
    let (source, received_ms, facts) = upgraded.unwrap_or(best);
    let age_s = (now_ms - received_ms).max(0) as f64 / 1000.0;
    Some(KernelFacts::new(facts, source, age_s))
}

pub(crate) fn reading(r: &IdleReading) -> idle::Reading {
    idle::Reading {
        received_ms: r.received_ms,
        measured_ms: r.measured_ms,
        idle_fraction: r.idle_fraction,
    }
}

/// A guest's samples as intervals, each with the guest's own idle reading for that time.
pub(crate) fn intervals(samples: &[IntervalRow], readings: &[idle::Reading]) -> Vec<Interval> {
    samples
        .iter()
        .map(|s| Interval {
            length_s: s.length_ms / 1000.0,
            vcpus: s.vcpus,
            host_cpu_s: s.host_cpu_s,
            wakeups: u64::try_from(s.vcpu_wakeups).unwrap_or(0),
            guest_idle_fraction: idle::reading_for(readings, s.received_ms, s.length_ms),
        })
        .collect()
}

/// Each guest's window, with how many samples it holds.
fn windows(
    guests: &[GuestRow],
    samples: Vec<IntervalRow>,
    readings: Vec<IdleReading>,
    mut facts: HashMap<GuestId, KernelFacts>,
) -> Vec<(Window, i64)> {
    let mut samples_of: HashMap<GuestId, Vec<IntervalRow>> = HashMap::new();
    for sample in samples {
        samples_of.entry(sample.guest_id).or_default().push(sample);
    }
    let mut readings_of: HashMap<GuestId, Vec<idle::Reading>> = HashMap::new();
    for r in &readings {
        readings_of.entry(r.guest_id).or_default().push(reading(r));
    }
    guests
        .iter()
        .map(|g| {
            let samples = samples_of.remove(&g.id).unwrap_or_default();
            let readings = readings_of.remove(&g.id).unwrap_or_default();
            let window = Window {
                hypervisor: g.hypervisor,
                vcpus: g.vcpus,
                intervals: intervals(&samples, &readings),
                wakeups_from_vcpu_threads: samples.iter().all(|s| s.from_vcpu_threads),
                boot_args: g.boot_args.clone(),
                facts: facts
                    .remove(&g.id)
                    .map(|f| f.with_host_seen_cmdline(g.boot_args.as_deref())),
                uses_kvm: g.uses_kvm,
                host_halt_poll_ns: g.host_halt_poll_ns.and_then(|ns| u64::try_from(ns).ok()),
            };
            (window, samples.len() as i64)
        })
        .collect()
}

/// Analyses the guests in `scope` host by host (each host learns its own baseline).
pub(crate) async fn analyse(
    db: &Db,
    scope: GuestScope,
    now_ms: i64,
) -> AppResult<Vec<AnalysedGuest>> {
    let rows = db.guests_in(scope).await?;
    let samples = db.window_intervals(scope, ANALYSIS_WINDOW_MS).await?;
    let readings = db
        .window_idle_readings(scope, ANALYSIS_WINDOW_MS, idle::DEFAULT_READING_SPAN_MS)
        .await?;
    let host = match scope {
        GuestScope::Host { host_id, .. } => Some(host_id),
        GuestScope::Active { .. } => None,
    };
    let facts = best_facts(db.latest_facts(host).await?, now_ms);
    let mut by_host: BTreeMap<HostId, Vec<(GuestRow, Window, i64)>> = BTreeMap::new();
    for (row, (window, intervals)) in rows.iter().zip(windows(&rows, samples, readings, facts)) {
        by_host
            .entry(row.host_id)
            .or_default()
            .push((row.clone(), window, intervals));
    }
    let mut guests = Vec::new();
    for host_guests in by_host.into_values() {
        let windows: Vec<Window> = host_guests.iter().map(|(_, w, _)| w.clone()).collect();
        let verdicts = analysis::analyse_host(&windows);
        for ((row, window, intervals), verdict) in host_guests.into_iter().zip(verdicts) {
            guests.push(AnalysedGuest {
                window_s: window.total().length_s,
                analysed_ms: now_ms,
                kernel: window.facts,
                id: row.id,
                name: row.name,
                uuid: row.uuid,
                host: row.host_name,
                host_id: row.host_id,
                hypervisor: row.hypervisor.as_str().to_string(),
                management: row.management,
                vcpus: row.vcpus,
                pid: row.pid,
                boot_args: row.boot_args,
                uses_kvm: row.uses_kvm,
                cpu_source: row.cpu_source,
                last_seen_ms: row.last_seen_ms,
                intervals,
                verdict,
            });
        }
    }
    Ok(guests)
}

/// Orders guests most wasteful first; ties by host CPU, then name.
pub fn rank(guests: &mut [Arc<AnalysedGuest>]) {
    guests.sort_by(|a, b| {
        b.wasted_cpu_pct()
            .total_cmp(&a.wasted_cpu_pct())
            .then_with(|| {
                let cpu = |g: &AnalysedGuest| g.verdict.rates.map_or(0.0, |r| r.host_cpu_pct);
                cpu(b).total_cmp(&cpu(a))
            })
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// One guest, active or not, analysed against its host's active peers as in the ranking;
/// `None` if there is no such guest.
pub async fn guest(db: &Db, guest_id: GuestId, now_ms: i64) -> AppResult<Option<AnalysedGuest>> {
    let Some(host_id) = db.guest_host_id(guest_id).await? else {
        return Ok(None);
    };
    let scope = GuestScope::Host {
        host_id,
        guest_id: Some(guest_id),
        active_since_ms: now_ms - ACTIVE_WITHIN_MS,
    };
    Ok(analyse(db, scope, now_ms)
        .await?
        .into_iter()
        .find(|g| g.id == guest_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::FactsRow;

    fn row(guest_id: i64, source: &str, received_ms: i64, release: &str) -> FactsRow {
        FactsRow {
            guest_id: GuestId(guest_id),
            source: source.into(),
            received_ms,
            facts_json: serde_json::json!({"kernel_release": release}).to_string(),
            process_since_ms: None,
        }
    }

    fn since(mut row: FactsRow, process_since_ms: i64) -> FactsRow {
        row.process_since_ms = Some(process_since_ms);
        row
    }

    #[test]
    fn the_best_fresh_source_wins_unless_a_newer_one_saw_another_kernel() {
        let now = 10 * 3_600_000;
        let cases = [
            // (rows, expected source, expected release)
            (
                vec![
                    row(1, "qemu_guest_agent", now - 1000, "6.1"),
                    row(1, "probe_channel", now - 50_000, "6.1"),
                ],
                Some(("probe_channel", "6.1")),
            ),
            // The probe last spoke before the upgrade; the guest agent saw the new kernel.
            (
                vec![
                    row(1, "probe_channel", now - 900_000, "6.1"),
                    row(1, "qemu_guest_agent", now - 1000, "6.12"),
                ],
                Some(("qemu_guest_agent", "6.12")),
            ),
            // Facts older than the limit are not used at all.
            (
                vec![row(1, "probe_channel", now - FACTS_MAX_AGE_MS - 1, "6.1")],
                None,
            ),
            // The VM process was restarted after the probe last spoke: its facts describe the
            // previous boot, and the guest agent's, received since, are all there is.
            (
                vec![
                    since(row(1, "probe_channel", now - 60_000, "6.1"), now - 30_000),
                    since(
                        row(1, "qemu_guest_agent", now - 10_000, "6.12"),
                        now - 30_000,
                    ),
                ],
                Some(("qemu_guest_agent", "6.12")),
            ),
            (
                vec![since(
                    row(1, "probe_channel", now - 60_000, "6.1"),
                    now - 30_000,
                )],
                None,
            ),
            // Facts received with the report that first showed the process belong to it.
            (
                vec![since(
                    row(1, "probe_channel", now - 30_000, "6.1"),
                    now - 30_000,
                )],
                Some(("probe_channel", "6.1")),
            ),
        ];
        for (rows, expected) in cases {
            let best = best_facts(rows, now);
            let got = best
                .get(&GuestId(1))
                .map(|k| (k.source.as_str(), k.kernel_release.as_deref().unwrap()));
            assert_eq!(got, expected);
        }
    }
}
