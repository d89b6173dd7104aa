//! The fleet's current state: every active guest's analysis inputs and verdict, held in memory,
//! and the ranking of them all, brought up to date as reports and facts are stored.
//!
//! A stored report updates its own guests' windows from what it stored and analyses its host's
//! guests again in memory ([`FleetState::apply`]): no read of the database. Nothing here is lost on
//! a restart: the raw windows are in the database and [`FleetState::load`] reads them. Kernel and
//! command-line changes are measured over the hour around them from the database, off the
//! report's path, by the refresher ([`FleetState::measure_changes`]).
//!
//! Two sides, so that no reader ever waits for work that grows with a host or the fleet:
//! - The writers' side (`Hosts`, behind a mutex only writers take: the intake, the
//!   refresher's bookkeeping, the retention's sweep) holds each host's inputs and analyses a
//!   host again, in O(n log n) of its guests.
//! - What readers see ([`Published`]) is replaced whole once a host's new verdicts are in: its
//!   maps are persistent (imbl), so the copy shares everything but what changed, and replacing a
//!   host's entries costs O(k log n) for its k guests. A reader takes the current copy under a
//!   lock held for one pointer's clone, and reads it for as long as it likes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use tickscope_wire::Hypervisor;

use super::analysed::{ACTIVE_WITHIN_MS, AnalysedGuest};
use super::changes::{self, SettledChanges};
use super::inputs::{self, GuestInputs};
use super::published::Published;
use crate::analysis::change::Change;
use crate::db::{Db, GONE_AFTER_MISSED_REPORTS, GuestScope, StoredFacts, StoredGuest};
use crate::domain::{GuestId, HostId};
use crate::error::AppResult;

/// How long after a change each report of its host measures it again while it has no figures;
/// past that (a guest busy since its reboot) it is measured at most once a minute, like one
/// whose figures are still settling.
pub const FIRST_FIGURES_WITHIN_MS: i64 = 5 * 60 * 1000;

/// Hosts read again in one statement per table: each statement reads their guests' windows,
/// about 600 samples a host of 20 guests.
const HOSTS_READ_AT_ONCE: usize = 256;

/// The analysed guests of every host, and their ranking.
#[derive(Default)]
pub struct FleetState {
    /// What readers see, replaced whole by the writers.
    published: RwLock<Arc<Published>>,
    /// The writers' side.
    hosts: Mutex<Hosts>,
    /// Orders change measurements: one that began later read a later database, so an earlier
    /// one that finishes after it must not overwrite it.
    next_ticket: AtomicU64,
}

/// The writers' side: each held host, and host names to ids (a report names its host).
#[derive(Default)]
struct Hosts {
    by_id: HashMap<HostId, HostState>,
    names: HashMap<String, HostId>,
    /// While a batch of reports is applied ([`FleetState::hold_back`]): what readers will see
    /// once it is, changed in place. Each node of the persistent maps is copied once per batch
    /// rather than once per report: at 100,000 guests, copying them per report was 40 % of the
    /// server's CPU (perf).
    draft: Option<Published>,
    /// How many holds are open.
    holds: usize,
}

/// Holds back what readers see until dropped (see [`FleetState::hold_back`]).
pub struct HeldBack<'a>(&'a FleetState);

impl Drop for HeldBack<'_> {
    fn drop(&mut self) {
        let mut hosts = self.0.lock();
        hosts.holds -= 1;
        // A panic may have left the draft half changed (a guest in one map and not the next):
        // readers keep what they had, and each host is put right by its next analysis.
        if std::thread::panicking() {
            hosts.draft = None;
        }
        if hosts.holds == 0
            && let Some(draft) = hosts.draft.take()
        {
            self.0.replace_published(draft);
        }
    }
}

#[derive(Default)]
struct HostState {
    /// The analysis inputs of its guests still on it and seen within the active limit, by id.
    inputs: BTreeMap<GuestId, GuestInputs>,
    /// The same guests by what makes each the same guest on the host.
    identities: HashMap<(Hypervisor, String), GuestId>,
    /// The host's count of stored reports: a guest whose last report is
    /// [`GONE_AFTER_MISSED_REPORTS`] behind it is gone.
    reports_stored: i64,
    /// The guests of its last analysis, as ranked.
    analysed: Vec<GuestId>,
    /// Its guests' last kernel or command-line changes, measured.
    changes: HashMap<GuestId, Change>,
    /// Measurements that can no longer change, kept so that they are not read again.
    settled: SettledChanges,
    /// The ticket of the measurement `changes` came from.
    changes_ticket: u64,
    /// Whether a last change's figures can still move (measured before it settled).
    unsettled: bool,
    /// The latest last change without figures yet (too little idle time after it so far).
    unmeasured_at_ms: Option<i64>,
}

impl HostState {
    /// Takes in a guest's inputs (new or updated), under its identity.
    fn hold(&mut self, inputs: GuestInputs) {
        let key = (inputs.row.hypervisor, inputs.row.identity.clone());
        self.identities.insert(key, inputs.row.id);
        self.inputs.insert(inputs.row.id, inputs);
    }

    /// Drops the guests gone from the host or silent past the active limit, then analyses the
    /// rest as of `now_ms`.
    fn analyse(&mut self, now_ms: i64) -> Vec<AnalysedGuest> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        let reports_stored = self.reports_stored;
        let gone = |g: &GuestInputs| {
            g.row.last_seen_ms < since_ms
                || reports_stored - g.row.last_report_n >= GONE_AFTER_MISSED_REPORTS
        };
        let dropped: Vec<GuestId> = self
            .inputs
            .values()
            .filter(|g| gone(g))
            .map(|g| g.row.id)
            .collect();
        for id in dropped {
            if let Some(g) = self.inputs.remove(&id) {
                self.identities.remove(&(g.row.hypervisor, g.row.identity));
            }
        }
        let guests: Vec<&GuestInputs> = self.inputs.values().collect();
        inputs::analyse_host(&guests, now_ms)
    }
}

/// What [`FleetState::apply`] did with a stored report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The host's guests were analysed again.
    Analysed {
        /// A guest's kernel or command line changed: the change wants measuring.
        changed: bool,
    },
    /// A guest of the report is stored from before but not held here (it was silent past the
    /// active limit, or gone from the host): the host's inputs must be read from the database
    /// ([`FleetState::reload_host`]).
    NeedsReload,
}

/// What a report would do to its host's guests, were it stored now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Footprint {
    /// Guests of the report the host does not hold now (never seen, or gone and back).
    pub new_guests: usize,
    /// Guests the host would hold after it: the report's, and those it still holds that the
    /// report does not make gone.
    pub held_after: usize,
}

impl FleetState {
    /// Reads and analyses every active guest, host by host, and measures their changes: a
    /// few statements for the whole fleet, then two for each guest with a change to measure.
    pub async fn load(db: &Db, now_ms: i64) -> AppResult<FleetState> {
        let current = FleetState::default();
        let started = std::time::Instant::now();
        let hosts = current.reload_all(db, now_ms).await?;
        let read_ms = started.elapsed().as_millis() as u64;
        current.measure_all_changes(db, &hosts, now_ms).await?;
        tracing::info!(
            hosts = hosts.len(),
            read_and_analysed_ms = read_ms,
            changes_measured_ms = started.elapsed().as_millis() as u64 - read_ms,
            "loaded the fleet's state"
        );
        Ok(current)
    }

    /// Measures the last changes of `hosts`' guests from every guest's changes, read at once.
    async fn measure_all_changes(&self, db: &Db, hosts: &[HostId], now_ms: i64) -> AppResult<()> {
        // Each host's ticket before the read, as `measure_changes` takes it.
        let tickets: Vec<(HostId, u64)> = hosts
            .iter()
            .map(|&host_id| (host_id, self.next_ticket.fetch_add(1, Ordering::Relaxed)))
            .collect();
        let host_of: HashMap<GuestId, HostId> = {
            let held = self.lock();
            hosts
                .iter()
                .filter_map(|host_id| Some((*host_id, held.by_id.get(host_id)?)))
                .flat_map(|(host_id, host)| host.analysed.iter().map(move |&g| (g, host_id)))
                .collect()
        };
        let mut by_host: HashMap<HostId, Vec<(GuestId, String, i64)>> = HashMap::new();
        for change in db.fact_changes(None).await? {
            if let Some(host_id) = host_of.get(&change.0) {
                by_host.entry(*host_id).or_default().push(change);
            }
        }
        for (host_id, ticket) in tickets {
            let changes = by_host.remove(&host_id).unwrap_or_default();
            self.measure_changes_from(db, host_id, ticket, changes, now_ms)
                .await?;
        }
        Ok(())
    }

    /// Reads every active guest from the database and analyses them again, host by host;
    /// returns the hosts read. A host held here with no active guest left is forgotten by
    /// [`FleetState::forget_silent`], as always.
    pub async fn reload_all(&self, db: &Db, now_ms: i64) -> AppResult<Vec<HostId>> {
        let scope = GuestScope::Active {
            since_ms: now_ms - ACTIVE_WITHIN_MS,
        };
        let mut by_host: HashMap<HostId, Vec<GuestInputs>> = HashMap::new();
        for guest in inputs::load(db, scope).await? {
            by_host.entry(guest.row.host_id).or_default().push(guest);
        }
        let hosts: Vec<HostId> = by_host.keys().copied().collect();
        // Published once, when every host is in: each host published on its own copied the
        // kept orders' paths again for every guest (2.5 s of a start at 100,000 guests).
        let _held = self.hold_back();
        for (host_id, guests) in by_host {
            self.replace_inputs(host_id, guests, now_ms);
        }
        Ok(hosts)
    }

    /// What `guests` (a report's, by family and identity) would do to the host named
    /// `host_name`; `earlier` are guests that reports stored before it (in the same batch) bring
    /// to the host, which are not new. O(guests held by the host).
    pub fn footprint<'a>(
        &self,
        host_name: &str,
        guests: impl IntoIterator<Item = (Hypervisor, &'a str)>,
        earlier: &HashSet<(Hypervisor, String)>,
    ) -> Footprint {
        let hosts = self.lock();
        let host = hosts
            .names
            .get(host_name)
            .and_then(|id| hosts.by_id.get(id));
        let mut reported: HashSet<(Hypervisor, &str)> = HashSet::new();
        let mut new_guests = 0;
        for (family, identity) in guests {
            if !reported.insert((family, identity)) {
                continue;
            }
            let held = host.is_some_and(|h| h.identities.contains_key(&(family, identity.into())));
            if !held && !earlier.contains(&(family, identity.to_string())) {
                new_guests += 1;
            }
        }
        let staying = host.map_or(0, |h| {
            // After this report the host has stored one more.
            let after = h.reports_stored + 1;
            h.inputs
                .values()
                .filter(|g| !reported.contains(&(g.row.hypervisor, g.row.identity.as_str())))
                .filter(|g| after - g.row.last_report_n < GONE_AFTER_MISSED_REPORTS)
                .count()
        });
        Footprint {
            new_guests,
            held_after: reported.len() + staying,
        }
    }

    /// Takes in what one report stored for a host's guests (the host's count of stored reports
    /// now `host_reports`) and analyses the host's guests again, as of `now_ms`.
    pub fn apply(
        &self,
        host_id: HostId,
        host_reports: i64,
        stored: &[StoredGuest],
        now_ms: i64,
    ) -> Applied {
        let mut guard = self.lock();
        let hosts = &mut *guard;
        let host = hosts.by_id.entry(host_id).or_default();
        let unknown = stored.iter().any(|g| {
            !host.inputs.contains_key(&g.row.id) && g.first_seen_ms != g.sample.received_ms
        });
        if unknown {
            return Applied::NeedsReload;
        }
        host.reports_stored = host.reports_stored.max(host_reports);
        for guest in stored {
            match host.inputs.get_mut(&guest.row.id) {
                Some(inputs) => inputs.apply(guest),
                None => {
                    let mut inputs = GuestInputs::from_row(guest.row.clone());
                    inputs.apply(guest);
                    host.hold(inputs);
                }
            }
        }
        // The host's KVM setting is the host's, not the reported guests' alone.
        if let Some(last) = stored.last() {
            for inputs in host.inputs.values_mut() {
                inputs.row.host_halt_poll_ns = last.row.host_halt_poll_ns;
            }
            hosts.names.insert(last.row.host_name.clone(), host_id);
        }
        let changed = stored
            .iter()
            .any(|g| g.facts.as_ref().is_some_and(|f| f.changed));
        self.analyse_host(hosts, host_id, now_ms);
        Applied::Analysed { changed }
    }

    /// Takes in facts a guest posted itself. `false` when the guest is not held here (the
    /// host's inputs must then be read again).
    pub fn apply_facts(
        &self,
        host_id: HostId,
        guest_id: GuestId,
        facts: &StoredFacts,
        now_ms: i64,
    ) -> bool {
        let mut hosts = self.lock();
        let Some(inputs) = hosts
            .by_id
            .get_mut(&host_id)
            .and_then(|h| h.inputs.get_mut(&guest_id))
        else {
            return false;
        };
        inputs.apply_facts(facts);
        self.analyse_host(&mut hosts, host_id, now_ms);
        true
    }

    /// Reads one host's active guests from the database and analyses them as of `now_ms`.
    pub async fn reload_host(&self, db: &Db, host_id: HostId, now_ms: i64) -> AppResult<()> {
        self.reload_hosts(db, &[host_id], now_ms).await
    }

    /// Reads some hosts' active guests from the database, in one statement per table (a few
    /// hundred hosts at a time), and analyses each host as of `now_ms`. A host with no active
    /// guest left holds none.
    pub async fn reload_hosts(&self, db: &Db, host_ids: &[HostId], now_ms: i64) -> AppResult<()> {
        for chunk in host_ids.chunks(HOSTS_READ_AT_ONCE) {
            let scope = GuestScope::Hosts {
                host_ids: chunk,
                active_since_ms: now_ms - ACTIVE_WITHIN_MS,
            };
            let mut by_host: HashMap<HostId, Vec<GuestInputs>> =
                chunk.iter().map(|&host_id| (host_id, Vec::new())).collect();
            for guest in inputs::load(db, scope).await? {
                by_host.entry(guest.row.host_id).or_default().push(guest);
            }
            // Readers see the hosts read together at once, as a batch of reports.
            let _held = self.hold_back();
            for (host_id, guests) in by_host {
                self.replace_inputs(host_id, guests, now_ms);
            }
        }
        Ok(())
    }

    fn replace_inputs(&self, host_id: HostId, guests: Vec<GuestInputs>, now_ms: i64) {
        let mut guard = self.lock();
        let hosts = &mut *guard;
        let host = hosts.by_id.entry(host_id).or_default();
        host.inputs.clear();
        host.identities.clear();
        let mut name = None;
        for guest in guests {
            host.reports_stored = host.reports_stored.max(guest.row.host_reports);
            name = Some(guest.row.host_name.clone());
            host.hold(guest);
        }
        if let Some(name) = name {
            hosts.names.insert(name, host_id);
        }
        self.analyse_host(hosts, host_id, now_ms);
    }

    /// Measures the last kernel or command-line change of each of a host's active guests, from
    /// the database (an hour around each change).
    pub async fn measure_changes(&self, db: &Db, host_id: HostId, now_ms: i64) -> AppResult<()> {
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        if !self.holds_host(host_id) {
            return Ok(());
        }
        let changes = db.fact_changes_of_host(host_id).await?;
        self.measure_changes_from(db, host_id, ticket, changes, now_ms)
            .await
    }

    /// Measures the last changes of a host's guests from `changes` (every source's, oldest
    /// first by guest; those of guests the host does not hold are left out). `ticket` was taken
    /// before `changes` were read: a measurement from an older read never replaces a newer one.
    async fn measure_changes_from(
        &self,
        db: &Db,
        host_id: HostId,
        ticket: u64,
        changes: Vec<(GuestId, String, i64)>,
        now_ms: i64,
    ) -> AppResult<()> {
        let (guests, settled) = {
            let hosts = self.lock();
            match hosts.by_id.get(&host_id) {
                Some(host) => (
                    host.analysed.iter().copied().collect::<HashSet<GuestId>>(),
                    host.settled.clone(),
                ),
                None => return Ok(()),
            }
        };
        let last: HashMap<GuestId, (i64, Option<i64>)> = changes::last_changes(changes)
            .into_iter()
            .filter(|(guest, _)| guests.contains(guest))
            .collect();
        let pending: Vec<(GuestId, i64)> = last.iter().map(|(g, (at, _))| (*g, *at)).collect();
        let (measured, settled) = changes::measure_changes(db, last, now_ms, &settled).await?;
        let unsettled = pending.iter().any(|key| !settled.contains_key(key));
        let unmeasured_at_ms = pending
            .iter()
            .filter(|key| !measured.contains_key(&key.0) && !settled.contains_key(key))
            .map(|(_, at_ms)| *at_ms)
            .max();
        let mut guard = self.lock();
        let Some(host) = guard.by_id.get_mut(&host_id) else {
            return Ok(());
        };
        if host.changes_ticket > ticket {
            return Ok(());
        }
        host.changes_ticket = ticket;
        let before = std::mem::replace(&mut host.changes, measured);
        host.settled = settled;
        host.unsettled = unsettled;
        host.unmeasured_at_ms = unmeasured_at_ms;
        let after = host.changes.clone();
        // Seen at once, also while a batch of reports is held back: whoever waits for the
        // measurements (`LiveFleet::caught_up`) reads them next.
        self.publish_now(&mut guard.draft, |next| {
            next.forget_changes(before.keys());
            next.set_changes(&after);
        });
        Ok(())
    }

    /// Whether any of a host's guests has a change made less than [`FIRST_FIGURES_WITHIN_MS`]
    /// before `now_ms` that has no figures yet: each report may bring the idle time after it
    /// that its first figures need.
    pub fn has_unmeasured_changes(&self, host_id: HostId, now_ms: i64) -> bool {
        self.lock()
            .by_id
            .get(&host_id)
            .and_then(|host| host.unmeasured_at_ms)
            .is_some_and(|at_ms| now_ms < at_ms + FIRST_FIGURES_WITHIN_MS)
    }

    /// Whether any of a host's guests has a change whose figures can still move (measured less
    /// than the settling time ago).
    pub fn has_unsettled_changes(&self, host_id: HostId) -> bool {
        self.lock()
            .by_id
            .get(&host_id)
            .is_some_and(|host| host.unsettled)
    }

    /// Forgets the hosts none of whose guests reported within the active limit: they are no
    /// longer ranked, and a report of theirs reads them from the database again.
    pub fn forget_silent(&self, now_ms: i64) -> usize {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        let mut guard = self.lock();
        let hosts = &mut *guard;
        let silent: Vec<HostId> = hosts
            .by_id
            .iter()
            .filter(|(_, host)| host.inputs.values().all(|g| g.row.last_seen_ms < since_ms))
            .map(|(id, _)| *id)
            .collect();
        let forgotten: Vec<HostState> = silent
            .iter()
            .filter_map(|host_id| hosts.by_id.remove(host_id))
            .collect();
        hosts.names.retain(|_, id| !silent.contains(id));
        self.publish_now(&mut hosts.draft, |next| {
            for host in &forgotten {
                next.drop_guests(&host.analysed);
                next.forget_changes(host.changes.keys());
            }
        });
        silent.len()
    }

    /// The analysed fleet as it is now: a copy to read at leisure.
    pub fn published(&self) -> Arc<Published> {
        self.published
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The active guests, most wasteful first (see [`super::analysed::rank`]).
    pub fn ranked(&self, now_ms: i64) -> Vec<Arc<AnalysedGuest>> {
        self.published().ranked(now_ms).cloned().collect()
    }

    /// Whether a host's guests are held.
    pub fn holds_host(&self, host_id: HostId) -> bool {
        self.lock().by_id.contains_key(&host_id)
    }

    /// How many guests are held (active or not yet forgotten), for the server's own metrics.
    pub fn held(&self) -> usize {
        self.published().held()
    }

    /// One guest as the ranking has it; `None` when it is not active (or unknown).
    pub fn guest(&self, guest_id: GuestId, now_ms: i64) -> Option<Arc<AnalysedGuest>> {
        self.published().guest(guest_id, now_ms).cloned()
    }

    /// One guest's last change as measured here: `None` when the guest is not held (the caller
    /// reads the database), `Some(None)` when it is but has no measured change.
    pub fn change(&self, guest_id: GuestId) -> Option<Option<Change>> {
        self.published().held_change(guest_id)
    }

    /// The last kernel or command-line change of each active guest, measured (see
    /// [`changes::changes`]).
    pub fn changes(&self, now_ms: i64) -> HashMap<GuestId, Change> {
        self.published().changes(now_ms)
    }

    fn lock(&self) -> MutexGuard<'_, Hosts> {
        self.hosts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Analyses a host's guests again (the writers' side is locked by the caller) and puts its
    /// new verdicts in place of its previous ones, for readers too.
    fn analyse_host(&self, hosts: &mut Hosts, host_id: HostId, now_ms: i64) {
        let Hosts { by_id, draft, .. } = hosts;
        let Some(host) = by_id.get_mut(&host_id) else {
            return;
        };
        let analysed = host.analyse(now_ms);
        self.put_analysed(draft, host, analysed);
    }

    /// Puts a host's newly analysed guests in place of its previous ones, in the ranking too.
    fn put_analysed(
        &self,
        draft: &mut Option<Published>,
        host: &mut HostState,
        analysed: Vec<AnalysedGuest>,
    ) {
        let analysed: Vec<Arc<AnalysedGuest>> = analysed.into_iter().map(Arc::new).collect();
        let previous =
            std::mem::replace(&mut host.analysed, analysed.iter().map(|g| g.id).collect());
        self.publish(draft, |next| {
            next.drop_guests(&previous);
            for guest in &analysed {
                next.put(guest);
            }
        });
    }

    /// Holds back what readers see until the guard is dropped: the one writer applies a batch
    /// of stored reports under it and acknowledges them after, so each report is seen once
    /// acknowledged, and the batch is published at once (see `Hosts::draft`).
    pub fn hold_back(&self) -> HeldBack<'_> {
        let mut hosts = self.lock();
        hosts.holds += 1;
        if hosts.draft.is_none() {
            hosts.draft = Some(Published::clone(&self.published()));
        }
        HeldBack(self)
    }

    /// Changes what readers will see: the draft while one is held back, else a copy put in
    /// place at once. Only writers call it, with the writers' side locked, so no two replace
    /// it at once.
    fn publish(&self, draft: &mut Option<Published>, change: impl FnOnce(&mut Published)) {
        match draft {
            Some(draft) => change(draft),
            None => {
                let mut next = Published::clone(&self.published());
                change(&mut next);
                self.replace_published(next);
            }
        }
    }

    /// The same, seen at once even while a draft is held back (and in the draft, so that it
    /// is not undone when the draft is put in place).
    fn publish_now(&self, draft: &mut Option<Published>, change: impl Fn(&mut Published)) {
        if let Some(draft) = draft {
            change(draft);
        }
        let mut next = Published::clone(&self.published());
        change(&mut next);
        self.replace_published(next);
    }

    fn replace_published(&self, next: Published) {
        *self.published.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyse_host, test_window};

    fn guest(id: i64, host_id: i64, name: &str, waste_window: f64) -> AnalysedGuest {
        let verdict = analyse_host(&[test_window(1, 0.3, waste_window, None)]).remove(0);
        AnalysedGuest {
            id: GuestId(id),
            name: name.to_string(),
            uuid: None,
            host: "hv".into(),
            host_id: HostId(host_id),
            hypervisor: "qemu".into(),
            management: None,
            vcpus: 1,
            pid: 1,
            boot_args: None,
            uses_kvm: None,
            cpu_source: None,
            last_seen_ms: 1_000,
            intervals: 6,
            window_s: 60.0,
            analysed_ms: 1_000,
            kernel: None,
            verdict,
            process_totals: None,
        }
    }

    fn names(current: &FleetState, now_ms: i64) -> Vec<String> {
        current
            .ranked(now_ms)
            .iter()
            .map(|g| g.name.clone())
            .collect()
    }

    fn set(current: &FleetState, host_id: i64, guests: Vec<AnalysedGuest>) {
        let mut hosts = current.lock();
        let Hosts { by_id, draft, .. } = &mut *hosts;
        let host = by_id.entry(HostId(host_id)).or_default();
        current.put_analysed(draft, host, guests);
    }

    #[test]
    fn a_host_analysed_again_replaces_its_guests_in_the_ranking() {
        let current = FleetState::default();
        set(
            &current,
            1,
            vec![guest(1, 1, "a", 20.0), guest(2, 1, "b", 20.0)],
        );
        set(&current, 2, vec![guest(3, 2, "c", 20.0)]);
        assert_eq!(names(&current, 1_000), ["a", "b", "c"]);
        set(&current, 1, vec![guest(2, 1, "b", 20.0)]);
        assert_eq!(names(&current, 1_000), ["b", "c"]);
        assert!(current.guest(GuestId(1), 1_000).is_none());
        // A guest that moved to another host is ranked once.
        set(
            &current,
            2,
            vec![guest(3, 2, "c", 20.0), guest(2, 2, "b", 20.0)],
        );
        assert_eq!(names(&current, 1_000), ["b", "c"]);
        assert_eq!(current.guest(GuestId(2), 1_000).unwrap().host_id, HostId(2));
    }

    #[test]
    fn a_held_back_batch_is_seen_whole_when_the_hold_ends() {
        let current = FleetState::default();
        set(&current, 1, vec![guest(1, 1, "a", 20.0)]);
        let held = current.hold_back();
        set(
            &current,
            1,
            vec![guest(1, 1, "a", 20.0), guest(2, 1, "b", 20.0)],
        );
        set(&current, 2, vec![guest(3, 2, "c", 20.0)]);
        let nested = current.hold_back();
        drop(nested);
        assert_eq!(names(&current, 1_000), ["a"], "seen before the hold ended");
        drop(held);
        assert_eq!(names(&current, 1_000), ["a", "b", "c"]);
        // Without a hold, at once.
        set(&current, 2, vec![]);
        assert_eq!(names(&current, 1_000), ["a", "b"]);
    }

    #[test]
    fn a_panic_while_held_back_leaves_readers_what_they_had() {
        let current = FleetState::default();
        set(&current, 1, vec![guest(1, 1, "a", 20.0)]);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = current.hold_back();
            set(&current, 2, vec![guest(2, 2, "b", 20.0)]);
            panic!("a bug while a batch is applied");
        }));
        assert!(panicked.is_err());
        assert_eq!(names(&current, 1_000), ["a"]);
        // Publishing goes on, at once again.
        set(&current, 2, vec![guest(2, 2, "b", 20.0)]);
        assert_eq!(names(&current, 1_000), ["a", "b"]);
    }

    #[test]
    fn the_ranking_is_the_rank_order() {
        let current = FleetState::default();
        let guests: Vec<AnalysedGuest> = [(1, "z", 1.0), (2, "y", 40.0), (3, "x", 10.0)]
            .into_iter()
            .map(|(id, name, hz)| guest(id, 1, name, hz))
            .collect();
        let mut expected: Vec<Arc<AnalysedGuest>> = guests.iter().cloned().map(Arc::new).collect();
        super::super::analysed::rank(&mut expected);
        set(&current, 1, guests);
        let expected: Vec<String> = expected.iter().map(|g| g.name.clone()).collect();
        assert_eq!(names(&current, 1_000), expected);
    }

    #[test]
    fn readers_never_wait_for_the_writers_side() {
        let current = Arc::new(FleetState::default());
        set(&current, 1, vec![guest(1, 1, "a", 20.0)]);
        // A writer holds the writers' side, as it does through a host's analysis.
        let writing = current.lock();
        let (read, answer) = std::sync::mpsc::channel();
        let reader = current.clone();
        std::thread::spawn(move || {
            let _ = read.send((
                reader.ranked(1_000).len(),
                reader.held(),
                reader.guest(GuestId(1), 1_000).is_some(),
                reader.change(GuestId(1)),
                reader.changes(1_000).len(),
            ));
        });
        let seen = answer
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a reader waited for the writer");
        drop(writing);
        assert_eq!(seen, (1, 1, true, Some(None), 0));
    }

    #[test]
    fn guests_silent_longer_than_the_active_limit_are_not_ranked() {
        let current = FleetState::default();
        set(&current, 1, vec![guest(1, 1, "a", 20.0)]);
        assert_eq!(current.ranked(1_000 + ACTIVE_WITHIN_MS).len(), 1);
        assert!(current.ranked(1_001 + ACTIVE_WITHIN_MS).is_empty());
        assert!(
            current
                .guest(GuestId(1), 1_001 + ACTIVE_WITHIN_MS)
                .is_none()
        );
        assert!(current.guest(GuestId(1), 1_000).is_some());
    }
}
