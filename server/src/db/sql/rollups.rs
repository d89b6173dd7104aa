//! Rollups of guests' history and the retention of raw samples, reports and rollups. Old
//! reports are deleted by each backend its own way (`delete_reports_before`: their foreign key
//! is checked on PostgreSQL, not on SQLite).

use sqlx::QueryBuilder;

use super::dialect::{DB, KEEP_AS_LOOKUP, Store, greatest_present, least_present};
use crate::analysis::history::Summary;
use crate::db::error::StoreResult;
use crate::db::rollups::{FIVE_MINUTES_MS, HOUR_MS, RollupRow, runs_without_repeats};
use crate::db::rows_at_once::runs;
use crate::domain::{GuestId, ReportId};

/// The guests with raw samples received before `$1`: the `EXISTS` stays a lookup per guest in
/// `samples_guest_received`.
pub(super) fn guests_with_samples_before_sql() -> String {
    format!(
        "SELECT id FROM guests g
         WHERE EXISTS (SELECT 1 FROM samples s WHERE s.guest_id = g.id AND s.received_ms < $1
                       {KEEP_AS_LOOKUP})
         ORDER BY id"
    )
}

pub(super) const ROLLUPS_BETWEEN: &str =
    "SELECT resolution_ms, start_ms, samples, length_s, vcpu_s,
        host_cpu_s, wakeups, idle_s, busy_s, wasted_cpu_s, min_cpu_pct, max_cpu_pct
     FROM rollups
     WHERE guest_id = $1 AND resolution_ms IN ($2, $3) AND start_ms >= $4 AND start_ms < $5
     ORDER BY start_ms";

/// A rollup written for a window that already has one adds to it: sums add up, minima and
/// maxima combine (a NULL, no CPU figure in one of the two, gives way to the other). Both the
/// five-minute rollups (late samples of a rolled-up window) and the hourly merge write through
/// it. The stored row is named by its table (`rollups.`), the new one by `excluded.`.
fn add_to_existing_rollup() -> String {
    format!(
        " ON CONFLICT (guest_id, resolution_ms, start_ms) DO UPDATE SET
        samples = rollups.samples + excluded.samples,
        length_s = rollups.length_s + excluded.length_s,
        vcpu_s = rollups.vcpu_s + excluded.vcpu_s,
        host_cpu_s = rollups.host_cpu_s + excluded.host_cpu_s,
        wakeups = rollups.wakeups + excluded.wakeups,
        idle_s = rollups.idle_s + excluded.idle_s,
        busy_s = rollups.busy_s + excluded.busy_s,
        wasted_cpu_s = rollups.wasted_cpu_s + excluded.wasted_cpu_s,
        min_cpu_pct = {},
        max_cpu_pct = {}",
        least_present("rollups.min_cpu_pct", "excluded.min_cpu_pct"),
        greatest_present("rollups.max_cpu_pct", "excluded.max_cpu_pct"),
    )
}

/// Windows per `INSERT` at most, in runs of the few lengths `rows_at_once` allows: 13 binds
/// each, well under SQLite's 32,766 and PostgreSQL's 65,535 per statement, and few statements
/// (round trips) for a guest's two days of five-minute windows.
const WINDOWS_PER_STATEMENT: usize = 512;

impl Store {
    pub async fn guests_with_samples_before(&self, before_ms: i64) -> StoreResult<Vec<GuestId>> {
        Ok(sqlx::query_scalar(&guests_with_samples_before_sql())
            .bind(before_ms)
            .fetch_all(&self.pool)
            .await?)
    }

    pub async fn roll_up_guest(
        &self,
        guest_id: GuestId,
        windows: &[(i64, Summary)],
        before_ms: i64,
        keep: Option<(i64, i64)>,
    ) -> StoreResult<u64> {
        let mut tx = self.begin_write().await?;
        // A part of a run without repeats has none either.
        let apart = runs_without_repeats(windows, WINDOWS_PER_STATEMENT);
        for run in apart
            .into_iter()
            .flat_map(|r| runs(r, WINDOWS_PER_STATEMENT))
        {
            let mut insert = QueryBuilder::<DB>::new(
                "INSERT INTO rollups (guest_id, resolution_ms, start_ms, samples, length_s, vcpu_s,
                    host_cpu_s, wakeups, idle_s, busy_s, wasted_cpu_s, min_cpu_pct, max_cpu_pct) ",
            );
            insert.push_values(run, |mut row, (start_ms, s)| {
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
            insert.push(add_to_existing_rollup());
            insert.build().execute(&mut *tx).await?;
        }
        let (keep_from, keep_to) = keep.unwrap_or((0, 0));
        let deleted = sqlx::query(
            "DELETE FROM samples WHERE guest_id = $1 AND received_ms < $2
             AND NOT (received_ms >= $3 AND received_ms < $4)",
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

    pub async fn merge_hourly_rollups(&self, before_ms: i64) -> StoreResult<u64> {
        let mut tx = self.begin_write().await?;
        // `$2` is the hour in both the select list and the grouping, one parameter: PostgreSQL
        // matches `start_ms / $2` of the select list to the grouped expression only when it is
        // the same. PostgreSQL's `SUM` of a BIGINT is NUMERIC: cast back (the sums of whole
        // hours of a guest's samples and wakeups are far from overflowing). The doubles add in
        // `start_ms` order, so that the hourly figures (equal to the five-minute ones' sums to
        // the last few bits) do not depend on the plan.
        sqlx::query(&format!(
            "INSERT INTO rollups (guest_id, resolution_ms, start_ms, samples, length_s, vcpu_s,
                host_cpu_s, wakeups, idle_s, busy_s, wasted_cpu_s, min_cpu_pct, max_cpu_pct)
             SELECT guest_id, $2, start_ms / $2 * $2, CAST(SUM(samples) AS BIGINT),
                SUM(length_s ORDER BY start_ms), SUM(vcpu_s ORDER BY start_ms),
                SUM(host_cpu_s ORDER BY start_ms), CAST(SUM(wakeups) AS BIGINT),
                SUM(idle_s ORDER BY start_ms), SUM(busy_s ORDER BY start_ms),
                SUM(wasted_cpu_s ORDER BY start_ms), MIN(min_cpu_pct), MAX(max_cpu_pct)
             FROM rollups WHERE resolution_ms = $1 AND start_ms < $3
             GROUP BY guest_id, start_ms / $2 {}",
            add_to_existing_rollup()
        ))
        .bind(FIVE_MINUTES_MS)
        .bind(HOUR_MS)
        .bind(before_ms)
        .execute(&mut *tx)
        .await?;
        let merged = sqlx::query("DELETE FROM rollups WHERE resolution_ms = $1 AND start_ms < $2")
            .bind(FIVE_MINUTES_MS)
            .bind(before_ms)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(merged)
    }

    pub async fn reports_of_samples(
        &self,
        guest_id: GuestId,
        from_ms: i64,
        to_ms: i64,
    ) -> StoreResult<Vec<ReportId>> {
        Ok(sqlx::query_scalar(
            "SELECT DISTINCT report_id FROM samples
             WHERE guest_id = $1 AND received_ms >= $2 AND received_ms < $3",
        )
        .bind(guest_id)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn expire(
        &self,
        rollups_before_ms: i64,
        reports_before_ms: i64,
        keep_reports: &[ReportId],
    ) -> StoreResult<u64> {
        // Two statements, each its own transaction: deletes that read nothing first need no
        // write lock.
        let rollups = sqlx::query("DELETE FROM rollups WHERE resolution_ms = $1 AND start_ms < $2")
            .bind(HOUR_MS)
            .bind(rollups_before_ms)
            .execute(&self.pool)
            .await?
            .rows_affected();
        // The fleet's points are kept as long as its guests' longest history.
        let points = sqlx::query("DELETE FROM fleet_history WHERE at_ms < $1")
            .bind(rollups_before_ms)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let reports = self
            .delete_reports_before(reports_before_ms, keep_reports)
            .await?;
        Ok(rollups + points + reports)
    }

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
