//! The JSON API, versioned in its paths.

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
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
}
