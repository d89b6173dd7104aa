//! Alerts over recorded report sequences: states, silences, notifications to a real webhook
//! receiver on loopback (Alertmanager's payload format and the plain JSON one), retries, and a
//! restart in the middle.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::{Value, json};

use common::{Server, guest, server_with};
use tickscope_server::alerts;
use tickscope_server::app::{AppState, Options};
use tickscope_server::ingest;

/// A webhook receiver: keeps every payload, and answers 500 to the first `fail_first` requests.
#[derive(Clone, Default)]
struct Receiver {
    received: Arc<Mutex<Vec<Value>>>,
    requests: Arc<AtomicUsize>,
    /// When each request arrived: the gaps between attempts, measured where they land, so a
    /// slow test loop cannot shrink them.
    arrivals: Arc<Mutex<Vec<std::time::Instant>>>,
    fail_first: usize,
}

impl Receiver {
    async fn start(fail_first: usize) -> (Receiver, String) {
        let receiver = Receiver {
            fail_first,
            ..Receiver::default()
        };
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

async fn receive(State(r): State<Receiver>, Json(body): Json<Value>) -> StatusCode {
    r.arrivals.lock().unwrap().push(std::time::Instant::now());
    let n = r.requests.fetch_add(1, Ordering::SeqCst);
    if n < r.fail_first {
        return StatusCode::INTERNAL_SERVER_ERROR;
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
    s.state.store_report(&valid, token, end_ms).await.unwrap();
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

/// The default guest rule, made to fire after `duration_s`.
async fn set_duration(s: &Server, duration_s: i64) {
    common::set_guest_rule(&s.db, duration_s, true).await;
}

async fn server(retry_base_ms: i64) -> Server {
    server_with(Options {
        retry_base_ms,
        external_url: "https://tickscope.example".into(),
        ..Options::default()
    })
    .await
}

/// The state of each guest's alert under the guest rule: (name, state).
async fn states(s: &Server) -> Vec<(String, String)> {
    let mut open: Vec<(String, String)> =
        s.db.open_alerts()
            .await
            .unwrap()
            .into_iter()
            .filter(|a| a.subject == "guest")
            .map(|a| (a.subject_name, a.state))
            .collect();
    open.sort();
    open
}

fn pair(name: &str, state: &str) -> (String, String) {
    (name.into(), state.into())
}

#[tokio::test]
async fn pending_then_firing_after_the_duration_then_resolved_each_told_once() {
    let s = server(20).await;
    let (receiver, url) = Receiver::start(0).await;
    s.db.insert_receiver("team", &url, "alertmanager", 0)
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
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 1);
    let history = s.db.resolved_alerts(10).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].subject_name, "ticker-1");

    // What the receiver got: two firing, one resolved, in Alertmanager's webhook format.
    let payloads = receiver.payloads();
    assert_eq!(payloads.len(), 3);
    let statuses: Vec<&str> = payloads
        .iter()
        .map(|p| p["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["firing", "firing", "resolved"]);
    for p in &payloads {
        for field in [
            "version",
            "groupKey",
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
        let alert = &p["alerts"][0];
        for field in [
            "status",
            "labels",
            "annotations",
            "startsAt",
            "endsAt",
            "generatorURL",
            "fingerprint",
        ] {
            assert!(alert.get(field).is_some(), "alerts[0].{field} missing: {p}");
        }
        assert_eq!(alert["labels"]["alertname"], "Idle guest burning CPU");
        assert_eq!(alert["labels"]["severity"], "warning");
        assert_eq!(alert["labels"]["host"], "hv1");
        assert!(
            alert["generatorURL"]
                .as_str()
                .unwrap()
                .starts_with("https://tickscope.example/guests/")
        );
        let starts = alert["startsAt"].as_str().unwrap();
        chrono::DateTime::parse_from_rfc3339(starts).expect("startsAt is RFC 3339");
        assert_eq!(
            chrono::DateTime::parse_from_rfc3339(starts)
                .unwrap()
                .timestamp_millis(),
            START_MS
        );
        assert!(
            alert["annotations"]["summary"]
                .as_str()
                .unwrap()
                .contains("% of a host core")
        );
    }
    let resolved = &payloads[2]["alerts"][0];
    assert_eq!(resolved["labels"]["guest"], "ticker-1");
    assert_ne!(resolved["endsAt"], "0001-01-01T00:00:00Z");
    assert_eq!(payloads[0]["alerts"][0]["endsAt"], "0001-01-01T00:00:00Z");
    // One alert, one fingerprint, from firing to resolved.
    let fired_ticker_1 = payloads[..2]
        .iter()
        .find(|p| p["alerts"][0]["labels"]["guest"] == "ticker-1")
        .unwrap();
    assert_eq!(
        fired_ticker_1["alerts"][0]["fingerprint"],
        resolved["fingerprint"]
    );
}

#[tokio::test]
async fn a_pending_alert_that_clears_is_dropped_and_never_told() {
    let s = server(20).await;
    let (receiver, url) = Receiver::start(0).await;
    s.db.insert_receiver("team", &url, "json", 0).await.unwrap();
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
    s.db.insert_receiver("team", &url, "json", 0).await.unwrap();
    set_duration(&s, 0).await;
    s.db.insert_silence(
        None,
        "TICKER-1",
        START_MS - 1,
        START_MS + 3_600_000,
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
    assert_eq!(alerts::deliver_due(&s.state).await.unwrap(), 1);
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
    s.db.insert_receiver("team", &url, "alertmanager", 0)
        .await
        .unwrap();
    set_duration(&s, 0).await;
    // On the real clock: the restarted server analyses the window as of now.
    let start = tickscope_server::app::now_ms() - 60_000;
    report_at(&s, 0, start, ticking()).await;
    alerts::evaluate(&s.state, start).await.unwrap();
    // The server stops before it delivered anything.
    let before = s.db.outbox_counts().await.unwrap();
    assert_eq!((before.waiting, before.delivered), (2, 0));

    let restarted = AppState::new(s.db.clone(), Options::default())
        .await
        .unwrap();
    // The restarted server evaluates again: the alerts still fire, and nothing new is written.
    let again = alerts::evaluate(&restarted, start + STEP_MS).await.unwrap();
    assert_eq!((again.firing, again.notifications), (2, 0));
    assert_eq!(alerts::deliver_due(&restarted).await.unwrap(), 2);
    assert_eq!(alerts::deliver_due(&restarted).await.unwrap(), 0);
    assert_eq!(receiver.payloads().len(), 2);
    let after = s.db.outbox_counts().await.unwrap();
    assert_eq!((after.waiting, after.delivered, after.failed), (0, 2, 0));
}

#[tokio::test]
async fn a_receiver_that_fails_twice_gets_it_on_the_third_attempt_after_growing_delays() {
    let s = server(100).await;
    let (receiver, url) = Receiver::start(2).await;
    s.db.insert_receiver("flaky", &url, "alertmanager", 0)
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
            .filter(|a| a.subject == "host")
            .map(|a| a.state)
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
    assert_eq!(resolved[0].subject, "host");
    assert_eq!(resolved[0].subject_name, "hv1");
}

#[tokio::test]
async fn disabling_a_rule_resolves_its_alerts_and_says_why() {
    let s = server(20).await;
    let (receiver, url) = Receiver::start(0).await;
    s.db.insert_receiver("team", &url, "json", 0).await.unwrap();
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
