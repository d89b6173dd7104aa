//! Rollups of guests' history and the retention of raw samples, reports and rollups, in
//! PostgreSQL. The same statements as SQLite, in one transaction each where SQLite has one,
//! except: a statement may not write one rollup twice here (SQLite applies both rows), so the
//! windows are split where a start repeats; `LEAST`/`GREATEST` combine the minima and maxima
//! (they skip NULLs, as SQLite's `MIN(COALESCE..)` dance does); and old reports are deleted with
//! their foreign key checked (through the `samples_report` index, which SQLite lacks and works
//! around by turning the check off), skipping any report a sample still refers to; and the
//! search for guests to roll up is kept a lookup per guest, as SQLite plans it.

use std::collections::HashSet;

use sqlx::{Postgres, QueryBuilder};

use super::store::PgDb;
use crate::analysis::history::Summary;
use crate::db::error::StoreResult;
use crate::db::rollups::{FIVE_MINUTES_MS, HOUR_MS, RollupRow};
use crate::domain::{GuestId, ReportId};

/// `OFFSET 0` keeps the `EXISTS` a lookup per guest in `samples_guest_received` (SQLite's
/// plan): PostgreSQL would otherwise turn it into a semi-join, which it may plan as a pass over
/// every sample's index entry (on few rows, or on statistics that favour it).
pub(super) const GUESTS_WITH_SAMPLES_BEFORE: &str = "SELECT id FROM guests g
     WHERE EXISTS (SELECT 1 FROM samples s WHERE s.guest_id = g.id AND s.received_ms < $1
                   OFFSET 0)
     ORDER BY id";

pub(super) const ROLLUPS_BETWEEN: &str =
    "SELECT resolution_ms, start_ms, samples, length_s, vcpu_s,
        host_cpu_s, wakeups, idle_s, busy_s, wasted_cpu_s, min_cpu_pct, max_cpu_pct
     FROM rollups
     WHERE guest_id = $1 AND resolution_ms IN ($2, $3) AND start_ms >= $4 AND start_ms < $5
     ORDER BY start_ms";

/// A rollup written for a window that already has one adds to it: sums add up, minima and
/// maxima combine. Both the five-minute rollups (late samples of a rolled-up window) and the
/// hourly merge write through it. The stored row is named by its table (`rollups.`), the new
/// one by `excluded.`. `LEAST` and `GREATEST` ignore a NULL (no CPU figure in one of the two),
/// which is what SQLite's `MIN(COALESCE(a, b), COALESCE(b, a))` spells out.
const ADD_TO_EXISTING_ROLLUP: &str =
    " ON CONFLICT (guest_id, resolution_ms, start_ms) DO UPDATE SET
    samples = rollups.samples + excluded.samples,
    length_s = rollups.length_s + excluded.length_s,
    vcpu_s = rollups.vcpu_s + excluded.vcpu_s,
    host_cpu_s = rollups.host_cpu_s + excluded.host_cpu_s,
    wakeups = rollups.wakeups + excluded.wakeups,
    idle_s = rollups.idle_s + excluded.idle_s,
    busy_s = rollups.busy_s + excluded.busy_s,
    wasted_cpu_s = rollups.wasted_cpu_s + excluded.wasted_cpu_s,
    min_cpu_pct = LEAST(rollups.min_cpu_pct, excluded.min_cpu_pct),
    max_cpu_pct = GREATEST(rollups.max_cpu_pct, excluded.max_cpu_pct)";

/// Windows per `INSERT`: 13 binds each, well under PostgreSQL's 65,535 per statement, and few
/// statements (round trips) for a guest's two days of five-minute windows.
const WINDOWS_PER_STATEMENT: usize = 1000;

/// Splits `windows` into runs of at most `max`, in order, none of which holds one start twice.
/// PostgreSQL refuses an `INSERT .. ON CONFLICT DO UPDATE` that would write one row twice
/// ("cannot affect row a second time"), where SQLite adds the second to the first: split there,
/// the second statement adds to what the first wrote, as SQLite does.
fn statements(windows: &[(i64, Summary)], max: usize) -> Vec<&[(i64, Summary)]> {
    let mut runs = Vec::new();
    let mut starts = HashSet::new();
    let mut begin = 0;
    for (i, (start_ms, _)) in windows.iter().enumerate() {
        if i - begin == max || !starts.insert(*start_ms) {
            runs.push(&windows[begin..i]);
            begin = i;
            starts.clear();
            starts.insert(*start_ms);
        }
    }
    if begin < windows.len() {
        runs.push(&windows[begin..]);
    }
    runs
}

impl PgDb {
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
        for run in statements(windows, WINDOWS_PER_STATEMENT) {
            let mut insert = QueryBuilder::<Postgres>::new(
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
            insert.push(ADD_TO_EXISTING_ROLLUP);
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

    /// Merges the five-minute rollups of whole hours before `before_ms` (a multiple of an hour)
    /// into hourly ones. Returns the five-minute rows merged.
    pub async fn merge_hourly_rollups(&self, before_ms: i64) -> StoreResult<u64> {
        let mut tx = self.begin_write().await?;
        // `$2` is the hour in both the select list and the grouping, one parameter: PostgreSQL
        // matches `start_ms / $2` of the select list to the grouped expression only when it is
        // the same. `SUM` of a BIGINT is NUMERIC: cast back (the sums of whole hours of a
        // guest's samples and wakeups are far from overflowing). The doubles add in
        // `start_ms` order, so that the hourly figures (equal to the five-minute ones' sums to
        // the last few bits) do not depend on the plan PostgreSQL picks.
        sqlx::query(&format!(
            "INSERT INTO rollups (guest_id, resolution_ms, start_ms, samples, length_s, vcpu_s,
                host_cpu_s, wakeups, idle_s, busy_s, wasted_cpu_s, min_cpu_pct, max_cpu_pct)
             SELECT guest_id, $2, start_ms / $2 * $2, SUM(samples)::BIGINT,
                SUM(length_s ORDER BY start_ms), SUM(vcpu_s ORDER BY start_ms),
                SUM(host_cpu_s ORDER BY start_ms), SUM(wakeups)::BIGINT,
                SUM(idle_s ORDER BY start_ms), SUM(busy_s ORDER BY start_ms),
                SUM(wasted_cpu_s ORDER BY start_ms), MIN(min_cpu_pct), MAX(max_cpu_pct)
             FROM rollups WHERE resolution_ms = $1 AND start_ms < $3
             GROUP BY guest_id, start_ms / $2 {ADD_TO_EXISTING_ROLLUP}"
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

    /// The reports of a guest's samples received in [from_ms, to_ms).
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

    /// Deletes hourly rollups that start before `rollups_before_ms`, and reports received
    /// before `reports_before_ms`, whose samples must have been rolled up (a sample refers to
    /// its report). Returns the rows deleted.
    /// `keep_reports`: reports received before `reports_before_ms` that samples still refer to.
    pub async fn expire(
        &self,
        rollups_before_ms: i64,
        reports_before_ms: i64,
        keep_reports: &[ReportId],
    ) -> StoreResult<u64> {
        // Two statements, each its own transaction, as on SQLite: deletes that read nothing
        // first need no write lock.
        let rollups = sqlx::query("DELETE FROM rollups WHERE resolution_ms = $1 AND start_ms < $2")
            .bind(HOUR_MS)
            .bind(rollups_before_ms)
            .execute(&self.pool)
            .await?
            .rows_affected();
        // PostgreSQL checks samples.report_id on each deleted report (it cannot be turned off
        // without superuser rights; `samples_report` makes it a lookup). A report a sample still
        // refers to that `keep_reports` missed (a guest the retention skipped, another server's
        // ingest or retention in between) would fail the whole delete, and every later one:
        // it is kept instead, until its samples are rolled up. SQLite, without the check,
        // deletes it and leaves the sample pointing nowhere.
        let reports = sqlx::query(
            "DELETE FROM reports r WHERE r.received_ms < $1 AND r.id <> ALL($2)
             AND NOT EXISTS (SELECT 1 FROM samples s WHERE s.report_id = r.id)",
        )
        .bind(reports_before_ms)
        .bind(keep_reports)
        .execute(&self.pool)
        .await?
        .rows_affected();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_split_where_a_start_repeats_and_at_the_maximum_in_order() {
        let w = |start: i64| (start, Summary::default());
        let windows = [w(0), w(1), w(2), w(1), w(3), w(4), w(5)];
        let starts = |max| -> Vec<Vec<i64>> {
            statements(&windows, max)
                .into_iter()
                .map(|run| run.iter().map(|(s, _)| *s).collect())
                .collect()
        };
        assert_eq!(starts(10), vec![vec![0, 1, 2], vec![1, 3, 4, 5]]);
        assert_eq!(starts(2), vec![vec![0, 1], vec![2, 1], vec![3, 4], vec![5]]);
        assert!(statements(&[], 10).is_empty());
    }
}
