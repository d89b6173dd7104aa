//! The JSON API's routes, each registered with its description, and the OpenAPI document they
//! make.

use std::sync::OnceLock;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use super::openapi::{ApiDoc, state_admission_answers, state_edge_limits};
use super::{alerts, changes, exports, facts, fleet, guests, health, hosts, metrics, reports};
use crate::state::AppState;

/// Where the OpenAPI document is served, to anyone: it describes the API, not the fleet.
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// The JSON API's routes, each registered with its description.
fn described() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(reports::router())
        .merge(facts::router())
        .merge(guests::router())
        .merge(hosts::router())
        .merge(fleet::router())
        .merge(changes::router())
        .merge(exports::router())
        .merge(alerts::router())
}

/// The OpenAPI document of the JSON API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = described().into_openapi();
    state_edge_limits(&mut doc);
    state_admission_answers(&mut doc);
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
