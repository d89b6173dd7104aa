//! VM process running totals, in SQLite.

use super::store::SqliteDb;
use crate::db::error::StoreResult;
use crate::db::totals::ProcessTotalsRow;

impl SqliteDb {
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
