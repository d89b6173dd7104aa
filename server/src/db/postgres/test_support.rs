//! Queries only the tests and benchmarks make, in PostgreSQL: the benchmarks' checkpoint and
//! vacuum, plans for the queries that must use an index, counts of stored rows, and the ingest
//! benchmark's baseline. Built with the `test-support` feature, as on SQLite. What differs is
//! what SQLite's own commands become: `CHECKPOINT` (needs rights SQLite does not have), `VACUUM
//! (FULL, ANALYZE)` outside any transaction, and `EXPLAIN` text with sequential scans
//! disabled, so that a plan says whether an index can serve the query rather than what the
//! planner prefers for a table of a few test rows (see `PgDb::plan` for what it can tell).

use std::collections::HashMap;

use super::guests::{scope_condition, window_sql};
use super::rollups::{GUESTS_WITH_SAMPLES_BEFORE, ROLLUPS_BETWEEN};
use super::store::PgDb;
use crate::db::error::StoreResult;
use crate::db::guests::GuestScope;
use crate::db::reports::RawSample;
use crate::db::rollups::StoredCounts;
use crate::domain::{GuestId, ReportId};

/// PostgreSQL's SQLSTATE for a command the role has no right to run.
const INSUFFICIENT_PRIVILEGE: &str = "42501";

impl PgDb {
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

    /// The sequence numbers of one agent run's reports, in the order they were stored.
    pub async fn report_sequence(&self, run_id: &str) -> StoreResult<Vec<i64>> {
        Ok(
            sqlx::query_scalar("SELECT seq FROM reports WHERE run_id = $1 ORDER BY id")
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// Inserts sample rows as they are, in one transaction, one `INSERT` each (the statement
    /// ingest uses on SQLite: the ingest benchmark's baseline of bare inserts).
    pub async fn insert_raw_samples(&self, rows: &[RawSample]) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        for row in rows {
            sqlx::query(
                "INSERT INTO samples (guest_id, report_id, end_ms, received_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups, wakeups_source)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(row.guest_id)
            .bind(row.report_id)
            .bind(row.end_ms)
            .bind(row.received_ms)
            .bind(row.length_ms)
            // PostgreSQL has no unsigned types: vcpus is a BIGINT.
            .bind(i64::from(row.vcpus))
            .bind(row.host_cpu_s)
            .bind(row.vcpu_wakeups)
            .bind(row.wakeups_source)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Every guest's id by (host name, guest name).
    pub async fn guest_ids_by_name(&self) -> StoreResult<HashMap<(String, String), GuestId>> {
        let rows: Vec<(String, String, GuestId)> = sqlx::query_as(
            "SELECT h.name, g.name, g.id FROM guests g JOIN hosts h ON h.id = g.host_id",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(host, guest, id)| ((host, guest), id))
            .collect())
    }

    /// Some stored report's id.
    pub async fn any_report_id(&self) -> StoreResult<ReportId> {
        Ok(sqlx::query_scalar("SELECT MIN(id) FROM reports")
            .fetch_one(&self.pool)
            .await?)
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
    async fn plan(&self, sql: &str, binds: &[i64]) -> StoreResult<Vec<String>> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("ANALYZE guests, samples, rollups, tokens")
            .execute(&mut *tx)
            .await?;
        sqlx::query("SET LOCAL enable_seqscan = off")
            .execute(&mut *tx)
            .await?;
        let explain = format!("EXPLAIN (COSTS OFF) {sql}");
        let mut query = sqlx::query_scalar(&explain);
        for bind in binds {
            query = query.bind(*bind);
        }
        let lines = query.fetch_all(&mut *tx).await?;
        // The setting ends with the transaction.
        tx.rollback().await?;
        Ok(lines)
    }

    /// PostgreSQL's plan for the window query of `window_intervals` (see [`PgDb::plan`] for
    /// the lines): the tests check that it looks the window up in `samples_guest_received`
    /// rather than scanning every sample ever stored.
    pub async fn window_query_plan(&self, scope: GuestScope) -> StoreResult<Vec<String>> {
        let (condition, binds) = scope_condition(&scope, 2);
        let binds: Vec<i64> = std::iter::once(0).chain(binds).collect();
        self.plan(&window_sql(&condition), &binds).await
    }

    /// PostgreSQL's plan for `tokens_by_hash_prefix` (see [`PgDb::plan`]), for the test that
    /// it uses `tokens_lookup_prefix`.
    pub async fn token_lookup_plan(&self) -> StoreResult<Vec<String>> {
        self.plan(
            "SELECT id, name, role, revoked_ms, sha256_hex FROM tokens
             WHERE substr(sha256_hex, 1, 16) = '0000000000000000'",
            &[],
        )
        .await
    }

    /// PostgreSQL's plans for the retention's search for guests to roll up and for a guest's
    /// rollups, one after the other (see [`PgDb::plan`]): the tests check that both go through
    /// an index.
    pub async fn rollup_query_plans(&self) -> StoreResult<Vec<String>> {
        let mut plans = self.plan(GUESTS_WITH_SAMPLES_BEFORE, &[0]).await?;
        plans.extend(self.plan(ROLLUPS_BETWEEN, &[0; 5]).await?);
        Ok(plans)
    }

    pub async fn stored_counts(&self) -> StoreResult<StoredCounts> {
        Ok(sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM reports) AS reports,
                    (SELECT COUNT(*) FROM samples) AS samples,
                    (SELECT COUNT(*) FROM rollups WHERE resolution_ms = 300000) AS rollups_5m,
                    (SELECT COUNT(*) FROM rollups WHERE resolution_ms = 3600000) AS rollups_1h",
        )
        .fetch_one(&self.pool)
        .await?)
    }
}
