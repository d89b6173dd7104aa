use std::collections::HashMap;

use super::Db;
use crate::error::{AppError, AppResult};
use crate::ingest::totals::{self, Measured, Plausible, StoredTotals};
use crate::ingest::{CPU_TICK_SLACK_S, MAX_WAKEUPS_PER_VCPU_S, ValidReport};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOutcome {
    Stored {
        report_id: i64,
        host_id: i64,
    },
    /// This (agent, run, seq) was stored before; nothing was written.
    Duplicate,
}

impl Db {
    /// Stores a report whole, in one transaction, or not at all.
    pub async fn store_report(
        &self,
        report: &ValidReport,
        token_id: i64,
        now_ms: i64,
    ) -> AppResult<StoreOutcome> {
        // IMMEDIATE takes the write lock up front, so two copies of one report arriving at once
        // queue behind each other and the second sees the first instead of failing.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let bound_host: Option<String> =
            sqlx::query_scalar("SELECT host_name FROM tokens WHERE id = ?")
                .bind(token_id)
                .fetch_one(&mut *tx)
                .await?;
        if let Some(bound) = bound_host.filter(|bound| *bound != report.host.name) {
            return Err(AppError::Forbidden(format!(
                "this agent token reports for host {bound:?}, not {:?}; give each host its own token",
                report.host.name
            )));
        }
        let seen: Option<i64> = sqlx::query_scalar(
            "SELECT id FROM reports WHERE agent_id = ? AND run_id = ? AND seq = ?",
        )
        .bind(&report.agent_id)
        .bind(&report.run_id)
        .bind(report.seq)
        .fetch_optional(&mut *tx)
        .await?;
        if seen.is_some() {
            return Ok(StoreOutcome::Duplicate);
        }

        let host = &report.host;
        let host_id: i64 = sqlx::query_scalar(
            "INSERT INTO hosts (name, cpus, kernel, agent_version, kvm_halt_poll_ns, first_seen_ms,
                last_report_ms, agent_dropped_reports)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (name) DO UPDATE SET
                cpus = excluded.cpus, kernel = excluded.kernel,
                agent_version = excluded.agent_version, kvm_halt_poll_ns = excluded.kvm_halt_poll_ns,
                last_report_ms = MAX(last_report_ms, excluded.last_report_ms),
                agent_dropped_reports = MAX(agent_dropped_reports, excluded.agent_dropped_reports)
             RETURNING id",
        )
        .bind(&host.name)
        .bind(host.cpus)
        .bind(&host.kernel)
        .bind(&report.agent_version)
        .bind(host.kvm_halt_poll_ns)
        .bind(now_ms)
        .bind(now_ms)
        .bind(report.dropped_reports)
        .fetch_one(&mut *tx)
        .await?;

        let report_id: i64 = sqlx::query_scalar(
            "INSERT INTO reports (host_id, token_id, agent_id, run_id, seq, start_ms, end_ms, length_ms, received_ms)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(host_id)
        .bind(token_id)
        .bind(&report.agent_id)
        .bind(&report.run_id)
        .bind(report.seq)
        .bind(report.start_ms)
        .bind(report.end_ms)
        .bind(report.length_ms)
        .bind(now_ms)
        .fetch_one(&mut *tx)
        .await?;

        // The host's guests' running totals as of their previous reports, read once.
        let previous: HashMap<(String, String), StoredTotals> =
            sqlx::query_as::<_, (String, String, String, f64, i64, i64)>(
                "SELECT hypervisor, identity, process_key, cpu_s_total, wakeups_total, totals_at_ms
             FROM guests WHERE host_id = ? AND process_key IS NOT NULL",
            )
            .bind(host_id)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(
                |(hypervisor, identity, process_key, host_cpu_s, vcpu_wakeups, at_ms)| {
                    let totals = StoredTotals {
                        process_key,
                        host_cpu_s,
                        vcpu_wakeups,
                        at_ms,
                    };
                    ((hypervisor, identity), totals)
                },
            )
            .collect();

        for guest in &report.guests {
            let totals = guest.totals.as_ref();
            let span = totals::sample_span(
                previous.get(&(guest.hypervisor.to_string(), guest.identity.clone())),
                totals,
                Measured {
                    start_ms: report.start_ms,
                    end_ms: report.end_ms,
                    length_ms: report.length_ms,
                    host_cpu_s: guest.host_cpu_s,
                    vcpu_wakeups: guest.vcpu_wakeups,
                },
                Plausible {
                    host_cpus: host.cpus,
                    vcpus: guest.vcpus,
                    cpu_slack_s_per_cpu: CPU_TICK_SLACK_S,
                    max_wakeups_per_vcpu_s: MAX_WAKEUPS_PER_VCPU_S,
                },
            );
            if span.bridged {
                tracing::info!(
                    host = %host.name, guest = %guest.name, span_ms = span.length_ms,
                    "measured back over missing reports from the VM's running totals"
                );
            }
            let guest_id: i64 = sqlx::query_scalar(
                "INSERT INTO guests (host_id, hypervisor, identity, name, uuid, management, vcpus, pid, boot_args, uses_kvm, first_seen_ms, last_seen_ms,
                    process_key, cpu_s_total, wakeups_total, totals_at_ms)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (host_id, hypervisor, identity) DO UPDATE SET
                    name = excluded.name, uuid = excluded.uuid, management = excluded.management,
                    vcpus = excluded.vcpus, pid = excluded.pid, boot_args = excluded.boot_args,
                    uses_kvm = excluded.uses_kvm,
                    last_seen_ms = MAX(last_seen_ms, excluded.last_seen_ms),
                    process_key = excluded.process_key, cpu_s_total = excluded.cpu_s_total,
                    wakeups_total = excluded.wakeups_total, totals_at_ms = excluded.totals_at_ms
                 RETURNING id",
            )
            .bind(host_id)
            .bind(guest.hypervisor)
            .bind(&guest.identity)
            .bind(&guest.name)
            .bind(&guest.uuid)
            .bind(&guest.management)
            .bind(guest.vcpus)
            .bind(guest.pid)
            .bind(&guest.boot_args)
            .bind(guest.uses_kvm)
            .bind(now_ms)
            .bind(now_ms)
            .bind(totals.map(|t| &t.process_key))
            .bind(totals.map(|t| t.host_cpu_s))
            .bind(totals.map(|t| t.vcpu_wakeups))
            .bind(totals.map(|_| report.end_ms))
            .fetch_one(&mut *tx)
            .await?;

            sqlx::query(
                "INSERT INTO samples (guest_id, report_id, end_ms, received_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups, wakeups_source)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(guest_id)
            .bind(report_id)
            .bind(report.end_ms)
            .bind(now_ms)
            .bind(span.length_ms)
            .bind(guest.vcpus)
            .bind(span.host_cpu_s)
            .bind(span.vcpu_wakeups)
            .bind(guest.wakeups_source)
            .execute(&mut *tx)
            .await?;

            if let Some(facts) = &guest.facts {
                super::facts::record_facts(&mut tx, guest_id, facts, now_ms).await?;
            }
        }

        // The first report binds a token made without --host to its host.
        sqlx::query(
            "UPDATE tokens SET last_used_ms = ?, host_name = COALESCE(host_name, ?) WHERE id = ?",
        )
        .bind(now_ms)
        .bind(&report.host.name)
        .bind(token_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(StoreOutcome::Stored { report_id, host_id })
    }

    /// The sequence numbers of one agent run's reports, in the order they were stored.
    pub async fn report_sequence(&self, run_id: &str) -> AppResult<Vec<i64>> {
        Ok(
            sqlx::query_scalar("SELECT seq FROM reports WHERE run_id = ? ORDER BY id")
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// Rows in the reports and samples tables, for checking that refused input stored nothing.
    pub async fn count_reports_and_samples(&self) -> AppResult<(i64, i64)> {
        sqlx::query_as("SELECT (SELECT COUNT(*) FROM reports), (SELECT COUNT(*) FROM samples)")
            .fetch_one(&self.pool)
            .await
            .map_err(AppError::from)
    }
}

impl Db {
    /// Hosts whose name does not match a SQL LIKE pattern: the demo refuses to mix its simulated
    /// hosts into a database that real agents report to.
    pub async fn count_hosts_not_like(&self, pattern: &str) -> AppResult<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM hosts WHERE name NOT LIKE ?")
                .bind(pattern)
                .fetch_one(&self.pool)
                .await?,
        )
    }
}
