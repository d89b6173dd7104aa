use sqlx::FromRow;

use super::Db;
use crate::error::AppResult;

/// A hypervisor host as its agent last described it.
#[derive(Debug, Clone, FromRow)]
pub struct HostRow {
    pub id: i64,
    pub name: String,
    pub cpus: i64,
    pub kernel: String,
    pub agent_version: String,
    pub kvm_halt_poll_ns: Option<i64>,
    pub first_seen_ms: i64,
    pub last_report_ms: i64,
    /// Reports the agent's spool dropped unsent (the largest count it reported).
    pub agent_dropped_reports: i64,
}

impl Db {
    /// Every host that ever reported, by name.
    pub async fn hosts(&self) -> AppResult<Vec<HostRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, cpus, kernel, agent_version, kvm_halt_poll_ns, first_seen_ms,
                    last_report_ms, agent_dropped_reports
             FROM hosts ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?)
    }
}
