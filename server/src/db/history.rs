//! Many guests' stored history at once: the raw samples, idle readings, rollups and facts of a
//! span, one query per table for all the guests (an export of the fleet's waste over the last
//! week reads these, not one guest's history after another).

use sqlx::FromRow;

use crate::domain::GuestId;

use super::facts::FactsSpanRow;
use super::guests::{IdleReading, IntervalRow};
use super::rollups::RollupRow;

/// A rollup and the guest it is of.
#[derive(Debug, Clone, FromRow)]
pub struct GuestRollupRow {
    pub guest_id: GuestId,
    #[sqlx(flatten)]
    pub rollup: RollupRow,
}

/// A set of facts and the guest it is of.
#[derive(Debug, Clone, FromRow)]
pub struct GuestFactsSpanRow {
    pub guest_id: GuestId,
    #[sqlx(flatten)]
    pub span: FactsSpanRow,
}

/// Everything stored of some guests over a span, by guest and oldest first within each.
pub struct StoredHistories {
    pub samples: Vec<IntervalRow>,
    pub readings: Vec<IdleReading>,
    pub rollups: Vec<GuestRollupRow>,
    pub spans: Vec<GuestFactsSpanRow>,
}
