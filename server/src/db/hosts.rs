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

/// What the pages count over every host, and the silent hosts they list first (see
/// `Db::hosts_outstanding`): counted in the database, so that a page costs the hosts it shows,
/// not every host that ever reported (retired hosts stay silent for good).
#[derive(Debug, Clone)]
pub struct HostsOutstanding {
    pub all: i64,
    pub silent: i64,
    /// Hosts whose agent says it cannot see something.
    pub blind: i64,
    /// The first of the silent hosts, most recently silent first, then by name byte by byte.
    pub silent_rows: Vec<HostRow>,
}

impl HostRow {
    /// The agent's blind spots, as stored (checked at ingest).
    pub fn blind_spots(&self) -> Vec<tickscope_wire::BlindSpot> {
        serde_json::from_str(&self.blind_spots_json).unwrap_or_default()
    }

    /// Whether its agent says it cannot see something; read without parsing the list when it
    /// is empty (the overview counts this over every host).
    pub fn is_blind(&self) -> bool {
        let json = self.blind_spots_json.trim();
        !(json.is_empty() || json == "[]" || self.blind_spots().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_blind_when_its_agent_named_something_it_cannot_see() {
        let spot =
            r#"[{"check":"proc_hidden","detail":"12 VMs","fix":"mount /proc without hidepid"}]"#;
        let cases = [
            ("", false),
            ("[]", false),
            (" [ ] ", false),
            ("not json", false),
            (spot, true),
        ];
        for (json, blind) in cases {
            let row = HostRow {
                id: HostId(1),
                name: "hv".into(),
                cpus: 8,
                kernel: String::new(),
                agent_version: String::new(),
                kvm_halt_poll_ns: None,
                first_seen_ms: 0,
                last_report_ms: 0,
                agent_dropped_reports: 0,
                blind_spots_json: json.into(),
            };
            assert_eq!(row.is_blind(), blind, "{json:?}");
            assert_eq!(row.is_blind(), !row.blind_spots().is_empty(), "{json:?}");
        }
    }
}
