use serde::Serialize;

/// A guest's VM process running totals as its latest report that carried them said (migration
/// 0008; a late report does not set them back): what `/metrics` serves as counters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProcessTotals {
    /// Host CPU seconds the VM process has used since it started.
    pub cpu_s_total: f64,
    /// Wake-ups of its vCPU threads (or of the whole process) since it started.
    pub wakeups_total: i64,
}
