//! Guests, their samples and idle readings for the analysis windows, in PostgreSQL: rows are
//! decoded by hand where they hold a `u32` (vCPUs), which sqlx does not decode from PostgreSQL's
//! BIGINT; the planner orders the joins itself (no `CROSS JOIN` to pin them, as on SQLite); text
//! is ordered byte-wise (`COLLATE "C"`), as SQLite orders it, whatever the database's collation.

use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row};

use super::store::PgDb;
use crate::db::error::StoreResult;
use crate::db::guests::{
    GONE_AFTER_MISSED_REPORTS, GuestRow, GuestScope, IdleReading, IntervalRow, SampleRow,
};
use crate::domain::{GuestId, HostId, HypervisorName};

/// The condition on `g` (guests) for `scope`, its parameters numbered from `$first`, and its
/// binds, in order. A free function rather than a method of [`GuestScope`]: SQLite's backend has
/// the method, and each backend numbers its parameters its own way.
pub(super) fn scope_condition(scope: &GuestScope, first: usize) -> (String, Vec<i64>) {
    let (a, b, c, d) = (first, first + 1, first + 2, first + 3);
    let gone = GONE_AFTER_MISSED_REPORTS;
    // A guest still on its host.
    let present = |n: usize| {
        format!(
            "g.last_report_n > (SELECT h0.reports_stored FROM hosts h0 WHERE h0.id = g.host_id) \
             - ${n}"
        )
    };
    match *scope {
        GuestScope::Active { since_ms } => (
            format!("g.last_seen_ms >= ${a} AND {}", present(b)),
            vec![since_ms, gone],
        ),
        GuestScope::Host {
            host_id,
            guest_id: Some(guest_id),
            active_since_ms,
        } => (
            format!(
                "g.host_id = ${a} AND ((g.last_seen_ms >= ${b} AND {}) OR g.id = ${d})",
                present(c)
            ),
            vec![host_id.0, active_since_ms, gone, guest_id.0],
        ),
        GuestScope::Host {
            host_id,
            guest_id: None,
            active_since_ms,
        } => (
            format!(
                "g.host_id = ${a} AND g.last_seen_ms >= ${b} AND {}",
                present(c)
            ),
            vec![host_id.0, active_since_ms, gone],
        ),
    }
}

/// The samples of each guest's window: `$1` is the window's length, the condition's parameters
/// start at `$2` (`scope_condition(scope, 2)`). Each guest's window is looked up in
/// `samples_guest_received` by a lateral subquery that `OFFSET 0` keeps from being flattened:
/// as a plain join, on 30 days of one-minute samples of 40 guests (1.7 million rows), the
/// planner chose a hash join over every sample (273 ms) instead of a lookup per guest (0.9 ms).
pub(super) fn window_sql(condition: &str) -> String {
    format!(
        "SELECT s.guest_id, s.received_ms, s.length_ms, s.vcpus, s.host_cpu_s, s.vcpu_wakeups,
                s.wakeups_source = 'vcpu_threads' AS from_vcpu_threads
         FROM guests g
         CROSS JOIN LATERAL (
             SELECT * FROM samples s
             WHERE s.guest_id = g.id AND s.received_ms > g.last_seen_ms - $1
             OFFSET 0
         ) s
         WHERE {condition}
         ORDER BY g.id, s.received_ms, s.id"
    )
}

/// A `u32` column, stored as BIGINT: sqlx decodes no unsigned integer from PostgreSQL. A value
/// out of range fails as SQLite's decoding of it fails, as the column's decode error.
pub(super) fn get_u32(row: &PgRow, column: &str) -> Result<u32, sqlx::Error> {
    let value: i64 = row.try_get(column)?;
    u32::try_from(value).map_err(|e| sqlx::Error::ColumnDecode {
        index: format!("{column:?}"),
        source: Box::new(e),
    })
}

/// A [`GuestRow`] from the columns `guests_in` selects.
pub(super) fn guest_row(row: PgRow) -> Result<GuestRow, sqlx::Error> {
    Ok(GuestRow {
        id: row.try_get("id")?,
        identity: row.try_get("identity")?,
        host_id: row.try_get("host_id")?,
        host_name: row.try_get("host_name")?,
        host_halt_poll_ns: row.try_get("host_halt_poll_ns")?,
        hypervisor: row.try_get::<HypervisorName, _>("hypervisor")?.0,
        name: row.try_get("name")?,
        uuid: row.try_get("uuid")?,
        management: row.try_get("management")?,
        vcpus: get_u32(&row, "vcpus")?,
        pid: row.try_get("pid")?,
        boot_args: row.try_get("boot_args")?,
        uses_kvm: row.try_get("uses_kvm")?,
        cpu_source: row.try_get("cpu_source")?,
        last_seen_ms: row.try_get("last_seen_ms")?,
        process_since_ms: row.try_get("process_since_ms")?,
        last_report_n: row.try_get("last_report_n")?,
        host_reports: row.try_get("host_reports")?,
    })
}

/// An [`IntervalRow`] from `guest_id, received_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups,
/// from_vcpu_threads`.
pub(super) fn interval_row(row: PgRow) -> Result<IntervalRow, sqlx::Error> {
    Ok(IntervalRow {
        guest_id: row.try_get("guest_id")?,
        received_ms: row.try_get("received_ms")?,
        length_ms: row.try_get("length_ms")?,
        vcpus: get_u32(&row, "vcpus")?,
        host_cpu_s: row.try_get("host_cpu_s")?,
        vcpu_wakeups: row.try_get("vcpu_wakeups")?,
        from_vcpu_threads: row.try_get("from_vcpu_threads")?,
    })
}

fn sample_row(row: PgRow) -> Result<SampleRow, sqlx::Error> {
    Ok(SampleRow {
        end_ms: row.try_get("end_ms")?,
        length_ms: row.try_get("length_ms")?,
        vcpus: get_u32(&row, "vcpus")?,
        host_cpu_s: row.try_get("host_cpu_s")?,
        vcpu_wakeups: row.try_get("vcpu_wakeups")?,
        wakeups_source: row.try_get("wakeups_source")?,
    })
}

impl PgDb {
    /// The guests in `scope`.
    pub async fn guests_in(&self, scope: GuestScope) -> StoreResult<Vec<GuestRow>> {
        let (condition, binds) = scope_condition(&scope, 1);
        let sql = format!(
            "SELECT g.id, g.identity, g.host_id, h.name AS host_name,
                    h.kvm_halt_poll_ns AS host_halt_poll_ns, g.hypervisor, g.name, g.uuid,
                    g.management, g.vcpus, g.pid, g.boot_args, g.uses_kvm, g.cpu_source,
                    g.last_seen_ms, g.vm_process_since_ms AS process_since_ms, g.last_report_n,
                    h.reports_stored AS host_reports
             FROM guests g JOIN hosts h ON h.id = g.host_id
             WHERE {condition}"
        );
        let mut query = sqlx::query::<Postgres>(&sql);
        for bind in binds {
            query = query.bind(bind);
        }
        Ok(query.try_map(guest_row).fetch_all(&self.pool).await?)
    }

    /// The samples of the guests in `scope` received within `window_ms` before each guest's
    /// newest one, by guest, oldest first. Both ends are on the server's clock, so a host whose
    /// clock is off, or jumps, still gets a full window.
    pub async fn window_intervals(
        &self,
        scope: GuestScope,
        window_ms: i64,
    ) -> StoreResult<Vec<IntervalRow>> {
        let (condition, binds) = scope_condition(&scope, 2);
        let sql = window_sql(&condition);
        let mut query = sqlx::query::<Postgres>(&sql).bind(window_ms);
        for bind in binds {
            query = query.bind(bind);
        }
        Ok(query.try_map(interval_row).fetch_all(&self.pool).await?)
    }

    /// The idle readings of the guests in `scope` that can cover samples of their windows (those
    /// received since `reach_ms` before the window began), by guest, oldest first.
    pub async fn window_idle_readings(
        &self,
        scope: GuestScope,
        window_ms: i64,
        reach_ms: i64,
    ) -> StoreResult<Vec<IdleReading>> {
        let (condition, binds) = scope_condition(&scope, 2);
        let sql = format!(
            "SELECT r.guest_id, r.source, r.received_ms, r.measured_ms, r.idle_fraction
             FROM guests g
             CROSS JOIN LATERAL (
                 SELECT * FROM guest_idle_readings r
                 WHERE r.guest_id = g.id AND r.received_ms > g.last_seen_ms - $1
                 OFFSET 0
             ) r
             WHERE {condition}
             ORDER BY g.id, r.received_ms, r.source COLLATE \"C\""
        );
        let mut query = sqlx::query_as(&sql).bind(window_ms + reach_ms);
        for bind in binds {
            query = query.bind(bind);
        }
        Ok(query.fetch_all(&self.pool).await?)
    }

    pub async fn guest_host_id(&self, guest_id: GuestId) -> StoreResult<Option<HostId>> {
        Ok(
            sqlx::query_scalar("SELECT host_id FROM guests WHERE id = $1")
                .bind(guest_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// A guest's newest samples, newest stored first. Ordered by `received_ms` first so that
    /// `samples_guest_received` gives the order: by `id` alone, once the table is analysed,
    /// PostgreSQL may walk the whole primary key backwards looking for the guest's rows.
    pub async fn recent_samples(
        &self,
        guest_id: GuestId,
        limit: i64,
    ) -> StoreResult<Vec<SampleRow>> {
        Ok(sqlx::query(
            "SELECT end_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups, wakeups_source
             FROM samples WHERE guest_id = $1 ORDER BY received_ms DESC, id DESC LIMIT $2",
        )
        .bind(guest_id)
        .bind(limit)
        .try_map(sample_row)
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
        let samples = sqlx::query(
            "SELECT guest_id, received_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups,
                    wakeups_source = 'vcpu_threads' AS from_vcpu_threads
             FROM samples WHERE guest_id = $1 AND received_ms >= $2 AND received_ms < $3
             ORDER BY received_ms, id",
        )
        .bind(guest_id)
        .bind(from_ms)
        .bind(to_ms)
        .try_map(interval_row)
        .fetch_all(&self.pool)
        .await?;
        let readings = sqlx::query_as(
            "SELECT guest_id, source, received_ms, measured_ms, idle_fraction
             FROM guest_idle_readings WHERE guest_id = $1 AND received_ms >= $2
             ORDER BY received_ms, source COLLATE \"C\"",
        )
        .bind(guest_id)
        .bind(from_ms - reach_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok((samples, readings))
    }
}
