//! A guest list read from the kept orders and counts: which order or group a list walks, and
//! how many guests it matches, at the cost of what it shows.
//!
//! - No filter, or the search alone: the order's own set, the filters checked on the way.
//! - A facet's value whose order is kept (a host, a tick mode, an HZ): that value's group, in
//!   the ranking's order; sorted by the facet's own column or by waste, walked as it is; sorted
//!   by another column, its guests sorted (the group's size, not the fleet's). With several
//!   facets, the smallest group. Other facets are checked on the way.
//! - A column whose order is not kept ([`super::orderings::KEPT`]): what the list matches
//!   (its group, else the fleet) sorted.
//! - The count: kept for no filter or one facet; otherwise counted over the group walked (the
//!   search alone counts the fleet: a substring has no index).

use std::sync::Arc;

use super::analysed::AnalysedGuest;
use super::index::FleetIndex;
use super::listing::{Column, Facet, GuestFilter, Order, SortKey, WASTEFUL};
use super::orderings::{Orderings, Walk};

/// The guests of a list from a place on, and how many it matches on all pages.
pub struct Listed<'a> {
    pub guests: Walk<'a>,
    pub matching: usize,
}

/// The guests `filter` keeps, active since `since_ms`, in `order` after `after`; `index` is
/// the index as of the same time (see [`super::published::Published::index`]).
pub fn list<'a>(
    orderings: &'a Orderings,
    index: &FleetIndex,
    order: Order,
    filter: &'a GuestFilter,
    after: Option<&'a SortKey>,
    since_ms: i64,
) -> Listed<'a> {
    let keeps = move |g: &&'a Arc<AnalysedGuest>| g.last_seen_ms >= since_ms && filter.keeps(g);
    let wanted: Vec<(Facet, &str)> = Facet::ALL
        .into_iter()
        .map(|facet| (facet, filter.wanted(facet)))
        .filter(|(_, wanted)| !wanted.is_empty())
        .collect();
    // The facets with a group to walk: those whose order is kept, but the mode's "wasteful"
    // (many modes); the others are checked on the way.
    let mut groups = Vec::new();
    for &(facet, wanted) in &wanted {
        let column = Column::of_facet(facet);
        if (facet == Facet::Mode && wanted == WASTEFUL) || !Orderings::keeps(column) {
            continue;
        }
        match column.filter_val(wanted) {
            Some(value) => groups.push((index.count(facet, wanted), column, value)),
            // A value no guest can have (an HZ that is no number).
            None => {
                return Listed {
                    guests: Box::new(std::iter::empty()),
                    matching: 0,
                };
            }
        }
    }
    let own = groups.iter().find(|(_, column, _)| *column == order.column);
    let smallest = groups.iter().min_by_key(|(count, _, _)| *count);
    let group = own.or(smallest).map(|&(_, column, value)| (column, value));
    let in_order = match group {
        Some((column, _)) => column == order.column || order == Order::default(),
        None => Orderings::keeps(order.column),
    };
    // What a list sorted here matched, counted on the way (no second walk for the count).
    let mut counted = None;
    let guests: Walk<'a> = if in_order {
        Box::new(orderings.walk(order, group, after).filter(keeps))
    } else {
        // By a column whose order is not kept, or another than the group's: the guests it
        // matches (the group's, else every guest) sorted.
        let mut keyed: Vec<(SortKey, &'a Arc<AnalysedGuest>)> = orderings
            .walk(Order::default(), group, None)
            .filter(keeps)
            .map(|g| (order.key(g), g))
            .collect();
        counted = Some(keyed.len());
        keyed.retain(|(key, _)| after.is_none_or(|after| order.compare(key, after).is_gt()));
        keyed.sort_by(|(a, _), (b, _)| order.compare(a, b));
        Box::new(keyed.into_iter().map(|(_, g)| g))
    };
    let matching = match (filter.q.trim().is_empty(), wanted.as_slice()) {
        (true, []) => index.guests(),
        (true, [(facet, wanted)]) => index.count(*facet, wanted),
        _ => counted.unwrap_or_else(|| {
            orderings
                .walk(Order::default(), group, None)
                .filter(keeps)
                .count()
        }),
    };
    Listed { guests, matching }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::analysis::test_window;
    use crate::domain::{GuestId, HostId};
    use crate::fleet::AnalysedGuest;

    /// A guest of host `host` (of three) with one of a few figures and names, last seen at
    /// `seen_ms`: many ties in every column.
    fn guest(id: i64, host: i64, figures: usize, name: usize, seen_ms: i64) -> Arc<AnalysedGuest> {
        let (cpu, wakeups) = [(0.3, 20.0), (4.1, 2935.0), (5.3, 650.0), (78.0, 300.0)][figures];
        let mut window = test_window(1 + (id % 3) as u32, cpu, wakeups, None);
        window.uses_kvm = Some(false);
        Arc::new(AnalysedGuest {
            name: ["web", "Web", "db", "Ärger", "web"][name].into(),
            host: format!("hv-{host}"),
            host_id: HostId(host),
            hypervisor: ["qemu", "firecracker"][(id % 2) as usize].into(),
            uuid: Some(format!("00000000-0000-4000-8000-{id:012}")),
            last_seen_ms: seen_ms,
            ..AnalysedGuest::example(id, &window)
        })
    }

    const FILTERS: [&str; 12] = [
        "",
        "host=hv-1",
        "mode=periodic",
        "mode=wasteful",
        "hz=1000",
        "hz=unknown",
        "hz=many",
        "q=WEB",
        "host=hv-2&mode=tickless",
        "hypervisor=qemu&hz=1000",
        "host=hv-0&q=db",
        "host=nowhere",
    ];

    fn filter(query: &str) -> GuestFilter {
        let uri: axum::http::Uri = format!("/?{query}").parse().unwrap();
        axum::extract::Query::<GuestFilter>::try_from_uri(&uri)
            .unwrap()
            .0
    }

    fn ids<'a>(guests: impl Iterator<Item = &'a Arc<AnalysedGuest>>) -> Vec<GuestId> {
        guests.map(|g| g.id).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Guests analysed again, moved and taken away in any order, some of them silent past
        /// the active limit: every list (each column both ways, each kind of filter, resumed
        /// after each of its guests) walks the guests a full sort of the active ones gives,
        /// and counts them.
        #[test]
        fn every_list_walks_what_a_full_sort_gives(
            steps in prop::collection::vec(
                (0i64..14, 0i64..3, 0usize..4, 0usize..5, 0i64..3, any::<bool>()), 1..40),
        ) {
            let (mut orderings, mut index) = (Orderings::default(), FleetIndex::default());
            let mut held: BTreeMap<i64, Arc<AnalysedGuest>> = BTreeMap::new();
            for (id, host, figures, name, seen, drop) in steps {
                if let Some(old) = held.remove(&id) {
                    orderings.remove(old.id);
                    index.remove(&old);
                }
                if !drop {
                    let g = guest(id, host, figures, name, seen * 1_000);
                    orderings.put(&g);
                    index.add(&g);
                    held.insert(id, g);
                }
            }
            // Guests last seen before 1 s are no longer active; the index counts them out as
            // `Published::index` does.
            let since_ms = 1_000;
            let mut as_of = index.clone();
            for g in held.values().filter(|g| g.last_seen_ms < since_ms) {
                as_of.remove(g);
            }
            let active: Vec<Arc<AnalysedGuest>> = held
                .values()
                .filter(|g| g.last_seen_ms >= since_ms)
                .cloned()
                .collect();
            for query in FILTERS {
                let filter = filter(query);
                for column in Column::ALL {
                    for descending in [false, true] {
                        let order = Order { column, descending };
                        let sorted = order.sorted(&active, &filter, None);
                        let listed = list(&orderings, &as_of, order, &filter, None, since_ms);
                        prop_assert_eq!(listed.matching, sorted.len(), "{} {:?}", query, order);
                        prop_assert_eq!(
                            ids(listed.guests), ids(sorted.iter().copied()), "{} {:?}", query, order
                        );
                        for (k, g) in sorted.iter().enumerate() {
                            let key = order.key(g);
                            let rest = list(&orderings, &as_of, order, &filter, Some(&key), since_ms);
                            prop_assert_eq!(
                                ids(rest.guests),
                                ids(sorted[k + 1..].iter().copied()),
                                "{} {:?} after {:?}", query, order, g.id
                            );
                        }
                    }
                }
            }
        }
    }
}
