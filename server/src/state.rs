//! The server's shared state: the database, the analysed fleet and the services the handlers
//! and the background jobs share. The router that serves it is assembled in `app`.

use std::num::NonZeroU32;
use std::sync::{Arc, RwLock};
use std::time::Duration as StdDuration;

use axum::extract::FromRef;

use crate::analysis::cost::CostModel;

use crate::alerts::AlertContext;
use crate::auth::throttle::LoginThrottle;
use crate::clock::{SharedClock, SystemClock};
use crate::cluster::lease::Lease;
use crate::db::{Db, StoreOutcome};
use crate::domain::TokenId;
use crate::error::{AppError, AppResult};
use crate::fleet::current::Current;
use crate::fleet::live::LiveFleet;
use crate::health::StorageStatus;
use crate::http::admission::{Admission, AdmissionLimits, RequestTimeout};
use crate::ingest::ValidReport;
use crate::intake::Intake;
use crate::metrics::Metrics;

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub options: Arc<Options>,
    /// The cost model in force: `options.cost` until an admin saves one on the settings page.
    cost: Arc<RwLock<CostModel>>,
    /// Every active guest, analysed and kept current as reports are stored: what the pages and
    /// the API rank. Readers never wait for it.
    pub fleet: LiveFleet,
    /// The one writer of reports and guests' facts (group commit; see [`Intake`]).
    pub intake: Intake,
    /// The server's own counters, for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Wakes the notification sender when an evaluation wrote something to the outbox.
    pub notifier: Arc<tokio::sync::Notify>,
    /// Failed logins per name, to hold back guessing.
    pub login_throttle: Arc<LoginThrottle>,
    /// Reports per agent token, to keep one token from flooding the server.
    pub ingest_limiter: Arc<governor::DefaultKeyedRateLimiter<TokenId>>,
    /// The request slots, and what a client may take to send a request.
    pub admission: Arc<Admission>,
    /// Whether the last report could be stored, for `/readyz`.
    pub storage: Arc<StorageStatus>,
    /// Where "now" comes from: the wall clock, or a test's manual clock.
    pub clock: SharedClock,
    /// Whether this server runs the jobs that must run once among the servers on its database
    /// (the alert evaluation, the notification senders, the retention).
    pub lease: Lease,
}

/// The name under which the settings page stores the cost model.
pub const COST_MODEL_SETTING: &str = "cost_model";

impl AppState {
    /// The state of a server on `db`, with the cost model an admin saved, if any, and every
    /// active guest analysed.
    pub async fn new(db: Db, options: Options) -> AppResult<AppState> {
        Self::with_clock(db, options, Arc::new(SystemClock)).await
    }

    /// The same, reading the time from `clock`.
    pub async fn with_clock(db: Db, options: Options, clock: SharedClock) -> AppResult<AppState> {
        let cost = saved_cost_model(&db, &options.cost).await?;
        let started = std::time::Instant::now();
        let now_ms = clock.now_ms();
        let current = Current::load(&db, now_ms).await?;
        tracing::info!(
            guests = current.ranked(now_ms).len(),
            took_ms = started.elapsed().as_millis() as u64,
            "analysed the active guests"
        );
        let fleet = LiveFleet::start(db.clone(), current);
        let lease = Lease::start(&db).await;
        Ok(AppState {
            lease,
            intake: Intake::start(db.clone(), fleet.clone(), clock.clone()),
            fleet,
            db,
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
            clock,
        })
    }

    /// Stores a report (with the reports that arrive with it, in one transaction), and brings
    /// the live fleet up to date with it before it returns.
    pub async fn store_report(
        &self,
        report: &ValidReport,
        token_id: TokenId,
        received_ms: i64,
    ) -> AppResult<StoreOutcome> {
        let outcome = self
            .intake
            .store_report(Arc::new(report.clone()), token_id, received_ms)
            .await;
        self.storage.record(&outcome, self.clock.now_ms());
        let outcome = outcome?;
        Ok(outcome)
    }

    /// The cost model in force.
    pub fn cost_model(&self) -> CostModel {
        self.cost.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reads a setting another server saved and puts it in force here.
    pub async fn setting_saved_elsewhere(&self, name: &str) -> AppResult<()> {
        if name == COST_MODEL_SETTING {
            let model = saved_cost_model(&self.db, &self.options.cost).await?;
            *self.cost.write().unwrap_or_else(|e| e.into_inner()) = model;
        }
        Ok(())
    }

    /// Stores a new cost model and puts it in force.
    pub async fn set_cost_model(&self, model: CostModel, by: &str) -> AppResult<()> {
        let json = serde_json::to_string(&model)
            .map_err(|e| AppError::encode("the cost model as JSON", e))?;
        self.db
            .save_setting(COST_MODEL_SETTING, &json, by, self.clock.now_ms())
            .await?;
        *self.cost.write().unwrap_or_else(|e| e.into_inner()) = model;
        Ok(())
    }
}

/// The cost model an admin saved, else `default` (the command line's).
async fn saved_cost_model(db: &Db, default: &CostModel) -> AppResult<CostModel> {
    let saved = db.setting(COST_MODEL_SETTING).await?;
    Ok(
        match saved.as_deref().map(serde_json::from_str::<CostModel>) {
            Some(Ok(model)) => model,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "the saved cost model is unreadable; using the command line's");
                default.clone()
            }
            None => default.clone(),
        },
    )
}

/// The parts of the state that extractors, middleware and background jobs take by themselves
/// (`State<Db>`, axum's `FromRef`), so that they depend on what they use, not on the whole state.
impl FromRef<AppState> for Db {
    fn from_ref(state: &AppState) -> Db {
        state.db.clone()
    }
}

impl FromRef<AppState> for Arc<Admission> {
    fn from_ref(state: &AppState) -> Arc<Admission> {
        state.admission.clone()
    }
}

impl FromRef<AppState> for RequestTimeout {
    fn from_ref(state: &AppState) -> RequestTimeout {
        RequestTimeout(state.options.request_timeout)
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

impl FromRef<AppState> for LiveFleet {
    fn from_ref(state: &AppState) -> LiveFleet {
        state.fleet.clone()
    }
}

impl FromRef<AppState> for SharedClock {
    fn from_ref(state: &AppState) -> SharedClock {
        state.clock.clone()
    }
}

impl FromRef<AppState> for AlertContext {
    fn from_ref(state: &AppState) -> AlertContext {
        AlertContext {
            db: state.db.clone(),
            fleet: state.fleet.clone(),
            external_url: state.options.external_url.clone(),
            retry_base_ms: state.options.retry_base_ms,
            metrics: state.metrics.clone(),
            notifier: state.notifier.clone(),
            clock: state.clock.clone(),
            lease: state.lease.clone(),
        }
    }
}

impl FromRef<AppState> for Lease {
    fn from_ref(state: &AppState) -> Lease {
        state.lease.clone()
    }
}
