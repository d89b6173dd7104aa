//! The server's hardening: security headers on every response, a per-token rate limit on
//! ingest, and a request that takes too long (a client sending its body slowly) answered 408.

use crate::common;

use std::num::NonZeroU32;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::{fleet_report, server, server_with};
use tickscope_server::auth::session::SESSION_COOKIE;
use tickscope_server::http::admission::AdmissionLimits;
use tickscope_server::state::Options;

#[tokio::test]
async fn every_response_carries_the_security_headers() {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    let login = s.login("alice", "viewer").await;
    let mut replies = vec![];
    for path in [
        "/",
        "/guests",
        "/guests/1",
        "/hosts",
        "/alerts",
        "/nothing-here",
    ] {
        replies.push((path, s.page_with_headers(path, &login).await));
    }
    replies.push(("/login", s.page_with_headers("/login", &login).await));
    replies.push((
        "/api/v1/guests (no token)",
        s.headers_of(Method::GET, "/api/v1/guests", None).await,
    ));
    replies.push((
        "/healthz",
        s.headers_of(Method::GET, "/healthz", None).await,
    ));
    for (path, headers) in replies {
        let get = |name: &str| {
            headers
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default()
        };
        assert_eq!(
            get("content-security-policy"),
            "default-src 'self'; frame-ancestors 'none'",
            "{path}"
        );
        assert_eq!(get("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(get("referrer-policy"), "no-referrer", "{path}");
        assert_eq!(get("x-frame-options"), "DENY", "{path}");
        assert_eq!(get("cache-control"), "no-store", "{path}");
        // Served over plain HTTP here: no HSTS, which only a TLS server may send.
        assert_eq!(get("strict-transport-security"), "", "{path}");
    }
}

#[tokio::test]
async fn an_agent_token_sending_too_fast_is_told_to_wait_and_nothing_is_stored() {
    let s = server_with(Options {
        ingest_per_second: NonZeroU32::new(1).unwrap(),
        ingest_burst: NonZeroU32::new(2).unwrap(),
        ..Options::default()
    })
    .await;
    for seq in 1..=2 {
        let reply = s
            .post_report(Some(&s.agent_token), &fleet_report(seq))
            .await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    let before = s.stored().await;
    let reply = s.post_report(Some(&s.agent_token), &fleet_report(3)).await;
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        reply.body
    );
    assert_eq!(reply.json()["error"]["code"], "too_many_requests");
    assert_eq!(s.stored().await, before);
    let headers = s
        .headers_of_post(
            "/api/v1/reports",
            Some(&s.agent_token),
            fleet_report(4).to_string(),
        )
        .await;
    let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    // Another token is not held back by this one.
    let other = tickscope_server::auth::new_token().unwrap();
    s.db.insert_token(
        "other",
        tickscope_server::domain::TokenRole::Agent,
        &tickscope_server::auth::token_hash(&other),
        None,
        0,
    )
    .await
    .unwrap();
    let mut report = fleet_report(5);
    report["host"]["name"] = serde_json::json!("hv2");
    report["agent"]["id"] = serde_json::json!("machine-2");
    assert_eq!(
        s.post_report(Some(&other), &report).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_body_sent_too_slowly_is_answered_408_and_nothing_is_stored() {
    let s = server_with(Options {
        admission: AdmissionLimits {
            body_timeout: Duration::from_millis(300),
            ..AdmissionLimits::default()
        },
        ..Options::default()
    })
    .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = s.router.clone();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let body = fleet_report(1).to_string();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /api/v1/reports HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        s.agent_token,
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // Half the body, then nothing.
    stream
        .write_all(&body.as_bytes()[..body.len() / 2])
        .await
        .unwrap();
    let mut answer = vec![0; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("answered within the timeout")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert_eq!(s.stored().await, (0, 0));
}

#[test]
fn tokens_and_cookies_never_reach_the_log_even_at_trace_level() {
    use std::process::{Command, Stdio};
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("t.db");
    let token = common::processes::add_token(&db, "viewer");
    let log = work.path().join("server.log");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut processes = common::processes::Processes::default();
    let server = Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--db"])
        .arg(&db)
        .env("TICKSCOPE_LOG", "trace")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    processes.add("tickscope-server", server);
    let url = format!("http://127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while ureq::get(&format!("{url}/healthz")).call().is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let cookie = "tickscope_session=secret-session-value-0123456789";
    for (auth, path) in [
        (format!("Bearer {token}"), "/api/v1/guests"),
        (
            "Bearer tks_wrong-token-never-to-be-logged".to_string(),
            "/api/v1/guests",
        ),
        (format!("Bearer {token}"), "/"),
    ] {
        let _ = ureq::get(&format!("{url}{path}"))
            .header("Authorization", &auth)
            .header("Cookie", cookie)
            .call();
    }
    processes.kill("tickscope-server");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("/api/v1/guests"),
        "requests are logged at all: {text}"
    );
    for secret in [
        token.as_str(),
        &token[4..],
        "tks_wrong-token-never-to-be-logged",
        "secret-session-value-0123456789",
    ] {
        assert!(!text.contains(secret), "{secret} in the log");
    }
}

#[tokio::test]
async fn senders_and_users_wait_for_slots_of_their_own() {
    // (agents' and guests' slots, sessions' and viewers' slots, what a report and a viewer's
    // read are answered)
    let cases = [
        (0, 32, StatusCode::SERVICE_UNAVAILABLE, StatusCode::OK),
        (64, 0, StatusCode::OK, StatusCode::SERVICE_UNAVAILABLE),
    ];
    for (senders, users, report, read) in cases {
        let s = server_with(Options {
            admission: AdmissionLimits {
                sender_slots: senders,
                user_slots: users,
                queue_timeout: Duration::from_millis(50),
                ..AdmissionLimits::default()
            },
            ..Options::default()
        })
        .await;
        let what = format!("{senders} senders' slots, {users} users'");
        let reported = s
            .post_report(Some(&s.agent_token.clone()), &fleet_report(1))
            .await;
        assert_eq!(
            reported.status, report,
            "{what}: a report: {}",
            reported.body
        );
        let listed = s
            .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
            .await;
        assert_eq!(
            listed.status, read,
            "{what}: a viewer's read: {}",
            listed.body
        );
        if users > 0 {
            // Logging in opens the overview with the new session: it is served too.
            s.login("ops", "viewer").await;
        }
    }
}

#[tokio::test]
async fn a_full_budget_is_answered_503_with_retry_after_and_leaves_the_other_budget_alone() {
    // No slot at all for requests without a credential: each waits its turn briefly, then is
    // told to come back, while agents are served as before.
    let s = server_with(Options {
        admission: AdmissionLimits {
            anonymous_slots: 0,
            queue_timeout: Duration::from_millis(50),
            ..AdmissionLimits::default()
        },
        ..Options::default()
    })
    .await;
    let headers = s.headers_of(Method::GET, "/login", None).await;
    let reply = s.call(Method::GET, "/login", None, None).await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.body
    );
    assert_eq!(reply.json()["error"]["code"], "unavailable");
    assert_eq!(headers.get("retry-after").unwrap(), "2");
    // A made-up session cookie spends as no credential, and waits for those slots.
    let cookie = format!("{SESSION_COOKIE}=made-up-session-id");
    let forged = s.browse(Method::GET, "/", Some(&cookie), None).await;
    assert_eq!(
        forged.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        forged.body
    );
    assert_eq!(
        s.post_report(Some(&s.agent_token.clone()), &fleet_report(1))
            .await
            .status,
        StatusCode::OK
    );
    // Health probes take no slot.
    assert_eq!(
        s.call(Method::GET, "/healthz", None, None).await.status,
        StatusCode::OK
    );
}
