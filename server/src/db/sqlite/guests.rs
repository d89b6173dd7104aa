//! Guests, their samples and idle readings for the analysis windows, in SQLite.

use super::store::SqliteDb;
use crate::db::error::StoreResult;
use crate::db::guests::{
    GONE_AFTER_MISSED_REPORTS, GuestRow, GuestScope, IdleReading, IntervalRow, SampleRow,
};
use crate::domain::{GuestId, HostId};

/// A guest still on its host: `?` is [`GONE_AFTER_MISSED_REPORTS`].
const PRESENT: &str =
    "g.last_report_n > (SELECT h0.reports_stored FROM hosts h0 WHERE h0.id = g.host_id) - ?";

impl GuestScope {
    /// The condition on `g` (guests) and its binds, in order.
    pub(super) fn condition(&self) -> (String, Vec<i64>) {
        let gone = GONE_AFTER_MISSED_REPORTS;
        match *self {
            GuestScope::Active { since_ms } => (
                format!("g.last_seen_ms >= ? AND {PRESENT}"),
                vec![since_ms, gone],
            ),
            GuestScope::Host {
                host_id,
                guest_id: Some(guest_id),
                active_since_ms,
            } => (
                format!("g.host_id = ? AND ((g.last_seen_ms >= ? AND {PRESENT}) OR g.id = ?)"),
                vec![host_id.0, active_since_ms, gone, guest_id.0],
            ),
            GuestScope::Host {
                host_id,
                guest_id: None,
                active_since_ms,
            } => (
                format!("g.host_id = ? AND g.last_seen_ms >= ? AND {PRESENT}"),
                vec![host_id.0, active_since_ms, gone],
            ),
        }
    }
}

/// The samples of each guest's window. `CROSS JOIN` fixes the join order for SQLite: guests
/// outside, each one's window looked up in `samples_guest_received`. Left to itself, SQLite
/// scans the whole samples table through that index and looks each guest up, which reads every
/// sample ever stored.
pub(super) fn window_sql(condition: &str) -> String {
    format!(
        "SELECT s.guest_id, s.received_ms, s.length_ms, s.vcpus, s.host_cpu_s, s.vcpu_wakeups,
                s.wakeups_source = 'vcpu_threads' AS from_vcpu_threads
         FROM guests g
         CROSS JOIN samples s ON s.guest_id = g.id AND s.received_ms > g.last_seen_ms - ?
         WHERE {condition}
         ORDER BY g.id, s.received_ms, s.id"
    )
}

impl SqliteDb {
    /// The guests in `scope`.
    pub async fn guests_in(&self, scope: GuestScope) -> StoreResult<Vec<GuestRow>> {
        let (condition, binds) = scope.condition();
        let sql = format!(
            "SELECT g.id, g.identity, g.host_id, h.name AS host_name,
                    h.kvm_halt_poll_ns AS host_halt_poll_ns, g.hypervisor, g.name, g.uuid,
                    g.management, g.vcpus, g.pid, g.boot_args, g.uses_kvm, g.cpu_source,
                    g.last_seen_ms, g.vm_process_since_ms AS process_since_ms, g.last_report_n,
                    h.reports_stored AS host_reports
             FROM guests g JOIN hosts h ON h.id = g.host_id
             WHERE {condition}"
        );
        let mut query = sqlx::query_as(&sql);
        for bind in binds {
            query = query.bind(bind);
        }
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// The samples of the guests in `scope` received within `window_ms` before each guest's
    /// newest one, by guest, oldest first. Both ends are on the server's clock, so a host whose
    /// clock is off, or jumps, still gets a full window.
    pub async fn window_intervals(
        &self,
        scope: GuestScope,
        window_ms: i64,
    ) -> StoreResult<Vec<IntervalRow>> {
        let (condition, binds) = scope.condition();
        let sql = window_sql(&condition);
        let mut query = sqlx::query_as(&sql).bind(window_ms);
        for bind in binds {
            query = query.bind(bind);
        }
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// The idle readings of the guests in `scope` that can cover samples of their windows (those
    /// received since `reach_ms` before the window began), by guest, oldest first.
    pub async fn window_idle_readings(
        &self,
        scope: GuestScope,
        window_ms: i64,
        reach_ms: i64,
    ) -> StoreResult<Vec<IdleReading>> {
        let (condition, binds) = scope.condition();
        let sql = format!(
            "SELECT r.guest_id, r.source, r.received_ms, r.measured_ms, r.idle_fraction
             FROM guests g
             CROSS JOIN guest_idle_readings r ON r.guest_id = g.id
                  AND r.received_ms > g.last_seen_ms - ?
             WHERE {condition}
             ORDER BY g.id, r.received_ms, r.source"
        );
        let mut query = sqlx::query_as(&sql).bind(window_ms + reach_ms);
        for bind in binds {
            query = query.bind(bind);
        }
        Ok(query.fetch_all(&self.pool).await?)
    }

    pub async fn guest_host_id(&self, guest_id: GuestId) -> StoreResult<Option<HostId>> {
        Ok(
            sqlx::query_scalar("SELECT host_id FROM guests WHERE id = ?")
                .bind(guest_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// A guest's newest samples, newest stored first.
    pub async fn recent_samples(
        &self,
        guest_id: GuestId,
        limit: i64,
    ) -> StoreResult<Vec<SampleRow>> {
        Ok(sqlx::query_as(
            "SELECT end_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups, wakeups_source
             FROM samples WHERE guest_id = ? ORDER BY id DESC LIMIT ?",
        )
        .bind(guest_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A guest's samples received in [from_ms, to_ms), oldest first, and the idle readings
    /// that can cover them (received from `reach_ms` before `from_ms` on).
    pub async fn samples_between(
        &self,
        guest_id: GuestId,
        from_ms: i64,
        to_ms: i64,
        reach_ms: i64,
    ) -> StoreResult<(Vec<IntervalRow>, Vec<IdleReading>)> {
        let samples = sqlx::query_as(
            "SELECT guest_id, received_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups,
                    wakeups_source = 'vcpu_threads' AS from_vcpu_threads
             FROM samples WHERE guest_id = ? AND received_ms >= ? AND received_ms < ?
             ORDER BY received_ms, id",
        )
        .bind(guest_id)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?;
        let readings = sqlx::query_as(
            "SELECT guest_id, source, received_ms, measured_ms, idle_fraction
             FROM guest_idle_readings WHERE guest_id = ? AND received_ms >= ?
             ORDER BY received_ms, source",
        )
        .bind(guest_id)
        .bind(from_ms - reach_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok((samples, readings))
    }
}

#[cfg(test)]
mod tests {
    use tickscope_agent::wire::Hypervisor;

    use super::*;

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
}
