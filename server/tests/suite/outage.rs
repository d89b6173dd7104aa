//! Fault tests with the real binaries: the agent through a server outage, a spool that
//! overflows, and an agent killed again and again in the middle of its work. Every report the
//! agent produced must reach the database exactly once, in order, or be counted as dropped
//! (or, killed in the middle of sending it, be the one report it never got an answer for).
//!
//! Ignored by `cargo test` (they need the agent binary built beside the server's and take about
//! a minute); `scripts/test.sh` runs them.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::database::TestDb;
use common::processes::{
    Processes, add_token, agent_binary, free_port, start_server, wait_for_count,
};

fn start_agent(url: &str, token: &str, spool: &Path, interval: &str, extra: &[&str]) -> Child {
    Command::new(agent_binary())
        .args([
            "run",
            "--interval",
            interval,
            "--host-name",
            "outage-host",
            "--spool-dir",
        ])
        .arg(spool)
        .args(extra)
        .env("TICKSCOPE_SERVER", url)
        .env("TICKSCOPE_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the agent binary is built (cargo build --workspace)")
}

fn start_server_on(db: &TestDb, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--db"])
        .arg(db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[derive(serde::Deserialize)]
struct SpoolState {
    run_id: String,
    dropped: i64,
}

fn spool_state(spool: &Path) -> SpoolState {
    serde_json::from_slice(&std::fs::read(spool.join("state.json")).unwrap()).unwrap()
}

fn pending(spool: &Path) -> usize {
    std::fs::read_dir(spool.join("pending")).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count()
    })
}

/// Waits until the spool is empty.
fn drained(spool: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while pending(spool) > 0 {
        assert!(Instant::now() < deadline, "the spool never emptied");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn stored(db: &TestDb, run_id: &str) -> (Vec<i64>, i64) {
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let db = db.open().await;
        let seqs = db.report_sequence(run_id).await.unwrap();
        let dropped = db
            .hosts()
            .await
            .unwrap()
            .into_iter()
            .find(|h| h.name == "outage-host")
            .map_or(0, |h| h.agent_dropped_reports);
        db.close().await;
        (seqs, dropped)
    })
}

/// Reports stored in the database, from every run.
fn stored_count(db: &TestDb) -> usize {
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let db = db.open().await;
        let (reports, _) = db.count_reports_and_samples().await.unwrap();
        db.close().await;
        reports as usize
    })
}

/// Reports the agent has dropped from its spool so far (none before it wrote its state).
fn spool_dropped(spool: &Path) -> usize {
    if spool.join("state.json").exists() {
        spool_state(spool).dropped as usize
    } else {
        0
    }
}

/// Long enough for a loaded machine; a healthy one takes seconds.
const PATIENCE: Duration = Duration::from_secs(60);

#[test]
#[ignore = "runs the real binaries for about 20 s; run by scripts/test.sh"]
fn reports_made_while_the_server_is_down_arrive_once_each_in_order() {
    let work = tempfile::tempdir().unwrap();
    let db = TestDb::new_blocking(work.path(), "t.db");
    let spool = work.path().join("spool");
    let token = add_token(&db, "agent");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut processes = Processes::default();
    processes.add(
        "tickscope-agent",
        start_agent(&url, &token, &spool, "0.3", &[]),
    );
    let waited = wait_for_count("reports waiting in the spool", 3, PATIENCE, || {
        pending(&spool)
    });
    processes.add("tickscope-server", start_server_on(&db, port));
    // The agent retries after 0.3 s, doubling up to... it reaches the server within seconds.
    drained(&spool);
    processes.kill("tickscope-agent");
    let state = spool_state(&spool);
    let (seqs, dropped) = stored(&db, &state.run_id);
    assert_eq!(state.dropped, 0);
    assert_eq!(dropped, 0);
    // One run numbers its reports 0, 1, 2...: every number up to the last stored arrived once,
    // in order, the ones made during the outage among them.
    let last = *seqs.last().unwrap();
    assert_eq!(seqs, (0..=last).collect::<Vec<i64>>());
    assert!(seqs.len() > waited, "{seqs:?}");
}

#[test]
#[ignore = "runs the real binaries for about 15 s; run by scripts/test.sh"]
fn a_spool_full_during_an_outage_drops_the_oldest_and_says_so() {
    let work = tempfile::tempdir().unwrap();
    let db = TestDb::new_blocking(work.path(), "t.db");
    let spool = work.path().join("spool");
    let token = add_token(&db, "agent");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    // Room for about three empty reports.
    let mut processes = Processes::default();
    processes.add(
        "tickscope-agent",
        start_agent(&url, &token, &spool, "0.3", &["--spool-max-kib", "1"]),
    );
    wait_for_count("reports dropped from a 1 KiB spool", 1, PATIENCE, || {
        spool_dropped(&spool)
    });
    let bytes: u64 = std::fs::read_dir(spool.join("pending"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let during = spool_state(&spool);
    assert!(during.dropped > 0, "nothing dropped in a 1 KiB spool");
    // Within the bound, but for the newest report, which is always kept.
    let newest = std::fs::read_dir(spool.join("pending"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .max()
        .unwrap();
    assert!(bytes <= 1024 + newest, "{bytes} bytes in the spool");
    processes.add("tickscope-server", start_server_on(&db, port));
    drained(&spool);
    processes.kill("tickscope-agent");
    let state = spool_state(&spool);
    let (seqs, dropped_on_server) = stored(&db, &state.run_id);
    assert!(dropped_on_server > 0, "the server was told of the drops");
    assert!(dropped_on_server <= state.dropped);
    // Each stored once, in order; the gaps are exactly the dropped ones.
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    // One run numbers its reports 0, 1, 2...: the numbers missing up to the last stored are
    // exactly the dropped ones.
    let last = *seqs.last().unwrap();
    assert_eq!(seqs.len() as i64 + state.dropped, last + 1, "{seqs:?}");
}

#[test]
#[ignore = "runs the real binaries for about 20 s; run by scripts/test.sh"]
fn an_agent_killed_again_and_again_loses_and_repeats_nothing() {
    let work = tempfile::tempdir().unwrap();
    let db = TestDb::new_blocking(work.path(), "t.db");
    let spool = work.path().join("spool");
    let token = add_token(&db, "agent");
    let mut processes = Processes::default();
    let url = start_server(&db, &[], &mut processes);
    // kill -9 while it starts: before its spool exists, and in its first cycle, before anything
    // it wrote was acknowledged. What it may have stored counts like any other run's.
    for ms in [40, 250] {
        processes.add(
            "tickscope-agent",
            start_agent(&url, &token, &spool, "0.2", &[]),
        );
        std::thread::sleep(Duration::from_millis(ms));
        processes.kill("tickscope-agent");
    }
    // kill -9 at moments that fall anywhere in its cycle: writing, sending, deleting. Each run
    // first gets a report stored, however slowly it starts, so that every run is seen.
    for ms in [700, 950, 1230, 810, 1500, 1040] {
        let before = stored_count(&db);
        processes.add(
            "tickscope-agent",
            start_agent(&url, &token, &spool, "0.2", &[]),
        );
        wait_for_count(
            "reports stored (this run's first)",
            before + 1,
            PATIENCE,
            || stored_count(&db),
        );
        std::thread::sleep(Duration::from_millis(ms));
        processes.kill("tickscope-agent");
    }
    // The last run is seen too, and the runs together made enough to say something.
    let before = stored_count(&db);
    processes.add(
        "tickscope-agent",
        start_agent(&url, &token, &spool, "0.3", &[]),
    );
    wait_for_count("reports stored", (before + 1).max(15), PATIENCE, || {
        stored_count(&db)
    });
    drained(&spool);
    processes.kill("tickscope-agent");
    let state = spool_state(&spool);
    let (seqs, _) = stored(&db, &state.run_id);
    // Stored once each, in order.
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "stored twice or out of order: {seqs:?}"
    );
    assert!(
        seqs.len() >= 15,
        "too few reports to say anything: {seqs:?}"
    );
    // Each run numbers from the start of a fresh block of 100; within a run nothing is missing
    // but, at most, the report it was sending when it was killed (never acknowledged, so not
    // owed). A gap inside a run would be a lost report.
    let mut runs: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    for seq in &seqs {
        runs.entry(seq / 100).or_default().push(*seq);
    }
    for (block, run) in &runs {
        let expected: Vec<i64> = (block * 100..block * 100 + run.len() as i64).collect();
        assert_eq!(run, &expected, "a report lost inside a run: {seqs:?}");
    }
    // One block per run that stored anything: the seven waited for, and at most one each for
    // the two killed as they started.
    assert!((7..=9).contains(&runs.len()), "one block per run: {seqs:?}");
    eprintln!("{} reports over {} runs: {seqs:?}", seqs.len(), runs.len());
}

#[test]
#[ignore = "runs the real binaries for about 20 s; run by scripts/test.sh"]
fn a_server_killed_under_load_loses_no_acknowledged_report_and_stores_none_twice() {
    let work = tempfile::tempdir().unwrap();
    let db = TestDb::new_blocking(work.path(), "t.db");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    // Three agents, each with its own token, host and spool, every 0.2 s: 15 reports a second.
    let mut processes = Processes::default();
    let mut spools = Vec::new();
    for i in 0..3 {
        let token = add_token(&db, "agent");
        let spool = work.path().join(format!("spool-{i}"));
        let agent = Command::new(agent_binary())
            .args([
                "run",
                "--interval",
                "0.2",
                "--host-name",
                &format!("load-host-{i}"),
                "--spool-dir",
            ])
            .arg(&spool)
            .env("TICKSCOPE_SERVER", &url)
            .env("TICKSCOPE_TOKEN", &token)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        processes.add(&format!("tickscope-agent {i}"), agent);
        spools.push(spool);
    }
    // kill -9 the server at moments that fall anywhere in an ingest, and start it again.
    for ms in [1300, 870, 1550, 1010] {
        processes.add("tickscope-server", start_server_on(&db, port));
        std::thread::sleep(Duration::from_millis(ms));
        processes.kill("tickscope-server");
        std::thread::sleep(Duration::from_millis(300));
    }
    processes.add("tickscope-server", start_server_on(&db, port));
    // The agents back off up to a few seconds after the outages; let them catch up.
    wait_for_count("reports stored", 60, PATIENCE, || stored_count(&db));
    for spool in &spools {
        drained(spool);
    }
    for i in 0..spools.len() {
        processes.kill(&format!("tickscope-agent {i}"));
    }
    let mut total = 0;
    for spool in &spools {
        let state = spool_state(spool);
        let (seqs, _) = stored(&db, &state.run_id);
        // One run per agent: its numbers 0, 1, 2... each stored once, in order, none missing
        // up to the last (a gap would be a report the server acknowledged and then lost, or
        // one the agent gave up on).
        let last = *seqs.last().unwrap();
        assert_eq!(
            seqs,
            (0..=last).collect::<Vec<i64>>(),
            "{}",
            spool.display()
        );
        total += seqs.len();
    }
    assert!(total >= 60, "too few reports to say anything: {total}");
    eprintln!("{total} reports from 3 agents through 4 kill -9 of the server");
}
