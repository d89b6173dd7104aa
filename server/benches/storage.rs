//! What the history costs on disk: run with `cargo bench -p tickscope-server --bench storage`.
//!
//! Simulates GUESTS guests (tickscope_agent::simulate, GUESTS_PER_HOST to a host) reporting
//! every INTERVAL_S seconds for DAYS days, stored through the server's ingest on the simulated
//! timeline, then runs the retention with its defaults (raw samples 48 h, five-minute rollups
//! 14 days, hourly ones after) and prints the database's size before and after, and the bytes a
//! guest costs per day at each resolution. Sizes are of the file after a checkpoint and VACUUM,
//! so that free pages do not count.
//!
//! Environment: BENCH_GUESTS (default 40), BENCH_GUESTS_PER_HOST (20), BENCH_DAYS (30),
//! BENCH_INTERVAL_S (60).

use std::path::Path;
use std::time::Instant;

use tickscope_agent::simulate::{SimulatedHost, random_fleet};
use tickscope_server::auth;
use tickscope_server::db::Db;
use tickscope_server::ingest;
use tickscope_server::retention::{self, Retention};
use tickscope_server::state::{AppState, Options};

fn env_or(name: &str, default: i64) -> i64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn size_mib(db: &Db, path: &Path) -> f64 {
    db.checkpoint().await.unwrap();
    db.vacuum().await.unwrap();
    std::fs::metadata(path).map_or(0, |m| m.len()) as f64 / 1_048_576.0
}

#[tokio::main]
async fn main() {
    let guests = env_or("BENCH_GUESTS", 40);
    let per_host = env_or("BENCH_GUESTS_PER_HOST", 20);
    let days = env_or("BENCH_DAYS", 30);
    let interval_ms = env_or("BENCH_INTERVAL_S", 60) * 1000;
    let hosts = (guests + per_host - 1) / per_host;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("storage.db");
    let db = Db::open(&path).await.unwrap();
    let state = AppState::new(db.clone(), Options::default()).await.unwrap();

    let now = tickscope_server::clock::now_ms();
    let start = now - days * 86_400_000;
    let fleet = random_fleet(
        3,
        "bench-hv",
        hosts as usize,
        per_host as usize,
        start,
        now - start,
    );
    let mut agents = Vec::new();
    for (i, spec) in fleet.into_iter().enumerate() {
        let name = spec.name.clone();
        let token = auth::new_token().unwrap();
        let id = db
            .insert_token(
                &name,
                tickscope_server::domain::TokenRole::Agent,
                &auth::token_hash(&token),
                Some(&name),
                now,
            )
            .await
            .unwrap();
        agents.push((SimulatedHost::new(spec, i as u64, "bench"), id));
    }
    let started = Instant::now();
    let mut reports = 0u64;
    let mut end = start + interval_ms;
    while end <= now {
        for (host, token) in &mut agents {
            let report = host.report(end, interval_ms);
            let valid = ingest::validate(report, end).unwrap();
            state
                .ingest_report(std::sync::Arc::new(valid), *token, end)
                .await
                .unwrap();
            reports += 1;
        }
        end += interval_ms;
    }
    state.fleet.caught_up().await;
    let filled_s = started.elapsed().as_secs_f64();
    let before = db.stored_counts().await.unwrap();
    let before_mib = size_mib(&db, &path).await;

    let started = Instant::now();
    let outcome = retention::run(&state, Retention::default(), now)
        .await
        .unwrap();
    let rolled_s = started.elapsed().as_secs_f64();
    let after = db.stored_counts().await.unwrap();
    let after_mib = size_mib(&db, &path).await;

    let samples_per_guest_day = 86_400_000 / interval_ms;
    println!(
        "tickscope storage: {guests} simulated guests on {hosts} hosts, a report every {} s for {days} days ({reports} reports, {} samples; stored in {filled_s:.0} s)",
        interval_ms / 1000,
        before.samples
    );
    println!(
        "  before the retention:  {before_mib:8.1} MiB   ({} samples, {} reports)",
        before.samples, before.reports
    );
    println!(
        "  after it:              {after_mib:8.1} MiB   ({} samples, {} five-minute rollups, {} hourly ones, {} reports; took {rolled_s:.1} s, {} windows)",
        after.samples, after.rollups_5m, after.rollups_1h, after.reports, outcome.windows
    );
    println!("  ratio after / before:  {:.3}", after_mib / before_mib);
    let guest_days = (guests * days) as f64;
    let raw_bytes_per_sample = before_mib * 1_048_576.0 / before.samples as f64;
    println!(
        "  raw history: {raw_bytes_per_sample:.0} bytes per sample (with its share of reports and indexes), {:.0} KiB per guest per day at this interval, {:.0} KiB at 10 s",
        raw_bytes_per_sample * samples_per_guest_day as f64 / 1024.0,
        raw_bytes_per_sample * 8640.0 / 1024.0
    );
    println!(
        "  kept for {days} days with the default retention: {:.1} KiB per guest per day on average",
        after_mib * 1024.0 / guest_days
    );
    db.close().await;
}
