//! The fleet as the pages and the API show it: stored windows, analysed per host, ranked.

pub mod current;
pub mod refresher;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;
use tickscope_agent::wire::{BlindSpot, FactsSource, GuestFacts, Hypervisor};

use crate::analysis::change::{self, Change};
use crate::analysis::cost::{self, CostModel};
use crate::analysis::history::{self, Accumulated, Figures, Summary};
use crate::analysis::kernel::KernelFacts;
use crate::analysis::plan::{PlanGroup, PlanGuest, PlannedChange};
use crate::analysis::{self, Interval, Verdict, Window, idle};
use crate::db::{
    Db, FactsRow, FactsSpanRow, GuestRow, GuestScope, HostRow, IdleReading, IntervalRow, RollupRow,
};
use crate::domain::GuestId;
use crate::error::{AppError, AppResult};

/// Samples from this far back (before a guest's newest one) are averaged into its figures.
pub const ANALYSIS_WINDOW_MS: i64 = 5 * 60 * 1000;
/// Guests not reported for this long are left out of the ranking (shut down or moved).
pub const ACTIVE_WITHIN_MS: i64 = 15 * 60 * 1000;

/// One guest with what the analysis made of it.
#[derive(Debug, Clone, Serialize)]
pub struct AnalysedGuest {
    pub id: i64,
    pub name: String,
    pub uuid: Option<String>,
    pub host: String,
    pub host_id: i64,
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
fn source_rank(source: &str) -> u8 {
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
fn best_facts(rows: Vec<FactsRow>, now_ms: i64) -> HashMap<i64, KernelFacts> {
    let mut by_guest: HashMap<i64, Vec<(String, i64, GuestFacts)>> = HashMap::new();
    for row in rows {
        if row
            .process_since_ms
            .is_some_and(|since_ms| row.received_ms < since_ms)
        {
            continue;
        }
        if let Ok(facts) = serde_json::from_str::<GuestFacts>(&row.facts_json) {
            by_guest
                .entry(row.guest_id.0)
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
fn choose_facts<'a>(
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

fn reading(r: &IdleReading) -> idle::Reading {
    idle::Reading {
        received_ms: r.received_ms,
        measured_ms: r.measured_ms,
        idle_fraction: r.idle_fraction,
    }
}

/// A guest's samples as intervals, each with the guest's own idle reading for that time.
fn intervals(samples: &[IntervalRow], readings: &[idle::Reading]) -> Vec<Interval> {
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
    mut facts: HashMap<i64, KernelFacts>,
) -> Vec<(Window, i64)> {
    let mut samples_of: HashMap<i64, Vec<IntervalRow>> = HashMap::new();
    for sample in samples {
        samples_of
            .entry(sample.guest_id.0)
            .or_default()
            .push(sample);
    }
    let mut readings_of: HashMap<i64, Vec<idle::Reading>> = HashMap::new();
    for r in &readings {
        readings_of
            .entry(r.guest_id.0)
            .or_default()
            .push(reading(r));
    }
    guests
        .iter()
        .map(|g| {
            let samples = samples_of.remove(&g.id.0).unwrap_or_default();
            let readings = readings_of.remove(&g.id.0).unwrap_or_default();
            let window = Window {
                hypervisor: g.hypervisor,
                vcpus: g.vcpus,
                intervals: intervals(&samples, &readings),
                wakeups_from_vcpu_threads: samples.iter().all(|s| s.from_vcpu_threads),
                boot_args: g.boot_args.clone(),
                facts: facts
                    .remove(&g.id.0)
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
    let mut by_host: BTreeMap<i64, Vec<(GuestRow, Window, i64)>> = BTreeMap::new();
    for (row, (window, intervals)) in rows.iter().zip(windows(&rows, samples, readings, facts)) {
        by_host
            .entry(row.host_id.0)
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
                id: row.id.0,
                name: row.name,
                uuid: row.uuid,
                host: row.host_name,
                host_id: row.host_id.0,
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
pub async fn guest(db: &Db, guest_id: i64, now_ms: i64) -> AppResult<Option<AnalysedGuest>> {
    let Some(host_id) = db.guest_host_id(GuestId(guest_id)).await? else {
        return Ok(None);
    };
    let scope = GuestScope::Host {
        host_id,
        guest_id: Some(GuestId(guest_id)),
        active_since_ms: now_ms - ACTIVE_WITHIN_MS,
    };
    Ok(analyse(db, scope, now_ms)
        .await?
        .into_iter()
        .find(|g| g.id == guest_id))
}

/// How far before and after a change its figures reach (never past the change before it).
pub const AROUND_CHANGE_MS: i64 = 60 * 60 * 1000;

/// Each guest's last kernel or command-line change with the host CPU of its idle intervals
/// before and after it, measured; only guests whose change has enough idle time on both sides.
/// `guest_id` limits it to one guest.
pub async fn changes(
    db: &Db,
    guest_id: Option<i64>,
    now_ms: i64,
) -> AppResult<HashMap<i64, Change>> {
    let last = last_changes(db.fact_changes(guest_id.map(GuestId)).await?);
    let (measured, _) = measure_changes(db, last, now_ms, &SettledChanges::new()).await?;
    Ok(measured)
}

/// Measurements of changes that lie far enough back that their figures can no longer change, by
/// (guest, change time): `None` for a change without enough idle time on a side.
pub type SettledChanges = HashMap<(i64, i64), Option<Change>>;

/// Measures each guest's last change, given as (at, previous) by guest; a change already in
/// `settled` is not read again. Returns the measured changes and every settled one among them.
pub(crate) async fn measure_changes(
    db: &Db,
    last: HashMap<i64, (i64, Option<i64>)>,
    now_ms: i64,
    settled: &SettledChanges,
) -> AppResult<(HashMap<i64, Change>, SettledChanges)> {
    let mut measured = HashMap::new();
    let mut now_settled = SettledChanges::new();
    for (guest, (at_ms, previous_ms)) in last {
        let change = match settled.get(&(guest, at_ms)) {
            Some(change) => *change,
            None => measure_change(db, guest, at_ms, previous_ms, now_ms).await?,
        };
        // Samples are received up to a report interval late; a minute's margin covers that.
        if now_ms > at_ms + AROUND_CHANGE_MS + 60_000 {
            now_settled.insert((guest, at_ms), change);
        }
        if let Some(change) = change {
            measured.insert(guest, change);
        }
    }
    Ok((measured, now_settled))
}

async fn measure_change(
    db: &Db,
    guest: i64,
    at_ms: i64,
    previous_ms: Option<i64>,
    now_ms: i64,
) -> AppResult<Option<Change>> {
    // Idle intervals only: the reboot into the new kernel, and any work around it, is not
    // what the change is about.
    let activity = |(samples, readings): (Vec<IntervalRow>, Vec<IdleReading>)| {
        let readings: Vec<idle::Reading> = readings.iter().map(reading).collect();
        idle::activity(&intervals(&samples, &readings))
    };
    let from_ms = previous_ms.map_or(at_ms - AROUND_CHANGE_MS, |p| {
        (p + 1).max(at_ms - AROUND_CHANGE_MS)
    });
    let before = activity(
        db.samples_between(
            GuestId(guest),
            from_ms,
            at_ms,
            idle::DEFAULT_READING_SPAN_MS,
        )
        .await?,
    );
    let to_ms = (at_ms + 1 + AROUND_CHANGE_MS).min(now_ms + 1);
    let after = activity(
        db.samples_between(
            GuestId(guest),
            at_ms + 1,
            to_ms,
            idle::DEFAULT_READING_SPAN_MS,
        )
        .await?,
    );
    let idle_share_after = after.idle_share().unwrap_or(0.0);
    Ok(change::measure(
        at_ms,
        &before.idle,
        &after.idle,
        idle_share_after,
    ))
}

/// Each guest's last change and the one before it, as (at, previous), from the changes every
/// source saw, oldest first. One reboot is seen by each source that reports that guest (the probe
/// at once, a guest agent up to its next question), so only the best source that saw changes
/// counts; the others would make one reboot look like two.
pub fn last_changes(changes: Vec<(GuestId, String, i64)>) -> HashMap<i64, (i64, Option<i64>)> {
    let mut by_guest: HashMap<i64, Vec<(String, i64)>> = HashMap::new();
    for (guest, source, at_ms) in changes {
        by_guest.entry(guest.0).or_default().push((source, at_ms));
    }
    by_guest
        .into_iter()
        .filter_map(|(guest, changes)| {
            let best = changes.iter().map(|(s, _)| source_rank(s)).max()?;
            let times: Vec<i64> = changes
                .iter()
                .filter(|(s, _)| source_rank(s) == best)
                .map(|(_, at)| *at)
                .collect();
            let at = *times.last()?;
            let previous = times.len().checked_sub(2).map(|i| times[i]);
            Some((guest, (at, previous)))
        })
        .collect()
}

/// The waste a guest accumulated over the last day and the last week.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct WasteSoFar {
    pub last_24h: Accumulated,
    pub last_7d: Accumulated,
}

/// A guest's stored history over a span: its samples, idle readings and facts, read and parsed
/// once for everything a page shows of it (waste so far, charts).
pub struct History {
    samples: Vec<IntervalRow>,
    /// What was rolled up of the same time, once its raw samples were deleted.
    rollups: Vec<RollupRow>,
    readings: Vec<idle::Reading>,
    /// Each set of facts: (source, first received, last received, facts).
    spans: Vec<(String, i64, i64, GuestFacts)>,
}

impl History {
    /// The raw samples of [from_ms, to_ms) without the rollups: what the retention rolls up.
    pub async fn load_samples(
        db: &Db,
        guest_id: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> AppResult<History> {
        let mut history = History::load(db, guest_id, from_ms, from_ms).await?;
        let (samples, readings) = db
            .samples_between(
                GuestId(guest_id),
                from_ms,
                to_ms,
                idle::DEFAULT_READING_SPAN_MS,
            )
            .await?;
        history.samples = samples;
        history.readings = readings.iter().map(reading).collect();
        Ok(history)
    }

    /// The history of [from_ms, to_ms).
    pub async fn load(db: &Db, guest_id: i64, from_ms: i64, to_ms: i64) -> AppResult<History> {
        let (samples, readings) = db
            .samples_between(
                GuestId(guest_id),
                from_ms,
                to_ms,
                idle::DEFAULT_READING_SPAN_MS,
            )
            .await?;
        let rollups = db
            .rollups_between(GuestId(guest_id), from_ms, to_ms)
            .await?;
        let spans = db
            .facts_spans(GuestId(guest_id))
            .await?
            .into_iter()
            .filter_map(|row: FactsSpanRow| {
                let facts = serde_json::from_str(&row.facts_json).ok()?;
                Some((row.source, row.first_received_ms, row.received_ms, facts))
            })
            .collect();
        Ok(History {
            samples,
            rollups,
            readings: readings.iter().map(reading).collect(),
            spans,
        })
    }

    /// The histories of [from_ms, to_ms) of `guest_ids`, read in one query per table rather than
    /// per guest; each is what [`History::load`] gives for its guest.
    pub async fn load_many(
        db: &Db,
        guest_ids: &[i64],
        from_ms: i64,
        to_ms: i64,
    ) -> AppResult<HashMap<i64, History>> {
        let stored = db
            .histories_between(
                &guest_ids.iter().copied().map(GuestId).collect::<Vec<_>>(),
                from_ms,
                to_ms,
                idle::DEFAULT_READING_SPAN_MS,
            )
            .await?;
        let mut histories: HashMap<i64, History> = guest_ids
            .iter()
            .map(|&id| {
                let empty = History {
                    samples: Vec::new(),
                    rollups: Vec::new(),
                    readings: Vec::new(),
                    spans: Vec::new(),
                };
                (id, empty)
            })
            .collect();
        // Rows come ordered by guest, then time, as each guest's own queries order them.
        for sample in stored.samples {
            if let Some(h) = histories.get_mut(&sample.guest_id.0) {
                h.samples.push(sample);
            }
        }
        for r in &stored.readings {
            if let Some(h) = histories.get_mut(&r.guest_id.0) {
                h.readings.push(reading(r));
            }
        }
        for row in stored.rollups {
            if let Some(h) = histories.get_mut(&row.guest_id.0) {
                h.rollups.push(row.rollup);
            }
        }
        for row in stored.spans {
            let Ok(facts) = serde_json::from_str(&row.span.facts_json) else {
                continue;
            };
            if let Some(h) = histories.get_mut(&row.guest_id.0) {
                let s = row.span;
                h.spans
                    .push((s.source, s.first_received_ms, s.received_ms, facts));
            }
        }
        Ok(histories)
    }

    /// The facts the guest had at a time: those first received by then, as the ranking would
    /// have picked them then, without their idle fraction (the window's own readings stand in
    /// for it).
    fn facts_at(&self, at_ms: i64) -> Option<KernelFacts> {
        let candidates = self
            .spans
            .iter()
            .filter(|(_, first_ms, _, _)| *first_ms <= at_ms)
            .map(|(source, _, last_ms, facts)| (source.as_str(), (*last_ms).min(at_ms), facts));
        let mut facts = choose_facts(candidates, at_ms)?;
        facts.idle_fraction = None;
        Some(facts)
    }

    fn window(&self, guest: &AnalysedGuest, samples: &[IntervalRow], end_ms: i64) -> Window {
        Window {
            hypervisor: Hypervisor::from_name(&guest.hypervisor),
            vcpus: samples.last().map_or(guest.vcpus, |s| s.vcpus),
            intervals: intervals(samples, &self.readings),
            wakeups_from_vcpu_threads: samples.iter().all(|s| s.from_vcpu_threads),
            boot_args: guest.boot_args.clone(),
            facts: self.facts_at(end_ms),
            uses_kvm: guest.uses_kvm,
            host_halt_poll_ns: None,
        }
    }

    /// The samples received from `from_ms` on, cut into buckets of `bucket_ms` (on the server
    /// clock), as (bucket start, samples), oldest first; empty buckets are left out.
    fn buckets(&self, from_ms: i64, bucket_ms: i64) -> BTreeMap<i64, Vec<IntervalRow>> {
        let mut buckets: BTreeMap<i64, Vec<IntervalRow>> = BTreeMap::new();
        for sample in self.samples.iter().filter(|s| s.received_ms >= from_ms) {
            buckets
                .entry(sample.received_ms.div_euclid(bucket_ms) * bucket_ms)
                .or_default()
                .push(sample.clone());
        }
        buckets
    }
}

/// How far back [`History::waste_so_far`] reads.
pub const WASTE_SO_FAR_MS: i64 = 7 * 24 * 60 * 60 * 1000;

impl History {
    /// Each analysis window from `from_ms` on, judged and priced as the ranking would, as
    /// (window start, summary), oldest first: raw samples judged now against the host's current
    /// baseline, and rolled-up windows as they were stored.
    pub fn summaries(&self, guest: &AnalysedGuest, from_ms: i64) -> Vec<(i64, Summary)> {
        let mut windows: Vec<(i64, Summary)> = self
            .rollups
            .iter()
            .filter(|r| r.start_ms >= from_ms)
            .map(|r| (r.start_ms, r.summary()))
            .collect();
        windows.extend(self.raw_summaries(guest, from_ms));
        windows.sort_by_key(|(start_ms, _)| *start_ms);
        windows
    }

    /// The analysis windows of the raw samples from `from_ms` on, judged now.
    pub fn raw_summaries(&self, guest: &AnalysedGuest, from_ms: i64) -> Vec<(i64, Summary)> {
        let baseline = &guest.verdict.waste.baseline;
        self.buckets(from_ms, ANALYSIS_WINDOW_MS)
            .into_iter()
            .map(|(start_ms, samples)| {
                let window = self.window(guest, &samples, start_ms + ANALYSIS_WINDOW_MS);
                (start_ms, history::summarise(&window, baseline))
            })
            .collect()
    }

    /// What `guest` wasted over the last 24 hours and 7 days (the history must reach back
    /// [`WASTE_SO_FAR_MS`]): the analysis windows that began in each.
    pub fn waste_so_far(&self, guest: &AnalysedGuest, now_ms: i64) -> WasteSoFar {
        const DAY_MS: i64 = 24 * 60 * 60 * 1000;
        let mut day = Summary::default();
        let mut week = Summary::default();
        for (start_ms, summary) in self.summaries(guest, now_ms - WASTE_SO_FAR_MS) {
            if start_ms >= now_ms - DAY_MS {
                day.add(&summary);
            }
            week.add(&summary);
        }
        WasteSoFar {
            last_24h: day.accumulated(),
            last_7d: week.accumulated(),
        }
    }

    /// The history from `from_ms` on in buckets of `bucket_ms`, as (bucket start, figures).
    /// A bucket of an analysis window or more is the sum of its windows, each judged as the
    /// ranking judges the present; a shorter one (raw samples only) is judged whole.
    pub fn figures(
        &self,
        guest: &AnalysedGuest,
        from_ms: i64,
        bucket_ms: i64,
    ) -> Vec<(i64, Figures)> {
        if bucket_ms < ANALYSIS_WINDOW_MS {
            let baseline = &guest.verdict.waste.baseline;
            return self
                .buckets(from_ms, bucket_ms)
                .into_iter()
                .map(|(start_ms, samples)| {
                    let window = self.window(guest, &samples, start_ms + bucket_ms);
                    (start_ms, history::figures(&window, baseline))
                })
                .collect();
        }
        let mut buckets: BTreeMap<i64, Summary> = BTreeMap::new();
        for (start_ms, summary) in self.summaries(guest, from_ms) {
            buckets
                .entry(start_ms.div_euclid(bucket_ms) * bucket_ms)
                .or_default()
                .add(&summary);
        }
        buckets
            .into_iter()
            .map(|(start_ms, sum)| (start_ms, sum.figures()))
            .collect()
    }
}

/// Guests whose history [`waste_so_far_of`] reads at once: with raw samples kept 48 hours at one
/// every 10 s, 32 guests are some 550,000 samples (about 35 MB) in memory at a time.
pub const WASTE_SO_FAR_BATCH: usize = 32;

/// What each of `guests` wasted over the last 24 hours and 7 days up to `now_ms`, as its page
/// shows it ([`History::waste_so_far`]); their histories are read [`WASTE_SO_FAR_BATCH`] guests
/// at a time, one query per table for each batch, not one per guest.
pub async fn waste_so_far_of(
    db: &Db,
    guests: &[Arc<AnalysedGuest>],
    now_ms: i64,
) -> AppResult<HashMap<i64, WasteSoFar>> {
    let mut so_far = HashMap::new();
    for batch in guests.chunks(WASTE_SO_FAR_BATCH) {
        let ids: Vec<i64> = batch.iter().map(|g| g.id).collect();
        let histories = History::load_many(db, &ids, now_ms - WASTE_SO_FAR_MS, now_ms + 1).await?;
        // Judging a batch's samples is tens of milliseconds of CPU: off the async threads, so
        // that other requests are not held up behind an export.
        let batch = batch.to_vec();
        let judged = tokio::task::spawn_blocking(move || {
            batch
                .iter()
                .filter_map(|g| Some((g.id, histories.get(&g.id)?.waste_so_far(g, now_ms))))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| AppError::Internal(format!("judging the guests' history: {e}")))?;
        so_far.extend(judged);
    }
    Ok(so_far)
}

/// The upgrade plan of the active guests.
pub fn plan(guests: &[Arc<AnalysedGuest>]) -> Vec<PlanGroup> {
    let rows: Vec<PlanGuest> = guests.iter().map(|g| plan_guest(g)).collect();
    analysis::plan::plan(&rows)
}

/// What the plan needs of one guest.
pub fn plan_guest(g: &AnalysedGuest) -> PlanGuest {
    PlanGuest {
        id: g.id,
        name: g.name.clone(),
        host: g.host.clone(),
        distro: g.kernel.as_ref().and_then(|k| k.distro.clone()),
        kernel_release: g.kernel.as_ref().and_then(|k| k.kernel_release.clone()),
        tick_mode: g.verdict.classification.mode.as_str(),
        tick_mode_confidence: g.verdict.classification.confidence,
        wasted_cpu_pct: g.wasted_cpu_pct(),
        change: analysis::plan::planned(&g.verdict.suggestions).map(PlannedChange::from),
    }
}

/// The key of the plan group a guest belongs to (see [`analysis::plan::group_key`]).
pub fn group_key_of(g: &AnalysedGuest) -> String {
    let k = g.kernel.as_ref();
    analysis::plan::group_key(
        k.and_then(|k| k.distro.as_deref()),
        k.and_then(|k| k.kernel_release.as_deref()),
        g.verdict.classification.mode.as_str(),
    )
}

/// Fleet totals for the overview.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Totals {
    pub guests: usize,
    pub hosts: usize,
    pub ticking: usize,
    /// Summed waste, in host cores.
    pub wasted_cores: f64,
    /// The same waste per day and year, in energy and money, under `cost_model`.
    pub wasted_core_hours_per_day: f64,
    pub wasted_kwh_per_year: f64,
    pub wasted_cost_per_year: f64,
    pub cost_model: CostModel,
}

pub fn totals(guests: &[Arc<AnalysedGuest>], model: &CostModel) -> Totals {
    let hosts: std::collections::BTreeSet<i64> = guests.iter().map(|g| g.host_id).collect();
    let wasted_pct: f64 = guests.iter().map(|g| g.wasted_cpu_pct()).sum();
    let yearly = cost::of_waste(wasted_pct, model);
    Totals {
        guests: guests.len(),
        hosts: hosts.len(),
        ticking: guests
            .iter()
            .filter(|g| g.verdict.classification.mode.is_wasteful())
            .count(),
        wasted_cores: yearly.cores,
        wasted_core_hours_per_day: yearly.core_hours_per_day,
        wasted_kwh_per_year: yearly.kwh_per_year,
        wasted_cost_per_year: yearly.money_per_year,
        cost_model: model.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn one_reboot_seen_by_two_sources_is_one_change() {
        let changes = vec![
            (1, "probe_channel".to_string(), 1_000),
            (1, "probe_channel".to_string(), 5_000),
            // The guest agent noticed the second reboot ten minutes later.
            (1, "qemu_guest_agent".to_string(), 605_000),
            // A guest only a guest agent reports: its changes count.
            (2, "qemu_guest_agent".to_string(), 7_000),
        ];
        let last = last_changes(
            changes
                .into_iter()
                .map(|(g, s, at)| (GuestId(g), s, at))
                .collect(),
        );
        assert_eq!(last[&1], (5_000, Some(1_000)));
        assert_eq!(last[&2], (7_000, None));
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
                .get(&1)
                .map(|k| (k.source.as_str(), k.kernel_release.as_deref().unwrap()));
            assert_eq!(got, expected);
        }
    }
}

/// A host's tickless baseline for one hypervisor family.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HostBaseline {
    pub hypervisor: String,
    /// Host CPU an idle tickless vCPU costs there, in % of a core.
    pub cpu_pct_per_vcpu: f64,
    /// Tickless guests it was learned from; 0 for the default.
    pub learned_from_guests: usize,
}

/// One host's share of the fleet's waste.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HostTotals {
    pub host_id: i64,
    pub host: String,
    pub guests: usize,
    pub ticking: usize,
    /// Summed waste of its guests, in % of one core.
    pub wasted_cpu_pct: f64,
    pub wasted_core_hours_per_day: f64,
    pub wasted_kwh_per_year: f64,
    pub wasted_cost_per_year: f64,
    pub baselines: Vec<HostBaseline>,
    /// What the host's agent says it cannot see, each with its fix.
    pub blind_spots: Vec<BlindSpot>,
}

/// Adds to the hosts' totals what their agents said they cannot see, and the hosts that
/// reported lately without any guest (an agent that sees no VM at all may be the blindest).
pub fn with_host_rows(hosts: &mut Vec<HostTotals>, rows: &[HostRow], now_ms: i64) {
    for row in rows {
        match hosts.iter_mut().find(|h| h.host_id == row.id.0) {
            Some(totals) => totals.blind_spots = row.blind_spots(),
            None if now_ms - row.last_report_ms <= ACTIVE_WITHIN_MS => hosts.push(HostTotals {
                host_id: row.id.0,
                host: row.name.clone(),
                guests: 0,
                ticking: 0,
                wasted_cpu_pct: 0.0,
                wasted_core_hours_per_day: 0.0,
                wasted_kwh_per_year: 0.0,
                wasted_cost_per_year: 0.0,
                baselines: Vec::new(),
                blind_spots: row.blind_spots(),
            }),
            None => {}
        }
    }
}

/// Totals per host of the active guests, most wasteful host first.
pub fn host_totals(guests: &[Arc<AnalysedGuest>], model: &CostModel) -> Vec<HostTotals> {
    let mut by_host: BTreeMap<i64, Vec<&AnalysedGuest>> = BTreeMap::new();
    for g in guests {
        by_host.entry(g.host_id).or_default().push(g);
    }
    let mut hosts: Vec<HostTotals> = by_host
        .into_iter()
        .map(|(host_id, guests)| {
            let wasted_cpu_pct: f64 = guests.iter().map(|g| g.wasted_cpu_pct()).sum();
            let yearly = cost::of_waste(wasted_cpu_pct, model);
            let mut baselines: BTreeMap<&str, HostBaseline> = BTreeMap::new();
            for g in &guests {
                let b = g.verdict.waste.baseline;
                baselines.entry(&g.hypervisor).or_insert(HostBaseline {
                    hypervisor: g.hypervisor.clone(),
                    cpu_pct_per_vcpu: b.cpu_pct_per_vcpu,
                    learned_from_guests: b.learned_from_guests,
                });
            }
            HostTotals {
                host_id,
                host: guests[0].host.clone(),
                guests: guests.len(),
                ticking: guests
                    .iter()
                    .filter(|g| g.verdict.classification.mode.is_wasteful())
                    .count(),
                wasted_cpu_pct,
                wasted_core_hours_per_day: yearly.core_hours_per_day,
                wasted_kwh_per_year: yearly.kwh_per_year,
                wasted_cost_per_year: yearly.money_per_year,
                baselines: baselines.into_values().collect(),
                blind_spots: Vec::new(),
            }
        })
        .collect();
    hosts.sort_by(|a, b| {
        b.wasted_cpu_pct
            .total_cmp(&a.wasted_cpu_pct)
            .then_with(|| a.host.cmp(&b.host))
    });
    hosts
}
