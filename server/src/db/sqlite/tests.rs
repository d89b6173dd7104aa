//! SQLite-only checks of how rows read back.

use tickscope_wire::Hypervisor;

use super::store::SqliteDb;
use crate::db::guests::{GuestScope, IntervalRow, interval_columns};
use crate::domain::GuestId;

/// A database with one host and one guest whose stored hypervisor is `name`.
async fn db_with_guest_of(dir: &tempfile::TempDir, name: &str) -> SqliteDb {
    let db = SqliteDb::open(&dir.path().join("t.db")).await.unwrap();
    sqlx::query(
        "INSERT INTO hosts (id, name, cpus, kernel, agent_version, first_seen_ms,
            last_report_ms) VALUES (1, 'hv1', 4, '6.1', '0.1', 0, 0)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO guests (id, host_id, hypervisor, identity, name, vcpus, pid,
            first_seen_ms, last_seen_ms) VALUES (7, 1, ?, 'web', 'web', 2, 42, 0, 1000)",
    )
    .bind(name)
    .execute(&db.pool)
    .await
    .unwrap();
    db
}

#[tokio::test]
async fn a_stored_hypervisor_reads_back_as_its_family_and_an_unknown_name_as_other() {
    let everyone = GuestScope::Active { since_ms: 0 };
    for (stored, family) in [
        ("qemu", Hypervisor::Qemu),
        ("cloud_hypervisor", Hypervisor::CloudHypervisor),
        ("other", Hypervisor::Other),
        // A newer server's family after a downgrade: the row still reads (the log says it).
        ("xen", Hypervisor::Other),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_guest_of(&dir, stored).await;
        let rows = db.guests_in(everyone).await.unwrap();
        assert_eq!(rows.len(), 1, "{stored}");
        assert_eq!(rows[0].hypervisor, family, "{stored}");
        assert_eq!(rows[0].id, GuestId(7));
        db.close().await;
    }
}

/// Doubles across the range, from their bits: every mantissa, exponents from 2^-1000 to 2^1000.
fn awkward_doubles(n: usize) -> Vec<f64> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let exponent = 1023 - 1000 + state % 2001;
            f64::from_bits((exponent << 52) | (state >> 12))
        })
        .collect()
}

#[tokio::test]
async fn packed_samples_read_back_as_the_very_doubles_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_guest_of(&dir, "qemu").await;
    for statement in [
        "INSERT INTO tokens (id, name, role, sha256_hex, created_ms) VALUES (1, 'a', 'agent', 'x', 0)",
        "INSERT INTO reports (id, host_id, token_id, agent_id, run_id, seq, start_ms, end_ms,
            length_ms, received_ms) VALUES (1, 1, 1, 'a', 'r', 1, 0, 0, 10000, 0)",
    ] {
        sqlx::query(statement).execute(&db.pool).await.unwrap();
    }
    let doubles = awkward_doubles(6 * 400);
    for (i, six) in doubles.chunks(6).enumerate() {
        // Every fourth sample without its parts, as an agent that cannot split its CPU sends.
        let part = |k: usize| (i % 4 != 0).then_some(six[k]);
        sqlx::query(
            "INSERT INTO samples (guest_id, report_id, end_ms, received_ms, length_ms, vcpus,
                host_cpu_s, vcpu_wakeups, wakeups_source, vcpu_cpu_s, iothread_cpu_s,
                vhost_cpu_s, halt_poll_s)
             VALUES (7, 1, $1, $1, $2, 2, $3, $4, 'vcpu_threads', $5, $6, $7, $8)",
        )
        // Two samples of each millisecond: the order of equal times is the rows' own.
        .bind(i as i64 / 2)
        .bind(six[0])
        .bind(six[1])
        .bind(i as i64 * 1_000_003)
        .bind(part(2))
        .bind(part(3))
        .bind(part(4))
        .bind(part(5))
        .execute(&db.pool)
        .await
        .unwrap();
    }
    sqlx::query("UPDATE guests SET last_seen_ms = 199")
        .execute(&db.pool)
        .await
        .unwrap();
    let plain: Vec<IntervalRow> = sqlx::query_as(&format!(
        "SELECT {} FROM samples s ORDER BY s.received_ms, s.id",
        interval_columns("s")
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(plain.len(), 400);
    let window = db
        .window_intervals(GuestScope::Active { since_ms: 0 }, 1_000)
        .await
        .unwrap();
    assert!(
        window == plain,
        "the window's samples differ from the rows stored"
    );
    let history = db
        .histories_between(&[GuestId(7)], 0, 1_000, 0)
        .await
        .unwrap();
    assert!(
        history.samples == plain,
        "the history's samples differ from the rows stored"
    );
    db.close().await;
}
