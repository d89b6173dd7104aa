//! The rules whose cause is the VM's platform rather than the guest's tick: Windows without
//! Hyper-V's synthetic timers or holding a 1 ms timer, a tick driven by an emulated timer, an
//! HPET the guest keeps time or ticks with. Each is a pure function of what was measured, like
//! the rules of [`super::suggest`], which lists them in its table with the guests they speak to.

use super::boot_args;
use super::cause::Cause;
use super::change_kind::ChangeKind;
use super::platform::HYPERV_TIMER_SET;
use super::suggestion::{Input, Suggestion};
use super::tick_mode::{Confidence, TickMode};
use super::window::Rates;

/// A Windows guest idles at this multiple of its host's tickless cost per vCPU or more before
/// its timers are blamed: below it, nothing is left to save.
pub const WINDOWS_MIN_TIMES_BASELINE: f64 = 2.0;
/// Windows ticks 64 times a second unless a program asks for more (`timeBeginPeriod`).
pub const WINDOWS_DEFAULT_TICKS_PER_S: f64 = 64.0;
/// Wake-ups per vCPU per second from which a Windows guest runs a 1 ms timer (about 1,000 a
/// second; 500 leaves room for a 2 ms one and for uneven intervals).
pub const WINDOWS_FAST_TIMER_WAKEUPS_PER_VCPU_S: f64 = 500.0;

/// What an idle guest costs above its host's tickless baseline, in % of a core over all the
/// measured time, with its idle rates; `None` for a guest that is busy, unmeasured or not idle
/// often enough for its idle cost to matter.
fn idle_cost_over_baseline<'a>(input: &Input<'a>) -> Option<(f64, &'a Rates)> {
    let rates = input.rates?;
    let idle_share = input.mostly_idle_share()?;
    let baseline = input.waste.baseline.cpu_pct_per_vcpu;
    let above = (rates.cpu_pct_per_vcpu - baseline).max(0.0) * f64::from(input.window.vcpus);
    Some((above * idle_share, rates))
}

/// [`idle_cost_over_baseline`] for a guest that costs at least [`WINDOWS_MIN_TIMES_BASELINE`]
/// times the baseline per vCPU while idle.
fn idle_cost_above_baseline<'a>(input: &Input<'a>) -> Option<(f64, &'a Rates)> {
    let (above, rates) = idle_cost_over_baseline(input)?;
    let baseline = input.waste.baseline.cpu_pct_per_vcpu;
    (rates.cpu_pct_per_vcpu >= WINDOWS_MIN_TIMES_BASELINE * baseline).then_some((above, rates))
}

/// Without `hv-stimer`, Windows falls back to an emulated HPET or RTC for its timers, with
/// "significant CPU consumption, even when virtual CPU is idle" (QEMU's
/// docs/system/i386/hyperv.rst); admins report 30-40 % of a core falling to 1-3 %.
pub fn hyperv_timers(input: &Input) -> Option<Suggestion> {
    let setup = &input.window.setup;
    if setup.has_stimer() != Some(false) {
        return None;
    }
    let (saving, rates) = idle_cost_above_baseline(input)?;
    let missing = setup.missing_hyperv();
    let qemu: Vec<String> = HYPERV_TIMER_SET
        .iter()
        .map(|f| match *f {
            "spinlocks" => "hv-spinlocks=0x1fff".to_string(),
            f => format!("hv-{f}"),
        })
        .collect();
    // libvirt spells `hv-time` as the hypervclock timer, not a <hyperv> feature.
    let libvirt: String = HYPERV_TIMER_SET
        .iter()
        .filter(|f| **f != "time")
        .map(|f| match *f {
            "spinlocks" => "<spinlocks state='on' retries='8191'/>".to_string(),
            f => format!("<{f} state='on'/>"),
        })
        .collect();
    let hpet = if setup.hpet == Some(true) {
        " and <timer name='hpet' present='no'/>"
    } else {
        ""
    };
    let has = setup.hyperv.as_deref().unwrap_or_default();
    Some(Suggestion {
        rule: "hyperv_timers",
        cause: Cause::WindowsTimers,
        kind: ChangeKind::VmConfig,
        title: "Give this Windows guest Hyper-V's synthetic timers",
        change: format!(
            "Add the Hyper-V enlightenments it lacks ({}), then restart the VM. QEMU: `-cpu <model>,{}`. libvirt (`virsh edit`): `<features><hyperv mode='custom'>{libvirt}</hyperv></features>`, and in `<clock>` `<timer name='hypervclock' present='yes'/>`{hpet}. Proxmox VE: set its OS type to its Windows version (`qm set <vmid> --ostype win11`, or `win10`, ...), for which Proxmox adds the Hyper-V flags, `hv_stimer` among them.",
            missing.join(", "),
            qemu.join(",")
        ),
        why: format!(
            "Windows without `hv-stimer` runs its timers on an emulated HPET or RTC, and every timer it programs traps to the hypervisor: idle, each vCPU costs the host {:.2} % of a core. The VM has {}; `hv-stimer` needs `hv-synic`, `hv-vpindex` and `hv-time` (QEMU's Hyper-V documentation).",
            rates.cpu_pct_per_vcpu,
            if has.is_empty() {
                "no Hyper-V enlightenment".to_string()
            } else {
                format!("only {}", has.join(", "))
            }
        ),
        confidence: Confidence::Medium,
        saving_cpu_pct: Some(saving),
    })
}

/// With synthetic timers, an idle Windows guest still wakes about 1,000 times a second per vCPU
/// while a program holds a 1 ms timer resolution (`timeBeginPeriod(1)`): only Windows can say
/// which program.
pub fn windows_timer_resolution(input: &Input) -> Option<Suggestion> {
    if input.window.setup.has_stimer() == Some(false) {
        return None; // the timers themselves come first
    }
    let (above, rates) = idle_cost_above_baseline(input)?;
    if rates.wakeups_per_vcpu_s < WINDOWS_FAST_TIMER_WAKEUPS_PER_VCPU_S {
        return None;
    }
    Some(Suggestion {
        rule: "windows_timer_resolution",
        cause: Cause::GuestPrograms,
        kind: ChangeKind::Investigate,
        title: "Find the Windows program holding a 1 ms timer",
        change: "In the guest, from an administrator prompt: `powercfg /energy /duration 60`, then open energy-report.html. Under \"Platform Timer Resolution: Outstanding Timer Request\" it names each program that asked for a faster timer; stop or reconfigure it (media players, browsers and some agents ask for 1 ms).".into(),
        why: format!(
            "Its vCPUs wake {:.0} times a second each while the guest is idle, where Windows ticks {WINDOWS_DEFAULT_TICKS_PER_S:.0} times a second unless a program raises its timer resolution.",
            rates.wakeups_per_vcpu_s
        ),
        confidence: Confidence::Medium,
        // The wake-ups above Windows' own 64 a second are the program's.
        saving_cpu_pct: Some(above * (1.0 - WINDOWS_DEFAULT_TICKS_PER_S / rates.wakeups_per_vcpu_s)),
    })
}

/// Boot parameters that keep Linux off its local APIC timer.
const NO_LAPIC_TIMER_PARAMS: [&str; 3] = ["nolapic_timer", "nolapic", "disableapic"];

/// A Linux guest whose tick runs on the emulated PIT or HPET: each programming of the timer
/// traps to the hypervisor, and even with dynticks the PIT cannot stop the tick for long (its
/// 16-bit counter holds some 27 ms), so an idle vCPU still wakes often. Measured here under
/// TCG: `nolapic_timer` on a machine without HPET, 156 wake-ups a second and twice a tickless
/// guest's host CPU.
pub fn emulated_tick_device(input: &Input) -> Option<Suggestion> {
    let k = input.window.facts.as_ref()?;
    let device = k.emulated_tick_device()?;
    let (above, rates) = idle_cost_over_baseline(input)?;
    if input.classification.mode != TickMode::Periodic
        && rates.wakeups_per_vcpu_s < super::tick_mode::PERIODIC_MIN_WAKEUPS_PER_VCPU_S
    {
        return None;
    }
    // A periodic guest's waste is already measured; a dyntick one's is what it costs above
    // the host's tickless guests.
    let saving = if input.waste.wasted_cpu_pct > 0.0 {
        input.waste.wasted_cpu_pct
    } else {
        above
    };
    let cmdline = input.window.cmdline();
    let set: Vec<&str> = NO_LAPIC_TIMER_PARAMS
        .into_iter()
        .filter(|p| boot_args::param(cmdline.unwrap_or(""), p).is_some())
        .collect();
    let why = format!(
        "The guest's tick runs on the `{device}` clock event device, which the hypervisor emulates: every time the guest programs it, it traps, and its vCPUs wake about {:.0} times a second each while idle. On its local APIC timer the tick would stop for as long as the guest idles.",
        rates.wakeups_per_vcpu_s
    );
    Some(if set.is_empty() {
        Suggestion {
            rule: "emulated_tick_device",
            cause: Cause::EmulatedTimer,
            kind: ChangeKind::Investigate,
            title: "Move the guest's tick to its local APIC timer",
            change: "In the guest, run `dmesg | grep -i -e apic -e clockevent` and `grep -e 'Clock Event Device' -e 'Per CPU' /proc/timer_list`: find why the local APIC timer is not used (a boot parameter, a kernel built without it, a CPU model that hides it) and undo it.".into(),
            why,
            confidence: Confidence::Medium,
            saving_cpu_pct: Some(saving),
        }
    } else {
        Suggestion {
            rule: "emulated_tick_device",
            cause: Cause::EmulatedTimer,
            kind: ChangeKind::BootParameter,
            title: "Move the guest's tick to its local APIC timer",
            change: format!(
                "Remove `{}` from the guest kernel command line and reboot: the guest then ticks on its local APIC timer, which stops when idle.",
                set.join("` and `")
            ),
            why,
            confidence: Confidence::High,
            saving_cpu_pct: Some(saving),
        }
    })
}

/// A Linux guest that ticks with the VM's emulated HPET, or keeps time with it for want of
/// kvm-clock (where kvm-clock is there, `paravirt_clocksource` says to use it): without an HPET
/// it uses the local APIC timer and the TSC.
pub fn disable_hpet(input: &Input) -> Option<Suggestion> {
    if input.window.setup.hpet != Some(true) {
        return None;
    }
    let k = input.window.facts.as_ref()?;
    let ticks_on_hpet = k
        .tick_device
        .as_deref()
        .is_some_and(|d| d.starts_with("hpet"));
    let reads_hpet = k.clocksource.as_deref() == Some("hpet")
        && !k.available_clocksources.iter().any(|c| c == "kvm-clock");
    if !(ticks_on_hpet || reads_hpet) {
        return None;
    }
    let used_for = if ticks_on_hpet {
        "ticks on"
    } else {
        "keeps time with"
    };
    Some(Suggestion {
        rule: "disable_hpet",
        cause: Cause::EmulatedTimer,
        kind: ChangeKind::VmConfig,
        title: "Remove the VM's emulated HPET",
        change: "Take the HPET out of the VM and restart it. QEMU: `-machine <type>,hpet=off` (`-no-hpet` before QEMU 5.1). libvirt (`virsh edit`): `<timer name='hpet' present='no'/>` in `<clock>`. Proxmox VE has no setting for it: `args: -machine hpet=off` in /etc/pve/qemu-server/<vmid>.conf (QEMU merges it with Proxmox's own `-machine`).".into(),
        why: format!(
            "The guest {used_for} the VM's HPET, which the hypervisor emulates: every access traps. Without it the guest uses its local APIC timer and the TSC (an idle guest went from about 9 % to 0.6 % of a core with `hpet=off`, systemd/mkosi#3811)."
        ),
        confidence: Confidence::Medium,
        saving_cpu_pct: ticks_on_hpet
            .then(|| {
                let (above, _) = idle_cost_over_baseline(input)?;
                Some(input.waste.wasted_cpu_pct.max(above))
            })
            .flatten(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::cause::Cause;
    use crate::analysis::kernel::KernelFacts;
    use crate::analysis::platform::VmSetup;
    use crate::analysis::{Window, analyse_host, test_window};
    use tickscope_wire::GuestFacts;

    /// Rules that change a Linux kernel or its boot line: never for a Windows guest.
    const LINUX_ONLY: [&str; 11] = [
        "remove_idle_poll",
        "tune_haltpoll",
        "emulated_tick_device",
        "remove_nohz_off",
        "upgrade_pre_nohz_kernel",
        "rhel5_divider",
        "check_guest_kernel",
        "paravirt_clocksource",
        "disable_hpet",
        "find_user_space_wakeups",
        "busy_or_polling",
    ];

    fn rules(window: Window) -> Vec<(&'static str, ChangeKind)> {
        analyse_host(std::slice::from_ref(&window))
            .remove(0)
            .suggestions
            .into_iter()
            .map(|s| (s.rule, s.kind))
            .collect()
    }

    /// Facts of a guest: as qemu-guest-agent gives a Windows guest's (`os_id` "mswindows"), or
    /// as the probe gives a Linux one's, with its tick device and clocksources.
    fn facts(
        source: &str,
        os_id: Option<&str>,
        tick_device: Option<&str>,
        clocksource: Option<&str>,
        available: &[&str],
        cmdline: Option<&str>,
    ) -> KernelFacts {
        let facts = GuestFacts {
            distro_id: os_id.map(str::to_string),
            tick_device: tick_device.map(str::to_string),
            clocksource: clocksource.map(str::to_string),
            available_clocksources: Some(available.iter().map(|c| c.to_string()).collect()),
            cmdline: cmdline.map(str::to_string),
            ..GuestFacts::default()
        };
        KernelFacts::new(&facts, source, 5.0)
    }

    fn windows() -> KernelFacts {
        facts("qemu_guest_agent", Some("mswindows"), None, None, &[], None)
    }

    fn window(
        vcpus: u32,
        cpu_pct: f64,
        wakeups_per_vcpu_s: f64,
        facts: Option<KernelFacts>,
        setup: VmSetup,
    ) -> Window {
        let mut window = test_window(vcpus, cpu_pct, wakeups_per_vcpu_s, None);
        window.facts = facts;
        window.setup = setup;
        window
    }

    fn setup(hyperv: Option<&str>, hpet: Option<bool>, os_hint: Option<&str>) -> VmSetup {
        VmSetup::from_stored(hyperv, hpet, os_hint)
    }

    #[test]
    fn windows_guests_get_windows_causes_and_never_linux_advice() {
        use ChangeKind as K;
        let virt_manager = "relaxed,spinlocks,time,vapic";
        let proxmox = "ipi,relaxed,reset,runtime,spinlocks,stimer,synic,time,vapic,vpindex";
        type Case<'a> = (&'a str, Window, &'a [(&'a str, ChangeKind)]);
        let cases: [Case; 9] = [
            (
                "no stimer, idle at 15 % of a core per vCPU: the Hyper-V set",
                window(
                    2,
                    30.0,
                    100.0,
                    Some(windows()),
                    setup(Some(virt_manager), Some(true), None),
                ),
                &[("hyperv_timers", K::VmConfig), ("fewer_vcpus", K::VmConfig)],
            ),
            (
                "the manager's word alone names it Windows",
                window(2, 30.0, 100.0, None, setup(Some(""), None, Some("win10"))),
                &[("hyperv_timers", K::VmConfig), ("fewer_vcpus", K::VmConfig)],
            ),
            (
                "no stimer but cheap: nothing to save",
                window(
                    2,
                    1.0,
                    64.0,
                    Some(windows()),
                    setup(Some(""), Some(true), None),
                ),
                &[],
            ),
            (
                "enlightenments unknown: the evidence is missing",
                window(2, 30.0, 100.0, Some(windows()), setup(None, None, None)),
                &[("fewer_vcpus", K::VmConfig)],
            ),
            (
                "synthetic timers, but a 1 ms timer held: find the program",
                window(
                    2,
                    20.0,
                    1000.0,
                    Some(windows()),
                    setup(Some(proxmox), Some(false), None),
                ),
                &[
                    ("windows_timer_resolution", K::Investigate),
                    ("fewer_vcpus", K::VmConfig),
                ],
            ),
            (
                "synthetic timers at Windows' own 64 a second: nothing",
                window(
                    2,
                    20.0,
                    64.0,
                    Some(windows()),
                    setup(Some(proxmox), None, None),
                ),
                &[],
            ),
            (
                "passthrough gives stimer",
                window(
                    2,
                    20.0,
                    1000.0,
                    Some(windows()),
                    setup(Some("passthrough"), None, None),
                ),
                &[
                    ("windows_timer_resolution", K::Investigate),
                    ("fewer_vcpus", K::VmConfig),
                ],
            ),
            (
                "busy: its CPU is work",
                window(
                    1,
                    99.0,
                    1000.0,
                    Some(windows()),
                    setup(Some(""), None, None),
                ),
                &[],
            ),
            (
                // Ticking like a Linux kernel with nohz=off, with Linux evidence about: still
                // only Windows advice (and the host-side ones).
                "a periodic Windows guest gets no tick advice",
                {
                    let mut w = window(
                        1,
                        40.0,
                        250.0,
                        Some(windows()),
                        setup(Some(""), Some(true), None),
                    );
                    w.boot_args = Some("nohz=off idle=poll".into());
                    w
                },
                &[("hyperv_timers", K::VmConfig)],
            ),
        ];
        for (what, window, expected) in cases {
            let got = rules(window);
            assert_eq!(got, expected, "{what}");
            assert!(
                got.iter().all(|(rule, _)| !LINUX_ONLY.contains(rule)),
                "{what}: {got:?}"
            );
        }
    }

    #[test]
    fn the_hyperv_change_names_what_is_missing_in_every_stack() {
        let verdict = analyse_host(&[window(
            2,
            30.0,
            100.0,
            Some(windows()),
            setup(Some("relaxed,spinlocks,time,vapic"), Some(true), None),
        )])
        .remove(0);
        let s = &verdict.suggestions[0];
        assert!(
            s.change.contains("(vpindex, runtime, synic, stimer)"),
            "{}",
            s.change
        );
        assert!(s.change.contains("hv-synic,hv-stimer"), "{}", s.change);
        assert!(s.change.contains("<stimer state='on'/>"), "{}", s.change);
        assert!(
            !s.change.contains("<time "),
            "libvirt has no such feature: {}",
            s.change
        );
        assert!(
            s.change
                .contains("<timer name='hypervclock' present='yes'/>"),
            "{}",
            s.change
        );
        assert!(
            s.change.contains("<timer name='hpet' present='no'/>"),
            "{}",
            s.change
        );
        assert!(s.change.contains("--ostype win11"), "{}", s.change);
        assert_eq!(s.rule, "hyperv_timers");
        // Saving: 15 % per vCPU above the default 0.5 % baseline, for 2 vCPUs, idle throughout.
        let saving = s.saving_cpu_pct.unwrap();
        assert!((saving - 29.0).abs() < 1e-9, "{saving}");
    }

    #[test]
    fn linux_guests_on_an_emulated_timer_are_told_by_their_facts() {
        use ChangeKind as K;
        let probe = |tick: Option<&str>, clock: &str, available: &[&str], cmdline: &str| {
            Some(facts(
                "probe_channel",
                Some("debian"),
                tick,
                Some(clock),
                available,
                Some(cmdline),
            ))
        };
        let tcg = ["tsc", "hpet", "acpi_pm"];
        type Case<'a> = (&'a str, Window, &'a [(&'a str, ChangeKind)]);
        let cases: [Case; 7] = [
            (
                "PIT tick from nolapic_timer: remove it",
                window(
                    1,
                    1.0,
                    146.0,
                    probe(Some("pit"), "tsc", &tcg, "quiet nolapic_timer"),
                    setup(Some(""), Some(false), None),
                ),
                &[("emulated_tick_device", K::BootParameter)],
            ),
            (
                "PIT tick with nothing on the command line: find why",
                window(
                    1,
                    1.0,
                    146.0,
                    probe(Some("pit"), "tsc", &tcg, "quiet"),
                    setup(Some(""), Some(false), None),
                ),
                &[("emulated_tick_device", K::Investigate)],
            ),
            (
                "an HPET tick: move the tick, and take the HPET out",
                window(
                    1,
                    1.0,
                    146.0,
                    probe(Some("hpet"), "tsc", &tcg, "quiet nolapic_timer"),
                    setup(Some(""), Some(true), None),
                ),
                &[
                    ("emulated_tick_device", K::BootParameter),
                    ("disable_hpet", K::VmConfig),
                ],
            ),
            (
                "on the local APIC timer: neither",
                window(
                    1,
                    0.3,
                    20.0,
                    probe(Some("lapic-deadline"), "tsc", &tcg, "quiet"),
                    setup(Some(""), Some(true), None),
                ),
                &[],
            ),
            (
                "time kept on the HPET for want of kvm-clock: take the HPET out",
                window(
                    1,
                    0.3,
                    20.0,
                    probe(Some("lapic"), "hpet", &tcg, "quiet"),
                    setup(Some(""), Some(true), None),
                ),
                &[("disable_hpet", K::VmConfig)],
            ),
            (
                "time on the HPET with kvm-clock there: use kvm-clock instead",
                window(
                    1,
                    0.3,
                    20.0,
                    probe(
                        Some("lapic"),
                        "hpet",
                        &["kvm-clock", "tsc", "hpet"],
                        "quiet",
                    ),
                    setup(Some(""), Some(true), None),
                ),
                &[("paravirt_clocksource", K::BootParameter)],
            ),
            (
                "an HPET tick on a VM without one said: no HPET advice",
                window(
                    1,
                    1.0,
                    146.0,
                    probe(Some("hpet"), "tsc", &tcg, "quiet"),
                    setup(Some(""), None, None),
                ),
                &[("emulated_tick_device", K::Investigate)],
            ),
        ];
        for (what, window, expected) in cases {
            assert_eq!(rules(window), expected, "{what}");
        }
    }

    /// The real guest of `real_guests.rs`: with `nolapic_timer` and no HPET, Linux runs
    /// dynticks on the PIT, and still wakes 156 times a second at twice a tickless guest's cost.
    #[test]
    fn a_dyntick_guest_on_the_pit_is_told_the_timer_not_user_space() {
        let mut facts = facts(
            "probe_channel",
            Some("debian"),
            Some("pit"),
            Some("tsc"),
            &["tsc", "acpi_pm"],
            Some("console=ttyS0 quiet panic=-1 nolapic_timer"),
        );
        facts.dynticks_active = Some(true);
        facts.nohz = crate::analysis::kernel::NohzBuilt::Full;
        let pit = window(
            1,
            1.25,
            156.0,
            Some(facts.clone()),
            setup(Some(""), Some(false), None),
        );
        let verdict = analyse_host(std::slice::from_ref(&pit)).remove(0);
        assert_eq!(verdict.classification.mode, TickMode::Tickless);
        let got: Vec<&str> = verdict.suggestions.iter().map(|s| s.rule).collect();
        assert_eq!(got, ["emulated_tick_device"]);
        // Over the default 0.5 % baseline: 0.75 % of a core to save.
        let saving = verdict.suggestions[0].saving_cpu_pct.unwrap();
        assert!((saving - 0.75).abs() < 1e-9, "{saving}");
        // Tickless by its kernel, it still ranks by what its timer wastes, filed under it.
        assert!((verdict.waste.wasted_cpu_pct - 0.75).abs() < 1e-9);
        assert_eq!(verdict.cause, Some(Cause::EmulatedTimer));
        // On the local APIC timer, the same wake-ups are user space's.
        facts.tick_device = Some("lapic".into());
        let lapic = window(
            1,
            1.25,
            156.0,
            Some(facts),
            setup(Some(""), Some(false), None),
        );
        let verdict = analyse_host(std::slice::from_ref(&lapic)).remove(0);
        let got: Vec<(&str, Cause)> = verdict
            .suggestions
            .iter()
            .map(|s| (s.rule, s.cause))
            .collect();
        assert_eq!(got, [("find_user_space_wakeups", Cause::GuestPrograms)]);
        // Not priced, but what the admin should look at: filed under it, with no waste.
        assert_eq!(verdict.cause, Some(Cause::GuestPrograms));
        assert_eq!(verdict.waste.wasted_cpu_pct, 0.0);
        // Nor does it teach its host what a tickless guest costs.
        assert!(!pit.teaches_baseline());
    }

    #[test]
    fn a_windows_guest_ranks_by_what_its_timers_waste_though_it_wakes_like_a_tickless_one() {
        // Without stimer, 12 % of a core per vCPU at 60 wake-ups a second: too few for a tick.
        let no_stimer = window(
            2,
            24.0,
            60.0,
            Some(windows()),
            setup(Some("relaxed,vapic"), Some(true), None),
        );
        let verdict = analyse_host(std::slice::from_ref(&no_stimer)).remove(0);
        assert_eq!(verdict.classification.mode, TickMode::Tickless);
        // 24 % less 2 vCPUs × the default 0.5 % baseline.
        assert!(
            (verdict.waste.wasted_cpu_pct - 23.0).abs() < 1e-9,
            "{}",
            verdict.waste.reasoning
        );
        assert!(
            verdict
                .waste
                .reasoning
                .contains("Windows without Hyper-V timers 23.00 % (hyperv_timers)"),
            "{}",
            verdict.waste.reasoning
        );
        assert_eq!(verdict.cause, Some(Cause::WindowsTimers));
        // With the timers, the same cost and wake-ups are nothing the rules can name: no waste.
        let with_stimer = window(
            2,
            24.0,
            60.0,
            Some(windows()),
            setup(
                Some("relaxed,spinlocks,stimer,synic,time,vapic,vpindex"),
                Some(false),
                None,
            ),
        );
        let verdict = analyse_host(std::slice::from_ref(&with_stimer)).remove(0);
        assert_eq!(
            verdict.waste.wasted_cpu_pct, 0.0,
            "{}",
            verdict.waste.reasoning
        );
        assert_eq!(verdict.cause, None);
    }
}
