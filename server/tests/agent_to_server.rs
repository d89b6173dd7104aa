//! The agent library's sampler, reporter and HTTP client against a real server on a loopback
//! port: proves the wire format and the client end to end, without booting guests. The agent
//! samples the `/proc` tree recorded from a real 2-vCPU `nohz=off` QEMU guest.

mod common;

use std::path::Path;

use serde_json::Value;
use tickscope_agent::client::Client;
use tickscope_agent::report::Reporter;
use tickscope_agent::sampler::Sampler;
use tickscope_agent::wire::{AgentInfo, HostInfo};

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

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
        let mut sampler = Sampler::new(&proc_dir, 100);
        assert!(sampler.cycle().unwrap().is_none());
        // Let some real time pass so the interval is long enough to judge.
        std::thread::sleep(std::time::Duration::from_millis(2100));
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
        };
        let report = reporter.report(host, measured);
        let mut client = Client::new(&agent_url, &agent_token);
        let first = client.send(report.clone());
        let again = client.send(report.clone());
        // A report the server refuses for what it is is dropped, with the server's reason.
        let refused = Client::new(&agent_url, &viewer_for_agent).send(report);
        (first, again, refused)
    })
    .await
    .unwrap();
    assert_eq!((deliveries.0.sent, deliveries.0.error), (1, None));
    assert_eq!((deliveries.1.sent, deliveries.1.error), (1, None));
    let refused = deliveries.2;
    assert_eq!((refused.sent, refused.pending), (0, 0), "{refused:?}");
    assert_eq!(refused.rejected.len(), 1);
    assert!(
        refused.rejected[0].contains("403") && refused.rejected[0].contains("agent token"),
        "{refused:?}"
    );
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

#[test]
fn an_unreachable_server_keeps_the_report_to_send_again() {
    // Nothing listens on this port: the report is kept to be sent again.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let mut client = Client::new(&url, "tks_unused");
    let report: tickscope_agent::wire::Report = serde_json::from_value(serde_json::json!({
        "agent": {"id": "m", "run_id": "r", "version": "1"},
        "seq": 0,
        "host": {"name": "h", "cpus": 1, "kernel": "k"},
        "interval": {"start_ms": 0, "end_ms": 1, "length_ns": 1_000_000_000u64},
        "guests": []
    }))
    .unwrap();
    let delivery = client.send(report);
    assert_eq!(delivery.sent, 0);
    assert_eq!(delivery.pending, 1);
    assert!(delivery.error.is_some());
}
