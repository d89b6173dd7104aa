//! Queries only the tests and benchmarks make: the plans of the queries that must use an index
//! (each backend reads its database's plan its own way: `plans.rs`), counts of stored rows, and
//! the ingest benchmark's baseline. Built with the `test-support` feature, which the crate's own
//! tests and benchmarks turn on (its dev-dependency on itself), so none of it is in the
//! server's API.

use std::collections::HashMap;

use super::dialect::Store;
use super::guests::{ScopeBind, scope_condition};
use super::rollups::{ROLLUPS_BETWEEN, guests_with_samples_before_sql};
use super::samples_read::window_sql;
use crate::db::error::StoreResult;
use crate::db::guests::GuestScope;
use crate::db::reports::RawSample;
use crate::db::rollups::StoredCounts;
use crate::domain::{GuestId, ReportId};

impl Store {
    pub async fn report_sequence(&self, run_id: &str) -> StoreResult<Vec<i64>> {
        Ok(
            sqlx::query_scalar("SELECT seq FROM reports WHERE run_id = $1 ORDER BY id")
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?,
        )
    }

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

    pub async fn any_report_id(&self) -> StoreResult<ReportId> {
        Ok(sqlx::query_scalar("SELECT MIN(id) FROM reports")
            .fetch_one(&self.pool)
            .await?)
    }

    /// The database's plan for the window query of [`Store::window_intervals`] (see
    /// `plans.rs` for the lines): the tests check that it looks the window up in
    /// `samples_guest_received` rather than scanning every sample ever stored.
    pub async fn window_query_plan(&self, scope: GuestScope<'_>) -> StoreResult<Vec<String>> {
        let (condition, binds) = scope_condition(&scope, 2);
        let binds = std::iter::once(ScopeBind::Int(0)).chain(binds).collect();
        self.plan(&window_sql(&condition), binds).await
    }

    /// The database's plan for [`Store::tokens_by_hash_prefix`], for the test that it uses
    /// `tokens_lookup_prefix`.
    pub async fn token_lookup_plan(&self) -> StoreResult<Vec<String>> {
        self.plan(
            "SELECT id, name, role, revoked_ms, sha256_hex FROM tokens
             WHERE substr(sha256_hex, 1, 16) = '0000000000000000'",
            Vec::new(),
        )
        .await
    }

    /// The database's plans for the retention's search for guests to roll up and for a
    /// guest's rollups, one after the other: the tests check that both go through an index.
    pub async fn rollup_query_plans(&self) -> StoreResult<Vec<String>> {
        let mut plans = self
            .plan(&guests_with_samples_before_sql(), ints(&[0]))
            .await?;
        plans.extend(self.plan(ROLLUPS_BETWEEN, ints(&[0; 5])).await?);
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

/// Numbers to bind, as a plan takes them.
fn ints(values: &[i64]) -> Vec<ScopeBind> {
    values.iter().copied().map(ScopeBind::Int).collect()
}
