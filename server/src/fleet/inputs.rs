//! What one guest's analysis reads, held in memory: its row, the samples and idle readings of
//! its window, and its newest facts from each source.
//!
//! The live fleet keeps these for every active guest and feeds them with what each report
//! stored ([`GuestInputs::apply`]), so that a report costs an update of its guests rather than a
//! read of its host's window. The same type is loaded from the database ([`load`]) when the
//! server starts, for a guest the memory does not hold, and for the full analysis the tests
//! compare the incremental one with: one analysis, two ways to its inputs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tickscope_wire::GuestFacts;

use super::analysed::{
    ACTIVE_WITHIN_MS, ANALYSIS_WINDOW_MS, AnalysedGuest, choose_facts, intervals, reading,
};
use crate::analysis::platform::VmSetup;
use crate::analysis::{self, Window, idle};
use crate::db::{
    Db, FactsRow, GuestRow, GuestScope, IdleReading, IntervalRow, ReportedSample, StoredGuest,
};
use crate::domain::{GuestId, HostId, ReportId};
use crate::error::AppResult;

/// How far before a guest's newest sample its idle readings can still cover a sample of its
/// window.
const READINGS_REACH_MS: i64 = ANALYSIS_WINDOW_MS + idle::DEFAULT_READING_SPAN_MS;

/// One source's newest facts of a guest, parsed once.
#[derive(Debug, Clone)]
struct SourceFacts {
    received_ms: i64,
    facts: Arc<GuestFacts>,
}

/// One guest's analysis inputs.
#[derive(Debug, Clone)]
pub struct GuestInputs {
    pub row: GuestRow,
    /// The window's samples, oldest first (by arrival, then as stored).
    samples: Vec<IntervalRow>,
    /// Idle readings that can cover them, oldest first (by arrival, then source).
    readings: Vec<IdleReading>,
    /// The newest facts from each source, by source name.
    facts: BTreeMap<String, SourceFacts>,
}

impl GuestInputs {
    pub fn from_row(row: GuestRow) -> GuestInputs {
        GuestInputs {
            row,
            samples: Vec::new(),
            readings: Vec::new(),
            facts: BTreeMap::new(),
        }
    }

    /// Takes in what one report stored for this guest. The row is the one the store returned:
    /// the truth as of that report, whatever order reports arrived in.
    pub fn apply(&mut self, stored: &StoredGuest) {
        self.row = stored.row.clone();
        insert_sorted(&mut self.samples, stored.sample.clone(), |s| s.received_ms);
        if let Some(facts) = &stored.facts {
            if let Some(reading) = &facts.reading {
                insert_sorted(&mut self.readings, reading.clone(), |r| {
                    (r.received_ms, r.source.clone())
                });
            }
            self.set_facts(&facts.source, facts.received_ms, &facts.facts_json);
        }
        self.prune();
    }

    /// Takes in what a follower read of the guest's host (see [`load_new`]): the row now, the
    /// samples of the reports stored since its last read, and the window's readings and newest
    /// facts as [`load`] reads them. A sample already held (this server stored its report, or
    /// the last read overlapped this one) is not taken twice; facts already parsed are kept.
    pub fn catch_up(
        &mut self,
        row: GuestRow,
        samples: impl IntoIterator<Item = IntervalRow>,
        readings: Vec<IdleReading>,
        facts: &[FactsRow],
    ) {
        self.row = row;
        for sample in samples {
            if !self.samples.iter().rev().any(|s| same_sample(s, &sample)) {
                insert_sorted(&mut self.samples, sample, |s| s.received_ms);
            }
        }
        self.readings = readings;
        let mut parsed = std::mem::take(&mut self.facts);
        for f in facts {
            match parsed.remove(&f.source) {
                Some(held) if held.received_ms == f.received_ms => {
                    self.facts.insert(f.source.clone(), held);
                }
                _ => self.set_facts(&f.source, f.received_ms, &f.facts_json),
            }
        }
        self.prune();
    }

    /// Takes in facts a guest posted itself.
    pub fn apply_facts(&mut self, facts: &crate::db::StoredFacts) {
        if let Some(reading) = &facts.reading {
            insert_sorted(&mut self.readings, reading.clone(), |r| {
                (r.received_ms, r.source.clone())
            });
        }
        self.set_facts(&facts.source, facts.received_ms, &facts.facts_json);
        self.prune();
    }

    fn set_facts(&mut self, source: &str, received_ms: i64, facts_json: &str) {
        // Facts that do not parse are skipped, as the analysis from the database skips them.
        match serde_json::from_str::<GuestFacts>(facts_json) {
            Ok(facts) => {
                self.facts.insert(
                    source.to_string(),
                    SourceFacts {
                        received_ms,
                        facts: Arc::new(facts),
                    },
                );
            }
            Err(_) => {
                self.facts.remove(source);
            }
        }
    }

    /// Drops the samples and readings that fell out of the window.
    fn prune(&mut self) {
        let last_seen_ms = self.row.last_seen_ms;
        self.samples
            .retain(|s| s.received_ms > last_seen_ms - ANALYSIS_WINDOW_MS);
        self.readings
            .retain(|r| r.received_ms > last_seen_ms - READINGS_REACH_MS);
    }

    /// The window the analysis judges, with how many samples it holds. Facts received before
    /// the guest's current VM process was first reported belong to an earlier boot and are not
    /// used.
    pub fn window(&self, now_ms: i64) -> (Window, i64) {
        let readings: Vec<idle::Reading> = self.readings.iter().map(reading).collect();
        let since_ms = self.row.process_since_ms;
        let candidates = self
            .facts
            .iter()
            .filter(|(_, f)| since_ms.is_none_or(|since_ms| f.received_ms >= since_ms))
            .map(|(source, f)| (source.as_str(), f.received_ms, f.facts.as_ref()));
        let row = &self.row;
        let window = Window {
            hypervisor: row.hypervisor,
            vcpus: row.vm.vcpus,
            intervals: intervals(&self.samples, &readings),
            wakeups_from_vcpu_threads: self.samples.iter().all(|s| s.from_vcpu_threads),
            boot_args: row.vm.boot_args.clone(),
            facts: choose_facts(candidates, now_ms)
                .map(|f| f.with_host_seen_cmdline(row.vm.boot_args.as_deref())),
            uses_kvm: row.vm.uses_kvm,
            host_halt_poll_ns: row.host_halt_poll_ns.and_then(|ns| u64::try_from(ns).ok()),
            setup: VmSetup::from_stored(
                row.vm.hyperv.as_deref(),
                row.vm.hpet,
                row.vm.os_hint.as_deref(),
            ),
        };
        (window, self.samples.len() as i64)
    }
}

/// Whether two samples are one sample read twice: a guest has one sample a report, and no two
/// reports of a host arrive in the same millisecond with the same figures.
fn same_sample(a: &IntervalRow, b: &IntervalRow) -> bool {
    a.received_ms == b.received_ms
        && a.length_ms == b.length_ms
        && a.host_cpu_s == b.host_cpu_s
        && a.vcpu_wakeups == b.vcpu_wakeups
}

/// Inserts `item` after every element whose key is not greater: items arrive almost always in
/// order, so this is a push.
fn insert_sorted<T, K: Ord>(items: &mut Vec<T>, item: T, key: impl Fn(&T) -> K) {
    let k = key(&item);
    let at = items.partition_point(|existing| key(existing) <= k);
    items.insert(at, item);
}

/// The inputs of the guests in `scope`, read from the database: the four reads at once, each
/// on a connection of its own (a server that starts reads the whole fleet's window, millions
/// of rows at 100,000 guests). They were never one snapshot: what a report stores meanwhile is
/// put right by the host's next analysis, as before.
pub async fn load(db: &Db, scope: GuestScope<'_>) -> AppResult<Vec<GuestInputs>> {
    let (rows, samples, readings, facts) = tokio::try_join!(
        db.guests_in(scope),
        db.window_intervals(scope, ANALYSIS_WINDOW_MS),
        db.window_idle_readings(scope, ANALYSIS_WINDOW_MS, idle::DEFAULT_READING_SPAN_MS),
        db.latest_facts(scope.host_ids()),
    )?;
    Ok(assemble(rows, samples, readings, facts))
}

/// What a follower reads of some hosts another server stored reports of (or of one of them,
/// once sorted by host): their guests' rows, the samples of the reports stored after `after`
/// (a few a guest, where a whole read is the window's), and the window's readings and newest
/// facts, as [`load`] reads them; the four reads at once, as there.
#[derive(Default)]
pub struct NewInputs {
    pub rows: Vec<GuestRow>,
    pub samples: Vec<ReportedSample>,
    pub readings: Vec<IdleReading>,
    pub facts: Vec<FactsRow>,
}

/// Reads [`NewInputs`] of `hosts`' active guests (active since `active_since_ms`).
pub async fn load_new(
    db: &Db,
    hosts: &[HostId],
    after: ReportId,
    active_since_ms: i64,
) -> AppResult<NewInputs> {
    let scope = GuestScope::Hosts {
        host_ids: hosts,
        active_since_ms,
    };
    let (rows, samples, readings, facts) = tokio::try_join!(
        db.guests_in(scope),
        db.samples_of_reports_after(hosts, after),
        db.window_idle_readings(scope, ANALYSIS_WINDOW_MS, idle::DEFAULT_READING_SPAN_MS),
        db.latest_facts(Some(hosts)),
    )?;
    Ok(NewInputs {
        rows,
        samples,
        readings,
        facts,
    })
}

/// Puts each guest's rows together.
fn assemble(
    rows: Vec<GuestRow>,
    samples: Vec<IntervalRow>,
    readings: Vec<IdleReading>,
    facts: Vec<FactsRow>,
) -> Vec<GuestInputs> {
    let mut guests: HashMap<GuestId, GuestInputs> = rows
        .into_iter()
        .map(|row| (row.id, GuestInputs::from_row(row)))
        .collect();
    for sample in samples {
        if let Some(guest) = guests.get_mut(&sample.guest_id) {
            guest.samples.push(sample);
        }
    }
    for r in readings {
        if let Some(guest) = guests.get_mut(&r.guest_id) {
            guest.readings.push(r);
        }
    }
    for f in facts {
        if let Some(guest) = guests.get_mut(&f.guest_id) {
            guest.set_facts(&f.source, f.received_ms, &f.facts_json);
        }
    }
    let mut guests: Vec<GuestInputs> = guests.into_values().collect();
    guests.sort_by_key(|g| g.row.id);
    guests
}

/// Analyses one host's guests against each other (each host learns its own baseline). The
/// verdicts are as of `now_ms`.
pub fn analyse_host(guests: &[&GuestInputs], now_ms: i64) -> Vec<AnalysedGuest> {
    let windows: Vec<(Window, i64)> = guests.iter().map(|g| g.window(now_ms)).collect();
    let verdicts = analysis::analyse_host(
        &windows
            .iter()
            .map(|(w, _)| w.clone())
            .collect::<Vec<Window>>(),
    );
    guests
        .iter()
        .zip(windows)
        .zip(verdicts)
        .map(|((inputs, (window, intervals)), verdict)| {
            let row = inputs.row.clone();
            AnalysedGuest {
                process_totals: row.process_totals(),
                window_s: window.total().length_s,
                analysed_ms: now_ms,
                kernel: window.facts,
                id: row.id,
                name: row.vm.name,
                uuid: row.vm.uuid,
                host: row.host_name,
                host_id: row.host_id,
                hypervisor: row.hypervisor.as_str().to_string(),
                management: row.vm.management,
                vcpus: row.vm.vcpus,
                pid: row.vm.pid,
                boot_args: row.vm.boot_args,
                uses_kvm: row.vm.uses_kvm,
                setup: window.setup,
                // Stored only as the edge took it: what does not read back is not shown.
                platform: row
                    .vm
                    .platform
                    .as_deref()
                    .and_then(|json| serde_json::from_str(json).ok()),
                cpu_source: row.vm.cpu_source,
                last_seen_ms: row.last_seen_ms,
                intervals,
                verdict,
            }
        })
        .collect()
}

/// Analyses the guests in `scope` host by host, from what the database holds: the full
/// analysis the live fleet's incremental one must always agree with.
pub async fn analyse_stored(
    db: &Db,
    scope: GuestScope<'_>,
    now_ms: i64,
) -> AppResult<Vec<AnalysedGuest>> {
    Ok(analyse(&load(db, scope).await?, now_ms))
}

/// One guest, active or not, analysed against its host's active peers as in the ranking;
/// `None` if there is no such guest.
pub async fn guest(db: &Db, guest_id: GuestId, now_ms: i64) -> AppResult<Option<AnalysedGuest>> {
    let Some(host_id) = db.guest_host_id(guest_id).await? else {
        return Ok(None);
    };
    let scope = GuestScope::Host {
        host_id,
        guest_id,
        active_since_ms: now_ms - ACTIVE_WITHIN_MS,
    };
    Ok(analyse_stored(db, scope, now_ms)
        .await?
        .into_iter()
        .find(|g| g.id == guest_id))
}

/// Analyses guests host by host, in host then guest order.
pub fn analyse(guests: &[GuestInputs], now_ms: i64) -> Vec<AnalysedGuest> {
    let mut by_host: BTreeMap<HostId, Vec<&GuestInputs>> = BTreeMap::new();
    for guest in guests {
        by_host.entry(guest.row.host_id).or_default().push(guest);
    }
    by_host
        .into_values()
        .flat_map(|host_guests| analyse_host(&host_guests, now_ms))
        .collect()
}
