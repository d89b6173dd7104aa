//! The JSON API, versioned in its paths.

mod alerts;
mod exports;
mod facts;
mod guests;
pub mod health;
mod hosts;
mod metrics;
mod openapi;
mod reports;

use std::sync::OnceLock;

use axum::Json;
use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// A JSON request body, or our own error for it: well-formed JSON of the wrong shape is 422
/// naming the body, a body over `limit_bytes` is 413, a body not sent as `application/json` is
/// 415, anything else 400.
pub(crate) fn json_body<T>(
    body: Result<Json<T>, JsonRejection>,
    limit_bytes: usize,
) -> AppResult<T> {
    body.map(|Json(value)| value).map_err(|e| match e {
        JsonRejection::JsonDataError(e) => AppError::invalid("body", e.body_text()),
        JsonRejection::MissingJsonContentType(e) => AppError::UnsupportedMediaType(e.body_text()),
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => AppError::TooLarge(format!(
            "a request body may be at most {} KiB",
            limit_bytes / 1024
        )),
        other => AppError::BadRequest(other.body_text()),
    })
}

/// Where the OpenAPI document is served, to anyone: it describes the API, not the fleet.
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// The JSON API's routes, each registered with its description.
fn described() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(reports::router())
        .merge(facts::router())
        .merge(guests::router())
        .merge(hosts::router())
        .merge(exports::router())
        .merge(alerts::router())
}

/// The OpenAPI document of the JSON API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = described().into_openapi();
    openapi::state_edge_limits(&mut doc);
    openapi::state_busy_answer(&mut doc);
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc
}

/// The document as served, made once.
fn openapi_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        openapi()
            .to_pretty_json()
            .expect("the OpenAPI document serialises")
    })
}

pub fn router() -> Router<AppState> {
    let (api, _) = described().split_for_parts();
    api.merge(metrics::router())
        .route(
            OPENAPI_PATH,
            axum::routing::get(|| async {
                ([(header::CONTENT_TYPE, "application/json")], openapi_json()).into_response()
            }),
        )
        .route("/healthz", axum::routing::get(health::healthz))
        .route("/readyz", axum::routing::get(health::readyz))
}
