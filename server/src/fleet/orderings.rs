//! Every order a guest list can ask for, kept up to date as hosts are analysed again, so that a
//! page of a list walks what it shows instead of sorting the fleet.
//!
//! One persistent ordered set per [`Column`]: the guests by that column's value in the column's
//! natural direction (largest first for figures), ties as the ranking breaks them (most waste,
//! most host CPU, name, id). The waste column's set is the ranking itself. A list in the
//! natural direction walks its set forward; in the other direction it walks the groups of equal
//! values backwards, each forward (ties keep the ranking's order in both directions, as
//! [`Order::compare`] has it), one O(log n) seek per group. A facet filter's guests are one
//! group of that facet's column, in the ranking's order. A cursor is a seek.
//!
//! Adding or taking away a guest costs O(log n) per set, shared with the copies readers hold.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use equivalent::{Comparable, Equivalent};
use smol_str::SmolStr;

use super::analysed::AnalysedGuest;
use super::listing::{Column, KeyValue, Order, SortKey, Val, cause, mode};
use crate::domain::GuestId;

/// A guest in one column's set: its id and the figures and texts it sorts by, copied.
///
/// Each write copies the nodes of the set it changes (the rest is shared with the copies
/// readers hold): copying an entry must touch nothing else. An entry that held the guest's
/// `Arc` made every node copy 64 reference-count increments on analyses all over memory, most
/// of a report's apply at 100,000 guests (docs/performance.md).
#[derive(Clone)]
struct Entry {
    column: Column,
    value: Inline,
    wasted_cpu_pct: f64,
    host_cpu_pct: f64,
    name: SmolStr,
    id: GuestId,
}

#[derive(Clone)]
enum Inline {
    Number(f64),
    Integer(i64),
    /// A text of a fixed few (a tick mode, a cause).
    Static(&'static str),
    Text(SmolStr),
    /// The guest's name, compared folded (the entry's `name`).
    Name,
}

impl Entry {
    fn new(column: Column, guest: &AnalysedGuest) -> Entry {
        let value = match column {
            Column::Name => Inline::Name,
            Column::Mode => Inline::Static(mode(guest)),
            Column::Cause => Inline::Static(cause(guest)),
            _ => match column.val(guest) {
                Val::Number(n) => Inline::Number(n),
                Val::Integer(i) => Inline::Integer(i),
                Val::Text(t) | Val::Folded(t) => Inline::Text(SmolStr::new(t)),
            },
        };
        Entry {
            column,
            value,
            wasted_cpu_pct: guest.wasted_cpu_pct(),
            host_cpu_pct: guest.verdict.rates.map_or(0.0, |r| r.host_cpu_pct),
            name: SmolStr::new(&guest.name),
            id: guest.id,
        }
    }

    /// The column's value, as [`Column::val`] reads it from the guest.
    fn val(&self) -> Val<'_> {
        match &self.value {
            Inline::Number(n) => Val::Number(*n),
            Inline::Integer(i) => Val::Integer(*i),
            Inline::Static(t) => Val::Text(t),
            Inline::Text(t) => Val::Text(t),
            Inline::Name => Val::Folded(&self.name),
        }
    }

    fn place(&self) -> (Val<'_>, Tie<'_>) {
        let tie = Tie::At {
            wasted_cpu_pct: self.wasted_cpu_pct,
            host_cpu_pct: self.host_cpu_pct,
            name: &self.name,
            id: self.id,
        };
        (self.val(), tie)
    }
}

/// How a place breaks ties among equal values: before every guest, as a guest (or a cursor's
/// key) does, or after every guest.
#[derive(Clone, Copy)]
enum Tie<'a> {
    First,
    At {
        wasted_cpu_pct: f64,
        host_cpu_pct: f64,
        name: &'a str,
        id: GuestId,
    },
    Last,
}

impl Tie<'_> {
    fn of(g: &AnalysedGuest) -> Tie<'_> {
        Tie::At {
            wasted_cpu_pct: g.wasted_cpu_pct(),
            host_cpu_pct: g.verdict.rates.map_or(0.0, |r| r.host_cpu_pct),
            name: &g.name,
            id: g.id,
        }
    }

    fn of_key(key: &SortKey) -> Tie<'_> {
        Tie::At {
            wasted_cpu_pct: key.wasted_cpu_pct,
            host_cpu_pct: key.host_cpu_pct,
            name: &key.name,
            id: key.id,
        }
    }

    /// The ranking's order of ties: most waste, most host CPU, name, id.
    fn cmp(self, other: Tie<'_>) -> Ordering {
        match (self, other) {
            (Tie::First, Tie::First) | (Tie::Last, Tie::Last) => Ordering::Equal,
            (Tie::First, _) | (_, Tie::Last) => Ordering::Less,
            (_, Tie::First) | (Tie::Last, _) => Ordering::Greater,
            (
                Tie::At {
                    wasted_cpu_pct: wa,
                    host_cpu_pct: ca,
                    name: na,
                    id: ia,
                },
                Tie::At {
                    wasted_cpu_pct: wb,
                    host_cpu_pct: cb,
                    name: nb,
                    id: ib,
                },
            ) => wb
                .total_cmp(&wa)
                .then_with(|| cb.total_cmp(&ca))
                .then_with(|| na.cmp(nb))
                .then_with(|| ia.cmp(&ib)),
        }
    }
}

/// The order of a column's set: the value in the column's natural direction, then the tie.
fn set_order(
    column: Column,
    (va, ta): (Val<'_>, Tie<'_>),
    (vb, tb): (Val<'_>, Tie<'_>),
) -> Ordering {
    let by_value = va.order(vb);
    let by_value = if column.descending_by_default() {
        by_value.reverse()
    } else {
        by_value
    };
    by_value.then_with(|| ta.cmp(tb))
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        set_order(self.column, self.place(), other.place())
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

/// A place in a column's set that is not a guest: a cursor's key, or the bounds of a group.
struct Probe<'a> {
    column: Column,
    value: Val<'a>,
    tie: Tie<'a>,
}

impl Equivalent<Entry> for Probe<'_> {
    fn equivalent(&self, entry: &Entry) -> bool {
        self.compare(entry) == Ordering::Equal
    }
}

impl Comparable<Entry> for Probe<'_> {
    fn compare(&self, entry: &Entry) -> Ordering {
        set_order(self.column, (self.value, self.tie), entry.place())
    }
}

/// The columns whose order is kept. Each costs every guest-sample two seeks and a copy of the
/// nodes on their paths (the persistent sets share all else with the copies readers hold):
/// at 30,000 guests, keeping all twelve made a report of 20 guests cost 2-3 ms to apply,
/// four times what its analysis does. Kept are the ranking and the orders the pages link to
/// (a host's guests, a tick mode's, a cause's, an HZ's, the guest list's name and host-CPU
/// columns); a
/// list by another column or filter sorts or walks what it matches (see [`super::lists`]).
pub const KEPT: [Column; 7] = [
    Column::Waste,
    Column::Host,
    Column::Mode,
    Column::Cause,
    Column::Hz,
    Column::Name,
    Column::Cpu,
];

/// The kept orders (see the module's documentation), with the guests they hold by id.
#[derive(Clone, Default)]
pub struct Orderings {
    sets: [imbl::OrdSet<Entry>; KEPT.len()],
    guests: imbl::HashMap<GuestId, Arc<AnalysedGuest>>,
}

/// A kept column's place in [`KEPT`].
fn kept(column: Column) -> Option<usize> {
    KEPT.iter().position(|c| *c == column)
}

/// A walk over guests in a list's order.
pub type Walk<'a> = Box<dyn Iterator<Item = &'a Arc<AnalysedGuest>> + 'a>;

impl Orderings {
    /// Puts a guest's analysis in every order, in place of its previous one (returned).
    pub fn put(&mut self, g: &Arc<AnalysedGuest>) -> Option<Arc<AnalysedGuest>> {
        let old = self.remove(g.id);
        for (set, column) in self.sets.iter_mut().zip(KEPT) {
            set.insert(Entry::new(column, g));
        }
        self.guests.insert(g.id, g.clone());
        old
    }

    /// Takes a guest out of every order; returns the analysis it was put in with.
    pub fn remove(&mut self, id: GuestId) -> Option<Arc<AnalysedGuest>> {
        let g = self.guests.remove(&id)?;
        for (set, column) in self.sets.iter_mut().zip(KEPT) {
            let probe = Probe {
                column,
                value: column.val(&g),
                tie: Tie::of(&g),
            };
            set.remove(&probe);
        }
        Some(g)
    }

    /// A guest held, by id.
    pub fn get(&self, id: GuestId) -> Option<&Arc<AnalysedGuest>> {
        self.guests.get(&id)
    }

    /// Every held guest, in no particular order: a walk of the map, with no lookup per guest.
    pub fn guests(&self) -> impl Iterator<Item = &Arc<AnalysedGuest>> {
        self.guests.values()
    }

    /// How many guests are held.
    pub fn held(&self) -> usize {
        self.guests.len()
    }

    /// The guests of entries, in their order.
    fn guests_of<'a>(
        &'a self,
        entries: impl Iterator<Item = &'a Entry> + 'a,
    ) -> impl Iterator<Item = &'a Arc<AnalysedGuest>> + 'a {
        // Every entry's guest is held (`put` and `remove` keep both in step).
        entries.filter_map(|e| self.guests.get(&e.id))
    }

    /// Every guest, most wasteful first ([`KEPT`]'s first set is the waste column's).
    pub fn ranking(&self) -> impl DoubleEndedIterator<Item = &Arc<AnalysedGuest>> {
        self.sets[0].iter().filter_map(|e| self.guests.get(&e.id))
    }

    /// Whether `column`'s order is kept.
    pub fn keeps(column: Column) -> bool {
        kept(column).is_some()
    }

    /// The guests in `order` that come after `after` (all without it); with `group`, only
    /// those whose value of `group.0` (a column) is `group.1`, which must be `order`'s column
    /// or, with the default order, any. Both columns must be kept ([`Orderings::keeps`]); a
    /// column that is not walks nothing.
    pub fn walk<'a>(
        &'a self,
        order: Order,
        group: Option<(Column, Val<'a>)>,
        after: Option<&'a SortKey>,
    ) -> Walk<'a> {
        let (column, natural) = match group {
            // A group's guests are in the ranking's order: the waste column's, most first.
            Some((group_column, _)) if group_column != order.column => {
                debug_assert!(order == Order::default());
                (group_column, true)
            }
            _ => (
                order.column,
                order.descending == order.column.descending_by_default(),
            ),
        };
        let Some(set) = kept(column).map(|i| &self.sets[i]) else {
            debug_assert!(false, "{column:?}'s order is not kept");
            return Box::new(std::iter::empty());
        };
        let group_value = group.map(|(_, value)| value);
        // Where the walk resumes: in the walked set, at the cursor's tie, within its value's
        // group (the group's value when the set is another column's than the cursor's).
        let resume = after.map(|key| Probe {
            column,
            value: group_value.unwrap_or(key.value.val()),
            tie: Tie::of_key(key),
        });
        let bound = |value: Val<'a>, tie: Tie<'a>| Probe { column, value, tie };
        if natural {
            let lower = match (&resume, group_value) {
                (Some(at), _) => Bound::Excluded(bound(at.value, at.tie)),
                (None, Some(v)) => Bound::Included(bound(v, Tie::First)),
                (None, None) => Bound::Unbounded,
            };
            let upper = match group_value {
                Some(v) => Bound::Included(bound(v, Tie::Last)),
                None => Bound::Unbounded,
            };
            return Box::new(self.guests_of(set.range((lower, upper))));
        }
        // Against the natural direction: the groups of equal values backwards, each forward.
        let start: Option<KeyValue> = match (&resume, group_value) {
            (Some(at), _) => Some(at.value.to_owned()),
            (None, Some(v)) => Some(v.to_owned()),
            (None, None) => set.get_max().map(|e| e.val().to_owned()),
        };
        Box::new(self.guests_of(Backwards {
            set,
            column,
            // The cursor's own group is walked from just after it.
            resume_tie: resume.map(|at| at.tie),
            next: start,
            current: None,
            only_one: group_value.is_some(),
        }))
    }
}

/// The groups of equal values of a set from `next` backwards, each walked forward.
struct Backwards<'a> {
    set: &'a imbl::OrdSet<Entry>,
    column: Column,
    resume_tie: Option<Tie<'a>>,
    next: Option<KeyValue>,
    current: Option<imbl::ordset::RangedIter<'a, Entry, imbl::shared_ptr::DefaultSharedPtr>>,
    /// A filter's group: no other group follows.
    only_one: bool,
}

impl<'a> Iterator for Backwards<'a> {
    type Item = &'a Entry;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(entry) = self.current.as_mut().and_then(Iterator::next) {
                return Some(entry);
            }
            let value = self.next.take()?;
            let column = self.column;
            let first = Probe {
                column,
                value: value.val(),
                tie: self.resume_tie.take().unwrap_or(Tie::First),
            };
            let lower = match first.tie {
                Tie::First => Bound::Included(first),
                _ => Bound::Excluded(first),
            };
            let last = Probe {
                column,
                value: value.val(),
                tie: Tie::Last,
            };
            self.current = Some(self.set.range((lower, Bound::Included(last))));
            if !self.only_one {
                let before = Probe {
                    column,
                    value: value.val(),
                    tie: Tie::First,
                };
                self.next = self
                    .set
                    .range((Bound::Unbounded, Bound::Excluded(before)))
                    .next_back()
                    .map(|e| e.val().to_owned());
            }
        }
    }
}
