//! What storing a report comes to.

use super::facts::StoredFacts;
use super::guests::{GuestRow, IntervalRow};
#[cfg(feature = "test-support")]
use crate::domain::GuestId;
use crate::domain::{HostId, ReportId, TokenId};
use crate::ingest::ValidReport;

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
