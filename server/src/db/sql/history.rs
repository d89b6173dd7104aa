//! Many guests' stored history at once. The raw samples are read by each backend its own way
//! (`samples_of_guests`: SQLite packs each guest's into one text); the guests' ids are bound as
//! one list (`dialect::id_list`).

use super::dialect::{BYTEWISE, Store, id_list, in_id_list};
use crate::db::error::StoreResult;
use crate::db::history::StoredHistories;
use crate::db::rollups::{FIVE_MINUTES_MS, HOUR_MS};
use crate::domain::GuestId;

impl Store {
    pub async fn histories_between(
        &self,
        guest_ids: &[GuestId],
        from_ms: i64,
        to_ms: i64,
        reach_ms: i64,
    ) -> StoreResult<StoredHistories> {
        let samples = self.samples_of_guests(guest_ids, from_ms, to_ms).await?;
        let ids = || id_list(guest_ids.iter().map(|id| id.0));
        let sql = format!(
            "SELECT guest_id, source, received_ms, measured_ms, idle_fraction
             FROM guest_idle_readings
             WHERE {} AND received_ms >= $2
             ORDER BY guest_id, received_ms, source{BYTEWISE}",
            in_id_list("guest_id", 1)
        );
        let readings = sqlx::query_as(&sql)
            .bind(ids())
            .bind(from_ms - reach_ms)
            .fetch_all(&self.pool)
            .await?;
        let sql = format!(
            "SELECT guest_id, resolution_ms, start_ms, samples, length_s, vcpu_s, host_cpu_s,
                    wakeups, idle_s, busy_s, wasted_cpu_s, min_cpu_pct, max_cpu_pct
             FROM rollups
             WHERE {} AND resolution_ms IN ($2, $3) AND start_ms >= $4 AND start_ms < $5
             ORDER BY guest_id, start_ms, resolution_ms",
            in_id_list("guest_id", 1)
        );
        let rollups = sqlx::query_as(&sql)
            .bind(ids())
            .bind(FIVE_MINUTES_MS)
            .bind(HOUR_MS)
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(&self.pool)
            .await?;
        let sql = format!(
            "SELECT guest_id, source, first_received_ms, received_ms, facts_json
             FROM guest_facts WHERE {}
             ORDER BY guest_id, id",
            in_id_list("guest_id", 1)
        );
        let spans = sqlx::query_as(&sql)
            .bind(ids())
            .fetch_all(&self.pool)
            .await?;
        Ok(StoredHistories {
            samples,
            readings,
            rollups,
            spans,
        })
    }
}
