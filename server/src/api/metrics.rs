//! `GET /metrics`, for Prometheus, with a viewer token (`Authorization: Bearer …`): OpenMetrics
//! when the `Accept` header asks for it (as Prometheus does), the classic text format otherwise
//! (`curl`, `promtool check metrics`).

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::auth::Viewer;
use crate::error::AppResult;
use crate::fleet::ACTIVE_WITHIN_MS;
use crate::metrics::{Scrape, format};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(
    State(state): State<AppState>,
    _viewer: Viewer,
    headers: HeaderMap,
) -> AppResult<impl IntoResponse> {
    let format = format::negotiate(
        headers
            .get(header::ACCEPT)
            .and_then(|value| value.to_str().ok()),
    );
    let now_ms = state.clock.now_ms();
    let guests = state.fleet.ranked(now_ms).await;
    let totals = state.db.process_totals(now_ms - ACTIVE_WITHIN_MS).await?;
    let hosts = state.db.hosts().await?;
    let alerts = state.db.open_alerts().await?;
    let text = state.metrics.render(
        &Scrape {
            guests: &guests,
            totals: &totals,
            hosts: &hosts,
            alerts: &alerts,
            external_url: state.options.external_url.trim_end_matches('/'),
        },
        format,
    )?;
    Ok((
        [
            (header::CONTENT_TYPE, format.content_type()),
            // Caches must not hand one format to a scraper that asked for the other.
            (header::VARY, "Accept"),
        ],
        text,
    ))
}
