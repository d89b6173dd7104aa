use sqlx::FromRow;

use super::Db;
use super::StoreResult;

/// A guest's VM process running totals as its latest report that carried them said (migration
/// 0008): what `/metrics` serves as counters.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct ProcessTotalsRow {
    pub guest_id: i64,
    /// Host CPU seconds the VM process has used since it started.
    pub cpu_s_total: f64,
    /// Wake-ups of its vCPU threads (or of the whole process) since it started.
    pub wakeups_total: i64,
    /// When the totals were read, on the agent's clock.
    pub totals_at_ms: i64,
}

impl Db {
    /// The latest totals of every guest reported since `since_ms` whose agent sends totals.
    pub async fn process_totals(&self, since_ms: i64) -> StoreResult<Vec<ProcessTotalsRow>> {
        Ok(sqlx::query_as(
            "SELECT id AS guest_id, cpu_s_total, wakeups_total, totals_at_ms
             FROM guests
             WHERE last_seen_ms >= ? AND process_key IS NOT NULL
               AND cpu_s_total IS NOT NULL AND wakeups_total IS NOT NULL
               AND totals_at_ms IS NOT NULL",
        )
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?)
    }
}
