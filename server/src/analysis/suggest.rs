//! What to change, for each guest: a table of rules, each a pure function of what was measured.
//!
//! Every suggestion names the exact change, why it helps, what it rests on, how sure it is, and
//! the host CPU it should save, taken from this guest's own measured waste. With host-side data
//! alone the rules cannot see inside the guest, and where that matters they say what to check.

use serde::Serialize;

use super::boot_args;
use super::kernel::NohzBuilt;
use super::tick_mode::{Classification, Confidence, TickMode};
use super::waste::Waste;
use super::{Rates, Window};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suggestion {
    /// Stable identifier of the rule that made it.
    pub rule: &'static str,
    /// The change in a few words, for lists.
    pub title: &'static str,
    /// The change to make, exactly.
    pub change: String,
    /// Why it helps.
    pub why: String,
    pub confidence: Confidence,
    /// Host CPU the change should save, in % of one core, when it can be estimated.
    pub saving_cpu_pct: Option<f64>,
}

/// What the rules look at.
pub struct Input<'a> {
    pub window: &'a Window,
    pub rates: Option<&'a Rates>,
    pub classification: &'a Classification,
    pub waste: &'a Waste,
}

type Rule = fn(&Input) -> Option<Suggestion>;

/// Rules in the order their suggestions are shown: the most direct fix first.
pub const RULES: &[Rule] = &[
    remove_idle_poll,
    remove_nohz_off,
    check_guest_kernel,
    fewer_vcpus,
    busy_or_polling,
];

pub fn suggest(input: &Input) -> Vec<Suggestion> {
    RULES.iter().filter_map(|rule| rule(input)).collect()
}

fn args<'a>(input: &Input<'a>) -> Option<&'a str> {
    input.window.cmdline()
}

/// `idle=poll` makes idle vCPUs spin instead of halting: a whole host core per vCPU.
fn remove_idle_poll(input: &Input) -> Option<Suggestion> {
    if !boot_args::has(args(input), "idle", "poll") {
        return None;
    }
    Some(Suggestion {
        rule: "remove_idle_poll",
        title: "Remove `idle=poll`",
        change: "Remove `idle=poll` from the guest kernel command line.".into(),
        why: "With `idle=poll` an idle vCPU spins in a loop instead of halting, so the host runs it flat out; without it the vCPU halts and the host thread sleeps.".into(),
        confidence: Confidence::High,
        saving_cpu_pct: Some(input.waste.wasted_cpu_pct),
    })
}

/// `nohz=off` on the command line switches a tickless kernel's idle tick back on.
fn remove_nohz_off(input: &Input) -> Option<Suggestion> {
    if input.classification.mode != TickMode::Periodic
        || !boot_args::has(args(input), "nohz", "off")
    {
        return None;
    }
    Some(Suggestion {
        rule: "remove_nohz_off",
        title: "Remove `nohz=off`",
        change: if input.window.boot_args.is_some() {
            "Remove `nohz=off` from the guest kernel command line (it is visible on the host, in the VM's kernel boot arguments)."
        } else {
            "Remove `nohz=off` from the guest kernel command line (the guest reports it in /proc/cmdline), e.g. from GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub and reboot."
        }
        .into(),
        why: "`nohz=off` keeps the timer tick running on idle vCPUs, so each wakes HZ times a second and costs the host CPU; this kernel can stop the tick when idle once the parameter is gone.".into(),
        confidence: Confidence::High,
        saving_cpu_pct: Some(input.waste.wasted_cpu_pct),
    })
}

/// A periodic guest whose kernel cannot stop its tick, or whose cause the host cannot see.
fn check_guest_kernel(input: &Input) -> Option<Suggestion> {
    if input.classification.mode != TickMode::Periodic || boot_args::has(args(input), "nohz", "off")
    {
        return None;
    }
    let facts = input.window.facts.as_ref();
    if let Some(k) = facts.filter(|k| k.nohz == NohzBuilt::None) {
        let release = k.kernel_release.as_deref().unwrap_or("this kernel");
        let hz = k
            .config_hz
            .map_or(String::new(), |hz| format!(", CONFIG_HZ={hz}"));
        return Some(Suggestion {
            rule: "check_guest_kernel",
            title: "Make the guest kernel tickless",
            change: format!(
                "Boot a kernel built with CONFIG_NO_HZ_IDLE=y instead of {release} (built without NO_HZ{hz}). Where the kernel cannot change, one with CONFIG_HZ=100 ticks less."
            ),
            why: "A kernel built without NO_HZ ticks on every vCPU HZ times a second even when idle, and no boot parameter can stop it.".into(),
            confidence: Confidence::High,
            saving_cpu_pct: Some(input.waste.wasted_cpu_pct),
        });
    }
    let seen_args = if facts.is_some_and(|k| k.nohz.can_stop_the_tick() == Some(true)) {
        " The guest reports a kernel built with NO_HZ and no `nohz=off`: look for what else keeps the tick running (a `nohz_full=` set, a driver, or user space)."
    } else if args(input).is_some() {
        " The kernel command line has no `nohz=off`, so the kernel itself is probably built without NO_HZ."
    } else {
        ""
    };
    Some(Suggestion {
        rule: "check_guest_kernel",
        title: "Make the guest kernel tickless",
        change: "In the guest, run `grep -E '^CONFIG_(HZ|NO_HZ)' /boot/config-$(uname -r); cat /proc/cmdline`. If the kernel has CONFIG_HZ_PERIODIC=y (or no NO_HZ option at all), move to a kernel built with CONFIG_NO_HZ_IDLE=y; if the command line has `nohz=off`, remove it. Where the kernel cannot change, a kernel with a lower CONFIG_HZ (100) ticks less.".into(),
        why: format!(
            "The vCPUs wake about {:.0} times per vCPU per second while the guest is idle, the pattern of a periodic tick.{seen_args}",
            input.rates.map_or(0.0, |r| r.wakeups_per_vcpu_s)
        ),
        confidence: Confidence::Medium.min(input.classification.confidence),
        saving_cpu_pct: Some(input.waste.wasted_cpu_pct),
    })
}

/// Each vCPU of a ticking guest ticks on its own, so an unneeded vCPU costs on its own too.
fn fewer_vcpus(input: &Input) -> Option<Suggestion> {
    let vcpus = input.window.vcpus;
    if !input.classification.mode.is_wasteful() || vcpus < 2 || input.waste.wasted_cpu_pct <= 0.0 {
        return None;
    }
    let per_vcpu = input.waste.wasted_cpu_pct / f64::from(vcpus);
    Some(Suggestion {
        rule: "fewer_vcpus",
        title: "Give it fewer vCPUs",
        change: format!("If this guest does not need all {vcpus} vCPUs, give it fewer."),
        why: format!(
            "While the tick keeps running, every vCPU wakes on its own: each vCPU removed saves about {per_vcpu:.2} % of a host core here."
        ),
        confidence: Confidence::Low,
        saving_cpu_pct: Some(per_vcpu),
    })
}

/// A guest that runs its vCPUs flat out may be working, or may be idle and polling.
fn busy_or_polling(input: &Input) -> Option<Suggestion> {
    if input.classification.mode != TickMode::Busy {
        return None;
    }
    Some(Suggestion {
        rule: "busy_or_polling",
        title: "Check whether it polls while idle",
        change: "If this guest should be idle, check it for polling idle: `cat /proc/cmdline` (remove `idle=poll`) and `cat /sys/devices/system/cpu/cpuidle/current_driver` (`haltpoll`: lower `guest_halt_poll_ns` or unload cpuidle-haltpoll on an overcommitted host).".into(),
        why: "The host sees its vCPUs running almost all the time, which is either real work or idle vCPUs spinning instead of halting; only the guest can tell which.".into(),
        confidence: Confidence::Low,
        saving_cpu_pct: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::test_window;
    use crate::analysis::tick_mode::classify;
    use crate::analysis::waste::{Baseline, waste};

    fn rules_for(
        vcpus: u32,
        cpu_pct: f64,
        wakeups_per_vcpu_s: f64,
        args: Option<&str>,
    ) -> Vec<Suggestion> {
        let window = test_window(vcpus, cpu_pct, wakeups_per_vcpu_s, args);
        let rates = window.rates();
        let classification = classify(&window, rates.as_ref());
        let waste = waste(
            &classification,
            rates.as_ref(),
            vcpus,
            &Baseline::learn(&[]),
            None,
        );
        suggest(&Input {
            window: &window,
            rates: rates.as_ref(),
            classification: &classification,
            waste: &waste,
        })
    }

    fn rule_names(s: &[Suggestion]) -> Vec<&'static str> {
        s.iter().map(|s| s.rule).collect()
    }

    #[test]
    fn each_situation_gets_the_rules_that_fit_it() {
        // (vCPUs, host CPU %, wake-ups per vCPU per s, boot args, rules expected)
        type Case<'a> = (u32, f64, f64, Option<&'a str>, &'a [&'a str]);
        let cases: [Case; 7] = [
            (
                1,
                5.3,
                650.0,
                Some("console=ttyS0 nohz=off"),
                &["remove_nohz_off"],
            ),
            (
                2,
                8.6,
                572.0,
                Some("nohz=off"),
                &["remove_nohz_off", "fewer_vcpus"],
            ),
            (1, 4.0, 1000.0, None, &["check_guest_kernel"]),
            (
                1,
                4.0,
                1000.0,
                Some("console=ttyS0"),
                &["check_guest_kernel"],
            ),
            (1, 99.3, 485.0, Some("idle=poll"), &["remove_idle_poll"]),
            (1, 99.3, 485.0, None, &["busy_or_polling"]),
            (1, 0.3, 38.0, None, &[]),
        ];
        for (vcpus, cpu, wakeups, args, expected) in cases {
            let s = rules_for(vcpus, cpu, wakeups, args);
            assert_eq!(
                rule_names(&s),
                expected,
                "{vcpus} vCPU {cpu} % {wakeups}/s {args:?}"
            );
        }
    }

    #[test]
    fn savings_come_from_the_measured_waste() {
        let s = rules_for(2, 8.6, 572.0, Some("nohz=off"));
        // 8.6 % used − 2 × 0.5 % default baseline = 7.6 %.
        assert!((s[0].saving_cpu_pct.unwrap() - 7.6).abs() < 1e-9);
        assert!((s[1].saving_cpu_pct.unwrap() - 3.8).abs() < 1e-9);
        let s = rules_for(1, 99.3, 485.0, None);
        assert_eq!(
            s[0].saving_cpu_pct, None,
            "a busy guest's saving is unknown"
        );
    }

    #[test]
    fn a_visible_command_line_without_nohz_off_points_at_the_kernel_build() {
        let s = rules_for(1, 4.0, 1000.0, Some("console=ttyS0"));
        assert!(s[0].why.contains("built without NO_HZ"), "{}", s[0].why);
        let s = rules_for(1, 4.0, 1000.0, None);
        assert!(!s[0].why.contains("built without NO_HZ"));
    }
}
