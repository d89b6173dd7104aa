//! The rates of the tokens that send data: a report's or a guest's facts' rate, checked before
//! their body is read, and a report's KiB, checked once it is read and before it is parsed.

use std::num::NonZeroU32;

use axum::http::Method;
use axum::http::request::Parts;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::limits::MAX_AGENT_BODY_BYTES;
use crate::auth::Role;
use crate::budgets::Budgets;
use crate::domain::TokenId;
use crate::error::AppError;
use crate::http::spending::Credential;
use crate::metrics::Metrics;

/// The rate limiters, one entry per token.
pub(super) struct Rates {
    /// Reports per agent token, checked before the report is read.
    reports: DefaultKeyedRateLimiter<TokenId>,
    /// Facts deliveries per guest token, checked before they are read.
    facts: DefaultKeyedRateLimiter<TokenId>,
    /// KiB of reports per agent token, checked once a report is read, before it is parsed.
    report_kib: DefaultKeyedRateLimiter<TokenId>,
    /// The budget `report_kib` enforces, as the server was started with (for the refusal).
    report_kib_per_token_per_second: u32,
}

impl Rates {
    /// `reports_per_second` and `reports_burst` per agent token; the facts' and the reports'
    /// KiB from the budgets.
    pub(super) fn new(
        reports_per_second: NonZeroU32,
        reports_burst: NonZeroU32,
        budgets: &Budgets,
    ) -> Rates {
        let facts_per_minute =
            NonZeroU32::new(budgets.facts_per_guest_token_per_minute).unwrap_or(NonZeroU32::MIN);
        let kib_per_second =
            NonZeroU32::new(budgets.report_kib_per_token_per_second).unwrap_or(NonZeroU32::MIN);
        // Two of the largest reports at once: an agent catching up after an outage sends them.
        let kib_burst = NonZeroU32::new((2 * MAX_AGENT_BODY_BYTES / 1024) as u32)
            .unwrap_or(NonZeroU32::MIN)
            .max(kib_per_second);
        Rates {
            reports: RateLimiter::keyed(
                Quota::per_second(reports_per_second).allow_burst(reports_burst),
            ),
            facts: RateLimiter::keyed(
                Quota::per_minute(facts_per_minute).allow_burst(facts_per_minute),
            ),
            report_kib: RateLimiter::keyed(
                Quota::per_second(kib_per_second).allow_burst(kib_burst),
            ),
            report_kib_per_token_per_second: budgets.report_kib_per_token_per_second,
        }
    }

    /// A report's and a guest's facts' rates, checked before their bodies are read.
    pub(super) fn before_body(
        &self,
        parts: &Parts,
        credential: Credential,
        metrics: &Metrics,
    ) -> Result<(), AppError> {
        let Credential::Token { id, role } = credential else {
            return Ok(());
        };
        if parts.method != Method::POST {
            return Ok(());
        }
        let (limiter, budget, what) = match (role, parts.uri.path()) {
            (Role::Agent, "/api/v1/reports") => (
                &self.reports,
                "reports",
                "this agent token sends reports faster than the server takes them \
                 (serve --ingest-rate, --ingest-burst); retry later",
            ),
            (Role::Guest, "/api/v1/guest-facts") => (
                &self.facts,
                "facts",
                "this guest token delivers facts more often than the server takes them \
                 (serve --facts-per-guest-token-per-minute); retry later",
            ),
            _ => return Ok(()),
        };
        limiter.check_key(&id).map_err(|not_until| {
            use governor::clock::{Clock, DefaultClock};
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            metrics.refused(budget, credential.kind());
            AppError::TooManyRequests {
                message: what.into(),
                retry_after_s: wait.as_secs().max(1),
            }
        })
    }

    /// A report's bytes, from its agent token's budget, once it is read and before it is
    /// parsed: a token cannot make the server parse more than its share of JSON, valid or not.
    pub(super) fn report_bytes(
        &self,
        parts: &Parts,
        credential: Credential,
        bytes: usize,
        metrics: &Metrics,
    ) -> Result<(), AppError> {
        let Credential::Token {
            id,
            role: Role::Agent,
        } = credential
        else {
            return Ok(());
        };
        if parts.method != Method::POST || parts.uri.path() != "/api/v1/reports" {
            return Ok(());
        }
        let kib = NonZeroU32::new(u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX))
            .unwrap_or(NonZeroU32::MIN);
        let refused = |wait_s: u64| {
            metrics.refused("report_bytes", credential.kind());
            AppError::TooManyRequests {
                message: format!(
                    "this agent token sends more report bytes than the server reads from one \
                     token ({} KiB a second, serve --ingest-kib-rate); retry later",
                    self.report_kib_per_token_per_second
                ),
                retry_after_s: wait_s.max(1),
            }
        };
        match self.report_kib.check_key_n(&id, kib) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => {
                use governor::clock::{Clock, DefaultClock};
                Err(refused(
                    not_until
                        .wait_time_from(DefaultClock::default().now())
                        .as_secs(),
                ))
            }
            // Larger than the burst: never, within the body limit; refused all the same.
            Err(_) => Err(refused(60)),
        }
    }
}
