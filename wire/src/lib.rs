//! The report an agent sends to the server: wire format v1, defined once and shared.
//!
//! The agent serialises these types and the server deserialises them; both depend on this crate,
//! which depends on serde alone (utoipa too with the `openapi` feature, for the server's
//! document), so that the agent on every hypervisor host links nothing of the server's. Unknown
//! fields are ignored and unknown enum values fall back to `Other`, so a newer agent can talk to
//! an older server. Validation of the values happens at the server's edge; these types only
//! describe the shape.

mod facts;
mod hypervisor;
mod limits;
mod platform;
mod vm_config;

pub use facts::{DeliveredFacts, Dynticks, FactsSource, GuestFacts, KernelConfig};
pub use hypervisor::Hypervisor;
pub use limits::{
    MAX_BOOT_ARGS_CHARS, MAX_LABEL_CHARS, MAX_NAME_CHARS, MAX_SPOOL_AGE_S, MAX_VCPUS, clean_text,
    normalise_uuid,
};
pub use platform::Platform;
pub use vm_config::{MAX_HYPERV_FLAGS, VmConfig, is_flag_name};

use serde::{Deserialize, Serialize};

/// The path reports are posted to; the version is in the path.
pub const REPORTS_PATH: &str = "/api/v1/reports";
/// The path a guest probe posts its facts to, with a guest token: `{"facts": GuestFacts}`.
pub const GUEST_FACTS_PATH: &str = "/api/v1/guest-facts";

/// The body of a direct facts delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FactsSubmission {
    pub facts: GuestFacts,
}

/// One measurement interval on one hypervisor host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Report {
    pub agent: AgentInfo,
    /// Counts up by one per report within one agent run (`agent.run_id`), starting at 0. The
    /// server stores each (agent id, run id, seq) once, so a resent report is harmless.
    pub seq: u64,
    pub host: HostInfo,
    pub interval: Interval,
    pub guests: Vec<GuestSample>,
    /// Reports the agent's spool deleted unsent to stay within its bounds, since the spool was
    /// created (it only grows).
    #[serde(default)]
    pub dropped_reports: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentInfo {
    /// Stable identity of the agent's host (its /etc/machine-id where there is one).
    pub id: String,
    /// Random identity of the agent's spool, made when the spool is created and kept across
    /// restarts with its sequence numbers; with `seq` it names each report once.
    pub run_id: String,
    /// The agent's version (its crate version).
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HostInfo {
    pub name: String,
    /// Logical CPUs online on the host.
    pub cpus: u32,
    /// Host kernel release (`uname -r`).
    pub kernel: String,
    /// `/sys/module/kvm/parameters/halt_poll_ns` where KVM is loaded: host-side halt polling turns
    /// guest idle time into host CPU, which must not be blamed on the guest's tick.
    #[serde(default)]
    pub kvm_halt_poll_ns: Option<u64>,
    /// `/proc/sys/kernel/random/boot_id`: new at every boot of the host, so that a VM process
    /// after a reboot is never taken for one before it, even with the same pid and start time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// What the agent cannot see on this host, each with the fix; empty when it sees all it
    /// looks for. Sent with every report, so a fixed one disappears with the next.
    #[serde(default)]
    pub blind_spots: Vec<BlindSpot>,
}

/// Most blind spots one report carries, and the longest text of each, in characters.
pub const MAX_BLIND_SPOTS: usize = 16;
pub const MAX_BLIND_SPOT_TEXT_CHARS: usize = 1024;

/// Something the agent could not see on its host, and how to let it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BlindSpot {
    pub check: BlindSpotCheck,
    /// What is missing, with the numbers (how many VMs, which path).
    pub detail: String,
    /// What gives the agent the access, in a sentence.
    pub fix: String,
}

/// What the agent looks at on every host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum BlindSpotCheck {
    /// `/proc` mounted with `hidepid=`: other users' processes (the VMs) are hidden.
    ProcHidden,
    /// `/proc/<pid>/fd` of VM processes: whether they run on KVM, and the probe and guest agent
    /// channels libvirt passes as descriptors.
    VmFds,
    /// The probe or guest agent sockets of VMs, owned by the hypervisor's user.
    ChannelAccess,
    /// libvirt's API (`virsh -c URI`), which answers for the guest agents of its domains.
    Libvirt,
    /// KVM's per-VM halt-polling counters in debugfs (`/sys/kernel/debug/kvm/<pid>-<fd>/`).
    HaltPollCounters,
    /// vhost workers that run as kernel threads outside the VM process (before Linux 6.4).
    VhostWorkers,
    /// A check this version does not know (sent by a newer agent).
    #[serde(other)]
    Other,
}

impl BlindSpotCheck {
    pub fn as_str(self) -> &'static str {
        match self {
            BlindSpotCheck::ProcHidden => "proc_hidden",
            BlindSpotCheck::VmFds => "vm_fds",
            BlindSpotCheck::ChannelAccess => "channel_access",
            BlindSpotCheck::Libvirt => "libvirt",
            BlindSpotCheck::HaltPollCounters => "halt_poll_counters",
            BlindSpotCheck::VhostWorkers => "vhost_workers",
            BlindSpotCheck::Other => "other",
        }
    }
}

/// The measured interval. Wall-clock ends are for display and storage; the exact length comes from
/// the monotonic clock, because rates are divided by it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Interval {
    /// Unix time in milliseconds when the interval began.
    pub start_ms: i64,
    /// Unix time in milliseconds when the interval ended.
    pub end_ms: i64,
    /// Exact length from the monotonic clock, in nanoseconds.
    pub length_ns: u64,
}

/// What one VM did during the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GuestSample {
    pub hypervisor: Hypervisor,
    /// How the VM is managed where the agent can tell (`libvirt`, `proxmox`), else absent.
    #[serde(default)]
    pub management: Option<String>,
    /// The VM's name as its hypervisor knows it. Comes from the host's process table: hostile.
    pub name: String,
    /// SMBIOS/DMI UUID where the hypervisor exposes one (QEMU `-uuid`, VMware `uuid.bios`).
    #[serde(default)]
    pub uuid: Option<String>,
    /// Host process id of the VM.
    pub pid: u32,
    /// Number of virtual CPUs.
    pub vcpus: u32,
    /// Host CPU time the whole VM process used in the interval, in core-seconds, from the
    /// counter `cpu_source` names.
    pub host_cpu_seconds: f64,
    /// Where `host_cpu_seconds` (and the totals' CPU) was read; absent from older agents, which
    /// always counted `/proc/<pid>/stat` ticks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_source: Option<CpuSource>,
    /// Context switches (voluntary + involuntary) of the threads counted, summed over the interval:
    /// each one is a wake-up of a vCPU thread on the host.
    pub vcpu_wakeups: u64,
    /// Which threads `vcpu_wakeups` and `vcpus` were measured from.
    pub wakeups_source: WakeupsSource,
    /// The guest kernel's command line when the host can see it (direct kernel boot:
    /// QEMU `-append`, cloud-hypervisor `--cmdline`). Hostile, like every VM-supplied string.
    #[serde(default)]
    pub boot_args: Option<String>,
    /// Whether the VM runs on KVM (its process holds a KVM VM descriptor): host-side KVM halt
    /// polling only costs KVM guests. Absent when the agent could not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses_kvm: Option<bool>,
    /// Where `host_cpu_seconds` went among the VM's threads, when the agent could tell (its vCPU
    /// threads named, their run times readable); absent otherwise and from older agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_parts: Option<CpuParts>,
    /// Host CPU KVM spent halt-polling the VM's vCPUs in the interval, in core-seconds (KVM's
    /// debugfs `halt_poll_success_ns` + `halt_poll_fail_ns`), where the agent could read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halt_poll_seconds: Option<f64>,
    /// Who the VM is on the platform that runs it (OpenStack, Proxmox VE, KubeVirt), where the
    /// agent could tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// What the host sees of the VM's configuration (Hyper-V enlightenments, HPET, the OS its
    /// manager names); absent from older agents and where nothing could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_config: Option<VmConfig>,
    /// What the guest said about itself since the last report, through a channel the host agent
    /// reads (the guest probe over serial, qemu-guest-agent, VirtualBox guest properties).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<DeliveredFacts>,
    /// The VM process's running totals at the end of the interval. The interval's figures above
    /// are differences the agent took between two of its own cycles; with the totals the server
    /// can also measure across reports that never arrived (a spool that overflowed, an agent that
    /// was down), and tell a new VM process, whose totals start again, from an old one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totals: Option<ProcessTotals>,
}

/// A VM's host CPU in the interval by the part of it that used it, in core-seconds: each from
/// its threads' run times (`schedstat`), the emulator as what is left of the VM's CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CpuParts {
    /// The vCPU threads: the guest's own running, idling, ticking and polling.
    pub vcpus_s: f64,
    /// QEMU's I/O threads (`-object iothread,id=X`, threads named `IO X`).
    pub iothreads_s: f64,
    /// vhost workers that are threads of the VM process (`vhost-<pid>`, Linux 6.4 and later).
    pub vhost_s: f64,
    /// The rest of the VM process: QEMU's main loop and its other threads.
    pub emulator_s: f64,
}

/// Counters that only grow for as long as one VM process lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProcessTotals {
    /// When the process started, in clock ticks after the host booted (`/proc/<pid>/stat` field
    /// 22). With the pid and the host's boot id it names the process: a restarted VM has another.
    pub start_ticks: u64,
    /// Host CPU time the process has used since it started (utime + stime), in core-seconds.
    pub host_cpu_seconds: f64,
    /// Context switches so far of the threads `vcpu_wakeups` counts (the same threads, from
    /// their start). It can fall when one of those threads ends: the server then takes it as a
    /// new count, like a new process.
    pub vcpu_wakeups: u64,
}

/// Which counter a VM's CPU time was read from, most exact first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CpuSource {
    /// The CPU counter of the VM's own cgroup (libvirt, Proxmox, systemd): exact.
    Cgroup,
    /// The sum of its threads' run time from `/proc/<pid>/task/<tid>/schedstat`, in
    /// nanoseconds; a thread that ends inside an interval loses its run since the last cycle.
    Schedstat,
    /// `/proc/<pid>/stat` utime + stime, in clock ticks (10 ms).
    StatTicks,
    #[serde(other)]
    Other,
}

impl CpuSource {
    pub fn as_str(self) -> &'static str {
        match self {
            CpuSource::Cgroup => "cgroup",
            CpuSource::Schedstat => "schedstat",
            CpuSource::StatTicks => "stat_ticks",
            CpuSource::Other => "other",
        }
    }
}

/// Where the wake-up count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WakeupsSource {
    /// The VM's vCPU threads, recognised by their names (`CPU 0/KVM`, `EMT-1`, `fc_vcpu 0`, ...).
    VcpuThreads,
    /// No vCPU thread names were recognisable, so every thread of the process was counted: the
    /// figure includes I/O and emulator threads and is an upper bound for the vCPUs.
    WholeProcess,
    #[serde(other)]
    Other,
}

impl WakeupsSource {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeupsSource::VcpuThreads => "vcpu_threads",
            WakeupsSource::WholeProcess => "whole_process",
            WakeupsSource::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_json() -> serde_json::Value {
        serde_json::json!({
            "agent": {"id": "m1", "run_id": "r1", "version": "0.1.0"},
            "seq": 7,
            "host": {"name": "hv1", "cpus": 8, "kernel": "6.1.0"},
            "interval": {"start_ms": 1000, "end_ms": 11000, "length_ns": 10_000_000_000u64},
            "guests": [{
                "hypervisor": "qemu", "name": "web1", "pid": 42, "vcpus": 2,
                "host_cpu_seconds": 0.5, "vcpu_wakeups": 1200, "wakeups_source": "vcpu_threads"
            }]
        })
    }

    #[test]
    fn report_round_trips_through_json() {
        let report: Report = serde_json::from_value(sample_json()).unwrap();
        let again: Report = serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
        assert_eq!(report, again);
        assert_eq!(report.guests[0].hypervisor, Hypervisor::Qemu);
        assert_eq!(report.host.kvm_halt_poll_ns, None);
    }

    #[test]
    fn unknown_fields_and_values_from_newer_agents_are_tolerated() {
        let mut json = sample_json();
        json["future_field"] = serde_json::json!({"x": 1});
        json["guests"][0]["hypervisor"] = serde_json::json!("bhyve");
        json["guests"][0]["wakeups_source"] = serde_json::json!("ebpf");
        json["guests"][0]["numa_nodes"] = serde_json::json!(2);
        let report: Report = serde_json::from_value(json).unwrap();
        assert_eq!(report.guests[0].hypervisor, Hypervisor::Other);
        assert_eq!(report.guests[0].wakeups_source, WakeupsSource::Other);
    }

    #[test]
    fn uuids_are_normalised_and_non_uuids_refused() {
        assert_eq!(
            normalise_uuid("1111AAAA-2222-3333-4444-555555555555").as_deref(),
            Some("1111aaaa-2222-3333-4444-555555555555")
        );
        assert_eq!(normalise_uuid("not-a-uuid"), None);
        assert_eq!(normalise_uuid("1111aaaa-2222-3333-4444-55555555555g"), None);
        assert_eq!(
            normalise_uuid("1111aaaa-2222-3333-4444-5555555555555"),
            None
        );
    }

    #[test]
    fn text_from_vms_is_cleaned_of_control_characters_and_cut() {
        assert_eq!(
            clean_text("web\n01\u{1b}[2J", 100),
            "web\u{FFFD}01\u{FFFD}[2J"
        );
        assert_eq!(clean_text("ééé", 2), "éé");
        assert_eq!(clean_text("plain name", 256), "plain name");
    }
}
