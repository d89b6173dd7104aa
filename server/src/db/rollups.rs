//! Rollups of guests' history, as stored.

use sqlx::FromRow;

use crate::analysis::history::Summary;

/// The two resolutions rollups are kept at.
pub const FIVE_MINUTES_MS: i64 = 5 * 60 * 1000;
pub const HOUR_MS: i64 = 60 * 60 * 1000;

/// One stored rollup.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct RollupRow {
    pub resolution_ms: i64,
    pub start_ms: i64,
    pub samples: i64,
    pub length_s: f64,
    pub vcpu_s: f64,
    pub host_cpu_s: f64,
    pub wakeups: i64,
    pub idle_s: f64,
    pub busy_s: f64,
    pub wasted_cpu_s: f64,
    pub min_cpu_pct: Option<f64>,
    pub max_cpu_pct: Option<f64>,
}

impl RollupRow {
    pub fn summary(&self) -> Summary {
        Summary {
            samples: self.samples,
            length_s: self.length_s,
            vcpu_s: self.vcpu_s,
            host_cpu_s: self.host_cpu_s,
            wakeups: self.wakeups,
            idle_s: self.idle_s,
            busy_s: self.busy_s,
            wasted_cpu_s: self.wasted_cpu_s,
            min_cpu_pct: self.min_cpu_pct,
            max_cpu_pct: self.max_cpu_pct,
        }
    }
}

/// Rows each kind of table holds, for the retention job's log and the benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, FromRow)]
pub struct StoredCounts {
    pub reports: i64,
    pub samples: i64,
    pub rollups_5m: i64,
    pub rollups_1h: i64,
}
