//! The fleet's state itself ([`FleetState`]): each held host's analysis inputs on the writers'
//! side, their analysis when a report or facts are applied, and what readers see, published
//! whole (see the module above for the two sides).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use tickscope_wire::Hypervisor;

use crate::analysis::change::Change;
use crate::db::{GONE_AFTER_MISSED_REPORTS, StoredFacts, StoredGuest};
use crate::domain::{GuestId, HostId, ReportId};
use crate::fleet::analysed::{ACTIVE_WITHIN_MS, AnalysedGuest};
use crate::fleet::changes::SettledChanges;
use crate::fleet::inputs::{self, GuestInputs};
use crate::fleet::published::{Edit, Published};

use super::turns::{Draft, Spare};

/// How long after a change each report of its host measures it again while it has no figures;
/// past that (a guest busy since its reboot) it is measured at most once a minute, like one
/// whose figures are still settling.
pub const FIRST_FIGURES_WITHIN_MS: i64 = 5 * 60 * 1000;

/// The analysed guests of every host, and their ranking.
#[derive(Default)]
pub struct FleetState {
    /// What readers see, replaced whole by the writers.
    published: RwLock<Arc<Published>>,
    /// The writers' side.
    hosts: Mutex<Hosts>,
    /// Orders change measurements: one that began later read a later database, so an earlier
    /// one that finishes after it must not overwrite it.
    pub(super) next_ticket: AtomicU64,
}

/// The writers' side: each held host, and host names to ids (a report names its host).
#[derive(Default)]
pub(super) struct Hosts {
    pub(super) by_id: HashMap<HostId, HostState>,
    pub(super) names: HashMap<String, HostId>,
    /// While a batch of reports is applied ([`FleetState::hold_back`]): what readers will see
    /// once it is, changed in place. Each node of the persistent maps is copied at most once
    /// per batch rather than once per report: at 100,000 guests, copying them per report was
    /// 40 % of the server's CPU (perf).
    pub(super) draft: Option<Draft>,
    /// The copy readers saw before the current one, which the next draft starts from when no
    /// reader holds it any more (see `super::turns`).
    spare: Option<Spare>,
    /// How many holds are open.
    holds: usize,
}

/// Holds back what readers see until dropped (see [`FleetState::hold_back`]).
pub struct HeldBack<'a> {
    fleet: &'a FleetState,
    reused: bool,
}

impl HeldBack<'_> {
    /// Whether the draft is the spare brought up to date, rather than a clone of what readers
    /// see (a reader still held the spare, there was none, or it was too far behind), for the
    /// writer's log.
    pub fn reused_spare(&self) -> bool {
        self.reused
    }
}

impl Drop for HeldBack<'_> {
    fn drop(&mut self) {
        let mut hosts = self.fleet.lock();
        hosts.holds -= 1;
        // A panic may have left the draft half changed (a guest in one map and not the next):
        // readers keep what they had, and each host is put right by its next analysis.
        if std::thread::panicking() {
            hosts.draft = None;
        }
        if hosts.holds == 0
            && let Some(draft) = hosts.draft.take()
        {
            hosts.spare = self.fleet.finish(draft);
        }
    }
}

#[derive(Default)]
pub(super) struct HostState {
    /// The analysis inputs of its guests still on it and seen within the active limit, by id.
    pub(super) inputs: BTreeMap<GuestId, GuestInputs>,
    /// The same guests by what makes each the same guest on the host.
    pub(super) identities: HashMap<(Hypervisor, String), GuestId>,
    /// The host's count of stored reports: a guest whose last report is
    /// [`GONE_AFTER_MISSED_REPORTS`] behind it is gone.
    pub(super) reports_stored: i64,
    /// The newest report of the host all of whose samples (within the window) are held, and
    /// when that was read: a follower then reads only the samples of the reports after it
    /// (`from_db`). Report ids are given in the order a host's reports commit, each report's
    /// transaction holding its host's row. `None`: the host is read whole.
    pub(super) samples_through: Option<(ReportId, i64)>,
    /// The guests of its last analysis, as ranked.
    pub(super) analysed: Vec<GuestId>,
    /// Its guests' last kernel or command-line changes, measured.
    pub(super) changes: HashMap<GuestId, Change>,
    /// Measurements that can no longer change, kept so that they are not read again.
    pub(super) settled: SettledChanges,
    /// The ticket of the measurement `changes` came from.
    pub(super) changes_ticket: u64,
    /// Whether a last change's figures can still move (measured before it settled).
    pub(super) unsettled: bool,
    /// The latest last change without figures yet (too little idle time after it so far).
    pub(super) unmeasured_at_ms: Option<i64>,
}

impl HostState {
    /// Takes in a guest's inputs (new or updated), under its identity.
    pub(super) fn hold(&mut self, inputs: GuestInputs) {
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
        if silent.is_empty() {
            return 0;
        }
        let forgotten: Vec<HostState> = silent
            .iter()
            .filter_map(|host_id| hosts.by_id.remove(host_id))
            .collect();
        hosts.names.retain(|_, id| !silent.contains(id));
        let (mut guests, mut changes) = (Vec::new(), Vec::new());
        for host in forgotten {
            guests.extend(host.analysed);
            changes.extend(host.changes.into_keys());
        }
        self.publish_now(hosts, Edit::Forget { guests, changes });
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
    /// [`changes::changes`]; for the tests: see [`Published::changes`]).
    #[cfg(feature = "test-support")]
    pub fn changes(&self, now_ms: i64) -> HashMap<GuestId, Change> {
        self.published().changes(now_ms)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Hosts> {
        self.hosts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Analyses a host's guests again (the writers' side is locked by the caller) and puts its
    /// new verdicts in place of its previous ones, for readers too.
    pub(super) fn analyse_host(&self, hosts: &mut Hosts, host_id: HostId, now_ms: i64) {
        let Some(host) = hosts.by_id.get_mut(&host_id) else {
            return;
        };
        let analysed = host.analyse(now_ms);
        let edit = put_analysed(host, analysed);
        self.publish(hosts, edit);
    }

    /// Holds back what readers see until the guard is dropped: the one writer applies a batch
    /// of stored reports under it and acknowledges them after, so each report is seen once
    /// acknowledged, and the batch is published at once (see `Hosts::draft`).
    pub fn hold_back(&self) -> HeldBack<'_> {
        let mut guard = self.lock();
        let hosts = &mut *guard;
        // The draft before the count: a panic while the spare is brought up to date must not
        // leave a hold that no guard will end.
        if hosts.draft.is_none() {
            hosts.draft = Some(self.begin(hosts));
        }
        hosts.holds += 1;
        HeldBack {
            fleet: self,
            reused: hosts.draft.as_ref().is_some_and(Draft::reused),
        }
    }

    /// Changes what readers will see: the draft while one is held back, else a draft put in
    /// place at once. Only writers call it, with the writers' side locked, so no two replace
    /// it at once.
    fn publish(&self, hosts: &mut Hosts, edit: Edit) {
        if let Some(draft) = &mut hosts.draft {
            draft.apply(edit);
            return;
        }
        let mut draft = self.begin(hosts);
        draft.apply(edit);
        hosts.spare = self.finish(draft);
    }

    /// The same, seen at once even while a draft is held back (and in the draft, so that it
    /// is not undone when the draft is put in place).
    pub(super) fn publish_now(&self, hosts: &mut Hosts, edit: Edit) {
        let Some(draft) = &mut hosts.draft else {
            return self.publish(hosts, edit);
        };
        // A copy of its own: the spare went into the draft, which readers see once it is
        // done (and which leaves the copy it began from as the spare).
        let mut next = Published::clone(&self.published());
        next.edit(&edit);
        self.replace_published(next);
        draft.apply(edit);
    }

    /// A draft of what readers see now (see `super::turns`).
    fn begin(&self, hosts: &mut Hosts) -> Draft {
        Draft::begin(self.published(), hosts.spare.take())
    }

    /// Puts a draft in place for readers; returns the spare it leaves.
    fn finish(&self, draft: Draft) -> Option<Spare> {
        let (next, spare) = draft.finish();
        self.replace_published(next);
        spare
    }

    /// Puts `next` in place for readers. The copy replaced is usually the spare's; one that is
    /// not (after `publish_now`, or a spoilt draft) is freed here, after the readers' lock is
    /// let go, not under it.
    fn replace_published(&self, next: Published) {
        let replaced = std::mem::replace(
            &mut *self.published.write().unwrap_or_else(|e| e.into_inner()),
            Arc::new(next),
        );
        drop(replaced);
    }
}

/// Puts a host's newly analysed guests in place of its previous ones: the edit that does so
/// for readers.
fn put_analysed(host: &mut HostState, analysed: Vec<AnalysedGuest>) -> Edit {
    // Not `collect()`ed: that would reuse the analyses' own buffer (1,120 bytes a guest) for
    // the pointers, and the edit, kept for the spare, would hold it.
    let mut shared: Vec<Arc<AnalysedGuest>> = Vec::with_capacity(analysed.len());
    shared.extend(analysed.into_iter().map(Arc::new));
    let previous = std::mem::replace(&mut host.analysed, shared.iter().map(|g| g.id).collect());
    Edit::Host {
        previous,
        analysed: shared,
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
            setup: Default::default(),
            platform: None,
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
        let host = hosts.by_id.entry(HostId(host_id)).or_default();
        let edit = put_analysed(host, guests);
        current.publish(&mut hosts, edit);
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
    fn what_is_published_at_once_during_a_batch_stays_when_the_spare_is_brought_up_to_date() {
        let current = FleetState::default();
        set(&current, 1, vec![guest(1, 1, "a", 20.0)]);
        let change = Change::example(500, 4.0);
        let held = current.hold_back();
        set(&current, 2, vec![guest(2, 2, "b", 20.0)]);
        // A measurement, seen at once while the batch is held back.
        let measured = Edit::Changes {
            previous: Vec::new(),
            measured: HashMap::from([(GuestId(1), change)]),
        };
        current.publish_now(&mut current.lock(), measured);
        assert_eq!(current.change(GuestId(1)), Some(Some(change)));
        assert_eq!(names(&current, 1_000), ["a"]);
        drop(held);
        assert_eq!(names(&current, 1_000), ["a", "b"]);
        // The next batches begin from the spare, brought up to date: the change is still there.
        for round in 0..2 {
            let held = current.hold_back();
            assert!(held.reused_spare(), "round {round}");
            set(
                &current,
                2,
                vec![guest(2, 2, "b", 20.0), guest(3, 2, "c", 20.0)],
            );
            drop(held);
            assert_eq!(names(&current, 1_000), ["a", "b", "c"]);
            assert_eq!(current.change(GuestId(1)), Some(Some(change)));
            assert_eq!(current.published().realised(1_000).guests, 1);
        }
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
        crate::fleet::analysed::rank(&mut expected);
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
        // Nor among the active guests, unordered.
        let published = current.published();
        assert_eq!(published.active(1_000 + ACTIVE_WITHIN_MS).count(), 1);
        assert_eq!(published.active(1_001 + ACTIVE_WITHIN_MS).count(), 0);
        assert!(
            current
                .guest(GuestId(1), 1_001 + ACTIVE_WITHIN_MS)
                .is_none()
        );
        assert!(current.guest(GuestId(1), 1_000).is_some());
    }
}
