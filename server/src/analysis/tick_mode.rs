//! How a guest's timer tick behaves, judged from the host side.
//!
//! An idle vCPU that ticks periodically is woken by its timer interrupt HZ times a second
//! (100, 250, 300 or 1000); a tickless (NO_HZ) idle vCPU only when there is work, typically a few
//! to a few dozen times a second. On this project's reference machine (docs/measurements.md), idle
//! tickless guests woke 10-41 times per vCPU per second and a `nohz=off` 250 Hz guest 560-750;
//! under KVM each tick is roughly one wake-up, under TCG two or three. A vCPU thread that is busy
//! most of the time is either doing work or polling instead of halting (`idle=poll`,
//! haltpoll), which the host alone cannot tell apart.

use serde::Serialize;

use tickscope_wire::Hypervisor;

use super::boot_args;
use super::kernel::{KernelFacts, NohzBuilt};
use super::window::{Rates, Span, Window};

/// Per-vCPU host CPU above which a guest is busy (or polling), not idle, in % of a core.
pub const BUSY_CPU_PCT_PER_VCPU: f64 = 50.0;
/// Wake-ups per vCPU per second from which an idle guest is taken to tick periodically: just
/// under the lowest common CONFIG_HZ (100), and more than twice what idle tickless guests showed.
pub const PERIODIC_MIN_WAKEUPS_PER_VCPU_S: f64 = 90.0;
/// Windows shorter than this are too short to judge, in seconds.
pub const MIN_WINDOW_S: f64 = 2.0;
/// CONFIG_HZ values Linux offers on x86 and most architectures.
pub const KERNEL_HZ_VALUES: [u32; 4] = [100, 250, 300, 1000];
/// How close a rate must be to a HZ value to be read as that HZ, as a fraction: for a tick rate
/// the guest measured itself, and for a host-side rate under an accelerator that wakes a vCPU
/// thread once per tick.
const HZ_MATCH_TOLERANCE: f64 = 0.12;

/// The accelerator that ran a VM's vCPUs, as far as the host-side figures are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accelerator {
    /// QEMU's TCG: an emulated vCPU thread wakes several times per guest tick.
    Tcg,
    /// KVM: a halted vCPU is woken once per tick.
    Kvm,
}

impl Accelerator {
    /// What ran a window's vCPUs, when the agent could tell (a KVM VM descriptor held by the
    /// process, or vCPU threads named `CPU n/KVM` or `CPU n/TCG`).
    pub fn of(window: &Window) -> Option<Accelerator> {
        match (window.hypervisor, window.uses_kvm) {
            (Hypervisor::Qemu, Some(false)) => Some(Accelerator::Tcg),
            (_, Some(true)) => Some(Accelerator::Kvm),
            _ => None,
        }
    }

    /// Host-side vCPU wake-ups per guest tick, lowest and highest, as measured on real idle
    /// periodic guests (docs/calibration.md); `None` where it has not been measured.
    pub fn wakeups_per_tick(self) -> Option<(f64, f64)> {
        match self {
            // A 1000 Hz CONFIG_HZ_PERIODIC kernel and Debian's 250 Hz kernel with `nohz=off`,
            // 1 and 2 vCPUs, alone and beside other guests, under qemu-system-x86_64 7.2 -accel
            // tcg: 56 rounds of 15 s, 1.37-3.43 (most of the spread is preemptions); then a
            // 2-vCPU 1000 Hz guest on a loaded host at 1.02 (docs/calibration.md).
            Accelerator::Tcg => Some(TCG_WAKEUPS_PER_TICK),
            // Expected near one, but no KVM host was at hand to measure it on: no estimate
            // rather than an unmeasured one.
            Accelerator::Kvm => None,
        }
    }
}

/// Host-side vCPU wake-ups per guest tick under TCG: from one (a tick wakes its vCPU once, and a
/// 2-vCPU 1000 Hz guest on a loaded host was seen at 1.02, below the 1.37 of the first 56
/// rounds) to the highest seen (3.43), rounded outwards. A band that misses a real guest's
/// ratio gives a wrong HZ (that guest read as 300 Hz); a wide one gives none more often.
pub const TCG_WAKEUPS_PER_TICK: (f64, f64) = (1.0, 3.45);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TickMode {
    Tickless,
    Periodic,
    Polling,
    Busy,
    Unknown,
}

impl TickMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TickMode::Tickless => "tickless",
            TickMode::Periodic => "periodic",
            TickMode::Polling => "polling",
            TickMode::Busy => "busy",
            TickMode::Unknown => "unknown",
        }
    }

    /// Idle but costing host CPU because of how it waits: what tickscope hunts.
    pub fn is_wasteful(self) -> bool {
        matches!(self, TickMode::Periodic | TickMode::Polling)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    pub mode: TickMode,
    /// The tick rate, when the wake-up rate sits on a CONFIG_HZ value.
    pub estimated_hz: Option<u32>,
    pub confidence: Confidence,
    /// Sentences that say what the verdict rests on, with the numbers.
    pub evidence: Vec<String>,
}

/// Guest-reported idle fraction below which the guest is working, not idling.
pub const GUEST_BUSY_BELOW_IDLE_FRACTION: f64 = 0.5;
/// Guest-reported idle fraction above which a vCPU running flat out is polling.
pub const GUEST_IDLE_ABOVE_FRACTION: f64 = 0.9;

/// Classifies a guest from `measured` (its idle intervals, or all of them): from what the guest
/// reported about itself when it did, and from the host-side rates otherwise. `reported_idle` is
/// the guest's own idle fraction over the same intervals; without it, its newest facts' one.
pub fn classify(window: &Window, measured: &Span, reported_idle: Option<f64>) -> Classification {
    let rates = measured.rates();
    let from_host = classify_from_host(window, measured, rates.as_ref());
    match window.facts.as_ref() {
        Some(facts) => {
            let idle = reported_idle.or(facts.idle_fraction);
            classify_from_facts(facts, idle, rates.as_ref(), from_host)
        }
        None => from_host,
    }
}

/// Guest facts win over host-side inference; the host's view stays in the evidence, and where
/// the two disagree, that is said.
fn classify_from_facts(
    k: &KernelFacts,
    idle_fraction: Option<f64>,
    rates: Option<&Rates>,
    from_host: Classification,
) -> Classification {
    let mut evidence = Vec::new();
    let mut verdict = None;
    if let Some(idle) = idle_fraction {
        if idle < GUEST_BUSY_BELOW_IDLE_FRACTION {
            evidence.push(format!(
                "The guest reports it was idle only {:.0} % of the time: it is working, not idling.",
                idle * 100.0
            ));
            verdict = Some((TickMode::Busy, Confidence::High));
        } else if idle >= GUEST_IDLE_ABOVE_FRACTION
            && rates.is_some_and(|r| r.cpu_pct_per_vcpu >= BUSY_CPU_PCT_PER_VCPU)
        {
            let how = if k.has_param("idle", "poll") {
                "`idle=poll` is on its command line"
            } else if k.cpuidle_driver.as_deref() == Some("haltpoll") {
                "its cpuidle driver is haltpoll"
            } else {
                "neither idle=poll nor haltpoll is reported, so look for another poller"
            };
            evidence.push(format!(
                "The guest reports it was idle {:.0} % of the time while its vCPUs ran {:.0} % of a core each: idle vCPUs spin instead of halting ({how}).",
                idle * 100.0,
                rates.map_or(0.0, |r| r.cpu_pct_per_vcpu)
            ));
            verdict = Some((TickMode::Polling, Confidence::High));
        }
    }
    let config = match (k.config_hz, k.nohz) {
        (Some(hz), nohz) => format!("CONFIG_HZ={hz}, {}", nohz.config_name()),
        (None, nohz) => nohz.config_name().to_string(),
    };
    let measured = k.measured_hz.map_or(String::new(), |hz| {
        format!("HZ {hz:.0} measured in guest; ")
    });
    if verdict.is_none() {
        let nohz_off = k.has_param("nohz", "off");
        verdict = match (k.dynticks_active, k.nohz.can_stop_the_tick(), nohz_off) {
            (Some(false), _, _) => {
                let why = if nohz_off {
                    format!("{measured}{config} built in but `nohz=off` on the command line")
                } else if k.nohz == NohzBuilt::None {
                    format!("{measured}built without NO_HZ ({config})")
                } else if k.built_without_nohz() {
                    format!(
                        "{measured}no `nohz=off` on the command line, so a kernel built without NO_HZ ({config})"
                    )
                } else {
                    format!("{measured}{config}")
                };
                evidence.push(format!(
                    "{why}; the kernel reports the tick running on every CPU (dynticks off in /proc/timer_list)."
                ));
                Some((TickMode::Periodic, Confidence::High))
            }
            (Some(true), _, _) => {
                evidence.push(format!(
                    "{measured}{config}; the kernel reports dynticks active (/proc/timer_list): the tick stops on idle CPUs."
                ));
                Some((TickMode::Tickless, Confidence::High))
            }
            (None, Some(false), _) => {
                evidence.push(format!(
                    "{measured}built without NO_HZ ({config}): this kernel ticks periodically whatever its command line says."
                ));
                Some((TickMode::Periodic, Confidence::High))
            }
            (None, Some(true), true) => {
                evidence.push(format!(
                    "{measured}{config} built in but `nohz=off` on the command line."
                ));
                Some((TickMode::Periodic, Confidence::High))
            }
            (None, Some(true), false) => {
                evidence.push(format!(
                    "{measured}{config} built in and no `nohz=off`: the tick should stop when idle (the probe could not read /proc/timer_list to confirm)."
                ));
                Some((TickMode::Tickless, Confidence::Medium))
            }
            (None, None, _) => None,
        };
    }
    let Some((mode, confidence)) = verdict else {
        return from_host; // the facts say nothing about the tick
    };
    let mut evidence: Vec<String> = evidence.into_iter().map(capitalised).collect();
    evidence.push(format!(
        "Guest facts from {}, {:.0} s old.",
        k.source, k.age_s
    ));
    if from_host.mode != mode && from_host.mode != TickMode::Unknown {
        evidence.push(format!(
            "The host-side counters alone suggested {}; the guest's own facts win.",
            from_host.mode.as_str()
        ));
    }
    evidence.extend(from_host.evidence.into_iter().take(1));
    // The kernel's own CONFIG_HZ; else the tick rate the guest measured, when it sits on a
    // value CONFIG_HZ can have.
    let estimated_hz = match mode {
        TickMode::Periodic => k.config_hz.or_else(|| k.measured_hz.and_then(estimate_hz)),
        _ => None,
    };
    Classification {
        mode,
        estimated_hz,
        confidence,
        evidence,
    }
}

fn classify_from_host(window: &Window, measured: &Span, rates: Option<&Rates>) -> Classification {
    let Some(rates) = rates.filter(|_| measured.length_s >= MIN_WINDOW_S) else {
        return Classification {
            mode: TickMode::Unknown,
            estimated_hz: None,
            confidence: Confidence::Low,
            evidence: vec![format!(
                "Not enough measured time yet ({:.1} s; at least {MIN_WINDOW_S} s needed).",
                measured.length_s
            )],
        };
    };
    let mut evidence = vec![format!(
        "Host CPU {:.2} % of a core over {} vCPU(s) ({:.2} % per vCPU); {:.0} wake-ups per vCPU per second, measured over {:.0} s.",
        rates.host_cpu_pct,
        window.vcpus,
        rates.cpu_pct_per_vcpu,
        rates.wakeups_per_vcpu_s,
        measured.length_s
    )];
    if !window.wakeups_from_vcpu_threads {
        evidence.push(
            "No vCPU threads could be told apart in this VM's process, so wake-ups were counted over all its threads: the per-vCPU figure is an upper bound."
                .into(),
        );
    }
    let args = window.boot_args.as_deref();
    let idle_poll = boot_args::has(args, "idle", "poll");
    let nohz_off = boot_args::has(args, "nohz", "off");
    // Confidence that rests on a rate alone is at most medium, and low when the rate is an upper
    // bound; the command line the host sees can confirm it.
    let rate_confidence = |clear: bool| match (window.wakeups_from_vcpu_threads, clear) {
        (true, true) => Confidence::Medium,
        _ => Confidence::Low,
    };

    let (mode, confidence) = if rates.cpu_pct_per_vcpu >= BUSY_CPU_PCT_PER_VCPU {
        if idle_poll {
            evidence.push(format!(
                "vCPUs run {:.0} % of the time and the kernel command line has `idle=poll`: idle vCPUs spin instead of halting.",
                rates.cpu_pct_per_vcpu
            ));
            (TickMode::Polling, Confidence::High)
        } else {
            evidence.push(format!(
                "vCPUs run {:.0} % of the time (busy from {BUSY_CPU_PCT_PER_VCPU} %). From the host this cannot be told apart from an idle guest that polls (`idle=poll`, cpuidle-haltpoll): the guest's own idle time will tell.",
                rates.cpu_pct_per_vcpu
            ));
            (TickMode::Busy, Confidence::Low)
        }
    } else if rates.wakeups_per_vcpu_s >= PERIODIC_MIN_WAKEUPS_PER_VCPU_S {
        evidence.push(format!(
            "{:.0} wake-ups per vCPU per second is at or above {PERIODIC_MIN_WAKEUPS_PER_VCPU_S}, the rate of a periodic tick (CONFIG_HZ 100-1000); idle tickless guests wake far less often.",
            rates.wakeups_per_vcpu_s
        ));
        if nohz_off {
            evidence.push("The kernel command line has `nohz=off`, which keeps the tick running on idle CPUs.".into());
            (TickMode::Periodic, Confidence::High)
        } else {
            evidence.push("From the host alone, a busy user space in a tickless guest could also wake vCPUs this often.".into());
            (
                TickMode::Periodic,
                rate_confidence(rates.wakeups_per_vcpu_s >= 2.0 * PERIODIC_MIN_WAKEUPS_PER_VCPU_S),
            )
        }
    } else {
        evidence.push(format!(
            "{:.0} wake-ups per vCPU per second is below {PERIODIC_MIN_WAKEUPS_PER_VCPU_S}: the tick stops when the vCPUs are idle.",
            rates.wakeups_per_vcpu_s
        ));
        (
            TickMode::Tickless,
            rate_confidence(rates.wakeups_per_vcpu_s <= PERIODIC_MIN_WAKEUPS_PER_VCPU_S / 2.0),
        )
    };
    let accelerator = Accelerator::of(window);
    let estimated_hz = match (mode, accelerator) {
        // Without high-resolution timers a TCG vCPU wakes about once per tick instead of three
        // times (Debian's 250 Hz kernel with `highres=off`: 252-274 a second): the calibration
        // holds only for the default.
        (TickMode::Periodic, Some(accelerator))
            if !boot_args::has(window.cmdline(), "highres", "off") =>
        {
            hz_from_host_rate(rates.wakeups_per_vcpu_s, accelerator)
        }
        _ => None,
    };
    match (estimated_hz, accelerator) {
        (Some(hz), Some(accelerator)) => evidence.push(format!(
            "The wake-up rate matches CONFIG_HZ={hz} and no other value, at the {} wake-ups per tick measured under {}.",
            accelerator
                .wakeups_per_tick()
                .map_or(String::new(), |(low, high)| format!("{low}-{high}")),
            accelerator.name()
        )),
        (None, _) if mode == TickMode::Periodic => evidence.push(
            "The host-side rate alone does not tell this kernel's CONFIG_HZ (the accelerator is unknown, not calibrated, or the rate fits more than one value)."
                .into(),
        ),
        _ => {}
    }
    Classification {
        mode,
        estimated_hz,
        confidence,
        evidence,
    }
}

/// A sentence that starts with a capital letter, whatever piece of text came first.
fn capitalised(text: String) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => text,
    }
}

impl Accelerator {
    pub fn name(self) -> &'static str {
        match self {
            Accelerator::Tcg => "TCG",
            Accelerator::Kvm => "KVM",
        }
    }
}

/// The CONFIG_HZ value a tick rate (ticks per second) matches, if it sits within the tolerance
/// of one.
pub fn estimate_hz(ticks_per_s: f64) -> Option<u32> {
    KERNEL_HZ_VALUES
        .into_iter()
        .find(|&hz| (ticks_per_s - f64::from(hz)).abs() <= HZ_MATCH_TOLERANCE * f64::from(hz))
}

/// The CONFIG_HZ a host-side vCPU wake-up rate stands for under `accelerator`: the one value
/// whose tick, at the accelerator's measured wake-ups per tick, gives this rate. `None` when the
/// accelerator was not calibrated, or when no value or more than one fits (under TCG, 250 and
/// 300 Hz overlap for some rates).
pub fn hz_from_host_rate(wakeups_per_vcpu_s: f64, accelerator: Accelerator) -> Option<u32> {
    let (low, high) = accelerator.wakeups_per_tick()?;
    let mut fitting = KERNEL_HZ_VALUES.into_iter().filter(|&hz| {
        let hz = f64::from(hz);
        (hz * low..=hz * high).contains(&wakeups_per_vcpu_s)
    });
    match (fitting.next(), fitting.next()) {
        (Some(hz), None) => Some(hz),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::test_window as window;

    fn classify_window(w: &Window) -> Classification {
        classify(w, &w.total(), None)
    }

    /// Rows are the figures measured on real TCG guests (docs/measurements.md) and typical KVM ones.
    #[test]
    fn modes_from_measured_guests() {
        use Confidence::*;
        use TickMode::*;
        let cases = [
            // (vcpus, host CPU %, wake-ups/vCPU/s, boot args, mode, confidence, estimated Hz)
            (1, 0.3, 38.0, None, Tickless, Medium, None),
            (2, 0.2, 10.5, None, Tickless, Medium, None),
            (
                1,
                5.3,
                650.0,
                Some("console=ttyS0 nohz=off"),
                Periodic,
                High,
                None,
            ),
            (2, 8.6, 572.0, Some("nohz=off"), Periodic, High, None),
            (
                1,
                4.6,
                262.0,
                Some("nohz=off highres=off"),
                Periodic,
                High,
                None,
            ),
            (1, 99.3, 485.0, Some("idle=poll"), Polling, High, None),
            (1, 99.3, 485.0, None, Busy, Low, None),
            (4, 3.0, 1004.0, None, Periodic, Medium, None),
            (1, 1.0, 101.0, None, Periodic, Low, None),
            (1, 0.5, 60.0, None, Tickless, Low, None),
        ];
        for (vcpus, cpu, wakeups, args, mode, confidence, hz) in cases {
            let c = classify_window(&window(vcpus, cpu, wakeups, args));
            assert_eq!(
                (c.mode, c.confidence, c.estimated_hz),
                (mode, confidence, hz),
                "{vcpus} vCPU, {cpu} %, {wakeups}/s, {args:?}: {:?}",
                c.evidence
            );
            assert!(!c.evidence.is_empty());
        }
    }

    #[test]
    fn whole_process_counts_lower_the_confidence() {
        let mut w = window(1, 5.0, 700.0, None);
        w.wakeups_from_vcpu_threads = false;
        let c = classify_window(&w);
        assert_eq!(
            (c.mode, c.confidence),
            (TickMode::Periodic, Confidence::Low)
        );
        assert!(c.evidence.iter().any(|e| e.contains("upper bound")));
    }

    #[test]
    fn too_short_or_empty_windows_are_unknown() {
        let mut w = window(1, 5.0, 700.0, None);
        w.intervals.truncate(1);
        w.intervals[0].length_s = 1.0;
        assert_eq!(classify_window(&w).mode, TickMode::Unknown);
        let mut w = window(1, 5.0, 700.0, None);
        w.intervals.clear();
        assert_eq!(w.total().rates(), None);
        assert_eq!(classify_window(&w).mode, TickMode::Unknown);
    }

    #[test]
    fn host_side_rates_tell_hz_only_under_a_calibrated_accelerator_and_without_doubt() {
        use Accelerator::{Kvm, Tcg};
        // Rates from real idle periodic guests under TCG (docs/calibration.md).
        let cases = [
            (297.0, Tcg, None), // CONFIG_HZ=100 (docs/measurements.md), or 250 at 1.19 a tick
            (2_935.0, Tcg, Some(1000)), // CONFIG_HZ=1000, 1 vCPU
            (1_801.0, Tcg, Some(1000)), // CONFIG_HZ=1000, 2 vCPUs beside another guest
            (1_365.0, Tcg, Some(1000)), // a low 1000 Hz rate of the first rounds
            (1_211.0, Tcg, Some(1000)), // CONFIG_HZ=1000, 1 vCPU, on a loaded host
            (1_017.0, Tcg, None), // CONFIG_HZ=1000, 2 vCPUs, loaded: 300 Hz would fit
            (744.0, Tcg, None), // Debian's 250 Hz: 300 Hz would fit as well
            (487.0, Tcg, None), // the same, 2 vCPUs
            (110.0, Tcg, Some(100)), // only 100 Hz fits, at 1.1 a tick
            (80.0, Tcg, None),  // no value fits
            (1_004.0, Kvm, None), // not measured under KVM
        ];
        for (rate, accelerator, hz) in cases {
            assert_eq!(
                hz_from_host_rate(rate, accelerator),
                hz,
                "{rate} under {accelerator:?}"
            );
        }
    }

    #[test]
    fn a_tcg_guests_host_side_rate_gives_its_hz_and_says_on_what() {
        let mut w = window(1, 3.0, 2_935.0, None);
        w.uses_kvm = Some(false);
        let c = classify_window(&w);
        assert_eq!((c.mode, c.estimated_hz), (TickMode::Periodic, Some(1000)));
        assert!(
            c.evidence.iter().any(|e| e.contains("under TCG")),
            "{:#?}",
            c.evidence
        );
        // The same rate from a VM whose accelerator the agent could not tell: no figure.
        w.uses_kvm = None;
        let c = classify_window(&w);
        assert_eq!(c.estimated_hz, None);
        assert!(c.evidence.iter().any(|e| e.contains("does not tell")));
    }

    #[test]
    fn hz_is_estimated_only_near_a_kernel_hz_value() {
        for (rate, hz) in [
            (98.0, Some(100)),
            (250.0, Some(250)),
            (290.0, Some(300)),
            (1100.0, Some(1000)),
            (560.0, None),
            (180.0, None),
        ] {
            assert_eq!(estimate_hz(rate), hz, "{rate}");
        }
    }

    fn kernel(
        nohz: NohzBuilt,
        cmdline: &str,
        dynticks: Option<bool>,
        idle: Option<f64>,
    ) -> KernelFacts {
        KernelFacts {
            source: "probe_channel".into(),
            age_s: 3.0,
            kernel_release: Some("6.1.0-57-cloud-amd64".into()),
            distro: None,
            config_hz: Some(250),
            nohz,
            measured_hz: Some(250.4),
            dynticks_active: dynticks,
            cmdline: Some(cmdline.into()),
            idle_fraction: idle,
            clocksource: None,
            available_clocksources: vec![],
            cpuidle_driver: None,
            os_id: None,
            tick_device: None,
        }
    }

    /// Guest facts first: (host CPU %, wake-ups/vCPU/s, facts) → (mode, confidence).
    #[test]
    fn guest_facts_win_over_host_side_rates() {
        use Confidence::*;
        use NohzBuilt as N;
        use TickMode::*;
        let cases = [
            // nohz=off on a NO_HZ_FULL kernel, seen by the probe: periodic for certain.
            (
                5.3,
                650.0,
                kernel(N::Full, "quiet nohz=off", Some(false), Some(0.99)),
                Periodic,
                High,
            ),
            // The host's rate looks periodic, but the guest's kernel has dynticks active.
            (
                1.0,
                150.0,
                kernel(N::Idle, "quiet", Some(true), Some(0.98)),
                Tickless,
                High,
            ),
            // A kernel without NO_HZ cannot stop its tick.
            (
                4.0,
                1000.0,
                kernel(N::None, "quiet", None, None),
                Periodic,
                High,
            ),
            // NO_HZ built, no nohz=off, timer_list unreadable (no root): probably tickless.
            (
                0.3,
                40.0,
                kernel(N::Idle, "quiet", None, None),
                Tickless,
                Medium,
            ),
            // The guest says it is working: busy, whatever its tick.
            (
                80.0,
                300.0,
                kernel(N::Full, "quiet", Some(true), Some(0.2)),
                Busy,
                High,
            ),
            // Idle inside, flat out outside: polling.
            (
                99.0,
                485.0,
                kernel(N::Full, "idle=poll", Some(true), Some(0.99)),
                Polling,
                High,
            ),
        ];
        for (cpu, wakeups, k, mode, confidence) in cases {
            let mut w = window(1, cpu, wakeups, None);
            w.facts = Some(k.clone());
            let c = classify_window(&w);
            assert_eq!(
                (c.mode, c.confidence),
                (mode, confidence),
                "{k:?}: {:#?}",
                c.evidence
            );
        }
    }

    #[test]
    fn evidence_names_what_the_guest_reported() {
        let mut w = window(1, 5.3, 650.0, None);
        w.facts = Some(kernel(NohzBuilt::Full, "quiet nohz=off", Some(false), None));
        let c = classify_window(&w);
        assert!(
            c.evidence[0].starts_with("HZ 250 measured in guest; CONFIG_HZ=250, NO_HZ_FULL built in but `nohz=off` on the command line"),
            "{:#?}",
            c.evidence
        );
        assert_eq!(c.estimated_hz, Some(250));
        let mut w = window(1, 1.0, 150.0, None);
        w.facts = Some(kernel(NohzBuilt::Idle, "quiet", Some(true), None));
        let c = classify_window(&w);
        assert!(
            c.evidence
                .iter()
                .any(|e| e.contains("host-side counters alone suggested periodic"))
        );
    }

    #[test]
    fn evidence_sentences_start_with_a_capital() {
        let mut w = window(1, 4.0, 1000.0, None);
        let mut k = kernel(NohzBuilt::None, "quiet", None, None);
        k.measured_hz = None;
        w.facts = Some(k);
        let c = classify_window(&w);
        assert!(
            c.evidence[0].starts_with("Built without NO_HZ (CONFIG_HZ=250"),
            "{:?}",
            c.evidence
        );
    }

    #[test]
    fn facts_that_say_nothing_about_the_tick_leave_the_host_verdict() {
        let mut w = window(1, 5.3, 650.0, None);
        w.facts = Some(kernel(NohzBuilt::Unknown, "quiet", None, None));
        let c = classify_window(&w);
        assert_eq!(
            (c.mode, c.confidence),
            (TickMode::Periodic, Confidence::Medium)
        );
    }
}
