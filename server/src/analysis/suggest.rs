//! What to change, for each guest: a table of rules, each a pure function of what was measured.
//!
//! Every suggestion names the exact change, why it helps, what it rests on, how sure it is, and
//! the host CPU it should save, taken from this guest's own measured waste. With host-side data
//! alone the rules cannot see inside the guest, and where that matters they say what to check.

use super::boot_args;
use super::cause::Cause;
use super::change_kind::ChangeKind;
use super::kernel::{self, KernelFacts, NohzBuilt};
use super::platform::OsFamily;
use super::platform_rules::{
    disable_hpet, emulated_tick_device, hyperv_timers, windows_timer_resolution,
};
use super::thread_rules::{emulator_busy, iothread_polling, vhost_busy};
use super::tick_mode::{Confidence, TickMode};

pub use super::suggestion::{Input, Suggestion};

type Rule = fn(&Input) -> Option<Suggestion>;

/// Which guests a rule may speak to: a Windows (or BSD) guest is never told a Linux kernel or
/// boot-line change, and Windows advice goes to Windows guests alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaks {
    /// Guests known to run Linux, and those whose OS nothing tells (most guests are Linux, and
    /// the change says what to check).
    ToLinux,
    /// Guests known to run Windows.
    ToWindows,
    /// Any guest: the change is on the host or the VM, not in the guest.
    ToAny,
}

impl Speaks {
    fn to(self, os: OsFamily) -> bool {
        match self {
            Speaks::ToLinux => os.may_be_linux(),
            Speaks::ToWindows => os == OsFamily::Windows,
            Speaks::ToAny => true,
        }
    }
}

/// Rules in the order their suggestions are shown, the most direct fix first, each with the
/// guests it speaks to.
pub const RULES: &[(Rule, Speaks)] = &[
    (remove_idle_poll, Speaks::ToLinux),
    (tune_haltpoll, Speaks::ToLinux),
    (hyperv_timers, Speaks::ToWindows),
    (windows_timer_resolution, Speaks::ToWindows),
    (emulated_tick_device, Speaks::ToLinux),
    (remove_nohz_off, Speaks::ToLinux),
    (upgrade_pre_nohz_kernel, Speaks::ToLinux),
    (rhel5_divider, Speaks::ToLinux),
    (check_guest_kernel, Speaks::ToLinux),
    (fewer_vcpus, Speaks::ToAny),
    (lower_host_halt_poll, Speaks::ToAny),
    (paravirt_clocksource, Speaks::ToLinux),
    (disable_hpet, Speaks::ToLinux),
    (iothread_polling, Speaks::ToAny),
    (vhost_busy, Speaks::ToAny),
    (emulator_busy, Speaks::ToAny),
    (find_user_space_wakeups, Speaks::ToLinux),
    (busy_or_polling, Speaks::ToLinux),
];

/// The guest's own facts, when it reported them.
fn facts<'a>(input: &Input<'a>) -> Option<&'a KernelFacts> {
    input.window.facts.as_ref()
}

/// cpuidle-haltpoll polls before halting; on a host with more vCPUs than cores that polling is
/// taken from other guests.
fn tune_haltpoll(input: &Input) -> Option<Suggestion> {
    let k = facts(input)?;
    if k.cpuidle_driver.as_deref() != Some("haltpoll")
        || !matches!(
            input.classification.mode,
            TickMode::Polling | TickMode::Busy
        )
        || k.idle_fraction.is_some_and(|idle| idle < 0.5)
    {
        return None;
    }
    Some(Suggestion {
        rule: "tune_haltpoll",
        cause: Cause::GuestPolling,
        kind: ChangeKind::GuestSetting,
        title: "Stop idle vCPUs from polling (haltpoll)",
        change: "In the guest, `echo 0 > /sys/module/haltpoll/parameters/guest_halt_poll_ns`, or boot with `haltpoll.guest_halt_poll_ns=0`; on a host with spare cores only, a smaller value keeps some of the latency benefit.".into(),
        why: "The cpuidle-haltpoll driver spins for a while before halting an idle vCPU: lower wake-up latency, paid for in host CPU, which an overcommitted host takes from other guests.".into(),
        confidence: Confidence::High,
        saving_cpu_pct: Some(input.waste.wasted_cpu_pct),
    })
}

/// Kernels before 2.6.21 (i386) and 2.6.24 (x86_64) have no NO_HZ: no setting makes them
/// tickless.
fn upgrade_pre_nohz_kernel(input: &Input) -> Option<Suggestion> {
    let k = facts(input)?;
    let version = k.version()?;
    // 2.6.21-2.6.23 can be tickless on i386: only a kernel built without NO_HZ needs replacing.
    let too_old = version < (2, 6, 21) || (version < (2, 6, 24) && k.nohz == NohzBuilt::None);
    if input.classification.mode != TickMode::Periodic || !too_old {
        return None;
    }
    let release = k.kernel_release.as_deref().unwrap_or("this kernel");
    let why = if version < (2, 6, 21) {
        format!(
            "{release} predates NO_HZ (2.6.21 on i386, 2.6.24 on x86_64): it ticks on every vCPU whatever its configuration."
        )
    } else {
        format!("{release} can be tickless only on i386; x86_64 kernels gained NO_HZ in 2.6.24.")
    };
    Some(Suggestion {
        rule: "upgrade_pre_nohz_kernel",
        cause: Cause::TickingKernel,
        kind: ChangeKind::KernelUpgrade,
        title: "Upgrade to a kernel that can stop its tick",
        change: "Move this guest to a kernel of 2.6.24 or later built with NO_HZ (a current distribution kernel), or to a distribution release that ships one.".into(),
        why,
        confidence: Confidence::High,
        saving_cpu_pct: Some(input.waste.wasted_cpu_pct),
    })
}

/// RHEL/CentOS 5 kernels tick at 1000 Hz; `divider=10` makes that 100 Hz, safely from 5.8.
fn rhel5_divider(input: &Input) -> Option<Suggestion> {
    let k = facts(input)?;
    let build = kernel::rhel5_build(k.kernel_release.as_deref()?)?;
    let divided = k
        .cmdline
        .as_deref()
        .and_then(|c| boot_args::param(c, "divider"))
        .and_then(|d| d.parse::<u32>().ok())
        .is_some_and(|d| d > 1);
    let hz = k.config_hz.unwrap_or(1000);
    if input.classification.mode != TickMode::Periodic || divided {
        return None;
    }
    // Dividing the tick by ten leaves a tenth of the tick's cost.
    let saving = Some(input.waste.wasted_cpu_pct * 0.9);
    Some(if build >= RHEL_5_8_BUILD {
        Suggestion {
            rule: "rhel5_divider",
            cause: Cause::TickingKernel,
            kind: ChangeKind::BootParameter,
            title: "Divide the RHEL 5 tick by ten",
            change: format!(
                "Add `divider=10` to the kernel line in /boot/grub/grub.conf and reboot: the tick drops from {hz} to {} Hz.",
                hz / 10
            ),
            why: "RHEL/CentOS 5 kernels cannot stop their tick, but from 5.8 (kernel 2.6.18-308) they can run it at a tenth of CONFIG_HZ.".into(),
            confidence: Confidence::High,
            saving_cpu_pct: saving,
        }
    } else {
        Suggestion {
            rule: "rhel5_divider",
            cause: Cause::TickingKernel,
            // Updating to 5.8 or later is a new kernel.
            kind: ChangeKind::KernelUpgrade,
            title: "Update RHEL 5, then divide its tick by ten",
            change: "Update to RHEL/CentOS 5.8 or later (kernel 2.6.18-308 or newer) first, then add `divider=10` to the kernel line and reboot.".into(),
            why: format!(
                "This kernel (build {build}) is older than 5.8, where `divider=` can panic at boot; from 5.8 it runs the tick at {} instead of {hz} Hz.",
                hz / 10
            ),
            confidence: Confidence::Medium,
            saving_cpu_pct: saving,
        }
    })
}

/// The RHEL/CentOS 5.8 kernel build, from which `divider=` is safe.
const RHEL_5_8_BUILD: u32 = 308;

/// Clocksources whose every read is emulated by the hypervisor.
const EMULATED_CLOCKSOURCES: [&str; 3] = ["hpet", "acpi_pm", "pit"];

/// Timekeeping through an emulated HPET, ACPI PM timer or PIT traps to the hypervisor on every
/// read; kvm-clock and tsc are read without an exit.
fn paravirt_clocksource(input: &Input) -> Option<Suggestion> {
    let k = facts(input)?;
    let current = k.clocksource.as_deref()?;
    // Only kvm-clock: a guest on hpet with tsc still listed usually had its TSC marked unstable.
    if !EMULATED_CLOCKSOURCES.contains(&current)
        || !k.available_clocksources.iter().any(|a| a == "kvm-clock")
    {
        return None;
    }
    // kvm-clock is available but not used: something on the command line chose another.
    let param = |key: &str| {
        k.cmdline
            .as_deref()
            .and_then(|c| boot_args::param(c, key))
            .is_some()
    };
    let change = if param("clocksource") || param("clock") || param("notsc") {
        format!(
            "Remove the `clocksource=`, `clock=` or `notsc` parameter that makes the guest use {current}, so that it uses kvm-clock."
        )
    } else {
        format!(
            "Boot the guest with `clocksource=kvm-clock` (it is available; the guest uses {current} now)."
        )
    };
    Some(Suggestion {
        rule: "paravirt_clocksource",
        cause: Cause::EmulatedTimer,
        kind: ChangeKind::BootParameter,
        title: "Use a clocksource that does not trap",
        change,
        why: format!(
            "Each read of the {current} clocksource is emulated by the hypervisor, a VM exit per timestamp; kvm-clock is read without one."
        ),
        confidence: Confidence::Medium,
        saving_cpu_pct: None,
    })
}

/// Host CPU per wake-up from which KVM's halt polling explains a guest's idle cost: a wake-up
/// costs a KVM vCPU some 5-20 µs without it, and up to the whole poll window with it.
pub const HALT_POLL_EXPLAINS_FRACTION_OF_WINDOW: f64 = 0.5;
/// ... and up to this multiple of the window: a wake-up cannot poll longer, so a costlier one is
/// doing something else.
pub const HALT_POLL_MAX_FRACTION_OF_WINDOW: f64 = 2.0;
/// ... for a guest that costs at least this multiple of its host's tickless baseline per vCPU.
pub const HALT_POLL_MIN_TIMES_BASELINE: f64 = 2.0;

/// KVM polls a halted vCPU for up to `halt_poll_ns` before it sleeps, so a guest that wakes
/// often for short naps costs the host CPU for every nap, whatever its tick does. When the host
/// CPU per wake-up comes near the poll window, the host's polling, not the guest, explains it.
fn lower_host_halt_poll(input: &Input) -> Option<Suggestion> {
    if let Some(polled_pct) = input.halt_poll_pct {
        return measured_halt_poll(input, polled_pct);
    }
    let window = input.window;
    let poll_ns = window.host_halt_poll_ns.filter(|&ns| ns > 0)?;
    let rates = input.rates?;
    let baseline = input.waste.baseline.cpu_pct_per_vcpu;
    // A busy guest's CPU is work, and an `idle=poll` guest never halts, so KVM never polls for it;
    // wake-ups counted over the whole process are not the vCPUs' own.
    let idle_share = input.mostly_idle_share()?;
    if window.uses_kvm != Some(true)
        || input.classification.mode == TickMode::Polling
        || !window.wakeups_from_vcpu_threads
        || rates.wakeups_per_vcpu_s <= 0.0
        || rates.cpu_pct_per_vcpu < HALT_POLL_MIN_TIMES_BASELINE * baseline
    {
        return None;
    }
    let poll_us = poll_ns as f64 / 1000.0;
    let cost_per_wakeup_us = rates.cpu_pct_per_vcpu / 100.0 / rates.wakeups_per_vcpu_s * 1e6;
    if !(HALT_POLL_EXPLAINS_FRACTION_OF_WINDOW * poll_us
        ..=HALT_POLL_MAX_FRACTION_OF_WINDOW * poll_us)
        .contains(&cost_per_wakeup_us)
    {
        return None;
    }
    // At most every wake-up's full window is polling, and at most what it costs above the
    // tickless baseline; while idle, so averaged over all the time as waste is.
    let vcpus = f64::from(window.vcpus);
    let polled_pct = rates.wakeups_per_vcpu_s * vcpus * poll_ns as f64 * 1e-9 * 100.0;
    let above_baseline_pct = (rates.cpu_pct_per_vcpu - baseline) * vcpus;
    Some(Suggestion {
        rule: "lower_host_halt_poll",
        cause: Cause::HostHaltPolling,
        kind: ChangeKind::HostSide,
        title: "Lower KVM halt polling on the host",
        change: halt_poll_change(Some(poll_ns)),
        why: format!(
            "Each of its {:.0} wake-ups per vCPU per second costs the host {cost_per_wakeup_us:.0} µs, near the {poll_us:.0} µs KVM spins on a halted vCPU before letting it sleep: host-side halt polling, not the guest's tick, explains its {:.2} % of a core per vCPU.",
            rates.wakeups_per_vcpu_s, rates.cpu_pct_per_vcpu
        ),
        confidence: if (0.8 * poll_us..=1.2 * poll_us).contains(&cost_per_wakeup_us) {
            Confidence::Medium
        } else {
            Confidence::Low
        },
        saving_cpu_pct: Some(polled_pct.min(above_baseline_pct).max(0.0) * idle_share),
    })
}

/// KVM's measured halt polling, in % of a core while the guest idles, from which it is worth
/// lowering: below it the polling buys wake-up latency for little.
pub const HALT_POLL_MIN_MEASURED_PCT: f64 = 1.0;

/// The host setting, spelled out; `poll_ns` is the host's current value, when known.
fn halt_poll_change(poll_ns: Option<u64>) -> String {
    let now = poll_ns.map_or(String::new(), |ns| format!(" (now {ns})"));
    format!(
        "On the host: `echo 0 > /sys/module/kvm/parameters/halt_poll_ns`{now}, kept across reboots with `options kvm halt_poll_ns=0` in /etc/modprobe.d/kvm.conf; a value between keeps part of the wake-up latency benefit. It applies to every KVM guest of the host: the kernel has a per-VM limit (KVM_CAP_HALT_POLL, Linux 5.8), but QEMU, libvirt and Proxmox VE offer no setting for it."
    )
}

/// Where the agent read KVM's own count of the time it polled for this VM's vCPUs, the polling
/// is measured, not inferred: what it cost while the guest idled is what lowering it saves
/// (`idle=poll` guests never halt, and busy ones' polling is part of their work).
fn measured_halt_poll(input: &Input, polled_pct: f64) -> Option<Suggestion> {
    let idle_share = input.mostly_idle_share()?;
    if input.classification.mode == TickMode::Polling || polled_pct < HALT_POLL_MIN_MEASURED_PCT {
        return None;
    }
    let vcpus_pct = input.rates.map_or(0.0, |r| r.host_cpu_pct);
    Some(Suggestion {
        rule: "lower_host_halt_poll",
        cause: Cause::HostHaltPolling,
        kind: ChangeKind::HostSide,
        title: "Lower KVM halt polling on the host",
        change: halt_poll_change(input.window.host_halt_poll_ns),
        why: format!(
            "While the guest idled, KVM spent {polled_pct:.2} % of a core polling its halted vCPUs (its own count, halt_poll_success_ns + halt_poll_fail_ns) of the {vcpus_pct:.2} % the VM used: idle time converted into host CPU, as the kernel's halt-polling documentation puts it."
        ),
        confidence: Confidence::High,
        saving_cpu_pct: Some(polled_pct * idle_share),
    })
}

/// A tickless guest whose vCPUs still wake like a ticking one: something in it asks to.
fn find_user_space_wakeups(input: &Input) -> Option<Suggestion> {
    let rates = input.rates?;
    if input.classification.mode != TickMode::Tickless
        || rates.wakeups_per_vcpu_s < super::tick_mode::PERIODIC_MIN_WAKEUPS_PER_VCPU_S
        // An emulated timer wakes it, not user space: emulated_tick_device says so.
        || facts(input).is_some_and(|k| k.emulated_tick_device().is_some())
    {
        return None;
    }
    Some(Suggestion {
        rule: "find_user_space_wakeups",
        cause: Cause::GuestPrograms,
        kind: ChangeKind::Investigate,
        title: "Find what wakes this tickless guest",
        change: "In the guest, run `powertop` (Overview tab: wake-ups per second by process and interrupt), or `perf sched timehist` for a while, and deal with the top wakers.".into(),
        why: format!(
            "The kernel stops its tick when idle, yet the vCPUs wake {:.0} times a second each: timers of processes or drivers in the guest are the cause, not the tick.",
            rates.wakeups_per_vcpu_s
        ),
        confidence: Confidence::Medium,
        saving_cpu_pct: None,
    })
}

pub fn suggest(input: &Input) -> Vec<Suggestion> {
    let os = input.window.os().family;
    RULES
        .iter()
        .filter(|(_, speaks)| speaks.to(os))
        .filter_map(|(rule, _)| rule(input))
        .collect()
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
        cause: Cause::GuestPolling,
        kind: ChangeKind::BootParameter,
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
        cause: Cause::TickingKernel,
        kind: ChangeKind::BootParameter,
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
    if facts
        .and_then(KernelFacts::version)
        .is_some_and(|v| v < (2, 6, 24))
    {
        return None; // no NO_HZ kernel of that age exists: upgrade_pre_nohz_kernel says so
    }
    if facts.is_some_and(|k| {
        k.emulated_tick_device().is_some() && k.nohz.can_stop_the_tick() != Some(false)
    }) {
        return None; // a kernel that could stop its tick, on an emulated timer: emulated_tick_device
    }
    if let Some(k) = facts.filter(|k| k.built_without_nohz()) {
        let release = k.kernel_release.as_deref().unwrap_or("this kernel");
        let built = match (k.nohz, k.config_hz) {
            (NohzBuilt::None, Some(hz)) => format!("built without NO_HZ, CONFIG_HZ={hz}"),
            (NohzBuilt::None, None) => "built without NO_HZ".to_string(),
            // Its configuration could not be read: the tick it reports running says it.
            _ => "its tick runs on every idle CPU and nothing on its command line asks for that"
                .to_string(),
        };
        return Some(Suggestion {
            rule: "check_guest_kernel",
            cause: Cause::TickingKernel,
            kind: ChangeKind::KernelConfig,
            title: "Make the guest kernel tickless",
            change: format!(
                "Boot a kernel built with CONFIG_NO_HZ_IDLE=y instead of {release} ({built}).{}",
                lower_hz_advice(k.config_hz)
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
        cause: Cause::TickingKernel,
        // Which change it needs is what the command tells.
        kind: ChangeKind::Investigate,
        title: "Make the guest kernel tickless",
        change: format!(
            "In the guest, run `grep -E '^CONFIG_(HZ|NO_HZ)' /boot/config-$(uname -r); cat /proc/cmdline`. If the kernel has CONFIG_HZ_PERIODIC=y (or no NO_HZ option at all), move to a kernel built with CONFIG_NO_HZ_IDLE=y; if the command line has `nohz=off`, remove it.{}",
            lower_hz_advice(facts.and_then(|k| k.config_hz))
        ),
        why: format!(
            "The vCPUs wake about {:.0} times per vCPU per second while the guest is idle, the pattern of a periodic tick.{seen_args}",
            input.rates.map_or(0.0, |r| r.wakeups_per_vcpu_s)
        ),
        confidence: Confidence::Medium.min(input.classification.confidence),
        saving_cpu_pct: Some(input.waste.wasted_cpu_pct),
    })
}

/// Where the kernel cannot change, a lower CONFIG_HZ ticks less: said only to a guest whose
/// CONFIG_HZ is not already the lowest (or is not known).
fn lower_hz_advice(config_hz: Option<u32>) -> &'static str {
    match config_hz {
        Some(hz) if hz <= 100 => "",
        _ => " Where the kernel cannot change, one with CONFIG_HZ=100 ticks less.",
    }
}

/// Head-room kept above a guest's busiest interval when counting the vCPUs it needs.
pub const VCPU_HEADROOM: f64 = 1.25;

/// Each vCPU of a ticking guest ticks on its own, so a vCPU the guest never uses costs on its
/// own too. How many it uses is read off its busiest interval in the window.
fn fewer_vcpus(input: &Input) -> Option<Suggestion> {
    let vcpus = input.window.vcpus;
    if !input.classification.mode.is_wasteful() || vcpus < 2 || input.waste.wasted_cpu_pct <= 0.0 {
        return None;
    }
    let peak_cores = input.window.peak_cores()?;
    let needed = ((peak_cores * VCPU_HEADROOM).ceil() as u32).max(1);
    if needed >= vcpus {
        return None;
    }
    let per_vcpu = input.waste.wasted_cpu_pct / f64::from(vcpus);
    let measured_s = input.window.total().length_s;
    Some(Suggestion {
        rule: "fewer_vcpus",
        cause: Cause::of_wasteful_mode(input.classification.mode),
        kind: ChangeKind::VmConfig,
        title: "Give it fewer vCPUs",
        change: format!(
            "Give it {needed} vCPU(s) instead of {vcpus}, if its busiest hours (look at a longer history than this) also fit."
        ),
        why: format!(
            "Its busiest interval in the {measured_s:.0} s measured used {peak_cores:.2} of a host core, so {needed} vCPU(s) with a quarter to spare would do; while the tick keeps running, every vCPU wakes on its own, and each one removed saves about {per_vcpu:.2} % of a host core here."
        ),
        confidence: Confidence::Low,
        saving_cpu_pct: Some(per_vcpu * f64::from(vcpus - needed)),
    })
}

/// A guest that runs its vCPUs flat out may be working, or may be idle and polling.
fn busy_or_polling(input: &Input) -> Option<Suggestion> {
    if input.classification.mode != TickMode::Busy {
        return None;
    }
    Some(Suggestion {
        rule: "busy_or_polling",
        cause: Cause::GuestPolling,
        kind: ChangeKind::Investigate,
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
    use crate::analysis::{Window, analyse_host, test_window};

    /// The suggestions the whole analysis makes for this guest alone on its host (so against
    /// the default baseline).
    fn suggestions(window: Window) -> Vec<Suggestion> {
        analyse_host(std::slice::from_ref(&window))
            .remove(0)
            .suggestions
    }

    fn rules_for(
        vcpus: u32,
        cpu_pct: f64,
        wakeups_per_vcpu_s: f64,
        args: Option<&str>,
    ) -> Vec<Suggestion> {
        suggestions(test_window(vcpus, cpu_pct, wakeups_per_vcpu_s, args))
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
    fn each_situation_is_filed_under_its_cause() {
        use crate::analysis::cause::Cause;
        // (vCPUs, host CPU %, wake-ups per vCPU per s, boot args, cause, cause of each rule)
        type Case<'a> = (u32, f64, f64, Option<&'a str>, Option<Cause>, &'a [Cause]);
        let cases: [Case; 5] = [
            (
                2,
                8.6,
                572.0,
                Some("nohz=off"),
                Some(Cause::TickingKernel),
                &[Cause::TickingKernel, Cause::TickingKernel],
            ),
            (
                1,
                4.0,
                1000.0,
                None,
                Some(Cause::TickingKernel),
                &[Cause::TickingKernel],
            ),
            (
                1,
                99.3,
                485.0,
                Some("idle=poll"),
                Some(Cause::GuestPolling),
                &[Cause::GuestPolling],
            ),
            // Busy: perhaps polling, perhaps working; not filed under a cause on a guess.
            (1, 99.3, 485.0, None, None, &[Cause::GuestPolling]),
            (1, 0.3, 38.0, None, None, &[]),
        ];
        for (vcpus, cpu, wakeups, args, cause, causes) in cases {
            let window = test_window(vcpus, cpu, wakeups, args);
            let verdict = analyse_host(std::slice::from_ref(&window)).remove(0);
            let got: Vec<Cause> = verdict.suggestions.iter().map(|s| s.cause).collect();
            assert_eq!(got, causes, "{vcpus} vCPU {cpu} % {wakeups}/s {args:?}");
            assert_eq!(
                verdict.cause, cause,
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

    /// Facts as a guest probe reports them, for the rules that read them.
    fn guest(release: &str, nohz: NohzBuilt, hz: u32, cmdline: &str) -> KernelFacts {
        KernelFacts {
            source: "probe_channel".into(),
            age_s: 5.0,
            kernel_release: Some(release.into()),
            distro: None,
            config_hz: Some(hz),
            nohz,
            measured_hz: None,
            dynticks_active: None,
            cmdline: Some(cmdline.into()),
            idle_fraction: Some(0.98),
            clocksource: Some("kvm-clock".into()),
            available_clocksources: vec!["kvm-clock".into(), "tsc".into(), "hpet".into()],
            cpuidle_driver: None,
            os_id: None,
            tick_device: None,
        }
    }

    fn rules_with_facts(
        cpu_pct: f64,
        wakeups_per_vcpu_s: f64,
        facts: KernelFacts,
    ) -> Vec<Suggestion> {
        let mut window = test_window(1, cpu_pct, wakeups_per_vcpu_s, None);
        for interval in &mut window.intervals {
            interval.guest_idle_fraction = facts.idle_fraction;
        }
        window.facts = Some(facts);
        suggestions(window)
    }

    #[test]
    fn rules_for_real_kernels() {
        use NohzBuilt as N;
        let rhel = |release: &str| {
            guest(
                release,
                N::None,
                1000,
                "ro root=/dev/VolGroup00/LogVol00 rhgb quiet",
            )
        };
        let mut hpet = guest("6.1.0-57-cloud-amd64", N::Full, 250, "quiet");
        hpet.clocksource = Some("hpet".into());
        let mut tsc_only = hpet.clone();
        tsc_only.available_clocksources = vec!["hpet".into(), "tsc".into()];
        let mut i386_nohz = guest("2.6.22-14-generic", N::Legacy, 250, "quiet nohz=off");
        i386_nohz.dynticks_active = Some(false);
        let mut haltpoll = guest("6.1.0-57-cloud-amd64", N::Full, 250, "quiet");
        haltpoll.cpuidle_driver = Some("haltpoll".into());
        haltpoll.dynticks_active = Some(true);
        let mut chatty = guest("6.1.0-57-cloud-amd64", N::Idle, 250, "quiet");
        chatty.dynticks_active = Some(true);
        let mut fine = chatty.clone();
        fine.cpuidle_driver = Some("none".into());
        let mut divided = rhel("2.6.18-398.el5");
        divided.cmdline = Some("ro quiet divider=10".into());
        let cases: [(&str, f64, f64, KernelFacts, &[&str]); 11] = [
            (
                "hpet with only tsc besides: no safe change",
                0.4,
                30.0,
                tsc_only,
                &[],
            ),
            (
                "2.6.22 i386 with NO_HZ, nohz=off",
                4.0,
                250.0,
                i386_nohz,
                &["remove_nohz_off"],
            ),
            (
                "RHEL 5.3",
                4.8,
                1000.0,
                rhel("2.6.18-128.el5"),
                &["upgrade_pre_nohz_kernel", "rhel5_divider"],
            ),
            (
                "RHEL 5.8",
                4.8,
                1000.0,
                rhel("2.6.18-308.el5"),
                &["upgrade_pre_nohz_kernel", "rhel5_divider"],
            ),
            (
                "RHEL 5.11 already divided",
                1.0,
                100.0,
                divided,
                &["upgrade_pre_nohz_kernel"],
            ),
            (
                "Debian 12 with nohz=off",
                5.3,
                650.0,
                guest("6.1.0-57-cloud-amd64", N::Full, 250, "quiet nohz=off"),
                &["remove_nohz_off"],
            ),
            (
                "idle=poll",
                99.3,
                485.0,
                guest("6.1.0-57-cloud-amd64", N::Full, 250, "quiet idle=poll"),
                &["remove_idle_poll"],
            ),
            ("haltpoll", 70.0, 300.0, haltpoll, &["tune_haltpoll"]),
            (
                "HPET clocksource",
                0.4,
                30.0,
                hpet,
                &["paravirt_clocksource"],
            ),
            (
                "tickless but chatty user space",
                1.2,
                400.0,
                chatty,
                &["find_user_space_wakeups"],
            ),
            ("tickless and quiet: nothing to do", 0.3, 30.0, fine, &[]),
        ];
        for (what, cpu, wakeups, facts, expected) in cases {
            let s = rules_with_facts(cpu, wakeups, facts);
            assert_eq!(rule_names(&s), expected, "{what}: {s:#?}");
        }
    }

    #[test]
    fn each_suggestion_says_what_its_change_takes() {
        use ChangeKind as K;
        use NohzBuilt as N;
        let rhel = |release: &str| guest(release, N::None, 1000, "ro quiet");
        let mut haltpoll = guest("6.1.0-57-cloud-amd64", N::Full, 250, "quiet");
        haltpoll.cpuidle_driver = Some("haltpoll".into());
        haltpoll.dynticks_active = Some(true);
        let mut hpet = guest("6.1.0-57-cloud-amd64", N::Full, 250, "quiet");
        hpet.clocksource = Some("hpet".into());
        let mut chatty = guest("6.1.0-57-cloud-amd64", N::Idle, 250, "quiet");
        chatty.dynticks_active = Some(true);
        chatty.cpuidle_driver = Some("none".into());
        let mut polled = test_window(1, 1.0, 50.0, None);
        polled.uses_kvm = Some(true);
        polled.host_halt_poll_ns = Some(200_000);
        let with_facts = |cpu: f64, wakeups: f64, facts: KernelFacts| {
            let mut window = test_window(1, cpu, wakeups, None);
            for interval in &mut window.intervals {
                interval.guest_idle_fraction = facts.idle_fraction;
            }
            window.facts = Some(facts);
            window
        };
        // (situation, window, (rule, kind) of each suggestion)
        type Case<'a> = (&'a str, Window, &'a [(&'a str, ChangeKind)]);
        let cases: [Case; 12] = [
            (
                "nohz=off on 2 vCPUs",
                test_window(2, 8.6, 572.0, Some("nohz=off")),
                &[
                    ("remove_nohz_off", K::BootParameter),
                    ("fewer_vcpus", K::VmConfig),
                ],
            ),
            (
                "idle=poll",
                test_window(1, 99.3, 485.0, Some("idle=poll")),
                &[("remove_idle_poll", K::BootParameter)],
            ),
            (
                "periodic, nothing known inside",
                test_window(1, 4.0, 1000.0, None),
                &[("check_guest_kernel", K::Investigate)],
            ),
            (
                "built without NO_HZ",
                with_facts(3.0, 297.0, guest("6.1.192", N::None, 300, "quiet")),
                &[("check_guest_kernel", K::KernelConfig)],
            ),
            (
                "RHEL 5.3",
                with_facts(4.8, 1000.0, rhel("2.6.18-128.el5")),
                &[
                    ("upgrade_pre_nohz_kernel", K::KernelUpgrade),
                    ("rhel5_divider", K::KernelUpgrade),
                ],
            ),
            (
                "RHEL 5.8",
                with_facts(4.8, 1000.0, rhel("2.6.18-308.el5")),
                &[
                    ("upgrade_pre_nohz_kernel", K::KernelUpgrade),
                    ("rhel5_divider", K::BootParameter),
                ],
            ),
            (
                "haltpoll",
                with_facts(70.0, 300.0, haltpoll),
                &[("tune_haltpoll", K::GuestSetting)],
            ),
            (
                "HPET clocksource",
                with_facts(0.4, 30.0, hpet),
                &[("paravirt_clocksource", K::BootParameter)],
            ),
            (
                "tickless, chatty user space",
                with_facts(1.2, 400.0, chatty),
                &[("find_user_space_wakeups", K::Investigate)],
            ),
            (
                "busy",
                test_window(1, 99.3, 485.0, None),
                &[("busy_or_polling", K::Investigate)],
            ),
            (
                "host halt polling",
                polled,
                &[("lower_host_halt_poll", K::HostSide)],
            ),
            ("tickless and quiet", test_window(1, 0.3, 38.0, None), &[]),
        ];
        for (what, window, expected) in cases {
            let got: Vec<(&str, ChangeKind)> = suggestions(window)
                .iter()
                .map(|s| (s.rule, s.kind))
                .collect();
            assert_eq!(got, expected, "{what}");
        }
    }

    #[test]
    fn no_advice_the_facts_already_refute() {
        let check = |facts: KernelFacts| {
            rules_with_facts(3.0, 297.0, facts)
                .into_iter()
                .find(|s| s.rule == "check_guest_kernel")
                .unwrap()
        };
        // A kernel built without NO_HZ at 100 Hz is not told that 100 Hz ticks less.
        let at_100 = check(guest("6.1.192", NohzBuilt::None, 100, "console=ttyS0"));
        assert!(
            at_100.change.contains("CONFIG_NO_HZ_IDLE=y"),
            "{}",
            at_100.change
        );
        assert!(
            !at_100.change.contains("CONFIG_HZ=100 ticks less"),
            "{}",
            at_100.change
        );
        let at_1000 = check(guest("6.1.192", NohzBuilt::None, 1000, "console=ttyS0"));
        assert!(
            at_1000.change.contains("CONFIG_HZ=100 ticks less"),
            "{}",
            at_1000.change
        );
        // Its configuration unreadable, but the tick running on every CPU with no `nohz=off`:
        // a kernel built without NO_HZ, told so, not the generic advice.
        let mut unreadable = guest("6.1.192", NohzBuilt::Unknown, 1000, "console=ttyS0");
        unreadable.config_hz = None;
        unreadable.dynticks_active = Some(false);
        let told = check(unreadable.clone());
        assert!(
            told.change
                .starts_with("Boot a kernel built with CONFIG_NO_HZ_IDLE=y instead of 6.1.192"),
            "{}",
            told.change
        );
        assert_eq!(told.confidence, Confidence::High);
        // ... unless its clocksource cannot drive one-shot timers: then a NO_HZ kernel ticks too.
        let mut on_jiffies = unreadable.clone();
        on_jiffies.clocksource = Some("jiffies".into());
        assert!(
            check(on_jiffies).change.starts_with("In the guest, run"),
            "the generic advice"
        );
        // With `nohz=off` it is that parameter's doing instead.
        unreadable.cmdline = Some("console=ttyS0 nohz=off".into());
        let rules = rule_names(&rules_with_facts(3.0, 297.0, unreadable));
        assert_eq!(rules, ["remove_nohz_off"]);
    }

    #[test]
    fn rhel5_before_5_8_is_told_to_update_first() {
        let old = rules_with_facts(
            4.8,
            1000.0,
            guest("2.6.18-128.el5", NohzBuilt::None, 1000, "quiet"),
        );
        let divider = old.iter().find(|s| s.rule == "rhel5_divider").unwrap();
        assert!(
            divider.change.starts_with("Update to RHEL/CentOS 5.8"),
            "{}",
            divider.change
        );
        assert!(divider.why.contains("can panic"));
        let new = rules_with_facts(
            4.8,
            1000.0,
            guest("2.6.18-308.el5", NohzBuilt::None, 1000, "quiet"),
        );
        let divider = new.iter().find(|s| s.rule == "rhel5_divider").unwrap();
        assert!(
            divider.change.starts_with("Add `divider=10`"),
            "{}",
            divider.change
        );
        // A tenth of the tick's cost remains.
        let waste = new
            .iter()
            .find(|s| s.rule == "upgrade_pre_nohz_kernel")
            .unwrap()
            .saving_cpu_pct
            .unwrap();
        assert!((divider.saving_cpu_pct.unwrap() - 0.9 * waste).abs() < 1e-9);
    }

    #[test]
    fn host_halt_polling_is_blamed_only_when_it_explains_the_cpu() {
        use Confidence::*;
        // (runs on KVM, host halt_poll_ns, host CPU % (1 vCPU), wake-ups/s, boot args,
        //  saving % and confidence when it fires)
        type Case = (
            Option<bool>,
            Option<u64>,
            f64,
            f64,
            Option<&'static str>,
            Option<(f64, Confidence)>,
        );
        let cases: [Case; 10] = [
            // 400 µs per wake-up against a 200 µs window: polling; at most 50 × 200 µs = 1 %.
            (Some(true), Some(200_000), 2.0, 50.0, None, Some((1.0, Low))),
            // 200 µs per wake-up: each wake-up polls its whole window.
            (
                Some(true),
                Some(200_000),
                1.0,
                50.0,
                None,
                Some((0.5, Medium)),
            ),
            // Under TCG, or where the agent could not tell, there is no KVM to tune.
            (Some(false), Some(200_000), 2.0, 50.0, None, None),
            (None, Some(200_000), 2.0, 50.0, None, None),
            (Some(true), Some(0), 2.0, 50.0, None, None),
            (Some(true), None, 2.0, 50.0, None, None),
            // 30 µs per wake-up at 1000 Hz: the tick explains it, not polling.
            (Some(true), Some(200_000), 3.0, 1000.0, None, None),
            // Within twice the tickless baseline: nothing to explain.
            (Some(true), Some(200_000), 0.6, 20.0, None, None),
            // 2 ms per wake-up: no halt polls that long; something else runs.
            (Some(true), Some(200_000), 4.0, 20.0, None, None),
            // idle=poll never halts, so KVM never polls for it.
            (
                Some(true),
                Some(200_000),
                99.0,
                10.0,
                Some("idle=poll"),
                None,
            ),
        ];
        for (uses_kvm, poll_ns, cpu, wakeups, args, expected) in cases {
            let mut window = test_window(1, cpu, wakeups, args);
            window.uses_kvm = uses_kvm;
            window.host_halt_poll_ns = poll_ns;
            let found = suggestions(window)
                .into_iter()
                .find(|s| s.rule == "lower_host_halt_poll");
            let got = found
                .as_ref()
                .map(|s| (s.saving_cpu_pct.unwrap(), s.confidence));
            match (got, expected) {
                (Some((saving, confidence)), Some((want, want_confidence))) => assert!(
                    (saving - want).abs() < 1e-9 && confidence == want_confidence,
                    "{uses_kvm:?} {poll_ns:?} {cpu} {wakeups}: {found:?}"
                ),
                (None, None) => {}
                _ => panic!("{uses_kvm:?} {poll_ns:?} {cpu} % {wakeups}/s {args:?}: {found:?}"),
            }
        }
        // Wake-ups counted over the whole process are not the vCPUs' own.
        let mut window = test_window(1, 2.0, 50.0, None);
        window.uses_kvm = Some(true);
        window.host_halt_poll_ns = Some(200_000);
        window.wakeups_from_vcpu_threads = false;
        assert!(
            !suggestions(window)
                .iter()
                .any(|s| s.rule == "lower_host_halt_poll")
        );
    }

    #[test]
    fn fewer_vcpus_follows_the_busiest_interval() {
        // A 4-vCPU nohz=off guest idling at 5 % per vCPU, with one busy interval.
        // (busiest interval in cores, vCPUs suggested)
        let cases = [(1.5, Some("Give it 2 vCPU(s) instead of 4")), (3.5, None)];
        for (peak_cores, expected) in cases {
            let mut window = test_window(4, 20.0, 600.0, Some("nohz=off"));
            window.intervals[2].host_cpu_s = peak_cores * window.intervals[2].length_s;
            let found = suggestions(window)
                .into_iter()
                .find(|s| s.rule == "fewer_vcpus");
            match expected {
                Some(text) => {
                    let s = found.unwrap_or_else(|| panic!("{peak_cores}: none"));
                    assert!(s.change.starts_with(text), "{}", s.change);
                    // Two of the four vCPUs' share of the waste.
                    assert!(
                        (s.saving_cpu_pct.unwrap() - (20.0 - 4.0 * 0.5) * 5.0 / 6.0 / 2.0).abs()
                            < 1e-9,
                        "{s:?}"
                    );
                }
                None => assert!(found.is_none(), "{peak_cores}: {found:?}"),
            }
        }
    }

    /// Measured polling (the agent read KVM's counters) decides alone: no window, baseline or
    /// cost per wake-up needed, and none of the inference's evidence makes up for its absence.
    #[test]
    fn measured_halt_polling_is_blamed_by_its_own_count() {
        // A 2-vCPU KVM guest idle at 6 % of a core, 50 wake-ups per vCPU per second (tickless).
        let window = |polled_pct: Option<f64>, poll_ns: Option<u64>| {
            let mut w = test_window(2, 6.0, 50.0, None);
            w.uses_kvm = Some(true);
            w.host_halt_poll_ns = poll_ns;
            for interval in &mut w.intervals {
                interval.halt_poll_s = polled_pct.map(|pct| pct / 100.0 * interval.length_s);
            }
            w
        };
        let found = |w: Window| {
            suggestions(w)
                .into_iter()
                .find(|s| s.rule == "lower_host_halt_poll")
        };
        let measured = found(window(Some(4.0), Some(200_000))).expect("4 % polled");
        assert_eq!(measured.confidence, Confidence::High);
        assert_eq!(measured.saving_cpu_pct, Some(4.0));
        assert!(
            measured.why.contains("4.00 % of a core polling"),
            "{}",
            measured.why
        );
        assert!(
            measured.change.contains("(now 200000)"),
            "{}",
            measured.change
        );
        // The host's setting unknown: the same fix, without its current value.
        let unknown = found(window(Some(4.0), None)).expect("measured without the setting");
        assert!(!unknown.change.contains("(now"), "{}", unknown.change);
        // Polling measured and small: nothing, whatever the inference would say.
        assert_eq!(found(window(Some(0.5), Some(200_000))), None);
        // Not measured, and the cost per wake-up (6 % / 2 vCPUs / 50 = 600 µs) is far from the
        // 200 µs window: the inference does not blame it either.
        assert_eq!(found(window(None, Some(200_000))), None);
    }
}
