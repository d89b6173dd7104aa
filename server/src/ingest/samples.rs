//! What each guest's sample of a report stores: the agent's own interval, or a longer one back
//! over reports that never arrived, from the VM process's running totals. Decided here, from the
//! totals the store held when the report's transaction began; the store writes what this says.

use std::collections::HashMap;

use super::process_totals::{self, Measured, Plausible, SampleSpan, StoredTotals};
use super::report::{CPU_TICK_SLACK_S, MAX_WAKEUPS_PER_VCPU_S, ValidReport};

/// The running totals stored for a host's guests before a report, by (hypervisor name, guest
/// identity): what makes a guest the same guest from one report to the next.
pub type PreviousTotals = HashMap<(String, String), StoredTotals>;

/// The sample of each of the report's guests, in the report's order.
pub fn sample_spans(report: &ValidReport, previous: &PreviousTotals) -> Vec<SampleSpan> {
    report
        .guests
        .iter()
        .map(|guest| {
            let span = process_totals::sample_span(
                previous.get(&(
                    guest.hypervisor.as_str().to_string(),
                    guest.identity.clone(),
                )),
                guest.totals.as_ref(),
                Measured {
                    start_ms: report.start_ms,
                    end_ms: report.end_ms,
                    length_ms: report.length_ms,
                    host_cpu_s: guest.host_cpu_s,
                    vcpu_wakeups: guest.vcpu_wakeups,
                },
                Plausible {
                    max_busy_cpus: guest.max_busy_cpus,
                    vcpus: guest.vcpus,
                    cpu_slack_s_per_cpu: CPU_TICK_SLACK_S,
                    max_wakeups_per_vcpu_s: MAX_WAKEUPS_PER_VCPU_S,
                },
            );
            if span.bridged {
                tracing::info!(
                    host = %report.host.name, guest = %guest.name, span_ms = span.length_ms,
                    "measured back over missing reports from the VM's running totals"
                );
            }
            span
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: i64 = 1_800_000_000_000;
    const BOOT: &str = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";

    /// A report of 10 s ending at NOW with two guests of one pid each: `web` (qemu, 0.8 s of
    /// CPU, 80.5 s in total) and `db` (qemu, by name only, 0.2 s of CPU, 20 s in total).
    fn report() -> ValidReport {
        let guest = |name: &str, uuid: Option<&str>, cpu_s: f64, total_s: f64| {
            json!({
                "hypervisor": "qemu", "name": name, "uuid": uuid, "pid": 42, "vcpus": 2,
                "host_cpu_seconds": cpu_s, "vcpu_wakeups": 1000, "wakeups_source": "vcpu_threads",
                "totals": {"start_ticks": 1234, "host_cpu_seconds": total_s, "vcpu_wakeups": 90000}
            })
        };
        let wire = json!({
            "agent": {"id": "m1", "run_id": "r1", "version": "0.1.0"},
            "seq": 3,
            "host": {"name": "hv1", "cpus": 8, "kernel": "6.1.0-57-amd64", "boot_id": BOOT},
            "interval": {"start_ms": NOW - 10_000, "end_ms": NOW, "length_ns": 10_000_000_000u64},
            "guests": [
                guest("web", Some("7d3b2c1a-0000-4000-8000-00000000abcd"), 0.8, 80.5),
                guest("db", None, 0.2, 20.0),
            ]
        });
        crate::ingest::validate(serde_json::from_value(wire).unwrap(), NOW).unwrap()
    }

    /// Totals stored 30 s before NOW (two reports of 10 s missing) for a guest's process.
    fn stored_30_s_ago(report: &ValidReport, guest: usize, total_s: f64) -> StoredTotals {
        StoredTotals {
            process_key: report.guests[guest]
                .totals
                .as_ref()
                .unwrap()
                .process_key
                .clone(),
            host_cpu_s: total_s,
            vcpu_wakeups: 87_000,
            at_ms: NOW - 30_000,
        }
    }

    #[test]
    fn each_guest_is_bridged_from_its_own_stored_totals_only() {
        let r = report();
        let web = ("qemu".to_string(), r.guests[0].identity.clone());
        let db = ("qemu".to_string(), r.guests[1].identity.clone());
        let as_measured = |cpu_s: f64| SampleSpan {
            length_ms: 10_000.0,
            host_cpu_s: cpu_s,
            vcpu_wakeups: 1000,
            bridged: false,
        };
        let bridged = |cpu_s: f64| SampleSpan {
            length_ms: 30_000.0,
            host_cpu_s: cpu_s,
            vcpu_wakeups: 3000,
            bridged: true,
        };
        let cases: Vec<(&str, PreviousTotals, [SampleSpan; 2])> = vec![
            (
                "nothing stored: both as measured",
                PreviousTotals::new(),
                [as_measured(0.8), as_measured(0.2)],
            ),
            (
                "web's totals stored: web bridged, db as measured",
                PreviousTotals::from([(web.clone(), stored_30_s_ago(&r, 0, 78.0))]),
                [bridged(2.5), as_measured(0.2)],
            ),
            (
                "both stored: each from its own",
                PreviousTotals::from([
                    (web.clone(), stored_30_s_ago(&r, 0, 78.0)),
                    (db.clone(), stored_30_s_ago(&r, 1, 19.0)),
                ]),
                [bridged(2.5), bridged(1.0)],
            ),
            (
                "a guest of the same identity under another hypervisor is another guest",
                PreviousTotals::from([(
                    ("xen".to_string(), web.1.clone()),
                    stored_30_s_ago(&r, 0, 78.0),
                )]),
                [as_measured(0.8), as_measured(0.2)],
            ),
        ];
        for (case, previous, expected) in cases {
            assert_eq!(sample_spans(&r, &previous), expected, "{case}");
        }
    }
}
