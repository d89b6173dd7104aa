//! Turning measured figures into a verdict: pure functions, no I/O.
//!
//! Flow: a guest's [`Window`] of samples → [`Rates`] → a [`tick_mode::Classification`] → with the
//! host's learned [`waste::Baseline`], a [`waste::Waste`] → [`suggest::Suggestion`]s.
//! Everything here works from host-side evidence only (what the agent can see from outside the
//! guest) and says so in its evidence; guest-reported facts come later and will win over it.

pub mod boot_args;
pub mod change;
pub mod cost;
pub mod kernel;
pub mod plan;
pub mod suggest;
pub mod tick_mode;
pub mod waste;

use serde::Serialize;
use tickscope_agent::wire::Hypervisor;

use suggest::Suggestion;
use tick_mode::{Classification, TickMode};
use waste::{Baseline, Waste};

/// A guest's samples over the analysis window, summed.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub hypervisor: Hypervisor,
    /// vCPUs at the latest sample.
    pub vcpus: u32,
    /// Host CPU used, in core-seconds.
    pub host_cpu_s: f64,
    /// Total length of the samples, in seconds.
    pub length_s: f64,
    /// Sum over samples of vCPUs × length, in vCPU-seconds (exact when vCPUs were hot-plugged).
    pub vcpu_s: f64,
    pub wakeups: u64,
    /// Whether every sample counted named vCPU threads rather than the whole process.
    pub wakeups_from_vcpu_threads: bool,
    /// The guest kernel command line, when the host can see it.
    pub boot_args: Option<String>,
    /// What the guest itself reported, when any channel delivered facts.
    pub facts: Option<kernel::KernelFacts>,
}

impl Window {
    /// The guest's kernel command line: as the host sees it, else as the guest reported it.
    pub fn cmdline(&self) -> Option<&str> {
        self.boot_args
            .as_deref()
            .or_else(|| self.facts.as_ref()?.cmdline.as_deref())
    }
}

/// A one-minute window of a QEMU guest with the given rates, for the rule tables' tests.
#[cfg(test)]
pub(crate) fn test_window(
    vcpus: u32,
    cpu_pct: f64,
    wakeups_per_vcpu_s: f64,
    boot_args: Option<&str>,
) -> Window {
    let length_s = 60.0;
    Window {
        hypervisor: Hypervisor::Qemu,
        vcpus,
        host_cpu_s: cpu_pct / 100.0 * length_s,
        length_s,
        vcpu_s: f64::from(vcpus) * length_s,
        wakeups: (wakeups_per_vcpu_s * f64::from(vcpus) * length_s) as u64,
        wakeups_from_vcpu_threads: true,
        boot_args: boot_args.map(str::to_string),
        facts: None,
    }
}

/// Rates derived from a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rates {
    /// Host CPU used by the whole VM, in % of one host core.
    pub host_cpu_pct: f64,
    /// Host CPU per vCPU, in % of one host core.
    pub cpu_pct_per_vcpu: f64,
    /// vCPU thread wake-ups per vCPU per second.
    pub wakeups_per_vcpu_s: f64,
}

impl Window {
    /// `None` when the window holds no time to divide by.
    pub fn rates(&self) -> Option<Rates> {
        if !(self.length_s > 0.0 && self.vcpu_s > 0.0 && self.vcpus > 0) {
            return None;
        }
        let host_cpu_pct = 100.0 * self.host_cpu_s / self.length_s;
        Some(Rates {
            host_cpu_pct,
            cpu_pct_per_vcpu: 100.0 * self.host_cpu_s / self.vcpu_s,
            wakeups_per_vcpu_s: self.wakeups as f64 / self.vcpu_s,
        })
    }
}

/// Everything the analysis concluded about one guest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub rates: Option<Rates>,
    pub classification: Classification,
    pub waste: Waste,
    pub suggestions: Vec<Suggestion>,
}

/// Analyses the guests of one host: learns the host's tickless baseline per hypervisor family
/// from its own tickless guests, then judges each guest against it.
pub fn analyse_host(guests: &[Window]) -> Vec<Verdict> {
    let classified: Vec<(Option<Rates>, Classification)> = guests
        .iter()
        .map(|w| {
            let rates = w.rates();
            (rates, tick_mode::classify(w, rates.as_ref()))
        })
        .collect();
    guests
        .iter()
        .zip(&classified)
        .map(|(window, (rates, classification))| {
            let peers: Vec<f64> = guests
                .iter()
                .zip(&classified)
                .filter(|(w, (_, c))| {
                    w.hypervisor == window.hypervisor && c.mode == TickMode::Tickless
                })
                .filter_map(|(_, (r, _))| r.map(|r| r.cpu_pct_per_vcpu))
                .collect();
            let baseline = Baseline::learn(&peers);
            let waste = waste::waste(
                classification,
                rates.as_ref(),
                window.vcpus,
                &baseline,
                window.facts.as_ref().and_then(|k| k.idle_fraction),
            );
            let suggestions = suggest::suggest(&suggest::Input {
                window,
                rates: rates.as_ref(),
                classification,
                waste: &waste,
            });
            Verdict {
                rates: *rates,
                classification: classification.clone(),
                waste,
                suggestions,
            }
        })
        .collect()
}
