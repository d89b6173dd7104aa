//! What a guest is judged on: its samples, by report interval, over the analysis window.

use serde::Serialize;
use tickscope_wire::Hypervisor;

/// Samples summed over a stretch of time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Span {
    /// Host CPU used, in core-seconds.
    pub host_cpu_s: f64,
    /// Measured time, in seconds.
    pub length_s: f64,
    /// Σ vCPUs × length, in vCPU-seconds (exact when vCPUs were hot-plugged).
    pub vcpu_s: f64,
    pub wakeups: u64,
    /// The split of the host CPU among the VM's threads, over the intervals that had one.
    pub parts: PartsSum,
    /// KVM's halt polling for its vCPUs, over the intervals it was measured in: their time and
    /// the polling, in seconds and core-seconds.
    pub halt_poll_length_s: f64,
    pub halt_poll_s: f64,
}

/// Intervals' splits of their host CPU, summed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PartsSum {
    /// Time the split covers, in seconds, and the host CPU of that time, in core-seconds.
    pub length_s: f64,
    pub host_cpu_s: f64,
    pub vcpus_s: f64,
    pub iothreads_s: f64,
    pub vhost_s: f64,
}

/// Where a VM's host CPU went while it idled, in % of one core each.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CpuSplit {
    /// Its vCPU threads: the guest's own idling, ticking and polling.
    pub vcpus_pct: f64,
    /// QEMU's main loop and its other threads: host CPU less the parts below and above.
    pub emulator_pct: f64,
    /// QEMU's I/O threads.
    pub iothreads_pct: f64,
    /// vhost workers that are threads of the VM process.
    pub vhost_pct: f64,
    /// Seconds of idle time the split covers.
    pub measured_s: f64,
}

impl PartsSum {
    /// The split as % of a core; `None` where no interval had one.
    pub fn split(&self) -> Option<CpuSplit> {
        if self.length_s <= 0.0 {
            return None;
        }
        let pct = |s: f64| 100.0 * s / self.length_s;
        let counted = self.vcpus_s + self.iothreads_s + self.vhost_s;
        Some(CpuSplit {
            vcpus_pct: pct(self.vcpus_s),
            emulator_pct: pct((self.host_cpu_s - counted).max(0.0)),
            iothreads_pct: pct(self.iothreads_s),
            vhost_pct: pct(self.vhost_s),
            measured_s: self.length_s,
        })
    }
}

impl Span {
    pub fn add(&mut self, interval: &Interval) {
        self.host_cpu_s += interval.host_cpu_s;
        self.length_s += interval.length_s;
        self.vcpu_s += f64::from(interval.vcpus) * interval.length_s;
        self.wakeups += interval.wakeups;
        if let Some(polled) = interval.halt_poll_s {
            self.halt_poll_length_s += interval.length_s;
            self.halt_poll_s += polled;
        }
        if let Some(parts) = &interval.parts {
            self.parts.length_s += interval.length_s;
            self.parts.host_cpu_s += interval.host_cpu_s;
            self.parts.vcpus_s += parts.vcpus_s;
            self.parts.iothreads_s += parts.iothreads_s;
            self.parts.vhost_s += parts.vhost_s;
        }
    }

    /// KVM's halt polling for the VM's vCPUs, in % of a core over the time it was measured;
    /// `None` where it never was.
    pub fn halt_poll_pct(&self) -> Option<f64> {
        (self.halt_poll_length_s > 0.0).then(|| 100.0 * self.halt_poll_s / self.halt_poll_length_s)
    }

    /// Host CPU less what the VM's I/O threads and vhost workers used where the split is
    /// known: what the guest's own idling (and QEMU's main loop, which every guest has) cost.
    pub fn guest_cpu_s(&self) -> f64 {
        (self.host_cpu_s - self.parts.iothreads_s - self.parts.vhost_s).max(0.0)
    }

    pub fn of(intervals: &[Interval]) -> Span {
        let mut span = Span::default();
        for interval in intervals {
            span.add(interval);
        }
        span
    }

    /// `None` when the span holds no time to divide by.
    pub fn rates(&self) -> Option<Rates> {
        if !(self.length_s > 0.0 && self.vcpu_s > 0.0) {
            return None;
        }
        Some(Rates {
            host_cpu_pct: 100.0 * self.host_cpu_s / self.length_s,
            cpu_pct_per_vcpu: 100.0 * self.host_cpu_s / self.vcpu_s,
            wakeups_per_vcpu_s: self.wakeups as f64 / self.vcpu_s,
        })
    }
}

/// One report interval of one guest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub length_s: f64,
    pub vcpus: u32,
    /// Host CPU used, in core-seconds.
    pub host_cpu_s: f64,
    pub wakeups: u64,
    /// The guest's own idle fraction over this time, when it reported one (0 to 1).
    pub guest_idle_fraction: Option<f64>,
    /// Where its host CPU went among the VM's threads, when the agent could tell.
    pub parts: Option<Parts>,
    /// Host CPU KVM spent halt-polling its vCPUs, in core-seconds, when measured.
    pub halt_poll_s: Option<f64>,
}

/// One interval's split of its host CPU, in core-seconds; the emulator's is the rest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Parts {
    pub vcpus_s: f64,
    pub iothreads_s: f64,
    pub vhost_s: f64,
}

impl Interval {
    /// Host CPU per vCPU, in % of a core; `None` for an empty interval.
    pub fn cpu_pct_per_vcpu(&self) -> Option<f64> {
        let vcpu_s = f64::from(self.vcpus) * self.length_s;
        (vcpu_s > 0.0).then(|| 100.0 * self.host_cpu_s / vcpu_s)
    }
}

/// A guest's samples over the analysis window.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub hypervisor: Hypervisor,
    /// vCPUs at the latest sample.
    pub vcpus: u32,
    /// The report intervals, oldest first.
    pub intervals: Vec<Interval>,
    /// Whether every sample counted named vCPU threads rather than the whole process.
    pub wakeups_from_vcpu_threads: bool,
    /// The guest kernel command line, when the host can see it.
    pub boot_args: Option<String>,
    /// What the guest itself reported, when any channel delivered facts.
    pub facts: Option<super::kernel::KernelFacts>,
    /// Whether the VM runs on KVM, when the agent could tell.
    pub uses_kvm: Option<bool>,
    /// The host's KVM `halt_poll_ns`, when KVM is loaded there.
    pub host_halt_poll_ns: Option<u64>,
    /// What the VM's configuration says of its enlightenments, HPET and OS.
    pub setup: super::platform::VmSetup,
}

impl Window {
    /// The guest's kernel command line: as the host sees it, else as the guest reported it.
    pub fn cmdline(&self) -> Option<&str> {
        self.boot_args
            .as_deref()
            .or_else(|| self.facts.as_ref()?.cmdline.as_deref())
    }

    /// The guest's OS, from its facts or its manager.
    pub fn os(&self) -> super::platform::GuestOs {
        super::platform::guest_os(self.facts.as_ref(), self.setup.os_hint.as_deref())
    }

    /// Whether its idle cost can teach the host what an idle tickless vCPU costs: not when its
    /// tick runs on an emulated timer, nor when it is known to run another OS than Linux.
    pub fn teaches_baseline(&self) -> bool {
        self.facts
            .as_ref()
            .is_none_or(|k| k.emulated_tick_device().is_none())
            && self.os().family.may_be_linux()
    }

    /// Every interval, summed.
    pub fn total(&self) -> Span {
        Span::of(&self.intervals)
    }

    /// Host CPU of the busiest interval, in cores.
    pub fn peak_cores(&self) -> Option<f64> {
        self.intervals
            .iter()
            .filter(|i| i.length_s > 0.0)
            .map(|i| i.host_cpu_s / i.length_s)
            .max_by(f64::total_cmp)
    }
}

/// Rates derived from a span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rates {
    /// Host CPU used by the whole VM, in % of one host core.
    pub host_cpu_pct: f64,
    /// Host CPU per vCPU, in % of one host core.
    pub cpu_pct_per_vcpu: f64,
    /// vCPU thread wake-ups per vCPU per second.
    pub wakeups_per_vcpu_s: f64,
}

/// A one-minute window of a QEMU guest of six steady 10 s intervals with the given rates, for
/// the rule tables' tests.
#[cfg(test)]
pub(crate) fn test_window(
    vcpus: u32,
    cpu_pct: f64,
    wakeups_per_vcpu_s: f64,
    boot_args: Option<&str>,
) -> Window {
    let length_s = 10.0;
    let interval = Interval {
        length_s,
        vcpus,
        host_cpu_s: cpu_pct / 100.0 * length_s,
        wakeups: (wakeups_per_vcpu_s * f64::from(vcpus) * length_s) as u64,
        guest_idle_fraction: None,
        parts: None,
        halt_poll_s: None,
    };
    Window {
        hypervisor: Hypervisor::Qemu,
        vcpus,
        intervals: vec![interval; 6],
        wakeups_from_vcpu_threads: true,
        boot_args: boot_args.map(str::to_string),
        facts: None,
        uses_kvm: None,
        host_halt_poll_ns: None,
        setup: super::platform::VmSetup::default(),
    }
}
