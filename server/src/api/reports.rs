//! `POST /api/v1/reports`: where agents' reports come in.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::HeaderMap;
use serde::Serialize;
use tickscope_wire::Report;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::body::{json_body, json_of};
use super::errors::DeliveryErrors;
use std::num::NonZeroU32;

use crate::auth::AgentToken;
use crate::db::StoreOutcome;
use crate::domain::{TokenId, TokenRole};
use crate::error::{AppError, AppResult, ErrorBody};
use crate::http::spending::Credential;
use crate::ingest;
use crate::state::AppState;

/// Takes a report's guests from its token's budget of guest samples (`serve
/// --ingest-guest-samples-rate`): one token's reports cannot take the writer every other host's
/// reports wait for.
fn spend_guest_samples(state: &AppState, token_id: TokenId, guests: usize) -> AppResult<()> {
    let Some(samples) = NonZeroU32::new(u32::try_from(guests).unwrap_or(u32::MAX)) else {
        return Ok(());
    };
    match state.guest_samples_limiter.check_key_n(&token_id, samples) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(not_until)) => {
            use governor::clock::{Clock, DefaultClock};
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            state.metrics.refused("guest_samples", "agent");
            Err(AppError::TooManyRequests {
                message: format!(
                    "this agent token sends more guest samples than the server takes from one \
                     token ({} a second, serve --ingest-guest-samples-rate); retry later",
                    state.options.budgets.guest_samples_per_token_per_second
                ),
                retry_after_s: wait.as_secs().max(1),
            })
        }
        // More guests than the burst: the report is larger than validation lets through.
        Err(_) => Err(AppError::invalid(
            "guests",
            "more guests than this token may send at once",
        )),
    }
}

/// Says in one line of the log, within the token's share of warnings, that facts were left
/// out of a report, how many guests' and the first one's reason.
fn say_left_out(state: &AppState, token_id: TokenId, report: &ingest::ValidReport, now_ms: i64) {
    let left_out = &report.facts_left_out;
    let Some((guest, why)) = &left_out.first else {
        return;
    };
    let sender = Credential::Token {
        id: token_id,
        role: TokenRole::Agent,
    };
    match state.warnings.allow(sender, now_ms) {
        Some(held_back) => tracing::warn!(
            host = ?report.host.name,
            guests = left_out.guests,
            first_guest = ?guest,
            first_error = %why,
            earlier_warnings_held_back = held_back,
            "guest facts left out"
        ),
        None => state.metrics.warnings_held_back(1),
    }
}

/// A report of 10,000 guests is about 3 MB of JSON.
const MAX_REPORT_BYTES: usize = 16 * 1024 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(receive))
        .layer(DefaultBodyLimit::max(MAX_REPORT_BYTES))
}

/// What became of a report.
#[derive(Serialize, utoipa::ToSchema)]
struct ReportAccepted {
    /// `stored`, or `duplicate`: this agent run's report with this number was stored before for
    /// this host, and nothing was written.
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    report_id: Option<i64>,
    /// Guests the stored report held.
    #[serde(skip_serializing_if = "Option::is_none")]
    guests: Option<usize>,
}

/// An agent's report of one measured interval. It is stored whole or not at all, and answered
/// 200 only once it is committed; a report sent again is answered 200 and stored once.
#[utoipa::path(
    post,
    path = "/api/v1/reports",
    operation_id = "post_report",
    tag = "agents",
    request_body = Report,
    security(("token" = [])),
    responses(
        (status = 200, description = "Stored, or stored before", body = ReportAccepted),
        (status = 403, description = "Not an agent token, one issued for another host, or a new token for a host another token reports for", body = ErrorBody),
        (status = 413, description = "The body is over 16 MiB", body = ErrorBody),
        (status = 429, description = "This token sends faster than its limit; see Retry-After", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
        DeliveryErrors,
    )
)]
async fn receive(
    State(state): State<AppState>,
    AgentToken { token_id }: AgentToken,
    headers: HeaderMap,
    body: Bytes,
) -> AppResult<Json<ReportAccepted>> {
    // The report's rate was checked before its body was read (`http::admission`).
    let started = std::time::Instant::now();
    let stored = async {
        let now = state.clock.now_ms();
        let max_guests = state.options.budgets.guests_per_report;
        // Reading and checking a report of thousands of guests is milliseconds of CPU (linear in
        // the report): off the async threads, which every other request needs.
        let report = tokio::task::spawn_blocking(move || {
            let report = json_body(json_of::<Report>(&headers, &body), MAX_REPORT_BYTES)?;
            ingest::validate_within(report, now, max_guests)
        })
        .await
        .map_err(|e| AppError::stopped("checking a report", e))??;
        spend_guest_samples(&state, token_id, report.guests.len())?;
        say_left_out(&state, token_id, &report, now);
        let report = std::sync::Arc::new(report);
        let outcome = state.ingest_report(report.clone(), token_id, now).await?;
        Ok::<_, AppError>((report, outcome))
    }
    .await;
    let seconds = started.elapsed().as_secs_f64();
    let (report, outcome) = match stored {
        Ok(stored) => stored,
        Err(e) => {
            state.metrics.report("refused", 0, seconds);
            return Err(e);
        }
    };
    match outcome {
        StoreOutcome::Stored { .. } => state.metrics.report("stored", report.guests.len(), seconds),
        StoreOutcome::Duplicate => state.metrics.report("duplicate", 0, seconds),
    }
    Ok(Json(match outcome {
        StoreOutcome::Stored { report_id, .. } => ReportAccepted {
            status: "stored",
            report_id: Some(report_id.0),
            guests: Some(report.guests.len()),
        },
        StoreOutcome::Duplicate => ReportAccepted {
            status: "duplicate",
            report_id: None,
            guests: None,
        },
    }))
}
