//! VM process running totals.

use super::dialect::Store;
use crate::db::error::StoreResult;
use crate::db::process_totals::ProcessTotalsRow;

impl Store {
    pub async fn process_totals(&self, since_ms: i64) -> StoreResult<Vec<ProcessTotalsRow>> {
        Ok(sqlx::query_as(
            "SELECT id AS guest_id, cpu_s_total, wakeups_total, totals_at_ms
             FROM guests
             WHERE last_seen_ms >= $1 AND process_key IS NOT NULL
               AND cpu_s_total IS NOT NULL AND wakeups_total IS NOT NULL
               AND totals_at_ms IS NOT NULL",
        )
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?)
    }
}
