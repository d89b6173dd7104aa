//! What a guest's sample measures, from its VM process's running totals.
//!
//! An agent sends each interval's CPU time and wake-ups as differences between two of its own
//! cycles, and the process's running totals with them. While reports arrive one after another
//! the differences are used as they are: the agent took them over exactly the interval, with a
//! monotonic clock. When reports went missing between two that did arrive (a spool that
//! overflowed, an agent that was down), the totals measure the whole gap, so the CPU the VM used
//! meanwhile is still counted and its rate is still right. Totals of another process (the VM
//! restarted, or the host rebooted) or totals that fell are a new count, never a negative one.

use super::interval::MAX_INTERVAL_MS;

/// A VM process's totals as the server last stored them.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTotals {
    /// Host boot id, pid, process start time and wake-up source: what the totals count for.
    pub process_key: String,
    pub host_cpu_s: f64,
    pub vcpu_wakeups: i64,
    /// End of the interval the totals were read at, on the agent's clock.
    pub at_ms: i64,
}

/// A VM process's totals as a report brings them.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportedTotals {
    pub process_key: String,
    pub host_cpu_s: f64,
    pub vcpu_wakeups: i64,
}

/// One interval of one guest, as the agent measured it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub start_ms: i64,
    pub end_ms: i64,
    pub length_ms: f64,
    pub host_cpu_s: f64,
    pub vcpu_wakeups: i64,
}

/// What the sample stores: the agent's interval, or a longer one back to the previous totals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleSpan {
    pub length_ms: f64,
    pub host_cpu_s: f64,
    pub vcpu_wakeups: i64,
    /// Whether the sample reaches back over reports that never arrived.
    pub bridged: bool,
}

/// Limits a difference of totals must keep to be believed, the same ones a report's own figures
/// are held to at the edge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plausible {
    /// The most cores the VM can keep busy at once (`ingest::max_busy_cpus`).
    pub max_busy_cpus: u32,
    pub vcpus: u32,
    pub cpu_slack_s_per_cpu: f64,
    pub max_wakeups_per_vcpu_s: f64,
}

/// The sample for one guest in one report.
pub fn sample_span(
    previous: Option<&StoredTotals>,
    now: Option<&ReportedTotals>,
    measured: Measured,
    limits: Plausible,
) -> SampleSpan {
    let as_measured = SampleSpan {
        length_ms: measured.length_ms,
        host_cpu_s: measured.host_cpu_s,
        vcpu_wakeups: measured.vcpu_wakeups,
        bridged: false,
    };
    let (Some(previous), Some(now)) = (previous, now) else {
        return as_measured;
    };
    // Reports arrive in order, so the previous totals end where this interval starts unless
    // some went missing. Totals from later than this interval's start (a host clock that was set
    // back) bridge nothing.
    let gap_ms = measured.start_ms - previous.at_ms;
    let span_ms = measured.end_ms - previous.at_ms;
    let same_process = previous.process_key == now.process_key;
    let counted_on =
        now.host_cpu_s >= previous.host_cpu_s && now.vcpu_wakeups >= previous.vcpu_wakeups;
    if !same_process || !counted_on || gap_ms <= 0 || span_ms as f64 > MAX_INTERVAL_MS {
        return as_measured;
    }
    let host_cpu_s = now.host_cpu_s - previous.host_cpu_s;
    let vcpu_wakeups = now.vcpu_wakeups - previous.vcpu_wakeups;
    let span_s = span_ms as f64 / 1000.0;
    let max_cpu_s = (span_s + limits.cpu_slack_s_per_cpu) * f64::from(limits.max_busy_cpus);
    let max_wakeups = limits.max_wakeups_per_vcpu_s * f64::from(limits.vcpus) * span_s;
    if host_cpu_s > max_cpu_s || vcpu_wakeups as f64 > max_wakeups {
        return as_measured;
    }
    SampleSpan {
        length_ms: span_ms as f64,
        host_cpu_s,
        vcpu_wakeups,
        bridged: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Plausible = Plausible {
        max_busy_cpus: 4,
        vcpus: 2,
        cpu_slack_s_per_cpu: 0.05,
        max_wakeups_per_vcpu_s: 1_000_000.0,
    };

    fn stored(key: &str, cpu: f64, wakeups: i64, at_ms: i64) -> StoredTotals {
        StoredTotals {
            process_key: key.into(),
            host_cpu_s: cpu,
            vcpu_wakeups: wakeups,
            at_ms,
        }
    }

    fn reported(key: &str, cpu: f64, wakeups: i64) -> ReportedTotals {
        ReportedTotals {
            process_key: key.into(),
            host_cpu_s: cpu,
            vcpu_wakeups: wakeups,
        }
    }

    /// The agent's interval 50..60 s: 0.5 s of CPU and 1,000 wake-ups.
    const MEASURED: Measured = Measured {
        start_ms: 50_000,
        end_ms: 60_000,
        length_ms: 10_003.0,
        host_cpu_s: 0.5,
        vcpu_wakeups: 1_000,
    };

    fn measured() -> SampleSpan {
        SampleSpan {
            length_ms: 10_003.0,
            host_cpu_s: 0.5,
            vcpu_wakeups: 1_000,
            bridged: false,
        }
    }

    #[test]
    fn samples_follow_the_totals_only_across_missing_reports() {
        let p = "boot:42:100:vcpu_threads";
        let cases: [(
            &str,
            Option<StoredTotals>,
            Option<ReportedTotals>,
            SampleSpan,
        ); 9] = [
            (
                "first report of a guest",
                None,
                Some(reported(p, 10.0, 5_000)),
                measured(),
            ),
            (
                "an agent that sends no totals",
                Some(stored(p, 9.5, 4_000, 50_000)),
                None,
                measured(),
            ),
            (
                "the previous report ended where this one starts",
                Some(stored(p, 9.5, 4_000, 50_000)),
                Some(reported(p, 10.0, 5_000)),
                measured(),
            ),
            (
                "two reports of 10 s went missing",
                Some(stored(p, 7.0, 2_000, 30_000)),
                Some(reported(p, 10.0, 5_000)),
                SampleSpan {
                    length_ms: 30_000.0,
                    host_cpu_s: 3.0,
                    vcpu_wakeups: 3_000,
                    bridged: true,
                },
            ),
            (
                "the VM restarted: another process, totals from zero",
                Some(stored(p, 900.0, 90_000, 30_000)),
                Some(reported("boot:42:7000:vcpu_threads", 0.6, 1_100)),
                measured(),
            ),
            (
                "the same pid and start time after a host reboot",
                Some(stored(p, 900.0, 9, 30_000)),
                Some(reported("boot2:42:100:vcpu_threads", 1000.0, 1_100)),
                measured(),
            ),
            (
                "a vCPU thread ended and the wake-up total fell",
                Some(stored(p, 7.0, 9_000, 30_000)),
                Some(reported(p, 10.0, 5_000)),
                measured(),
            ),
            (
                "the host clock was set back: the previous totals look later",
                Some(stored(p, 7.0, 2_000, 70_000)),
                Some(reported(p, 10.0, 5_000)),
                measured(),
            ),
            (
                "more CPU than the VM can use in 30 s (4 CPUs)",
                Some(stored(p, 7.0, 2_000, 30_000)),
                Some(reported(p, 200.0, 5_000)),
                measured(),
            ),
        ];
        for (case, previous, now, expected) in cases {
            let got = sample_span(previous.as_ref(), now.as_ref(), MEASURED, LIMITS);
            assert_eq!(got, expected, "{case}");
        }
    }

    #[test]
    fn a_gap_longer_than_a_day_is_not_bridged() {
        let p = "boot:42:100:vcpu_threads";
        let previous = stored(p, 1.0, 0, MEASURED.end_ms - 86_400_001);
        let got = sample_span(
            Some(&previous),
            Some(&reported(p, 2.0, 10)),
            MEASURED,
            LIMITS,
        );
        assert_eq!(got, measured());
    }
}
