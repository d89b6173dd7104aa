//! Running totals through `POST /api/v1/reports`: reports that never arrived leave no hole in a
//! guest's CPU time, a restarted VM is a new count and never a negative one, and a resent report
//! counts once.

use crate::common;

use axum::http::StatusCode;
use serde_json::{Value, json};

use common::server;
use tickscope_server::db::GuestScope;

const BOOT: &str = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";

/// Report `seq` of a 10 s agent, for one VM whose process started at `start_ticks`: `cpu_s` and
/// `wakeups` in the interval, `cpu_total` and `wakeups_total` since the process started.
fn report(seq: u64, start_ticks: u64, interval: (f64, u64), totals: (f64, u64)) -> Value {
    // One base for every report, read once: read per report, a millisecond passing between two
    // made the gap between them 30,001 ms instead of 30,000 (a test run failed so).
    static BASE_MS: std::sync::LazyLock<i64> =
        std::sync::LazyLock::new(|| tickscope_server::clock::now_ms() - 3_600_000);
    let end = *BASE_MS + (seq as i64 + 1) * 10_000;
    json!({
        "agent": {"id": "machine-1", "run_id": "run-1", "version": "0.1.0"},
        "seq": seq,
        "host": {"name": "hv1", "cpus": 4, "kernel": "6.1.0", "boot_id": BOOT},
        "interval": {"start_ms": end - 10_000, "end_ms": end, "length_ns": 10_000_000_000u64},
        "guests": [{
            "hypervisor": "qemu", "name": "web", "pid": 4242, "vcpus": 2,
            "host_cpu_seconds": interval.0, "vcpu_wakeups": interval.1,
            "wakeups_source": "vcpu_threads",
            "totals": {"start_ticks": start_ticks, "host_cpu_seconds": totals.0, "vcpu_wakeups": totals.1}
        }]
    })
}

/// The one guest these tests report.
async fn only_guest(s: &common::Server) -> tickscope_server::db::GuestRow {
    s.db.guests_in(GuestScope::Active { since_ms: 0 })
        .await
        .unwrap()
        .pop()
        .unwrap()
}

#[tokio::test]
async fn missing_reports_are_measured_from_the_totals_and_a_restart_counts_again() {
    let s = server().await;
    let token = Some(s.agent_token.as_str());
    // 0.5 s of CPU and 1,000 wake-ups every 10 s. Reports 2 and 3 never arrive (dropped from
    // an overflowing spool), report 4 is sent twice, then the VM restarts (new start time).
    let sent = [
        report(0, 100, (0.5, 1_000), (10.0, 50_000)),
        report(1, 100, (0.5, 1_000), (10.5, 51_000)),
        report(4, 100, (0.5, 1_000), (12.0, 54_000)),
        report(4, 100, (0.5, 1_000), (12.0, 54_000)),
        report(5, 9_000, (0.25, 400), (0.3, 450)),
    ];
    for r in &sent {
        assert_eq!(s.post_report(token, r).await.status, StatusCode::OK);
    }

    let guest = only_guest(&s).await;
    let mut samples = s.db.recent_samples(guest.id, 10).await.unwrap();
    samples.reverse();
    let got: Vec<(f64, f64, i64)> = samples
        .iter()
        .map(|x| (x.length_ms, x.host_cpu_s, x.vcpu_wakeups))
        .collect();
    assert_eq!(
        got,
        [
            (10_000.0, 0.5, 1_000),
            (10_000.0, 0.5, 1_000),
            // Back to the end of report 1: 30 s, all the CPU and wake-ups of reports 2 to 4.
            (30_000.0, 1.5, 3_000),
            // A new process: the agent's own interval, not 0.3 − 12.0.
            (10_000.0, 0.25, 400),
        ]
    );
    let cpu_s: f64 = samples.iter().map(|x| x.host_cpu_s).sum();
    assert!((cpu_s - 2.75).abs() < 1e-9, "{cpu_s}");
}

#[tokio::test]
async fn a_report_that_arrives_late_does_not_set_the_totals_back() {
    let s = server().await;
    let token = Some(s.agent_token.as_str());
    // Report 2 is held up and arrives after report 3, which measured back over it.
    for r in [
        report(0, 100, (0.5, 1_000), (10.0, 50_000)),
        report(1, 100, (0.5, 1_000), (10.5, 51_000)),
        report(3, 100, (0.5, 1_000), (11.5, 53_000)),
        report(2, 100, (0.5, 1_000), (11.0, 52_000)),
    ] {
        assert_eq!(s.post_report(token, &r).await.status, StatusCode::OK);
    }
    // What `/metrics` counts from, kept in memory: report 3's totals, not the late report's.
    let kept = |s: &common::Server| {
        let published = s.state.fleet.published();
        let now = tickscope_server::clock::now_ms();
        let guests: Vec<_> = published.ranked(now).map(|g| g.process_totals).collect();
        assert_eq!(guests.len(), 1);
        guests[0].map(|t| (t.cpu_s_total, t.wakeups_total))
    };
    assert_eq!(kept(&s), Some((11.5, 53_000)));
    let r = report(4, 100, (0.5, 1_000), (12.0, 54_000));
    assert_eq!(s.post_report(token, &r).await.status, StatusCode::OK);
    assert_eq!(kept(&s), Some((12.0, 54_000)));
    let guest = only_guest(&s).await;
    let newest = &s.db.recent_samples(guest.id, 1).await.unwrap()[0];
    // Report 4 follows report 3, whose totals stayed: its own 10 s, not 20 s back to report 2.
    assert_eq!(
        (newest.length_ms, newest.host_cpu_s, newest.vcpu_wakeups),
        (10_000.0, 0.5, 1_000)
    );
}

#[tokio::test]
async fn reports_without_totals_are_stored_as_measured() {
    let s = server().await;
    let token = Some(s.agent_token.as_str());
    for seq in [0, 3] {
        let mut r = report(seq, 100, (0.5, 1_000), (0.0, 0));
        r["guests"][0].as_object_mut().unwrap().remove("totals");
        assert_eq!(s.post_report(token, &r).await.status, StatusCode::OK);
    }
    let guest = only_guest(&s).await;
    let lengths: Vec<f64> =
        s.db.recent_samples(guest.id, 10)
            .await
            .unwrap()
            .iter()
            .map(|x| x.length_ms)
            .collect();
    assert_eq!(lengths, [10_000.0, 10_000.0]);
}

#[tokio::test]
async fn totals_are_held_to_what_the_vm_can_use_not_to_the_whole_host() {
    // A 2-vCPU VM on a 64-CPU host; reports 1 and 2 never arrive, so report 3 reaches back 30 s,
    // in which the VM can keep at most 2 + 4 cores busy: 180 s and a little tick slack.
    for (cpu_total, bridged) in [(150.0, true), (200.0, false)] {
        let s = server().await;
        let token = Some(s.agent_token.as_str());
        for (seq, totals) in [(0, (10.0, 50_000)), (3, (10.0 + cpu_total, 53_000))] {
            let mut r = report(seq, 100, (0.5, 1_000), totals);
            r["host"]["cpus"] = json!(64);
            assert_eq!(s.post_report(token, &r).await.status, StatusCode::OK);
        }
        let guest = only_guest(&s).await;
        let newest = &s.db.recent_samples(guest.id, 1).await.unwrap()[0];
        // The reports are made a few milliseconds apart, so the span is about 30 s.
        let got = (newest.length_ms > 29_000.0, newest.host_cpu_s);
        let expected = if bridged {
            (true, cpu_total)
        } else {
            (false, 0.5)
        };
        assert_eq!(got, expected, "{cpu_total} s over 30 s");
    }
}
