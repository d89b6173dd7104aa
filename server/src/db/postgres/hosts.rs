//! Hosts, in PostgreSQL: ordered by name byte-wise (`COLLATE "C"`), as SQLite orders text,
//! whatever collation the database was created with.

use super::store::PgDb;
use crate::db::error::StoreResult;
use crate::db::hosts::HostRow;

impl PgDb {
    /// Every host that ever reported, by name.
    pub async fn hosts(&self) -> StoreResult<Vec<HostRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, cpus, kernel, agent_version, kvm_halt_poll_ns, first_seen_ms,
                    last_report_ms, agent_dropped_reports, blind_spots_json
             FROM hosts ORDER BY name COLLATE \"C\"",
        )
        .fetch_all(&self.pool)
        .await?)
    }
}
