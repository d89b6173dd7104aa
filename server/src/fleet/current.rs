//! The fleet's current state: every active guest's analysis inputs and verdict, held in memory,
//! and the ranking of them all, brought up to date as reports and facts are stored.
//!
//! A stored report updates its own guests' windows from what it stored and analyses its host's
//! guests again in memory ([`Current::apply`]): no read of the database, a few tens of
//! microseconds for a host of 20 guests. Readers take the state as it is, at once. Nothing here
//! is lost on a restart: the raw windows are in the database and [`Current::load`] reads them.
//! Kernel and command-line changes are measured over the hour around them from the database,
//! off the report's path, by the refresher ([`Current::measure_changes`]).

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::analysed::{ACTIVE_WITHIN_MS, AnalysedGuest};
use super::changes::{self, SettledChanges};
use super::inputs::{self, GuestInputs};
use crate::analysis::change::Change;
use crate::db::{Db, GuestScope, StoredFacts, StoredGuest};
use crate::domain::{GuestId, HostId};
use crate::error::AppResult;

/// How long after a change each report of its host measures it again while it has no figures;
/// past that (a guest busy since its reboot) it is measured at most once a minute, like one
/// whose figures are still settling.
pub const FIRST_FIGURES_WITHIN_MS: i64 = 5 * 60 * 1000;

/// The analysed guests of every host, and their ranking.
#[derive(Default)]
pub struct Current {
    state: RwLock<State>,
    /// Orders change measurements: one that began later read a later database, so an earlier
    /// one that finishes after it must not overwrite it.
    next_ticket: AtomicU64,
}

#[derive(Default)]
struct State {
    hosts: HashMap<HostId, HostState>,
    /// Every analysed guest, most wasteful first.
    ranking: BTreeSet<Ranked>,
    by_id: HashMap<GuestId, Arc<AnalysedGuest>>,
}

#[derive(Default)]
struct HostState {
    /// The analysis inputs of its guests seen within the active limit, by id.
    inputs: BTreeMap<GuestId, GuestInputs>,
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

/// What [`Current::apply`] did with a stored report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The host's guests were analysed again.
    Analysed {
        /// A guest's kernel or command line changed: the change wants measuring.
        changed: bool,
    },
    /// A guest of the report is stored from before but not held here (it was silent past the
    /// active limit): the host's inputs must be read from the database ([`Current::reload_host`]).
    NeedsReload,
}

/// An analysed guest in ranking order: most wasteful first, then most host CPU, then by name,
/// then by id (so that two guests never compare equal).
#[derive(Clone)]
struct Ranked(Arc<AnalysedGuest>);

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        super::analysed::rank_order(&self.0, &other.0).then_with(|| self.0.id.cmp(&other.0.id))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for Ranked {}

impl Current {
    /// Reads and analyses every active guest, host by host, and measures their changes.
    pub async fn load(db: &Db, now_ms: i64) -> AppResult<Current> {
        let current = Current::default();
        let hosts = current.reload_all(db, now_ms).await?;
        for host_id in hosts {
            current.measure_changes(db, host_id, now_ms).await?;
        }
        Ok(current)
    }

    /// Reads every active guest from the database and analyses them again, host by host;
    /// returns the hosts read. A host held here with no active guest left is forgotten by
    /// [`Current::forget_silent`], as always.
    pub async fn reload_all(&self, db: &Db, now_ms: i64) -> AppResult<Vec<HostId>> {
        let scope = GuestScope::Active {
            since_ms: now_ms - ACTIVE_WITHIN_MS,
        };
        let mut by_host: HashMap<HostId, Vec<GuestInputs>> = HashMap::new();
        for guest in inputs::load(db, scope).await? {
            by_host.entry(guest.row.host_id).or_default().push(guest);
        }
        let hosts: Vec<HostId> = by_host.keys().copied().collect();
        for (host_id, guests) in by_host {
            self.replace_inputs(host_id, guests, now_ms);
        }
        Ok(hosts)
    }

    /// Takes in what one report stored for a host's guests and analyses the host's active
    /// guests again, as of `now_ms`.
    pub fn apply(&self, host_id: HostId, stored: &[StoredGuest], now_ms: i64) -> Applied {
        let mut state = self.write();
        let host = state.hosts.entry(host_id).or_default();
        let unknown = stored.iter().any(|g| {
            !host.inputs.contains_key(&g.row.id) && g.first_seen_ms != g.sample.received_ms
        });
        if unknown {
            return Applied::NeedsReload;
        }
        for guest in stored {
            host.inputs
                .entry(guest.row.id)
                .or_insert_with(|| GuestInputs::from_row(guest.row.clone()))
                .apply(guest);
        }
        // The host's KVM setting is the host's, not the reported guests' alone.
        if let Some(last) = stored.last() {
            for inputs in host.inputs.values_mut() {
                inputs.row.host_halt_poll_ns = last.row.host_halt_poll_ns;
            }
        }
        let changed = stored
            .iter()
            .any(|g| g.facts.as_ref().is_some_and(|f| f.changed));
        state.analyse_host(host_id, now_ms);
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
        let mut state = self.write();
        let Some(inputs) = state
            .hosts
            .get_mut(&host_id)
            .and_then(|h| h.inputs.get_mut(&guest_id))
        else {
            return false;
        };
        inputs.apply_facts(facts);
        state.analyse_host(host_id, now_ms);
        true
    }

    /// Reads one host's active guests from the database and analyses them as of `now_ms`.
    pub async fn reload_host(&self, db: &Db, host_id: HostId, now_ms: i64) -> AppResult<()> {
        let scope = GuestScope::Host {
            host_id,
            guest_id: None,
            active_since_ms: now_ms - ACTIVE_WITHIN_MS,
        };
        let guests = inputs::load(db, scope).await?;
        self.replace_inputs(host_id, guests, now_ms);
        Ok(())
    }

    fn replace_inputs(&self, host_id: HostId, guests: Vec<GuestInputs>, now_ms: i64) {
        let mut state = self.write();
        state.hosts.entry(host_id).or_default().inputs =
            guests.into_iter().map(|g| (g.row.id, g)).collect();
        state.analyse_host(host_id, now_ms);
    }

    /// Measures the last kernel or command-line change of each of a host's active guests, from
    /// the database (an hour around each change).
    pub async fn measure_changes(&self, db: &Db, host_id: HostId, now_ms: i64) -> AppResult<()> {
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        let (guests, settled) = {
            let state = self.read();
            match state.hosts.get(&host_id) {
                Some(host) => (host.analysed.clone(), host.settled.clone()),
                None => return Ok(()),
            }
        };
        let last: HashMap<GuestId, (i64, Option<i64>)> =
            changes::last_changes(db.fact_changes_of_host(host_id).await?)
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
        let mut state = self.write();
        if let Some(host) = state.hosts.get_mut(&host_id)
            && host.changes_ticket <= ticket
        {
            host.changes_ticket = ticket;
            host.changes = measured;
            host.settled = settled;
            host.unsettled = unsettled;
            host.unmeasured_at_ms = unmeasured_at_ms;
        }
        Ok(())
    }

    /// Whether any of a host's guests has a change made less than [`FIRST_FIGURES_WITHIN_MS`]
    /// before `now_ms` that has no figures yet: each report may bring the idle time after it
    /// that its first figures need.
    pub fn has_unmeasured_changes(&self, host_id: HostId, now_ms: i64) -> bool {
        self.read()
            .hosts
            .get(&host_id)
            .and_then(|host| host.unmeasured_at_ms)
            .is_some_and(|at_ms| now_ms < at_ms + FIRST_FIGURES_WITHIN_MS)
    }

    /// Whether any of a host's guests has a change whose figures can still move (measured less
    /// than the settling time ago).
    pub fn has_unsettled_changes(&self, host_id: HostId) -> bool {
        self.read()
            .hosts
            .get(&host_id)
            .is_some_and(|host| host.unsettled)
    }

    /// Forgets the hosts none of whose guests reported within the active limit: they are no
    /// longer ranked, and a report of theirs reads them from the database again.
    pub fn forget_silent(&self, now_ms: i64) -> usize {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        let mut state = self.write();
        let silent: Vec<HostId> = state
            .hosts
            .iter()
            .filter(|(_, host)| host.inputs.values().all(|g| g.row.last_seen_ms < since_ms))
            .map(|(id, _)| *id)
            .collect();
        for host_id in &silent {
            state.set_analysed(*host_id, Vec::new());
            state.hosts.remove(host_id);
        }
        silent.len()
    }

    /// The active guests, most wasteful first (see [`super::analysed::rank`]).
    pub fn ranked(&self, now_ms: i64) -> Vec<Arc<AnalysedGuest>> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        self.read()
            .ranking
            .iter()
            .filter(|g| g.0.last_seen_ms >= since_ms)
            .map(|g| g.0.clone())
            .collect()
    }

    /// Whether a host's guests are held.
    pub fn holds_host(&self, host_id: HostId) -> bool {
        self.read().hosts.contains_key(&host_id)
    }

    /// How many guests are held (active or not yet forgotten), for the server's own metrics.
    pub fn held(&self) -> usize {
        self.read().by_id.len()
    }

    /// One guest as the ranking has it; `None` when it is not active (or unknown).
    pub fn guest(&self, guest_id: GuestId, now_ms: i64) -> Option<Arc<AnalysedGuest>> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        self.read()
            .by_id
            .get(&guest_id)
            .filter(|g| g.last_seen_ms >= since_ms)
            .cloned()
    }

    /// One guest's last change as measured here: `None` when the guest's host is not held (the
    /// caller reads the database), `Some(None)` when it is but has no measured change.
    pub fn change(&self, guest_id: GuestId) -> Option<Option<Change>> {
        let state = self.read();
        let host = state.by_id.get(&guest_id)?.host_id;
        let host = state.hosts.get(&host)?;
        Some(host.changes.get(&guest_id).copied())
    }

    /// The last kernel or command-line change of each active guest, measured (see
    /// [`changes::changes`]).
    pub fn changes(&self, now_ms: i64) -> HashMap<GuestId, Change> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        let state = self.read();
        state
            .hosts
            .values()
            .flat_map(|host| host.changes.iter())
            .filter(|(guest, _)| {
                state
                    .by_id
                    .get(guest)
                    .is_some_and(|g| g.last_seen_ms >= since_ms)
            })
            .map(|(guest, change)| (*guest, *change))
            .collect()
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// Analyses a host's active guests again from their inputs, dropping those silent past the
    /// active limit.
    fn analyse_host(&mut self, host_id: HostId, now_ms: i64) {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        let Some(host) = self.hosts.get_mut(&host_id) else {
            return;
        };
        host.inputs.retain(|_, g| g.row.last_seen_ms >= since_ms);
        let guests: Vec<&GuestInputs> = host.inputs.values().collect();
        let analysed = inputs::analyse_host(&guests, now_ms);
        self.set_analysed(host_id, analysed);
    }

    /// Puts a host's newly analysed guests in place of its previous ones, in the ranking too.
    fn set_analysed(&mut self, host_id: HostId, analysed: Vec<AnalysedGuest>) {
        let Some(host) = self.hosts.get_mut(&host_id) else {
            return;
        };
        for id in std::mem::take(&mut host.analysed) {
            if let Some(old) = self.by_id.remove(&id) {
                self.ranking.remove(&Ranked(old));
            }
        }
        for guest in analysed {
            let guest = Arc::new(guest);
            host.analysed.push(guest.id);
            // A guest that moved here from another host leaves that host's list.
            if let Some(old) = self.by_id.insert(guest.id, guest.clone()) {
                self.ranking.remove(&Ranked(old));
            }
            self.ranking.insert(Ranked(guest));
        }
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
        }
    }

    fn names(current: &Current, now_ms: i64) -> Vec<String> {
        current
            .ranked(now_ms)
            .iter()
            .map(|g| g.name.clone())
            .collect()
    }

    fn set(current: &Current, host_id: i64, guests: Vec<AnalysedGuest>) {
        let mut state = current.write();
        state.hosts.entry(HostId(host_id)).or_default();
        state.set_analysed(HostId(host_id), guests);
    }

    #[test]
    fn a_host_analysed_again_replaces_its_guests_in_the_ranking() {
        let current = Current::default();
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
    fn the_ranking_is_the_rank_order() {
        let current = Current::default();
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
    fn guests_silent_longer_than_the_active_limit_are_not_ranked() {
        let current = Current::default();
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
