use sqlx::FromRow;

use crate::domain::HostId;

/// A hypervisor host as its agent last described it.
#[derive(Debug, Clone, FromRow)]
pub struct HostRow {
    pub id: HostId,
    pub name: String,
    pub cpus: i64,
    pub kernel: String,
    pub agent_version: String,
    pub kvm_halt_poll_ns: Option<i64>,
    pub first_seen_ms: i64,
    pub last_report_ms: i64,
    /// Reports the agent's spool dropped unsent (the largest count it reported).
    pub agent_dropped_reports: i64,
    /// What the agent last said it cannot see: a JSON array of `wire::BlindSpot`.
    pub blind_spots_json: String,
}

impl HostRow {
    /// The agent's blind spots, as stored (checked at ingest).
    pub fn blind_spots(&self) -> Vec<tickscope_wire::BlindSpot> {
        serde_json::from_str(&self.blind_spots_json).unwrap_or_default()
    }
}
