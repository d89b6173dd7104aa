//! Rollups and retention: a guest's history read from rollups is what its raw samples gave, and
//! retention deletes only what it should.

use crate::common;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use common::server;
use tickscope_server::analysis::history::Summary;
use tickscope_server::db::{FIVE_MINUTES_MS, HOUR_MS};
use tickscope_server::domain::GuestId;
use tickscope_server::fleet::History;
use tickscope_server::ingest;
use tickscope_server::retention::{self, Retention};

const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 24 * HOUR_MS;
/// Reports every two minutes: enough samples per five-minute window, and a quick fill.
const STEP_MS: i64 = 2 * MINUTE_MS;

/// One report every two minutes for `days` up to `now_ms`, of a `nohz=off` guest that idles at
/// about 5 % of a core and works at 80 % for 20 minutes every 6 hours, and a tickless one.
async fn fill(s: &common::Server, now_ms: i64, days: i64) {
    let token = s.db.tokens().await.unwrap()[0].id;
    let start_ms = now_ms - days * DAY_MS;
    for (seq, end_ms) in (start_ms..now_ms).step_by(STEP_MS as usize).enumerate() {
        let minute = (end_ms - start_ms) / MINUTE_MS;
        let busy = minute % 360 < 20;
        // A little variation from report to report, so that minima and maxima mean something.
        let wobble = (seq % 7) as f64 * 0.1;
        let ticker_cpu_pct = if busy { 80.0 } else { 5.0 + wobble };
        let guests: Vec<Value> = vec![
            sample(
                "ticker",
                1,
                ticker_cpu_pct,
                640.0 + wobble,
                Some("nohz=off"),
            ),
            sample("quiet", 2, 0.4 + wobble / 10.0, 38.0, None),
        ];
        let report = json!({
            "agent": {"id": "machine-1", "run_id": "run-1", "version": "0.1.0"},
            "seq": seq,
            "host": {"name": "hv1", "cpus": 8, "kernel": "6.1.0"},
            "interval": {"start_ms": end_ms - STEP_MS, "end_ms": end_ms, "length_ns": STEP_MS * 1_000_000},
            "guests": guests
        });
        let valid = ingest::validate(serde_json::from_value(report).unwrap(), end_ms).unwrap();
        s.state
            .ingest_report(std::sync::Arc::new(valid), token, end_ms)
            .await
            .unwrap();
    }
}

fn sample(name: &str, vcpus: u32, cpu_pct: f64, wakeups: f64, args: Option<&str>) -> Value {
    json!({
        "hypervisor": "qemu", "name": name, "pid": 4000 + vcpus, "vcpus": vcpus,
        "host_cpu_seconds": cpu_pct / 100.0 * 120.0,
        "vcpu_wakeups": (wakeups * f64::from(vcpus) * 120.0) as u64,
        "wakeups_source": "vcpu_threads", "boot_args": args
    })
}

/// Each guest's history from `from_ms` summed per hour.
async fn hourly(s: &common::Server, now_ms: i64, from_ms: i64) -> BTreeMap<(i64, i64), Summary> {
    let mut out = BTreeMap::new();
    for guest_id in [1, 2] {
        let guest = s
            .state
            .fleet
            .guest(GuestId(guest_id), now_ms)
            .await
            .unwrap()
            .unwrap();
        let history = History::load(&s.db, GuestId(guest_id), from_ms, now_ms + 1)
            .await
            .unwrap();
        for (start_ms, summary) in history.summaries(&guest, from_ms) {
            out.entry((guest_id, start_ms.div_euclid(HOUR_MS) * HOUR_MS))
                .or_insert_with(Summary::default)
                .add(&summary);
        }
    }
    out
}

fn assert_close(what: &str, a: f64, b: f64) {
    assert!(
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
        "{what}: {a} != {b}"
    );
}

fn assert_same(before: &BTreeMap<(i64, i64), Summary>, after: &BTreeMap<(i64, i64), Summary>) {
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (key, b) in before {
        let a = &after[key];
        let at = format!("guest {} hour {}", key.0, key.1);
        assert_eq!(a.samples, b.samples, "{at}");
        assert_eq!(a.wakeups, b.wakeups, "{at}");
        for (name, x, y) in [
            ("length_s", a.length_s, b.length_s),
            ("vcpu_s", a.vcpu_s, b.vcpu_s),
            ("host_cpu_s", a.host_cpu_s, b.host_cpu_s),
            ("idle_s", a.idle_s, b.idle_s),
            ("busy_s", a.busy_s, b.busy_s),
            ("wasted_cpu_s", a.wasted_cpu_s, b.wasted_cpu_s),
            (
                "min_cpu_pct",
                a.min_cpu_pct.unwrap(),
                b.min_cpu_pct.unwrap(),
            ),
            (
                "max_cpu_pct",
                a.max_cpu_pct.unwrap(),
                b.max_cpu_pct.unwrap(),
            ),
        ] {
            assert_close(&format!("{at} {name}"), x, y);
        }
    }
}

#[tokio::test]
async fn history_from_rollups_is_what_the_raw_samples_gave_and_retention_deletes_only_the_old() {
    let s = server().await;
    let now = tickscope_server::clock::now_ms();
    fill(&s, now, 3).await;
    // Every analysis the reports asked for, done: the baseline the windows are priced against
    // must not move between the two readings.
    s.state.fleet.caught_up().await;
    let from = now - 4 * DAY_MS;
    let before = hourly(&s, now, from).await;
    let ticker = s.state.fleet.guest(GuestId(1), now).await.unwrap().unwrap();
    let history = History::load(&s.db, GuestId(1), now - 30 * DAY_MS, now + 1)
        .await
        .unwrap();
    let so_far_before = history.waste_so_far(&ticker, now);
    let month_before = history.figures(&ticker, now - 30 * DAY_MS, 6 * HOUR_MS);
    assert!(so_far_before.last_7d.wasted_core_hours > 0.0);
    let counts_before = s.db.stored_counts().await.unwrap();
    assert_eq!(counts_before.samples, 2 * 3 * DAY_MS / STEP_MS);

    // Raw for 2 hours, five-minute rollups for a day, hourly ones after.
    let keep = Retention {
        raw_ms: 2 * HOUR_MS,
        five_minute_ms: DAY_MS,
        hourly_ms: 400 * DAY_MS,
    };
    let outcome = retention::run(&s.state, keep, now).await.unwrap();
    assert_eq!(outcome.guests, 2);
    let counts = s.db.stored_counts().await.unwrap();
    let raw_before = (now - 2 * HOUR_MS).div_euclid(FIVE_MINUTES_MS) * FIVE_MINUTES_MS;
    let merged_before = (now - DAY_MS).div_euclid(HOUR_MS) * HOUR_MS;
    // Only the last two hours (and a bit) of raw samples are left, and their reports.
    let raw_left = 2 * (now - raw_before).div_euclid(STEP_MS);
    assert!(
        (counts.samples - raw_left).abs() <= 2,
        "{counts:?}, {raw_left}"
    );
    assert_eq!(
        outcome.samples_deleted as i64,
        counts_before.samples - counts.samples
    );
    assert!((counts.reports - raw_left / 2).abs() <= 1, "{counts:?}");
    // Five-minute rows between the day and the raw cut, hourly rows before.
    let expected_5m = 2 * (raw_before - merged_before) / FIVE_MINUTES_MS;
    assert_eq!(counts.rollups_5m, expected_5m, "{counts:?}");
    assert!(counts.rollups_1h >= 2 * 47, "{counts:?}");

    // Per hour: the same sums, minima, maxima and waste as before.
    assert_same(&before, &hourly(&s, now, from).await);
    let history = History::load(&s.db, GuestId(1), now - 30 * DAY_MS, now + 1)
        .await
        .unwrap();
    let so_far = history.waste_so_far(&ticker, now);
    for (a, b) in [
        (so_far.last_24h, so_far_before.last_24h),
        (so_far.last_7d, so_far_before.last_7d),
    ] {
        assert_close("wasted", a.wasted_core_hours, b.wasted_core_hours);
        assert_close("measured", a.measured_hours, b.measured_hours);
        assert_close("idle", a.idle_hours, b.idle_hours);
    }
    let month = history.figures(&ticker, now - 30 * DAY_MS, 6 * HOUR_MS);
    assert_eq!(month.len(), month_before.len());
    for ((t1, f1), (t2, f2)) in month.iter().zip(&month_before) {
        assert_eq!(t1, t2);
        assert_close("wasted", f1.wasted_cpu_pct, f2.wasted_cpu_pct);
        assert_close("cpu", f1.host_cpu_pct.unwrap(), f2.host_cpu_pct.unwrap());
        assert_close("idle", f1.idle_share.unwrap(), f2.idle_share.unwrap());
    }

    // A second run finds nothing to do.
    let again = retention::run(&s.state, keep, now).await.unwrap();
    assert_eq!((again.guests, again.samples_deleted), (0, 0));
    assert_eq!(s.db.stored_counts().await.unwrap(), counts);

    // Hourly rollups kept for two days: the older ones go, nothing else.
    let shorter = Retention {
        hourly_ms: 2 * DAY_MS,
        ..keep
    };
    retention::run(&s.state, shorter, now).await.unwrap();
    let after = s.db.stored_counts().await.unwrap();
    assert_eq!(after.samples, counts.samples);
    assert_eq!(after.rollups_5m, counts.rollups_5m);
    assert!(after.rollups_1h < counts.rollups_1h);
    let kept = hourly(&s, now, now - 2 * DAY_MS).await;
    let expected: BTreeMap<_, _> = before
        .into_iter()
        .filter(|((_, hour), _)| *hour >= now - 2 * DAY_MS)
        .collect();
    assert_same(&expected, &kept);
}

#[tokio::test]
async fn the_retention_and_the_rollups_are_looked_up_by_index() {
    let s = server().await;
    let plans = s.db.rollup_query_plans().await.unwrap();
    eprintln!("{plans:#?}");
    // A plan of neither backend's wording would pass the scan checks below without meaning it.
    assert!(
        plans
            .iter()
            .any(|step| step.contains("SEARCH") || step.contains("Index")),
        "no index in {plans:?}"
    );
    for step in &plans {
        assert!(
            !step.starts_with("SCAN s")
                && !step.starts_with("SCAN rollups")
                && !step.contains("Seq Scan"),
            "full scan: {step}"
        );
    }
}

#[test]
fn retention_shorter_than_the_pages_read_is_refused() {
    let ok = Retention::default();
    assert!(ok.check().is_ok());
    for bad in [
        Retention {
            raw_ms: HOUR_MS,
            ..ok
        },
        Retention {
            five_minute_ms: 7 * DAY_MS,
            ..ok
        },
        Retention {
            hourly_ms: ok.five_minute_ms - 1,
            ..ok
        },
    ] {
        assert!(bad.check().is_err(), "{bad:?}");
    }
}

#[tokio::test]
async fn the_samples_around_a_kernel_change_stay_to_measure_it() {
    let s = server().await;
    let token = s.db.tokens().await.unwrap()[0].id;
    let now = tickscope_server::clock::now_ms();
    let start = now - 3 * DAY_MS;
    let upgraded_at = now - 36 * HOUR_MS;
    for (seq, end_ms) in (start..now).step_by(STEP_MS as usize).enumerate() {
        let (release, cpu_pct, wakeups) = if end_ms < upgraded_at {
            ("5.10.0-30-amd64", 5.3, 640.0)
        } else {
            ("6.1.0-57-amd64", 0.4, 38.0)
        };
        let mut guest = sample("ticker", 1, cpu_pct, wakeups, None);
        guest["facts"] = json!({"source": "probe_channel", "received_ms": end_ms, "facts": {
            "collected_ms": end_ms, "kernel_release": release, "idle_fraction": 0.99,
            "idle_measured_s": 120.0, "cpus": 1
        }});
        let report = json!({
            "agent": {"id": "machine-1", "run_id": "run-1", "version": "0.1.0"},
            "seq": seq,
            "host": {"name": "hv1", "cpus": 8, "kernel": "6.1.0"},
            "interval": {"start_ms": end_ms - STEP_MS, "end_ms": end_ms, "length_ns": STEP_MS * 1_000_000},
            "guests": [guest]
        });
        let valid = ingest::validate(serde_json::from_value(report).unwrap(), end_ms).unwrap();
        s.state
            .ingest_report(std::sync::Arc::new(valid), token, end_ms)
            .await
            .unwrap();
    }
    s.state.fleet.caught_up().await;
    let before = tickscope_server::fleet::changes(&s.db, Some(GuestId(1)), now)
        .await
        .unwrap();
    let change = before.get(&GuestId(1)).expect("the upgrade is measured");
    assert!(
        change.cpu_before_pct > 4.0 && change.cpu_after_pct < 1.0,
        "{change:?}"
    );

    let keep = Retention {
        raw_ms: 2 * HOUR_MS,
        five_minute_ms: DAY_MS,
        hourly_ms: 400 * DAY_MS,
    };
    retention::run(&s.state, keep, now).await.unwrap();
    let after = tickscope_server::fleet::changes(&s.db, Some(GuestId(1)), now)
        .await
        .unwrap();
    assert_eq!(after, before, "measured the same from the samples kept raw");
    // Only those: about two hours and a quarter of 2-minute samples, and the last two hours.
    let samples = s.db.stored_counts().await.unwrap().samples;
    assert!((120..=140).contains(&samples), "{samples} samples left");
    // A second run keeps them, and deletes no report they refer to.
    retention::run(&s.state, keep, now).await.unwrap();
    assert_eq!(s.db.stored_counts().await.unwrap().samples, samples);
    let history = History::load(&s.db, GuestId(1), now - 7 * DAY_MS, now + 1)
        .await
        .unwrap();
    let guest = s.state.fleet.guest(GuestId(1), now).await.unwrap().unwrap();
    assert!(history.waste_so_far(&guest, now).last_7d.measured_hours > 71.0);
}
