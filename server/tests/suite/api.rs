//! The HTTP API and pages, called in-process through the router against a real SQLite file.

use crate::common;
use crate::common::database::{RawDb, backend};
use tickscope_server::db::BackendKind;

use axum::http::{Method, StatusCode};
use serde_json::json;

use common::{fleet_report, guest, report, server};
use tickscope_server::auth;

#[tokio::test]
async fn a_report_is_stored_and_ranked_by_waste() {
    let s = server().await;
    let reply = s.post_report(Some(&s.agent_token), &fleet_report(0)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.json()["status"], "stored");
    assert_eq!(s.stored().await, (1, 3));

    let reply = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let guests = reply.json()["guests"].as_array().unwrap().clone();
    let names: Vec<&str> = guests.iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ticker-2", "ticker-1", "quiet"]);
    let modes: Vec<&str> = guests
        .iter()
        .map(|g| g["tick_mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["periodic", "periodic", "tickless"]);
    for g in &guests {
        for field in [
            "uuid",
            "host",
            "hypervisor",
            "vcpus",
            "host_cpu_pct",
            "wakeups_per_vcpu",
            "wasted_cpu_pct",
            "suggestions",
        ] {
            assert!(g.get(field).is_some(), "{field} missing in {g}");
        }
    }
    assert_eq!(guests[0]["suggestions"][0]["rule"], "remove_nohz_off");
    assert!((guests[1]["host_cpu_pct"].as_f64().unwrap() - 5.3).abs() < 1e-9);
    assert!((guests[1]["wakeups_per_vcpu"].as_f64().unwrap() - 650.0).abs() < 1e-9);
    assert!(guests[2]["wasted_cpu_pct"].as_f64().unwrap() < 1.0);
    assert!(guests[2]["suggestions"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn replayed_report_is_acknowledged_but_not_stored_twice() {
    let s = server().await;
    let r = fleet_report(7);
    assert_eq!(
        s.post_report(Some(&s.agent_token), &r).await.json()["status"],
        "stored"
    );
    let again = s.post_report(Some(&s.agent_token), &r).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json()["status"], "duplicate");
    assert_eq!(s.stored().await, (1, 3));
    // The next sequence number is a new report; a new run may reuse sequence numbers.
    assert_eq!(
        s.post_report(Some(&s.agent_token), &fleet_report(8))
            .await
            .json()["status"],
        "stored"
    );
    let mut restarted = fleet_report(7);
    restarted["agent"]["run_id"] = json!("run-2");
    assert_eq!(
        s.post_report(Some(&s.agent_token), &restarted).await.json()["status"],
        "stored"
    );
    assert_eq!(s.stored().await, (3, 9));
}

#[tokio::test]
async fn refused_reports_get_a_json_error_and_store_nothing() {
    let s = server().await;
    let good = fleet_report(1);
    let mut negative = fleet_report(1);
    negative["guests"][1]["host_cpu_seconds"] = json!(-1.0);
    let cases: Vec<(Option<&str>, String, StatusCode, &str)> = vec![
        (
            None,
            good.to_string(),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            Some("tks_not-a-real-token"),
            good.to_string(),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            Some(&s.viewer_token),
            good.to_string(),
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            Some(&s.agent_token),
            "{not json".into(),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Some(&s.agent_token),
            json!({"seq": 1}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
        ),
        (
            Some(&s.agent_token),
            negative.to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
        ),
    ];
    for (token, body, status, code) in cases {
        let reply = s
            .call(Method::POST, "/api/v1/reports", token, Some(body.clone()))
            .await;
        assert_eq!(reply.status, status, "{body}: {}", reply.body);
        assert!(
            reply.content_type.starts_with("application/json"),
            "{}",
            reply.content_type
        );
        let error = &reply.json()["error"];
        assert_eq!(error["code"], code, "{body}");
        assert!(!error["message"].as_str().unwrap().is_empty());
        assert_eq!(s.stored().await, (0, 0), "{body} stored something");
    }
    let reply = s.post_report(Some(&s.agent_token), &negative).await;
    assert_eq!(reply.json()["error"]["field"], "guests[1].host_cpu_seconds");
}

#[tokio::test]
async fn reading_the_ranking_needs_a_viewer_token() {
    let s = server().await;
    let none = s.call(Method::GET, "/api/v1/guests", None, None).await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    let agent = s
        .call(Method::GET, "/api/v1/guests", Some(&s.agent_token), None)
        .await;
    assert_eq!(agent.status, StatusCode::FORBIDDEN);
    let missing = s
        .call(
            Method::GET,
            "/api/v1/guests/999",
            Some(&s.viewer_token),
            None,
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json()["error"]["code"], "not_found");
}

/// Whether `text` appears HTML-escaped (as `&lt;` or `&#60;`) in `html`.
fn escaped(html: &str, text: &str) -> bool {
    let named = text.replace('<', "&lt;").replace('>', "&gt;");
    let numeric = text.replace('<', "&#60;").replace('>', "&#62;");
    html.contains(&named) || html.contains(&numeric)
}

#[tokio::test]
async fn hostile_vm_names_and_command_lines_are_escaped_in_pages() {
    let s = server().await;
    let evil = "<script>alert('x')</script>";
    let mut r = report(
        1,
        vec![guest(
            evil,
            1,
            5.0,
            700.0,
            Some("nohz=off \"><img src=x onerror=alert(1)>"),
        )],
    );
    // Host names come from the hosts' agents: hostile too (the overview's host table).
    r["host"]["name"] = serde_json::json!("<b onmouseover=alert(2)>hv</b>");
    assert_eq!(
        s.post_report(Some(&s.agent_token), &r).await.status,
        StatusCode::OK
    );

    let overview = s.page("/", &s.login("alice", "viewer").await).await;
    assert_eq!(overview.status, StatusCode::OK);
    assert!(overview.content_type.starts_with("text/html"));
    assert!(!overview.body.contains(evil), "raw VM name in the overview");
    assert!(escaped(&overview.body, "<script>"), "{}", overview.body);
    assert!(!overview.body.contains("<b onmouseover"), "raw host name");
    assert!(escaped(&overview.body, "<b onmouseover"));

    let id = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json()["guests"][0]["id"]
        .clone();
    let page = s
        .page(&format!("/guests/{id}"), &s.login("alice", "viewer").await)
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(!page.body.contains(evil));
    assert!(!page.body.contains("<img src=x"));
    assert!(escaped(&page.body, "<img src=x"));
}

#[tokio::test]
async fn guest_page_shows_figures_evidence_and_suggestions() {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    let guests = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    let id = &guests["guests"][0]["id"];
    let page = s
        .page(&format!("/guests/{id}"), &s.login("alice", "viewer").await)
        .await;
    assert_eq!(page.status, StatusCode::OK);
    for text in [
        "ticker-2",
        "periodic",
        "nohz=off",
        "Expected saving",
        "wake-ups per vCPU per second",
    ] {
        assert!(
            page.body.contains(text),
            "{text} missing from the guest page"
        );
    }
    let login = s.login("alice", "viewer").await;
    let missing = s.page("/guests/12345", &login).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.content_type.starts_with("text/html"));
    let bad = s.page("/guests/abc", &login).await;
    assert_eq!(bad.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_database_runs_in_wal_mode() {
    let s = server().await;
    let expected = match crate::common::database::backend() {
        tickscope_server::db::BackendKind::Sqlite => Some("wal"),
        // PostgreSQL has no journal mode to set: none is reported.
        tickscope_server::db::BackendKind::Postgres => None,
    };
    assert_eq!(s.db.journal_mode().await.unwrap().as_deref(), expected);
}

#[tokio::test]
async fn an_agent_token_reports_for_one_host_only() {
    let s = server().await;
    assert_eq!(
        s.post_report(Some(&s.agent_token), &fleet_report(1))
            .await
            .status,
        StatusCode::OK
    );
    let mut other_host = fleet_report(2);
    other_host["host"]["name"] = json!("hv2");
    let reply = s.post_report(Some(&s.agent_token), &other_host).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("hv1")
    );
    assert_eq!(
        s.stored().await,
        (1, 3),
        "the other host's report stored something"
    );

    // A token made for a named host is bound before its first report.
    let token = auth::new_token().unwrap();
    s.db.insert_token(
        "hv9",
        tickscope_server::domain::TokenRole::Agent,
        &auth::token_hash(&token),
        Some("hv9"),
        tickscope_server::clock::now_ms(),
    )
    .await
    .unwrap();
    let reply = s.post_report(Some(&token), &fleet_report(3)).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(s.stored().await, (1, 3));
}

#[tokio::test]
async fn an_oversized_report_is_refused_with_413() {
    let s = server().await;
    let mut r = fleet_report(1);
    r["padding"] = json!("x".repeat(17 * 1024 * 1024));
    let reply = s.post_report(Some(&s.agent_token), &r).await;
    assert_eq!(
        reply.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        reply.body
    );
    assert_eq!(reply.json()["error"]["code"], "too_large");
    assert_eq!(s.stored().await, (0, 0));
}

#[tokio::test]
async fn a_body_not_sent_as_json_is_refused_with_415_as_documented() {
    let s = server().await;
    let guest_token = auth::new_token().unwrap();
    s.db.insert_token(
        "probe",
        tickscope_server::domain::TokenRole::Guest,
        &auth::token_hash(&guest_token),
        None,
        0,
    )
    .await
    .unwrap();
    let facts =
        json!({"facts": {"collected_ms": 0, "dmi_uuid": "564d9a3b-1234-5678-9abc-def012345678"}});
    let posts = [
        (
            "/api/v1/reports",
            &s.agent_token,
            fleet_report(1).to_string(),
        ),
        ("/api/v1/guest-facts", &guest_token, facts.to_string()),
    ];
    for (path, token, body) in posts {
        for content_type in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            None,
        ] {
            let reply = s.post_as(path, token, content_type, body.clone()).await;
            assert_eq!(
                reply.status,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{path} as {content_type:?}: {}",
                reply.body
            );
            assert!(reply.content_type.starts_with("application/json"));
            assert_eq!(reply.json()["error"]["code"], "unsupported_media_type");
        }
    }
    assert_eq!(s.stored().await, (0, 0));
    // The same report sent as JSON (with a charset parameter, too) is taken.
    let reply = s
        .post_as(
            "/api/v1/reports",
            &s.agent_token,
            Some("application/json; charset=utf-8"),
            fleet_report(1).to_string(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

#[tokio::test]
async fn a_report_that_fails_halfway_through_storing_leaves_nothing_behind() {
    let s = server().await;
    // Make the database itself refuse the third guest's sample, after the host, the report and
    // the first guests were written in the same transaction.
    let mut raw = RawDb::connect(&s.test_db).await;
    raw.execute(
        &["CREATE TRIGGER refuse_ticker2 BEFORE INSERT ON samples
           WHEN (SELECT name FROM guests WHERE id = NEW.guest_id) = 'ticker-2'
           BEGIN SELECT RAISE(ABORT, 'refused by test'); END"],
        &[
            "CREATE FUNCTION refuse_ticker2() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF (SELECT name FROM guests WHERE id = NEW.guest_id) = 'ticker-2' THEN
                     RAISE EXCEPTION 'refused by test';
                 END IF;
                 RETURN NEW;
             END $$",
            "CREATE TRIGGER refuse_ticker2 BEFORE INSERT ON samples
             FOR EACH ROW EXECUTE FUNCTION refuse_ticker2()",
        ],
    )
    .await;
    let reply = s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    assert_eq!(
        reply.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        reply.body
    );
    assert!(
        !reply.body.contains("refused by test"),
        "internal details leaked: {}",
        reply.body
    );
    assert_eq!(s.stored().await, (0, 0));
    let hosts = raw.count("hosts").await;
    let guests = raw.count("guests").await;
    assert_eq!(
        (hosts, guests),
        (0, 0),
        "a half-stored report left rows behind"
    );
    // Once the database accepts it again, the same report is stored whole: nothing was marked seen.
    raw.execute(
        &["DROP TRIGGER refuse_ticker2"],
        &["DROP TRIGGER refuse_ticker2 ON samples"],
    )
    .await;
    let reply = s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    assert_eq!(reply.json()["status"], "stored");
    assert_eq!(s.stored().await, (1, 3));
}

#[tokio::test]
async fn a_host_clock_that_steps_back_does_not_shrink_the_window() {
    let s = server().await;
    let now = tickscope_server::clock::now_ms();
    for (seq, end_ms) in [(1, now - 1000), (2, now - 3_600_000)] {
        let mut r = fleet_report(seq);
        r["interval"]["end_ms"] = json!(end_ms);
        r["interval"]["start_ms"] = json!(end_ms - 10_000);
        assert_eq!(
            s.post_report(Some(&s.agent_token), &r).await.status,
            StatusCode::OK
        );
    }
    let guests = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    for g in guests["guests"].as_array().unwrap() {
        assert_eq!(g["intervals"], 2, "{g}");
    }
}

#[tokio::test]
async fn waste_is_priced_with_the_cost_model_it_names() {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    let body = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    let totals = &body["totals"];
    assert_eq!(totals["cost_model"]["watts_per_busy_core"], 7.0);
    assert_eq!(totals["cost_model"]["currency"], "EUR");
    let cores = totals["wasted_cores"].as_f64().unwrap();
    // (8.6 − 2 × 0.5) + (5.3 − 0.5) = 12.4 % of a core.
    assert!((cores - 0.124).abs() < 1e-9, "{totals}");
    let kwh = totals["wasted_kwh_per_year"].as_f64().unwrap();
    assert!((kwh - cores * 7.0 * 8760.0 / 1000.0).abs() < 1e-9);
    assert!((totals["wasted_cost_per_year"].as_f64().unwrap() - kwh * 0.25).abs() < 1e-9);
    let first = &body["guests"][0];
    assert!((first["wasted_core_hours_per_day"].as_f64().unwrap() - 0.076 * 24.0).abs() < 1e-9);
    let page = s.page("/", &s.login("alice", "viewer").await).await;
    assert!(
        page.body
            .contains("at 7 W per busy core and 0.25 EUR per kWh"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn busy_intervals_are_left_out_of_the_waste() {
    let s = server().await;
    // A nohz=off guest idles at 5.3 % of a core, except for one interval of work at 80 %.
    for (seq, cpu) in [5.3, 5.3, 80.0, 5.3, 5.3, 5.3].into_iter().enumerate() {
        let r = report(
            seq as u64,
            vec![guest(
                "ticker",
                1,
                cpu,
                650.0,
                Some("console=ttyS0 nohz=off"),
            )],
        );
        let reply = s.post_report(Some(&s.agent_token), &r).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    let reply = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await;
    let g = &reply.json()["guests"][0];
    assert_eq!(g["tick_mode"], "periodic", "{g}");
    assert_eq!(g["idle_judged_from"], "inferred");
    assert!(
        (g["idle_share"].as_f64().unwrap() - 5.0 / 6.0).abs() < 1e-9,
        "{g}"
    );
    // What the host saw includes the work; what the waste rests on does not.
    assert!(
        (g["host_cpu_pct"].as_f64().unwrap() - 17.75).abs() < 1e-9,
        "{g}"
    );
    assert!(
        (g["idle_host_cpu_pct"].as_f64().unwrap() - 5.3).abs() < 1e-9,
        "{g}"
    );
    // (5.3 − 0.5 default baseline) in five of six intervals.
    let wasted = g["wasted_cpu_pct"].as_f64().unwrap();
    assert!((wasted - 4.8 * 5.0 / 6.0).abs() < 1e-9, "{wasted}: {g}");
    assert!(
        g["waste_reasoning"]
            .as_str()
            .unwrap()
            .contains("busy intervals add nothing"),
        "{g}"
    );

    // Accumulated: 4.8 % of a core for the five idle 10 s intervals, nothing for the busy one.
    let id = g["id"].as_i64().unwrap();
    let reply = s
        .call(
            Method::GET,
            &format!("/api/v1/guests/{id}"),
            Some(&s.viewer_token),
            None,
        )
        .await;
    let so_far = &reply.json()["waste_so_far"];
    let core_hours = so_far["wasted_core_hours_24h"].as_f64().unwrap();
    assert!(
        (core_hours - 0.048 * 50.0 / 3600.0).abs() < 1e-12,
        "{core_hours}: {so_far}"
    );
    assert_eq!(
        so_far["wasted_core_hours_7d"],
        so_far["wasted_core_hours_24h"]
    );
    assert!((so_far["measured_hours_24h"].as_f64().unwrap() - 60.0 / 3600.0).abs() < 1e-12);
    // 7 W a core, 0.25 EUR a kWh by default.
    let kwh = so_far["wasted_kwh_24h"].as_f64().unwrap();
    assert!((kwh - core_hours * 0.007).abs() < 1e-15, "{so_far}");
    // The list leaves it out: it is worked out per guest.
    let reply = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await;
    assert!(reply.json()["guests"][0].get("waste_so_far").is_none());
}

#[tokio::test]
async fn hosts_add_up_their_guests_waste_and_show_their_baselines() {
    let s = server().await;
    let reply = s.post_report(Some(&s.agent_token), &fleet_report(0)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let reply = s.call(Method::GET, "/api/v1/hosts", None, None).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.body);

    let reply = s
        .call(Method::GET, "/api/v1/hosts", Some(&s.viewer_token), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let hosts = reply.json()["hosts"].as_array().unwrap().clone();
    assert_eq!(hosts.len(), 1);
    let h = &hosts[0];
    assert_eq!(
        (
            h["host"].as_str(),
            h["guests"].as_u64(),
            h["ticking"].as_u64()
        ),
        (Some("hv1"), Some(3), Some(2))
    );
    // 5.3 − 0.5 and 8.6 − 2 × 0.5 against the default baseline (one tickless guest is too few).
    assert!(
        (h["wasted_cpu_pct"].as_f64().unwrap() - (4.8 + 7.6)).abs() < 1e-9,
        "{h}"
    );
    assert_eq!(h["baselines"][0]["hypervisor"], "qemu");
    assert_eq!(h["baselines"][0]["learned_from_guests"], 0);
    assert_eq!(reply.json()["cost_model"]["currency"], "EUR");
}

#[tokio::test]
async fn the_analysis_window_is_looked_up_by_index_not_scanned() {
    use tickscope_server::db::GuestScope;
    let s = server().await;
    for seq in 0..3 {
        s.post_report(Some(&s.agent_token), &fleet_report(seq))
            .await;
    }
    for scope in [
        GuestScope::Active { since_ms: 0 },
        GuestScope::Host {
            host_id: tickscope_server::domain::HostId(1),
            guest_id: tickscope_server::domain::GuestId(1),
            active_since_ms: 0,
        },
        GuestScope::Hosts {
            host_ids: &[
                tickscope_server::domain::HostId(1),
                tickscope_server::domain::HostId(2),
            ],
            active_since_ms: 0,
        },
    ] {
        let plan = s.db.window_query_plan(scope).await.unwrap();
        eprintln!("{plan:#?}");
        match backend() {
            BackendKind::Sqlite => {
                assert!(
                    plan.iter().any(|step| step.starts_with("SEARCH s USING")
                        && step.contains("samples_guest_received")),
                    "{plan:?}"
                );
                assert!(
                    !plan.iter().any(|step| step.starts_with("SCAN s")),
                    "{plan:?}"
                );
            }
            BackendKind::Postgres => {
                assert!(
                    postgres_looks_up(&plan, "samples_guest_received", "guest_id = g.id"),
                    "{plan:?}"
                );
                assert!(
                    !plan.iter().any(|step| step.contains("Seq Scan on samples")),
                    "{plan:?}"
                );
            }
        }
    }
}

/// Whether a PostgreSQL plan (`EXPLAIN` lines) scans `index` with a condition on `condition`:
/// an index scan without one reads the whole index.
fn postgres_looks_up(plan: &[String], index: &str, condition: &str) -> bool {
    plan.iter().enumerate().any(|(i, step)| {
        step.contains(&format!("using {index}"))
            && plan[i + 1..]
                .iter()
                .take_while(|detail| !detail.contains("->"))
                .any(|detail| detail.contains("Index Cond") && detail.contains(condition))
    })
}

#[tokio::test]
async fn a_token_is_found_by_its_hash_prefix_through_an_index_and_only_by_its_whole_hash() {
    let s = server().await;
    let plan = s.db.token_lookup_plan().await.unwrap();
    eprintln!("{plan:#?}");
    let uses_index = match backend() {
        BackendKind::Sqlite => plan
            .iter()
            .any(|step| step.contains("USING INDEX tokens_lookup_prefix")),
        BackendKind::Postgres => postgres_looks_up(&plan, "tokens_lookup_prefix", "substr"),
    };
    assert!(uses_index, "{plan:?}");
    // A token whose hash shares the first 16 hex digits but not the rest is refused: the
    // prefix only finds candidates.
    let real = tickscope_server::auth::token_hash(&s.viewer_token);
    let twin = format!("{}{}", &real[..16], "0".repeat(48));
    s.db.insert_token(
        "twin",
        tickscope_server::domain::TokenRole::Viewer,
        &twin,
        None,
        0,
    )
    .await
    .unwrap();
    let candidates = s.db.tokens_by_hash_prefix(&real[..16]).await.unwrap();
    assert_eq!(candidates.len(), 2);
    let ok = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await;
    assert_eq!(ok.status, StatusCode::OK);
    let wrong = format!("{}x", s.viewer_token);
    let refused = s
        .call(Method::GET, "/api/v1/guests", Some(&wrong), None)
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
}

/// A report of `n` guests on two hosts' worth of names, with few distinct figures: many ties.
fn many_guests_report(seq: u64, n: u32) -> serde_json::Value {
    let figures = [(0.3, 38.0), (5.3, 650.0), (8.6, 572.0), (0.3, 38.0)];
    let guests = (0..n)
        .map(|i| {
            let (cpu, wakeups) = figures[i as usize % figures.len()];
            let mut g = guest(&format!("g-{:02}", i % 9), 1 + i % 3, cpu, wakeups, None);
            g["pid"] = json!(5000 + i);
            g["name"] = json!(format!("{}-{i}", ["web", "db", "ci"][i as usize % 3]));
            g
        })
        .collect();
    report(seq, guests)
}

/// GET with the viewer token: status, the `Link` header, the body as JSON.
async fn get_list(s: &common::Server, path: &str) -> (StatusCode, String, serde_json::Value) {
    use axum::body::Body;
    use axum::http::{Request, header};
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let request = Request::builder()
        .uri(path)
        .header(header::AUTHORIZATION, format!("Bearer {}", s.viewer_token))
        .body(Body::empty())
        .unwrap();
    let response = s.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let link = response
        .headers()
        .get(header::LINK)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{path}: {e}: {}", String::from_utf8_lossy(&bytes)));
    (status, link, body)
}

fn ids(body: &serde_json::Value) -> Vec<i64> {
    body["guests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn walking_the_pages_returns_every_guest_once_in_the_unpaged_order() {
    let s = server().await;
    for seq in 1..=3 {
        let reply = s
            .post_report(Some(&s.agent_token), &many_guests_report(seq, 40))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    let views = [
        "",
        "sort=name",
        "sort=name&dir=desc",
        "sort=cpu&dir=asc",
        "sort=vcpus",
        "sort=mode",
        "sort=id",
        "mode=wasteful",
        "cause=ticking_kernel",
        "sort=cause",
        "q=web&sort=wakeups",
        "host=hv1&hypervisor=qemu&sort=hypervisor",
    ];
    for view in views {
        let (status, link, whole) = get_list(&s, &format!("/api/v1/guests?{view}")).await;
        assert_eq!(status, StatusCode::OK, "{view}: {whole}");
        assert_eq!(link, "", "{view}: one answer has no next page");
        assert!(whole["next_cursor"].is_null(), "{view}");
        let expected = ids(&whole);
        assert_eq!(whole["matching"], expected.len(), "{view}");
        if view.is_empty() {
            assert_eq!(expected.len(), 40);
        }
        assert!(!expected.is_empty(), "{view} matches no guest");
        // Page by page, following the Link header as a client would.
        let mut walked = Vec::new();
        let mut next = format!("/api/v1/guests?{view}&limit=7");
        let mut pages = 0;
        loop {
            let (status, link, page) = get_list(&s, &next).await;
            assert_eq!(status, StatusCode::OK, "{next}: {page}");
            pages += 1;
            let page_ids = ids(&page);
            assert!(page_ids.len() <= 7, "{next}");
            walked.extend(page_ids);
            assert_eq!(page["totals"], whole["totals"], "{next}");
            match page["next_cursor"].as_str() {
                None => {
                    assert_eq!(link, "", "{next}");
                    break;
                }
                Some(cursor) => {
                    let url = link
                        .strip_prefix('<')
                        .and_then(|l| l.strip_suffix(">; rel=\"next\""))
                        .unwrap_or_else(|| panic!("{next}: Link {link:?}"));
                    assert!(url.contains(cursor), "{url} does not carry {cursor}");
                    next = url.to_string();
                }
            }
        }
        assert_eq!(walked, expected, "{view}");
        assert_eq!(pages, expected.len().div_ceil(7).max(1), "{view}");
    }
}

#[tokio::test]
async fn bad_limits_sorts_and_cursors_are_400_with_a_message() {
    let s = server().await;
    for seq in 1..=2 {
        s.post_report(Some(&s.agent_token), &many_guests_report(seq, 12))
            .await;
    }
    let (_, _, first) = get_list(&s, "/api/v1/guests?limit=5").await;
    let cursor = first["next_cursor"].as_str().unwrap().to_string();
    let (status, _, _) = get_list(&s, &format!("/api/v1/guests?limit=5&cursor={cursor}")).await;
    assert_eq!(status, StatusCode::OK);
    let mut changed = cursor.clone().into_bytes();
    changed[2] = if changed[2] == b'A' { b'B' } else { b'A' };
    let changed = String::from_utf8(changed).unwrap();
    let cases = [
        ("limit=0".to_string(), "limit"),
        ("limit=1001".into(), "limit"),
        ("limit=-1".into(), "limit"),
        ("limit=seven".into(), "limit"),
        ("sort=bogus".into(), "sort"),
        ("dir=up".into(), "dir"),
        ("cursor=garbage".into(), "cursor"),
        ("cursor=".into(), "cursor"),
        (format!("cursor={changed}"), "cut short or changed"),
        (
            format!("cursor={}", &cursor[..cursor.len() - 2]),
            "cut short or changed",
        ),
        (
            format!("sort=name&cursor={cursor}"),
            "sort=waste and dir=desc",
        ),
        (format!("mode=periodic&cursor={cursor}"), "other filters"),
    ];
    for (query, says) in cases {
        let (status, link, body) = get_list(&s, &format!("/api/v1/guests?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(link, "", "{query}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{query}: {message}");
    }
}
