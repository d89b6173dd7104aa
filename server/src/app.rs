//! The application: shared state and the router, which reads as the table of contents.

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use tower_sessions::cookie::SameSite;
use tower_sessions::cookie::time::Duration;
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_sqlx_store::SqliteStore;

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
    /// The session cookie is marked Secure: the server is reached over HTTPS (through a TLS
    /// reverse proxy), so browsers never send it in clear.
    pub secure_cookies: bool,
}

/// A dashboard session lapses after this long without a request (a wall screen that refreshes
/// stays logged in).
pub const SESSION_IDLE_HOURS: i64 = 12;

pub fn router(state: AppState) -> Router {
    let sessions = SessionManagerLayer::new(SqliteStore::new(state.db.pool().clone()))
        .with_name("tickscope_session")
        .with_http_only(true)
        .with_same_site(SameSite::Strict)
        .with_secure(state.options.secure_cookies)
        .with_expiry(Expiry::OnInactivity(Duration::hours(SESSION_IDLE_HOURS)));
    Router::new()
        .merge(api::router())
        .merge(web::router())
        .fallback(web::not_found)
        .layer(sessions)
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
