//! What only tests and benchmarks ask of PostgreSQL itself: a checkpoint, a vacuum, a planted
//! failure and the plan of a query (the `test-support` feature). What SQLite's own commands
//! become: `CHECKPOINT` (needs rights SQLite does not have), `VACUUM (FULL, ANALYZE)` outside any
//! transaction, and `EXPLAIN` text with sequential scans disabled, so that a plan says whether
//! an index can serve the query rather than what the planner prefers for a table of a few test
//! rows (see `plan` for what it can tell).

use super::dialect::Store;
use super::guests::{ScopeBind, bind_scope};
use crate::db::error::StoreResult;

/// PostgreSQL's SQLSTATE for a command the role has no right to run.
const INSUFFICIENT_PRIVILEGE: &str = "42501";

impl Store {
    /// On PostgreSQL: a checkpoint, every page changed so far written to the data files, so
    /// that what is measured next does not pay for writing what came before (the write-ahead
    /// log is recycled by the server, not emptied as SQLite's `TRUNCATE` empties its file).
    /// `CHECKPOINT` needs a superuser or the `pg_checkpoint` role (PostgreSQL 15 on): without
    /// them it is skipped with a warning, and the measurement then shares the server with its
    /// own periodic checkpoints.
    pub async fn checkpoint(&self) -> StoreResult<()> {
        match sqlx::raw_sql("CHECKPOINT").execute(&self.pool).await {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_database_error()
                    .and_then(|d| d.code())
                    .is_some_and(|code| code == INSUFFICIENT_PRIVILEGE) =>
            {
                tracing::warn!("no checkpoint: {e} (needs superuser or pg_checkpoint)");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// On PostgreSQL: `VACUUM (FULL, ANALYZE)` of the database, which rewrites every table the
    /// role owns without its dead rows and free space, as SQLite's `VACUUM` rebuilds the file,
    /// and refreshes the planner's statistics. The database's size after it
    /// (`pg_database_size`) is what its live rows take; a server that only autovacuums reuses
    /// freed space instead of returning it, so in service it is somewhat larger. It takes each
    /// table's exclusive lock while it rewrites it. It cannot run inside a transaction: the
    /// simple query protocol sends it alone, on a pool connection in autocommit.
    pub async fn vacuum(&self) -> StoreResult<()> {
        sqlx::raw_sql("VACUUM (FULL, ANALYZE)")
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn plant_sample_failure(&self, vcpus: u32) -> StoreResult<()> {
        sqlx::raw_sql(&format!(
            "CREATE FUNCTION planted_failure() RETURNS trigger LANGUAGE plpgsql AS
                 $$ BEGIN RAISE EXCEPTION 'a planted failure'; END $$;
             CREATE TRIGGER planted_failure BEFORE INSERT ON samples FOR EACH ROW
                 WHEN (NEW.vcpus = {vcpus}) EXECUTE FUNCTION planted_failure();"
        ))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// `EXPLAIN (COSTS OFF)` of `sql` with `binds`, one text line per plan node or detail (the
    /// tree is in the indentation, a child's line starting with `->`).
    ///
    /// What it means on PostgreSQL: plans follow the statistics of the rows present, and on
    /// the few rows of a test database every table is scanned whatever its indexes, so the
    /// tables are analysed first (as autovacuum would, so that the plan does not depend on
    /// whether it has yet) and sequential scans are disabled for this plan. Then a `Seq Scan` left is a table no index can serve,
    /// and an index scan with no `Index Cond` naming the looked-up column (`guest_id = g.id`)
    /// reads the whole index, as bad as a scan. A join's method still follows the statistics:
    /// a nested loop of index lookups on test rows can be a hash join over every row on a full
    /// database, and the other way round; only a plan of a full, analysed database says which.
    pub(super) async fn plan(&self, sql: &str, binds: Vec<ScopeBind>) -> StoreResult<Vec<String>> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("ANALYZE guests, samples, rollups, tokens")
            .execute(&mut *tx)
            .await?;
        sqlx::query("SET LOCAL enable_seqscan = off")
            .execute(&mut *tx)
            .await?;
        let explain = format!("EXPLAIN (COSTS OFF) {sql}");
        let query = sqlx::query_as::<_, (String,)>(&explain);
        let lines = bind_scope(query, binds)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|(line,)| line)
            .collect();
        // The setting ends with the transaction.
        tx.rollback().await?;
        Ok(lines)
    }
}
