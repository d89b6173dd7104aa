use sqlx::FromRow;

use super::Db;
use crate::error::AppResult;

/// A guest with its samples over the analysis window summed.
#[derive(Debug, Clone, FromRow)]
pub struct GuestWindowRow {
    pub id: i64,
    pub host_id: i64,
    pub host_name: String,
    pub hypervisor: String,
    pub name: String,
    pub uuid: Option<String>,
    pub management: Option<String>,
    pub vcpus: u32,
    pub pid: i64,
    pub boot_args: Option<String>,
    pub last_seen_ms: i64,
    /// Host CPU over the window, in core-seconds.
    pub host_cpu_s: f64,
    /// Length of the window's samples, in milliseconds.
    pub length_ms: f64,
    /// Σ vCPUs × length, in vCPU-milliseconds.
    pub vcpu_ms: f64,
    pub wakeups: i64,
    pub all_from_vcpu_threads: bool,
    pub intervals: i64,
}

#[derive(Debug, Clone, FromRow)]
pub struct SampleRow {
    pub end_ms: i64,
    pub length_ms: f64,
    pub vcpus: u32,
    pub host_cpu_s: f64,
    pub vcpu_wakeups: i64,
    pub wakeups_source: String,
}

/// Sums each guest's samples received within `window_ms` before its newest one. Both ends are on
/// the server's clock, so a host whose clock is off, or jumps, still gets a full window.
const WINDOW_SELECT: &str = "
    SELECT g.id, g.host_id, h.name AS host_name, g.hypervisor, g.name, g.uuid, g.management,
           g.vcpus, g.pid, g.boot_args, g.last_seen_ms,
           SUM(s.host_cpu_s) AS host_cpu_s,
           SUM(s.length_ms) AS length_ms,
           SUM(s.vcpus * s.length_ms) AS vcpu_ms,
           SUM(s.vcpu_wakeups) AS wakeups,
           MIN(s.wakeups_source = 'vcpu_threads') AS all_from_vcpu_threads,
           COUNT(*) AS intervals
    FROM guests g
    JOIN hosts h ON h.id = g.host_id
    JOIN samples s ON s.guest_id = g.id AND s.received_ms > g.last_seen_ms - ?";

impl Db {
    /// Every guest reported since `active_since_ms` (server clock), with its window.
    pub async fn active_guest_windows(
        &self,
        active_since_ms: i64,
        window_ms: i64,
    ) -> AppResult<Vec<GuestWindowRow>> {
        let sql = format!("{WINDOW_SELECT} WHERE g.last_seen_ms >= ? GROUP BY g.id");
        Ok(sqlx::query_as(&sql)
            .bind(window_ms)
            .bind(active_since_ms)
            .fetch_all(&self.pool)
            .await?)
    }

    /// One host's active guests, plus `guest_id` whether active or not, with their windows: a
    /// guest's verdict needs its host's peers for the baseline.
    pub async fn host_guest_windows(
        &self,
        host_id: i64,
        guest_id: i64,
        active_since_ms: i64,
        window_ms: i64,
    ) -> AppResult<Vec<GuestWindowRow>> {
        let sql = format!(
            "{WINDOW_SELECT} WHERE g.host_id = ? AND (g.last_seen_ms >= ? OR g.id = ?) GROUP BY g.id"
        );
        Ok(sqlx::query_as(&sql)
            .bind(window_ms)
            .bind(host_id)
            .bind(active_since_ms)
            .bind(guest_id)
            .fetch_all(&self.pool)
            .await?)
    }

    pub async fn guest_host_id(&self, guest_id: i64) -> AppResult<Option<i64>> {
        Ok(
            sqlx::query_scalar("SELECT host_id FROM guests WHERE id = ?")
                .bind(guest_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// A guest's newest samples, newest stored first.
    pub async fn recent_samples(&self, guest_id: i64, limit: i64) -> AppResult<Vec<SampleRow>> {
        Ok(sqlx::query_as(
            "SELECT end_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups, wakeups_source
             FROM samples WHERE guest_id = ? ORDER BY id DESC LIMIT ?",
        )
        .bind(guest_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A guest's samples received in [from_ms, to_ms), summed: (host CPU core-seconds, length ms,
    /// vCPU-ms, wake-ups).
    pub async fn samples_between(
        &self,
        guest_id: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> AppResult<(f64, f64, f64, i64)> {
        Ok(sqlx::query_as(
            "SELECT COALESCE(SUM(host_cpu_s), 0.0), COALESCE(SUM(length_ms), 0.0),
                    COALESCE(SUM(vcpus * length_ms), 0.0), COALESCE(SUM(vcpu_wakeups), 0)
             FROM samples WHERE guest_id = ? AND received_ms >= ? AND received_ms < ?",
        )
        .bind(guest_id)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_one(&self.pool)
        .await?)
    }
}
