//! Slow and idle clients against the real binary: they hold nothing others need, and what they
//! hold is taken back within a stated time.
//!
//! These tests time how long the server takes to answer, but only to tell "at once" from
//! "after the slow clients' timeouts" (seconds apart): the bounds are the issue's, with room
//! for a loaded machine.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::processes::{Processes, add_token, start_server};

/// Opens a connection to the server at `url` (`http://host:port`).
fn connect(url: &str) -> TcpStream {
    let stream = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream
}

/// Reads until the server closes the connection (or the read timeout); returns what came.
fn read_to_close(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn report(seq: u64) -> serde_json::Value {
    let now = chrono::Utc::now().timestamp_millis();
    serde_json::json!({
        "agent": {"id": "slow-test", "run_id": "r1", "version": "0.1.0"},
        "seq": seq,
        "host": {"name": "hv-slow", "cpus": 4, "kernel": "6.1.0"},
        "interval": {"start_ms": now - 10_000, "end_ms": now, "length_ns": 10_000_000_000u64},
        "guests": [{"hypervisor": "qemu", "name": "web", "pid": 42, "vcpus": 1,
                    "host_cpu_seconds": 0.1, "vcpu_wakeups": 1000,
                    "wakeups_source": "vcpu_threads"}]
    })
}

/// How long one request to `url` takes to be answered, and its status.
fn timed(request: ureq::RequestBuilder<ureq::typestate::WithoutBody>) -> (Duration, u16) {
    let started = Instant::now();
    let status = match request.call() {
        Ok(r) => r.status().as_u16(),
        Err(ureq::Error::StatusCode(code)) => code,
        Err(e) => panic!("no answer: {e}"),
    };
    (started.elapsed(), status)
}

#[test]
fn seventy_slow_bodies_keep_nobody_waiting() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("t.db");
    let token = add_token(&db, "agent");
    let mut processes = Processes::default();
    let url = start_server(&db, &["--body-timeout", "8"], &mut processes);

    // 70 logins that announce a body and send one byte of it a second, as the attack did.
    let mut slow: Vec<TcpStream> = (0..70u8)
        .map(|i| {
            // Each from an address of its own, none the clients' below: one address without a
            // credential has only so many requests in flight, and the rest would be refused at
            // once (429) rather than held to their body deadline, which is what this measures.
            let source = std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 1, 1 + i));
            let mut s = common::processes::connect_from(source, &url).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            s.write_all(
                b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 60000\r\n\r\nn",
            )
            .unwrap();
            s
        })
        .collect();
    let trickling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let trickle = {
        let mut streams: Vec<TcpStream> = slow.iter().map(|s| s.try_clone().unwrap()).collect();
        let trickling = trickling.clone();
        std::thread::spawn(move || {
            while trickling.load(std::sync::atomic::Ordering::Relaxed) {
                for s in &mut streams {
                    let _ = s.write_all(b"a");
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };
    std::thread::sleep(Duration::from_secs(2));

    let agent = ureq::Agent::new_with_defaults();
    let (health, status) = timed(agent.get(format!("{url}/healthz")));
    assert_eq!(status, 200);
    let (login_page, status) = timed(agent.get(format!("{url}/login")));
    assert_eq!(status, 200);
    let started = Instant::now();
    let stored = agent
        .post(format!("{url}/api/v1/reports"))
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(report(1))
        .unwrap();
    let report_took = started.elapsed();
    assert_eq!(stored.status(), 200);
    for (what, took) in [
        ("/healthz", health),
        ("the login page", login_page),
        ("an agent's report", report_took),
    ] {
        assert!(
            took < Duration::from_secs(2),
            "{what} took {took:?} while 70 clients sent their bodies slowly"
        );
    }

    // The slow ones are cut off when their body deadline passes, and told why.
    for stream in &mut slow {
        let answer = read_to_close(stream);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("did not arrive within 8 s"), "{answer}");
    }
    trickling.store(false, std::sync::atomic::Ordering::Relaxed);
    trickle.join().unwrap();
}

/// The start of the answer to a request sent raw (head, and perhaps part of a body) to a fresh
/// server.
fn first_answer(raw: &[u8]) -> String {
    let work = tempfile::tempdir().unwrap();
    let mut processes = Processes::default();
    let url = start_server(work.path().join("t.db"), &[], &mut processes);
    let mut s = connect(&url);
    s.write_all(raw).unwrap();
    let mut answer = [0; 512];
    let n = s.read(&mut answer).unwrap();
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

#[test]
fn a_body_larger_than_a_request_without_a_token_may_send_is_refused_before_it_is_read() {
    // Announced, never sent: the answer cannot wait for it.
    let answer = first_answer(b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
}

#[test]
fn a_wrong_token_is_refused_before_the_body_is_read() {
    let answer = first_answer(
        b"POST /api/v1/reports HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tks_not-a-token\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n{",
    );
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
}

#[test]
fn unfinished_headers_and_idle_connections_are_closed_after_the_header_timeout() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("t.db");
    let mut processes = Processes::default();
    let url = start_server(&db, &["--header-timeout", "3"], &mut processes);

    // One header line a second would keep it open forever without a deadline for the whole head.
    let mut unfinished = connect(&url);
    unfinished
        .write_all(b"GET /login HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut writer = unfinished.try_clone().unwrap();
    let dripping = std::thread::spawn(move || {
        for i in 0..20 {
            if writer
                .write_all(format!("X-Drip-{i}: 1\r\n").as_bytes())
                .is_err()
            {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    // A connection that asked once, then says nothing more (a keep-alive left open).
    let mut idle = connect(&url);
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut first = Vec::new();
    while !first.ends_with(b"ok\n") {
        let mut chunk = [0; 256];
        let n = idle.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the answer");
        first.extend_from_slice(&chunk[..n]);
    }
    assert!(first.starts_with(b"HTTP/1.1 200"));

    let started = Instant::now();
    let answer = read_to_close(&mut unfinished);
    let unfinished_closed = started.elapsed();
    assert!(!answer.contains("200 OK"), "{answer}");
    let answer = read_to_close(&mut idle);
    let idle_closed = started.elapsed();
    assert_eq!(answer, "", "nothing more is sent on the idle connection");
    for (what, took) in [("unfinished", unfinished_closed), ("idle", idle_closed)] {
        assert!(
            took < Duration::from_secs(10),
            "the {what} connection stayed open {took:?} past a 3 s header timeout"
        );
    }
    dripping.join().unwrap();
}

#[test]
fn connections_beyond_the_cap_wait_for_a_slot_instead_of_failing_accept() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("t.db");
    let mut processes = Processes::default();
    let url = start_server(
        &db,
        &["--max-connections", "20", "--header-timeout", "2"],
        &mut processes,
    );
    // Twice the cap of connections that send nothing.
    let _idle: Vec<TcpStream> = (0..40).map(|_| connect(&url)).collect();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let (took, status) = timed(agent.get(format!("{url}/healthz")));
    assert_eq!(status, 200);
    // The idle ones are closed after 2 s, freeing their slots; the server never stopped
    // accepting for good.
    assert!(
        took < Duration::from_secs(15),
        "/healthz took {took:?} behind 40 idle connections"
    );
}
