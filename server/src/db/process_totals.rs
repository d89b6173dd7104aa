use sqlx::FromRow;

use crate::domain::GuestId;

/// A guest's VM process running totals as its latest report that carried them said (migration
/// 0008): what `/metrics` serves as counters.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct ProcessTotalsRow {
    pub guest_id: GuestId,
    /// Host CPU seconds the VM process has used since it started.
    pub cpu_s_total: f64,
    /// Wake-ups of its vCPU threads (or of the whole process) since it started.
    pub wakeups_total: i64,
    /// When the totals were read, on the agent's clock.
    pub totals_at_ms: i64,
}
