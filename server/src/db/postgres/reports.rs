//! SCAFFOLDING (branch i19-pg only): replaced by the PostgreSQL port of sqlite/reports.rs.
#![allow(unused_imports, unreachable_code)]

use crate::db::error::{StoreError, StoreResult};
use crate::db::guests::{GuestRow, IntervalRow};
use crate::db::reports::{ReportToStore, StoreOutcome, StoredGuest};
use crate::domain::{GuestId, HostId, ReportId, TokenId};
use crate::ingest::ValidReport;
use crate::ingest::samples::PreviousTotals;
use crate::ingest::totals::{SampleSpan, StoredTotals};
use std::collections::HashMap;
use tickscope_agent::wire::WakeupsSource;

use super::store::PgDb;

impl PgDb {
    pub async fn store_reports(
        &self,
        batch: &[ReportToStore<'_>],
        plan: impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
    ) -> StoreResult<Vec<StoreResult<StoreOutcome>>> {
        let _ = (batch, plan);
        unimplemented!("scaffolding: reports on PostgreSQL")
    }

    pub async fn store_report(
        &self,
        report: &ValidReport,
        token_id: TokenId,
        received_ms: i64,
        plan: impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>,
    ) -> StoreResult<StoreOutcome> {
        let _ = (report, token_id, received_ms, plan);
        unimplemented!("scaffolding: reports on PostgreSQL")
    }

    pub async fn count_reports_and_samples(&self) -> StoreResult<(i64, i64)> {
        let _ = ();
        unimplemented!("scaffolding: reports on PostgreSQL")
    }

    pub async fn count_hosts_not_like(&self, pattern: &str) -> StoreResult<i64> {
        let _ = (pattern,);
        unimplemented!("scaffolding: reports on PostgreSQL")
    }
}
