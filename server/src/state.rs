//! The server's shared state: the database, the analysed fleet and the services the handlers
//! and the background jobs share. The router that serves it is assembled in `app`.

use std::num::NonZeroU32;
use std::sync::{Arc, RwLock};
use std::time::Duration as StdDuration;

use axum::extract::FromRef;

use crate::analysis::cost::CostModel;

use crate::alerts::AlertContext;
use crate::alerts::client::Reach;
use crate::auth::NewTokens;
use crate::auth::session_store::Sessions;
use crate::auth::throttle::LoginThrottle;
use crate::budgets::Budgets;
use crate::clock::{SharedClock, SystemClock};
use crate::db::{Db, StoreOutcome};
use crate::domain::Network;
use crate::domain::TokenId;
use crate::error::{AppError, AppResult};
use crate::fleet::live::LiveFleet;
use crate::fleet::state::FleetState;
use crate::fleet::trend::FleetTrend;
use crate::health::StorageStatus;
use crate::http::admission::{Admission, AdmissionLimits, AdmissionSettings, RequestTimeout};
use crate::http::listener::Proxies;
use crate::http::spending::Credential;
use crate::ingest::ValidReport;
use crate::intake::{
    DEFAULT_FOLLOW_EVERY_S, GATHER_ELSEWHERE, GuestLimits, Intake, MOST_HOSTS_A_READ, Pace,
};
use crate::lease::Lease;
use crate::logging::WarningBudget;
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
    /// The fleet over time, for the overview's chart and the API.
    pub trend: Arc<FleetTrend>,
    /// The one writer of reports and guests' facts (group commit; see [`Intake`]).
    pub intake: Intake,
    /// The server's own counters, for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Wakes the notification sender when an evaluation wrote something to the outbox.
    pub notifier: Arc<tokio::sync::Notify>,
    /// Tokens made on the settings page, until their page shows them.
    pub new_tokens: Arc<NewTokens>,
    /// Failed logins per name, to hold back guessing.
    pub login_throttle: Arc<LoginThrottle>,
    /// Warnings each credential's requests may write to the log.
    pub warnings: Arc<WarningBudget<Credential>>,
    /// Guest samples per agent token, to keep one token's reports from taking the writer.
    pub guest_samples_limiter: Arc<governor::DefaultKeyedRateLimiter<TokenId>>,
    /// Exports that read every guest's history (`guests.csv?history=true`) made at once.
    pub history_exports: Arc<tokio::sync::Semaphore>,
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

/// Exports with every guest's history made at once: each reads the database's heaviest query
/// a batch at a time; two keep the pool's other connections for everyone else.
const HISTORY_EXPORTS: usize = 2;

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
        let current = FleetState::load(&db, now_ms).await?;
        tracing::info!(
            guests = current.ranked(now_ms).len(),
            took_ms = started.elapsed().as_millis() as u64,
            "analysed the active guests"
        );
        let fleet = LiveFleet::start(db.clone(), current);
        let lease = Lease::start(&db).await;
        let metrics = Arc::new(Metrics::default());
        let budgets = options.budgets;
        let admission = Admission::new(
            AdmissionSettings {
                limits: options.admission,
                budgets,
                trusted_proxies: options.proxies.trusted.clone(),
                reports_per_second: options.ingest_per_second,
                reports_burst: options.ingest_burst,
            },
            Sessions::new(db.session_store()),
            metrics.clone(),
        );
        let samples_per_second =
            NonZeroU32::new(budgets.guest_samples_per_token_per_second).unwrap_or(NonZeroU32::MIN);
        // Two of the largest reports at once, so that a host of that size is never refused.
        let samples_burst = NonZeroU32::new(
            u32::try_from(budgets.guests_per_report.saturating_mul(2)).unwrap_or(u32::MAX),
        )
        .unwrap_or(NonZeroU32::MIN)
        .max(samples_per_second);
        Ok(AppState {
            lease,
            intake: Intake::start(
                db.clone(),
                fleet.clone(),
                clock.clone(),
                GuestLimits::of(&budgets),
                Pace {
                    gather: GATHER_ELSEWHERE,
                    every: options.follow_every,
                    most_hosts: MOST_HOSTS_A_READ,
                },
                metrics.clone(),
            ),
            fleet,
            trend: Arc::new(FleetTrend::default()),
            db,
            metrics,
            notifier: Arc::new(tokio::sync::Notify::new()),
            login_throttle: Arc::new(LoginThrottle::default()),
            new_tokens: Arc::new(NewTokens::default()),
            warnings: Arc::new(WarningBudget::new(
                budgets.warnings_per_credential_per_minute,
            )),
            guest_samples_limiter: Arc::new(governor::RateLimiter::keyed(
                governor::Quota::per_second(samples_per_second).allow_burst(samples_burst),
            )),
            history_exports: Arc::new(tokio::sync::Semaphore::new(HISTORY_EXPORTS)),
            cost: Arc::new(RwLock::new(cost)),
            admission: Arc::new(admission),
            storage: Arc::new(StorageStatus::default()),
            options: Arc::new(options),
            clock,
        })
    }

    /// Stores a report (with the reports that arrive with it, in one transaction), and brings
    /// the live fleet up to date with it before it returns.
    pub async fn ingest_report(
        &self,
        report: Arc<ValidReport>,
        token_id: TokenId,
        received_ms: i64,
    ) -> AppResult<StoreOutcome> {
        let outcome = self
            .intake
            .submit_report(report, token_id, received_ms)
            .await;
        self.storage.record(&outcome, self.clock.now_ms());
        let outcome = outcome?;
        Ok(outcome)
    }

    /// Whether a line about what `sender` (a request's credential; none: an unknown address)
    /// did may be written to the log now, within its share of lines a minute: `Some` with how
    /// many of its lines were held back since its last one, or `None` (held back and counted).
    pub fn may_log(&self, sender: Option<Credential>) -> Option<u64> {
        let sender = sender.unwrap_or(Credential::Address(std::net::IpAddr::V4(
            std::net::Ipv4Addr::UNSPECIFIED,
        )));
        let allowed = self.warnings.allow(sender, self.clock.now_ms());
        if allowed.is_none() {
            self.metrics.warnings_held_back(1);
        }
        allowed
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
    /// What one credential and one input may spend.
    pub budgets: Budgets,
    /// The load balancers trusted to say who their clients are.
    pub proxies: Proxies,
    /// Networks notifications may be sent to though they are the server's own or its link's
    /// (`serve --allow-receiver-networks`; see `alerts::client::Reach`).
    pub receiver_networks: Vec<Network>,
    /// The database holds the simulated demo fleet: every page says so.
    pub demo: bool,
    /// How wasted CPU is priced until an admin sets it on the settings page.
    pub cost: CostModel,
    /// The session cookie is marked Secure: the server is reached over HTTPS (through a TLS
    /// reverse proxy), so browsers never send it in clear.
    pub secure_cookies: bool,
    /// The server itself serves HTTPS: responses carry HSTS.
    pub tls: bool,
    /// A host another server on the database stores reports of is read here at most this
    /// often (`serve --follow-every`; see `intake::elsewhere`).
    pub follow_every: StdDuration,
    /// How often the alert rules are evaluated (`serve --alert-interval`).
    pub alert_interval: StdDuration,
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
            budgets: Budgets::default(),
            proxies: Proxies::default(),
            receiver_networks: Vec::new(),
            demo: false,
            cost: CostModel::default(),
            secure_cookies: false,
            tls: false,
            follow_every: StdDuration::from_secs(DEFAULT_FOLLOW_EVERY_S),
            alert_interval: StdDuration::from_secs(15),
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
            every: state.options.alert_interval,
            metrics: state.metrics.clone(),
            notifier: state.notifier.clone(),
            clock: state.clock.clone(),
            lease: state.lease.clone(),
            intake: state.intake.clone(),
            reach: Reach {
                allowed: state.options.receiver_networks.clone(),
            },
        }
    }
}

impl FromRef<AppState> for Lease {
    fn from_ref(state: &AppState) -> Lease {
        state.lease.clone()
    }
}
