//! Hosts, ordered by name byte by byte whatever collation the database was created with.

use super::dialect::{BYTEWISE, Store, id_list, in_id_list};
use crate::db::error::StoreResult;
use crate::db::hosts::{HostRow, HostsOutstanding};
use crate::domain::HostId;

const HOST_COLUMNS: &str = "id, name, cpus, kernel, agent_version, kvm_halt_poll_ns, first_seen_ms,
    last_report_ms, agent_dropped_reports, blind_spots_json";

impl Store {
    pub async fn hosts(&self) -> StoreResult<Vec<HostRow>> {
        let sql = format!("SELECT {HOST_COLUMNS} FROM hosts ORDER BY name{BYTEWISE}");
        Ok(sqlx::query_as(&sql).fetch_all(&self.pool).await?)
    }

    pub async fn host(&self, id: HostId) -> StoreResult<Option<HostRow>> {
        let sql = format!("SELECT {HOST_COLUMNS} FROM hosts WHERE id = $1");
        Ok(sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    pub async fn hosts_by_id(&self, ids: &[HostId]) -> StoreResult<Vec<HostRow>> {
        let sql = format!(
            "SELECT {HOST_COLUMNS} FROM hosts WHERE {}",
            in_id_list("id", 1)
        );
        Ok(sqlx::query_as(&sql)
            .bind(id_list(ids.iter().map(|id| id.0)))
            .fetch_all(&self.pool)
            .await?)
    }

    pub async fn hosts_outstanding(
        &self,
        silent_before_ms: i64,
        limit: i64,
    ) -> StoreResult<HostsOutstanding> {
        // What an agent writes when it sees everything is `[]` (ingest stores the list as
        // serde_json writes it); anything else names something.
        let (all, silent, blind): (i64, i64, i64) = sqlx::query_as(
            "SELECT COUNT(*),
                    COUNT(*) FILTER (WHERE last_report_ms < $1),
                    COUNT(*) FILTER (WHERE blind_spots_json <> '[]')
             FROM hosts",
        )
        .bind(silent_before_ms)
        .fetch_one(&self.pool)
        .await?;
        let sql = format!(
            "SELECT {HOST_COLUMNS} FROM hosts WHERE last_report_ms < $1
             ORDER BY last_report_ms DESC, name{BYTEWISE} LIMIT $2"
        );
        let silent_rows = sqlx::query_as(&sql)
            .bind(silent_before_ms)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        Ok(HostsOutstanding {
            all,
            silent,
            blind,
            silent_rows,
        })
    }

    pub async fn reporting_hosts_by_name(
        &self,
        silent_before_ms: i64,
        after_name: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<HostRow>> {
        let sql = format!(
            "SELECT {HOST_COLUMNS} FROM hosts
             WHERE last_report_ms >= $1 AND ($2 IS NULL OR name{BYTEWISE} > $2)
             ORDER BY name{BYTEWISE} LIMIT $3"
        );
        Ok(sqlx::query_as(&sql)
            .bind(silent_before_ms)
            .bind(after_name)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?)
    }
}
