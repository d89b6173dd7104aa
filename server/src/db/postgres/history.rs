//! Many guests' stored history at once, in PostgreSQL: the samples come as plain rows (SQLite
//! packs each guest's into one text, because it hands every row through a channel; a
//! PostgreSQL connection streams rows cheaply), the guests' ids are bound as one array, and the
//! idle readings' sources are ordered byte-wise (`COLLATE "C"`), as SQLite orders text.

use super::guests::interval_row;
use super::store::PgDb;
use crate::db::error::StoreResult;
use crate::db::history::StoredHistories;
use crate::db::rollups::{FIVE_MINUTES_MS, HOUR_MS};
use crate::domain::GuestId;

impl PgDb {
    /// The samples of `guest_ids` received in [from_ms, to_ms), the idle readings that can cover
    /// them (received from `reach_ms` before `from_ms` on), their rollups starting in the span
    /// and every set of facts they reported: what [`PgDb::samples_between`],
    /// [`PgDb::rollups_between`] and [`PgDb::facts_spans`] give for one guest, for all of them in
    /// four queries.
    pub async fn histories_between(
        &self,
        guest_ids: &[GuestId],
        from_ms: i64,
        to_ms: i64,
        reach_ms: i64,
    ) -> StoreResult<StoredHistories> {
        // Ties (of received_ms, of a rollup's start) in a fixed order, as samples_between
        // gives them: SQLite leaves them to its plan.
        let samples = sqlx::query(
            "SELECT guest_id, received_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups,
                    wakeups_source = 'vcpu_threads' AS from_vcpu_threads
             FROM samples
             WHERE guest_id = ANY($1) AND received_ms >= $2 AND received_ms < $3
             ORDER BY guest_id, received_ms, id",
        )
        .bind(guest_ids)
        .bind(from_ms)
        .bind(to_ms)
        .try_map(interval_row)
        .fetch_all(&self.pool)
        .await?;
        let readings = sqlx::query_as(
            "SELECT guest_id, source, received_ms, measured_ms, idle_fraction
             FROM guest_idle_readings
             WHERE guest_id = ANY($1) AND received_ms >= $2
             ORDER BY guest_id, received_ms, source COLLATE \"C\"",
        )
        .bind(guest_ids)
        .bind(from_ms - reach_ms)
        .fetch_all(&self.pool)
        .await?;
        let rollups = sqlx::query_as(
            "SELECT guest_id, resolution_ms, start_ms, samples, length_s, vcpu_s, host_cpu_s,
                    wakeups, idle_s, busy_s, wasted_cpu_s, min_cpu_pct, max_cpu_pct
             FROM rollups
             WHERE guest_id = ANY($1) AND resolution_ms IN ($2, $3)
               AND start_ms >= $4 AND start_ms < $5
             ORDER BY guest_id, start_ms, resolution_ms",
        )
        .bind(guest_ids)
        .bind(FIVE_MINUTES_MS)
        .bind(HOUR_MS)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?;
        let spans = sqlx::query_as(
            "SELECT guest_id, source, first_received_ms, received_ms, facts_json
             FROM guest_facts WHERE guest_id = ANY($1)
             ORDER BY guest_id, id",
        )
        .bind(guest_ids)
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
