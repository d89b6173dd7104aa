//! `tickscope-agent simulate` against the real server binary: a token per host made by
//! `token add --count`, every simulated host and guest stored, nothing refused.

use crate::common;

use std::process::Command;

use common::database::TestDb;
use common::processes::{Processes, agent_binary, agent_tokens_file, start_server};
use tickscope_server::db::GuestScope;

#[tokio::test]
#[ignore = "runs the agent binary; run by scripts/test.sh"]
async fn a_simulated_fleet_reports_every_host_and_guest() {
    let work = tempfile::tempdir().unwrap();
    let db_path = TestDb::new(work.path(), "sim.db").await;
    let tokens_file = work.path().join("tokens");
    agent_tokens_file(&db_path, "sim-host", 3, &tokens_file);
    assert_eq!(
        std::fs::read_to_string(&tokens_file)
            .unwrap()
            .lines()
            .count(),
        3
    );

    let mut processes = Processes::default();
    let url = start_server(&db_path, &[], &mut processes);
    let simulate = Command::new(agent_binary())
        .args([
            "simulate",
            "--server",
            &url,
            "--hosts",
            "3",
            "--guests-per-host",
            "5",
            "--interval",
            "0.5",
            "--duration",
            "3",
            "--seed",
            "7",
            "--warm-up",
            "1",
            "--tokens-file",
        ])
        .arg(&tokens_file)
        .output()
        .expect("the agent binary is built (cargo build --workspace)");
    let stdout = String::from_utf8_lossy(&simulate.stdout);
    assert!(
        simulate.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&simulate.stderr)
    );
    let taken: u64 = stdout.split_whitespace().next().unwrap().parse().unwrap();
    // Three hosts, a report every half second for three seconds.
    assert!((12..=21).contains(&taken), "{stdout}");
    // The latency line counts the reports taken after the first second's (the warm-up).
    let latency = stdout
        .lines()
        .find_map(|l| l.strip_prefix("latency_ms "))
        .unwrap_or_else(|| panic!("no latency_ms line in {stdout}"));
    let field = |key: &str| -> f64 {
        latency
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {key} in {latency}"))
            .parse()
            .unwrap()
    };
    let measured = field("count") as u64;
    assert!(0 < measured && measured < taken, "{stdout}");
    assert!(
        0.0 < field("p50") && field("p50") <= field("p99"),
        "{stdout}"
    );
    assert!(field("p99") <= field("max"), "{stdout}");

    let db = db_path.open().await;
    let (reports, samples) = db.count_reports_and_samples().await.unwrap();
    assert_eq!(reports as u64, taken);
    assert!(samples > 0);
    let guests = db
        .guests_in(GuestScope::Active { since_ms: 0 })
        .await
        .unwrap();
    let mut hosts: Vec<&str> = guests.iter().map(|g| g.host_name.as_str()).collect();
    hosts.sort();
    hosts.dedup();
    assert_eq!(hosts, ["sim-host-0001", "sim-host-0002", "sim-host-0003"]);
    assert_eq!(guests.len(), 15);

    // Fewer tokens than hosts is refused before anything is sent (a token reports for one host).
    let refused = Command::new(agent_binary())
        .args([
            "simulate",
            "--server",
            &url,
            "--hosts",
            "4",
            "--duration",
            "1",
            "--tokens-file",
        ])
        .arg(&tokens_file)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("one per host"));
}
