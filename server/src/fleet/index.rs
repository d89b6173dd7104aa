//! What the pages count over the whole fleet, kept up to date guest by guest as hosts are
//! analysed again, so that a page reads it instead of walking every guest: the fleet's totals,
//! each host's totals and the hosts most wasteful first, and how many guests have each value of
//! each [`Facet`] (the overview's distributions, the list's filter choices and counts).
//!
//! Adding or taking away a guest costs O(log n) (persistent maps, shared with the copies
//! readers hold). Sums of waste are integers ([`micro_pct`]), so the index after any sequence
//! of changes is exactly the one built afresh from the guests it holds, which the tests check.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::analysed::AnalysedGuest;
use super::listing::Facet;
use super::totals::{
    HostBaseline, HostTotals, Totals, fleet_totals, host_line, micro_pct, pct_of_micro,
};
use crate::analysis::cost::CostModel;
use crate::domain::{GuestId, HostId};

/// Counts and sums over a set of analysed guests (see the module's documentation).
#[derive(Clone, Default)]
pub struct FleetIndex {
    guests: usize,
    /// Guests that tick or poll while idle.
    ticking: usize,
    wasted_micro: i64,
    hosts: imbl::HashMap<HostId, HostSums>,
    /// The hosts with guests, most wasteful first.
    host_order: imbl::OrdSet<HostKey>,
    /// Per facet ([`Facet::index`]), how many guests have each value (never 0) and their summed
    /// waste.
    values: [imbl::OrdMap<String, Tally>; Facet::ALL.len()],
    /// When each guest was last seen, oldest first: which ones a reader counts out as no
    /// longer active.
    last_seen: imbl::OrdSet<(i64, GuestId)>,
}

/// The guests with one value of a facet: how many, and their summed waste.
#[derive(Clone, Copy, Default)]
struct Tally {
    guests: usize,
    wasted_micro: i64,
}

/// One host's sums over its guests held in the index.
#[derive(Clone)]
struct HostSums {
    name: String,
    guests: usize,
    ticking: usize,
    wasted_micro: i64,
    /// Per hypervisor, how many of its guests run under it and the baseline their waste was
    /// judged against (one per host and hypervisor: the analysis learns it per host).
    baselines: BTreeMap<String, (usize, HostBaseline)>,
}

/// A host in the order of [`FleetIndex::hosts_by_waste`]: most waste first, then by name,
/// then by id (as [`super::host_totals`] orders them).
#[derive(Clone, PartialEq, Eq)]
struct HostKey {
    wasted_micro: i64,
    name: String,
    id: HostId,
}

impl Ord for HostKey {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .wasted_micro
            .cmp(&self.wasted_micro)
            .then_with(|| self.name.cmp(&other.name))
            .then_with(|| self.id.cmp(&other.id))
    }
}

impl PartialOrd for HostKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl HostSums {
    fn key(&self, id: HostId) -> HostKey {
        HostKey {
            wasted_micro: self.wasted_micro,
            name: self.name.clone(),
            id,
        }
    }

    fn totals(&self, id: HostId, model: &CostModel) -> HostTotals {
        host_line(
            id,
            &self.name,
            (self.guests, self.ticking, self.wasted_micro),
            self.baselines.values().map(|(_, b)| b.clone()).collect(),
            model,
        )
    }
}

impl FleetIndex {
    /// Counts a guest in. A guest is in the index at most once: take its previous analysis
    /// out first.
    pub fn add(&mut self, g: &AnalysedGuest) {
        let wasted = micro_pct(g.wasted_cpu_pct());
        let ticking = usize::from(g.verdict.classification.mode.is_wasteful());
        self.guests += 1;
        self.ticking += ticking;
        self.wasted_micro += wasted;
        self.change_host(g, |sums| {
            sums.guests += 1;
            sums.ticking += ticking;
            sums.wasted_micro += wasted;
            let baseline = sums
                .baselines
                .entry(g.hypervisor.clone())
                .or_insert_with(|| (0, HostBaseline::of(g)));
            baseline.0 += 1;
            // The newest analysis's: all of a host's guests are analysed together.
            baseline.1 = HostBaseline::of(g);
        });
        for facet in Facet::ALL {
            let tally = self.values[facet.index()]
                .entry(facet.value(g).into_owned())
                .or_default();
            tally.guests += 1;
            tally.wasted_micro += wasted;
        }
        self.last_seen.insert((g.last_seen_ms, g.id));
    }

    /// Counts out a guest counted in by [`FleetIndex::add`] (the same analysis of it).
    pub fn remove(&mut self, g: &AnalysedGuest) {
        let wasted = micro_pct(g.wasted_cpu_pct());
        let ticking = usize::from(g.verdict.classification.mode.is_wasteful());
        self.guests -= 1;
        self.ticking -= ticking;
        self.wasted_micro -= wasted;
        self.change_host(g, |sums| {
            sums.guests -= 1;
            sums.ticking -= ticking;
            sums.wasted_micro -= wasted;
            if let Some(baseline) = sums.baselines.get_mut(&g.hypervisor) {
                baseline.0 -= 1;
                if baseline.0 == 0 {
                    sums.baselines.remove(&g.hypervisor);
                }
            }
        });
        for facet in Facet::ALL {
            let values = &mut self.values[facet.index()];
            let value = facet.value(g);
            if let Some(tally) = values.get_mut(value.as_ref()) {
                tally.guests -= 1;
                tally.wasted_micro -= wasted;
                if tally.guests == 0 {
                    values.remove(value.as_ref());
                }
            }
        }
        self.last_seen.remove(&(g.last_seen_ms, g.id));
    }

    /// Changes a guest's host's sums, keeping the hosts' order (a host left without guests
    /// leaves the index).
    fn change_host(&mut self, g: &AnalysedGuest, change: impl FnOnce(&mut HostSums)) {
        let mut sums = match self.hosts.remove(&g.host_id) {
            Some(sums) => {
                self.host_order.remove(&sums.key(g.host_id));
                sums
            }
            None => HostSums {
                name: g.host.clone(),
                guests: 0,
                ticking: 0,
                wasted_micro: 0,
                baselines: BTreeMap::new(),
            },
        };
        change(&mut sums);
        if sums.guests > 0 {
            self.host_order.insert(sums.key(g.host_id));
            self.hosts.insert(g.host_id, sums);
        }
    }

    /// The guests counted in, by when they were last seen: those last seen before `since_ms`.
    pub fn seen_before(&self, since_ms: i64) -> impl Iterator<Item = GuestId> + '_ {
        self.last_seen
            .range(..(since_ms, GuestId(i64::MIN)))
            .map(|(_, id)| *id)
    }

    /// The guests counted in.
    pub fn guests(&self) -> usize {
        self.guests
    }

    /// The fleet's totals.
    pub fn totals(&self, model: &CostModel) -> Totals {
        fleet_totals(
            self.guests,
            self.hosts.len(),
            self.ticking,
            self.wasted_micro,
            model,
        )
    }

    /// The hosts with guests, most wasteful first (as [`super::host_totals`] orders them).
    pub fn hosts_by_waste<'a>(
        &'a self,
        model: &'a CostModel,
    ) -> impl Iterator<Item = HostTotals> + 'a {
        self.host_order.iter().filter_map(move |key| {
            let sums = self.hosts.get(&key.id)?;
            Some(sums.totals(key.id, model))
        })
    }

    /// The hosts with guests, most wasteful first: each one's id and waste (% of one core).
    pub fn host_ids_by_waste(&self) -> impl Iterator<Item = (HostId, f64)> + '_ {
        self.host_order
            .iter()
            .map(|key| (key.id, pct_of_micro(key.wasted_micro)))
    }

    /// One host's totals; `None` when none of its guests is counted in.
    pub fn host(&self, host_id: HostId, model: &CostModel) -> Option<HostTotals> {
        Some(self.hosts.get(&host_id)?.totals(host_id, model))
    }

    /// A host's summed waste (0 when none of its guests is counted in), in % of a core.
    pub fn host_wasted_cpu_pct(&self, host_id: HostId) -> f64 {
        self.hosts
            .get(&host_id)
            .map_or(0.0, |sums| pct_of_micro(sums.wasted_micro))
    }

    /// How many guests have each value of `facet`, by value.
    pub fn values(&self, facet: Facet) -> impl Iterator<Item = (&str, usize)> {
        self.values[facet.index()]
            .iter()
            .map(|(value, tally)| (value.as_str(), tally.guests))
    }

    /// How many guests have each value of `facet` and their summed waste (% of one core), by
    /// value.
    pub fn values_with_waste(&self, facet: Facet) -> impl Iterator<Item = (&str, usize, f64)> {
        self.values[facet.index()].iter().map(|(value, tally)| {
            (
                value.as_str(),
                tally.guests,
                pct_of_micro(tally.wasted_micro),
            )
        })
    }

    /// How many guests have `value` of `facet` ([`super::listing::WASTEFUL`] for the mode
    /// counts the wasteful guests).
    pub fn count(&self, facet: Facet, value: &str) -> usize {
        if facet == Facet::Mode && value == super::listing::WASTEFUL {
            return self.ticking;
        }
        self.values[facet.index()]
            .get(value)
            .map_or(0, |tally| tally.guests)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::analysis::test_window;
    use crate::fleet::{host_totals, totals};

    /// A guest of host `host` (of three) with one of a few figures, families and names.
    fn guest(id: i64, host: i64, figures: usize, last_seen_ms: i64) -> Arc<AnalysedGuest> {
        let (cpu, wakeups) = [(0.3, 20.0), (4.1, 2935.0), (5.3, 650.0), (78.0, 300.0)][figures];
        let mut window = test_window(1 + (id % 3) as u32, cpu, wakeups, None);
        window.uses_kvm = Some(false);
        Arc::new(AnalysedGuest {
            name: format!("vm-{}", id % 5),
            host: format!("hv-{host}"),
            host_id: HostId(host),
            hypervisor: ["qemu", "firecracker"][(id % 2) as usize].into(),
            last_seen_ms,
            ..AnalysedGuest::example(id, &window)
        })
    }

    /// Everything the index answers, as JSON, for two indexes to be compared whole.
    fn answers(index: &FleetIndex) -> serde_json::Value {
        let model = CostModel::default();
        let values: Vec<Vec<(String, usize, i64)>> = Facet::ALL
            .into_iter()
            .map(|f| {
                index
                    .values_with_waste(f)
                    .map(|(v, n, w)| (v.to_string(), n, micro_pct(w)))
                    .collect()
            })
            .collect();
        serde_json::json!({
            "totals": index.totals(&model),
            "hosts": index.hosts_by_waste(&model).collect::<Vec<_>>(),
            "values": values,
            "wasteful": index.count(Facet::Mode, super::super::listing::WASTEFUL),
            "seen": index.seen_before(i64::MAX).collect::<Vec<_>>(),
        })
    }

    /// The same answers computed afresh from the guests, the way the pages did before.
    fn afresh(guests: &[Arc<AnalysedGuest>]) -> serde_json::Value {
        let model = CostModel::default();
        let values: Vec<Vec<(String, usize, i64)>> = Facet::ALL
            .into_iter()
            .map(|f| {
                let mut counts: BTreeMap<String, (usize, i64)> = BTreeMap::new();
                for g in guests {
                    let count = counts.entry(f.value(g).into_owned()).or_default();
                    count.0 += 1;
                    count.1 += micro_pct(g.wasted_cpu_pct());
                }
                counts.into_iter().map(|(v, (n, w))| (v, n, w)).collect()
            })
            .collect();
        let mut seen: Vec<(i64, GuestId)> = guests.iter().map(|g| (g.last_seen_ms, g.id)).collect();
        seen.sort();
        serde_json::json!({
            "totals": totals(guests, &model),
            "hosts": host_totals(guests, &model),
            "values": values,
            "wasteful": guests
                .iter()
                .filter(|g| g.verdict.classification.mode.is_wasteful())
                .count(),
            "seen": seen.into_iter().map(|(_, id)| id).collect::<Vec<_>>(),
        })
    }

    proptest! {
        /// Guests analysed again, moved between hosts and taken away in any order: the index
        /// kept up to date answers what one computed afresh from the guests it holds does.
        #[test]
        fn kept_up_to_date_it_is_what_the_guests_held_give(
            steps in prop::collection::vec((0i64..12, 0i64..3, 0usize..4, 0i64..5, any::<bool>()), 1..60)
        ) {
            let mut index = FleetIndex::default();
            let mut held: BTreeMap<i64, Arc<AnalysedGuest>> = BTreeMap::new();
            for (id, host, figures, seen, drop) in steps {
                if let Some(old) = held.remove(&id) {
                    index.remove(&old);
                }
                if !drop {
                    let g = guest(id, host, figures, seen * 1_000);
                    index.add(&g);
                    held.insert(id, g);
                }
                let guests: Vec<Arc<AnalysedGuest>> = held.values().cloned().collect();
                prop_assert_eq!(answers(&index), afresh(&guests));
            }
        }
    }

    #[test]
    fn guests_seen_before_a_time_are_found_oldest_first() {
        let mut index = FleetIndex::default();
        for (id, seen) in [(1, 5_000), (2, 1_000), (3, 3_000), (4, 1_000)] {
            index.add(&guest(id, 1, 0, seen));
        }
        let cases: [(i64, &[i64]); 4] = [
            (1_000, &[]),
            (1_001, &[2, 4]),
            (3_001, &[2, 4, 3]),
            (i64::MAX, &[2, 4, 3, 1]),
        ];
        for (since, ids) in cases {
            let found: Vec<i64> = index.seen_before(since).map(|id| id.0).collect();
            assert_eq!(found, ids, "before {since}");
        }
    }
}
