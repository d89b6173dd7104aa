//! Changes made to guests: the readiness check a playbook makes first, the record it leaves
//! with the agent token of the guest's host, what each recorded change did (measured in the hour
//! after it, then settled), and where the guest page and the plan page show it.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{Reply, Server, fleet_report, guest, manual_clock, report, server_with_clock};
use tickscope_server::auth;
use tickscope_server::clock::Clock;
use tickscope_server::domain::TokenRole;
use tickscope_server::fleet::change_records;
use tickscope_server::state::Options;

const MINUTE_MS: i64 = 60_000;

async fn guest_id(s: &Server, name: &str) -> i64 {
    let list = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    list["guests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list:#}"))["id"]
        .as_i64()
        .unwrap()
}

async fn readiness(s: &Server, id: i64, rule: &str) -> Reply {
    s.call(
        Method::GET,
        &format!("/api/v1/guests/{id}/readiness?rule={rule}"),
        Some(&s.viewer_token),
        None,
    )
    .await
}

async fn record(s: &Server, id: i64, token: &str, body: Value) -> Reply {
    s.call(
        Method::POST,
        &format!("/api/v1/guests/{id}/changes"),
        Some(token),
        Some(body.to_string()),
    )
    .await
}

async fn changes_of(s: &Server, id: i64) -> Value {
    s.call(
        Method::GET,
        &format!("/api/v1/guests/{id}/changes"),
        Some(&s.viewer_token),
        None,
    )
    .await
    .json()
}

/// An agent token bound to `host`, as `token add --host` or `--hosts-file` makes, or to none
/// yet (its first report would bind it).
async fn agent_token_for(s: &Server, host: Option<&str>) -> String {
    let token = auth::new_token().unwrap();
    s.db.insert_token(
        host.unwrap_or("unbound"),
        TokenRole::Agent,
        &auth::token_hash(&token),
        host,
        0,
    )
    .await
    .unwrap();
    token
}

#[tokio::test]
async fn a_change_is_checked_recorded_measured_and_shown_and_bad_records_change_nothing() {
    let clock = manual_clock();
    let s = server_with_clock(Options::default(), clock.clone()).await;
    for seq in 1..=7 {
        clock.advance_ms(10_000);
        let reply = s
            .post_report(Some(&s.agent_token), &fleet_report(seq))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    let ticker = guest_id(&s, "ticker-1").await;

    // The check before: ready for its change, refused for one it does not need, with why.
    let ready = readiness(&s, ticker, "remove_nohz_off").await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.body);
    let ready = ready.json();
    assert_eq!(ready["ready"], true, "{ready:#}");
    let other = readiness(&s, ticker, "disable_hpet").await.json();
    assert_eq!(other["ready"], false, "{other:#}");
    assert_eq!(other["in_plan"], false, "{other:#}");
    assert!(
        other["reason"]
            .as_str()
            .unwrap()
            .contains("remove_nohz_off"),
        "{other:#}"
    );
    assert_eq!(
        readiness(&s, 999_999, "remove_nohz_off").await.status,
        StatusCode::NOT_FOUND
    );
    let no_rule = s
        .call(
            Method::GET,
            &format!("/api/v1/guests/{ticker}/readiness"),
            Some(&s.viewer_token),
            None,
        )
        .await;
    assert_eq!(no_rule.status, StatusCode::BAD_REQUEST, "{}", no_rule.body);

    // Records refused, each with its reason, and none stored.
    let good = json!({"rule": "remove_nohz_off", "by": "ada via ansible", "note": "CHG-42"});
    let other_host = agent_token_for(&s, Some("hv2")).await;
    let unbound = agent_token_for(&s, None).await;
    let long_by = "x".repeat(201);
    let cases: [(&str, i64, &str, Value, StatusCode, &str); 9] = [
        (
            "a viewer token",
            ticker,
            &s.viewer_token,
            good.clone(),
            StatusCode::FORBIDDEN,
            "agent token",
        ),
        (
            "another host's token",
            ticker,
            &other_host,
            good.clone(),
            StatusCode::FORBIDDEN,
            "runs on host",
        ),
        (
            "a token bound to no host yet",
            ticker,
            &unbound,
            good.clone(),
            StatusCode::FORBIDDEN,
            "bound to no host yet",
        ),
        (
            "a guest that is not reported",
            999_999,
            &s.agent_token,
            good.clone(),
            StatusCode::NOT_FOUND,
            "no guest",
        ),
        (
            "a change it does not need",
            ticker,
            &s.agent_token,
            json!({"rule": "disable_hpet", "by": "ada"}),
            StatusCode::CONFLICT,
            "remove_nohz_off",
        ),
        (
            "no one made it",
            ticker,
            &s.agent_token,
            json!({"rule": "remove_nohz_off", "by": "  "}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "by",
        ),
        (
            "a by too long",
            ticker,
            &s.agent_token,
            json!({"rule": "remove_nohz_off", "by": long_by}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "200",
        ),
        (
            "control characters",
            ticker,
            &s.agent_token,
            json!({"rule": "remove_nohz_off", "by": "ada\u{1b}[2J"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "control",
        ),
        (
            "a field it does not know",
            ticker,
            &s.agent_token,
            json!({"rule": "remove_nohz_off", "by": "ada", "at_ms": 1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "at_ms",
        ),
    ];
    for (what, id, token, body, status, says) in cases {
        let reply = record(&s, id, token, body).await;
        assert_eq!(reply.status, status, "{what}: {}", reply.body);
        assert!(
            reply.body.contains(says),
            "{what}: {} lacks {says:?}",
            reply.body
        );
    }
    assert!(
        s.db.change_records(None, 100).await.unwrap().is_empty(),
        "a refused record stored something"
    );

    // The record, by the agent token of the guest's host: its projection kept.
    let made_at = clock.now_ms();
    let reply = record(&s, ticker, &s.agent_token, good.clone()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let made = reply.json();
    assert_eq!(made["rule"], "remove_nohz_off");
    assert_eq!(made["kind"], "boot_parameter");
    assert_eq!(made["made_at_ms"], made_at);
    assert_eq!(made["made_by"], "ada via ansible");
    assert_eq!(made["recorded_with"], "agent");
    assert_eq!(made["outcome"], "measuring");
    let projected = made["projected_cpu_pct"].as_f64().unwrap();
    assert!(projected > 4.0, "{made:#}");

    // The guest restarted without nohz=off: quiet now.
    for seq in 8..=13 {
        clock.advance_ms(10_000);
        let r = report(
            seq,
            vec![
                guest("quiet", 1, 0.3, 38.0, None),
                guest("ticker-1", 1, 0.3, 38.0, Some("console=ttyS0")),
                guest("ticker-2", 2, 8.6, 572.0, Some("console=ttyS0 nohz=off")),
            ],
        );
        let reply = s.post_report(Some(&s.agent_token), &r).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    let listed = changes_of(&s, ticker).await;
    let so_far = &listed["changes"][0];
    assert_eq!(so_far["outcome"], "measuring", "{listed:#}");
    let saved = so_far["measured"]["saved_cpu_pct"].as_f64().unwrap();
    assert!((saved - 5.0).abs() < 0.5, "{listed:#}");
    // The guest no longer needs it: the check now refuses it.
    let after = readiness(&s, ticker, "remove_nohz_off").await.json();
    assert_eq!(after["in_plan"], false, "{after:#}");

    // An hour and a minute on, the retention's pass settles it for good.
    clock.advance_ms(62 * MINUTE_MS);
    let settled = change_records::settle(&s.db, clock.now_ms()).await.unwrap();
    assert_eq!(settled, 1);
    assert_eq!(
        change_records::settle(&s.db, clock.now_ms()).await.unwrap(),
        0
    );
    let listed = changes_of(&s, ticker).await;
    let c = &listed["changes"][0];
    assert_eq!(c["outcome"], "measured", "{listed:#}");
    assert!(
        (c["measured"]["saved_cpu_pct"].as_f64().unwrap() - saved).abs() < 1e-9,
        "{listed:#}"
    );
    let fleet = s
        .call(Method::GET, "/api/v1/changes", Some(&s.viewer_token), None)
        .await
        .json();
    assert_eq!(fleet["changes"].as_array().unwrap().len(), 1, "{fleet:#}");
    assert_eq!(fleet["changes"][0]["outcome"], "measured");
}

#[tokio::test]
async fn the_guest_page_and_the_plan_show_changes_made_and_pending() {
    let clock = manual_clock();
    let s = server_with_clock(Options::default(), clock.clone()).await;
    for seq in 1..=7 {
        clock.advance_ms(10_000);
        s.post_report(Some(&s.agent_token), &fleet_report(seq))
            .await;
    }
    let ticker = guest_id(&s, "ticker-1").await;
    let login = s.login("alice", "viewer").await;
    let page = s.page(&format!("/guests/{ticker}"), &login).await;
    assert!(
        page.body
            .contains("No change to this guest has been recorded"),
        "{}",
        page.body
    );
    let plan = s.page("/plan", &login).await;
    assert_eq!(plan.status, StatusCode::OK);
    assert!(plan.body.contains("Changes made"), "{}", plan.body);

    let evil = "<img src=x onerror=alert(1)>";
    let reply = record(
        &s,
        ticker,
        &s.agent_token,
        json!({"rule": "remove_nohz_off", "by": evil, "note": evil}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let page = s.page(&format!("/guests/{ticker}"), &login).await;
    assert_eq!(page.status, StatusCode::OK);
    let section = page.body.split("id=\"changes-made\"").nth(1).unwrap();
    let section = section.split("id=\"alerts\"").next().unwrap();
    for text in ["nohz=off", "measuring", "recorded with agent"] {
        assert!(section.contains(text), "{text} missing: {section}");
    }
    assert!(
        !page.body.contains(evil),
        "an unescaped name on the guest page"
    );

    // The plan: ticker-2 still needs it (pending), ticker-1 has it made.
    let plan = s.page("/plan", &login).await;
    assert!(
        !plan.body.contains(evil),
        "an unescaped name on the plan page"
    );
    let row = plan
        .body
        .split("<tr>")
        .find(|r| r.contains("<code>remove_nohz_off</code>"))
        .unwrap_or_else(|| panic!("no tally row: {}", plan.body));
    let cells: Vec<&str> = row
        .split("<td class=\"num\">")
        .skip(1)
        .map(|c| c.split('<').next().unwrap())
        .collect();
    // Pending, made, measured.
    assert_eq!(&cells[..3], ["1", "1", "0"], "{row}");
    assert!(plan.body.contains("ticker-1"), "{}", plan.body);
}

/// `tickscope-server token add … --hosts-file`, run as an admin would.
fn enrol(
    db: &std::path::Path,
    hosts: &std::path::Path,
    output: &std::path::Path,
) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
        .args(["token", "add", "rollout", "--role", "agent", "--hosts-file"])
        .arg(hosts)
        .arg("--output")
        .arg(output)
        .arg("--db")
        .arg(db)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn token_add_hosts_file_makes_one_bound_token_per_host_or_none() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("t.db");
    let hosts = dir.path().join("hosts.txt");
    let output = dir.path().join("tokens.yml");

    // A bad line refuses the whole file: no token, no file.
    std::fs::write(&hosts, "hv-01\nhv 02\nhv-01\n").unwrap();
    let (ok, err) = enrol(&db_path, &hosts, &output);
    assert!(!ok);
    assert!(
        err.contains("line 2") && err.contains("line 3") && err.contains("no token made"),
        "{err}"
    );
    assert!(!output.exists());

    std::fs::write(&hosts, "# rack 4\nhv-01\nhv-02.example  # spare\n").unwrap();
    let (ok, err) = enrol(&db_path, &hosts, &output);
    assert!(ok, "{err}");
    assert_eq!(
        std::fs::metadata(&output).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let yaml = std::fs::read_to_string(&output).unwrap();
    let tokens: Vec<(String, String)> = yaml
        .lines()
        .filter_map(|l| l.strip_prefix("  \""))
        .map(|l| {
            let (host, token) = l.split_once("\": \"").unwrap();
            (host.to_string(), token.trim_end_matches('"').to_string())
        })
        .collect();
    assert_eq!(
        tokens.iter().map(|(h, _)| h.as_str()).collect::<Vec<_>>(),
        ["hv-01", "hv-02.example"],
        "{yaml}"
    );
    let db = tickscope_server::db::Db::open(&db_path).await.unwrap();
    let stored = db.tokens().await.unwrap();
    for (host, token) in &tokens {
        let hash = auth::token_hash(token);
        let found = db
            .tokens_by_hash_prefix(&hash[..tickscope_server::db::LOOKUP_PREFIX_CHARS])
            .await
            .unwrap();
        let row = found
            .iter()
            .find(|t| t.sha256_hex == hash)
            .expect("token stored");
        let listed = stored.iter().find(|t| t.id == row.id).unwrap();
        assert_eq!(listed.host_name.as_deref(), Some(host.as_str()));
        assert_eq!(listed.role, TokenRole::Agent);
    }

    // Run again onto the same file: refused, the tokens in use kept, nothing new made.
    let before = std::fs::read_to_string(&output).unwrap();
    let (ok, err) = enrol(&db_path, &hosts, &output);
    assert!(!ok);
    assert!(err.contains("never overwritten"), "{err}");
    assert_eq!(std::fs::read_to_string(&output).unwrap(), before);
    assert_eq!(db.tokens().await.unwrap().len(), stored.len());
    db.close().await;
}
