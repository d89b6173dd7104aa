//! Guest facts through the API: forwarded by a host agent, or posted by the probe itself.

use crate::common;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use common::{Reply, Server, fleet_report, manual_clock, server, server_with_clock};
use tickscope_server::auth;
use tickscope_server::state::Options;

const UUID: &str = "564d9a3b-1234-5678-9abc-def012345678";
/// The same UUID as VMware shows it to the guest: first three fields byte-swapped.
const UUID_SWAPPED: &str = "3b9a4d56-3412-7856-9abc-def012345678";

fn probe_facts(release: &str, cmdline: &str, modes: &[u32]) -> Value {
    json!({
        "collected_ms": tickscope_server::clock::now_ms(),
        "kernel_release": release,
        "distro_id": "debian", "distro_version_id": "12", "distro_name": "Debian GNU/Linux 12 (bookworm)",
        "config": {"source": "boot_config", "hz": 250, "hz_periodic": false, "no_hz_idle": false, "no_hz_full": true, "no_hz_legacy": false},
        "measured_hz": 250.3,
        "dynticks": {"nohz_mode": modes, "tick_stopped_cpus": 0},
        "cmdline": cmdline,
        "clocksource": "kvm-clock",
        "idle_fraction": 0.995,
        "cpus": 1,
        "dmi_uuid": UUID
    })
}

/// A fleet report whose first ticking guest carries a UUID and, optionally, channel facts.
fn report_with(seq: u64, facts: Option<Value>) -> Value {
    let mut r = fleet_report(seq);
    r["guests"][1]["uuid"] = json!(UUID);
    if let Some(facts) = facts {
        r["guests"][1]["facts"] = json!({"source": "probe_channel", "received_ms": tickscope_server::clock::now_ms(), "facts": facts});
    }
    r
}

async fn ranked(s: &Server) -> Vec<Value> {
    let reply = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.json()["guests"].as_array().unwrap().clone()
}

fn by_name<'a>(guests: &'a [Value], name: &str) -> &'a Value {
    guests.iter().find(|g| g["name"] == name).unwrap()
}

/// Posts a guest probe's facts with a guest token.
async fn post_facts(s: &Server, token: &str, facts: Value) -> Reply {
    let body = json!({ "facts": facts }).to_string();
    s.call(Method::POST, "/api/v1/guest-facts", Some(token), Some(body))
        .await
}

async fn guest_token(s: &Server) -> String {
    let token = auth::new_token().unwrap();
    s.db.insert_token(
        "probe",
        tickscope_server::domain::TokenRole::Guest,
        &auth::token_hash(&token),
        None,
        tickscope_server::clock::now_ms(),
    )
    .await
    .unwrap();
    token
}

#[tokio::test]
async fn facts_forwarded_by_the_host_agent_show_in_the_ranking() {
    let s = server().await;
    let facts = probe_facts("6.1.0-57-cloud-amd64", "console=ttyS0 nohz=off", &[0]);
    let reply = s
        .post_report(Some(&s.agent_token), &report_with(1, Some(facts)))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let guests = ranked(&s).await;
    let g = by_name(&guests, "ticker-1");
    assert_eq!(g["kernel_release"], "6.1.0-57-cloud-amd64");
    assert_eq!(g["distro"], "Debian GNU/Linux 12 (bookworm)");
    assert_eq!(g["config_hz"], 250);
    assert_eq!(g["measured_hz"], 250.3);
    assert_eq!(g["nohz"], "full");
    assert_eq!(g["cmdline_flags"], json!(["nohz=off"]));
    assert_eq!(g["facts_source"], "probe_channel");
    assert!(g["facts_age_s"].as_f64().unwrap() < 60.0);
    assert_eq!(g["idle_fraction"], 0.995);
    assert_eq!(g["tick_mode"], "periodic");
    assert_eq!(g["tick_mode_confidence"], "high");
    let evidence = g["evidence"].to_string();
    assert!(
        evidence.contains("NO_HZ_FULL built in but `nohz=off`"),
        "{evidence}"
    );
    // A guest without facts says so with nulls.
    assert_eq!(by_name(&guests, "quiet")["kernel_release"], Value::Null);
}

#[tokio::test]
async fn a_new_kernel_is_an_event_and_repeats_are_not() {
    let s = server().await;
    let old = probe_facts("6.1.0-57-cloud-amd64", "console=ttyS0 nohz=off", &[0]);
    let mut repeat = old.clone();
    repeat["measured_hz"] = json!(249.8);
    let new = probe_facts("6.1.0-58-cloud-amd64", "console=ttyS0", &[2]);
    for (seq, facts) in [(1, old), (2, repeat), (3, new)] {
        let reply = s
            .post_report(Some(&s.agent_token), &report_with(seq, Some(facts)))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    let g = by_name(&ranked(&s).await, "ticker-1").clone();
    assert_eq!(g["kernel_release"], "6.1.0-58-cloud-amd64");
    assert_eq!(
        g["tick_mode"], "tickless",
        "the new kernel's dynticks are active"
    );
    let page = s
        .page(
            &format!("/guests/{}", g["id"]),
            &s.login("alice", "viewer").await,
        )
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Kernel and command-line changes"));
    assert_eq!(
        page.body.matches("6.1.0-57-cloud-amd64").count(),
        1,
        "one row for the old kernel"
    );
    assert!(page.body.contains("6.1.0-58-cloud-amd64"));
}

#[tokio::test]
async fn a_guest_token_posts_facts_matched_by_uuid_in_either_byte_order() {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &report_with(1, None))
        .await;
    let token = guest_token(&s).await;
    let mut facts = probe_facts("6.1.0-57-cloud-amd64", "quiet nohz=off", &[0]);
    facts["dmi_uuid"] = json!(UUID_SWAPPED);
    let reply = post_facts(&s, &token, facts).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let g = by_name(&ranked(&s).await, "ticker-1").clone();
    assert_eq!(g["facts_source"], "probe_direct");
    assert_eq!(g["cmdline_flags"], json!(["nohz=off"]));
}

#[tokio::test]
async fn a_guest_token_writes_facts_for_one_guest_only() {
    let s = server().await;
    let mut r = report_with(1, None);
    r["guests"][2]["uuid"] = json!("00000000-0000-4000-8000-00000000beef");
    s.post_report(Some(&s.agent_token), &r).await;
    let token = guest_token(&s).await;
    assert_eq!(
        post_facts(&s, &token, probe_facts("6.1", "quiet", &[2]))
            .await
            .status,
        StatusCode::OK
    );
    // The same token now claims to be the neighbour: refused, and the neighbour has no facts.
    let mut neighbour = probe_facts("6.1", "quiet nohz=off", &[0]);
    neighbour["dmi_uuid"] = json!("00000000-0000-4000-8000-00000000beef");
    let reply = post_facts(&s, &token, neighbour).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    assert_eq!(
        by_name(&ranked(&s).await, "ticker-2")["kernel_release"],
        Value::Null
    );
}

#[tokio::test]
async fn each_token_does_only_its_own_job() {
    let s = server().await;
    let token = guest_token(&s).await;
    // A guest token cannot send host reports, nor read the fleet.
    let reply = s.post_report(Some(&token), &report_with(1, None)).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(s.stored().await, (0, 0));
    let reply = s
        .call(Method::GET, "/api/v1/guests", Some(&token), None)
        .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    // An agent or viewer token cannot post guest facts.
    s.post_report(Some(&s.agent_token), &report_with(1, None))
        .await;
    for other in [&s.agent_token, &s.viewer_token] {
        let reply = post_facts(&s, other, probe_facts("6.1", "quiet", &[2])).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    }
}

#[tokio::test]
async fn facts_for_an_unknown_guest_or_with_garbage_are_refused() {
    let s = server().await;
    let token = guest_token(&s).await;
    let reply = post_facts(&s, &token, probe_facts("6.1", "quiet", &[2])).await;
    assert_eq!(
        reply.status,
        StatusCode::NOT_FOUND,
        "no host reported this UUID yet"
    );
    s.post_report(Some(&s.agent_token), &report_with(1, None))
        .await;
    let mut no_uuid = probe_facts("6.1", "quiet", &[2]);
    no_uuid.as_object_mut().unwrap().remove("dmi_uuid");
    assert_eq!(
        post_facts(&s, &token, no_uuid).await.json()["error"]["field"],
        "facts.dmi_uuid"
    );
    let mut hostile = probe_facts("6.1", "quiet", &[2]);
    hostile["kernel_release"] = json!("6.1\u{1b}[2J");
    assert_eq!(
        post_facts(&s, &token, hostile).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    // Hostile facts forwarded in a host report are left out; the host's measurements are kept.
    let mut bad = probe_facts("6.1", "quiet", &[2]);
    bad["cmdline"] = json!("quiet\nnohz=off");
    let reply = s
        .post_report(Some(&s.agent_token), &report_with(2, Some(bad)))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(s.stored().await, (2, 6));
    assert_eq!(
        by_name(&ranked(&s).await, "ticker-1")["kernel_release"],
        Value::Null
    );
}

#[tokio::test]
async fn the_host_cpu_before_and_after_a_kernel_change_is_measured() {
    let s = server().await;
    let ticking = probe_facts("6.1.0-57-cloud-amd64", "console=ttyS0 nohz=off", &[0]);
    let tickless = probe_facts("6.1.0-57-cloud-amd64", "console=ttyS0", &[2]);
    // Two intervals at 5.3 % before the command line changes, two at 0.3 % after.
    for (seq, facts, cpu_pct) in [
        (1, &ticking, 5.3),
        (2, &ticking, 5.3),
        (3, &tickless, 0.3),
        (4, &tickless, 0.3),
    ] {
        let mut r = report_with(seq, Some(facts.clone()));
        r["guests"][1]["host_cpu_seconds"] = json!(cpu_pct / 100.0 * 10.0);
        let reply = s.post_report(Some(&s.agent_token), &r).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        // Received times order the samples around the change: keep them apart.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // Changes are measured after the reports are answered: wait for that.
    s.state.fleet.caught_up().await;
    let body = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    let g = by_name(body["guests"].as_array().unwrap(), "ticker-1");
    let change = &g["last_change"];
    assert!(
        (change["cpu_before_pct"].as_f64().unwrap() - 5.3).abs() < 1e-9,
        "{change}"
    );
    assert!(
        (change["cpu_after_pct"].as_f64().unwrap() - 0.3).abs() < 1e-9,
        "{change}"
    );
    assert!(
        (change["saved_cpu_pct"].as_f64().unwrap() - 5.0).abs() < 1e-9,
        "{change}"
    );
    assert_eq!(body["realised"]["guests"], 1);
    assert!((body["realised"]["saved_cpu_pct"].as_f64().unwrap() - 5.0).abs() < 1e-9);
    // Guests without a change have none.
    assert_eq!(
        by_name(body["guests"].as_array().unwrap(), "quiet")["last_change"],
        Value::Null
    );
    let page = s.page("/", &s.login("alice", "viewer").await).await;
    assert!(
        page.body.contains("5.00 % of a core saved so far"),
        "{}",
        page.body
    );
    let page = s
        .page(
            &format!("/guests/{}", g["id"]),
            &s.login("alice", "viewer").await,
        )
        .await;
    assert!(page.body.contains("Before and after the last change"));
    assert!(page.body.contains("5.30 % → 0.30 %"));
}

/// The guest's page and the ranking read one measurement: a change with no idle time after it
/// yet is measured again on its host's next report, not a minute later, so the ranking counts it
/// as soon as the guest's page could.
#[tokio::test]
async fn a_change_is_measured_on_the_first_report_that_makes_it_measurable() {
    let s = server().await;
    let ticking = probe_facts("6.1.0-57-cloud-amd64", "console=ttyS0 nohz=off", &[0]);
    let tickless = probe_facts("6.1.0-57-cloud-amd64", "console=ttyS0", &[2]);
    // The change arrives with report 3, which has no idle time after it; report 4 brings some.
    for (seq, facts, cpu_pct) in [(1, &ticking, 5.3), (2, &ticking, 5.3), (3, &tickless, 0.3)] {
        let mut r = report_with(seq, Some(facts.clone()));
        r["guests"][1]["host_cpu_seconds"] = json!(cpu_pct / 100.0 * 10.0);
        let reply = s.post_report(Some(&s.agent_token), &r).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    s.state.fleet.caught_up().await;
    let body = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    let id = by_name(body["guests"].as_array().unwrap(), "ticker-1")["id"].clone();
    assert_eq!(
        body["realised"]["guests"], 0,
        "no figures after the change yet"
    );
    let mut r = report_with(4, Some(tickless.clone()));
    r["guests"][1]["host_cpu_seconds"] = json!(0.3 / 100.0 * 10.0);
    let reply = s.post_report(Some(&s.agent_token), &r).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    // Nobody asks for the measurement (no `caught_up`): it must follow by itself. Before, it
    // waited for a report a minute later, which this test never sends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let list = loop {
        let list = s
            .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
            .await
            .json();
        if list["realised"]["guests"] == 1 {
            break list;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the change was not measured: {list:#}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let one = s
        .call(
            Method::GET,
            &format!("/api/v1/guests/{id}"),
            Some(&s.viewer_token),
            None,
        )
        .await
        .json();
    let listed = by_name(list["guests"].as_array().unwrap(), "ticker-1");
    assert_eq!(one["last_change"], listed["last_change"], "{one:#}");
    assert_eq!(
        list["realised"]["saved_cpu_pct"],
        one["last_change"]["saved_cpu_pct"]
    );
}

#[tokio::test]
async fn a_second_change_is_measured_against_the_first_not_across_it() {
    let s = server().await;
    let a = probe_facts("6.1.0-57-cloud-amd64", "console=ttyS0 nohz=off", &[0]);
    let b = probe_facts("6.1.0-57-cloud-amd64", "console=ttyS0", &[2]);
    let c = probe_facts("6.1.0-58-cloud-amd64", "console=ttyS0", &[2]);
    // A at 5.3 %, then B at 0.3 %, then C at 2 % (a worse kernel): the last change is B → C.
    for (seq, facts, cpu_pct) in [
        (1, &a, 5.3),
        (2, &a, 5.3),
        (3, &b, 50.0),
        (4, &b, 0.3),
        (5, &b, 0.3),
        (6, &c, 50.0),
        (7, &c, 2.0),
    ] {
        let mut r = report_with(seq, Some(facts.clone()));
        r["guests"][1]["host_cpu_seconds"] = json!(cpu_pct / 100.0 * 10.0);
        assert_eq!(
            s.post_report(Some(&s.agent_token), &r).await.status,
            StatusCode::OK
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // Changes are measured after the reports are answered: wait for that.
    s.state.fleet.caught_up().await;
    let body = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    let change = &by_name(body["guests"].as_array().unwrap(), "ticker-1")["last_change"];
    assert!(
        (change["cpu_before_pct"].as_f64().unwrap() - 0.3).abs() < 1e-9,
        "{change}"
    );
    assert!(
        (change["cpu_after_pct"].as_f64().unwrap() - 2.0).abs() < 1e-9,
        "{change}"
    );
    // It cost CPU, and the money says so.
    assert!(body["realised"]["saved_cpu_pct"].as_f64().unwrap() < 0.0);
    assert!(body["realised"]["saved_cost_per_year"].as_f64().unwrap() < 0.0);
}

#[tokio::test]
async fn the_guests_own_idle_time_decides_which_intervals_are_waste() {
    let clock = manual_clock();
    let s = server_with_clock(Options::default(), clock.clone()).await;
    // The guest says it was idle 99.5 % of the time, then that it worked (30 % idle), while the
    // host saw the same 5.3 % of a core: only the idle reading's interval counts as waste, and
    // its tick is still judged on that idle interval.
    let mut idle = probe_facts("6.1.0-57-cloud-amd64", "console=ttyS0 nohz=off", &[0]);
    idle["idle_measured_s"] = json!(10.0);
    let reply = s
        .post_report(Some(&s.agent_token), &report_with(1, Some(idle.clone())))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let g = by_name(&ranked(&s).await, "ticker-1").clone();
    assert_eq!(g["idle_judged_from"], "reported", "{g}");
    assert_eq!(g["idle_share"], 1.0);
    assert!(
        (g["wasted_cpu_pct"].as_f64().unwrap() - 4.8).abs() < 1e-9,
        "{g}"
    );

    // Readings of one source closer than ten seconds apart (a report interval) are not kept (a
    // guest posting in a loop cannot grow the table), so the next report comes an interval later.
    clock.advance_ms(10_100);
    let mut working = idle;
    working["idle_fraction"] = json!(0.3);
    let reply = s
        .post_report(Some(&s.agent_token), &report_with(2, Some(working)))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let g = by_name(&ranked(&s).await, "ticker-1").clone();
    assert_eq!(g["idle_judged_from"], "reported", "{g}");
    assert_eq!(g["idle_share"], 0.5, "{g}");
    assert_eq!(g["tick_mode"], "periodic", "{g}");
    assert!(
        (g["wasted_cpu_pct"].as_f64().unwrap() - 4.8 / 2.0).abs() < 1e-9,
        "{g}"
    );
}

/// `report_with`, from a host that names its boot and a ticker-1 process with its totals.
fn from_process(seq: u64, pid: u32, start_ticks: u64, facts: Option<Value>) -> Value {
    let mut r = report_with(seq, facts);
    r["host"]["boot_id"] = json!("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
    r["guests"][1]["pid"] = json!(pid);
    r["guests"][1]["totals"] = json!({
        "start_ticks": start_ticks,
        "host_cpu_seconds": 100.0 + 0.53 * seq as f64,
        "vcpu_wakeups": 1_000_000 + 6_500 * seq,
    });
    r
}

#[tokio::test]
async fn facts_of_an_earlier_boot_are_dropped_when_the_vm_process_is_new() {
    let s = server().await;
    let facts = probe_facts("6.1.0-57-cloud-amd64", "console=ttyS0 nohz=off", &[0]);
    for (seq, report) in [
        (1, from_process(1, 5000, 100, Some(facts))),
        (2, from_process(2, 5000, 100, None)),
    ] {
        let reply = s.post_report(Some(&s.agent_token), &report).await;
        assert_eq!(reply.status, StatusCode::OK, "report {seq}: {}", reply.body);
    }
    let g = by_name(&ranked(&s).await, "ticker-1").clone();
    assert_eq!(
        g["kernel_release"], "6.1.0-57-cloud-amd64",
        "the same process keeps its facts: {g:#}"
    );

    // The VM was destroyed and started again: another pid and start time.
    let reply = s
        .post_report(Some(&s.agent_token), &from_process(3, 7000, 90_000, None))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let g = by_name(&ranked(&s).await, "ticker-1").clone();
    assert_eq!(g["kernel_release"], Value::Null, "{g:#}");
    assert_eq!(g["facts_source"], Value::Null, "{g:#}");

    // The new boot's own facts count again.
    let facts = probe_facts("6.1.0-58-cloud-amd64", "console=ttyS0", &[1]);
    let reply = s
        .post_report(
            Some(&s.agent_token),
            &from_process(4, 7000, 90_000, Some(facts)),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let g = by_name(&ranked(&s).await, "ticker-1").clone();
    assert_eq!(g["kernel_release"], "6.1.0-58-cloud-amd64", "{g:#}");
}

#[tokio::test]
async fn the_command_line_the_host_sees_wins_over_the_one_the_facts_carry() {
    let s = server().await;
    let facts = probe_facts("6.1.0-57-cloud-amd64", "console=ttyS0 nohz=off", &[0]);
    let mut report = report_with(1, Some(facts));
    report["guests"][1]["boot_args"] = json!("console=ttyS0");
    let reply = s.post_report(Some(&s.agent_token), &report).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let g = by_name(&ranked(&s).await, "ticker-1").clone();
    assert_eq!(g["cmdline_flags"], json!([]), "{g:#}");
    let rules: Vec<&str> = g["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["rule"].as_str())
        .collect();
    assert!(!rules.contains(&"remove_nohz_off"), "{g:#}");
}
