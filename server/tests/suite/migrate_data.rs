//! `tickscope-server migrate-data` moves an SQLite installation to PostgreSQL: the demo's
//! database copied by the real binary, then a server on each database answers the guest list
//! with the same fleet. Runs in the suite's PostgreSQL pass (it needs a PostgreSQL server).

use crate::common;

use std::process::Command;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use common::database::{TestDb, backend};
use tickscope_server::clock::ManualClock;
use tickscope_server::db::{BackendKind, Db};
use tickscope_server::domain::TokenRole;
use tickscope_server::state::{AppState, Options};
use tickscope_server::{app, auth, demo};

/// The guest list as a server on `db` answers it at `now_ms`.
async fn guest_list(db: Db, now_ms: i64, viewer: &str) -> Value {
    let options = Options {
        demo: true,
        ..Options::default()
    };
    let state = AppState::with_clock(db, options, Arc::new(ManualClock::new(now_ms)))
        .await
        .unwrap();
    let reply = app::router(state)
        .oneshot(
            Request::get("/api/v1/guests")
                .header("Authorization", format!("Bearer {viewer}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let body = reply.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

fn migrate(from: &std::path::Path, to: &TestDb) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
        .arg("migrate-data")
        .arg("--from")
        .arg(from)
        .arg("--to")
        .arg(to)
        .output()
        .unwrap()
}

#[test]
fn a_demo_installation_moves_to_postgresql_and_shows_the_same_fleet() {
    if backend() != BackendKind::Postgres {
        eprintln!("migrate-data needs a PostgreSQL server: run by the suite's PostgreSQL pass");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("demo.db");
    let now_ms = tickscope_server::clock::now_ms();
    let viewer = auth::new_token().unwrap();
    // Filled in a runtime of its own: dropping it stops the demo's reporting task, so the file
    // holds still while it is copied.
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let db = Db::open(&sqlite).await.unwrap();
        let state = AppState::with_clock(
            db.clone(),
            Options::default(),
            Arc::new(ManualClock::new(now_ms)),
        )
        .await
        .unwrap();
        demo::start(&state).await.unwrap();
        db.insert_token(
            "viewer",
            TokenRole::Viewer,
            &auth::token_hash(&viewer),
            None,
            now_ms,
        )
        .await
        .unwrap();
        db.close().await;
    });

    let target = TestDb::new_blocking(dir.path(), "unused");
    // A server started on the new database once, as an admin checking the URL would: its
    // schema's default rules and its start-up probe row are there, and are replaced.
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let db = target.open().await;
        db.probe_write(now_ms).await.unwrap();
        db.close().await;
    });
    let copied = migrate(&sqlite, &target);
    let stdout = String::from_utf8_lossy(&copied.stdout);
    assert!(
        copied.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&copied.stderr)
    );
    assert!(stdout.contains("copied and verified"), "{stdout}");
    let samples_line = stdout
        .lines()
        .find(|l| l.starts_with("samples "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let samples: u64 = samples_line
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(samples > 0, "{stdout}");

    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let before = guest_list(Db::open(&sqlite).await.unwrap(), now_ms, &viewer).await;
        let after = guest_list(target.open().await, now_ms, &viewer).await;
        assert_eq!(before["guests"].as_array().unwrap().len(), 19, "{before:#}");
        assert_eq!(before, after, "the fleet differs after the move");

        // New rows get ids after the copied ones.
        let moved = target.open().await;
        let highest = moved
            .tokens()
            .await
            .unwrap()
            .iter()
            .map(|t| t.id.0)
            .max()
            .unwrap();
        let new = moved
            .insert_token("after", TokenRole::Viewer, "00", None, now_ms)
            .await
            .unwrap();
        assert!(new.0 > highest, "{new:?} after {highest}");
    });

    // A database in use is never copied into.
    let again = migrate(&sqlite, &target);
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("already holds data"), "{stderr}");
}
