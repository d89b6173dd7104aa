//! Rollups of guests' history and the retention of raw samples, reports and rollups, in SQLite.

use sqlx::{QueryBuilder, Sqlite};

use super::store::SqliteDb;
use crate::analysis::history::Summary;
use crate::db::error::{StoreError, StoreResult};
use crate::db::rollups::{FIVE_MINUTES_MS, HOUR_MS, RollupRow};
use crate::domain::{GuestId, ReportId};

pub(super) const GUESTS_WITH_SAMPLES_BEFORE: &str = "SELECT id FROM guests g
     WHERE EXISTS (SELECT 1 FROM samples s WHERE s.guest_id = g.id AND s.received_ms < ?)
     ORDER BY id";

pub(super) const ROLLUPS_BETWEEN: &str =
    "SELECT resolution_ms, start_ms, samples, length_s, vcpu_s,
        host_cpu_s, wakeups, idle_s, busy_s, wasted_cpu_s, min_cpu_pct, max_cpu_pct
     FROM rollups WHERE guest_id = ? AND resolution_ms IN (?, ?) AND start_ms >= ? AND start_ms < ?
     ORDER BY start_ms";

/// A rollup written for a window that already has one adds to it: sums add up, minima and
/// maxima combine. Both the five-minute rollups (late samples of a rolled-up window) and the
/// hourly merge write through it.
const ADD_TO_EXISTING_ROLLUP: &str = " ON CONFLICT (guest_id, resolution_ms, start_ms) DO UPDATE SET
    samples = samples + excluded.samples, length_s = length_s + excluded.length_s,
    vcpu_s = vcpu_s + excluded.vcpu_s, host_cpu_s = host_cpu_s + excluded.host_cpu_s,
    wakeups = wakeups + excluded.wakeups, idle_s = idle_s + excluded.idle_s,
    busy_s = busy_s + excluded.busy_s, wasted_cpu_s = wasted_cpu_s + excluded.wasted_cpu_s,
    min_cpu_pct = MIN(COALESCE(min_cpu_pct, excluded.min_cpu_pct), COALESCE(excluded.min_cpu_pct, min_cpu_pct)),
    max_cpu_pct = MAX(COALESCE(max_cpu_pct, excluded.max_cpu_pct), COALESCE(excluded.max_cpu_pct, max_cpu_pct))";

impl SqliteDb {
    /// Guests with raw samples received before `before_ms`.
    pub async fn guests_with_samples_before(&self, before_ms: i64) -> StoreResult<Vec<GuestId>> {
        Ok(sqlx::query_scalar(GUESTS_WITH_SAMPLES_BEFORE)
            .bind(before_ms)
            .fetch_all(&self.pool)
            .await?)
    }

    /// Replaces a guest's raw samples received before `before_ms` by their five-minute rollups,
    /// in one transaction: the history is never counted twice, nor lost.
    /// Samples received in `keep` ([from, to)) stay raw whatever their age.
    pub async fn roll_up_guest(
        &self,
        guest_id: GuestId,
        windows: &[(i64, Summary)],
        before_ms: i64,
        keep: Option<(i64, i64)>,
    ) -> StoreResult<u64> {
        let mut tx = self.begin_write().await?;
        // A few hundred windows per statement: each statement is a round trip to SQLite's
        // worker thread.
        for chunk in windows.chunks(500) {
            let mut insert = QueryBuilder::<Sqlite>::new(
                "INSERT INTO rollups (guest_id, resolution_ms, start_ms, samples, length_s, vcpu_s,
                    host_cpu_s, wakeups, idle_s, busy_s, wasted_cpu_s, min_cpu_pct, max_cpu_pct) ",
            );
            insert.push_values(chunk, |mut row, (start_ms, s)| {
                row.push_bind(guest_id)
                    .push_bind(FIVE_MINUTES_MS)
                    .push_bind(*start_ms)
                    .push_bind(s.samples)
                    .push_bind(s.length_s)
                    .push_bind(s.vcpu_s)
                    .push_bind(s.host_cpu_s)
                    .push_bind(s.wakeups)
                    .push_bind(s.idle_s)
                    .push_bind(s.busy_s)
                    .push_bind(s.wasted_cpu_s)
                    .push_bind(s.min_cpu_pct)
                    .push_bind(s.max_cpu_pct);
            });
            // A window rolled up before (raw samples that arrived late for it) grows.
            insert.push(ADD_TO_EXISTING_ROLLUP);
            insert.build().execute(&mut *tx).await?;
        }
        let (keep_from, keep_to) = keep.unwrap_or((0, 0));
        let deleted = sqlx::query(
            "DELETE FROM samples WHERE guest_id = ? AND received_ms < ?
             AND NOT (received_ms >= ? AND received_ms < ?)",
        )
        .bind(guest_id)
        .bind(before_ms)
        .bind(keep_from)
        .bind(keep_to)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(deleted)
    }

    /// Merges the five-minute rollups of whole hours before `before_ms` (a multiple of an hour)
    /// into hourly ones. Returns the five-minute rows merged.
    pub async fn merge_hourly_rollups(&self, before_ms: i64) -> StoreResult<u64> {
        let mut tx = self.begin_write().await?;
        sqlx::query(&format!(
            "INSERT INTO rollups (guest_id, resolution_ms, start_ms, samples, length_s, vcpu_s,
                host_cpu_s, wakeups, idle_s, busy_s, wasted_cpu_s, min_cpu_pct, max_cpu_pct)
             SELECT guest_id, ?, start_ms / ? * ?, SUM(samples), SUM(length_s), SUM(vcpu_s),
                SUM(host_cpu_s), SUM(wakeups), SUM(idle_s), SUM(busy_s), SUM(wasted_cpu_s),
                MIN(min_cpu_pct), MAX(max_cpu_pct)
             FROM rollups WHERE resolution_ms = ? AND start_ms < ?
             GROUP BY guest_id, start_ms / ? {ADD_TO_EXISTING_ROLLUP}"
        ))
        .bind(HOUR_MS)
        .bind(HOUR_MS)
        .bind(HOUR_MS)
        .bind(FIVE_MINUTES_MS)
        .bind(before_ms)
        .bind(HOUR_MS)
        .execute(&mut *tx)
        .await?;
        let merged = sqlx::query("DELETE FROM rollups WHERE resolution_ms = ? AND start_ms < ?")
            .bind(FIVE_MINUTES_MS)
            .bind(before_ms)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(merged)
    }

    /// Deletes hourly rollups that start before `rollups_before_ms`, and reports received
    /// before `reports_before_ms`, whose samples must have been rolled up (a sample refers to
    /// its report). Returns the rows deleted.
    /// The reports of a guest's samples received in [from_ms, to_ms).
    pub async fn reports_of_samples(
        &self,
        guest_id: GuestId,
        from_ms: i64,
        to_ms: i64,
    ) -> StoreResult<Vec<ReportId>> {
        Ok(sqlx::query_scalar(
            "SELECT DISTINCT report_id FROM samples
             WHERE guest_id = ? AND received_ms >= ? AND received_ms < ?",
        )
        .bind(guest_id)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    /// `keep_reports`: reports received before `reports_before_ms` that samples still refer to.
    pub async fn expire(
        &self,
        rollups_before_ms: i64,
        reports_before_ms: i64,
        keep_reports: &[ReportId],
    ) -> StoreResult<u64> {
        let rollups = sqlx::query("DELETE FROM rollups WHERE resolution_ms = ? AND start_ms < ?")
            .bind(HOUR_MS)
            .bind(rollups_before_ms)
            .execute(&self.pool)
            .await?
            .rows_affected();
        // samples.report_id refers to reports without an index (ingest would pay for one on
        // every sample), so SQLite would check each deleted report against every sample left.
        // The samples of these reports were all rolled up and deleted first, so the check is
        // skipped on the one connection that deletes them.
        let mut conn = self.pool.acquire().await?;
        sqlx::query("PRAGMA foreign_keys = OFF")
            .execute(&mut *conn)
            .await?;
        let keep = serde_json::to_string(keep_reports)
            .map_err(|e| StoreError::Corrupt(format!("report ids to JSON: {e}")))?;
        let deleted = sqlx::query(
            "DELETE FROM reports WHERE received_ms < ?
             AND id NOT IN (SELECT value FROM json_each(?))",
        )
        .bind(reports_before_ms)
        .bind(keep)
        .execute(&mut *conn)
        .await;
        if sqlx::query("PRAGMA foreign_keys = ON")
            .execute(&mut *conn)
            .await
            .is_err()
        {
            // Never hand a connection without its checks back to the pool.
            let _ = conn.detach();
        }
        let reports = deleted?.rows_affected();
        Ok(rollups + reports)
    }

    /// A guest's rollups starting in [from_ms, to_ms), oldest first.
    pub async fn rollups_between(
        &self,
        guest_id: GuestId,
        from_ms: i64,
        to_ms: i64,
    ) -> StoreResult<Vec<RollupRow>> {
        Ok(sqlx::query_as(ROLLUPS_BETWEEN)
            .bind(guest_id)
            .bind(FIVE_MINUTES_MS)
            .bind(HOUR_MS)
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(&self.pool)
            .await?)
    }
}
