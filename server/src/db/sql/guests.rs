//! Guests, their samples and idle readings for the analysis windows.

use sqlx::Database;
use sqlx::query::QueryAs;

use super::dialect::{
    BYTEWISE, DB, IdList, Store, id_list, in_id_list, looked_up_for_each, recent_rows_of_each_guest,
};
use super::process_totals::totals_columns;
use crate::db::error::StoreResult;
use crate::db::guests::{
    GONE_AFTER_MISSED_REPORTS, GuestRow, GuestScope, IdleReading, IntervalRow, ReportedSample,
    SampleRow, interval_columns,
};
use crate::domain::{GuestId, HostId, ReportId};

/// A value a scope's condition binds: a number, or a list of ids as one parameter.
#[derive(Clone)]
pub(super) enum ScopeBind {
    Int(i64),
    Ids(IdList),
}

/// `query` with `binds` bound, in order.
pub(super) fn bind_scope<'q, O>(
    mut query: QueryAs<'q, DB, O, <DB as Database>::Arguments<'q>>,
    binds: Vec<ScopeBind>,
) -> QueryAs<'q, DB, O, <DB as Database>::Arguments<'q>> {
    for bind in binds {
        query = match bind {
            ScopeBind::Int(value) => query.bind(value),
            ScopeBind::Ids(ids) => query.bind(ids),
        };
    }
    query
}

/// The condition on `g` (guests) for `scope`, its parameters numbered from `$first`, and its
/// binds, in order.
pub(super) fn scope_condition(scope: &GuestScope<'_>, first: usize) -> (String, Vec<ScopeBind>) {
    use ScopeBind::Int;
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
            vec![Int(since_ms), Int(gone)],
        ),
        // Some hosts' guests are found by host; `+ 0` keeps the activity test off any index on
        // `last_seen_ms` (there was one, `guests_last_seen`, until migration 0021 / PostgreSQL
        // 0008): PostgreSQL's generic plan of this prepared statement, not knowing how recent
        // `$b` is, ANDed a bitmap of every active guest's entry (30,000 index entries for a
        // follower's read of six hosts: 4 ms instead of 1).
        GuestScope::Hosts {
            host_ids,
            active_since_ms,
        } => (
            format!(
                "{} AND g.last_seen_ms + 0 >= ${b} AND {}",
                in_id_list("g.host_id", a),
                present(c)
            ),
            vec![
                ScopeBind::Ids(id_list(host_ids.iter().map(|id| id.0))),
                Int(active_since_ms),
                Int(gone),
            ],
        ),
        GuestScope::Host {
            host_id,
            guest_id,
            active_since_ms,
        } => (
            format!(
                "g.host_id = ${a} AND ((g.last_seen_ms >= ${b} AND {}) OR g.id = ${d})",
                present(c)
            ),
            vec![
                Int(host_id.0),
                Int(active_since_ms),
                Int(gone),
                Int(guest_id.0),
            ],
        ),
    }
}

impl Store {
    pub async fn guests_in(&self, scope: GuestScope<'_>) -> StoreResult<Vec<GuestRow>> {
        let (condition, binds) = scope_condition(&scope, 1);
        let sql = format!(
            "SELECT g.id, g.identity, g.host_id, h.name AS host_name,
                    h.kvm_halt_poll_ns AS host_halt_poll_ns, g.hypervisor, g.name, g.uuid,
                    g.management, g.vcpus, g.pid, g.boot_args, g.uses_kvm, g.cpu_source,
                    g.hyperv, g.hpet, g.os_hint, g.platform,
                    g.last_seen_ms, g.vm_process_since_ms AS process_since_ms, g.last_report_n,
                    h.reports_stored AS host_reports, {}
             FROM guests g JOIN hosts h ON h.id = g.host_id
             WHERE {condition}",
            totals_columns("g.")
        );
        Ok(bind_scope(sqlx::query_as::<DB, GuestRow>(&sql), binds)
            .fetch_all(&self.pool)
            .await?)
    }

    pub async fn window_intervals(
        &self,
        scope: GuestScope<'_>,
        window_ms: i64,
    ) -> StoreResult<Vec<IntervalRow>> {
        // Each backend reads them its own way (SQLite packs each guest's into one text).
        let (condition, binds) = scope_condition(&scope, 2);
        self.samples_in_window(&condition, binds, window_ms).await
    }

    pub async fn window_idle_readings(
        &self,
        scope: GuestScope<'_>,
        window_ms: i64,
        reach_ms: i64,
    ) -> StoreResult<Vec<IdleReading>> {
        let (condition, binds) = scope_condition(&scope, 2);
        let sql = format!(
            "SELECT r.guest_id, r.source, r.received_ms, r.measured_ms, r.idle_fraction
             FROM guests g {}
             WHERE {condition}
             ORDER BY g.id, r.received_ms, r.source{BYTEWISE}",
            recent_rows_of_each_guest("guest_idle_readings", "r")
        );
        let query = sqlx::query_as(&sql).bind(window_ms + reach_ms);
        Ok(bind_scope(query, binds).fetch_all(&self.pool).await?)
    }

    pub async fn guest_host_id(&self, guest_id: GuestId) -> StoreResult<Option<HostId>> {
        Ok(
            sqlx::query_scalar("SELECT host_id FROM guests WHERE id = $1")
                .bind(guest_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    pub async fn newest_reports(&self, hosts: &[HostId]) -> StoreResult<Vec<(HostId, ReportId)>> {
        // One probe of `reports_host` per host, from its end.
        let sql = format!(
            "SELECT h.id, (SELECT MAX(r.id) FROM reports r WHERE r.host_id = h.id)
             FROM hosts h WHERE {}",
            in_id_list("h.id", 1)
        );
        let newest: Vec<(HostId, Option<ReportId>)> = sqlx::query_as(&sql)
            .bind(id_list(hosts.iter().map(|id| id.0)))
            .fetch_all(&self.pool)
            .await?;
        Ok(newest
            .into_iter()
            .filter_map(|(host, report)| Some((host, report?)))
            .collect())
    }

    pub async fn samples_of_reports_after(
        &self,
        hosts: &[HostId],
        after: ReportId,
    ) -> StoreResult<Vec<ReportedSample>> {
        // Each host's new reports are a range of `reports_host` (PostgreSQL's), their samples a
        // lookup of `samples_report` each: what changed, not the guests' windows.
        let sql = format!(
            "SELECT r.host_id, r.id AS report_id, {}
             FROM reports r {}
             WHERE {} AND r.id > $2
             ORDER BY s.guest_id, s.received_ms, s.id",
            interval_columns("s"),
            looked_up_for_each("samples", "s", "s.report_id = r.id"),
            in_id_list("r.host_id", 1)
        );
        Ok(sqlx::query_as(&sql)
            .bind(id_list(hosts.iter().map(|id| id.0)))
            .bind(after)
            .fetch_all(&self.pool)
            .await?)
    }

    pub async fn recent_samples(
        &self,
        guest_id: GuestId,
        limit: i64,
    ) -> StoreResult<Vec<SampleRow>> {
        // By `received_ms` first, so that `samples_guest_received` gives the order: by `id`
        // alone, once the table is analysed, PostgreSQL may walk the whole primary key
        // backwards looking for the guest's rows.
        Ok(sqlx::query_as(
            "SELECT end_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups, wakeups_source
             FROM samples WHERE guest_id = $1 ORDER BY received_ms DESC, id DESC LIMIT $2",
        )
        .bind(guest_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn samples_between(
        &self,
        guest_id: GuestId,
        from_ms: i64,
        to_ms: i64,
        reach_ms: i64,
    ) -> StoreResult<(Vec<IntervalRow>, Vec<IdleReading>)> {
        let sql = format!(
            "SELECT {} FROM samples s
             WHERE guest_id = $1 AND received_ms >= $2 AND received_ms < $3
             ORDER BY received_ms, id",
            interval_columns("s")
        );
        let samples = sqlx::query_as(&sql)
            .bind(guest_id)
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(&self.pool)
            .await?;
        let sql = format!(
            "SELECT guest_id, source, received_ms, measured_ms, idle_fraction
             FROM guest_idle_readings WHERE guest_id = $1 AND received_ms >= $2
             ORDER BY received_ms, source{BYTEWISE}"
        );
        let readings = sqlx::query_as(&sql)
            .bind(guest_id)
            .bind(from_ms - reach_ms)
            .fetch_all(&self.pool)
            .await?;
        Ok((samples, readings))
    }
}
