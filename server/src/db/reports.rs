//! What storing a report comes to.

use std::collections::HashMap;

use tickscope_wire::WakeupsSource;

use super::facts::StoredFacts;
use super::guests::{GuestRow, IntervalRow, SampleParts, VmAsReported};
use crate::domain::{GuestId, HostId, ReportId, TokenId};
use crate::ingest::process_totals::SampleSpan;
use crate::ingest::{ValidGuest, ValidReport};

/// Whether a write's statements that name their rows by a list of ids (`= ANY($1)` on
/// PostgreSQL) are kept prepared: they are not, so that each is planned for the ids it is given.
/// A prepared statement's generic plan, made while the tables were small (a new database's first
/// reports), stayed a sequential scan as they grew: the previous totals of a batch's hosts took
/// 8-20 ms a batch at 30,000 guests where the index takes 0.3 ms (docs/performance.md). Planning
/// each time (a fraction of a millisecond) also covers a connection that outlives the growth.
pub(super) const PLANNED_EACH_TIME: bool = false;

/// One report to store: who sent it and when it arrived (server clock).
pub struct ReportToStore<'a> {
    pub report: &'a ValidReport,
    pub token_id: TokenId,
    pub received_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StoreOutcome {
    Stored {
        report_id: ReportId,
        host_id: HostId,
        /// The host's count of stored reports, this one included (see
        /// [`GONE_AFTER_MISSED_REPORTS`](super::guests::GONE_AFTER_MISSED_REPORTS)).
        host_reports: i64,
        /// What was written for each guest of the report, in the report's order: the analysed
        /// fleet is brought up to date from this, without reading it back.
        guests: Vec<StoredGuest>,
    },
    /// This (host, agent, run, seq) was stored before; nothing was written.
    Duplicate,
}

/// One guest of a stored report: its row as it stands after the report, and what was added.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredGuest {
    pub row: GuestRow,
    /// When the guest was first stored (server clock): equal to the report's arrival for a
    /// guest this report created.
    pub first_seen_ms: i64,
    pub sample: IntervalRow,
    pub facts: Option<StoredFacts>,
}

/// A guest's row as its upsert left it (the columns the upsert returns).
#[derive(sqlx::FromRow)]
pub(super) struct UpsertedGuest {
    pub host_id: HostId,
    pub hypervisor: String,
    pub identity: String,
    pub id: GuestId,
    #[sqlx(flatten)]
    pub vm: VmAsReported,
    pub last_seen_ms: i64,
    pub first_seen_ms: i64,
    pub vm_process_since_ms: Option<i64>,
    pub cpu_s_total: Option<f64>,
    pub wakeups_total: Option<i64>,
    pub has_totals: bool,
}

impl StoredGuest {
    /// What storing `guest` of `report` came to: the row as its upsert left it, the sample
    /// ingest decided (`span`), and the facts stored, if any.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn assemble(
        report: &ValidReport,
        host_id: HostId,
        host_reports: i64,
        guest: &ValidGuest,
        span: &SampleSpan,
        row: UpsertedGuest,
        received_ms: i64,
        facts: Option<StoredFacts>,
    ) -> StoredGuest {
        StoredGuest {
            sample: IntervalRow {
                guest_id: row.id,
                received_ms,
                length_ms: span.length_ms,
                vcpus: guest.vcpus,
                host_cpu_s: span.host_cpu_s,
                vcpu_wakeups: span.vcpu_wakeups,
                from_vcpu_threads: guest.wakeups_source == WakeupsSource::VcpuThreads.as_str(),
                parts: stored_parts(guest, span),
                halt_poll_s: stored_halt_poll_s(guest, span),
            },
            first_seen_ms: row.first_seen_ms,
            row: GuestRow {
                id: row.id,
                identity: guest.identity.clone(),
                host_id,
                host_name: report.host.name.clone(),
                host_halt_poll_ns: report.host.kvm_halt_poll_ns,
                hypervisor: guest.hypervisor,
                vm: row.vm,
                last_seen_ms: row.last_seen_ms,
                process_since_ms: row.vm_process_since_ms,
                last_report_n: host_reports,
                host_reports,
                cpu_s_total: row.cpu_s_total,
                wakeups_total: row.wakeups_total,
                has_totals: row.has_totals,
            },
            facts,
        }
    }
}

/// The reports of a batch (by position) in sets that are stored together, a few statements a
/// table for a set: within a set no host and no token comes twice, so that one upsert writes
/// each row once (PostgreSQL refuses to update a row twice in one statement), and a report
/// that follows another of its host or token in the batch sees it stored (its running totals,
/// the host its token was bound to, a repeat). Each report goes into the first set after every
/// set holding an earlier report of its host or its token; a batch of distinct hosts and
/// tokens is one set.
pub(super) fn sets_apart(batch: &[ReportToStore<'_>]) -> Vec<Vec<usize>> {
    let mut sets: Vec<Vec<usize>> = Vec::new();
    let mut host_next: HashMap<&str, usize> = HashMap::new();
    let mut token_next: HashMap<TokenId, usize> = HashMap::new();
    for (i, item) in batch.iter().enumerate() {
        let host = item.report.host.name.as_str();
        let set = host_next
            .get(host)
            .copied()
            .unwrap_or(0)
            .max(token_next.get(&item.token_id).copied().unwrap_or(0));
        if set == sets.len() {
            sets.push(Vec::new());
        }
        sets[set].push(i);
        host_next.insert(host, set + 1);
        token_next.insert(item.token_id, set + 1);
    }
    sets
}

/// The split of a guest's CPU that its sample stores: the agent's, unless the sample reaches
/// back over reports that never arrived (the split covers only the last interval).
pub(super) fn stored_parts(guest: &ValidGuest, span: &SampleSpan) -> Option<SampleParts> {
    let parts = guest.cpu_parts.as_ref().filter(|_| !span.bridged)?;
    SampleParts::from_columns(
        Some(parts.vcpus_s),
        Some(parts.iothreads_s),
        Some(parts.vhost_s),
    )
}

/// The halt polling a guest's sample stores: the agent's, unless the sample reaches back over
/// reports that never arrived.
pub(super) fn stored_halt_poll_s(guest: &ValidGuest, span: &SampleSpan) -> Option<f32> {
    guest
        .halt_poll_s
        .filter(|_| !span.bridged)
        .map(|s| s as f32)
}

#[cfg(feature = "test-support")]
/// One sample row as the ingest benchmark's baseline inserts it.
#[derive(Debug, Clone)]
pub struct RawSample {
    pub guest_id: GuestId,
    pub report_id: ReportId,
    pub end_ms: i64,
    pub received_ms: i64,
    pub length_ms: f64,
    pub vcpus: u32,
    pub host_cpu_s: f64,
    pub vcpu_wakeups: i64,
    pub wakeups_source: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of host `host` with no guests.
    fn report_of(host: &str) -> ValidReport {
        let wire = serde_json::json!({
            "agent": {"id": "m1", "run_id": "r1", "version": "0.1.0"},
            "seq": 1,
            "host": {"name": host, "cpus": 8, "kernel": "6.1.0-57-amd64"},
            "interval": {"start_ms": 990_000, "end_ms": 1_000_000, "length_ns": 10_000_000_000u64},
            "guests": []
        });
        crate::ingest::validate(serde_json::from_value(wire).unwrap(), 1_000_000).unwrap()
    }

    #[test]
    fn a_batch_is_set_apart_so_no_host_or_token_comes_twice_in_a_set() {
        // (host, token) of each report in arrival order; the sets of positions expected.
        type Reports<'a> = &'a [(&'a str, i64)];
        type Sets<'a> = &'a [&'a [usize]];
        let cases: &[(Reports<'_>, Sets<'_>)] = &[
            (&[], &[]),
            (&[("a", 1), ("b", 2), ("c", 3)], &[&[0, 1, 2]]),
            // The same host again: its second report follows the first, in a set after it.
            (
                &[("a", 1), ("b", 2), ("a", 1), ("c", 3)],
                &[&[0, 1, 3], &[2]],
            ),
            // One token for two hosts: the second report waits for the first's set.
            (&[("a", 1), ("b", 1), ("c", 2)], &[&[0, 2], &[1]]),
            // A host's third report in the third set; another host's second in the second.
            (
                &[("a", 1), ("a", 1), ("b", 2), ("a", 1), ("b", 2)],
                &[&[0, 2], &[1, 4], &[3]],
            ),
            // After a set of its own host and one of its token, the later of the two.
            (
                &[("a", 1), ("a", 1), ("b", 2), ("c", 2), ("c", 1)],
                &[&[0, 2], &[1, 3], &[4]],
            ),
        ];
        for (reports, expected) in cases {
            let valid: Vec<ValidReport> = reports.iter().map(|(h, _)| report_of(h)).collect();
            let batch: Vec<ReportToStore<'_>> = valid
                .iter()
                .zip(reports.iter())
                .map(|(report, (_, token))| ReportToStore {
                    report,
                    token_id: TokenId(*token),
                    received_ms: 1_000_000,
                })
                .collect();
            let expected: Vec<Vec<usize>> = expected.iter().map(|set| set.to_vec()).collect();
            assert_eq!(sets_apart(&batch), expected, "{reports:?}");
        }
    }
}
