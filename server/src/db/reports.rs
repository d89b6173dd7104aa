//! What storing a report comes to.

#[cfg(feature = "test-support")]
use crate::domain::GuestId;
use crate::domain::{HostId, ReportId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOutcome {
    Stored {
        report_id: ReportId,
        host_id: HostId,
    },
    /// This (host, agent, run, seq) was stored before; nothing was written.
    Duplicate,
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
