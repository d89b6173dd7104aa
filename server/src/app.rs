//! The application: shared state and the router, which reads as the table of contents.

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

use crate::db::Db;
use crate::{api, web};

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub options: Arc<Options>,
}

/// How this server instance presents itself.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The database holds the simulated demo fleet: every page says so.
    pub demo: bool,
    /// How wasted CPU is priced on every page and in the API.
    pub cost: crate::analysis::cost::CostModel,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(api::router())
        .merge(web::router())
        .fallback(web::not_found)
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'self'; frame-ancestors 'none'"),
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Milliseconds since the Unix epoch, the unit of every stored time.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
