//! The JSON API, versioned in its paths.

mod alerts;
mod exports;
mod facts;
mod guests;
mod hosts;
mod metrics;
mod reports;

use axum::Json;
use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;

use crate::app::AppState;
use crate::error::{AppError, AppResult};

/// A JSON request body, or our own error for it: well-formed JSON of the wrong shape is 422
/// naming the body, a body over `limit_bytes` is 413, anything else 400.
pub(crate) fn json_body<T>(
    body: Result<Json<T>, JsonRejection>,
    limit_bytes: usize,
) -> AppResult<T> {
    body.map(|Json(value)| value).map_err(|e| match e {
        JsonRejection::JsonDataError(e) => AppError::invalid("body", e.body_text()),
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => AppError::TooLarge(format!(
            "a request body may be at most {} KiB",
            limit_bytes / 1024
        )),
        other => AppError::BadRequest(other.body_text()),
    })
}

/// axum's default request body limit, which every route without its own keeps.
pub(crate) const DEFAULT_BODY_LIMIT_BYTES: usize = 2 * 1024 * 1024;

pub fn router() -> Router<AppState> {
    Router::new()
        .merge(reports::router())
        .merge(guests::router())
        .merge(hosts::router())
        .merge(facts::router())
        .merge(exports::router())
        .merge(metrics::router())
        .merge(alerts::router())
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
}
