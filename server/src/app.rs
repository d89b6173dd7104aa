//! The router, which reads as the table of contents of what the server answers.

use axum::Router;
use axum::http::{HeaderValue, header};
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::csrf::CsrfLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use tower_sessions::cookie::SameSite;
use tower_sessions::cookie::time::Duration;
use tower_sessions::{Expiry, SessionManagerLayer};

use crate::auth::session_store::Sessions;
use crate::http::admission::{self};
use crate::{api, web};

use crate::auth::session::{SESSION_COOKIE, SESSION_IDLE_HOURS};
use crate::state::AppState;

pub fn router(state: AppState) -> Router {
    let store = Sessions::new(state.db.session_store());
    let sessions = SessionManagerLayer::new(store)
        .with_name(SESSION_COOKIE)
        .with_http_only(true)
        .with_same_site(SameSite::Strict)
        .with_secure(state.options.secure_cookies)
        .with_expiry(Expiry::OnInactivity(Duration::hours(SESSION_IDLE_HOURS)))
        // Saved on every request, so that its expiry moves with activity (a write per page).
        .with_always_save(true);
    // Only a server that is itself reached over TLS may tell browsers to insist on it.
    let hsts = state.options.tls.then(|| {
        SetResponseHeaderLayer::if_not_present(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        )
    });
    Router::new()
        .merge(api::router())
        .merge(web::router())
        .fallback(web::not_found)
        .layer(sessions)
        // Behind the forms' CSRF tokens, the browser's word: a POST whose Sec-Fetch-Site or
        // Origin says another site sent it is refused 403. Agents and scripts send neither
        // header and pass (tower-http's scheme, after Go's CrossOriginProtection).
        .layer(CsrfLayer::new())
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'self'; frame-ancestors 'none'"),
        ))
        // Pages and the API hold what only a logged-in user or a token may see (a new token,
        // once; the fleet's inventory): no copy is kept by a browser or a proxy, nor for the
        // Back button after logout. The stylesheet says otherwise for itself.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        // Answers are compressed when the client asks (gzip or zstd; Prometheus asks for gzip),
        // at the fastest level: at 30,000 guests `/metrics` is 26.5 MB, which gzip's default
        // level took 390 ms to shrink 8.3 times and its fastest takes 30 ms to shrink 6.1 times
        // (zstd's fastest: 8.6 times; docs/performance.md). tower-http's predicate
        // leaves alone bodies under 32 bytes, images and answers already encoded, and adds
        // `Vary: accept-encoding`; a streamed body is compressed as it is written. Outside the
        // headers above (they are set either way), inside the admission (its 503 and 408 are a
        // few bytes).
        .layer(
            CompressionLayer::new()
                .no_br()
                .no_deflate()
                .quality(CompressionLevel::Fastest),
        )
        // Bodies are read within their deadline before a request takes a slot; requests without
        // a credential have slots of their own; a full budget is answered 503, not queued for long.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            admission::admit,
        ))
        .layer(tower::util::option_layer(hsts))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
