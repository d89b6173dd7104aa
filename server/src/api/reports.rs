//! `POST /api/v1/reports`: where agents' reports come in.

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use tickscope_agent::wire::{REPORTS_PATH, Report};

use crate::app::{AppState, now_ms};
use crate::auth::{Caller, Role};
use crate::db::StoreOutcome;
use crate::error::{AppError, AppResult};
use crate::ingest;

/// A report of 10,000 guests is about 3 MB of JSON.
const MAX_REPORT_BYTES: usize = 16 * 1024 * 1024;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(REPORTS_PATH, post(receive))
        .layer(DefaultBodyLimit::max(MAX_REPORT_BYTES))
}

async fn receive(
    State(state): State<AppState>,
    caller: Caller,
    body: Result<Json<Report>, JsonRejection>,
) -> AppResult<Json<Value>> {
    caller.require(Role::Agent)?;
    let token_id = caller.token_id()?;
    if let Err(not_until) = state.ingest_limiter.check_key(&token_id) {
        use governor::clock::{Clock, DefaultClock};
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        state.metrics.report("refused", 0, 0.0);
        return Err(AppError::TooManyRequests {
            message:
                "this agent token sends reports faster than the server takes them; retry later"
                    .into(),
            retry_after_s: wait.as_secs().max(1),
        });
    }
    let started = std::time::Instant::now();
    let stored = async {
        let report = super::json_body(body, MAX_REPORT_BYTES)?;
        let now = now_ms();
        let report = ingest::validate(report, now)?;
        let outcome = state.store_report(&report, caller.token_id()?, now).await?;
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
        StoreOutcome::Stored { report_id, .. } => {
            json!({"status": "stored", "report_id": report_id, "guests": report.guests.len()})
        }
        StoreOutcome::Duplicate => json!({"status": "duplicate"}),
    }))
}
