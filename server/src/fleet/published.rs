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
    /// Counts and sums over the ranked guests, kept up to date with the ranking.
    index: FleetIndex,
}

impl Published {
    /// The guests active at `now_ms` (reported within the active limit), most wasteful first.
    pub fn ranked(&self, now_ms: i64) -> impl Iterator<Item = &Arc<AnalysedGuest>> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        self.orderings
            .ranking()
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

    /// The last kernel or command-line change of each guest active at `now_ms`, measured.
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

/// The writers' changes (only `super::state` makes them, on a copy it then publishes).
impl Published {
    /// Puts a guest's new analysis in place of its previous one, wherever that was (a guest
    /// that moved here from another host leaves that host's entries).
    pub(super) fn put(&mut self, guest: &Arc<AnalysedGuest>) {
        if let Some(old) = self.orderings.put(guest) {
            self.index.remove(&old);
        }
        self.index.add(guest);
    }

    /// Takes `guests` out of the ranking.
    pub(super) fn drop_guests(&mut self, guests: &[GuestId]) {
        for id in guests {
            if let Some(old) = self.orderings.remove(*id) {
                self.index.remove(&old);
            }
        }
    }

    /// Forgets the measured changes of `guests`.
    pub(super) fn forget_changes<'a>(&mut self, guests: impl IntoIterator<Item = &'a GuestId>) {
        for guest in guests {
            self.changes.remove(guest);
        }
    }

    /// Sets measured changes.
    pub(super) fn set_changes(&mut self, changes: &HashMap<GuestId, Change>) {
        self.changes.extend(changes.iter().map(|(g, c)| (*g, *c)));
    }
}
