//! What storing a report comes to.

use tickscope_wire::WakeupsSource;

use super::facts::StoredFacts;
use super::guests::{GuestRow, IntervalRow, SampleParts, VmAsReported};
use crate::domain::{GuestId, HostId, ReportId, TokenId};
use crate::ingest::process_totals::SampleSpan;
use crate::ingest::{ValidGuest, ValidReport};

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
