//! SQLite-only checks of how rows read back.

use tickscope_wire::Hypervisor;

use super::store::SqliteDb;
use crate::db::guests::GuestScope;
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
