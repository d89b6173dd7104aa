//! SQLite-only checks of how rows read back.

use tickscope_wire::Hypervisor;

use super::store::SqliteDb;
use crate::db::guests::{GuestScope, IntervalRow, interval_columns};
use crate::domain::{GuestId, HostId};

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

/// Doubles across the range, from their bits: every mantissa, either sign, exponents from
/// 2^-1000 to 2^1000.
fn awkward_doubles(n: usize) -> Vec<f64> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let exponent = 1023 - 1000 + state % 2001;
            let sign = (state >> 11) & 1;
            f64::from_bits((sign << 63) | (exponent << 52) | (state >> 12))
        })
        .collect()
}

#[tokio::test]
async fn packed_samples_read_back_as_the_very_doubles_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_guest_of(&dir, "qemu").await;
    for statement in [
        // A second guest, of an even id (7 is odd): the window is read in two halves by id.
        "INSERT INTO guests (id, host_id, hypervisor, identity, name, vcpus, pid,
            first_seen_ms, last_seen_ms) VALUES (8, 1, 'qemu', 'db', 'db', 2, 43, 0, 1000)",
        "INSERT INTO tokens (id, name, role, sha256_hex, created_ms)
            VALUES (1, 'a', 'agent', 'x', 0)",
        "INSERT INTO reports (id, host_id, token_id, agent_id, run_id, seq, start_ms, end_ms,
            length_ms, received_ms) VALUES (1, 1, 1, 'a', 'r', 1, 0, 0, 10000, 0)",
    ] {
        sqlx::query(statement).execute(&db.pool).await.unwrap();
    }
    let doubles = awkward_doubles(6 * 400);
    for (i, six) in doubles.chunks(6).enumerate() {
        // Each part missing now and then, as from an agent that cannot split its CPU.
        let part = |k: usize| (i % (k + 1) != 0).then_some(six[k]);
        sqlx::query(
            "INSERT INTO samples (guest_id, report_id, end_ms, received_ms, length_ms, vcpus,
                host_cpu_s, vcpu_wakeups, wakeups_source, vcpu_cpu_s, iothread_cpu_s,
                vhost_cpu_s, halt_poll_s)
             VALUES ($1, 1, $2, $2, $3, 2, $4, $5, 'vcpu_threads', $6, $7, $8, $9)",
        )
        // The guests' samples interleaved, two of each guest in each millisecond (the order
        // of equal times is the rows' own).
        .bind(7 + (i as i64 / 2) % 2)
        .bind(i as i64 / 4)
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
    // Guest 7's window is what it received after 39 ms, 8's after 19 ms; since 90 ms only 7
    // is active.
    sqlx::query("UPDATE guests SET last_seen_ms = 99 - (id - 7) * 20")
        .execute(&db.pool)
        .await
        .unwrap();
    let window_ms = 60;
    let plain: Vec<IntervalRow> = sqlx::query_as(&format!(
        "SELECT {} FROM samples s JOIN guests g ON g.id = s.guest_id
         WHERE s.received_ms > g.last_seen_ms - {window_ms}
         ORDER BY s.guest_id, s.received_ms, s.id",
        interval_columns("s")
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let of = |guest: i64| -> Vec<IntervalRow> {
        let guest = GuestId(guest);
        plain
            .iter()
            .filter(|s| s.guest_id == guest)
            .cloned()
            .collect()
    };
    assert_eq!((of(7).len(), of(8).len()), (120, 160));
    let by_guest = |mut samples: Vec<IntervalRow>| {
        // Each guest's samples stay together and in order; the guests come in any order.
        samples.sort_by_key(|s| s.guest_id);
        samples
    };
    let host = HostId(1);
    for (scope, expected) in [
        (GuestScope::Active { since_ms: 90 }, of(7)),
        (GuestScope::Active { since_ms: 0 }, plain.clone()),
        (
            GuestScope::Hosts {
                host_ids: std::slice::from_ref(&host),
                active_since_ms: 0,
            },
            plain.clone(),
        ),
        (
            GuestScope::Host {
                host_id: host,
                guest_id: GuestId(8),
                active_since_ms: 90,
            },
            plain.clone(),
        ),
    ] {
        let window = db.window_intervals(scope, window_ms).await.unwrap();
        assert!(
            by_guest(window) == expected,
            "{scope:?}: differs from the rows stored"
        );
    }
    let history = db
        .histories_between(&[GuestId(7), GuestId(8)], 0, 1_000, 0)
        .await
        .unwrap();
    let all: Vec<IntervalRow> = sqlx::query_as(&format!(
        "SELECT {} FROM samples s ORDER BY s.guest_id, s.received_ms, s.id",
        interval_columns("s")
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(all.len(), 400);
    assert!(
        history.samples == all,
        "the history's samples differ from the rows stored"
    );
    db.close().await;
}
