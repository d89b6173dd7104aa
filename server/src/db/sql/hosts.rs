//! Hosts, ordered by name byte by byte whatever collation the database was created with.

use super::dialect::{BYTEWISE, Store};
use crate::db::error::StoreResult;
use crate::db::hosts::HostRow;

impl Store {
    pub async fn hosts(&self) -> StoreResult<Vec<HostRow>> {
        let sql = format!(
            "SELECT id, name, cpus, kernel, agent_version, kvm_halt_poll_ns, first_seen_ms,
                    last_report_ms, agent_dropped_reports, blind_spots_json
             FROM hosts ORDER BY name{BYTEWISE}"
        );
        Ok(sqlx::query_as(&sql).fetch_all(&self.pool).await?)
    }
}
