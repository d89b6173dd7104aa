//! A guest's history: figures per window over days, and what it has wasted so far.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;
use tickscope_wire::{GuestFacts, Hypervisor};

use super::analysed::{ANALYSIS_WINDOW_MS, AnalysedGuest, choose_facts, intervals, reading};
use crate::analysis::history::{self, Accumulated, Figures, Summary};
use crate::analysis::kernel::KernelFacts;
use crate::analysis::{Window, idle};
use crate::db::{Db, FactsSpanRow, IntervalRow, RollupRow};
use crate::domain::GuestId;
use crate::error::{AppError, AppResult};

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
        guest_id: GuestId,
        from_ms: i64,
        to_ms: i64,
    ) -> AppResult<History> {
        let mut history = History::load(db, guest_id, from_ms, from_ms).await?;
        let (samples, readings) = db
            .samples_between(guest_id, from_ms, to_ms, idle::DEFAULT_READING_SPAN_MS)
            .await?;
        history.samples = samples;
        history.readings = readings.iter().map(reading).collect();
        Ok(history)
    }

    /// The history of [from_ms, to_ms).
    pub async fn load(db: &Db, guest_id: GuestId, from_ms: i64, to_ms: i64) -> AppResult<History> {
        let (samples, readings) = db
            .samples_between(guest_id, from_ms, to_ms, idle::DEFAULT_READING_SPAN_MS)
            .await?;
        let rollups = db.rollups_between(guest_id, from_ms, to_ms).await?;

        let spans = db
            .facts_spans(guest_id)
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
        guest_ids: &[GuestId],
        from_ms: i64,
        to_ms: i64,
    ) -> AppResult<HashMap<GuestId, History>> {
        let stored = db
            .histories_between(guest_ids, from_ms, to_ms, idle::DEFAULT_READING_SPAN_MS)
            .await?;
        let mut histories: HashMap<GuestId, History> = guest_ids
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
            if let Some(h) = histories.get_mut(&sample.guest_id) {
                h.samples.push(sample);
            }
        }
        for r in &stored.readings {
            if let Some(h) = histories.get_mut(&r.guest_id) {
                h.readings.push(reading(r));
            }
        }
        for row in stored.rollups {
            if let Some(h) = histories.get_mut(&row.guest_id) {
                h.rollups.push(row.rollup);
            }
        }
        for row in stored.spans {
            let Ok(facts) = serde_json::from_str(&row.span.facts_json) else {
                continue;
            };
            if let Some(h) = histories.get_mut(&row.guest_id) {
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
            setup: guest.setup.clone(),
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
            .map(|r| (r.start_ms, r.summary))
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
) -> AppResult<HashMap<GuestId, WasteSoFar>> {
    let mut so_far = HashMap::new();
    for batch in guests.chunks(WASTE_SO_FAR_BATCH) {
        let ids: Vec<GuestId> = batch.iter().map(|g| g.id).collect();
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
        .map_err(|e| AppError::stopped("judging the guests' history", e))?;
        so_far.extend(judged);
    }
    Ok(so_far)
}
