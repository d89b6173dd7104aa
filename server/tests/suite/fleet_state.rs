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

#[tokio::test]
async fn the_state_kept_up_to_date_is_the_state_analysed_from_scratch() {
    let s = server().await;
    let second_token = auth::new_token().unwrap();
    s.db.insert_token(
        "hv2",
        tickscope_server::domain::TokenRole::Agent,
        &auth::token_hash(&second_token),
        None,
        0,
    )
    .await
    .unwrap();
    for seq in 1..=8 {
        let mut r = fleet_report(seq);
        // A kernel upgrade half-way, seen by the probe, makes a change to measure.
        let release = if seq <= 4 { "5.10.0-30" } else { "6.1.0-57" };
        r["guests"][1]["facts"] = facts(release);
        // A guest that shuts down after the third report: gone from its host three reports
        // later.
        if seq <= 3 {
            r["guests"]
                .as_array_mut()
                .unwrap()
                .push(guest("leaving", 1, 3.0, 300.0, None));
        }
        let reply = s.post_report(Some(&s.agent_token), &r).await;
        assert_eq!(reply.status, 200, "{}", reply.body);

        let mut other = report(seq, vec![guest("elsewhere", 2, 0.8, 45.0, None)]);
        other["host"]["name"] = json!("hv2");
        other["agent"]["id"] = json!("machine-2");
        let reply = s.post_report(Some(&second_token), &other).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
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
    assert_eq!(
        s.state.fleet.changes(now).await.len(),
        FleetState::load(&s.db, now)
            .await
            .unwrap()
            .changes(now)
            .len()
    );
}
