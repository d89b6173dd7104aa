//! `/metrics`: every active guest in the Prometheus text format, behind a token.

mod common;

use axum::http::{Method, StatusCode};
use prometheus_parse::{Scrape, Value};

use common::{fleet_report, server};

fn parse(body: &str) -> Scrape {
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("parses as Prometheus text")
}

#[tokio::test]
async fn metrics_hold_every_guest_and_the_servers_own_counters() {
    let s = server().await;
    let mut report = fleet_report(1);
    // A hostile name: quotes and a backslash must be escaped in label values.
    report["guests"][0]["name"] = serde_json::json!("web \"01\"\\ <x>");
    assert_eq!(
        s.post_report(Some(&s.agent_token), &report).await.status,
        StatusCode::OK
    );
    // A refused report counts too.
    let refused = s
        .post_report(Some(&s.agent_token), &serde_json::json!({"seq": -1}))
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);

    let unauthorised = s.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(unauthorised.status, StatusCode::UNAUTHORIZED);
    let agent = s
        .call(Method::GET, "/metrics", Some(&s.agent_token), None)
        .await;
    assert_eq!(agent.status, StatusCode::FORBIDDEN);

    let reply = s
        .call(Method::GET, "/metrics", Some(&s.viewer_token), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(
        reply
            .content_type
            .starts_with("application/openmetrics-text")
    );
    let scrape = parse(&reply.body);
    let samples = |name: &str| -> Vec<&prometheus_parse::Sample> {
        scrape.samples.iter().filter(|s| s.metric == name).collect()
    };
    let gauge = |s: &prometheus_parse::Sample| match s.value {
        Value::Gauge(v) | Value::Untyped(v) => v,
        ref other => panic!("{} is {other:?}", s.metric),
    };
    for name in [
        "tickscope_guest_host_cpu_ratio",
        "tickscope_guest_wasted_cpu_cores",
        "tickscope_guest_wakeups_per_vcpu_per_second",
        "tickscope_guest_vcpus",
    ] {
        let mut guests: Vec<&str> = samples(name)
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
    let ticker_2 = samples("tickscope_guest_host_cpu_ratio")
        .into_iter()
        .find(|s| s.labels.get("guest") == Some("ticker-2"))
        .unwrap();
    assert_eq!(ticker_2.labels.get("tick_mode"), Some("periodic"));
    assert_eq!(ticker_2.labels.get("host"), Some("hv1"));
    assert!(
        (gauge(ticker_2) - 0.086).abs() < 0.001,
        "{:?}",
        ticker_2.value
    );
    let wasted: f64 = samples("tickscope_guest_wasted_cpu_cores")
        .iter()
        .map(|s| gauge(s))
        .sum();
    let fleet = gauge(samples("tickscope_fleet_wasted_cpu_cores")[0]);
    assert!(
        (wasted - fleet).abs() < 1e-9 && fleet > 0.1,
        "{wasted} {fleet}"
    );
    assert_eq!(gauge(samples("tickscope_fleet_guests")[0]), 3.0);
    assert_eq!(gauge(samples("tickscope_fleet_ticking_guests")[0]), 2.0);

    let reports: Vec<(String, f64)> = samples("tickscope_ingest_reports_total")
        .iter()
        .map(|s| {
            let v = match s.value {
                Value::Counter(v) | Value::Untyped(v) => v,
                ref other => panic!("{other:?}"),
            };
            (s.labels.get("outcome").unwrap().to_string(), v)
        })
        .collect();
    assert!(reports.contains(&("stored".into(), 1.0)), "{reports:?}");
    assert!(reports.contains(&("refused".into(), 1.0)), "{reports:?}");
    // Both reports were timed, the refused one too.
    assert!(
        reply
            .body
            .contains("tickscope_ingest_duration_seconds_count 2"),
        "{}",
        reply.body
    );
    assert!(
        reply
            .body
            .contains("tickscope_alerts{state=\"firing\",severity=\"warning\"} 0")
    );
}
