//! One analysed guest ([`AnalysedGuest`]: its verdict with what it was drawn from) and what
//! every analysis of a guest shares: the window and activity limits, which source's facts to
//! believe (`choose_facts`), the samples and idle readings as analysis intervals, and the
//! rank order of the fleet.

use std::sync::Arc;

use serde::Serialize;
use tickscope_wire::{FactsSource, GuestFacts, Platform};

use crate::analysis::kernel::KernelFacts;
use crate::analysis::platform::{GuestOs, OsFamily, VmSetup, guest_os};
use crate::analysis::window::Parts;
use crate::analysis::{Interval, Verdict, idle};

use crate::db::{IdleReading, IntervalRow, ProcessTotals};
use crate::domain::{GuestId, HostId};

/// Samples from this far back (before a guest's newest one) are averaged into its figures.
pub const ANALYSIS_WINDOW_MS: i64 = 5 * 60 * 1000;
/// Guests not reported for this long are left out of the ranking (shut down or moved).
pub const ACTIVE_WITHIN_MS: i64 = 15 * 60 * 1000;

/// One guest with what the analysis made of it.
#[derive(Debug, Clone, Serialize)]
pub struct AnalysedGuest {
    pub id: GuestId,
    pub name: String,
    pub uuid: Option<String>,
    pub host: String,
    pub host_id: HostId,
    pub hypervisor: String,
    pub management: Option<String>,
    pub vcpus: u32,
    pub pid: i64,
    pub boot_args: Option<String>,
    /// Whether it runs on KVM (false: another accelerator, such as QEMU's TCG), when known.
    pub uses_kvm: Option<bool>,
    /// What its VM's configuration says of its Hyper-V enlightenments, HPET and OS.
    pub setup: VmSetup,
    /// Who it is on its platform (OpenStack, Proxmox VE, KubeVirt), when its agent could tell.
    pub platform: Option<Platform>,
    /// Where the agent read its CPU time (`cgroup`, `schedstat`, `stat_ticks`), when it said.
    pub cpu_source: Option<String>,
    pub last_seen_ms: i64,
    /// How many report intervals the figures average over.
    pub intervals: i64,
    pub window_s: f64,
    /// When the analysis ran (server clock): the figures are as of then. Not serialised with
    /// the rest: two analyses of the same stored data conclude the same whenever they ran.
    #[serde(skip)]
    pub analysed_ms: i64,
    /// What the guest reported about its kernel, from its best source.
    pub kernel: Option<KernelFacts>,
    pub verdict: Verdict,
    /// Its VM process's running totals as its agent last reported them, if it sends them.
    pub process_totals: Option<ProcessTotals>,
}

#[cfg(test)]
impl AnalysedGuest {
    /// A guest for tests: `window` analysed alone, on host "hv" (id 1), under QEMU; the rest
    /// plain, for a test to set what it is about (`AnalysedGuest { name, ..example(..) }`).
    pub(crate) fn example(id: i64, window: &crate::analysis::Window) -> AnalysedGuest {
        let verdict = crate::analysis::analyse_host(std::slice::from_ref(window)).remove(0);
        AnalysedGuest {
            id: GuestId(id),
            name: format!("guest-{id}"),
            uuid: None,
            host: "hv".into(),
            host_id: HostId(1),
            hypervisor: "qemu".into(),
            management: None,
            vcpus: window.vcpus,
            pid: 1000 + id,
            boot_args: window.boot_args.clone(),
            uses_kvm: window.uses_kvm,
            setup: window.setup.clone(),
            platform: None,
            cpu_source: None,
            last_seen_ms: 0,
            intervals: 6,
            window_s: 60.0,
            analysed_ms: 0,
            kernel: None,
            verdict,
            process_totals: None,
        }
    }
}

impl AnalysedGuest {
    pub fn wasted_cpu_pct(&self) -> f64 {
        self.verdict.waste.wasted_cpu_pct
    }

    /// Its OS, from its own facts first, then its manager's word.
    pub fn os(&self) -> GuestOs {
        guest_os(self.kernel.as_ref(), self.setup.os_hint.as_deref())
    }

    /// What it is and why it wastes, as labels where something tells it: its OS, the cause it
    /// is filed under, its platform's kind and names. Alert labels and `/metrics` alike; no
    /// value empty.
    pub fn about_labels(&self) -> Vec<(&'static str, &str)> {
        let mut labels = Vec::new();
        let os = self.os().family;
        if os != OsFamily::Unknown {
            labels.push(("os", os.as_str()));
        }
        if let Some(cause) = self.verdict.cause {
            labels.push(("cause", cause.as_str()));
        }
        if let Some(p) = &self.platform {
            for (name, value) in [
                ("platform", Some(&p.kind)),
                ("platform_name", p.name.as_ref()),
                ("platform_group", p.group.as_ref()),
                ("platform_id", p.id.as_ref()),
            ] {
                if let Some(value) = value.filter(|v| !v.is_empty()) {
                    labels.push((name, value.as_str()));
                }
            }
        }
        labels
    }

    /// Where the lookback window its verdict was judged over starts: the analysis window up to
    /// its last report (which ends it).
    pub fn window_start_ms(&self) -> i64 {
        self.last_seen_ms - ANALYSIS_WINDOW_MS
    }
}

/// Facts older than this are not used: the probe delivers every minute and guest agents are
/// asked every 10 minutes (an hour at most when they do not answer).
pub const FACTS_MAX_AGE_MS: i64 = 2 * 60 * 60 * 1000;

/// Preference among sources: the probe knows everything, guest agents only the release.
pub(crate) fn source_rank(source: &str) -> u8 {
    match FactsSource::from_name(source) {
        FactsSource::ProbeChannel | FactsSource::ProbeDirect => 3,
        FactsSource::QemuGuestAgent => 2,
        FactsSource::VirtualboxProperties => 1,
        FactsSource::Other => 0,
    }
}

/// One guest's facts at `now_ms` from candidates (source, received ms, facts): its best fresh
/// source; but when a newer source reports another kernel release, the guest was upgraded since
/// the better source last spoke, and the newer one wins. Candidates older than
/// `FACTS_MAX_AGE_MS` are not used.
pub(crate) fn choose_facts<'a>(
    candidates: impl Iterator<Item = (&'a str, i64, &'a GuestFacts)>,
    now_ms: i64,
) -> Option<KernelFacts> {
    let fresh: Vec<(&str, i64, &GuestFacts)> = candidates
        .filter(|(_, received_ms, _)| now_ms - received_ms <= FACTS_MAX_AGE_MS)
        .collect();
    let best = fresh
        .iter()
        .max_by_key(|(source, received_ms, _)| (source_rank(source), *received_ms))?;
    let upgraded = fresh
        .iter()
        .filter(|(_, received_ms, facts)| {
            *received_ms > best.1
                && facts.kernel_release.is_some()
                && best.2.kernel_release.is_some()
                && facts.kernel_release != best.2.kernel_release
        })
        .max_by_key(|(_, received_ms, _)| *received_ms);
    let (source, received_ms, facts) = upgraded.unwrap_or(best);
    let age_s = (now_ms - received_ms).max(0) as f64 / 1000.0;
    Some(KernelFacts::new(facts, source, age_s))
}

pub(crate) fn reading(r: &IdleReading) -> idle::Reading {
    idle::Reading {
        received_ms: r.received_ms,
        measured_ms: r.measured_ms,
        idle_fraction: r.idle_fraction,
    }
}

/// A guest's samples as intervals, each with the guest's own idle reading for that time.
pub(crate) fn intervals(samples: &[IntervalRow], readings: &[idle::Reading]) -> Vec<Interval> {
    samples
        .iter()
        .map(|s| Interval {
            length_s: s.length_ms / 1000.0,
            vcpus: s.vcpus,
            host_cpu_s: s.host_cpu_s,
            wakeups: u64::try_from(s.vcpu_wakeups).unwrap_or(0),
            guest_idle_fraction: idle::reading_for(readings, s.received_ms, s.length_ms),
            parts: s.parts.map(|p| Parts {
                vcpus_s: f64::from(p.vcpus_s),
                iothreads_s: f64::from(p.iothreads_s),
                vhost_s: f64::from(p.vhost_s),
            }),
            halt_poll_s: s.halt_poll_s.map(f64::from),
        })
        .collect()
}

/// Orders guests most wasteful first; ties by host CPU, then name.
pub fn rank(guests: &mut [Arc<AnalysedGuest>]) {
    guests.sort_by(|a, b| rank_order(a, b));
}

/// The ranking's order of two guests (see [`rank`]).
pub fn rank_order(a: &AnalysedGuest, b: &AnalysedGuest) -> std::cmp::Ordering {
    let cpu = |g: &AnalysedGuest| g.verdict.rates.map_or(0.0, |r| r.host_cpu_pct);
    b.wasted_cpu_pct()
        .total_cmp(&a.wasted_cpu_pct())
        .then_with(|| cpu(b).total_cmp(&cpu(a)))
        .then_with(|| a.name.cmp(&b.name))
}
