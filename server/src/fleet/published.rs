//! The analysed fleet as readers see it ([`Published`]): every analysed guest by id, in every
//! kept list order and counted in the kept index, and their measured changes. The writers
//! (`super::state`) change a copy through the methods at the end, which keep the id map, the
//! orders and the index in step, and put it in place whole.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::analysed::{ACTIVE_WITHIN_MS, AnalysedGuest};
use super::index::FleetIndex;
use super::listing::{GuestFilter, Order, SortKey};
use super::lists::{self, Listed};
use super::orderings::Orderings;
use crate::analysis::change::Change;
use crate::domain::GuestId;

/// The analysed fleet as readers see it: a consistent copy as of one moment, cheap to hold.
#[derive(Clone, Default)]
pub struct Published {
    /// Every analysed guest in every order a list asks for; the waste column's is the
    /// ranking, most wasteful first.
    orderings: Orderings,
    /// The held guests' last kernel or command-line changes, measured.
    changes: imbl::HashMap<GuestId, Change>,
    /// The same changes by when they were made: a range's changes are read without the others.
    changes_by_time: imbl::OrdSet<(i64, GuestId)>,
    /// How many of the changes are of held guests, and what they save: kept as guests and
    /// changes come and go, so that the realised saving costs no walk of the changes.
    realised_held: Realised,
    /// Counts and sums over the ranked guests, kept up to date with the ranking.
    index: FleetIndex,
}

/// The measured changes of a set of guests: how many, and what they save together, in % of
/// one core (negative: they cost more than they save).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Realised {
    pub guests: usize,
    pub saved_cpu_pct: f64,
}

impl Realised {
    fn add(&mut self, change: &Change) {
        self.guests += 1;
        self.saved_cpu_pct += change.saved_cpu_pct;
    }

    fn take(&mut self, change: &Change) {
        self.guests = self.guests.saturating_sub(1);
        // Back to exactly nothing with the last one, whatever rounding the sums left.
        self.saved_cpu_pct = if self.guests == 0 {
            0.0
        } else {
            self.saved_cpu_pct - change.saved_cpu_pct
        };
    }
}

impl Published {
    /// The guests active at `now_ms` (reported within the active limit), most wasteful first.
    pub fn ranked(&self, now_ms: i64) -> impl Iterator<Item = &Arc<AnalysedGuest>> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        self.orderings
            .ranking()
            .filter(move |g| g.last_seen_ms >= since_ms)
    }

    /// The guests active at `now_ms`, in no particular order, for what reads every guest and
    /// orders them itself or not at all. It walks the guests' map, where [`Published::ranked`]
    /// looks each guest up from the ranking's entries.
    pub fn active(&self, now_ms: i64) -> impl Iterator<Item = &Arc<AnalysedGuest>> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        self.orderings
            .guests()
            .filter(move |g| g.last_seen_ms >= since_ms)
    }

    /// One guest as ranked, if it is active at `now_ms`.
    pub fn guest(&self, guest_id: GuestId, now_ms: i64) -> Option<&Arc<AnalysedGuest>> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        self.orderings
            .get(guest_id)
            .filter(|g| g.last_seen_ms >= since_ms)
    }

    /// How many guests are held (active or not yet forgotten).
    pub fn held(&self) -> usize {
        self.orderings.held()
    }

    /// A held guest's last kernel or command-line change, measured.
    pub fn change(&self, guest_id: GuestId) -> Option<Change> {
        self.changes.get(&guest_id).copied()
    }

    /// One guest's last change as measured: `None` when the guest is not held, `Some(None)`
    /// when it is but has no measured change.
    pub fn held_change(&self, guest_id: GuestId) -> Option<Option<Change>> {
        self.orderings.get(guest_id)?;
        Some(self.change(guest_id))
    }

    /// The changes of the guests active at `now_ms`: how many, and what they save. It costs
    /// the guests held but no longer active (few: see [`Published::index`]), not the changes.
    pub fn realised(&self, now_ms: i64) -> Realised {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        let mut realised = self.realised_held;
        for id in self.index.seen_before(since_ms) {
            if let Some(change) = self.changes.get(&id) {
                realised.take(change);
            }
        }
        realised
    }

    /// The changes made in [from_ms, to_ms) of the guests active at `now_ms`, oldest first
    /// (then by guest): what a chart of that range marks, read without the others.
    pub fn changes_between(
        &self,
        from_ms: i64,
        to_ms: i64,
        now_ms: i64,
    ) -> impl Iterator<Item = (&Arc<AnalysedGuest>, Change)> + '_ {
        self.changes_by_time
            .range((from_ms, GuestId(i64::MIN))..(to_ms, GuestId(i64::MIN)))
            .filter_map(move |(_, id)| Some((self.guest(*id, now_ms)?, *self.changes.get(id)?)))
    }

    /// The last kernel or command-line change of each guest active at `now_ms`, measured: a
    /// walk of them all, which the tests hold [`Published::realised`] and
    /// [`Published::changes_between`] to; readers use those.
    #[cfg(any(test, feature = "test-support"))]
    pub fn changes(&self, now_ms: i64) -> HashMap<GuestId, Change> {
        self.changes
            .iter()
            .filter(|(guest, _)| self.guest(**guest, now_ms).is_some())
            .map(|(guest, change)| (*guest, *change))
            .collect()
    }

    /// The analysed fleet of `guests` (tests: what a host's analysis publishes, without one).
    #[cfg(test)]
    pub(crate) fn of(guests: &[Arc<AnalysedGuest>]) -> Published {
        let mut published = Published::default();
        for g in guests {
            published.put(g);
        }
        published
    }

    /// The guests `filter` keeps, active at `now_ms`, in `order` after `after`, and how many it
    /// keeps on all pages: what a page of a list shows, at that page's cost (see
    /// [`super::lists`]).
    pub fn list<'a>(
        &'a self,
        order: Order,
        filter: &'a GuestFilter,
        after: Option<&'a SortKey>,
        now_ms: i64,
    ) -> Listed<'a> {
        let index = self.index(now_ms);
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        lists::list(&self.orderings, &index, order, filter, after, since_ms)
    }

    /// The counts and sums over the guests active at `now_ms`: those kept up to date, with the
    /// guests held but silent past the active limit counted out (few: a host's next analysis
    /// and the retention's [`super::state::FleetState::forget_silent`] drop them).
    pub fn index(&self, now_ms: i64) -> Cow<'_, FleetIndex> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        if self.index.seen_before(since_ms).next().is_none() {
            return Cow::Borrowed(&self.index);
        }
        let mut index = self.index.clone();
        for id in self.index.seen_before(since_ms) {
            if let Some(g) = self.orderings.get(id) {
                index.remove(g);
            }
        }
        Cow::Owned(index)
    }
}

/// One change the writers make to what readers see (only `super::state` makes them, on a copy
/// it then publishes). Kept whole, so that it can be made again on the other copy
/// (`super::state`'s spare): the same edits in the same order make the same state, float sums
/// included.
#[derive(Debug)]
pub enum Edit {
    /// A host's guests analysed again: its previous guests out, its new analyses in.
    Host {
        previous: Vec<GuestId>,
        analysed: Vec<Arc<AnalysedGuest>>,
    },
    /// A host forgotten: its guests and their measured changes out.
    Forget {
        guests: Vec<GuestId>,
        changes: Vec<GuestId>,
    },
    /// A host's changes measured again: its previous ones out, the new ones in.
    Changes {
        previous: Vec<GuestId>,
        measured: HashMap<GuestId, Change>,
    },
}

impl Edit {
    /// How many guests it names: what making it again costs, about.
    pub fn guests(&self) -> usize {
        match self {
            Edit::Host { previous, analysed } => previous.len() + analysed.len(),
            Edit::Forget { guests, changes } => guests.len() + changes.len(),
            Edit::Changes { previous, measured } => previous.len() + measured.len(),
        }
    }
}

impl Published {
    /// Makes one of the writers' changes.
    pub fn edit(&mut self, edit: &Edit) {
        match edit {
            Edit::Host { previous, analysed } => {
                self.drop_guests(previous);
                for guest in analysed {
                    self.put(guest);
                }
            }
            Edit::Forget { guests, changes } => {
                self.drop_guests(guests);
                self.forget_changes(changes);
            }
            Edit::Changes { previous, measured } => {
                self.forget_changes(previous);
                self.set_changes(measured);
            }
        }
    }

    /// Puts a guest's new analysis in place of its previous one, wherever that was (a guest
    /// that moved here from another host leaves that host's entries).
    fn put(&mut self, guest: &Arc<AnalysedGuest>) {
        match self.orderings.put(guest) {
            Some(old) => self.index.remove(&old),
            // Newly held: its change, if it has one, now counts.
            None => {
                if let Some(change) = self.changes.get(&guest.id) {
                    self.realised_held.add(change);
                }
            }
        }
        self.index.add(guest);
    }

    /// Takes `guests` out of the ranking.
    fn drop_guests(&mut self, guests: &[GuestId]) {
        for id in guests {
            if let Some(old) = self.orderings.remove(*id) {
                self.index.remove(&old);
                if let Some(change) = self.changes.get(id) {
                    self.realised_held.take(change);
                }
            }
        }
    }

    /// Forgets the measured changes of `guests`.
    fn forget_changes<'a>(&mut self, guests: impl IntoIterator<Item = &'a GuestId>) {
        for guest in guests {
            self.forget_change(*guest);
        }
    }

    /// Sets measured changes.
    fn set_changes(&mut self, changes: &HashMap<GuestId, Change>) {
        for (&guest, change) in changes {
            self.forget_change(guest);
            self.changes_by_time.insert((change.at_ms, guest));
            if self.orderings.get(guest).is_some() {
                self.realised_held.add(change);
            }
            self.changes.insert(guest, *change);
        }
    }

    fn forget_change(&mut self, guest: GuestId) {
        let Some(old) = self.changes.remove(&guest) else {
            return;
        };
        self.changes_by_time.remove(&(old.at_ms, guest));
        if self.orderings.get(guest).is_some() {
            self.realised_held.take(&old);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::analysis::test_window;

    const NOW_MS: i64 = 10_000_000;

    /// Guest `id`, last seen `seen_ago_ms` before [`NOW_MS`] (past the active limit: held, not
    /// active).
    fn guest(id: i64, seen_ago_ms: i64) -> Arc<AnalysedGuest> {
        let window = test_window(1, 5.3, 650.0, None);
        Arc::new(AnalysedGuest {
            last_seen_ms: NOW_MS - seen_ago_ms,
            ..AnalysedGuest::example(id, &window)
        })
    }

    #[derive(Debug, Clone)]
    enum Step {
        Put { id: i64, silent: bool },
        Drop(i64),
        Set { id: i64, at_ms: i64, saved: f64 },
        Forget(i64),
    }

    fn step() -> impl Strategy<Value = Step> {
        let id = 0..8_i64;
        prop_oneof![
            (id.clone(), any::<bool>()).prop_map(|(id, silent)| Step::Put { id, silent }),
            id.clone().prop_map(Step::Drop),
            (id.clone(), 0..5_i64, -2.0..6.0_f64).prop_map(|(id, at, saved)| Step::Set {
                id,
                at_ms: at * 1_000,
                saved
            }),
            id.prop_map(Step::Forget),
        ]
    }

    proptest! {
        /// Whatever order guests and their changes come and go in, the kept count and saving
        /// are those of the active guests' changes, and a range's marks are its changes.
        #[test]
        fn the_kept_realised_saving_and_marks_are_the_active_guests_changes(
            steps in proptest::collection::vec(step(), 0..60)
        ) {
            let mut published = Published::default();
            for step in steps {
                match step {
                    Step::Put { id, silent } => {
                        let ago = if silent { ACTIVE_WITHIN_MS + 1 } else { 0 };
                        published.put(&guest(id, ago));
                    }
                    Step::Drop(id) => published.drop_guests(&[GuestId(id)]),
                    Step::Set { id, at_ms, saved } => {
                        published.set_changes(&HashMap::from([(GuestId(id), Change::example(at_ms, saved))]));
                    }
                    Step::Forget(id) => published.forget_changes(&[GuestId(id)]),
                }
                let changes = published.changes(NOW_MS);
                let kept = published.realised(NOW_MS);
                prop_assert_eq!(kept.guests, changes.len());
                let saved: f64 = changes.values().map(|c| c.saved_cpu_pct).sum();
                prop_assert!((kept.saved_cpu_pct - saved).abs() < 1e-9, "{} != {}", kept.saved_cpu_pct, saved);
                // Each range: its changes, oldest first.
                for (from_ms, to_ms) in [(0, 5_000), (1_000, 3_000), (2_000, 2_001), (4_000, 4_000)] {
                    let marks: Vec<(i64, GuestId)> = published
                        .changes_between(from_ms, to_ms, NOW_MS)
                        .map(|(g, c)| (c.at_ms, g.id))
                        .collect();
                    let mut expected: Vec<(i64, GuestId)> = changes
                        .iter()
                        .filter(|(_, c)| (from_ms..to_ms).contains(&c.at_ms))
                        .map(|(g, c)| (c.at_ms, *g))
                        .collect();
                    expected.sort();
                    prop_assert_eq!(marks, expected);
                }
            }
        }
    }
}
