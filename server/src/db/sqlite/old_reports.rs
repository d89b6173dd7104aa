//! Old reports deleted in SQLite, for [`Store::expire`].

use super::dialect::{Store, id_list};
use crate::db::error::StoreResult;
use crate::domain::ReportId;

impl Store {
    /// Deletes the reports received before `before_ms` but those in `keep` (which samples
    /// still refer to); returns how many.
    pub(super) async fn delete_reports_before(
        &self,
        before_ms: i64,
        keep: &[ReportId],
    ) -> StoreResult<u64> {
        // samples.report_id refers to reports without an index (ingest would pay for one on
        // every sample), so SQLite would check each deleted report against every sample left.
        // The samples of these reports were all rolled up and deleted first, so the check is
        // skipped on the one connection that deletes them.
        let mut conn = self.pool.acquire().await?;
        sqlx::query("PRAGMA foreign_keys = OFF")
            .execute(&mut *conn)
            .await?;
        let deleted = sqlx::query(
            "DELETE FROM reports WHERE received_ms < $1
             AND id NOT IN (SELECT value FROM json_each($2))",
        )
        .bind(before_ms)
        .bind(id_list(keep.iter().map(|id| id.0)))
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
        Ok(deleted?.rows_affected())
    }
}
