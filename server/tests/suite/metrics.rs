//! `/metrics`: every active guest for Prometheus, behind a token, in the format the scraper asks
//! for.

use crate::common;

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use prometheus_parse::{Scrape, Value};
use serde_json::json;

use common::{fleet_report, guest, report, server};
use tickscope_server::metrics::format::PROMETHEUS_ACCEPT;

/// `GET /metrics` with the viewer token and `accept`: status, Content-Type, Vary and body.
async fn scrape(s: &common::Server, accept: Option<&str>) -> (StatusCode, String, String, String) {
    let mut request = Request::builder()
        .uri("/metrics")
        .header(header::AUTHORIZATION, format!("Bearer {}", s.viewer_token));
    if let Some(accept) = accept {
        request = request.header(header::ACCEPT, accept);
    }
    let reply = s.send(request.body(Body::empty()).unwrap()).await;
    (reply.status, reply.content_type, reply.vary, reply.body)
}

/// Parses the classic text format (what `prometheus-parse` reads).
fn parse(body: &str) -> Scrape {
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("parses as Prometheus text")
}

fn value(s: &prometheus_parse::Sample) -> f64 {
    match s.value {
        Value::Gauge(v) | Value::Counter(v) | Value::Untyped(v) => v,
        ref other => panic!("{} is {other:?}", s.metric),
    }
}

fn samples<'a>(scrape: &'a Scrape, name: &str) -> Vec<&'a prometheus_parse::Sample> {
    scrape.samples.iter().filter(|s| s.metric == name).collect()
}

/// The families a guest's measurements are in.
const MEASURED: [&str; 6] = [
    "tickscope_guest_cpu_cores",
    "tickscope_guest_wasted_cpu_cores",
    "tickscope_guest_wakeups_per_vcpu_per_second",
    "tickscope_guest_vcpus",
    "tickscope_guest_cpu_seconds_total",
    "tickscope_guest_vcpu_wakeups_total",
];

#[tokio::test]
async fn metrics_hold_every_guest_and_the_servers_own_counters() {
    let s = server().await;
    let mut report = fleet_report(1);
    // A hostile name: quotes and a backslash must be escaped in label values.
    report["guests"][0]["name"] = json!("web \"01\"\\ <x>");
    // ticker-1's agent sends its VM process's totals.
    report["host"]["boot_id"] = json!("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
    report["guests"][1]["totals"] = json!({
        "start_ticks": 100, "host_cpu_seconds": 1234.5, "vcpu_wakeups": 987_654_321u64,
    });
    assert_eq!(
        s.post_report(Some(&s.agent_token), &report).await.status,
        StatusCode::OK
    );
    // A refused report counts too.
    let refused = s
        .post_report(Some(&s.agent_token), &json!({"seq": -1}))
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);

    let unauthorised = s.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(unauthorised.status, StatusCode::UNAUTHORIZED);
    let agent = s
        .call(Method::GET, "/metrics", Some(&s.agent_token), None)
        .await;
    assert_eq!(agent.status, StatusCode::FORBIDDEN);

    // curl, promtool: no Accept header, or */*: the classic format.
    let (status, content_type, vary, body) = scrape(&s, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert_eq!(vary, "Accept, Accept-Encoding");
    assert!(
        !body.contains("# EOF") && !body.contains("# UNIT"),
        "{body}"
    );
    // promtool reads a counter's HELP and TYPE on the `_total` name.
    assert!(body.contains("# TYPE tickscope_ingest_reports_total counter\n"));
    assert!(body.contains("# HELP tickscope_guest_cpu_seconds_total "));
    let scrape_ = parse(&body);

    for name in MEASURED
        .iter()
        .take(4)
        .chain(["tickscope_guest_info"].iter())
    {
        let mut guests: Vec<&str> = samples(&scrape_, name)
            .iter()
            .map(|s| s.labels.get("guest").unwrap())
            .collect();
        guests.sort();
        // The parser hands label values back as written: escaped as the format wants.
        assert_eq!(
            guests,
            ["ticker-1", "ticker-2", r#"web \"01\"\\ <x>"#],
            "{name}"
        );
    }
    for sample in &scrape_.samples {
        // No guest has a uuid here: the label is left out, not sent empty.
        assert!(sample.labels.values().all(|v| !v.is_empty()), "{sample:?}");
        assert!(sample.labels.get("uuid").is_none(), "{sample:?}");
        // The verdict is on the info series only.
        if MEASURED.contains(&sample.metric.as_str()) {
            assert!(sample.labels.get("tick_mode").is_none(), "{sample:?}");
        }
    }
    let of = |name: &str, guest: &str| {
        *samples(&scrape_, name)
            .iter()
            .find(|s| s.labels.get("guest") == Some(guest))
            .unwrap_or_else(|| panic!("no {name} for {guest}"))
    };
    let ticker_2 = of("tickscope_guest_cpu_cores", "ticker-2");
    assert_eq!(ticker_2.labels.get("host"), Some("hv1"));
    assert!((value(ticker_2) - 0.086).abs() < 0.001, "{ticker_2:?}");
    assert_eq!(
        of("tickscope_guest_info", "ticker-2")
            .labels
            .get("tick_mode"),
        Some("periodic")
    );
    assert_eq!(
        of("tickscope_guest_info", r#"web \"01\"\\ <x>"#)
            .labels
            .get("tick_mode"),
        Some("tickless")
    );

    // Counters: the totals the agent sent, only for the guest whose agent sent them.
    let cpu_total = of("tickscope_guest_cpu_seconds_total", "ticker-1");
    assert!(matches!(cpu_total.value, Value::Counter(_)));
    assert_eq!(value(cpu_total), 1234.5);
    assert_eq!(
        value(of("tickscope_guest_vcpu_wakeups_total", "ticker-1")),
        987_654_321.0
    );
    assert_eq!(
        samples(&scrape_, "tickscope_guest_cpu_seconds_total").len(),
        1
    );

    // Where the VM's CPU went: only for the guest whose agent split it, one series per part.
    let parts = samples(&scrape_, "tickscope_guest_idle_cpu_cores");
    let mut named: Vec<(&str, &str)> = parts
        .iter()
        .map(|s| {
            (
                s.labels.get("guest").unwrap(),
                s.labels.get("part").unwrap(),
            )
        })
        .collect();
    named.sort();
    let quiet = r#"web \"01\"\\ <x>"#;
    assert_eq!(
        named,
        [
            (quiet, "emulator"),
            (quiet, "iothreads"),
            (quiet, "vcpus"),
            (quiet, "vhost")
        ]
    );
    let part = |name: &str| {
        value(
            parts
                .iter()
                .find(|s| s.labels.get("part") == Some(name))
                .unwrap(),
        )
    };
    // Of its 0.3 % of a core: 0.24 % vCPUs, 0.02 % its I/O thread, the rest QEMU's main loop.
    assert!((part("vcpus") - 0.0024).abs() < 1e-6, "{parts:?}");
    assert!((part("iothreads") - 0.0002).abs() < 1e-6, "{parts:?}");
    assert!((part("emulator") - 0.0004).abs() < 1e-6, "{parts:?}");
    assert_eq!(part("vhost"), 0.0);
    let polled = samples(&scrape_, "tickscope_guest_idle_halt_poll_cpu_cores");
    assert_eq!(
        polled.len(),
        1,
        "only the guest whose agent read KVM's counters"
    );
    assert!((value(polled[0]) - 0.0001).abs() < 1e-6, "{polled:?}");

    let wasted: f64 = samples(&scrape_, "tickscope_guest_wasted_cpu_cores")
        .iter()
        .map(|s| value(s))
        .sum();
    let fleet = value(samples(&scrape_, "tickscope_fleet_wasted_cpu_cores")[0]);
    assert!(
        (wasted - fleet).abs() < 1e-9 && fleet > 0.1,
        "{wasted} {fleet}"
    );
    assert_eq!(value(samples(&scrape_, "tickscope_fleet_guests")[0]), 3.0);
    assert_eq!(
        value(samples(&scrape_, "tickscope_fleet_ticking_guests")[0]),
        2.0
    );

    // The host's last report, in seconds since the epoch, for the agent-silence rule.
    let last = samples(&scrape_, "tickscope_host_last_report_timestamp_seconds");
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].labels.get("host"), Some("hv1"));
    let now_s = tickscope_server::clock::now_ms() as f64 / 1000.0;
    assert!((now_s - value(last[0])).abs() < 60.0, "{last:?}");

    // Every known outcome, from 0.
    let outcomes = |name: &str| -> Vec<(String, f64)> {
        let mut found: Vec<(String, f64)> = samples(&scrape_, name)
            .iter()
            .map(|s| (s.labels.get("outcome").unwrap().to_string(), value(s)))
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    };
    assert_eq!(
        outcomes("tickscope_ingest_reports_total"),
        [
            ("duplicate".to_string(), 0.0),
            ("refused".to_string(), 1.0),
            ("stored".to_string(), 1.0)
        ]
    );
    assert_eq!(
        outcomes("tickscope_notifications_total"),
        [
            ("alertmanager_failed".to_string(), 0.0),
            ("alertmanager_sent".to_string(), 0.0),
            ("delivered".to_string(), 0.0),
            ("given_up".to_string(), 0.0),
            ("retried".to_string(), 0.0)
        ]
    );
    // Both reports were timed, the refused one too.
    assert!(
        body.contains("tickscope_ingest_duration_seconds_count 2"),
        "{body}"
    );
    assert!(body.contains("tickscope_alerts{state=\"firing\",severity=\"warning\"} 0"));
}

/// Guests are listed by id in every family, so that two scrapes list them alike: not in the
/// ranking's order (here the reverse of the ids') nor in the order of a hash map (40 guests:
/// by chance sorted once in 40! scrapes).
#[tokio::test]
async fn every_family_lists_the_guests_by_id() {
    let s = server().await;
    let guests = (0..40)
        .map(|i| {
            let cpu_pct = 2.0 + f64::from(i) / 2.0;
            guest(&format!("g-{i:02}"), 1, cpu_pct, 650.0, Some("nohz=off"))
        })
        .collect();
    let answer = s
        .post_report(Some(&s.agent_token), &report(1, guests))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let (_, _, _, body) = scrape(&s, None).await;
    let scrape_ = parse(&body);
    for name in MEASURED
        .iter()
        .take(2)
        .chain(["tickscope_guest_info"].iter())
    {
        let ids: Vec<i64> = samples(&scrape_, name)
            .iter()
            .map(|s| s.labels.get("guest_id").unwrap().parse().unwrap())
            .collect();
        assert_eq!(ids.len(), 40, "{name}");
        assert!(ids.is_sorted(), "{name}: {ids:?}");
    }
}

#[tokio::test]
async fn prometheus_gets_openmetrics_with_the_same_series() {
    let s = server().await;
    let mut report = fleet_report(1);
    report["guests"][0]["name"] = json!("web \"01\"\\ <x>");
    s.post_report(Some(&s.agent_token), &report).await;

    let (status, content_type, vary, open_metrics) = scrape(&s, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert_eq!(vary, "Accept, Accept-Encoding");
    assert!(open_metrics.ends_with("# EOF\n"));
    assert!(open_metrics.contains("# TYPE tickscope_ingest_reports counter\n"));
    assert!(open_metrics.contains("# UNIT tickscope_ingest_duration_seconds seconds\n"));
    assert!(open_metrics.contains(r#"guest="web \"01\"\\ <x>""#));

    // The same series, whichever format: only the family lines differ.
    let (_, _, _, classic) = scrape(&s, Some("text/plain;version=0.0.4")).await;
    let series = |text: &str| -> BTreeSet<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
            .collect()
    };
    assert_eq!(series(&open_metrics), series(&classic));
    assert!(series(&classic).len() > 40);
}

/// Sets of label sets of the measured families, and the guest's info series.
fn series_of(body: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let scrape = parse(body);
    let describe = |s: &prometheus_parse::Sample| {
        let labels: std::collections::BTreeMap<_, _> = s.labels.iter().collect();
        format!("{} {labels:?}", s.metric)
    };
    let measured = scrape
        .samples
        .iter()
        .filter(|s| MEASURED.contains(&s.metric.as_str()))
        .map(describe)
        .collect();
    let info = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "tickscope_guest_info")
        .map(describe)
        .collect();
    (measured, info)
}

#[tokio::test]
async fn a_changed_verdict_changes_the_info_series_only() {
    let s = server().await;
    // A ticking guest...
    let ticking = report(1, vec![guest("ticker", 1, 5.3, 650.0, None)]);
    assert_eq!(
        s.post_report(Some(&s.agent_token), &ticking).await.status,
        StatusCode::OK
    );
    let (_, _, _, before) = scrape(&s, None).await;
    // ...that goes quiet: the window's average falls to a tickless guest's.
    for seq in 2..=40 {
        let quiet = report(seq, vec![guest("ticker", 1, 0.3, 20.0, None)]);
        assert_eq!(
            s.post_report(Some(&s.agent_token), &quiet).await.status,
            StatusCode::OK
        );
    }
    let (_, _, _, after) = scrape(&s, None).await;
    let (measured_before, info_before) = series_of(&before);
    let (measured_after, info_after) = series_of(&after);
    assert!(
        info_before.iter().any(|i| i.contains("periodic")),
        "{info_before:?}"
    );
    assert!(
        info_after.iter().any(|i| i.contains("tickless")),
        "{info_after:?}"
    );
    assert_ne!(info_before, info_after);
    assert_eq!(measured_before, measured_after);
    assert_eq!(measured_before.len(), 4, "{measured_before:?}");
}
