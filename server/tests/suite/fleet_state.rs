//! The fleet's current state, kept up to date host by host as reports and facts arrive, must be
//! what analysing every guest's window from scratch gives.

use crate::common;

use serde_json::{Value, json};

use common::{fleet_report, guest, report, server};
use tickscope_server::auth;
use tickscope_server::fleet::state::FleetState;

/// The ranking as JSON, without the facts' ages (they depend on when each analysis ran).
fn ranking(current: &FleetState, now_ms: i64) -> Value {
    let mut value = serde_json::to_value(current.ranked(now_ms)).unwrap();
    strip_ages(&mut value);
    value
}

fn strip_ages(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("age_s");
            map.values_mut().for_each(strip_ages);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_ages),
        _ => {}
    }
}

fn facts(release: &str) -> Value {
    json!({"source": "probe_channel", "received_ms": tickscope_server::clock::now_ms(), "facts": {
        "collected_ms": tickscope_server::clock::now_ms(), "kernel_release": release,
        "config": {"source": "boot_config", "hz": 1000, "hz_periodic": true},
        "measured_hz": 1000.2, "cmdline": "quiet", "idle_fraction": 0.99, "cpus": 1
    }})
}

/// A second agent token, for host "hv2".
async fn hv2_token(s: &common::Server) -> String {
    let token = auth::new_token().unwrap();
    s.db.insert_token(
        "hv2",
        tickscope_server::domain::TokenRole::Agent,
        &auth::token_hash(&token),
        None,
        0,
    )
    .await
    .unwrap();
    token
}

/// Report `seq` of two hosts: hv1's guests, with a kernel upgrade half-way that the probe sees
/// (a change to measure) and a guest that shuts down after the third report (gone from its
/// host three reports later); hv2's one guest.
fn two_hosts_report(seq: u64) -> (Value, Value) {
    let mut r = fleet_report(seq);
    let release = if seq <= 4 { "5.10.0-30" } else { "6.1.0-57" };
    r["guests"][1]["facts"] = facts(release);
    if seq <= 3 {
        r["guests"]
            .as_array_mut()
            .unwrap()
            .push(guest("leaving", 1, 3.0, 300.0, None));
    }
    let mut other = report(seq, vec![guest("elsewhere", 2, 0.8, 45.0, None)]);
    other["host"]["name"] = json!("hv2");
    other["agent"]["id"] = json!("machine-2");
    (r, other)
}

/// Posts report `seq` of both hosts (`two_hosts_report`), each with its token.
async fn post_two_hosts_report(s: &common::Server, second_token: &str, seq: u64) {
    let (first, second) = two_hosts_report(seq);
    let reply = s.post_report(Some(&s.agent_token), &first).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = s.post_report(Some(second_token), &second).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[tokio::test]
async fn the_state_kept_up_to_date_is_the_state_analysed_from_scratch() {
    let s = server().await;
    let second_token = hv2_token(&s).await;
    for seq in 1..=8 {
        post_two_hosts_report(&s, &second_token, seq).await;
    }
    let now = tickscope_server::clock::now_ms();
    // The change measurements the reports asked for run after the answers: wait for them.
    s.state.fleet.caught_up().await;
    let kept = ranking(s.state.fleet.current(), now);
    let from_scratch = ranking(&FleetState::load(&s.db, now).await.unwrap(), now);
    assert_eq!(kept, from_scratch);
    let names: Vec<&str> = kept
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names.contains(&"elsewhere") && !names.contains(&"leaving"));
    // The kernel upgrade, measured the same by the live state and by a server that starts
    // (which reads every guest's changes at once).
    let live_changes = s.state.fleet.changes(now).await;
    assert_eq!(live_changes.len(), 1, "{live_changes:?}");
    assert_eq!(
        live_changes,
        FleetState::load(&s.db, now).await.unwrap().changes(now)
    );
}

/// A follower that holds a host catches it up with the samples of the reports stored since its
/// last read (`FleetState::reload_hosts`), not its guests' whole windows: also when it stored
/// some of the host's reports itself meanwhile (those samples it holds already), when a guest
/// leaves, and when the kernel changes; a host with a guest it does not hold is read whole.
/// What it holds is always what analysing the stored windows from scratch gives.
#[tokio::test]
async fn a_follower_catches_up_with_the_reports_stored_since_its_last_read() {
    use tickscope_server::db::StoreOutcome;
    use tickscope_server::domain::TokenRole;
    use tickscope_server::fleet::state::Reread;
    use tickscope_server::ingest;
    let s = server().await;
    let second_token = hv2_token(&s).await;
    post_two_hosts_report(&s, &second_token, 1).await;
    let host_ids: Vec<_> = s.db.hosts().await.unwrap().iter().map(|h| h.id).collect();
    assert_eq!(host_ids.len(), 2);
    let follower = FleetState::default();
    let now = tickscope_server::clock::now_ms();
    let first = follower.reload_hosts(&s.db, &host_ids, now).await.unwrap();
    assert_eq!(
        first,
        Reread {
            caught_up: 0,
            whole: 2
        }
    );
    // The follower's own agent of hv1: the reports it stores itself, and applies as its intake
    // does.
    let own_secret = auth::new_token().unwrap();
    let own_token =
        s.db.insert_token(
            "own",
            TokenRole::Agent,
            &auth::token_hash(&own_secret),
            Some("hv1"),
            0,
        )
        .await
        .unwrap();
    for seq in 2..=9 {
        let (first, mut second) = two_hosts_report(seq);
        if seq >= 6 {
            // A guest hv2 has not had: the follower must read hv2 whole, once.
            second["guests"].as_array_mut().unwrap().push(guest(
                "newcomer",
                2,
                4.0,
                900.0,
                Some("nohz=off"),
            ));
        }
        for (token, report) in [(&s.agent_token, &first), (&second_token, &second)] {
            let reply = s.post_report(Some(token), report).await;
            assert_eq!(reply.status, 200, "{}", reply.body);
        }
        if seq % 3 == 0 {
            let mut own = fleet_report(seq);
            own["agent"]["run_id"] = json!("run-own");
            own["guests"][0]["host_cpu_seconds"] = json!(0.05 + seq as f64 / 1000.0);
            let received_ms = tickscope_server::clock::now_ms() + 1;
            let valid =
                ingest::validate(serde_json::from_value(own).unwrap(), received_ms).unwrap();
            let stored =
                s.db.store_lone_report(
                    &valid,
                    own_token,
                    received_ms,
                    ingest::samples::sample_spans,
                )
                .await
                .unwrap();
            let StoreOutcome::Stored {
                host_id,
                host_reports,
                guests,
                ..
            } = stored
            else {
                panic!("report {seq} of the follower's own was not stored");
            };
            follower.apply(host_id, host_reports, &guests, received_ms);
        }
        let now = tickscope_server::clock::now_ms() + 2;
        let reread = follower.reload_hosts(&s.db, &host_ids, now).await.unwrap();
        let whole = usize::from(seq == 6);
        assert_eq!(
            reread,
            Reread {
                caught_up: 2 - whole,
                whole
            },
            "after report {seq}"
        );
        let from_scratch = ranking(&FleetState::load(&s.db, now).await.unwrap(), now);
        assert_eq!(ranking(&follower, now), from_scratch, "after report {seq}");
    }
    let names: Vec<String> = ranking(&follower, tickscope_server::clock::now_ms())
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"newcomer".to_string()) && !names.contains(&"leaving".to_string()));
}

/// The host ids of a page's host table, in its order.
fn host_links(html: &str) -> Vec<String> {
    let table = &html[html.find("<table class=\"hosts\">").expect("a host table")..];
    let table = &table[..table.find("</table>").unwrap()];
    table
        .split("<a href=\"/hosts/")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_string())
        .collect()
}

/// The overview reads only the host rows it shows (the silent and blind ones, then the index's
/// most wasteful, then by name); its ten lines must be the first ten of `/hosts`, which sorts
/// every host, whatever mix of silent, blind, wasteful, idle and guestless hosts there is.
#[tokio::test]
async fn the_overviews_host_lines_are_the_first_of_the_hosts_page() {
    use tickscope_server::domain::TokenRole;
    use tickscope_server::ingest;
    let s = server().await;
    let now = tickscope_server::clock::now_ms();
    let login = s.login("alice", "viewer").await;
    // Hosts by kind: (name, guests' CPU % or none, silent, blind). Names out of order, a few
    // with the same waste so that the name decides.
    let kinds: [(&str, Option<f64>, bool, bool); 16] = [
        ("hv-m", Some(8.6), false, false),
        ("hv-c", Some(8.6), false, true),
        ("hv-a", Some(3.0), false, false),
        ("hv-q", Some(0.2), false, false),
        ("hv-b", None, false, false),
        ("hv-z", None, false, true),
        ("hv-k", Some(5.3), true, false),
        ("hv-d", None, true, false),
        ("hv-e", Some(12.0), false, false),
        ("hv-f", Some(1.0), false, false),
        ("hv-g", Some(0.3), false, false),
        ("hv-h", None, false, false),
        ("hv-i", Some(6.0), false, false),
        ("hv-j", None, true, true),
        ("hv-l", Some(2.0), false, false),
        ("hv-n", None, false, false),
    ];
    let mut lines_seen = Vec::new();
    for (n, &(name, cpu, silent, blind)) in kinds.iter().enumerate() {
        let guests = match cpu {
            Some(cpu) => vec![
                guest("ticker", 1, cpu, 650.0, Some("nohz=off")),
                guest("quiet", 1, 0.3, 38.0, None),
            ],
            None => vec![],
        };
        let mut r = report(1, guests);
        r["host"]["name"] = json!(name);
        r["agent"]["id"] = json!(format!("machine-{n}"));
        if blind {
            r["host"]["blind_spots"] = json!([{"check": "vm_fds", "detail": "cannot read",
                                              "fix": "give it CAP_SYS_PTRACE"}]);
        }
        let secret = auth::new_token().unwrap();
        let token =
            s.db.insert_token(name, TokenRole::Agent, &auth::token_hash(&secret), None, 0)
                .await
                .unwrap();
        if silent {
            // Stored a quarter of an hour ago or more, past the live fleet: as if its agent
            // went quiet, each at its own time (the most recently silent is listed first).
            let silent_for_ms = (30 - n as i64) * 60 * 1000;
            let valid = ingest::validate(serde_json::from_value(r).unwrap(), now).unwrap();
            s.db.store_lone_report(
                &valid,
                token,
                now - silent_for_ms,
                ingest::samples::sample_spans,
            )
            .await
            .unwrap();
        } else {
            let reply = s.post_report(Some(&secret), &r).await;
            assert_eq!(reply.status, axum::http::StatusCode::OK, "{}", reply.body);
        }
        // Each step on its own too: few hosts, every kind missing in turn.
        let overview = s.page("/", &login).await;
        let hosts = s.page("/hosts", &login).await;
        let all = host_links(&hosts.body);
        let top = host_links(&overview.body);
        assert_eq!(top, all[..all.len().min(10)], "after {name}");
        lines_seen.push(all.len());
    }
    assert_eq!(lines_seen.last(), Some(&16));
    // The silent hosts come first, the most recently silent first: hv-j (its last report 17
    // minutes ago), hv-d (23) and hv-k (24); not by name (d, j, k) nor by waste then name.
    let hosts = s.page("/hosts", &login).await;
    let at = |name: &str| {
        hosts
            .body
            .find(&format!(">{name}</a>"))
            .unwrap_or_else(|| panic!("{name} is not on /hosts"))
    };
    assert!(
        at("hv-j") < at("hv-d") && at("hv-d") < at("hv-k") && at("hv-k") < at("hv-e"),
        "silent hosts out of order"
    );
    let overview = s.page("/", &login).await;
    assert!(overview.body.contains("All 16 hosts"), "{}", overview.body);
    assert!(
        overview.body.contains(">3</span> with blind spots"),
        "{}",
        overview.body
    );
}

/// A batch's reports are all committed before the first is applied (`intake`): a host read
/// from the database for one of them (a guest back after its host's reports went without it)
/// already holds the batch's later reports of it, and must not take them in twice. Hosts send
/// two reports at once, again and again, a guest of each leaving and coming back; whatever
/// batches they fall into, the state kept must be the one analysed from scratch.
#[tokio::test]
async fn a_hosts_reports_in_one_batch_leave_the_state_analysed_from_scratch() {
    use futures_util::future::join_all;
    use tickscope_server::domain::TokenRole;
    let s = server().await;
    // Eight requests at once: what one client address may have in flight.
    let hosts = 4;
    let mut tokens = Vec::new();
    for h in 0..hosts {
        let secret = auth::new_token().unwrap();
        s.db.insert_token(
            &format!("hv-{h}"),
            TokenRole::Agent,
            &auth::token_hash(&secret),
            None,
            0,
        )
        .await
        .unwrap();
        tokens.push(secret);
    }
    let start_ms = tickscope_server::clock::now_ms() - 400_000;
    let report_of = |h: usize, seq: u64| {
        // Back every fourth report, gone after the three without it.
        let mut guests = vec![guest("steady", 1, 5.3 + h as f64, 650.0, Some("nohz=off"))];
        if seq % 4 == 1 {
            guests.push(guest("returning", 1, 2.0, 300.0, None));
        }
        let mut r = report(seq, guests);
        r["host"]["name"] = json!(format!("hv-{h}"));
        r["agent"]["id"] = json!(format!("machine-{h}"));
        let end_ms = start_ms + seq as i64 * 10_000;
        r["interval"] = json!({"start_ms": end_ms - 10_000, "end_ms": end_ms,
                               "length_ns": 10_000_000_000u64});
        r
    };
    for pair in 0..16u64 {
        let sends = (0..hosts).flat_map(|h| {
            let (s, token) = (&s, &tokens[h]);
            [2 * pair + 1, 2 * pair + 2]
                .map(move |seq| async move { s.post_report(Some(token), &report_of(h, seq)).await })
        });
        for reply in join_all(sends).await {
            assert_eq!(reply.status, 200, "{}", reply.body);
        }
    }
    let now = tickscope_server::clock::now_ms();
    s.state.fleet.caught_up().await;
    let kept = ranking(s.state.fleet.current(), now);
    let from_scratch = ranking(&FleetState::load(&s.db, now).await.unwrap(), now);
    assert_eq!(kept, from_scratch);
}

/// A server that follows another reads the hosts the other stored reports of all at once
/// (`FleetState::reload_hosts`, one statement per table): what it then holds is what analysing
/// the stored windows from scratch gives, kernel changes, facts and departed guests included.
#[tokio::test]
async fn hosts_read_again_in_bulk_are_the_state_analysed_from_scratch() {
    use tickscope_server::domain::HostId;
    let s = server().await;
    let second_token = hv2_token(&s).await;
    let mut follower = None;
    for seq in 1..=8 {
        post_two_hosts_report(&s, &second_token, seq).await;
        if seq == 3 {
            // The follower's view before the other server stored the rest.
            let now = tickscope_server::clock::now_ms();
            follower = Some(FleetState::load(&s.db, now).await.unwrap());
        }
    }
    let follower = follower.unwrap();
    let now = tickscope_server::clock::now_ms();
    let from_scratch = ranking(&FleetState::load(&s.db, now).await.unwrap(), now);
    assert_ne!(
        ranking(&follower, now),
        from_scratch,
        "nothing to read again"
    );
    let mut host_ids: Vec<HostId> = s.db.hosts().await.unwrap().iter().map(|h| h.id).collect();
    assert_eq!(host_ids.len(), 2);
    // A host the database does not hold reads as one without guests.
    host_ids.push(HostId(9_999));
    follower.reload_hosts(&s.db, &host_ids, now).await.unwrap();
    assert_eq!(ranking(&follower, now), from_scratch);
    let names: Vec<String> = from_scratch
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"elsewhere".to_string()) && !names.contains(&"leaving".to_string()));
}
