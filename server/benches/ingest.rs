//! How fast reports are taken in: run with `cargo bench -p tickscope-server --bench ingest`.
//!
//! AGENTS simulated hosts (tickscope_agent::simulate, GUESTS guests each), each with its own
//! agent token, post ROUNDS reports each, all at once, through `POST /api/v1/reports` on the
//! router in-process: JSON parsing, validation, the transaction, and the hosts' analyses (timed
//! until they have all caught up, since they run after the answers). The baseline, in the same run on the same database and pool, inserts the same sample rows with
//! nothing else: the same statement per row, one transaction per report, the same concurrency.
//! A second baseline, "bulk insert", is what the storage engine itself can do: the same rows in
//! one transaction of multi-row `INSERT`s on a fresh database file with the same schema and
//! PRAGMAs, through one connection (no pool, no per-report transactions, no concurrency).
//!
//! Environment: BENCH_AGENTS (default 50), BENCH_GUESTS (20), BENCH_ROUNDS (30).

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Connection, QueryBuilder, Sqlite, SqliteConnection};
use tower::ServiceExt;

use tickscope_agent::simulate::{SimulatedHost, random_fleet};
use tickscope_server::app;
use tickscope_server::auth;
use tickscope_server::db::{Db, RawSample};
use tickscope_server::domain::ReportId;
use tickscope_server::state::{AppState, Options};
use tickscope_wire::Report;

const INTERVAL_MS: i64 = 10_000;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let agents = env_or("BENCH_AGENTS", 50);
    let guests = env_or("BENCH_GUESTS", 20);
    let rounds = env_or("BENCH_ROUNDS", 30);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&dir.path().join("ingest.db")).await.unwrap();
    let options = Options {
        // The bench measures ingest, not the rate limit in front of it.
        ingest_per_second: std::num::NonZeroU32::new(1_000_000).unwrap(),
        ingest_burst: std::num::NonZeroU32::new(1_000_000).unwrap(),
        ..Options::default()
    };
    let state = AppState::new(db.clone(), options).await.unwrap();
    let router = app::router(state.clone());

    // The reports, made up front so that neither side pays for the model.
    let now = tickscope_server::clock::now_ms();
    let start = now - rounds as i64 * INTERVAL_MS;
    let fleet = random_fleet(
        1,
        "bench-hv",
        agents,
        guests,
        start,
        rounds as i64 * INTERVAL_MS,
    );
    let mut work = Vec::new();
    for (i, spec) in fleet.into_iter().enumerate() {
        let name = spec.name.clone();
        let token = auth::new_token().unwrap();
        db.insert_token(
            &name,
            tickscope_server::domain::TokenRole::Agent,
            &auth::token_hash(&token),
            Some(&name),
            now,
        )
        .await
        .unwrap();
        let mut host = SimulatedHost::new(spec, i as u64, "bench");
        let reports: Vec<Report> = (1..=rounds as i64)
            .map(|n| host.report(start + n * INTERVAL_MS, INTERVAL_MS))
            .collect();
        work.push((token, reports));
    }
    let samples: usize = work
        .iter()
        .flat_map(|(_, r)| r)
        .map(|r| r.guests.len())
        .sum();

    // Ours: every agent posts its reports one after another, all agents at once.
    let started = Instant::now();
    let tasks: Vec<_> = work
        .iter()
        .map(|(token, reports)| {
            let router = router.clone();
            let bodies: Vec<String> = reports
                .iter()
                .map(|r| serde_json::to_string(r).unwrap())
                .collect();
            let authorization = format!("Bearer {token}");
            tokio::spawn(async move {
                for body in bodies {
                    let request = Request::builder()
                        .method(Method::POST)
                        .uri("/api/v1/reports")
                        .header(header::AUTHORIZATION, &authorization)
                        .header(header::CONTENT_TYPE, "application/json")
                        .body(Body::from(body))
                        .unwrap();
                    let response = router.clone().oneshot(request).await.unwrap();
                    assert_eq!(response.status(), StatusCode::OK);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    // Until every host's analysis caught up with what was stored: the analysis runs after the
    // answers, and is part of what ingest costs.
    state.fleet.caught_up().await;
    let ours = started.elapsed().as_secs_f64();

    // The baseline: the same rows, as bare inserts, one transaction per report, starting from an
    // empty write-ahead log as ours did.
    db.checkpoint().await.unwrap();
    let guest_ids = Arc::new(db.guest_ids_by_name().await.unwrap());
    let report_id = db.any_report_id().await.unwrap();
    // Each agent's reports' rows, for both baselines.
    let rows: Vec<Vec<Vec<RawSample>>> = work
        .iter()
        .map(|(_, reports)| {
            reports
                .iter()
                .map(|r| {
                    r.guests
                        .iter()
                        .map(|g| RawSample {
                            guest_id: guest_ids[&(r.host.name.clone(), g.name.clone())],
                            report_id,
                            end_ms: r.interval.end_ms,
                            received_ms: r.interval.end_ms,
                            length_ms: r.interval.length_ns as f64 / 1e6,
                            vcpus: g.vcpus,
                            host_cpu_s: g.host_cpu_seconds,
                            vcpu_wakeups: g.vcpu_wakeups as i64,
                            wakeups_source: g.wakeups_source.as_str(),
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let started = Instant::now();
    let tasks: Vec<_> = rows
        .iter()
        .map(|agent_rows| {
            let db = db.clone();
            let agent_rows = agent_rows.clone();
            tokio::spawn(async move {
                for report in agent_rows {
                    db.insert_raw_samples(&report).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let raw = started.elapsed().as_secs_f64();

    // The storage engine's own pace: every row in one transaction on a fresh file.
    let bulk_path = dir.path().join("bulk.db");
    let all_rows: Vec<RawSample> = rows.into_iter().flatten().flatten().collect();
    let bulk = bulk_insert(
        &dir.path().join("ingest.db"),
        &bulk_path,
        report_id,
        &all_rows,
    )
    .await;

    let reports = agents * rounds;
    println!(
        "tickscope ingest: {agents} agents at once, {guests} guests each, {rounds} reports each ({reports} reports, {samples} samples)"
    );
    println!(
        "  POST /api/v1/reports (parse, validate, store, analyse) {:>9.0} samples/s  {:>7.0} reports/s",
        samples as f64 / ours,
        reports as f64 / ours
    );
    println!(
        "  baseline: bare inserts of the same rows             {:>9.0} samples/s  {:>7.0} reports/s",
        samples as f64 / raw,
        reports as f64 / raw
    );
    println!("  ratio ours / baseline: {:.2}", raw / ours);
    println!(
        "  baseline: bulk insert, one transaction, a fresh file  {:>9.0} samples/s  {:>7.0} reports/s",
        samples as f64 / bulk,
        reports as f64 / bulk
    );
    println!("  ratio ours / bulk insert: {:.3}", bulk / ours);
    db.close().await;
}

/// Opens `path` as the server's `Db::open` does (server/src/db/sqlite/store.rs: WAL,
/// synchronous FULL, a 5 s busy timeout, and sqlx's default of enforcing foreign keys).
async fn connect(path: &Path) -> SqliteConnection {
    let options = SqliteConnectOptions::from_str("sqlite:")
        .unwrap()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(5));
    SqliteConnection::connect_with(&options).await.unwrap()
}

/// Seconds to insert `rows` into a fresh database at `fresh`, in one transaction of multi-row
/// `INSERT`s, through one connection. The file gets the server's schema (its migrations) and
/// copies of the tokens, hosts and guests of `source` and of the one report the rows point to,
/// so that the foreign keys are checked as in the server's own inserts; the clock runs from
/// `BEGIN` to the end of `COMMIT` (its sync included).
async fn bulk_insert(source: &Path, fresh: &Path, report_id: ReportId, rows: &[RawSample]) -> f64 {
    // The schema, as the server makes it.
    Db::open(fresh).await.unwrap().close().await;
    let mut conn = connect(fresh).await;
    sqlx::query("ATTACH DATABASE ? AS source")
        .bind(source.to_str().unwrap())
        .execute(&mut conn)
        .await
        .unwrap();
    for copy in [
        "INSERT INTO main.tokens SELECT * FROM source.tokens",
        "INSERT INTO main.hosts SELECT * FROM source.hosts",
        "INSERT INTO main.guests SELECT * FROM source.guests",
    ] {
        sqlx::query(copy).execute(&mut conn).await.unwrap();
    }
    sqlx::query("INSERT INTO main.reports SELECT * FROM source.reports WHERE id = ?")
        .bind(report_id)
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("DETACH DATABASE source")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
        .unwrap();

    // SQLite allows 32,766 bound values per statement; 9 a row.
    const ROWS_PER_STATEMENT: usize = 3_000;
    let started = Instant::now();
    let mut tx = conn.begin().await.unwrap();
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut insert: QueryBuilder<Sqlite> = QueryBuilder::new(
            "INSERT INTO samples (guest_id, report_id, end_ms, received_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups, wakeups_source) ",
        );
        insert.push_values(chunk, |mut b, row| {
            b.push_bind(row.guest_id)
                .push_bind(row.report_id)
                .push_bind(row.end_ms)
                .push_bind(row.received_ms)
                .push_bind(row.length_ms)
                .push_bind(row.vcpus)
                .push_bind(row.host_cpu_s)
                .push_bind(row.vcpu_wakeups)
                .push_bind(row.wakeups_source);
        });
        insert.build().execute(&mut *tx).await.unwrap();
    }
    tx.commit().await.unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM samples")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        stored as usize,
        rows.len(),
        "every row is in the fresh file"
    );
    conn.close().await.unwrap();
    seconds
}
