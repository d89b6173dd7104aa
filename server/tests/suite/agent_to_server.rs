//! The agent library's sampler, reporter and HTTP client against a real server on a loopback
//! port: proves the wire format and the client end to end, without booting guests. The agent
//! samples the `/proc` tree recorded from a real 2-vCPU `nohz=off` QEMU guest.

use crate::common;

use std::path::Path;

use common::copy_tree;

use serde_json::Value;
use tickscope_agent::client::{Client, Sender};
use tickscope_agent::clock::SampleClock;
use tickscope_agent::report::Reporter;
use tickscope_agent::sampler::Sampler;
use tickscope_agent::spool::{Bounds, Spool};
use tickscope_wire::{AgentInfo, HostInfo};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_reports_reach_the_ranking_and_a_resend_is_stored_once() {
    // The same server the in-process tests use, this time on a real loopback port.
    let server = common::server().await;
    let (db, agent_token, viewer_token) = (
        server.db.clone(),
        server.agent_token.clone(),
        server.viewer_token.clone(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = server.router.clone();
    tokio::spawn(async move { axum::serve(listener, router).await });

    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent/tests/fixtures/qemu-tcg-nohz-off");
    let proc_dir = server.dir.path().join("proc");
    std::fs::create_dir_all(&proc_dir).unwrap();
    let agent_url = url.clone();
    let viewer_for_agent = viewer_token.clone();
    let deliveries = tokio::task::spawn_blocking(move || {
        copy_tree(&fixture.join("t0"), &proc_dir);
        let clock = SampleClock::manual();
        let mut sampler = Sampler::new(&proc_dir, 100).with_clock(clock.clone());
        assert!(sampler.cycle().unwrap().is_none());
        // Move the sampler's clock on so the interval is long enough to judge.
        clock.advance(std::time::Duration::from_millis(2100));
        copy_tree(&fixture.join("t1"), &proc_dir);
        let measured = sampler.cycle().unwrap().unwrap();
        let mut reporter = Reporter::new(AgentInfo {
            id: "e2e-machine".into(),
            run_id: "e2e-run".into(),
            version: "test".into(),
        });
        let host = HostInfo {
            name: "e2e-host".into(),
            cpus: 8,
            kernel: "6.1.0-test".into(),
            kvm_halt_poll_ns: None,
            boot_id: None,
            blind_spots: Vec::new(),
        };
        let report = reporter.report(host, measured);
        // The same report twice, as after an agent died between the server storing it and the
        // spool forgetting it: both acknowledged, stored once.
        let mut numbered = report.clone();
        numbered.seq = 0;
        let json = serde_json::to_vec(&numbered).unwrap();
        let client = Client::new(&agent_url, &agent_token);
        let first = client.post_report(json.clone()).is_ok();
        let again = client.post_report(json).is_ok();
        // A report the server refuses for what it is is moved aside, with the server's reason.
        let refused_dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(refused_dir.path(), Bounds::default(), "other".into()).unwrap();
        let mut refused_sender = Sender::new(
            Client::new(&agent_url, &viewer_for_agent),
            spool,
            std::time::Duration::from_millis(10),
        );
        let refused = refused_sender
            .submit(report, std::time::Instant::now())
            .unwrap();
        let aside = std::fs::read_dir(refused_dir.path().join("rejected"))
            .unwrap()
            .count();
        (first, again, refused, aside)
    })
    .await
    .unwrap();
    assert!(deliveries.0 && deliveries.1, "both sends acknowledged");
    let refused = deliveries.2;
    assert_eq!((refused.sent, refused.pending), (0, 0), "{refused:?}");
    assert_eq!(refused.rejected.len(), 1);
    assert!(
        refused.rejected[0].contains("403") && refused.rejected[0].contains("agent token"),
        "{refused:?}"
    );
    assert_eq!(deliveries.3, 1, "the refused report is kept aside");
    assert_eq!(
        db.count_reports_and_samples().await.unwrap(),
        (1, 1),
        "the resend was stored again"
    );

    let body: Value = tokio::task::spawn_blocking(move || {
        ureq::get(&format!("{url}/api/v1/guests"))
            .header("Authorization", &format!("Bearer {viewer_token}"))
            .call()
            .unwrap()
            .into_body()
            .read_json()
            .unwrap()
    })
    .await
    .unwrap();
    let guest = &body["guests"][0];
    assert_eq!(guest["name"], "t2");
    assert_eq!(guest["host"], "e2e-host");
    assert_eq!(guest["vcpus"], 2);
    // 2751 vCPU wake-ups in about 2.1 s over 2 vCPUs: a periodic tick, seen as such.
    assert_eq!(guest["tick_mode"], "periodic", "{guest:#}");
    assert_eq!(guest["suggestions"][0]["rule"], "remove_nohz_off");
}

fn empty_report() -> tickscope_wire::Report {
    serde_json::from_value(serde_json::json!({
        "agent": {"id": "m", "run_id": "r", "version": "1"},
        "seq": 0,
        "host": {"name": "h", "cpus": 1, "kernel": "k"},
        "interval": {"start_ms": 0, "end_ms": 1, "length_ns": 1_000_000_000u64},
        "guests": []
    }))
    .unwrap()
}

fn sender(url: &str, spool_dir: &Path, base_ms: u64) -> Sender {
    let spool = Spool::open(spool_dir, Bounds::default(), "run".into()).unwrap();
    Sender::new(
        Client::new(url, "tks_unused"),
        spool,
        std::time::Duration::from_millis(base_ms),
    )
}

#[test]
fn an_unreachable_server_keeps_the_report_in_the_spool_to_send_again() {
    // Nothing listens on this port: the report stays in the spool.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let dir = tempfile::tempdir().unwrap();
    let mut sender = sender(&url, dir.path(), 1000);
    let now = std::time::Instant::now();
    let delivery = sender.submit(empty_report(), now).unwrap();
    assert_eq!((delivery.sent, delivery.pending), (0, 1));
    assert!(delivery.error.is_some());
    assert!(delivery.retry_in.unwrap() >= std::time::Duration::from_millis(1000));
    // Before the delay is over, nothing is tried.
    let early = sender.deliver(now + std::time::Duration::from_millis(500));
    assert_eq!((early.sent, early.pending, early.error), (0, 1, None));
    assert_eq!(
        std::fs::read_dir(dir.path().join("pending"))
            .unwrap()
            .count(),
        1
    );
}

/// A fake server that answers each report POST with the next status of its script (then 200),
/// and notes when each attempt came and which report it carried.
/// Statuses to answer, each with a `Retry-After` value or none.
type Script = std::collections::VecDeque<(u16, Option<&'static str>)>;

#[derive(Clone)]
struct Scripted {
    statuses: std::sync::Arc<std::sync::Mutex<Script>>,
    attempts: std::sync::Arc<std::sync::Mutex<Vec<(std::time::Instant, u64)>>>,
}

impl Scripted {
    async fn start(script: &[(u16, Option<&'static str>)]) -> (Scripted, String) {
        let scripted = Scripted {
            statuses: std::sync::Arc::new(std::sync::Mutex::new(script.iter().copied().collect())),
            attempts: Default::default(),
        };
        let app = axum::Router::new()
            .route(
                "/api/v1/reports",
                axum::routing::post(
                    |axum::extract::State(s): axum::extract::State<Scripted>,
                     axum::Json(report): axum::Json<Value>| async move {
                        let seq = report["seq"].as_u64().unwrap();
                        s.attempts
                            .lock()
                            .unwrap()
                            .push((std::time::Instant::now(), seq));
                        let (status, retry_after) = s
                            .statuses
                            .lock()
                            .unwrap()
                            .pop_front()
                            .unwrap_or((200, None));
                        let mut response =
                            axum::response::Response::new(axum::body::Body::from("{}"));
                        *response.status_mut() = axum::http::StatusCode::from_u16(status).unwrap();
                        if let Some(after) = retry_after {
                            response
                                .headers_mut()
                                .insert("retry-after", after.parse().unwrap());
                        }
                        response
                    },
                ),
            )
            .with_state(scripted.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (scripted, url)
    }

    fn attempts(&self) -> Vec<(std::time::Instant, u64)> {
        self.attempts.lock().unwrap().clone()
    }
}

/// Calls `deliver` every few milliseconds for `for_ms`, as the agent's loop would.
async fn keep_delivering(mut sender: Sender, for_ms: u64) -> Sender {
    tokio::task::spawn_blocking(move || {
        let until = std::time::Instant::now() + std::time::Duration::from_millis(for_ms);
        while std::time::Instant::now() < until {
            sender.deliver(std::time::Instant::now());
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        sender
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answering_500_500_200_sees_three_attempts_with_growing_delays() {
    let (server, url) = Scripted::start(&[(500, None), (500, None)]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut sender = sender(&url, dir.path(), 100);
    sender
        .submit(empty_report(), std::time::Instant::now())
        .unwrap();
    let sender = keep_delivering(sender, 1200).await;
    let attempts = server.attempts();
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    let gaps: Vec<u128> = attempts
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).as_millis())
        .collect();
    // 100 ms after the first failure, 200 ms after the second (each plus up to a fifth).
    assert!(
        gaps[0] >= 100 && gaps[1] >= 200 && gaps[1] > gaps[0],
        "{gaps:?}"
    );
    assert!(sender.spool().pending().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answering_400_sees_exactly_one_attempt() {
    let (server, url) = Scripted::start(&[(400, None)]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut sender = sender(&url, dir.path(), 10);
    sender
        .submit(empty_report(), std::time::Instant::now())
        .unwrap();
    let sender = keep_delivering(sender, 300).await;
    assert_eq!(server.attempts().len(), 1);
    assert!(sender.spool().pending().unwrap().is_empty());
    assert_eq!(
        std::fs::read_dir(dir.path().join("rejected"))
            .unwrap()
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured() {
    let (server, url) = Scripted::start(&[(429, Some("1"))]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut sender = sender(&url, dir.path(), 10);
    sender
        .submit(empty_report(), std::time::Instant::now())
        .unwrap();
    keep_delivering(sender, 1500).await;
    let attempts = server.attempts();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert!((attempts[1].0 - attempts[0].0).as_millis() >= 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_queued_through_an_outage_arrive_once_each_in_order() {
    // The server is down (503) for its first five answers.
    let (server, url) = Scripted::start(&[(503, None); 5]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut sender = sender(&url, dir.path(), 20);
    let sender = tokio::task::spawn_blocking(move || {
        for _ in 0..8 {
            sender
                .submit(empty_report(), std::time::Instant::now())
                .unwrap();
            sender.deliver(std::time::Instant::now());
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        sender
    })
    .await
    .unwrap();
    let sender = keep_delivering(sender, 1500).await;
    assert!(sender.spool().pending().unwrap().is_empty());
    let accepted: Vec<u64> = server
        .attempts()
        .iter()
        .skip(5)
        .map(|(_, seq)| *seq)
        .collect();
    assert_eq!(accepted, (0..8).collect::<Vec<u64>>());
}
