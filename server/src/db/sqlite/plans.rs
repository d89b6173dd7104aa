//! What only tests and benchmarks ask of SQLite itself: a checkpoint, a vacuum, a planted
//! failure and the plan of a query (the `test-support` feature).

use super::dialect::Store;
use super::guests::{ScopeBind, bind_scope};
use crate::db::error::StoreResult;

impl Store {
    /// Copies the write-ahead log into the database file and empties it.
    pub async fn checkpoint(&self) -> StoreResult<()> {
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Rebuilds the database file without its free pages (after a retention deleted much).
    pub async fn vacuum(&self) -> StoreResult<()> {
        sqlx::query("VACUUM").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn plant_sample_failure(&self, vcpus: u32) -> StoreResult<()> {
        sqlx::raw_sql(&format!(
            "CREATE TRIGGER planted_failure BEFORE INSERT ON samples WHEN NEW.vcpus = {vcpus}
             BEGIN SELECT RAISE(ABORT, 'a planted failure'); END"
        ))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// SQLite's plan for `sql` with `binds`, one line per step (`EXPLAIN QUERY PLAN`'s detail).
    pub(super) async fn plan(&self, sql: &str, binds: Vec<ScopeBind>) -> StoreResult<Vec<String>> {
        let explain = format!("EXPLAIN QUERY PLAN {sql}");
        let query = sqlx::query_as::<_, (i64, i64, i64, String)>(&explain);
        Ok(bind_scope(query, binds)
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(|(_, _, _, detail)| detail)
            .collect())
    }
}
