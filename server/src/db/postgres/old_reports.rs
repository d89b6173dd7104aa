//! Old reports deleted in PostgreSQL, for [`Store::expire`].

use super::dialect::Store;
use crate::db::error::StoreResult;
use crate::domain::ReportId;

impl Store {
    /// What SQLite's `delete_reports_before` deletes, but any report a sample refers to.
    pub(super) async fn delete_reports_before(
        &self,
        before_ms: i64,
        keep: &[ReportId],
    ) -> StoreResult<u64> {
        // PostgreSQL checks samples.report_id on each deleted report (it cannot be turned off
        // without superuser rights; `samples_report` makes it a lookup). A report a sample still
        // refers to that `keep_reports` missed (a guest the retention skipped, another server's
        // ingest or retention in between) would fail the whole delete, and every later one:
        // it is kept instead, until its samples are rolled up. SQLite, without the check,
        // deletes it and leaves the sample pointing nowhere.
        Ok(sqlx::query(
            "DELETE FROM reports r WHERE r.received_ms < $1 AND r.id <> ALL($2)
             AND NOT EXISTS (SELECT 1 FROM samples s WHERE s.report_id = r.id)",
        )
        .bind(before_ms)
        .bind(keep)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }
}
