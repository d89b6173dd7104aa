//! Many guests' stored history at once, in SQLite.

use super::store::SqliteDb;
use crate::db::error::{StoreError, StoreResult};
use crate::db::guests::IntervalRow;
use crate::db::history::StoredHistories;
use crate::db::rollups::{FIVE_MINUTES_MS, HOUR_MS};
use crate::domain::GuestId;

/// One sample as the packed query writes it: received ms, length ms, vCPUs, host CPU s,
/// wake-ups, whether counted on vCPU threads (1 or 0).
fn unpack_sample(guest_id: GuestId, text: &str) -> Option<IntervalRow> {
    let mut fields = text.split(',');
    let mut next = || fields.next();
    Some(IntervalRow {
        guest_id,
        received_ms: next()?.parse().ok()?,
        length_ms: next()?.parse().ok()?,
        vcpus: next()?.parse().ok()?,
        host_cpu_s: next()?.parse().ok()?,
        vcpu_wakeups: next()?.parse().ok()?,
        from_vcpu_threads: next()? == "1",
    })
}

impl SqliteDb {
    /// The samples of `guest_ids` received in [from_ms, to_ms), the idle readings that can cover
    /// them (received from `reach_ms` before `from_ms` on), their rollups starting in the span
    /// and every set of facts they reported: what [`SqliteDb::samples_between`],
    /// [`SqliteDb::rollups_between`] and [`SqliteDb::facts_spans`] give for one guest, for all of them in
    /// four queries.
    pub async fn histories_between(
        &self,
        guest_ids: &[GuestId],
        from_ms: i64,
        to_ms: i64,
        reach_ms: i64,
    ) -> StoreResult<StoredHistories> {
        let ids = serde_json::to_string(guest_ids)
            .map_err(|e| StoreError::Corrupt(format!("guest ids to JSON: {e}")))?;
        // One row per guest, its samples packed into one text: SQLite hands sqlx each row
        // through a channel, which costs more than the row itself when a guest has 17,000 of
        // them (two days at one every 10 s). `%.17g` writes a double so that it reads back
        // exactly.
        let packed: Vec<(GuestId, String)> = sqlx::query_as(
            "SELECT guest_id, group_concat(printf('%d,%.17g,%d,%.17g,%d,%d', received_ms,
                        length_ms, vcpus, host_cpu_s, vcpu_wakeups,
                        wakeups_source = 'vcpu_threads'), ';' ORDER BY received_ms)
             FROM samples
             WHERE guest_id IN (SELECT value FROM json_each(?)) AND received_ms >= ? AND received_ms < ?
             GROUP BY guest_id ORDER BY guest_id",
        )
        .bind(&ids)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?;
        let mut samples = Vec::new();
        for (guest_id, text) in packed {
            for sample in text.split(';') {
                samples.push(unpack_sample(guest_id, sample).ok_or_else(|| {
                    StoreError::Corrupt(format!("unreadable packed sample {sample:?}"))
                })?);
            }
        }
        let readings = sqlx::query_as(
            "SELECT guest_id, source, received_ms, measured_ms, idle_fraction
             FROM guest_idle_readings
             WHERE guest_id IN (SELECT value FROM json_each(?)) AND received_ms >= ?
             ORDER BY guest_id, received_ms, source",
        )
        .bind(&ids)
        .bind(from_ms - reach_ms)
        .fetch_all(&self.pool)
        .await?;
        let rollups = sqlx::query_as(
            "SELECT guest_id, resolution_ms, start_ms, samples, length_s, vcpu_s, host_cpu_s,
                    wakeups, idle_s, busy_s, wasted_cpu_s, min_cpu_pct, max_cpu_pct
             FROM rollups
             WHERE guest_id IN (SELECT value FROM json_each(?)) AND resolution_ms IN (?, ?)
               AND start_ms >= ? AND start_ms < ?
             ORDER BY guest_id, start_ms",
        )
        .bind(&ids)
        .bind(FIVE_MINUTES_MS)
        .bind(HOUR_MS)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?;
        let spans = sqlx::query_as(
            "SELECT guest_id, source, first_received_ms, received_ms, facts_json
             FROM guest_facts WHERE guest_id IN (SELECT value FROM json_each(?))
             ORDER BY guest_id, id",
        )
        .bind(&ids)
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
