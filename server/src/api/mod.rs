//! The JSON API, versioned in its paths.

mod exports;
mod facts;
mod guests;
mod reports;

use axum::Router;

use crate::app::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .merge(reports::router())
        .merge(guests::router())
        .merge(facts::router())
        .merge(exports::router())
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
}
