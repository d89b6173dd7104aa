//! Hosts, in SQLite.

use super::store::SqliteDb;
use crate::db::error::StoreResult;
use crate::db::hosts::HostRow;

impl SqliteDb {
    /// Every host that ever reported, by name.
    pub async fn hosts(&self) -> StoreResult<Vec<HostRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, cpus, kernel, agent_version, kvm_halt_poll_ns, first_seen_ms,
                    last_report_ms, agent_dropped_reports, blind_spots_json
             FROM hosts ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?)
    }
}
