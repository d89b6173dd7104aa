//! The application: shared state and the router, which reads as the table of contents.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, RwLock};
use std::time::Duration as StdDuration;

use axum::Router;
use axum::http::{HeaderValue, header};
use tower_http::csrf::CsrfLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use tower_sessions::cookie::SameSite;
use tower_sessions::cookie::time::Duration;
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_sqlx_store::SqliteStore;

use crate::analysis::change::Change;
use crate::analysis::cost::CostModel;
use crate::auth::session_store::Sessions;
use crate::auth::throttle::LoginThrottle;
use crate::current::Current;
use crate::db::{Db, StoreOutcome};
use crate::error::{AppError, AppResult};
use crate::fleet::{self, AnalysedGuest};
use crate::http::admission::{self, Admission, AdmissionLimits};
use crate::ingest::ValidReport;
use crate::metrics::Metrics;
use crate::refresher::Refresher;
use crate::{api, web};

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub options: Arc<Options>,
    /// The cost model in force: `options.cost` until an admin saves one on the settings page.
    cost: Arc<RwLock<CostModel>>,
    /// Every active guest, analysed: what the pages and the API rank. Read it through
    /// [`AppState::ranked`] and the like, which wait for the analyses of what was stored.
    pub current: Arc<Current>,
    /// Analyses hosts again after their reports, off the request path.
    pub refresher: Arc<Refresher>,
    /// The server's own counters, for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Wakes the notification sender when an evaluation wrote something to the outbox.
    pub notifier: Arc<tokio::sync::Notify>,
    /// Failed logins per name, to hold back guessing.
    pub login_throttle: Arc<LoginThrottle>,
    /// Reports per agent token, to keep one token from flooding the server.
    pub ingest_limiter: Arc<governor::DefaultKeyedRateLimiter<i64>>,
    /// The request slots, and what a client may take to send a request.
    pub admission: Arc<Admission>,
    /// Whether the last report could be stored, for `/readyz`.
    pub storage: Arc<StorageStatus>,
}

/// What the last attempt to store a report found: a full disk or a database that cannot be
/// written is remembered until a report is stored again, or for a minute (agents that met it
/// wait before they send again, and a write probe that works then speaks for itself).
#[derive(Debug, Default)]
pub struct StorageStatus {
    fault: std::sync::Mutex<Option<(std::time::Instant, String)>>,
    /// `/readyz`'s last answer and when it was found, reused for a moment.
    pub probe_cache:
        tokio::sync::Mutex<Option<(std::time::Instant, crate::api::health::Readiness)>>,
}

impl StorageStatus {
    /// The storage fault the last report met, if it met one.
    pub fn fault(&self) -> Option<String> {
        const REMEMBERED_FOR: StdDuration = StdDuration::from_secs(60);
        self.fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(at, _)| at.elapsed() < REMEMBERED_FOR)
            .map(|(_, fault)| fault.clone())
    }

    fn record<T>(&self, result: &AppResult<T>) {
        let fault = match result {
            Ok(_) => None,
            // A full disk may let the write probe through (SQLite reuses its write-ahead log's
            // pages) while reports do not fit: remembered. A database that is read-only or
            // failing fails the probe itself; one busy for a moment is no reason to be pulled
            // from a load balancer.
            Err(e @ AppError::StorageFull { .. }) => {
                Some((std::time::Instant::now(), e.to_string()))
            }
            // Refused for itself (a bad value, a wrong host), or busy: says nothing lasting
            // about the storage.
            Err(_) => return,
        };
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
    }
}

/// The name under which the settings page stores the cost model.
pub const COST_MODEL_SETTING: &str = "cost_model";

impl AppState {
    /// The state of a server on `db`, with the cost model an admin saved, if any, and every
    /// active guest analysed.
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
        let started = std::time::Instant::now();
        let current = Current::load(&db, now_ms()).await?;
        tracing::info!(
            guests = current.ranked(now_ms()).len(),
            took_ms = started.elapsed().as_millis() as u64,
            "analysed the active guests"
        );
        let current = Arc::new(current);
        Ok(AppState {
            refresher: Refresher::start(db.clone(), current.clone()),
            db,
            current,
            metrics: Arc::new(Metrics::default()),
            notifier: Arc::new(tokio::sync::Notify::new()),
            login_throttle: Arc::new(LoginThrottle::default()),
            ingest_limiter: Arc::new(governor::RateLimiter::keyed(
                governor::Quota::per_second(options.ingest_per_second)
                    .allow_burst(options.ingest_burst),
            )),
            cost: Arc::new(RwLock::new(cost)),
            admission: Arc::new(Admission::new(options.admission)),
            storage: Arc::new(StorageStatus::default()),
            options: Arc::new(options),
        })
    }

    /// Stores a report, then asks for its host to be analysed again. The report is stored
    /// once this returns; the analysis follows (see [`Refresher`]).
    pub async fn store_report(
        &self,
        report: &ValidReport,
        token_id: i64,
        received_ms: i64,
    ) -> AppResult<StoreOutcome> {
        let outcome = self.db.store_report(report, token_id, received_ms).await;
        self.storage.record(&outcome);
        let outcome = outcome?;
        if let StoreOutcome::Stored { host_id, .. } = outcome {
            // As of when the report arrived (a backfill's reports arrive on their own timeline).
            self.refresh_host(host_id, received_ms);
        }
        Ok(outcome)
    }

    /// Asks for a host's guests to be analysed again as of `at_ms`, after something it or
    /// they sent was stored.
    pub fn refresh_host(&self, host_id: i64, at_ms: i64) {
        self.refresher.ask(host_id, at_ms);
    }

    /// The active guests, most wasteful first, with everything stored so far analysed.
    pub async fn ranked(&self, now_ms: i64) -> Vec<Arc<AnalysedGuest>> {
        self.refresher.settled().await;
        self.current.ranked(now_ms)
    }

    /// The active guests' last kernel or command-line changes, measured, by guest.
    pub async fn changes(&self, now_ms: i64) -> HashMap<i64, Change> {
        self.refresher.settled().await;
        self.current.changes(now_ms)
    }

    /// One guest as the ranking has it; a guest that stopped reporting is analysed from its
    /// last window. `None` if there is no such guest.
    pub async fn guest(&self, guest_id: i64, now_ms: i64) -> AppResult<Option<Arc<AnalysedGuest>>> {
        self.refresher.settled().await;
        if let Some(guest) = self.current.guest(guest_id, now_ms) {
            return Ok(Some(guest));
        }
        Ok(fleet::guest(&self.db, guest_id, now_ms)
            .await?
            .map(Arc::new))
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
#[derive(Debug, Clone)]
pub struct Options {
    /// The address users reach the dashboard at, for links in notifications.
    pub external_url: String,
    /// The first retry of a failed notification waits this long; each next one twice as long.
    pub retry_base_ms: i64,
    /// Reports one agent token may send per second, sustained, and in a burst (an agent
    /// replaying its spool after an outage sends as fast as the server answers).
    pub ingest_per_second: NonZeroU32,
    pub ingest_burst: NonZeroU32,
    /// How long the server may take over one request (its body already read) before it is
    /// answered 408: a database that is stuck.
    pub request_timeout: StdDuration,
    /// Request slots and the deadline for a request's body.
    pub admission: AdmissionLimits,
    /// The database holds the simulated demo fleet: every page says so.
    pub demo: bool,
    /// How wasted CPU is priced until an admin sets it on the settings page.
    pub cost: CostModel,
    /// The session cookie is marked Secure: the server is reached over HTTPS (through a TLS
    /// reverse proxy), so browsers never send it in clear.
    pub secure_cookies: bool,
    /// The server itself serves HTTPS: responses carry HSTS.
    pub tls: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            external_url: "http://127.0.0.1:8080".into(),
            retry_base_ms: 5_000,
            ingest_per_second: NonZeroU32::new(20).expect("non-zero"),
            ingest_burst: NonZeroU32::new(200).expect("non-zero"),
            request_timeout: StdDuration::from_secs(30),
            admission: AdmissionLimits::default(),
            demo: false,
            cost: CostModel::default(),
            secure_cookies: false,
            tls: false,
        }
    }
}

/// The dashboard's session cookie.
pub const SESSION_COOKIE: &str = "tickscope_session";

/// A dashboard session lapses after this long without a request (a wall screen that refreshes
/// stays logged in).
pub const SESSION_IDLE_HOURS: i64 = 12;

pub fn router(state: AppState) -> Router {
    let store = Sessions::new(SqliteStore::new(state.db.pool().clone()));
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

/// Milliseconds since the Unix epoch, the unit of every stored time.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
