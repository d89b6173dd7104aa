//! `GET /metrics`, for Prometheus, with a viewer token (`Authorization: Bearer …`): OpenMetrics
//! when the `Accept` header asks for it (as Prometheus does), the classic text format otherwise
//! (`curl`, `promtool check metrics`).

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::auth::Viewer;
use crate::error::AppResult;
use crate::metrics::{Encoding, Scrape, format};
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
    let encoding = Encoding::negotiate_all(
        headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|value| value.to_str().ok()),
    );
    let now_ms = state.clock.now_ms();
    let hosts = state.db.hosts().await?;
    let open_alerts = state.db.open_alert_counts().await?;
    let scrape = Scrape {
        fleet: state.fleet.published(),
        now_ms,
        hosts: &hosts,
        open_alerts: &open_alerts,
        external_url: state.options.external_url.trim_end_matches('/'),
    };
    // A line a guest and family: over a hundred megabytes at 100,000 guests, gzipped as it is
    // written when the scraper takes gzip (`metrics::encoding`). An answer that says its
    // encoding is left alone by the compression layer (`app`).
    let body = crate::work::cpu_bound(|| state.metrics.render(&scrape, format, encoding))?;
    let mut answer = (
        [
            (header::CONTENT_TYPE, format.content_type()),
            // Caches must not hand one format or encoding to a scraper that asked for another.
            (header::VARY, "Accept, Accept-Encoding"),
        ],
        body,
    )
        .into_response();
    if let Some(coding) = encoding.content_encoding() {
        answer
            .headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding));
    }
    Ok(answer)
}
