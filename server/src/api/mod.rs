//! The JSON API, versioned in its paths.

mod guests;
mod reports;

use axum::Router;

use crate::app::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .merge(reports::router())
        .merge(guests::router())
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
}
