use sqlx::FromRow;

use tickscope_wire::Hypervisor;

use super::process_totals::ProcessTotals;
use crate::domain::{GuestId, HostId, HypervisorName, ReportId};

/// What the agent last said of a guest's VM process: its names, its size, how it runs.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct VmAsReported {
    pub name: String,
    pub uuid: Option<String>,
    pub management: Option<String>,
    /// Stored as a 64-bit integer: PostgreSQL has no unsigned types.
    #[sqlx(try_from = "i64")]
    pub vcpus: u32,
    pub pid: i64,
    pub boot_args: Option<String>,
    pub uses_kvm: Option<bool>,
    /// Where its CPU time was last read (`wire::CpuSource` names).
    pub cpu_source: Option<String>,
    /// Its Hyper-V enlightenments, comma-separated ('' for none); `None`: unknown.
    pub hyperv: Option<String>,
    /// Whether it has an emulated HPET; `None`: unknown.
    pub hpet: Option<bool>,
    /// The OS its manager names.
    pub os_hint: Option<String>,
    /// Who it is on its platform, as the report's JSON.
    pub platform: Option<String>,
}

/// A guest as the analysis needs it, with its host's KVM setting.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct GuestRow {
    pub id: GuestId,
    /// What makes it the same guest on its host: its UUID, else `name:` and its name.
    pub identity: String,
    pub host_id: HostId,
    pub host_name: String,
    pub host_halt_poll_ns: Option<i64>,
    /// Read back strictly: a name no family has is an error, not `Other`.
    #[sqlx(try_from = "HypervisorName")]
    pub hypervisor: Hypervisor,
    #[sqlx(flatten)]
    pub vm: VmAsReported,
    pub last_seen_ms: i64,
    /// When its current VM process was first reported (server clock), if known: facts
    /// received before then are from an earlier boot.
    pub process_since_ms: Option<i64>,
    /// Its host's count of stored reports as of the last report that held it.
    pub last_report_n: i64,
    /// Its host's count of stored reports now (as of the row's reading).
    pub host_reports: i64,
    /// Its VM process's running totals, which count only when `has_totals`
    /// ([`GuestRow::process_totals`]).
    pub cpu_s_total: Option<f64>,
    pub wakeups_total: Option<i64>,
    pub has_totals: bool,
}

/// A guest is gone from its host once the host stored this many reports without it (shut
/// down, or moved away): it leaves the live fleet then, instead of counting until it has been
/// silent for the active limit. (A host that stops reporting altogether keeps its guests for
/// that limit: nothing says they are gone.)
pub const GONE_AFTER_MISSED_REPORTS: i64 = 3;

impl GuestRow {
    /// Its VM process's running totals as last reported, if its agent sends them.
    pub fn process_totals(&self) -> Option<ProcessTotals> {
        if !self.has_totals {
            return None;
        }
        Some(ProcessTotals {
            cpu_s_total: self.cpu_s_total?,
            wakeups_total: self.wakeups_total?,
        })
    }

    /// Whether its host's reports since its last one say it is gone.
    pub fn gone(&self) -> bool {
        self.host_reports - self.last_report_n >= GONE_AFTER_MISSED_REPORTS
    }
}

/// One sample of the analysis window.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRow {
    pub guest_id: GuestId,
    pub received_ms: i64,
    pub length_ms: f64,
    /// Stored as a 64-bit integer: PostgreSQL has no unsigned types.
    pub vcpus: u32,
    pub host_cpu_s: f64,
    pub vcpu_wakeups: i64,
    pub from_vcpu_threads: bool,
    /// Where its host CPU went among the VM's threads, when stored.
    pub parts: Option<SampleParts>,
    /// Host CPU KVM spent halt-polling its vCPUs, in core-seconds, when stored.
    pub halt_poll_s: Option<f32>,
}

/// Where a sample's host CPU went, in core-seconds, kept small: the live fleet holds a window
/// of samples of every guest. The emulator's part is the sample's host CPU less these.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleParts {
    pub vcpus_s: f32,
    pub iothreads_s: f32,
    pub vhost_s: f32,
}

impl SampleParts {
    /// The parts as stored: all three, or none.
    pub fn from_columns(
        vcpus: Option<f64>,
        iothreads: Option<f64>,
        vhost: Option<f64>,
    ) -> Option<Self> {
        Some(SampleParts {
            vcpus_s: vcpus? as f32,
            iothreads_s: iothreads? as f32,
            vhost_s: vhost? as f32,
        })
    }
}

/// The columns an [`IntervalRow`] is read from, of `samples` as `alias`.
pub(crate) fn interval_columns(alias: &str) -> String {
    format!(
        "{alias}.guest_id, {alias}.received_ms, {alias}.length_ms, {alias}.vcpus,
         {alias}.host_cpu_s, {alias}.vcpu_wakeups,
         {alias}.wakeups_source = 'vcpu_threads' AS from_vcpu_threads,
         {alias}.vcpu_cpu_s, {alias}.iothread_cpu_s, {alias}.vhost_cpu_s, {alias}.halt_poll_s"
    )
}

impl<'r, R: sqlx::Row> FromRow<'r, R> for IntervalRow
where
    &'r str: sqlx::ColumnIndex<R>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    f64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    bool: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    GuestId: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let vcpus: i64 = row.try_get("vcpus")?;
        let part = |name: &'r str| row.try_get::<Option<f64>, _>(name);
        Ok(IntervalRow {
            guest_id: row.try_get("guest_id")?,
            received_ms: row.try_get("received_ms")?,
            length_ms: row.try_get("length_ms")?,
            vcpus: u32::try_from(vcpus).map_err(|e| sqlx::Error::ColumnDecode {
                index: "vcpus".into(),
                source: Box::new(e),
            })?,
            host_cpu_s: row.try_get("host_cpu_s")?,
            vcpu_wakeups: row.try_get("vcpu_wakeups")?,
            from_vcpu_threads: row.try_get("from_vcpu_threads")?,
            parts: SampleParts::from_columns(
                part("vcpu_cpu_s")?,
                part("iothread_cpu_s")?,
                part("vhost_cpu_s")?,
            ),
            halt_poll_s: part("halt_poll_s")?.map(|s| s as f32),
        })
    }
}

/// A sample as a follower reads it: with the host and the report it came with (see
/// `Db::samples_of_reports_after`).
#[derive(Debug, Clone, FromRow)]
pub struct ReportedSample {
    pub host_id: HostId,
    pub report_id: ReportId,
    #[sqlx(flatten)]
    pub sample: IntervalRow,
}

/// A guest's own idle fraction, as one facts delivery reported it.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct IdleReading {
    pub guest_id: GuestId,
    /// The facts source that delivered it (readings of one instant are ordered by it).
    pub source: String,
    /// Server clock.
    pub received_ms: i64,
    /// How much guest time the reading measured, when the guest said.
    pub measured_ms: Option<i64>,
    pub idle_fraction: f64,
}

/// Which guests to analyse: every active one, some hosts' active guests, or one guest whether
/// active or not with its host's active guests (a guest's verdict needs its host's peers for
/// the baseline). Active means reported since the time given and not gone from its host
/// ([`GONE_AFTER_MISSED_REPORTS`]).
#[derive(Debug, Clone, Copy)]
pub enum GuestScope<'a> {
    Active {
        since_ms: i64,
    },
    /// The active guests of these hosts, read in one statement per table however many hosts
    /// there are (what another server stored, read by a follower).
    Hosts {
        host_ids: &'a [HostId],
        active_since_ms: i64,
    },
    Host {
        host_id: HostId,
        guest_id: GuestId,
        active_since_ms: i64,
    },
}

impl GuestScope<'_> {
    /// The hosts the scope is limited to; `None` for the whole fleet.
    pub fn host_ids(&self) -> Option<&[HostId]> {
        match self {
            GuestScope::Active { .. } => None,
            GuestScope::Hosts { host_ids, .. } => Some(host_ids),
            GuestScope::Host { host_id, .. } => Some(std::slice::from_ref(host_id)),
        }
    }
}

#[derive(Debug, Clone, FromRow)]
pub struct SampleRow {
    pub end_ms: i64,
    pub length_ms: f64,
    /// Stored as a 64-bit integer: PostgreSQL has no unsigned types.
    #[sqlx(try_from = "i64")]
    pub vcpus: u32,
    pub host_cpu_s: f64,
    pub vcpu_wakeups: i64,
    pub wakeups_source: String,
}
