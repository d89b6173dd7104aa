//! The upgrade plan, grouped from the analysed guests.

use std::sync::Arc;

use super::analysed::AnalysedGuest;
use crate::analysis::plan::{PlanGroup, PlanGuest, PlannedChange};
use crate::analysis::{self};

/// The upgrade plan of the active guests, each group with its members.
pub fn plan(guests: &[Arc<AnalysedGuest>]) -> Vec<PlanGroup> {
    let rows: Vec<PlanGuest> = guests.iter().map(|g| plan_guest(g)).collect();
    analysis::plan::plan(&rows)
}

/// The plan's groups without their members (the plan page).
pub fn plan_groups(guests: &[Arc<AnalysedGuest>]) -> Vec<PlanGroup> {
    let rows: Vec<PlanGuest> = guests.iter().map(|g| plan_guest(g)).collect();
    analysis::plan::groups(&rows)
}

/// What the plan needs of one guest.
pub fn plan_guest(g: &AnalysedGuest) -> PlanGuest<'_> {
    PlanGuest {
        id: g.id.0,
        name: &g.name,
        host: &g.host,
        distro: g.kernel.as_ref().and_then(|k| k.distro.as_deref()),
        kernel_release: g.kernel.as_ref().and_then(|k| k.kernel_release.as_deref()),
        tick_mode: g.verdict.classification.mode.as_str(),
        cause: g.verdict.cause,
        tick_mode_confidence: g.verdict.classification.confidence,
        wasted_cpu_pct: g.wasted_cpu_pct(),
        change: analysis::plan::planned(&g.verdict.suggestions).map(PlannedChange::from),
    }
}

/// The key of the plan group a guest belongs to (see [`analysis::plan::group_key`]).
pub fn group_key_of(g: &AnalysedGuest) -> String {
    let k = g.kernel.as_ref();
    analysis::plan::group_key(
        g.verdict.cause,
        k.and_then(|k| k.distro.as_deref()),
        k.and_then(|k| k.kernel_release.as_deref()),
        g.verdict.classification.mode.as_str(),
    )
}
