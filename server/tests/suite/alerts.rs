//! Alerts over recorded report sequences: states, silences, notifications to a real webhook
//! receiver on loopback (Alertmanager's payload format, grouped as Alertmanager groups, and the
//! plain JSON one), retries, what is not retried, and a restart in the middle.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};

use common::{Server, guest, server_with_clock};
use tickscope_server::alerts;
use tickscope_server::analysis::alerting::refresh_due;
use tickscope_server::clock::{Clock, SharedClock, SystemClock};
use tickscope_server::db::ReceiverSettings;
use tickscope_server::domain::{AlertState, Subject};
use tickscope_server::ingest;
use tickscope_server::state::{AppState, Options};

/// A webhook receiver: keeps every payload and the Authorization header of each request, and
/// answers `fail_status` to the first `fail_first` requests.
#[derive(Clone, Default)]
struct Receiver {
    received: Arc<Mutex<Vec<Value>>>,
    requests: Arc<AtomicUsize>,
    /// When each request arrived: the gaps between attempts, measured where they land, so a
    /// slow test loop cannot shrink them.
    arrivals: Arc<Mutex<Vec<std::time::Instant>>>,
    /// When each request arrived on the server's clock, for a receiver made [`Receiver::on`]
    /// it: the waits a test steps that clock through instead of sleeping.
    arrivals_ms: Arc<Mutex<Vec<i64>>>,
    clock: Option<SharedClock>,
    authorization: Arc<Mutex<Vec<Option<String>>>>,
    fail_first: usize,
    fail_status: u16,
}

impl Receiver {
    async fn start(fail_first: usize) -> (Receiver, String) {
        Receiver::failing_with(fail_first, 500).await
    }

    async fn failing_with(fail_first: usize, fail_status: u16) -> (Receiver, String) {
        Receiver::serve(Receiver {
            fail_first,
            fail_status,
            ..Receiver::default()
        })
        .await
    }

    /// A receiver that answers every request, and notes when each arrived on `clock`.
    async fn on(clock: SharedClock) -> (Receiver, String) {
        Receiver::serve(Receiver {
            clock: Some(clock),
            ..Receiver::default()
        })
        .await
    }

    async fn serve(receiver: Receiver) -> (Receiver, String) {
        let app = axum::Router::new()
            .route("/hook", post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (receiver, url)
    }

    fn payloads(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }
}

async fn receive(
    State(r): State<Receiver>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> StatusCode {
    r.arrivals.lock().unwrap().push(std::time::Instant::now());
    if let Some(clock) = &r.clock {
        r.arrivals_ms.lock().unwrap().push(clock.now_ms());
    }
    r.authorization.lock().unwrap().push(
        headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_string()),
    );
    let n = r.requests.fetch_add(1, Ordering::SeqCst);
    if n < r.fail_first {
        return StatusCode::from_u16(r.fail_status).unwrap();
    }
    r.received.lock().unwrap().push(body);
    StatusCode::OK
}

const START_MS: i64 = 1_700_000_000_000;
const STEP_MS: i64 = 10_000;

/// A report of `guests` ending at `end_ms`, stored as received then (a simulated timeline).
async fn report_at(s: &Server, seq: u64, end_ms: i64, guests: Vec<Value>) {
    let report = json!({
        "agent": {"id": "machine-1", "run_id": "run-1", "version": "0.1.0"},
        "seq": seq,
        "host": {"name": "hv1", "cpus": 8, "kernel": "6.1.0"},
        "interval": {"start_ms": end_ms - STEP_MS, "end_ms": end_ms, "length_ns": 10_000_000_000u64},
        "guests": guests
    });
    let valid = ingest::validate(serde_json::from_value(report).unwrap(), end_ms).unwrap();
    let token = s.db.tokens().await.unwrap()[0].id;
    s.state
        .ingest_report(std::sync::Arc::new(valid), token, end_ms)
        .await
        .unwrap();
}

fn ticking() -> Vec<Value> {
    vec![
        guest("quiet", 1, 0.3, 38.0, None),
        guest("ticker-1", 1, 5.3, 650.0, Some("nohz=off")),
        guest("ticker-2", 2, 8.6, 572.0, Some("nohz=off")),
    ]
}

fn calm() -> Vec<Value> {
    vec![
        guest("quiet", 1, 0.3, 38.0, None),
        guest("ticker-1", 1, 0.3, 30.0, None),
        guest("ticker-2", 2, 8.6, 572.0, Some("nohz=off")),
    ]
}

/// A receiver that is told at once: no group wait, no group interval.
fn hook(name: &str, url: &str, format: &str) -> ReceiverSettings {
    ReceiverSettings {
        group_wait_s: 0,
        group_interval_s: 0,
        ..ReceiverSettings::new(name, url, format)
    }
}

/// The default guest rule, made to fire after `duration_s`.
async fn set_duration(s: &Server, duration_s: i64) {
    common::set_guest_rule(&s.db, duration_s, true).await;
}

async fn server(retry_base_ms: i64) -> Server {
    server_on(retry_base_ms, Arc::new(SystemClock)).await
}

/// [`server`] reading the time from `clock`.
async fn server_on(retry_base_ms: i64, clock: SharedClock) -> Server {
    server_with_clock(
        Options {
            retry_base_ms,
            external_url: "https://tickscope.example".into(),
            // The tests' receivers listen on loopback, which notifications reach only when an
            // admin allows it.
            receiver_networks: vec!["127.0.0.0/8".parse().unwrap()],
            ..Options::default()
        },
        clock,
    )
    .await
}

/// The state of each guest's alert under the guest rule: (name, state).
async fn states(s: &Server) -> Vec<(String, String)> {
    let mut open: Vec<(String, String)> =
        s.db.open_alerts()
            .await
            .unwrap()
            .into_iter()
            .filter(|a| a.subject == Subject::Guest)
            .map(|a| (a.subject_name, a.state.to_string()))
            .collect();
    open.sort();
    open
}

/// The open alerts' counts as `/metrics` reads them (counted in the database), checked against
/// the open alerts themselves.
async fn assert_counts_match_open_alerts(s: &Server) -> Vec<(AlertState, String, i64)> {
    let mut counted = s.db.open_alert_counts().await.unwrap();
    counted.sort_by_key(|(state, severity, _)| (state.as_str(), severity.clone()));
    let mut listed: Vec<(AlertState, String, i64)> = Vec::new();
    for a in s.db.open_alerts().await.unwrap() {
        match listed
            .iter_mut()
            .find(|(state, severity, _)| *state == a.state && *severity == a.severity)
        {
            Some(entry) => entry.2 += 1,
            None => listed.push((a.state, a.severity.clone(), 1)),
        }
    }
    listed.sort_by_key(|(state, severity, _)| (state.as_str(), severity.clone()));
    assert_eq!(counted, listed);
    counted
}

fn pair(name: &str, state: &str) -> (String, String) {
    (name.into(), state.into())
}

#[tokio::test]
async fn pending_then_firing_after_the_duration_then_resolved_each_told_once() {
    let s = server(20).await;
    let (receiver, url) = Receiver::start(0).await;
    s.db.insert_receiver(&hook("team", &url, "alertmanager"), 0)
        .await
        .unwrap();
    set_duration(&s, 60).await;

    // Minute 0: the tickers start; their alerts are pending.
    let mut seq = 0;
    let mut at = START_MS;
    report_at(&s, seq, at, ticking()).await;
    alerts::evaluate(&s.state, at).await.unwrap();
    assert_eq!(
        states(&s).await,
        [pair("ticker-1", "pending"), pair("ticker-2", "pending")]
    );
    let counts = assert_counts_match_open_alerts(&s).await;
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert_eq!((counts[0].0, counts[0].2), (AlertState::Pending, 2));
    // Still pending 50 s in; firing once 60 s have passed, and told once.
    for _ in 0..5 {
        seq += 1;
        at += STEP_MS;
        report_at(&s, seq, at, ticking()).await;
        alerts::evaluate(&s.state, at).await.unwrap();
    }
    assert_eq!(
        states(&s).await,
        [pair("ticker-1", "pending"), pair("ticker-2", "pending")]
    );
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 0);
    seq += 1;
    at += STEP_MS;
    report_at(&s, seq, at, ticking()).await;
    let evaluated = alerts::evaluate(&s.state, at).await.unwrap();
    assert_eq!((evaluated.firing, evaluated.notifications), (2, 2));
    assert_eq!(
        states(&s).await,
        [pair("ticker-1", "firing"), pair("ticker-2", "firing")]
    );
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 2);
    // Evaluating again changes nothing and tells nobody.
    alerts::evaluate(&s.state, at + 1_000).await.unwrap();
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 0);

    // ticker-1 is fixed: once its window no longer ticks, its alert resolves; ticker-2 fires on.
    for _ in 0..40 {
        seq += 1;
        at += STEP_MS;
        report_at(&s, seq, at, calm()).await;
        alerts::evaluate(&s.state, at).await.unwrap();
    }
    assert_eq!(states(&s).await, [pair("ticker-2", "firing")]);
    let counts = assert_counts_match_open_alerts(&s).await;
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert_eq!((counts[0].0, counts[0].2), (AlertState::Firing, 1));
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 1);
    let history = s.db.resolved_alerts(10).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].subject_name, "ticker-1");

    // What the receiver got, in Alertmanager's webhook format: one POST for the group (the
    // rule) with both alerts firing, then one with ticker-1 resolved and, as Alertmanager
    // lists the whole group, ticker-2 still firing (so the group's status is firing).
    let payloads = receiver.payloads();
    assert_eq!(payloads.len(), 2);
    let told = |p: &serde_json::Value| -> Vec<(String, String)> {
        let mut alerts: Vec<(String, String)> = p["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["labels"]["guest"].as_str().unwrap().to_string(),
                    a["status"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        alerts.sort();
        alerts
    };
    assert_eq!(
        told(&payloads[0]),
        [pair("ticker-1", "firing"), pair("ticker-2", "firing")]
    );
    assert_eq!(
        told(&payloads[1]),
        [pair("ticker-1", "resolved"), pair("ticker-2", "firing")]
    );
    assert_eq!(payloads[0]["status"], "firing");
    assert_eq!(payloads[1]["status"], "firing");
    let fired_ms = START_MS + 6 * STEP_MS;
    for p in &payloads {
        for field in [
            "version",
            "groupKey",
            "truncatedAlerts",
            "status",
            "receiver",
            "groupLabels",
            "commonLabels",
            "commonAnnotations",
            "externalURL",
            "alerts",
        ] {
            assert!(p.get(field).is_some(), "{field} missing: {p}");
        }
        assert_eq!(p["version"], "4");
        assert_eq!(p["receiver"], "team");
        assert_eq!(p["externalURL"], "https://tickscope.example");
        assert_eq!(p["groupKey"], r#"{}:{alertname="Idle guest burning CPU"}"#);
        assert_eq!(
            p["groupLabels"],
            json!({"alertname": "Idle guest burning CPU"})
        );
        assert_eq!(p["commonLabels"]["alertname"], "Idle guest burning CPU");
        assert_eq!(p["commonLabels"]["host"], "hv1");
        for alert in p["alerts"].as_array().unwrap() {
            for field in [
                "status",
                "labels",
                "annotations",
                "startsAt",
                "endsAt",
                "generatorURL",
                "fingerprint",
            ] {
                assert!(alert.get(field).is_some(), "alert.{field} missing: {p}");
            }
            assert_eq!(alert["labels"]["alertname"], "Idle guest burning CPU");
            assert_eq!(alert["labels"]["severity"], "warning");
            assert_eq!(alert["labels"]["host"], "hv1");
            assert_eq!(alert["labels"]["hypervisor"], "qemu");
            // The tick mode changes while an alert is open: an annotation, not a label.
            assert!(alert["labels"].get("tick_mode").is_none(), "{alert}");
            assert!(
                alert["generatorURL"]
                    .as_str()
                    .unwrap()
                    .starts_with("https://tickscope.example/guests/")
            );
            // When it fired, not when it went pending.
            let starts = alert["startsAt"].as_str().unwrap();
            assert_eq!(
                chrono::DateTime::parse_from_rfc3339(starts)
                    .expect("startsAt is RFC 3339")
                    .timestamp_millis(),
                fired_ms
            );
            assert!(
                alert["annotations"]["summary"]
                    .as_str()
                    .unwrap()
                    .contains("% of a host core")
            );
            assert!(alert["annotations"]["tick_mode"].is_string(), "{alert}");
        }
    }
    let resolved = &payloads[1]["alerts"][0];
    assert_eq!(resolved["labels"]["guest"], "ticker-1");
    assert_eq!(resolved["status"], "resolved");
    assert_ne!(resolved["endsAt"], "0001-01-01T00:00:00Z");
    assert_eq!(payloads[0]["alerts"][0]["endsAt"], "0001-01-01T00:00:00Z");
    // One alert, one label set, one fingerprint, from firing to resolved.
    let fired_ticker_1 = payloads[0]["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["labels"]["guest"] == "ticker-1")
        .unwrap();
    assert_eq!(fired_ticker_1["labels"], resolved["labels"]);
    assert_eq!(fired_ticker_1["fingerprint"], resolved["fingerprint"]);
}

#[tokio::test]
async fn an_open_alert_whose_figures_alone_move_is_written_once_a_minute() {
    let s = server(20).await;
    set_duration(&s, 0).await;
    report_at(&s, 0, START_MS, ticking()).await;
    alerts::evaluate(&s.state, START_MS).await.unwrap();
    let opened = s.db.open_alerts().await.unwrap();
    assert_eq!(opened.len(), 2);
    // ticker-2 burns more from now on: its value and summary move at each evaluation, its
    // state, labels, cause and suggestion do not.
    let busier = vec![
        guest("quiet", 1, 0.3, 38.0, None),
        guest("ticker-1", 1, 5.3, 650.0, Some("nohz=off")),
        guest("ticker-2", 2, 14.0, 572.0, Some("nohz=off")),
    ];
    // Evaluated every 15 s (the default), an alert's figures are refreshed once a minute.
    let refresh_ms = alerts::figures_refresh(s.state.options.alert_interval).as_millis() as i64;
    assert_eq!(refresh_ms, 60_000);
    let mut written_ms: std::collections::HashMap<_, i64> =
        opened.iter().map(|a| (a.id, START_MS)).collect();
    let mut writes = 0;
    let mut at = START_MS;
    for seq in 1..=7 {
        at += STEP_MS;
        report_at(&s, seq, at, busier.clone()).await;
        assert_eq!(alerts::evaluate(&s.state, at).await.unwrap().firing, 2);
        for a in s.db.open_alerts().await.unwrap() {
            let last = written_ms.get_mut(&a.id).unwrap();
            if refresh_due(a.id.0, *last, at, refresh_ms) {
                *last = at;
                writes += 1;
            }
            assert_eq!(a.evaluated_ms, *last, "{} at {at}", a.subject_name);
        }
    }
    // 70 s: each alert written once or twice, not at each of the seven evaluations; and what
    // was written last is what ticker-2 burnt by then.
    assert!((2..=4).contains(&writes), "{writes} writes");
    let ticker_2 = |alerts: &[tickscope_server::db::AlertRow]| {
        alerts
            .iter()
            .find(|a| a.subject_name == "ticker-2")
            .cloned()
            .unwrap()
    };
    let before = ticker_2(&opened);
    let after = ticker_2(&s.db.open_alerts().await.unwrap());
    assert!(
        after.value > before.value,
        "{} then {}",
        before.value,
        after.value
    );
    assert_ne!(after.annotations_json, before.annotations_json);
    assert_eq!(after.labels_json, before.labels_json);
}

#[tokio::test]
async fn a_pending_alert_that_clears_is_dropped_and_never_told() {
    let s = server(20).await;
    let (receiver, url) = Receiver::start(0).await;
    s.db.insert_receiver(&hook("team", &url, "json"), 0)
        .await
        .unwrap();
    set_duration(&s, 600).await;
    let mut at = START_MS;
    for seq in 0..3 {
        report_at(&s, seq, at, ticking()).await;
        alerts::evaluate(&s.state, at).await.unwrap();
        at += STEP_MS;
    }
    assert_eq!(states(&s).await.len(), 2);
    for seq in 3..40 {
        report_at(&s, seq, at, calm()).await;
        alerts::evaluate(&s.state, at).await.unwrap();
        at += STEP_MS;
    }
    assert_eq!(states(&s).await, [pair("ticker-2", "pending")]);
    assert!(s.db.resolved_alerts(10).await.unwrap().is_empty());
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 0);
    assert!(receiver.payloads().is_empty());
}

#[tokio::test]
async fn a_silence_holds_back_notifications_but_not_the_state() {
    let s = server(20).await;
    let (receiver, url) = Receiver::start(0).await;
    s.db.insert_receiver(&hook("team", &url, "json"), 0)
        .await
        .unwrap();
    let (grouped, grouped_url) = Receiver::start(0).await;
    s.db.insert_receiver(&hook("grouped", &grouped_url, "alertmanager"), 0)
        .await
        .unwrap();
    set_duration(&s, 0).await;
    s.db.insert_silence(
        None,
        "TICKER-1",
        START_MS - 1,
        // Delivery judges silences when it posts, on the wall clock.
        tickscope_server::clock::now_ms() + 3_600_000,
        "kernel upgrade booked for Friday",
        "ada",
        START_MS,
    )
    .await
    .unwrap();
    report_at(&s, 0, START_MS, ticking()).await;
    alerts::evaluate(&s.state, START_MS).await.unwrap();
    assert_eq!(
        states(&s).await,
        [pair("ticker-1", "firing"), pair("ticker-2", "firing")]
    );
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 2);
    // The group's POST lists every alert of the group that fires, but not a silenced one.
    let bodies = grouped.payloads();
    assert_eq!(bodies.len(), 1);
    let guests: Vec<&str> = bodies[0]["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["labels"]["guest"].as_str().unwrap())
        .collect();
    assert_eq!(guests, ["ticker-2"]);
    let payloads = receiver.payloads();
    assert_eq!(payloads.len(), 1);
    // The plain JSON form.
    let p = &payloads[0];
    assert_eq!(p["status"], "firing");
    assert_eq!(p["subject"]["name"], "ticker-2");
    assert_eq!(p["subject"]["kind"], "guest");
    assert_eq!(p["rule"]["name"], "Idle guest burning CPU");
    assert!(p["value"].as_f64().unwrap() > 2.0);
    assert_eq!(p["threshold"], 2.0);
    assert!(
        p["url"]
            .as_str()
            .unwrap()
            .starts_with("https://tickscope.example/guests/")
    );
}

#[tokio::test]
async fn a_restart_in_the_middle_neither_loses_nor_repeats_a_notification() {
    let s = server(20).await;
    let (receiver, url) = Receiver::start(0).await;
    s.db.insert_receiver(&hook("team", &url, "alertmanager"), 0)
        .await
        .unwrap();
    set_duration(&s, 0).await;
    // On the real clock: the restarted server analyses the window as of now.
    let start = tickscope_server::clock::now_ms() - 60_000;
    report_at(&s, 0, start, ticking()).await;
    alerts::evaluate(&s.state, start).await.unwrap();
    // The server stops before it delivered anything.
    let before = s.db.outbox_counts().await.unwrap();
    assert_eq!((before.waiting, before.delivered), (2, 0));

    let restarted = AppState::new(
        s.db.clone(),
        Options {
            receiver_networks: vec!["127.0.0.0/8".parse().unwrap()],
            ..Options::default()
        },
    )
    .await
    .unwrap();
    // The restarted server evaluates again: the alerts still fire, and nothing new is written.
    let again = alerts::evaluate(&restarted, start + STEP_MS).await.unwrap();
    assert_eq!((again.firing, again.notifications), (2, 0));
    assert_eq!(alerts::deliver_due(&restarted).await.unwrap(), 2);
    assert_eq!(alerts::deliver_due(&restarted).await.unwrap(), 0);
    // Both in one POST: one group.
    assert_eq!(receiver.payloads().len(), 1);
    assert_eq!(
        receiver.payloads()[0]["alerts"].as_array().unwrap().len(),
        2
    );
    let after = s.db.outbox_counts().await.unwrap();
    assert_eq!((after.waiting, after.delivered, after.failed), (0, 2, 0));
}

#[tokio::test]
async fn a_receiver_that_fails_twice_gets_it_on_the_third_attempt_after_growing_delays() {
    let s = server(100).await;
    let (receiver, url) = Receiver::start(2).await;
    s.db.insert_receiver(&hook("flaky", &url, "alertmanager"), 0)
        .await
        .unwrap();
    set_duration(&s, 0).await;
    report_at(&s, 0, START_MS, vec![guest("ticker", 1, 5.3, 650.0, None)]).await;
    alerts::evaluate(&s.state, START_MS).await.unwrap();

    let started = std::time::Instant::now();
    while receiver.payloads().is_empty() {
        alerts::deliver_due(&s.state).await.unwrap();
        assert!(started.elapsed().as_secs() < 10, "never delivered");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(receiver.requests.load(Ordering::SeqCst), 3);
    assert_eq!(receiver.payloads().len(), 1);
    // 100 ms after the first failure, 200 ms after the second (plus up to a fifth at random).
    let arrivals = receiver.arrivals.lock().unwrap().clone();
    let gaps: Vec<u128> = arrivals
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    assert!(gaps[0] >= 100 && gaps[1] >= 200, "{gaps:?}");
    let counts = s.db.outbox_counts().await.unwrap();
    assert_eq!((counts.waiting, counts.delivered), (0, 1));
}

#[tokio::test]
async fn a_silent_agent_fires_the_host_rule_and_a_new_report_resolves_it() {
    let s = server(20).await;
    report_at(&s, 0, START_MS, ticking()).await;
    let host_alerts = |alerts: Vec<tickscope_server::db::AlertRow>| -> Vec<String> {
        alerts
            .into_iter()
            .filter(|a| a.subject == Subject::Host)
            .map(|a| a.state.to_string())
            .collect()
    };
    // The default rule: silent for 120 s, for 180 s more.
    alerts::evaluate(&s.state, START_MS + 60_000).await.unwrap();
    assert!(host_alerts(s.db.open_alerts().await.unwrap()).is_empty());
    alerts::evaluate(&s.state, START_MS + 130_000)
        .await
        .unwrap();
    assert_eq!(host_alerts(s.db.open_alerts().await.unwrap()), ["pending"]);
    alerts::evaluate(&s.state, START_MS + 320_000)
        .await
        .unwrap();
    assert_eq!(host_alerts(s.db.open_alerts().await.unwrap()), ["firing"]);
    // The agent reports again: resolved.
    report_at(&s, 1, START_MS + 400_000, ticking()).await;
    alerts::evaluate(&s.state, START_MS + 400_000)
        .await
        .unwrap();
    assert!(host_alerts(s.db.open_alerts().await.unwrap()).is_empty());
    let resolved = s.db.resolved_alerts(10).await.unwrap();
    assert_eq!(resolved[0].subject, Subject::Host);
    assert_eq!(resolved[0].subject_name, "hv1");
}

#[tokio::test]
async fn disabling_a_rule_resolves_its_alerts_and_says_why() {
    let s = server(20).await;
    let (receiver, url) = Receiver::start(0).await;
    s.db.insert_receiver(&hook("team", &url, "json"), 0)
        .await
        .unwrap();
    set_duration(&s, 0).await;
    report_at(&s, 0, START_MS, ticking()).await;
    alerts::evaluate(&s.state, START_MS).await.unwrap();
    assert_eq!(states(&s).await.len(), 2);
    common::set_guest_rule(&s.db, 0, false).await;
    alerts::evaluate(&s.state, START_MS + STEP_MS)
        .await
        .unwrap();
    assert!(states(&s).await.is_empty());
    assert_eq!(s.db.resolved_alerts(10).await.unwrap().len(), 2);
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 4);
    let resolved: Vec<Value> = receiver
        .payloads()
        .into_iter()
        .filter(|p| p["status"] == "resolved")
        .collect();
    assert_eq!(resolved.len(), 2);
    assert!(
        resolved[0]["summary"]
            .as_str()
            .unwrap()
            .contains("no longer watched by this rule"),
        "{}",
        resolved[0]
    );
}

/// Six guests that tick: `web-1` .. `web-4`, `old-5` and `old-6`.
fn six_tickers() -> Vec<Value> {
    ["web-1", "web-2", "web-3", "web-4", "old-5", "old-6"]
        .iter()
        .map(|name| guest(name, 1, 5.3, 650.0, Some("nohz=off")))
        .collect()
}

#[tokio::test]
async fn six_alerts_of_one_rule_are_one_post_after_the_group_wait_and_changes_wait_the_group_interval()
 {
    let clock = common::manual_clock();
    let s = server_on(20, clock.clone()).await;
    let (receiver, url) = Receiver::on(clock.clone()).await;
    s.db.insert_receiver(
        &ReceiverSettings {
            group_wait_s: 2,
            group_interval_s: 3,
            auth_header: Some("Bearer hook-secret".into()),
            ..ReceiverSettings::new("team", &url, "alertmanager")
        },
        0,
    )
    .await
    .unwrap();
    set_duration(&s, 0).await;
    // On the server's clock: group wait and interval are counted from when rows were written.
    let start = clock.now_ms();
    report_at(&s, 0, start, six_tickers()).await;
    let evaluated = alerts::evaluate(&s.state, start).await.unwrap();
    assert_eq!((evaluated.firing, evaluated.notifications), (6, 6));
    // The six alerts were opened in one statement: each notification is stored under the
    // alert it tells of.
    let names: std::collections::HashMap<_, _> =
        s.db.open_alerts()
            .await
            .unwrap()
            .into_iter()
            .map(|a| (a.id, a.subject_name))
            .collect();
    let groups = s.db.pending_groups().await.unwrap();
    assert_eq!(groups.len(), 1);
    let stored =
        s.db.group_notifications(groups[0].receiver_id, &groups[0].group_key, start)
            .await
            .unwrap();
    assert_eq!(stored.len(), 6);
    for n in &stored {
        let payload: Value = serde_json::from_str(&n.payload).unwrap();
        assert_eq!(
            payload["labels"]["guest"].as_str(),
            Some(names[&n.alert_id].as_str()),
            "{payload}"
        );
    }
    // Within the group wait: nothing is sent.
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 0);
    assert!(receiver.payloads().is_empty());
    clock.advance_ms(2_100);
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 6);
    let payloads = receiver.payloads();
    assert_eq!(payloads.len(), 1, "one POST for the group");
    let alerts_told = payloads[0]["alerts"].as_array().unwrap();
    assert_eq!(alerts_told.len(), 6);
    let mut guests: Vec<&str> = alerts_told
        .iter()
        .map(|a| a["labels"]["guest"].as_str().unwrap())
        .collect();
    guests.sort();
    assert_eq!(
        guests,
        ["old-5", "old-6", "web-1", "web-2", "web-3", "web-4"]
    );
    assert_eq!(payloads[0]["status"], "firing");
    assert_eq!(payloads[0]["truncatedAlerts"], 0);
    // The receiver's auth header arrived.
    assert_eq!(
        receiver.authorization.lock().unwrap()[0].as_deref(),
        Some("Bearer hook-secret")
    );

    // The rule is narrowed to `web-*`: the two others are no longer watched, so their alerts
    // resolve, told together after the group interval since the last POST, with the labels
    // they fired with.
    let later = clock.now_ms();
    let mut rule = s.db.alert_rules().await.unwrap().remove(0).settings;
    rule.scope = "name".into();
    rule.scope_value = "web-*".into();
    s.db.save_alert_rule(Some(tickscope_server::domain::RuleId(1)), &rule, "t", later)
        .await
        .unwrap();
    let evaluated = alerts::evaluate(&s.state, later).await.unwrap();
    assert_eq!(evaluated.transitions, 2, "{evaluated:?}");
    assert_eq!(
        alerts::deliver_due(&s.state).await.unwrap(),
        0,
        "within the group interval"
    );
    while alerts::deliver_due(&s.state).await.unwrap() == 0 {
        assert!(
            clock.now_ms() - later < 60_000,
            "the group interval never ended"
        );
        clock.advance_ms(100);
    }
    let payloads = receiver.payloads();
    assert_eq!(payloads.len(), 2);
    let arrivals_ms = receiver.arrivals_ms.lock().unwrap().clone();
    assert!(
        arrivals_ms[1] - arrivals_ms[0] >= 3_000,
        "{} ms",
        arrivals_ms[1] - arrivals_ms[0]
    );
    // The POST lists the whole group, as Alertmanager's: the two resolved and the four that
    // still fire, so the group is still firing.
    let group = payloads[1]["alerts"].as_array().unwrap();
    assert_eq!(group.len(), 6);
    assert_eq!(payloads[1]["status"], "firing");
    let resolved: Vec<&serde_json::Value> =
        group.iter().filter(|a| a["status"] == "resolved").collect();
    let mut resolved_guests: Vec<&str> = resolved
        .iter()
        .map(|a| a["labels"]["guest"].as_str().unwrap())
        .collect();
    resolved_guests.sort();
    assert_eq!(resolved_guests, ["old-5", "old-6"]);
    // The same label set and fingerprint as when they fired.
    for r in resolved {
        let fired = alerts_told
            .iter()
            .find(|a| a["fingerprint"] == r["fingerprint"])
            .expect("a resolved alert with the fingerprint it fired with");
        assert_eq!(fired["labels"], r["labels"]);
        assert_eq!(fired["startsAt"], r["startsAt"]);
    }
}

/// The overview reads only the firing alerts it shows (the oldest ten) and how many fire: the
/// same ten, in the same order, as a reading of every open alert would give.
#[tokio::test]
async fn the_overview_shows_the_oldest_firing_alerts_and_counts_them_all() {
    let clock = common::manual_clock();
    let s = server_on(20, clock.clone()).await;
    set_duration(&s, 0).await;
    let start = clock.now_ms();
    let tickers = |names: std::ops::Range<u32>| -> Vec<Value> {
        names
            .map(|i| guest(&format!("ticker-{i:02}"), 1, 5.3, 650.0, Some("nohz=off")))
            .collect()
    };
    // Two waves, so that the oldest are not simply the first ids of one evaluation.
    report_at(&s, 0, start, tickers(0..7)).await;
    assert_eq!(alerts::evaluate(&s.state, start).await.unwrap().firing, 7);
    clock.advance_ms(STEP_MS);
    report_at(&s, 1, start + STEP_MS, tickers(0..12)).await;
    assert_eq!(
        alerts::evaluate(&s.state, start + STEP_MS)
            .await
            .unwrap()
            .firing,
        12
    );

    let every: Vec<_> = s.db.open_alerts().await.unwrap();
    let firing: Vec<_> = every
        .iter()
        .filter(|a| a.state == tickscope_server::domain::AlertState::Firing)
        .map(|a| (a.id, a.subject_name.clone()))
        .collect();
    assert_eq!(firing.len(), 12);
    for limit in [0, 1, 10, 12, 50] {
        let (oldest, count) = s.db.firing_alerts(limit).await.unwrap();
        let got: Vec<_> = oldest
            .iter()
            .map(|a| (a.id, a.subject_name.clone()))
            .collect();
        let want: Vec<_> = firing.iter().take(limit as usize).cloned().collect();
        assert_eq!((got, count), (want, 12), "limit {limit}");
    }

    let login = s.login("viewer", "viewer").await;
    let page = s.page("/", &login).await;
    assert_eq!(page.status, StatusCode::OK);
    let section = page.body.split("<section class=\"firing\"").nth(1).unwrap();
    let section = section.split("</section>").next().unwrap();
    assert!(
        section.contains("12 alert(s) firing</a>: the 10 oldest"),
        "{section}"
    );
    let shown: Vec<&str> = firing[..10].iter().map(|(_, name)| name.as_str()).collect();
    let listed: Vec<&str> = section
        .split("<li>")
        .skip(1)
        .map(|li| li.split("\">").nth(1).unwrap().split('<').next().unwrap())
        .collect();
    assert_eq!(listed, shown);
}

#[tokio::test]
async fn a_receiver_that_answers_400_gets_exactly_one_attempt() {
    let s = server(20).await;
    let (receiver, url) = Receiver::failing_with(usize::MAX, 400).await;
    s.db.insert_receiver(&hook("strict", &url, "alertmanager"), 0)
        .await
        .unwrap();
    set_duration(&s, 0).await;
    report_at(&s, 0, START_MS, ticking()).await;
    alerts::evaluate(&s.state, START_MS).await.unwrap();
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 0);
    // However long one waits, nothing is tried again.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 0);
    assert_eq!(receiver.requests.load(Ordering::SeqCst), 1);
    let counts = s.db.outbox_counts().await.unwrap();
    assert_eq!((counts.waiting, counts.delivered, counts.failed), (0, 0, 2));
}

/// A receiver that answers with a redirect is not followed there: the notification waits for
/// its next attempt, and the address redirected to hears nothing.
#[tokio::test]
async fn a_receiver_that_redirects_is_not_followed() {
    let s = server(20).await;
    let (target, target_url) = Receiver::start(0).await;
    let redirects = Arc::new(AtomicUsize::new(0));
    let counted = redirects.clone();
    let app = axum::Router::new().route(
        "/hook",
        post(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            let to = target_url.clone();
            async move { (StatusCode::TEMPORARY_REDIRECT, [("location", to)]) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    s.db.insert_receiver(&hook("moved", &url, "json"), 0)
        .await
        .unwrap();
    set_duration(&s, 0).await;
    report_at(&s, 0, START_MS, ticking()).await;
    alerts::evaluate(&s.state, START_MS).await.unwrap();
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 0);
    assert!(redirects.load(Ordering::SeqCst) >= 1);
    assert_eq!(target.requests.load(Ordering::SeqCst), 0);
    assert_eq!(s.db.outbox_counts().await.unwrap().waiting, 2);
}

/// A receiver on the server's own loopback is not reached unless an admin allowed its network:
/// whatever an admin session typed, the server does not post to what only it can reach.
#[tokio::test]
async fn a_receiver_on_loopback_is_not_reached_unless_allowed() {
    let s = server_with_clock(
        Options {
            retry_base_ms: 20,
            ..Options::default()
        },
        Arc::new(SystemClock),
    )
    .await;
    let (receiver, url) = Receiver::start(0).await;
    s.db.insert_receiver(&hook("inside", &url, "json"), 0)
        .await
        .unwrap();
    set_duration(&s, 0).await;
    report_at(&s, 0, START_MS, ticking()).await;
    alerts::evaluate(&s.state, START_MS).await.unwrap();
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 0);
    assert_eq!(receiver.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_receiver_that_answers_429_or_503_is_tried_again() {
    for status in [429, 503, 408] {
        let s = server(20).await;
        let (receiver, url) = Receiver::failing_with(2, status).await;
        s.db.insert_receiver(&hook("busy", &url, "alertmanager"), 0)
            .await
            .unwrap();
        set_duration(&s, 0).await;
        report_at(&s, 0, START_MS, ticking()).await;
        alerts::evaluate(&s.state, START_MS).await.unwrap();
        let started = std::time::Instant::now();
        while receiver.payloads().is_empty() {
            alerts::deliver_due(&s.state).await.unwrap();
            assert!(
                started.elapsed().as_secs() < 10,
                "{status}: never delivered"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(receiver.requests.load(Ordering::SeqCst), 3, "{status}");
        let counts = s.db.outbox_counts().await.unwrap();
        assert_eq!((counts.delivered, counts.failed), (2, 0), "{status}");
    }
}

/// A webhook receiver over HTTPS with a certificate from a private CA (made for the test with
/// rcgen): returns the receiver, its address and the CA's PEM.
async fn https_receiver(dir: &std::path::Path) -> (Receiver, String, String) {
    let certificate = common::loopback_certificate(dir);
    let tls = tickscope_server::http::tls::acceptor(&certificate.cert_path, &certificate.key_path)
        .unwrap();

    let receiver = Receiver::default();
    let app = axum::Router::new()
        .route("/hook", post(receive))
        .with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (tls, app) = (tls.clone(), app.clone());
            tokio::spawn(async move {
                // A client that does not trust the CA ends the handshake: nothing to serve.
                let Ok(stream) = tls.accept(tcp).await else {
                    return;
                };
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(
                        hyper_util::rt::TokioIo::new(stream),
                        hyper_util::service::TowerToHyperService::new(app),
                    )
                    .await;
            });
        }
    });
    (receiver, url, certificate.ca.pem())
}

#[tokio::test]
async fn an_https_receiver_is_reached_with_its_own_ca_and_refused_without_it() {
    let s = server(20).await;
    let (receiver, url, ca_pem) = https_receiver(s.dir.path()).await;
    s.db.insert_receiver(
        &ReceiverSettings {
            ca_pem: Some(ca_pem),
            ..hook("private", &url, "alertmanager")
        },
        0,
    )
    .await
    .unwrap();
    s.db.insert_receiver(&hook("public-roots", &url, "alertmanager"), 0)
        .await
        .unwrap();
    set_duration(&s, 0).await;
    report_at(&s, 0, START_MS, ticking()).await;
    alerts::evaluate(&s.state, START_MS).await.unwrap();
    // The receiver with the CA gets its two alerts; the other fails the handshake and waits
    // for a retry, its error recorded.
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 2);
    let payloads = receiver.payloads();
    assert_eq!(payloads.len(), 1);
    assert_eq!(payloads[0]["receiver"], "private");
    let counts = s.db.outbox_counts().await.unwrap();
    assert_eq!((counts.waiting, counts.delivered), (2, 2));
}

#[tokio::test]
async fn a_receiver_that_never_answers_holds_up_no_other() {
    let s = server(20).await;
    // Takes connections and never answers: its POST ends at the 10 s timeout.
    let stuck = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let stuck_url = format!("http://{}/hook", stuck.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for connection in stuck.incoming() {
            held.push(connection);
        }
    });
    let (receiver, url) = Receiver::start(0).await;
    // "a-stuck" sorts first, so it would be posted first by a sender that posts in turn.
    s.db.insert_receiver(&hook("a-stuck", &stuck_url, "alertmanager"), 0)
        .await
        .unwrap();
    s.db.insert_receiver(&hook("b-fine", &url, "alertmanager"), 0)
        .await
        .unwrap();
    set_duration(&s, 0).await;
    report_at(&s, 0, START_MS, ticking()).await;
    alerts::evaluate(&s.state, START_MS).await.unwrap();
    let started = std::time::Instant::now();
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 2);
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(9),
        "the stuck one timed out"
    );
    let arrived = receiver.arrivals.lock().unwrap()[0];
    // Posted one after the other, it would have waited the stuck one's whole 10 s; the margin
    // is for a loaded machine.
    assert!(
        arrived - started < std::time::Duration::from_secs(6),
        "the other receiver waited {:?}",
        arrived - started
    );
    let counts = s.db.outbox_counts().await.unwrap();
    assert_eq!((counts.waiting, counts.delivered), (2, 2));
}
