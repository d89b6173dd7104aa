//! The dashboard: server-rendered askama pages. Every string that came from a VM or a host is
//! escaped by askama's HTML escaping, which is on for every `.html` template.

mod pages;
mod view;

pub use pages::not_found;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::app::AppState;

const STYLESHEET: &str = include_str!("../../../static/style.css");

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(pages::overview))
        .route("/guests/{id}", get(pages::guest))
        .route("/plan", get(pages::plan))
        .route("/static/style.css", get(stylesheet))
}

async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        STYLESHEET,
    )
}
