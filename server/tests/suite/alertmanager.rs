//! Alerts sent into a real Alertmanager (Debian's prometheus-alertmanager 0.25, installed by
//! scripts/test.sh): tickscope runs as its binary with `--alertmanager-url`, two guests' alerts
//! fire and arrive with their labels and the fingerprint tickscope computes, Alertmanager groups
//! them into one webhook notification, they resolve, and a silence made in Alertmanager holds back
//! the notification of a third alert (while tickscope's own silence holds back nothing there).
//!
//! Without the binary the test says so and passes: `cargo test` must work on any machine.

use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

use common::database::TestDb;
use common::guest;
use common::processes::{Processes, add_token, free_port, start_server};
use tickscope_server::alerts::labels::{LabelSet, fingerprint};
use tickscope_server::clock::now_ms;
use tickscope_server::db::RuleSettings;

const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";
const WASTE_RULE: &str = "Idle guest burning CPU";
const LATE_RULE: &str = "Late guest burning CPU";

/// Alertmanager's webhook notifications, as they arrive.
#[derive(Clone, Default)]
struct Hook(Arc<Mutex<Vec<Value>>>);

impl Hook {
    async fn start() -> (Hook, String) {
        let hook = Hook::default();
        let app = axum::Router::new()
            .route("/hook", post(receive))
            .with_state(hook.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (hook, url)
    }

    fn received(&self) -> Vec<Value> {
        self.0.lock().unwrap().clone()
    }

    /// The notifications about `alertname`, with `status`.
    fn about(&self, alertname: &str, status: &str) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|n| n["groupLabels"]["alertname"] == alertname && n["status"] == status)
            .collect()
    }
}

async fn receive(State(hook): State<Hook>, Json(body): Json<Value>) {
    hook.0.lock().unwrap().push(body);
}

/// Polls `check` every 200 ms until it gives a value, for at most `within`.
async fn wait_for<T>(what: &str, within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(started.elapsed() < within, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn get_json(url: &str) -> Value {
    let body = ureq::get(url)
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    serde_json::from_str(&body).unwrap()
}

/// Starts Alertmanager on a free loopback port with a route grouping by alertname into a
/// webhook receiver at `hook_url`, group wait and interval 1 s; returns its base URL.
fn start_alertmanager(dir: &Path, hook_url: &str, processes: &mut Processes) -> String {
    let config = dir.join("alertmanager.yml");
    std::fs::write(
        &config,
        format!(
            "route:\n  receiver: hook\n  group_by: [alertname]\n  group_wait: 1s\n  \
             group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n    \
             webhook_configs:\n      - url: {hook_url}\n        send_resolved: true\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let child = std::process::Command::new(ALERTMANAGER)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", dir.join("am-data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        // No cluster: no gossip port, and no wait for peers before notifying.
        .arg("--cluster.listen-address=")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("alertmanager.log")).unwrap())
        .spawn()
        .unwrap();
    processes.add("alertmanager", child);
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while ureq::get(&format!("{url}/-/ready")).call().is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "Alertmanager did not start: {}",
            std::fs::read_to_string(dir.join("alertmanager.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    url
}

/// A report of `guests`, ending a second ago.
fn post_report(url: &str, token: &str, seq: u64, guests: Vec<Value>) {
    let report = common::report(seq, guests);
    let status = ureq::post(&format!("{url}/api/v1/reports"))
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .send(report.to_string())
        .unwrap()
        .status();
    assert!(status.is_success(), "{status}");
}

/// The alerts Alertmanager holds (active, silenced or not) with `alertname`, by guest.
fn alertmanager_alerts(am: &str, alertname: &str) -> Vec<Value> {
    let mut alerts: Vec<Value> = get_json(&format!("{am}/api/v2/alerts"))
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["labels"]["alertname"] == alertname)
        .cloned()
        .collect();
    alerts.sort_by_key(|a| a["labels"]["guest"].as_str().unwrap_or("").to_string());
    alerts
}

fn guests_of(notification: &Value) -> Vec<String> {
    let mut guests: Vec<String> = notification["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["labels"]["guest"].as_str().unwrap().to_string())
        .collect();
    guests.sort();
    guests
}

fn ticking(name: &str) -> Value {
    guest(name, 1, 5.3, 650.0, Some("nohz=off"))
}

fn ms_of(rfc3339: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339.as_str().unwrap())
        .unwrap()
        .timestamp_millis()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_reach_a_real_alertmanager_grouped_resolved_and_silenced_there() {
    if !Path::new(ALERTMANAGER).is_file() {
        eprintln!(
            "SKIPPED: {ALERTMANAGER} is missing; install Debian's prometheus-alertmanager \
             (scripts/test.sh does) to run this test"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut processes = Processes::default();
    let (hook, hook_url) = Hook::start().await;
    let am = start_alertmanager(dir.path(), &hook_url, &mut processes);

    // The database: an agent token; the guest rule fires at once for `web-*`; a second rule,
    // likewise, for `late-*`; and a tickscope silence on late-2, which must not matter to
    // Alertmanager.
    let db_path = TestDb::new(dir.path(), "tickscope.db").await;
    let token = add_token(&db_path, "agent");
    let db = db_path.open().await;
    let mut waste = db.alert_rules().await.unwrap().remove(0).settings;
    waste.duration_s = 0;
    waste.scope = "name".into();
    waste.scope_value = "web-*".into();
    db.save_alert_rule(Some(tickscope_server::domain::RuleId(1)), &waste, "test", 0)
        .await
        .unwrap();
    let late = RuleSettings {
        name: LATE_RULE.into(),
        scope_value: "late-*".into(),
        ..waste.clone()
    };
    db.save_alert_rule(None, &late, "test", 0).await.unwrap();
    db.insert_silence(None, "late-2", 0, now_ms() + 3_600_000, "ours", "t", 0)
        .await
        .unwrap();

    // A second "Alertmanager" that takes connections and never answers: listed first, it must
    // delay nothing sent to the real one.
    let stuck = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let stuck_url = format!("http://{}", stuck.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for connection in stuck.incoming() {
            held.push(connection);
        }
    });

    let url = start_server(
        &db_path,
        &[
            "--alert-interval",
            "1",
            "--alertmanager-url",
            &stuck_url,
            "--alertmanager-url",
            &am,
            "--alertmanager-resend",
            "1",
            "--external-url",
            "https://tickscope.example/",
            // Both Alertmanagers listen on loopback, which alerts reach only when allowed.
            "--allow-receiver-networks",
            "127.0.0.0/8",
        ],
        &mut processes,
    );

    // Two guests tick: both alerts reach Alertmanager with their labels and the fingerprint
    // tickscope computes for them.
    post_report(&url, &token, 1, vec![ticking("web-1"), ticking("web-2")]);
    // Within a few evaluations and resends, well before the stuck one's 10 s timeout.
    let arrived = wait_for("two alerts in Alertmanager", Duration::from_secs(6), || {
        let alerts = alertmanager_alerts(&am, WASTE_RULE);
        (alerts.len() == 2).then_some(alerts)
    })
    .await;
    let stored = db.open_alerts().await.unwrap();
    for (alert, guest_name) in arrived.iter().zip(["web-1", "web-2"]) {
        let labels: LabelSet = serde_json::from_value(alert["labels"].clone()).unwrap();
        let mine = stored
            .iter()
            .find(|a| a.subject_name == guest_name)
            .unwrap();
        let stored_labels: LabelSet = serde_json::from_str(&mine.labels_json).unwrap();
        assert_eq!(labels, stored_labels, "{alert}");
        let names: Vec<&str> = labels.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "alertname",
                "cause",
                "guest",
                "guest_id",
                "host",
                "hypervisor",
                "rule_id",
                "severity"
            ]
        );
        // The cause it was filed under as the alert opened, kept for the alert's life.
        assert_eq!(labels["cause"], "ticking_kernel");
        assert_eq!(alert["annotations"]["cause"], "ticking_kernel");
        assert_eq!(labels["guest"], guest_name);
        assert_eq!(labels["host"], "hv1");
        assert_eq!(labels["hypervisor"], "qemu");
        assert_eq!(labels["severity"], "warning");
        assert_eq!(labels["guest_id"], mine.subject_id.to_string());
        // Alertmanager's fingerprint is the one tickscope computes (and sends its webhooks).
        assert_eq!(alert["fingerprint"].as_str().unwrap(), fingerprint(&labels));
        assert_eq!(
            alert["generatorURL"],
            format!("https://tickscope.example/guests/{}", mine.subject_id)
        );
        assert!(
            alert["annotations"]["summary"]
                .as_str()
                .unwrap()
                .contains(guest_name)
        );
        assert!(alert["annotations"]["tick_mode"].is_string(), "{alert}");
        assert_eq!(ms_of(&alert["startsAt"]), mine.fired_ms.unwrap());
        // Firing: ends a few resend intervals ahead (4 × 1 s) plus the period an open
        // alert's figures are refreshed in (4 evaluations of 1 s), kept moving by the resends.
        let ends_in_ms = ms_of(&alert["endsAt"]) - now_ms();
        assert!(
            (0..=10_000).contains(&ends_in_ms),
            "{ends_in_ms} ms: {alert}"
        );
        assert_eq!(alert["status"]["state"], "active");
    }

    // Alertmanager grouped them: one notification with both.
    let firing = wait_for("the firing notification", Duration::from_secs(20), || {
        hook.about(WASTE_RULE, "firing").first().cloned()
    })
    .await;
    assert_eq!(guests_of(&firing), ["web-1", "web-2"], "{firing}");
    let told: Vec<&str> = firing["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["fingerprint"].as_str().unwrap())
        .collect();
    for alert in &arrived {
        assert!(told.contains(&alert["fingerprint"].as_str().unwrap()));
    }

    // The rule is switched off: both resolve, in Alertmanager (no longer active) and in its
    // resolved notification, with the same labels.
    waste.enabled = false;
    db.save_alert_rule(Some(tickscope_server::domain::RuleId(1)), &waste, "test", 0)
        .await
        .unwrap();
    wait_for(
        "the alerts resolved in Alertmanager",
        Duration::from_secs(30),
        || {
            alertmanager_alerts(&am, WASTE_RULE)
                .is_empty()
                .then_some(())
        },
    )
    .await;
    let resolved = wait_for("the resolved notification", Duration::from_secs(20), || {
        hook.about(WASTE_RULE, "resolved").first().cloned()
    })
    .await;
    assert_eq!(guests_of(&resolved), ["web-1", "web-2"], "{resolved}");
    let history = db.resolved_alerts(10).await.unwrap();
    for alert in resolved["alerts"].as_array().unwrap() {
        let fired = arrived
            .iter()
            .find(|a| a["fingerprint"] == alert["fingerprint"])
            .expect("resolved with the fingerprint it fired with");
        assert_eq!(fired["labels"], alert["labels"]);
        assert_eq!(alert["status"], "resolved");
        // Resolved because tickscope said when (endsAt = when it resolved), not because the
        // last endsAt it was sent with ran out.
        let mine = history
            .iter()
            .find(|a| a.subject_name == alert["labels"]["guest"].as_str().unwrap())
            .unwrap();
        assert_eq!(
            ms_of(&alert["endsAt"]),
            mine.resolved_ms.unwrap(),
            "{alert}"
        );
    }

    // A silence made in Alertmanager for late-1: its alert arrives but is suppressed, and no
    // notification tells of it; late-2's (silenced in tickscope only) is told.
    let silence = ureq::post(&format!("{am}/api/v2/silences"))
        .header("Content-Type", "application/json")
        .send(
            json!({
                "matchers": [{"name": "guest", "value": "late-1", "isRegex": false, "isEqual": true}],
                "startsAt": chrono::Utc::now().to_rfc3339(),
                "endsAt": (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339(),
                "createdBy": "test",
                "comment": "kernel upgrade booked",
            })
            .to_string(),
        )
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let silence_id = serde_json::from_str::<Value>(&silence).unwrap()["silenceID"]
        .as_str()
        .unwrap()
        .to_string();
    post_report(&url, &token, 2, vec![ticking("late-1"), ticking("late-2")]);
    let late = wait_for(
        "the late alerts in Alertmanager",
        Duration::from_secs(30),
        || {
            let alerts = alertmanager_alerts(&am, LATE_RULE);
            (alerts.len() == 2).then_some(alerts)
        },
    )
    .await;
    assert_eq!(late[0]["labels"]["guest"], "late-1");
    assert_eq!(late[0]["status"]["state"], "suppressed", "{}", late[0]);
    assert_eq!(late[0]["status"]["silencedBy"], json!([silence_id]));
    assert_eq!(late[1]["status"]["state"], "active", "{}", late[1]);
    let told = wait_for("the late notification", Duration::from_secs(20), || {
        hook.about(LATE_RULE, "firing").first().cloned()
    })
    .await;
    assert_eq!(guests_of(&told), ["late-2"], "{told}");
    // Beyond group wait and interval (1 s each) and a margin: late-1 is never told.
    tokio::time::sleep(Duration::from_secs(4)).await;
    for n in hook.received() {
        assert!(
            !guests_of(&n).contains(&"late-1".to_string()),
            "a silenced alert was notified: {n}"
        );
    }
}
