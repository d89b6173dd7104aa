//! The rules whose cause is a part of the VM other than its vCPUs: QEMU's I/O threads, its vhost
//! workers, its main loop. Their idle cost is not the guest kernel's, and their fix is not in the
//! guest. Each reads the split of the VM's host CPU over its idle intervals
//! ([`super::window::CpuSplit`]), as the agent measured it from the threads' run times.

use super::cause::Cause;
use super::change_kind::ChangeKind;
use super::suggestion::{Input, Suggestion};
use super::tick_mode::Confidence;
use super::window::CpuSplit;

/// A part of the VM other than its vCPUs that uses this much of a core while the guest idles,
/// in %, is worth a look: an idle QEMU's main loop measured here uses about 0.1 %.
pub const PART_MIN_CPU_PCT: f64 = 1.0;

/// The split over the idle intervals of a guest that idles at least half the time; `None`
/// otherwise (a busy guest's threads are working).
fn idle_split<'a>(input: &Input<'a>) -> Option<(&'a CpuSplit, f64)> {
    Some((input.split?, input.mostly_idle_share()?))
}

/// QEMU's I/O threads poll for new requests before they sleep (`poll-max-ns`, adaptive, up to
/// 32 µs by default): on a guest that keeps a trickle of I/O going, that polling is host CPU
/// taken while the guest idles.
pub fn iothread_polling(input: &Input) -> Option<Suggestion> {
    let (split, idle_share) = idle_split(input)?;
    if split.iothreads_pct < PART_MIN_CPU_PCT {
        return None;
    }
    Some(Suggestion {
        rule: "iothread_polling",
        cause: Cause::VmThreads,
        kind: ChangeKind::VmConfig,
        title: "Stop its I/O threads polling",
        change: "Turn off the I/O threads' polling: with libvirt, `virsh iothreadset <domain> <iothread id> --poll-max-ns 0 --live --config` (no restart); plain QEMU, `-object iothread,id=<id>,poll-max-ns=0`, or at run time `qom-set /objects/<id> poll-max-ns 0` on the monitor. Keep a small value instead where the guest's disk latency matters more than the host's CPU.".into(),
        why: format!(
            "While the guest idled, its I/O threads used {:.2} % of a core, its vCPUs {:.2} %: the host CPU goes to QEMU polling for I/O requests, not to the guest kernel.",
            split.iothreads_pct, split.vcpus_pct
        ),
        confidence: Confidence::Medium,
        saving_cpu_pct: Some(split.iothreads_pct * idle_share),
    })
}

/// vhost workers move the VM's network or storage traffic; one that works while the guest idles
/// either busy-polls (`poll-us` on a tap netdev) or carries traffic the guest keeps sending.
pub fn vhost_busy(input: &Input) -> Option<Suggestion> {
    let (split, _) = idle_split(input)?;
    if split.vhost_pct < PART_MIN_CPU_PCT {
        return None;
    }
    Some(Suggestion {
        rule: "vhost_busy",
        cause: Cause::VmThreads,
        kind: ChangeKind::Investigate,
        title: "Find what keeps its vhost workers busy",
        change: "On the host, look for busy polling on its network device: QEMU's `-netdev tap,...,poll-us=N` makes vhost-net poll for N µs; remove it (libvirt does not set it). Otherwise its traffic is the guest's: `ip -s link` in the guest, or `tcpdump` on its tap device, shows what it sends while idle.".into(),
        why: format!(
            "While the guest idled, its vhost workers used {:.2} % of a core, its vCPUs {:.2} %.",
            split.vhost_pct, split.vcpus_pct
        ),
        confidence: Confidence::Low,
        saving_cpu_pct: None,
    })
}

/// QEMU's main loop runs the emulated devices' timers and the display; an idle guest's costs
/// little unless a device polls.
pub fn emulator_busy(input: &Input) -> Option<Suggestion> {
    let (split, _) = idle_split(input)?;
    // Without KVM, the guest's timers are QEMU's own, run by its main loop: a guest that ticks
    // makes the main loop busy too (measured here under TCG: 1.24 % of a core for a `nohz=off`
    // guest), and the tick's rules say so.
    let tick_runs_the_main_loop =
        input.window.uses_kvm != Some(true) && input.classification.mode.is_wasteful();
    if split.emulator_pct < PART_MIN_CPU_PCT || tick_runs_the_main_loop {
        return None;
    }
    Some(Suggestion {
        rule: "emulator_busy",
        cause: Cause::VmThreads,
        kind: ChangeKind::Investigate,
        title: "Find what keeps QEMU's main loop busy",
        change: "On the host, `perf top -p <QEMU pid>` (or `perf record -g -p <pid>`) shows which device model runs. The usual ones: a USB tablet on an emulated UHCI/OHCI controller (put it on `qemu-xhci`, or drop it on a server), an audio device with an open stream, a connected VNC or SPICE client refreshing the screen.".into(),
        why: format!(
            "While the guest idled, QEMU's main loop and other emulator threads used {:.2} % of a core, its vCPUs {:.2} %: the cost is the VM's emulated hardware, not the guest kernel's tick.",
            split.emulator_pct, split.vcpus_pct
        ),
        confidence: Confidence::Low,
        saving_cpu_pct: None,
    })
}

#[cfg(test)]
mod tests {
    use crate::analysis::window::Parts;
    use crate::analysis::{Window, analyse_host, test_window};

    /// A 1-vCPU guest idle at `vcpus_pct` on its vCPUs, its other parts as given, in % of a
    /// core; without a split when `split` is false.
    fn window(
        vcpus_pct: f64,
        iothreads_pct: f64,
        vhost_pct: f64,
        emulator_pct: f64,
        split: bool,
    ) -> Window {
        let total = vcpus_pct + iothreads_pct + vhost_pct + emulator_pct;
        let mut w = test_window(1, total, 20.0, None);
        for interval in &mut w.intervals {
            let s = |pct: f64| pct / 100.0 * interval.length_s;
            interval.parts = split.then(|| Parts {
                vcpus_s: s(vcpus_pct),
                iothreads_s: s(iothreads_pct),
                vhost_s: s(vhost_pct),
            });
        }
        w
    }

    fn rules(window: Window) -> Vec<&'static str> {
        analyse_host(std::slice::from_ref(&window))
            .remove(0)
            .suggestions
            .iter()
            .map(|s| s.rule)
            .collect()
    }

    #[test]
    fn the_part_that_burns_gets_the_fix() {
        let cases: [(&str, Window, &[&str]); 9] = [
            ("a quiet VM", window(0.3, 0.0, 0.0, 0.1, true), &[]),
            (
                "an I/O thread that polls",
                window(0.3, 4.0, 0.0, 0.1, true),
                &["iothread_polling"],
            ),
            (
                "the same without a split: nothing to tell",
                window(0.3, 4.0, 0.0, 0.1, false),
                &[],
            ),
            (
                "a busy vhost worker",
                window(0.3, 0.0, 2.0, 0.1, true),
                &["vhost_busy"],
            ),
            (
                "a busy main loop",
                window(0.3, 0.0, 0.0, 3.0, true),
                &["emulator_busy"],
            ),
            (
                "a main loop busy with a TCG guest's tick: the tick's rules speak",
                {
                    let mut w = window(2.3, 0.0, 0.0, 1.2, true);
                    w.uses_kvm = Some(false);
                    for interval in &mut w.intervals {
                        interval.wakeups = (250.0 * interval.length_s) as u64;
                    }
                    w
                },
                &["check_guest_kernel"],
            ),
            (
                "the same on KVM: the main loop does not run the guest's timers there",
                {
                    let mut w = window(2.3, 0.0, 0.0, 1.2, true);
                    w.uses_kvm = Some(true);
                    for interval in &mut w.intervals {
                        interval.wakeups = (250.0 * interval.length_s) as u64;
                    }
                    w
                },
                &["check_guest_kernel", "emulator_busy"],
            ),
            ("just under the line", window(0.3, 0.9, 0.9, 0.9, true), &[]),
            (
                "busy: its threads are working",
                window(80.0, 10.0, 0.0, 5.0, true),
                &["busy_or_polling"],
            ),
        ];
        for (what, window, expected) in cases {
            assert_eq!(rules(window), expected, "{what}");
        }
    }

    #[test]
    fn the_split_is_over_idle_time_and_the_tick_waste_leaves_io_threads_out() {
        // A ticking guest (200 wake-ups a second) whose I/O thread polls at 4 % of a core.
        let mut w = window(3.0, 4.0, 0.0, 0.1, true);
        for interval in &mut w.intervals {
            interval.wakeups = (200.0 * interval.length_s) as u64;
        }
        let verdict = analyse_host(std::slice::from_ref(&w)).remove(0);
        let split = verdict.split.unwrap();
        assert!((split.iothreads_pct - 4.0).abs() < 1e-9, "{split:?}");
        assert!((split.emulator_pct - 0.1).abs() < 1e-9, "{split:?}");
        // 3.1 % of guest and main loop, less the default 0.5 % baseline: the I/O thread's 4 %
        // is not the tick's...
        let tick = &verdict.suggestions[0];
        assert_eq!(tick.rule, "check_guest_kernel");
        assert!(
            (tick.saving_cpu_pct.unwrap() - 2.6).abs() < 1e-9,
            "{tick:?}"
        );
        assert!(
            verdict.waste.reasoning.contains("4.00 % left out"),
            "{}",
            verdict.waste.reasoning
        );
        // ... but its own waste, which the guest's adds up: 2.6 + 4.
        assert!(
            (verdict.waste.wasted_cpu_pct - 6.6).abs() < 1e-9,
            "{}",
            verdict.waste.reasoning
        );
        assert!(
            verdict
                .waste
                .reasoning
                .contains("The VM's own threads 4.00 % (iothread_polling)"),
            "{}",
            verdict.waste.reasoning
        );
        let rules: Vec<&str> = verdict.suggestions.iter().map(|s| s.rule).collect();
        assert!(rules.contains(&"iothread_polling"), "{rules:?}");
    }
}
