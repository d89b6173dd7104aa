//! What an agent cannot see reaches the admin: in `GET /api/v1/hosts`, on the host's page, in the
//! hosts list and on the overview; and a later report without them clears them.

use crate::common;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use common::{Reply, Server, fleet_report, report, server};

fn with_blind_spots(mut r: Value, spots: Value) -> Value {
    r["host"]["blind_spots"] = spots;
    r
}

fn vm_fds() -> Value {
    json!([{
        "check": "vm_fds",
        "detail": "The descriptors (/proc/<pid>/fd) of 2 VM process(es) (e.g. \"<b>web</b>\") cannot be read.",
        "fix": "Give the agent both CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH."
    }])
}

async fn send(s: &Server, report: Value) -> Reply {
    s.post_report(Some(&s.agent_token), &report).await
}

async fn hosts(s: &Server) -> Vec<Value> {
    let reply = s
        .call(Method::GET, "/api/v1/hosts", Some(&s.viewer_token), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.json()["hosts"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_hosts_blind_spots_are_listed_with_their_fix_until_a_report_without_them() {
    let s = server().await;
    let reply = send(&s, with_blind_spots(fleet_report(1), vm_fds())).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let listed = hosts(&s).await;
    assert_eq!(listed[0]["host"], "hv1");
    assert_eq!(listed[0]["blind_spots"][0]["check"], "vm_fds");
    assert!(
        listed[0]["blind_spots"][0]["fix"]
            .as_str()
            .unwrap()
            .contains("CAP_SYS_PTRACE")
    );

    let login = s.login("ann", "viewer").await;
    let host_id = listed[0]["host_id"].as_i64().unwrap();
    let page = s.page(&format!("/hosts/{host_id}"), &login).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Blind spots"), "{}", page.body);
    assert!(page.body.contains("CAP_DAC_READ_SEARCH"));
    assert!(
        !page.body.contains("<b>web</b>"),
        "text from a host is escaped"
    );
    let overview = s.page("/", &login).await;
    assert!(
        overview.body.contains("with blind spots"),
        "{}",
        overview.body
    );
    assert!(
        s.page("/hosts", &login)
            .await
            .body
            .contains("1 blind spot(s)")
    );

    // The agent was given the access: its next report has none, and they are gone.
    let reply = send(&s, fleet_report(2)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(hosts(&s).await[0]["blind_spots"], json!([]));
    assert!(!s.page("/", &login).await.body.contains("with blind spots"));
}

#[tokio::test]
async fn an_agent_that_sees_no_vm_at_all_still_shows_its_host_and_why() {
    let s = server().await;
    let hidden = json!([{
        "check": "proc_hidden",
        "detail": "/proc is mounted with hidepid=.",
        "fix": "Run the agent with CAP_SYS_PTRACE."
    }]);
    let reply = send(&s, with_blind_spots(report(1, vec![]), hidden)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let listed = hosts(&s).await;
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["guests"], 0);
    assert_eq!(listed[0]["blind_spots"][0]["check"], "proc_hidden");
}

#[tokio::test]
async fn blind_spots_with_control_characters_or_too_many_are_refused_whole() {
    let s = server().await;
    let forged = json!([{
        "check": "libvirt",
        "detail": "ok\nlogged in user=alice",
        "fix": "none"
    }]);
    let reply = send(&s, with_blind_spots(fleet_report(1), forged)).await;
    let refused = |reply: &Reply, field: &str| {
        assert_eq!(
            reply.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            reply.body
        );
        assert!(reply.body.contains(field), "{}", reply.body);
    };
    refused(&reply, "host.blind_spots[0].detail");
    let many = Value::Array(vec![vm_fds()[0].clone(); 17]);
    let reply = send(&s, with_blind_spots(fleet_report(1), many)).await;
    refused(&reply, "host.blind_spots");
    assert_eq!(
        s.stored().await,
        (0, 0),
        "nothing of a refused report is kept"
    );
}
