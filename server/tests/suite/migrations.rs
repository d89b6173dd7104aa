//! Migrations that rebuild a table, run on a database that has rows in it.

use std::borrow::Cow;

use sqlx::migrate::Migrator;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Row, SqlitePool};

use tickscope_server::db::{Db, MIGRATOR};

/// A connection to a database file, with foreign keys on as the server has them.
async fn connect(path: &std::path::Path) -> SqlitePool {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .foreign_keys(true);
    SqlitePool::connect_with(options).await.unwrap()
}

/// A database file brought up to `version`, no further.
async fn database_at(path: &std::path::Path, version: i64) -> SqlitePool {
    let pool = connect(path).await;
    let migrations: Vec<_> = MIGRATOR
        .iter()
        .filter(|m| m.version <= version)
        .cloned()
        .collect();
    let up_to = Migrator {
        migrations: Cow::Owned(migrations),
        ..Migrator::DEFAULT
    };
    up_to.run(&pool).await.unwrap();
    pool
}

async fn run(pool: &SqlitePool, sql: &str) {
    sqlx::raw_sql(sql).execute(pool).await.unwrap();
}

#[tokio::test]
async fn reports_are_keyed_per_host_after_0010_and_keep_their_rows_and_samples() {
    if crate::common::database::sqlite_only("SQLite migration 0010") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let pool = database_at(&path, 9).await;
    // Two hosts, three reports with their samples, as 0009 left them.
    run(
        &pool,
        "INSERT INTO tokens (id, name, role, sha256_hex, host_name, created_ms)
             VALUES (1, 'a', 'agent', 'aa', 'hv1', 0), (2, 'b', 'agent', 'bb', 'hv2', 0);
         INSERT INTO hosts (id, name, cpus, kernel, agent_version, first_seen_ms, last_report_ms)
             VALUES (1, 'hv1', 4, '6.1', '0.1', 0, 0), (2, 'hv2', 4, '6.1', '0.1', 0, 0);
         INSERT INTO guests (id, host_id, hypervisor, identity, name, vcpus, pid, first_seen_ms,
                             last_seen_ms)
             VALUES (1, 1, 'qemu', 'name:web', 'web', 1, 42, 0, 0),
                    (2, 2, 'qemu', 'name:db', 'db', 2, 43, 0, 0);
         INSERT INTO reports (id, host_id, token_id, agent_id, run_id, seq, start_ms, end_ms,
                              length_ms, received_ms)
             VALUES (10, 1, 1, 'm1', 'r1', 1, 0, 10000, 10000.0, 10000),
                    (11, 1, 1, 'm1', 'r1', 2, 10000, 20000, 10000.0, 20000),
                    (12, 2, 2, 'm2', 'r2', 1, 0, 10000, 10000.0, 10000);
         INSERT INTO samples (guest_id, report_id, end_ms, received_ms, length_ms, vcpus,
                              host_cpu_s, vcpu_wakeups, wakeups_source)
             VALUES (1, 10, 10000, 10000, 10000.0, 1, 0.5, 100, 'vcpu_threads'),
                    (1, 11, 20000, 20000, 10000.0, 1, 0.6, 110, 'vcpu_threads'),
                    (2, 12, 10000, 10000, 10000.0, 2, 0.7, 120, 'vcpu_threads');",
    )
    .await;
    let before: Vec<(i64, i64, String, i64)> =
        sqlx::query_as("SELECT id, host_id, run_id, seq FROM reports ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    pool.close().await;

    // The server opens the file: 0010 runs, in sqlx's transaction, with foreign keys on.
    let db = Db::open(&path).await.unwrap();
    db.close().await;
    let pool = connect(&path).await;
    let after: Vec<(i64, i64, String, i64)> =
        sqlx::query_as("SELECT id, host_id, run_id, seq FROM reports ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(after, before, "the reports kept their ids and values");
    let samples: Vec<(i64,)> = sqlx::query_as("SELECT report_id FROM samples ORDER BY report_id")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(samples, [(10,), (11,), (12,)]);
    let violations = sqlx::query("PRAGMA foreign_key_check")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(violations.is_empty(), "samples refer to reports that exist");

    // The old table's indexes are back, the rebuild's own are gone.
    let indexes: Vec<String> = sqlx::query(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('reports', 'samples')
         ORDER BY name",
    )
    .fetch_all(&pool)
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect();
    assert_eq!(
        indexes,
        [
            "reports_received",
            "samples_guest_received",
            "sqlite_autoindex_reports_1"
        ]
    );
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE name LIKE '%0010%'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert!(tables.is_empty(), "{tables:?}");

    // Another host may use the same (agent, run, seq); the same host may not.
    run(
        &pool,
        "INSERT INTO reports (host_id, token_id, agent_id, run_id, seq, start_ms, end_ms,
                              length_ms, received_ms)
             VALUES (2, 2, 'm1', 'r1', 1, 0, 10000, 10000.0, 10000)",
    )
    .await;
    let repeat = sqlx::raw_sql(
        "INSERT INTO reports (host_id, token_id, agent_id, run_id, seq, start_ms, end_ms,
                              length_ms, received_ms)
             VALUES (1, 1, 'm1', 'r1', 1, 0, 10000, 10000.0, 10000)",
    )
    .execute(&pool)
    .await;
    assert!(
        repeat.is_err_and(|e| e.to_string().contains("UNIQUE")),
        "the same host's key stays unique"
    );
    // Foreign keys still hold on the new table.
    let orphan = sqlx::raw_sql("DELETE FROM reports WHERE id = 10")
        .execute(&pool)
        .await;
    assert!(orphan.is_err(), "a report samples refer to cannot go");
}
