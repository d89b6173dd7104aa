//! Queries only the tests and benchmarks make: the benchmarks' checkpoint and vacuum, SQLite's
//! plans for the queries that must use an index, counts of stored rows, and the ingest
//! benchmark's baseline. Built with the `test-support` feature, which the crate's own tests and
//! benchmarks turn on (its dev-dependency on itself), so none of it is in the server's API.

use std::collections::HashMap;

use super::guests::window_sql;
use super::rollups::{GUESTS_WITH_SAMPLES_BEFORE, ROLLUPS_BETWEEN};
use super::store::SqliteDb;
use crate::db::error::StoreResult;
use crate::db::guests::GuestScope;
use crate::db::reports::RawSample;
use crate::db::rollups::StoredCounts;
use crate::domain::{GuestId, ReportId};

impl SqliteDb {
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

    /// The sequence numbers of one agent run's reports, in the order they were stored.
    pub async fn report_sequence(&self, run_id: &str) -> StoreResult<Vec<i64>> {
        Ok(
            sqlx::query_scalar("SELECT seq FROM reports WHERE run_id = ? ORDER BY id")
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// Inserts sample rows as they are, in one transaction, with the statement ingest uses.
    pub async fn insert_raw_samples(&self, rows: &[RawSample]) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        for row in rows {
            sqlx::query(
                "INSERT INTO samples (guest_id, report_id, end_ms, received_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups, wakeups_source)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(row.guest_id)
            .bind(row.report_id)
            .bind(row.end_ms)
            .bind(row.received_ms)
            .bind(row.length_ms)
            .bind(row.vcpus)
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

    /// SQLite's plan for [`SqliteDb::window_intervals`], one line per step: the tests check that it
    /// looks the window up by index rather than scanning every sample ever stored.
    pub async fn window_query_plan(&self, scope: GuestScope) -> StoreResult<Vec<String>> {
        let (condition, binds) = scope.condition();
        let sql = format!("EXPLAIN QUERY PLAN {}", window_sql(&condition));
        let mut query = sqlx::query_as::<_, (i64, i64, i64, String)>(&sql).bind(0i64);
        for bind in binds {
            query = query.bind(bind);
        }
        Ok(query
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(|(_, _, _, detail)| detail)
            .collect())
    }

    /// SQLite's plan for [`SqliteDb::tokens_by_hash_prefix`], for the test that it uses its index.
    pub async fn token_lookup_plan(&self) -> StoreResult<Vec<String>> {
        let rows: Vec<(i64, i64, i64, String)> = sqlx::query_as(
            "EXPLAIN QUERY PLAN SELECT id, name, role, revoked_ms, sha256_hex FROM tokens
             WHERE substr(sha256_hex, 1, 16) = ?",
        )
        .bind("0000000000000000")
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(_, _, _, detail)| detail).collect())
    }

    /// SQLite's plans for the retention's search for guests to roll up and for a guest's
    /// rollups, one line per step: the tests check that both go through an index.
    pub async fn rollup_query_plans(&self) -> StoreResult<Vec<String>> {
        let mut plans = Vec::new();
        for (sql, binds) in [(GUESTS_WITH_SAMPLES_BEFORE, 1), (ROLLUPS_BETWEEN, 5)] {
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let mut query = sqlx::query_as::<_, (i64, i64, i64, String)>(&explain);
            for _ in 0..binds {
                query = query.bind(0i64);
            }
            plans.extend(
                query
                    .fetch_all(&self.pool)
                    .await?
                    .into_iter()
                    .map(|row| row.3),
            );
        }
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
