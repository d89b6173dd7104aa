//! Who may report for what: a host and a guest belong to the token that first reported for them,
//! and only an admin hands a host to another token; one host's reports can never make another
//! host's look like repeats.

use crate::common;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use common::{Reply, Server, fleet_report, server};
use tickscope_server::auth;

const UUID: &str = "564d9a3b-1234-5678-9abc-def012345678";
/// The same UUID as VMware shows it to the guest: first three fields byte-swapped.
const UUID_SWAPPED: &str = "3b9a4d56-3412-7856-9abc-def012345678";

/// A new token of `role`, bound to `host` when an admin names one; its id and the token.
async fn token(
    s: &Server,
    role: &str,
    host: Option<&str>,
) -> (tickscope_server::domain::TokenId, String) {
    let token = auth::new_token().unwrap();
    let id =
        s.db.insert_token(
            "new",
            tickscope_server::domain::TokenRole::parse(role).unwrap(),
            &auth::token_hash(&token),
            host,
            tickscope_server::clock::now_ms(),
        )
        .await
        .unwrap();
    (id, token)
}

async fn token_id(s: &Server, name: &str) -> tickscope_server::domain::TokenId {
    s.db.tokens()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == name)
        .unwrap()
        .id
}

fn facts(release: &str, uuid: &str) -> Value {
    json!({"facts": {
        "collected_ms": tickscope_server::clock::now_ms(), "kernel_release": release, "cmdline": "quiet",
        "cpus": 1, "dmi_uuid": uuid
    }})
}

async fn post_facts(s: &Server, token: &str, body: &Value) -> Reply {
    s.call(
        Method::POST,
        "/api/v1/guest-facts",
        Some(token),
        Some(body.to_string()),
    )
    .await
}

async fn kernels(s: &Server) -> Vec<(String, Value)> {
    let reply = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await;
    reply.json()["guests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["name"].as_str().unwrap().to_string(),
                g["kernel_release"].clone(),
            )
        })
        .collect()
}

/// A report of host `host` by agent `agent` (run-1), with the fleet's guests.
fn report_of(host: &str, agent: &str, seq: u64) -> Value {
    let mut r = fleet_report(seq);
    r["host"]["name"] = json!(host);
    r["agent"]["id"] = json!(agent);
    r
}

#[tokio::test]
async fn a_guest_bound_to_one_token_is_refused_to_another_until_that_one_is_revoked() {
    let s = server().await;
    let mut r = fleet_report(1);
    r["guests"][1]["uuid"] = json!(UUID);
    assert_eq!(
        s.post_report(Some(&s.agent_token), &r).await.status,
        StatusCode::OK
    );
    let (first_id, first) = token(&s, "guest", None).await;
    let reply = post_facts(&s, &first, &facts("6.1.0-57-cloud-amd64", UUID)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);

    // A fresh token claims the same guest, in either byte order: refused, and stored nothing;
    // answered as a UUID nobody reports is, so that a token cannot tell held UUIDs from unknown
    // ones.
    let (_, fresh) = token(&s, "guest", None).await;
    let unknown = "00000000-1111-4222-8333-444444444444";
    let message_for = |uuid: &str, reply: &Reply| {
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .replace(uuid, "UUID")
    };
    let (_, prober) = token(&s, "guest", None).await;
    let never = post_facts(&s, &prober, &facts("6.1.0", unknown)).await;
    assert_eq!(never.status, StatusCode::NOT_FOUND, "{}", never.body);
    for uuid in [UUID, UUID_SWAPPED] {
        let reply = post_facts(&s, &fresh, &facts("EVIL-KERNEL", uuid)).await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{uuid}: {}",
            reply.body
        );
        assert_eq!(message_for(uuid, &reply), message_for(unknown, &never));
    }
    let ticker = kernels(&s).await.into_iter().find(|(n, _)| n == "ticker-1");
    assert_eq!(ticker.unwrap().1, "6.1.0-57-cloud-amd64");
    // The refusal did not bind the fresh token to the guest either.
    let fresh_row = s.db.tokens().await.unwrap().remove(0);
    assert_eq!(fresh_row.guest_uuid, None);

    // Once the first token is revoked, the guest can be given a new one.
    assert!(
        s.db.revoke_token(first_id, tickscope_server::clock::now_ms())
            .await
            .unwrap()
    );
    let reply = post_facts(&s, &fresh, &facts("6.1.0-58-cloud-amd64", UUID)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

#[tokio::test]
async fn a_host_another_token_reports_for_is_refused_to_a_new_token() {
    let s = server().await;
    assert_eq!(
        s.post_report(Some(&s.agent_token), &fleet_report(1))
            .await
            .status,
        StatusCode::OK
    );
    let before = s.stored().await;
    let (_, fresh) = token(&s, "agent", None).await;
    let mut hijack = report_of("hv1", "intruder", 1);
    hijack["guests"][0]["name"] = json!("planted");
    let reply = s.post_report(Some(&fresh), &hijack).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    let message = reply.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("--host hv1"), "{message}");
    assert_eq!(s.stored().await, before);
    assert!(kernels(&s).await.iter().all(|(name, _)| name != "planted"));
    // Nor did the refusal bind the fresh token: it may still take a host of its own.
    let reply = s
        .post_report(Some(&fresh), &report_of("hv2", "machine-2", 1))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

#[tokio::test]
async fn a_host_an_admin_made_a_token_for_is_refused_to_a_new_token_before_it_reports() {
    let s = server().await;
    token(&s, "agent", Some("hv1")).await;
    let reply = s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    assert_eq!(s.stored().await, (0, 0));
}

#[tokio::test]
async fn an_admin_bound_token_takes_over_a_host_and_a_revoked_ones_host_stays_bound() {
    let s = server().await;
    assert_eq!(
        s.post_report(Some(&s.agent_token), &fleet_report(1))
            .await
            .status,
        StatusCode::OK
    );
    // The host's token is revoked (leaked, say): a token made without --host cannot take the
    // host over, one made for it can.
    assert!(
        s.db.revoke_token(
            token_id(&s, "agent").await,
            tickscope_server::clock::now_ms()
        )
        .await
        .unwrap()
    );
    let (_, unbound) = token(&s, "agent", None).await;
    let reply = s.post_report(Some(&unbound), &fleet_report(2)).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    let (_, replacement) = token(&s, "agent", Some("hv1")).await;
    let reply = s.post_report(Some(&replacement), &fleet_report(2)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.json()["status"], "stored");
    // A second admin-made token for a host that still reports with its first one works too.
    let (_, second) = token(&s, "agent", Some("hv1")).await;
    let reply = s.post_report(Some(&second), &fleet_report(3)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(s.stored().await.0, 3);
}

#[tokio::test]
async fn one_hosts_token_cannot_make_another_hosts_report_a_duplicate() {
    let s = server().await;
    let (_, other) = token(&s, "agent", None).await;
    // hv2's token sends first, with the agent id, run and number hv1's next report will have.
    let reply = s
        .post_report(Some(&other), &report_of("hv2", "machine-1", 7))
        .await;
    assert_eq!(reply.json()["status"], "stored", "{}", reply.body);
    let reply = s
        .post_report(Some(&s.agent_token), &report_of("hv1", "machine-1", 7))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.json()["status"], "stored", "{}", reply.body);
    assert_eq!(s.stored().await, (2, 6));
    // Sent again, hv1's report is still a repeat, stored once.
    let reply = s
        .post_report(Some(&s.agent_token), &report_of("hv1", "machine-1", 7))
        .await;
    assert_eq!(reply.json()["status"], "duplicate", "{}", reply.body);
    assert_eq!(s.stored().await, (2, 6));
}
