//! One sender cannot cost everyone: what one credential (an agent token, a guest token, a
//! viewer token, a session, one client address) can do to the others, shape by shape. Each test
//! counts what the others got (answers, lines logged, passwords checked, guests held), never how
//! long they took, except to tell "answered" from "still waiting after seconds".

use crate::common;

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use common::processes::{Processes, add_token, connect_from, start_server, start_server_with_log};
use common::{Server, guest, report, server};
use tickscope_server::budgets::Budgets;
use tickscope_server::http::admission::AdmissionLimits;
use tickscope_server::state::Options;

use common::processes::ATTACKER;

/// Raises this process's open-files limit to its hard limit: the shapes open a thousand sockets.
fn many_files() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    setrlimit(Resource::Nofile, limit).unwrap();
}

/// A POST to `path` with `token` whose body comes chunked, of which only the first byte is sent.
fn trickling_upload(source: IpAddr, url: &str, path: &str, token: &str) -> TcpStream {
    let mut stream = connect_from(source, url).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{{\r\n"
    )
    .unwrap();
    stream
}

/// The status of an answer that came on `stream` within its read timeout, if one came.
fn answer_status(stream: &mut TcpStream) -> Option<u16> {
    let mut head = [0u8; 12];
    match stream.read(&mut head) {
        Ok(n) if n >= 12 => std::str::from_utf8(&head[9..12]).ok()?.parse().ok(),
        _ => None,
    }
}

/// What a blocking call to the server answered: its status, or 0 when nothing came within
/// `wait_s` seconds.
fn status_within(wait_s: u64, request: ureq::RequestBuilder<ureq::typestate::WithoutBody>) -> u16 {
    let request = request
        .config()
        .timeout_global(Some(Duration::from_secs(wait_s)))
        .http_status_as_error(false)
        .build();
    request.call().map_or(0, |r| r.status().as_u16())
}

fn post_within(wait_s: u64, url: &str, token: &str, body: &Value) -> u16 {
    ureq::post(url)
        .header("Authorization", &format!("Bearer {token}"))
        .config()
        .timeout_global(Some(Duration::from_secs(wait_s)))
        .http_status_as_error(false)
        .build()
        .send_json(body)
        .map_or(0, |r| r.status().as_u16())
}

/// A report of `host` by its own agent (`agent.id` = the host's name).
fn report_of(host: &str, seq: u64, guests: Vec<Value>) -> Value {
    let mut r = report(seq, guests);
    r["host"]["name"] = json!(host);
    r["agent"]["id"] = json!(host);
    r
}

/// What the others get while the attack goes on: the login page, a viewer's read and another
/// host's report, each answered within 5 s or counted as not answered (0).
fn bystanders(url: &str, viewer: &str, victim_agent: &str, seq: u64) -> [(String, u16); 3] {
    let login = status_within(5, ureq::get(&format!("{url}/login")));
    let read = status_within(
        5,
        ureq::get(&format!("{url}/api/v1/guests?limit=1"))
            .header("Authorization", &format!("Bearer {viewer}")),
    );
    let victim_report = report_of("victim-hv", seq, vec![guest("web", 1, 0.3, 38.0, None)]);
    let reported = post_within(
        5,
        &format!("{url}/api/v1/reports"),
        victim_agent,
        &victim_report,
    );
    [
        ("the login page".into(), login),
        ("a viewer's read".into(), read),
        ("another host's report".into(), reported),
    ]
}

fn assert_all_served(what: &str, answers: &[(String, u16)]) {
    for (who, status) in answers {
        assert_eq!(
            *status, 200,
            "{what}: {who} was answered {status} (0: not within 5 s)"
        );
    }
}

/// Shape 1: a request without a length reserved its role's whole body limit before any byte
/// arrived, so 16 trickling uploads on one agent token took every byte of the servers's body
/// budget, and everyone else got 503.
#[test]
#[ignore = "runs the server binary; scripts/test.sh runs it"]
fn trickling_uploads_on_one_agent_token_leave_everyone_else_served() {
    many_files();
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("t.db");
    let attacker = add_token(&db, "agent");
    let victim = add_token(&db, "agent");
    let viewer = add_token(&db, "viewer");
    let mut processes = Processes::default();
    let url = start_server(&db, &[], &mut processes);
    let mut uploads: Vec<TcpStream> = (0..16)
        .map(|_| trickling_upload(ATTACKER, &url, "/api/v1/reports", &attacker))
        .collect();
    // Time for the uploads' heads to reach the server (what they hold is taken as they arrive).
    std::thread::sleep(Duration::from_millis(500));
    let answers = bystanders(&url, &viewer, &victim, 1);
    assert_all_served("16 uploads trickling on one agent token", &answers);
    // The token's own budget: the uploads beyond its concurrent requests were told so at once.
    let refused = uploads
        .iter_mut()
        .filter_map(answer_status)
        .filter(|s| *s == 429)
        .count();
    assert_eq!(
        refused, 8,
        "one agent token is served 8 requests at once; the other 8 uploads are refused"
    );
}

/// Shape 1, with a guest token: 1,024 trickling uploads, from one address.
#[test]
#[ignore = "runs the server binary; scripts/test.sh runs it"]
fn a_thousand_trickling_uploads_on_one_guest_token_leave_everyone_else_served() {
    many_files();
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("t.db");
    let attacker = add_token(&db, "guest");
    let victim = add_token(&db, "agent");
    let viewer = add_token(&db, "viewer");
    let mut processes = Processes::default();
    let url = start_server(&db, &[], &mut processes);
    let uploads: Vec<TcpStream> = (0..1024)
        .filter_map(|_| {
            let mut stream = connect_from(ATTACKER, &url).ok()?;
            write!(
                stream,
                "POST /api/v1/guest-facts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {attacker}\r\n\
                 Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{{\r\n"
            )
            .ok()?;
            Some(stream)
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let answers = bystanders(&url, &viewer, &victim, 1);
    assert_all_served("1,024 uploads trickling on one guest token", &answers);
    drop(uploads);
}

/// Shape 4: a token that brings 1,000 never-seen VMs in every report. Guests that stopped
/// reporting leave the live fleet after three of their host's reports without them, and the
/// host's new guests are held to a budget per minute.
#[tokio::test]
async fn a_host_that_brings_new_guests_in_every_report_cannot_grow_the_fleet() {
    let s = server().await;
    let mut refused = 0;
    for seq in 1..=12u64 {
        let guests = (0..1000)
            .map(|i| {
                let mut g = guest(&format!("vm-{seq}-{i}"), 1, 0.3, 38.0, None);
                g["uuid"] = json!(format!("{:08x}-0000-4000-8000-{:012x}", seq, i));
                g
            })
            .collect();
        let reply = s
            .post_report(Some(&s.agent_token), &report(seq, guests))
            .await;
        match reply.status {
            StatusCode::OK => {}
            StatusCode::TOO_MANY_REQUESTS => {
                refused += 1;
                assert!(
                    reply.body.contains("new guests") && reply.body.contains("--new-guests"),
                    "the refusal names the limit and its setting: {}",
                    reply.body
                );
            }
            other => panic!("report {seq}: {other} {}", reply.body),
        }
    }
    let held = s.state.fleet.current().held();
    assert!(
        held <= 3_000,
        "{held} guests held: only those of the host's last three reports count"
    );
    assert!(
        refused >= 1,
        "12,000 new guests within a minute were all taken"
    );
}

/// Shape 5: a streamed answer holds its credential's stream and its request slot until its last
/// byte, and reads the live fleet as it goes instead of pinning a copy of it.
#[tokio::test]
async fn a_streamed_list_holds_its_slot_to_the_end_and_reads_the_fleet_as_it_goes() {
    let s = Arc::new(server().await);
    let first = report(1, vec![guest("web", 1, 0.3, 38.0, None)]);
    assert_eq!(
        s.post_report(Some(&s.agent_token), &first).await.status,
        StatusCode::OK
    );
    let list = || {
        Request::builder()
            .uri("/api/v1/guests")
            .header(header::AUTHORIZATION, format!("Bearer {}", s.viewer_token))
            .body(Body::empty())
            .unwrap()
    };
    // Two streams open, nothing read of them yet.
    let open: Vec<axum::response::Response> = vec![
        s.router.clone().oneshot(list()).await.unwrap(),
        s.router.clone().oneshot(list()).await.unwrap(),
    ];
    assert!(open.iter().all(|r| r.status() == StatusCode::OK));
    let third = s.router.clone().oneshot(list()).await.unwrap();
    assert_eq!(
        third.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "one viewer token streams two answers at once"
    );
    assert!(third.headers().contains_key(header::RETRY_AFTER));

    // The fleet moves on while the first stream waits: it shows the guest as it is now.
    let mut second = report(2, vec![guest("web", 1, 0.3, 38.0, None)]);
    second["interval"]["end_ms"] = json!(first["interval"]["end_ms"].as_i64().unwrap() + 10_000);
    second["interval"]["start_ms"] = json!(first["interval"]["end_ms"]);
    assert_eq!(
        s.post_report(Some(&s.agent_token), &second).await.status,
        StatusCode::OK
    );
    let mut open = open.into_iter();
    let body = open.next().unwrap().into_body().collect().await.unwrap();
    let streamed: Value = serde_json::from_slice(&body.to_bytes()).unwrap();
    let now: Value = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    assert_eq!(
        streamed["guests"][0]["intervals"], now["guests"][0]["intervals"],
        "the stream showed the guest as it was when the request came"
    );
    assert_eq!(now["guests"][0]["intervals"], json!(2));
    // Its stream given back, the token may open another.
    let again = s.router.clone().oneshot(list()).await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
}

/// Shape 6: every attempt takes its place in the throttle before its password is checked, so
/// concurrent wrong passwords for one name are checked five times, not as many as arrive first.
/// A server whose budget per client address lets 40 logins through at once (the tests' calls
/// have no address): what is counted is the throttle's doing alone.
async fn many_at_once() -> Server {
    common::server_with(Options {
        budgets: Budgets {
            requests_per_address: 100,
            requests_per_credential: 100,
            ..Budgets::default()
        },
        admission: AdmissionLimits {
            anonymous_slots: 100,
            ..AdmissionLimits::default()
        },
        ..Options::default()
    })
    .await
}

#[tokio::test]
async fn concurrent_wrong_passwords_for_one_name_are_checked_five_times() {
    let s = many_at_once().await;
    s.login("alice", "admin").await;
    let tries = (0..30).map(|_| s.submit_login("alice", "not the password at all"));
    let statuses: Vec<StatusCode> = futures_util::future::join_all(tries)
        .await
        .into_iter()
        .map(|reply| reply.status)
        .collect();
    let checked = statuses
        .iter()
        .filter(|s| **s == StatusCode::UNAUTHORIZED)
        .count();
    let held = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!((checked, held), (5, 25), "{statuses:?}");
}

#[tokio::test]
async fn concurrent_wrong_current_passwords_on_one_session_are_checked_five_times() {
    let s = many_at_once().await;
    let login = s.login("alice", "admin").await;
    let fields = [
        ("csrf", login.csrf.as_str()),
        ("current", "not the password at all"),
        ("password", "a new long password"),
        ("again", "a new long password"),
    ];
    let tries = (0..40).map(|_| s.post_form(&login, "/account/password", &fields));
    let statuses: Vec<StatusCode> = futures_util::future::join_all(tries)
        .await
        .into_iter()
        .map(|reply| reply.status)
        .collect();
    let checked = statuses
        .iter()
        .filter(|s| **s == StatusCode::UNPROCESSABLE_ENTITY)
        .count();
    assert_eq!(checked, 5, "{statuses:?}");
}

/// Shape 7: one accepted report whose 10,000 guests each carry facts that are not acceptable
/// there writes one line of warning, with the count, not one per guest.
#[test]
#[ignore = "runs the server binary; scripts/test.sh runs it"]
fn warnings_of_one_report_are_one_line_with_a_count() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("t.db");
    let agent = add_token(&db, "agent");
    let mut processes = Processes::default();
    let (url, log) = start_server_with_log(&db, &[], &[("TICKSCOPE_LOG", "info")], &mut processes);
    let guests: Vec<Value> = (0..10_000)
        .map(|i| {
            let mut g = guest(&format!("vm-{i}"), 1, 0.05, 38.0, None);
            g["uuid"] = json!(format!("00000000-0000-4000-8000-{i:012x}"));
            g["facts"] = json!({
                "source": "probe_direct",
                "received_ms": tickscope_server::clock::now_ms(),
                "facts": {"kernel_release": "6.1.0"}
            });
            g
        })
        .collect();
    let reply = post_within(
        60,
        &format!("{url}/api/v1/reports"),
        &agent,
        &report(1, guests),
    );
    assert_eq!(reply, 200);
    let lines = log.lock().unwrap().clone();
    let warnings: Vec<String> = lines
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .filter(|l| l.contains("facts left out"))
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "{} lines: {:?}",
        warnings.len(),
        warnings.first()
    );
    assert!(warnings[0].contains("10000"), "{}", warnings[0]);
}

const UUID: &str = "564d9a3b-1234-5678-9abc-def012345678";

fn facts(release: &str) -> Value {
    json!({"facts": {
        "collected_ms": tickscope_server::clock::now_ms(), "kernel_release": release,
        "cmdline": "quiet", "cpus": 1, "dmi_uuid": UUID
    }})
}

async fn new_token(s: &Server, role: &str) -> String {
    let token = tickscope_server::auth::new_token().unwrap();
    s.db.insert_token(
        "new",
        tickscope_server::domain::TokenRole::parse(role).unwrap(),
        &tickscope_server::auth::token_hash(&token),
        None,
        tickscope_server::clock::now_ms(),
    )
    .await
    .unwrap();
    token
}

/// Each guest with the `kernel_release` the API shows for it, by host.
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
                g["host"].as_str().unwrap().to_string(),
                g["kernel_release"].clone(),
            )
        })
        .collect()
}

/// Shape 8: a guest token's facts go to the guest it is bound to, never to a VM another host's
/// agent reports with the same UUID.
#[tokio::test]
async fn another_hosts_vm_with_the_same_uuid_does_not_take_a_guests_facts() {
    let s = server().await;
    let mut vm = guest("web", 1, 0.3, 38.0, None);
    vm["uuid"] = json!(UUID);
    let victim = report_of("victim-hv", 1, vec![vm.clone()]);
    assert_eq!(
        s.post_report(Some(&s.agent_token), &victim).await.status,
        StatusCode::OK
    );
    let probe = new_token(&s, "guest").await;
    let posted = s
        .call(
            Method::POST,
            "/api/v1/guest-facts",
            Some(&probe),
            Some(facts("6.1.0-first").to_string()),
        )
        .await;
    assert_eq!(posted.status, StatusCode::OK, "{}", posted.body);

    // Another host's agent reports a VM with the victim's UUID, and keeps reporting it.
    let other = new_token(&s, "agent").await;
    for seq in 1..=2 {
        let copy = report_of("other-hv", seq, vec![vm.clone()]);
        assert_eq!(
            s.post_report(Some(&other), &copy).await.status,
            StatusCode::OK
        );
    }
    let posted = s
        .call(
            Method::POST,
            "/api/v1/guest-facts",
            Some(&probe),
            Some(facts("6.1.0-second").to_string()),
        )
        .await;
    assert_eq!(posted.status, StatusCode::OK, "{}", posted.body);
    let mut kernels = kernels(&s).await;
    kernels.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        kernels,
        [
            ("other-hv".to_string(), Value::Null),
            ("victim-hv".to_string(), json!("6.1.0-second")),
        ]
    );
}

/// Shape 9: one client address holds at most its share of the connections; the ones over it
/// are refused at once, and everyone else still gets in.
#[test]
#[ignore = "runs the server binary; scripts/test.sh runs it"]
fn one_address_cannot_take_every_connection() {
    many_files();
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("t.db");
    let victim = add_token(&db, "agent");
    let viewer = add_token(&db, "viewer");
    let mut processes = Processes::default();
    let url = start_server(
        &db,
        &[
            "--max-connections",
            "300",
            "--max-connections-per-address",
            "100",
        ],
        &mut processes,
    );
    let mut held: Vec<TcpStream> = (0..300)
        .filter_map(|_| {
            let mut stream = connect_from(ATTACKER, &url).ok()?;
            stream
                .write_all(
                    b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 65536\r\n\r\n",
                )
                .ok()?;
            Some(stream)
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let healthz = status_within(5, ureq::get(&format!("{url}/healthz")));
    let mut answers = bystanders(&url, &viewer, &victim, 1).to_vec();
    answers.push(("/healthz".into(), healthz));
    assert_all_served("300 request heads from one address", &answers);
    // The address holds at most its share: every other connection was closed at once (or
    // answered, by the address's budget of requests, and closed).
    let waiting = held
        .iter_mut()
        .map(|s| {
            s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            let still_open = matches!(
                s.read(&mut [0u8; 1]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
            );
            usize::from(still_open)
        })
        .sum::<usize>();
    assert!(
        waiting <= 100,
        "{waiting} of 300 connections from one address are held open; the cap is 100"
    );
}

/// A request whose body never comes: it holds what admission gave it until its body deadline.
fn never_ending(method: Method, path: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let pending = futures_util::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
    request.body(Body::from_stream(pending)).unwrap()
}

/// Waits until `credentials` credentials have something in use in the server's admission.
async fn in_use(s: &Server, credentials: usize) {
    for _ in 0..500 {
        if s.state.admission.spending().credentials_in_use() >= credentials {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no request took its place in the admission within 5 s");
}

/// A made-up session cookie does not make a request one of a logged-in user: it spends as a
/// request without a credential, from its address.
#[tokio::test]
async fn a_forged_session_cookie_spends_as_a_request_without_a_credential() {
    let s = common::server_with(Options {
        budgets: Budgets {
            requests_per_address: 1,
            ..Budgets::default()
        },
        ..Options::default()
    })
    .await;
    let login = s.login("alice", "viewer").await;
    let forged = "tickscope_session=AAAAAAAAAAAAAAAAAAAAAA";
    let stuck = s.router.clone().oneshot(never_ending(
        Method::POST,
        "/logout",
        &[
            ("cookie", forged),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
    ));
    let stuck = tokio::spawn(stuck);
    in_use(&s, 1).await;
    let again = s.browse(Method::GET, "/", Some(forged), None).await;
    assert_eq!(
        again.status,
        StatusCode::TOO_MANY_REQUESTS,
        "a second request with a forged cookie from the same address: {}",
        again.body
    );
    // A real session spends for itself.
    let page = s.page("/", &login).await;
    assert_eq!(page.status, StatusCode::OK);
    stuck.abort();
}

/// A report over its token's rate is told so before its body is read: a flood of reports costs
/// no reading of their bodies.
#[tokio::test]
async fn a_report_over_its_rate_is_refused_before_its_body_is_read() {
    let s = common::server_with(Options {
        ingest_per_second: std::num::NonZeroU32::new(1).unwrap(),
        ingest_burst: std::num::NonZeroU32::new(1).unwrap(),
        ..Options::default()
    })
    .await;
    let first = report(1, vec![guest("web", 1, 0.3, 38.0, None)]);
    assert_eq!(
        s.post_report(Some(&s.agent_token), &first).await.status,
        StatusCode::OK
    );
    let bearer = format!("Bearer {}", s.agent_token);
    let flood = never_ending(
        Method::POST,
        "/api/v1/reports",
        &[
            ("authorization", &bearer),
            ("content-type", "application/json"),
        ],
    );
    let answer = tokio::time::timeout(Duration::from_secs(5), s.router.clone().oneshot(flood))
        .await
        .expect("answered before the body came")
        .unwrap();
    assert_eq!(answer.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(answer.headers().contains_key(header::RETRY_AFTER));
}

/// `/readyz` waits for its own few slots and its deadline: probes of a database that is stuck
/// answer "not ready" within seconds instead of queueing behind each other for ever.
#[tokio::test]
async fn readiness_probes_of_a_stuck_database_answer_within_their_deadline() {
    let s = Arc::new(
        common::server_with(Options {
            request_timeout: Duration::from_secs(1),
            ..Options::default()
        })
        .await,
    );
    let mut other = common::database::RawDb::connect(&s.test_db).await;
    other.hold_write_lock().await;
    let mut probes = tokio::task::JoinSet::new();
    for _ in 0..6 {
        let router = s.router.clone();
        probes.spawn(async move {
            let request = Request::builder()
                .uri("/readyz")
                .body(Body::empty())
                .unwrap();
            tokio::time::timeout(Duration::from_secs(4), router.oneshot(request))
                .await
                .map(|r| r.unwrap().status())
        });
    }
    let answers: Vec<_> = probes.join_all().await;
    other.release().await;
    for answer in answers {
        let status = answer.expect("a probe still waiting after 4 s");
        assert!(
            matches!(status.as_u16(), 408 | 503),
            "a probe of a stuck database answered {status}"
        );
    }
}

/// Exports that read every guest's week are held to a few at once, whoever asks: the next is
/// told to retry, and the database's connections stay for everyone else.
#[tokio::test]
async fn exports_with_history_are_made_a_few_at_once() {
    let s = server().await;
    assert_eq!(
        s.post_report(Some(&s.agent_token), &common::fleet_report(1))
            .await
            .status,
        StatusCode::OK
    );
    let mut open = Vec::new();
    for _ in 0..2 {
        let viewer = new_token(&s, "viewer").await;
        let request = Request::builder()
            .uri("/api/v1/guests.csv?history=true")
            .header(header::AUTHORIZATION, format!("Bearer {viewer}"))
            .body(Body::empty())
            .unwrap();
        let answer = s.router.clone().oneshot(request).await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        open.push(answer);
    }
    let viewer = new_token(&s, "viewer").await;
    let third = s
        .call(
            Method::GET,
            "/api/v1/guests.csv?history=true",
            Some(&viewer),
            None,
        )
        .await;
    assert_eq!(
        third.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        third.body
    );
    // Without the history it is the ranking as it is, for anyone.
    let plain = s
        .call(Method::GET, "/api/v1/guests.csv", Some(&viewer), None)
        .await;
    assert_eq!(plain.status, StatusCode::OK);
    drop(open);
}

/// A page view that changes nothing in its session does not write it again within a minute.
#[tokio::test]
async fn a_page_view_writes_its_session_at_most_once_a_minute() {
    let s = server().await;
    let login = s.login("alice", "viewer").await;
    let mut raw = common::database::RawDb::connect(&s.test_db).await;
    let before = raw.sessions().await;
    for _ in 0..3 {
        // Expiries are stored to the second.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(s.page("/hosts", &login).await.status, StatusCode::OK);
    }
    assert_eq!(raw.sessions().await, before);
}

/// A token made on the settings page is shown once, and never written to the session store on
/// its way to the page.
#[tokio::test]
async fn a_new_token_never_reaches_the_session_store() {
    let s = server().await;
    let admin = s.login("ada", "admin").await;
    let made = s
        .post_form(
            &admin,
            "/settings/tokens",
            &[("name", "hv9"), ("role", "agent"), ("csrf", &admin.csrf)],
        )
        .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    let mut raw = common::database::RawDb::connect(&s.test_db).await;
    for (data, _) in raw.sessions().await {
        assert!(
            !data.contains("tks_"),
            "a token in the session store: {data}"
        );
    }
    let page = s.page("/settings", &admin).await;
    assert!(page.body.contains("tks_"), "the new token is shown");
    let again = s.page("/settings", &admin).await;
    assert!(!again.body.contains("tks_"), "and only once");
}

/// A guest token an admin pinned to a VM on a host delivers to that host's guest, whoever else
/// reports its UUID, and whichever token held it before.
#[tokio::test]
async fn a_guest_token_pinned_to_a_host_delivers_there() {
    let s = server().await;
    let mut vm = guest("web", 1, 0.3, 38.0, None);
    vm["uuid"] = json!(UUID);
    let other = new_token(&s, "agent").await;
    for (token, host) in [(&s.agent_token, "victim-hv"), (&other, "other-hv")] {
        let r = report_of(host, 1, vec![vm.clone()]);
        assert_eq!(s.post_report(Some(token), &r).await.status, StatusCode::OK);
    }
    // Two hosts report the UUID: an unpinned token cannot tell which is its VM.
    let unpinned = new_token(&s, "guest").await;
    let refused = s
        .call(
            Method::POST,
            "/api/v1/guest-facts",
            Some(&unpinned),
            Some(facts("6.1.0-x").to_string()),
        )
        .await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND, "{}", refused.body);
    let pinned = new_token(&s, "guest").await;
    // The newest token: tokens are listed newest first.
    let pinned_id = s.db.tokens().await.unwrap()[0].id;
    assert!(
        s.db.pin_guest_token(pinned_id, UUID, Some("victim-hv"))
            .await
            .unwrap()
    );
    let posted = s
        .call(
            Method::POST,
            "/api/v1/guest-facts",
            Some(&pinned),
            Some(facts("6.1.0-pinned").to_string()),
        )
        .await;
    assert_eq!(posted.status, StatusCode::OK, "{}", posted.body);
    let mut kernels = kernels(&s).await;
    kernels.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        kernels,
        [
            ("other-hv".to_string(), Value::Null),
            ("victim-hv".to_string(), json!("6.1.0-pinned")),
        ]
    );
}

/// `bind-a ` is `bind-a`: a name that differs only in surrounding space is the same host.
#[tokio::test]
async fn a_host_name_with_surrounding_space_is_the_same_host() {
    let s = server().await;
    for (seq, name) in [(1, "bind-a"), (2, " bind-a  ")] {
        let r = report_of(name, seq, vec![guest("web", 1, 0.3, 38.0, None)]);
        let reply = s.post_report(Some(&s.agent_token), &r).await;
        assert_eq!(reply.status, StatusCode::OK, "{name:?}: {}", reply.body);
    }
    let hosts = s.db.hosts().await.unwrap();
    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["bind-a"]);
}

/// A new password (`tickscope-server user passwd`, run beside the server) ends the hold on a
/// name that failed too often: the admin who reset it can log in at once.
#[test]
#[ignore = "runs the server binary; scripts/test.sh runs it"]
fn a_new_password_from_the_command_line_ends_the_hold_on_the_name() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("t.db");
    let set_password = |command: &str, password: &str| {
        let out = common::processes::output_with_stdin(
            std::process::Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
                .args(["user", command, "ada"])
                .args(["--role", "admin"].iter().filter(|_| command == "add"))
                .arg("--db")
                .arg(&db),
            format!("{password}\n").as_bytes(),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    set_password("add", "the first long password");
    let mut processes = Processes::default();
    let url = start_server(&db, &[], &mut processes);
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .new_agent();
    let try_login = |password: &str| -> u16 {
        let mut page = agent.get(&format!("{url}/login")).call().unwrap();
        let cookie = page
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with("tickscope_login="))
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_string();
        let html = page.body_mut().read_to_string().unwrap();
        let csrf = common::csrf_in(&html).unwrap();
        agent
            .post(&format!("{url}/login"))
            .header("cookie", &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .send(common::form(&[
                ("name", "ada"),
                ("password", password),
                ("csrf", &csrf),
            ]))
            .unwrap()
            .status()
            .as_u16()
    };
    let failures: Vec<u16> = (0..6).map(|_| try_login("wrong wrong wrong")).collect();
    assert_eq!(failures, [401, 401, 401, 401, 401, 429]);
    set_password("passwd", "the second long password");
    assert_eq!(try_login("the second long password"), 303);
}

/// Behind a load balancer that names its clients with the PROXY protocol (Debian's HAProxy), the
/// cap per client address counts the clients it carries, not the balancer: one client address
/// holds only its share, and everyone else still gets through the same balancer.
#[test]
#[ignore = "runs the server binary and HAProxy; scripts/test.sh runs it"]
fn behind_haproxy_one_client_address_still_holds_only_its_share() {
    let Some(haproxy) = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
    else {
        eprintln!(
            "skipped: HAProxy is not installed (Debian's haproxy; scripts/test.sh installs it)"
        );
        return;
    };
    many_files();
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("t.db");
    let victim = add_token(&db, "agent");
    let viewer = add_token(&db, "viewer");
    let mut processes = Processes::default();
    let server = start_server(
        &db,
        &[
            "--trusted-proxies",
            "127.0.0.1",
            "--proxy-protocol",
            "--max-connections-per-address",
            "50",
        ],
        &mut processes,
    );
    let front = common::processes::free_port();
    let config = work.path().join("haproxy.cfg");
    std::fs::write(
        &config,
        format!(
            "global\n  maxconn 4000\ndefaults\n  mode tcp\n  timeout connect 5s\n  \
             timeout client 60s\n  timeout server 60s\nfrontend tickscope\n  \
             bind 127.0.0.1:{front}\n  default_backend tickscope\nbackend tickscope\n  \
             server s1 {} send-proxy-v2\n",
            server.trim_start_matches("http://")
        ),
    )
    .unwrap();
    let child = std::process::Command::new(haproxy)
        .args(["-db", "-f"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    processes.add("haproxy", child);
    let url = format!("http://127.0.0.1:{front}");
    common::processes::wait_for_count("HAProxy listening", 1, Duration::from_secs(30), || {
        usize::from(std::net::TcpStream::connect(("127.0.0.1", front)).is_ok())
    });
    let mut held: Vec<TcpStream> = (0..200)
        .filter_map(|_| {
            let mut stream = connect_from(ATTACKER, &url).ok()?;
            stream
                .write_all(
                    b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 65536\r\n\r\n",
                )
                .ok()?;
            Some(stream)
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1000));
    let answers = bystanders(&url, &viewer, &victim, 1);
    assert_all_served(
        "200 request heads from one address, through HAProxy",
        &answers,
    );
    let waiting = held
        .iter_mut()
        .map(|s| {
            s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            let still_open = matches!(
                s.read(&mut [0u8; 1]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
            );
            usize::from(still_open)
        })
        .sum::<usize>();
    assert!(
        waiting <= 50,
        "{waiting} of 200 connections from one address are held open through HAProxy; the cap is 50"
    );
    // The balancer's own address, without a PROXY header, is not taken for a client.
    let mut direct = std::net::TcpStream::connect(server.trim_start_matches("http://")).unwrap();
    direct
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    direct
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let mut answer = Vec::new();
    let _ = direct.read_to_end(&mut answer);
    assert!(
        !String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"),
        "a trusted proxy's connection without a PROXY header was served"
    );
}

/// A client that reconnects in a loop is held to its rate of new connections: the ones over it
/// are closed before a byte is read, and everyone else still gets in.
#[test]
#[ignore = "runs the server binary; scripts/test.sh runs it"]
fn one_address_reconnecting_in_a_loop_is_held_to_its_rate() {
    many_files();
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("t.db");
    let victim = add_token(&db, "agent");
    let viewer = add_token(&db, "viewer");
    let mut processes = Processes::default();
    let url = start_server(
        &db,
        &["--max-new-connections-per-address", "10"],
        &mut processes,
    );
    // 100 connections within well under a second: 20 (the burst) are served.
    let mut opened: Vec<TcpStream> = (0..100)
        .filter_map(|_| {
            let mut stream = connect_from(ATTACKER, &url).ok()?;
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                .ok()?;
            Some(stream)
        })
        .collect();
    let served = opened
        .iter_mut()
        .filter_map(answer_status)
        .filter(|s| *s == 200)
        .count();
    assert!(
        (20..=30).contains(&served),
        "{served} of 100 connections opened at once were served; the burst is 20"
    );
    let answers = bystanders(&url, &viewer, &victim, 1);
    assert_all_served("100 connections opened at once from one address", &answers);
}
