//! The application: shared state and the router, which reads as the table of contents.

use std::sync::{Arc, RwLock};

use axum::Router;
use axum::http::{HeaderValue, header};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use tower_sessions::cookie::SameSite;
use tower_sessions::cookie::time::Duration;
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_sqlx_store::SqliteStore;

use crate::analysis::cost::CostModel;
use crate::db::Db;
use crate::error::{AppError, AppResult};
use crate::{api, web};

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub options: Arc<Options>,
    /// The cost model in force: `options.cost` until an admin saves one on the settings page.
    cost: Arc<RwLock<CostModel>>,
}

/// The name under which the settings page stores the cost model.
pub const COST_MODEL_SETTING: &str = "cost_model";

impl AppState {
    /// The state of a server on `db`, with the cost model an admin saved, if any.
    pub async fn new(db: Db, options: Options) -> AppResult<AppState> {
        let saved = db.setting(COST_MODEL_SETTING).await?;
        let cost = match saved.as_deref().map(serde_json::from_str::<CostModel>) {
            Some(Ok(model)) => model,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "the saved cost model is unreadable; using the command line's");
                options.cost.clone()
            }
            None => options.cost.clone(),
        };
        Ok(AppState {
            db,
            cost: Arc::new(RwLock::new(cost)),
            options: Arc::new(options),
        })
    }

    /// The cost model in force.
    pub fn cost_model(&self) -> CostModel {
        self.cost.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stores a new cost model and puts it in force.
    pub async fn set_cost_model(&self, model: CostModel, by: &str) -> AppResult<()> {
        let json = serde_json::to_string(&model)
            .map_err(|e| AppError::Internal(format!("cost model to JSON: {e}")))?;
        self.db
            .save_setting(COST_MODEL_SETTING, &json, by, now_ms())
            .await?;
        *self.cost.write().unwrap_or_else(|e| e.into_inner()) = model;
        Ok(())
    }
}

/// How this server instance presents itself.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The database holds the simulated demo fleet: every page says so.
    pub demo: bool,
    /// How wasted CPU is priced until an admin sets it on the settings page.
    pub cost: CostModel,
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
        .with_expiry(Expiry::OnInactivity(Duration::hours(SESSION_IDLE_HOURS)))
        // Saved on every request, so that its expiry moves with activity (a write per page).
        .with_always_save(true);
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
