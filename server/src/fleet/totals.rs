//! Fleet and host totals of the analysed guests.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;
use tickscope_wire::BlindSpot;

use super::analysed::{ACTIVE_WITHIN_MS, AnalysedGuest};
use crate::analysis::cost::{self, CostModel};
use crate::db::HostRow;
use crate::domain::HostId;

/// Fleet totals for the overview.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Totals {
    pub guests: usize,
    pub hosts: usize,
    pub ticking: usize,
    /// Summed waste, in host cores.
    pub wasted_cores: f64,
    /// The same waste per day and year, in energy and money, under `cost_model`.
    pub wasted_core_hours_per_day: f64,
    pub wasted_kwh_per_year: f64,
    pub wasted_cost_per_year: f64,
    pub cost_model: CostModel,
}

/// Waste in millionths of a percent of a core. Sums of waste are kept in these integers, so
/// that a sum kept up to date by adding and taking away guests ([`super::index`]) is exactly
/// the sum taken afresh, in any order; a millionth of a percent is far below what is shown.
pub fn micro_pct(pct: f64) -> i64 {
    (pct * 1e6).round() as i64
}

/// [`micro_pct`] back in % of a core.
pub fn pct_of_micro(micro: i64) -> f64 {
    micro as f64 / 1e6
}

/// The fleet's totals, in one pass over the guests.
pub fn totals(guests: &[Arc<AnalysedGuest>], model: &CostModel) -> Totals {
    let mut hosts: HashSet<HostId> = HashSet::new();
    let (mut wasted_micro, mut ticking) = (0, 0);
    for g in guests {
        hosts.insert(g.host_id);
        wasted_micro += micro_pct(g.wasted_cpu_pct());
        ticking += usize::from(g.verdict.classification.mode.is_wasteful());
    }
    fleet_totals(guests.len(), hosts.len(), ticking, wasted_micro, model)
}

/// The totals of `guests` on `hosts`, `ticking` of them wasteful, wasting `wasted_micro`.
pub(super) fn fleet_totals(
    guests: usize,
    hosts: usize,
    ticking: usize,
    wasted_micro: i64,
    model: &CostModel,
) -> Totals {
    let yearly = cost::of_waste(pct_of_micro(wasted_micro), model);
    Totals {
        guests,
        hosts,
        ticking,
        wasted_cores: yearly.cores,
        wasted_core_hours_per_day: yearly.core_hours_per_day,
        wasted_kwh_per_year: yearly.kwh_per_year,
        wasted_cost_per_year: yearly.money_per_year,
        cost_model: model.clone(),
    }
}

/// A host's tickless baseline for one hypervisor family.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HostBaseline {
    pub hypervisor: String,
    /// Host CPU an idle tickless vCPU costs there, in % of a core.
    pub cpu_pct_per_vcpu: f64,
    /// Tickless guests it was learned from; 0 for the default.
    pub learned_from_guests: usize,
}

impl HostBaseline {
    /// The baseline a guest's waste was judged against: its host's for its family.
    pub fn of(g: &AnalysedGuest) -> HostBaseline {
        let b = g.verdict.waste.baseline;
        HostBaseline {
            hypervisor: g.hypervisor.clone(),
            cpu_pct_per_vcpu: b.cpu_pct_per_vcpu,
            learned_from_guests: b.learned_from_guests,
        }
    }
}

/// One host's share of the fleet's waste.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HostTotals {
    #[schema(value_type = i64)]
    pub host_id: HostId,
    pub host: String,
    pub guests: usize,
    pub ticking: usize,
    /// Summed waste of its guests, in % of one core.
    pub wasted_cpu_pct: f64,
    pub wasted_core_hours_per_day: f64,
    pub wasted_kwh_per_year: f64,
    pub wasted_cost_per_year: f64,
    pub baselines: Vec<HostBaseline>,
    /// What the host's agent says it cannot see, each with its fix.
    pub blind_spots: Vec<BlindSpot>,
}

/// Adds to the hosts' totals what their agents said they cannot see, and the hosts that
/// reported lately without any guest (an agent that sees no VM at all may be the blindest).
pub fn with_host_rows(hosts: &mut Vec<HostTotals>, rows: &[HostRow], now_ms: i64) {
    for row in rows {
        match hosts.iter_mut().find(|h| h.host_id == row.id) {
            Some(totals) => totals.blind_spots = row.blind_spots(),
            None if now_ms - row.last_report_ms <= ACTIVE_WITHIN_MS => hosts.push(HostTotals {
                host_id: row.id,
                host: row.name.clone(),
                guests: 0,
                ticking: 0,
                wasted_cpu_pct: 0.0,
                wasted_core_hours_per_day: 0.0,
                wasted_kwh_per_year: 0.0,
                wasted_cost_per_year: 0.0,
                baselines: Vec::new(),
                blind_spots: row.blind_spots(),
            }),
            None => {}
        }
    }
}

/// Totals per host of the active guests, most wasteful host first: one pass over the guests,
/// adding each to its host's sums.
pub fn host_totals(guests: &[Arc<AnalysedGuest>], model: &CostModel) -> Vec<HostTotals> {
    struct Sums<'a> {
        host: &'a str,
        guests: usize,
        ticking: usize,
        wasted_micro: i64,
        /// The first guest's baseline per hypervisor, by name.
        baselines: BTreeMap<&'a str, HostBaseline>,
    }
    let mut by_host: HashMap<HostId, Sums> = HashMap::new();
    for g in guests {
        let sums = by_host.entry(g.host_id).or_insert_with(|| Sums {
            host: &g.host,
            guests: 0,
            ticking: 0,
            wasted_micro: 0,
            baselines: BTreeMap::new(),
        });
        sums.guests += 1;
        sums.ticking += usize::from(g.verdict.classification.mode.is_wasteful());
        sums.wasted_micro += micro_pct(g.wasted_cpu_pct());
        if !sums.baselines.contains_key(g.hypervisor.as_str()) {
            sums.baselines.insert(&g.hypervisor, HostBaseline::of(g));
        }
    }
    let mut hosts: Vec<HostTotals> = by_host
        .into_iter()
        .map(|(host_id, sums)| {
            host_line(
                host_id,
                sums.host,
                (sums.guests, sums.ticking, sums.wasted_micro),
                sums.baselines.into_values().collect(),
                model,
            )
        })
        .collect();
    hosts.sort_by(|a, b| {
        b.wasted_cpu_pct
            .total_cmp(&a.wasted_cpu_pct)
            .then_with(|| a.host.cmp(&b.host))
            .then_with(|| a.host_id.cmp(&b.host_id))
    });
    hosts
}

/// One host's totals: its name, (guests, wasteful guests, summed waste in millionths of a
/// percent), its baselines.
pub(super) fn host_line(
    host_id: HostId,
    host: &str,
    (guests, ticking, wasted_micro): (usize, usize, i64),
    baselines: Vec<HostBaseline>,
    model: &CostModel,
) -> HostTotals {
    let wasted_cpu_pct = pct_of_micro(wasted_micro);
    let yearly = cost::of_waste(wasted_cpu_pct, model);
    HostTotals {
        host_id,
        host: host.to_string(),
        guests,
        ticking,
        wasted_cpu_pct,
        wasted_core_hours_per_day: yearly.core_hours_per_day,
        wasted_kwh_per_year: yearly.kwh_per_year,
        wasted_cost_per_year: yearly.money_per_year,
        baselines,
        blind_spots: Vec::new(),
    }
}
