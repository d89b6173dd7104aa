//! Turning measured figures into a verdict: pure functions, no I/O.
//!
//! Flow: a guest's [`Window`] of samples → [`Rates`] → a [`tick_mode::Classification`] → with the
//! host's learned [`waste::Baseline`], a [`waste::Waste`] → [`suggest::Suggestion`]s.
//! Everything here works from host-side evidence only (what the agent can see from outside the
//! guest) and says so in its evidence; guest-reported facts come later and will win over it.

pub mod alerting;
pub mod boot_args;
pub mod change;
pub mod change_kind;
pub mod cost;
pub mod history;
pub mod idle;
pub mod kernel;
pub mod plan;
pub mod suggest;
pub mod tick_mode;
pub mod waste;

use serde::Serialize;
use tickscope_agent::wire::Hypervisor;

use idle::Activity;
use suggest::Suggestion;
use tick_mode::{Classification, TickMode};
use waste::{Baseline, Waste};

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
}

impl Span {
    pub fn add(&mut self, interval: &Interval) {
        self.host_cpu_s += interval.host_cpu_s;
        self.length_s += interval.length_s;
        self.vcpu_s += f64::from(interval.vcpus) * interval.length_s;
        self.wakeups += interval.wakeups;
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
    pub facts: Option<kernel::KernelFacts>,
    /// Whether the VM runs on KVM, when the agent could tell.
    pub uses_kvm: Option<bool>,
    /// The host's KVM `halt_poll_ns`, when KVM is loaded there.
    pub host_halt_poll_ns: Option<u64>,
}

impl Window {
    /// The guest's kernel command line: as the host sees it, else as the guest reported it.
    pub fn cmdline(&self) -> Option<&str> {
        self.boot_args
            .as_deref()
            .or_else(|| self.facts.as_ref()?.cmdline.as_deref())
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

/// Everything the analysis concluded about one guest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Over every interval of the window: what the host saw.
    pub rates: Option<Rates>,
    /// Over the idle intervals only (all of them when none was idle): what the tick mode and the
    /// waste rest on.
    pub idle_rates: Option<Rates>,
    pub activity: Activity,
    pub classification: Classification,
    pub waste: Waste,
    pub suggestions: Vec<Suggestion>,
}

/// What a guest's tick is judged on: its idle intervals when they hold enough time to say
/// anything, else all of them (a guest busy the whole window is judged busy from all of it),
/// with the guest's own idle fraction over the same intervals when it reported one.
pub(crate) fn judged(total: &Span, activity: &Activity) -> (Span, Option<f64>) {
    if activity.idle.length_s >= tick_mode::MIN_WINDOW_S {
        (activity.idle, activity.reported_idle_when_idle)
    } else {
        (*total, activity.reported_idle_overall)
    }
}

/// The activity once the tick classifier has spoken: a guest it found working was not idle in the
/// intervals inferred idle only for lack of a quieter floor.
pub(crate) fn settled(
    activity: Activity,
    classification: &Classification,
    window: &Window,
) -> Activity {
    if classification.mode == TickMode::Busy && activity.inferred_s > 0.0 {
        idle::activity_inferred_busy(&window.intervals)
    } else {
        activity
    }
}

/// Analyses the guests of one host: judges each interval idle or busy, classifies each guest's
/// tick from its idle intervals, learns the host's tickless baseline per hypervisor family from
/// its own tickless guests, then prices each guest's idle time against it.
pub fn analyse_host(guests: &[Window]) -> Vec<Verdict> {
    struct Measured {
        total: Span,
        judged: Span,
        activity: Activity,
        classification: Classification,
    }
    let measured: Vec<Measured> = guests
        .iter()
        .map(|window| {
            let total = window.total();
            let activity = idle::activity(&window.intervals);
            let (judged, reported_idle) = judged(&total, &activity);
            let classification = tick_mode::classify(window, &judged, reported_idle);
            Measured {
                activity: settled(activity, &classification, window),
                classification,
                total,
                judged,
            }
        })
        .collect();
    guests
        .iter()
        .zip(&measured)
        .map(|(window, m)| {
            let peers: Vec<f64> = guests
                .iter()
                .zip(&measured)
                .filter(|(w, p)| {
                    w.hypervisor == window.hypervisor && p.classification.mode == TickMode::Tickless
                })
                .filter_map(|(_, p)| p.judged.rates().map(|r| r.cpu_pct_per_vcpu))
                .collect();
            let baseline = Baseline::learn(&peers);
            let waste = waste::waste(&m.classification, &m.activity, &m.total, &baseline);
            let idle_rates = m.judged.rates();
            let suggestions = suggest::suggest(&suggest::Input {
                window,
                rates: idle_rates.as_ref(),
                activity: &m.activity,
                classification: &m.classification,
                waste: &waste,
            });
            Verdict {
                rates: m.total.rates(),
                idle_rates,
                activity: m.activity.clone(),
                classification: m.classification.clone(),
                waste,
                suggestions,
            }
        })
        .collect()
}
