//! Which requests get served, and when: every request spends for one credential (its token,
//! its dashboard session, or for a request without one its client's address), which may have
//! only so much in use at once; its body is read, within a deadline, before it takes one of the
//! slots that do the work; and what it took is held until its answer's last byte has gone.
//!
//! - A request with a token is authenticated before its body is read (a wrong token is answered
//!   401 at once, and only agent tokens may send the large bodies reports need); a session
//!   cookie is checked against the session store (a forged one spends as a request without a
//!   credential). Lookups have a few slots of their own, and while one runs the request spends
//!   for its client's address, so a flood of made-up tokens or cookies cannot take the database
//!   from everyone else.
//! - Each credential has at most [`Budgets::requests_per_credential`] requests in flight (a client
//!   address without one, [`Budgets::requests_per_address`]); beyond, 429 at once.
//! - A report's or a guest's facts' rate is checked before their body is read.
//! - A body holds the bytes that have arrived, against its credential's budget and the server's,
//!   growing up to its role's limit: never the whole limit up front, so a body that trickles in
//!   holds what it sent, nothing more.
//! - Then a slot of the request's kind (with a credential, or without: logins hash passwords)
//!   waits briefly, then is answered 503 with `Retry-After`: never a silent stall.
//! - The answer holds the slot and the credential's share until its last byte, and must be read
//!   within [`AdmissionLimits::answer_timeout`]; a streamed answer also takes one of its
//!   credential's streams ([`Spend::stream`]).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower_sessions::SessionStore;

use super::client::{ConnectedFrom, Network, client_address};
use super::guarded_body::guarded;
use super::spending::{Credential, Held, Limits, Spending, Spent};
use crate::auth::session::SESSION_COOKIE;
use crate::auth::session_store::Sessions;
use crate::auth::{Caller, Role};
use crate::budgets::Budgets;
use crate::db::Db;
use crate::domain::TokenId;
use crate::error::AppError;
use crate::metrics::Metrics;

/// How many requests of each kind are served at once, and how long a client may take.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionLimits {
    /// Requests with an agent's token or a dashboard session, served at once.
    pub credentialed_slots: usize,
    /// Requests without a credential (the login page, logins, the stylesheet), served at once.
    /// Each login hashes a password with argon2 (tens of milliseconds of CPU and 19 MiB), so a
    /// few suffice.
    pub anonymous_slots: usize,
    /// A request waits this long for a slot before it is answered 503.
    pub queue_timeout: Duration,
    /// A request's whole body must arrive within this long, or it is answered 408.
    pub body_timeout: Duration,
    /// An answer must be read to its end within this long (a streamed export of a large fleet
    /// included), or it is cut off: its slot is not held for ever by a client reading slowly.
    pub answer_timeout: Duration,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        AdmissionLimits {
            credentialed_slots: 64,
            anonymous_slots: 8,
            queue_timeout: Duration::from_secs(1),
            body_timeout: Duration::from_secs(20),
            answer_timeout: Duration::from_secs(600),
        }
    }
}

/// How long the server may take over one request once its body is read (the options'
/// `request_timeout`), before it is answered 408: a database that is stuck.
#[derive(Debug, Clone, Copy)]
pub struct RequestTimeout(pub Duration);

/// The largest body an agent token may send: a report of 10,000 guests is about 3 MB.
pub const MAX_AGENT_BODY_BYTES: usize = 16 * 1024 * 1024;
/// The largest body any other token may send: a guest's facts are a few KiB (and guest tokens
/// live inside guests, which are not to be trusted with the server's memory).
pub const MAX_OTHER_TOKEN_BODY_BYTES: usize = 256 * 1024;
/// The largest body of a request without a token: the dashboard's forms are a few hundred
/// bytes. With the connection cap this bounds the memory slow clients can make the server hold.
pub const MAX_FORM_BODY_BYTES: usize = 64 * 1024;
/// How long a client that found no free slot is asked to wait.
const BUSY_RETRY_AFTER_S: u64 = 2;
/// How long a credential that spent its budget of requests is asked to wait.
const SPENT_RETRY_AFTER_S: u64 = 1;
/// Token and session lookups at once: each is one indexed read, so a few keep up with any
/// fleet, and leave the database's other connections to the requests already admitted.
const LOOKUP_SLOTS: usize = 4;
/// `/readyz` probes at once (each may write to the database): a flood of probes waits for
/// these, never for anyone else's.
const PROBE_SLOTS: usize = 2;
/// Bodies being read at once may hold this much memory in all: every connection's 64 KiB at the
/// default cap, or a few dozen of the largest reports.
const MAX_BUFFERED_BODY_BYTES: usize = 256 * 1024 * 1024;
/// How long a session found in the store counts as checked (a logout within it still ends the
/// session for the pages, which check it themselves; this only says which budget it spends).
const SESSION_CHECKED_FOR_MS: i64 = 60_000;
/// Sessions remembered as checked at most.
const MAX_CHECKED_SESSIONS: usize = 10_000;
/// How long a token found in the database is taken as it was without looking it up again (a
/// token revoked on another server, or with the command line, works this long at most; one
/// revoked on this server's settings page stops at once).
const TOKEN_CHECKED_FOR_MS: i64 = 5_000;
/// Tokens remembered as checked at most.
const MAX_CHECKED_TOKENS: usize = 10_000;

/// The slots and budgets, shared by every request of one server.
pub struct Admission {
    limits: AdmissionLimits,
    budgets: Budgets,
    trusted_proxies: Vec<Network>,
    credentialed: Arc<Semaphore>,
    anonymous: Arc<Semaphore>,
    probes: Arc<Semaphore>,
    lookups: Arc<Semaphore>,
    /// One permit per byte of body being read or handled.
    body_bytes: Arc<Semaphore>,
    spending: Arc<Spending>,
    /// Reports per agent token, checked before the report is read.
    reports: DefaultKeyedRateLimiter<TokenId>,
    /// Facts deliveries per guest token, checked before they are read.
    facts: DefaultKeyedRateLimiter<TokenId>,
    /// KiB of reports per agent token, checked once a report is read, before it is parsed.
    report_kib: DefaultKeyedRateLimiter<TokenId>,
    /// Tokens found in the database by the SHA-256 of the token, and until when (ms) that holds.
    checked_tokens: Mutex<HashMap<String, (Caller, i64)>>,
    sessions: Sessions,
    /// Session ids found in the store, and until when (ms) that holds.
    checked_sessions: Mutex<HashMap<i128, i64>>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("limits", &self.limits)
            .field("budgets", &self.budgets)
            .finish_non_exhaustive()
    }
}

/// What [`Admission::new`] is made of.
pub struct AdmissionSettings {
    pub limits: AdmissionLimits,
    pub budgets: Budgets,
    pub trusted_proxies: Vec<Network>,
    /// Reports one agent token may send per second, and at once above that.
    pub reports_per_second: NonZeroU32,
    pub reports_burst: NonZeroU32,
}

impl Admission {
    pub fn new(
        settings: AdmissionSettings,
        sessions: Sessions,
        metrics: Arc<Metrics>,
    ) -> Admission {
        let AdmissionSettings {
            limits,
            budgets,
            trusted_proxies,
            reports_per_second,
            reports_burst,
        } = settings;
        let facts_per_minute =
            NonZeroU32::new(budgets.facts_per_guest_token_per_minute).unwrap_or(NonZeroU32::MIN);
        let kib_per_second =
            NonZeroU32::new(budgets.report_kib_per_token_per_second).unwrap_or(NonZeroU32::MIN);
        // Two of the largest reports at once: an agent catching up after an outage sends them.
        let kib_burst = NonZeroU32::new((2 * MAX_AGENT_BODY_BYTES / 1024) as u32)
            .unwrap_or(NonZeroU32::MIN)
            .max(kib_per_second);
        Admission {
            limits,
            budgets,
            trusted_proxies,
            credentialed: Arc::new(Semaphore::new(limits.credentialed_slots)),
            anonymous: Arc::new(Semaphore::new(limits.anonymous_slots)),
            probes: Arc::new(Semaphore::new(PROBE_SLOTS)),
            lookups: Arc::new(Semaphore::new(LOOKUP_SLOTS)),
            body_bytes: Arc::new(Semaphore::new(MAX_BUFFERED_BODY_BYTES)),
            spending: Arc::new(Spending::default()),
            reports: RateLimiter::keyed(
                Quota::per_second(reports_per_second).allow_burst(reports_burst),
            ),
            facts: RateLimiter::keyed(
                Quota::per_minute(facts_per_minute).allow_burst(facts_per_minute),
            ),
            report_kib: RateLimiter::keyed(
                Quota::per_second(kib_per_second).allow_burst(kib_burst),
            ),
            checked_tokens: Mutex::new(HashMap::new()),
            sessions,
            checked_sessions: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// What each credential has in use now (for the tests that it is given back).
    pub fn spending(&self) -> &Spending {
        &self.spending
    }

    fn limits_of(&self, credential: Credential) -> Limits {
        let requests = match credential {
            Credential::Address(_) => self.budgets.requests_per_address,
            _ => self.budgets.requests_per_credential,
        };
        Limits {
            requests,
            streams: self.budgets.streams_per_credential,
            body_bytes: self.budgets.body_bytes_per_credential,
        }
    }

    /// One more request of `credential`, or 429 saying which budget it spent.
    fn spend(&self, credential: Credential) -> Result<Held, AppError> {
        self.spending
            .request(credential, self.limits_of(credential))
            .map_err(|spent| self.refuse(spent, credential))
    }

    /// Counts a refusal and says it.
    fn refuse(&self, spent: Spent, credential: Credential) -> AppError {
        self.metrics.refused(spent.budget(), credential.kind());
        AppError::TooManyRequests {
            message: spent.message(),
            retry_after_s: SPENT_RETRY_AFTER_S,
        }
    }

    /// The session the cookie names, if it was found in the store within the last minute.
    fn checked_session(&self, cookie: &str, now_ms: i64) -> Option<i128> {
        let id = tower_sessions::session::Id::from_str(cookie).ok()?;
        let mut checked = self.lock_sessions();
        match checked.get(&id.0) {
            Some(until_ms) if *until_ms > now_ms => Some(id.0),
            Some(_) => {
                checked.remove(&id.0);
                None
            }
            None => None,
        }
    }

    /// Whether the session the cookie names is one the store holds, unexpired (remembered for a
    /// minute when it is).
    async fn session_exists(&self, cookie: &str, now_ms: i64) -> Option<i128> {
        let id = tower_sessions::session::Id::from_str(cookie).ok()?;
        let record = self.sessions.load(&id).await.ok()??;
        if record.expiry_date <= time_now() {
            return None;
        }
        let mut checked = self.lock_sessions();
        if checked.len() >= MAX_CHECKED_SESSIONS {
            checked.retain(|_, until_ms| *until_ms > now_ms);
            if checked.len() >= MAX_CHECKED_SESSIONS {
                checked.clear();
            }
        }
        checked.insert(id.0, now_ms + SESSION_CHECKED_FOR_MS);
        Some(id.0)
    }

    /// The caller of the token whose SHA-256 is `hash`, from the tokens checked within the last
    /// few seconds, else from the database (remembered then).
    async fn token_caller(&self, db: &Db, hash: &str, now_ms: i64) -> Result<Caller, AppError> {
        {
            let checked = self.lock_tokens();
            if let Some((caller, until_ms)) = checked.get(hash)
                && *until_ms > now_ms
            {
                return Ok(caller.clone());
            }
        }
        let caller = crate::auth::caller_of_token(db, hash).await?;
        let mut checked = self.lock_tokens();
        if checked.len() >= MAX_CHECKED_TOKENS {
            checked.retain(|_, (_, until_ms)| *until_ms > now_ms);
            if checked.len() >= MAX_CHECKED_TOKENS {
                checked.clear();
            }
        }
        checked.insert(
            hash.to_string(),
            (caller.clone(), now_ms + TOKEN_CHECKED_FOR_MS),
        );
        Ok(caller)
    }

    /// Forgets what it remembers of a token (it was just revoked).
    pub fn forget_token(&self, id: TokenId) {
        self.lock_tokens().retain(
            |_, (caller, _)| !matches!(caller, Caller::Token { token_id, .. } if *token_id == id),
        );
    }

    fn lock_tokens(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Caller, i64)>> {
        self.checked_tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<i128, i64>> {
        self.checked_sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

fn time_now() -> tower_sessions::cookie::time::OffsetDateTime {
    tower_sessions::cookie::time::OffsetDateTime::now_utc()
}

/// A request's share of its credential's budget, in its extensions: a handler that streams its
/// answer takes one of the credential's streams with it.
#[derive(Clone)]
pub struct Spend(Arc<Mutex<Held>>);

impl Spend {
    /// One more streamed answer of the request's credential, held until the answer's last byte;
    /// 429 when it reads as many as it may already.
    pub fn stream(&self, metrics: &Metrics) -> Result<(), AppError> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.stream().map_err(|spent| {
            metrics.refused(spent.budget(), held.credential().kind());
            AppError::TooManyRequests {
                message: spent.message(),
                retry_after_s: SPENT_RETRY_AFTER_S,
            }
        })
    }

    /// Who the request spends for.
    pub fn credential(&self) -> Credential {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .credential()
    }
}

/// One of the caller's streamed answers, held until the answer's last byte (see
/// [`Spend::stream`]); nothing to count for a handler called without the admission.
pub fn take_stream(spend: Option<&Spend>, metrics: &Metrics) -> Result<(), AppError> {
    spend.map_or(Ok(()), |spend| spend.stream(metrics))
}

/// Whose budget a request spends, and which slots it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `/healthz`: no body, no work, always answered.
    Health,
    /// `/readyz`: slots of its own.
    Probe,
    /// A login hashes a password whatever cookie it carries: a request without a credential.
    Login,
    Token,
    Session,
    Anonymous,
}

fn kind(parts: &Parts) -> Kind {
    match parts.uri.path() {
        "/healthz" => return Kind::Health,
        "/readyz" => return Kind::Probe,
        _ => {}
    }
    if parts.method == Method::POST && parts.uri.path() == "/login" {
        Kind::Login
    } else if parts.headers.contains_key(header::AUTHORIZATION) {
        Kind::Token
    } else if session_cookie(parts).is_some() {
        Kind::Session
    } else {
        Kind::Anonymous
    }
}

/// The value of the session cookie the browser sent, if any; whether it names a session is
/// checked against the store (a forged one spends as a request without a credential).
fn session_cookie(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value)
}

/// The middleware: finds whose budget the request spends, checks its rate, reads its body
/// within its deadline, waits (briefly) for a slot of its kind, gives the server
/// `request_timeout` to answer, and holds what it took until the answer's last byte.
pub async fn admit(
    State(admission): State<Arc<Admission>>,
    State(RequestTimeout(request_timeout)): State<RequestTimeout>,
    State(db): State<Db>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let kind = kind(&parts);
    match kind {
        Kind::Health => return next.run(Request::from_parts(parts, body)).await,
        Kind::Probe => return probe(&admission, request_timeout, parts, body, next).await,
        _ => {}
    }
    let client = parts
        .extensions
        .get::<ConnectedFrom>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |from| {
            client_address(*from, &parts.headers, &admission.trusted_proxies)
        });
    let (held, body_limit) = match who(&admission, &db, kind, client, &mut parts).await {
        Ok(found) => found,
        Err(e) => return e.into_response(),
    };
    if let Err(e) = rate(&admission, &parts, held.credential()) {
        return e.into_response();
    }
    let spend = Spend(Arc::new(Mutex::new(held)));
    let (bytes, body_permit) = match read_body(&admission, &parts, body, body_limit, &spend).await {
        Ok(read) => read,
        Err(e) => return e.into_response(),
    };
    if let Err(e) = report_bytes(&admission, &parts, &spend, bytes.len()) {
        return e.into_response();
    }
    let slots = match kind {
        Kind::Token | Kind::Session => &admission.credentialed,
        _ => &admission.anonymous,
    };
    let Some(slot) = wait_for(slots, 1, admission.limits.queue_timeout).await else {
        return busy().into_response();
    };
    parts.extensions.insert(spend.clone());
    // The server's own part has its deadline too (a database that is stuck); a report's
    // transaction that is cut off rolls back.
    let work = next.run(Request::from_parts(parts, Body::from(bytes)));
    let response = match tokio::time::timeout(request_timeout, work).await {
        Ok(response) => response,
        Err(_) => AppError::TimedOut(format!(
            "the server could not answer within {} s; what the request changed may or may not \
             have been kept (a report sent again is stored once)",
            request_timeout.as_secs()
        ))
        .into_response(),
    };
    // The request's body was read and handled: its bytes are free again. Its slot and its
    // credential's share go with the answer's last byte.
    drop(body_permit);
    let (parts, body) = response.into_parts();
    let body = guarded(body, (spend, slot), admission.limits.answer_timeout);
    Response::from_parts(parts, body)
}

/// `/readyz`, under a few slots of its own and the request timeout: a flood of probes, or a
/// probe stuck on the database, waits for nobody else's slots, and nobody waits for it.
async fn probe(
    admission: &Admission,
    request_timeout: Duration,
    parts: Parts,
    body: Body,
    next: Next,
) -> Response {
    let Some(_slot) = wait_for(&admission.probes, 1, admission.limits.queue_timeout).await else {
        return busy().into_response();
    };
    match tokio::time::timeout(request_timeout, next.run(Request::from_parts(parts, body))).await {
        Ok(response) => response,
        Err(_) => AppError::TimedOut(format!(
            "the readiness probe did not finish within {} s",
            request_timeout.as_secs()
        ))
        .into_response(),
    }
}

/// Whose budget the request spends, with one of its requests taken, and the most its body may
/// hold. A token is looked up (and left in the extensions for the handler's extractor), a
/// session cookie checked; while either runs, the request spends for its client's address.
async fn who(
    admission: &Admission,
    db: &Db,
    kind: Kind,
    client: IpAddr,
    parts: &mut Parts,
) -> Result<(Held, usize), AppError> {
    let anonymous = Credential::Address(client);
    match kind {
        Kind::Token => {
            let now_ms = crate::clock::now_ms();
            let hash = crate::auth::bearer_hash(parts)?.unwrap_or_default();
            let caller = {
                let looking = admission.spend(anonymous)?;
                let Some(_lookup) =
                    wait_for(&admission.lookups, 1, admission.limits.queue_timeout).await
                else {
                    return Err(busy());
                };
                let caller = admission.token_caller(db, &hash, now_ms).await?;
                drop(looking);
                caller
            };
            let (credential, limit) = match caller {
                Caller::Token { token_id, role } => (
                    Credential::Token { id: token_id, role },
                    match role {
                        Role::Agent => MAX_AGENT_BODY_BYTES,
                        _ => MAX_OTHER_TOKEN_BODY_BYTES,
                    },
                ),
                Caller::User(_) => (anonymous, MAX_FORM_BODY_BYTES),
            };
            // The handler's extractor takes it from here instead of looking it up again.
            parts.extensions.insert(caller);
            Ok((admission.spend(credential)?, limit))
        }
        Kind::Session => {
            let now_ms = crate::clock::now_ms();
            let cookie = session_cookie(parts).unwrap_or_default();
            if let Some(id) = admission.checked_session(cookie, now_ms) {
                return Ok((
                    admission.spend(Credential::Session(id))?,
                    MAX_FORM_BODY_BYTES,
                ));
            }
            let credential = {
                let looking = admission.spend(anonymous)?;
                let Some(_lookup) =
                    wait_for(&admission.lookups, 1, admission.limits.queue_timeout).await
                else {
                    return Err(busy());
                };
                let found = admission.session_exists(cookie, now_ms).await;
                drop(looking);
                found.map_or(anonymous, Credential::Session)
            };
            Ok((admission.spend(credential)?, MAX_FORM_BODY_BYTES))
        }
        _ => Ok((admission.spend(anonymous)?, MAX_FORM_BODY_BYTES)),
    }
}

/// A report's and a guest's facts' rates, checked before their bodies are read.
fn rate(admission: &Admission, parts: &Parts, credential: Credential) -> Result<(), AppError> {
    let Credential::Token { id, role } = credential else {
        return Ok(());
    };
    if parts.method != Method::POST {
        return Ok(());
    }
    let (limiter, budget, what) = match (role, parts.uri.path()) {
        (Role::Agent, "/api/v1/reports") => (
            &admission.reports,
            "reports",
            "this agent token sends reports faster than the server takes them \
             (serve --ingest-rate, --ingest-burst); retry later",
        ),
        (Role::Guest, "/api/v1/guest-facts") => (
            &admission.facts,
            "facts",
            "this guest token delivers facts more often than the server takes them \
             (serve --facts-per-guest-token-per-minute); retry later",
        ),
        _ => return Ok(()),
    };
    limiter.check_key(&id).map_err(|not_until| {
        use governor::clock::{Clock, DefaultClock};
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        admission.metrics.refused(budget, credential.kind());
        AppError::TooManyRequests {
            message: what.into(),
            retry_after_s: wait.as_secs().max(1),
        }
    })
}

/// A report's bytes, from its agent token's budget, once it is read and before it is parsed: a
/// token cannot make the server parse more than its share of JSON, valid or not.
fn report_bytes(
    admission: &Admission,
    parts: &Parts,
    spend: &Spend,
    bytes: usize,
) -> Result<(), AppError> {
    let credential = spend.credential();
    let Credential::Token {
        id,
        role: Role::Agent,
    } = credential
    else {
        return Ok(());
    };
    if parts.method != Method::POST || parts.uri.path() != "/api/v1/reports" {
        return Ok(());
    }
    let kib = NonZeroU32::new(u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX))
        .unwrap_or(NonZeroU32::MIN);
    let refused = |wait_s: u64| {
        admission.metrics.refused("report_bytes", credential.kind());
        AppError::TooManyRequests {
            message: format!(
                "this agent token sends more report bytes than the server reads from one token \
                 ({} KiB a second, serve --ingest-kib-rate); retry later",
                admission.budgets.report_kib_per_token_per_second
            ),
            retry_after_s: wait_s.max(1),
        }
    };
    match admission.report_kib.check_key_n(&id, kib) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(not_until)) => {
            use governor::clock::{Clock, DefaultClock};
            Err(refused(
                not_until
                    .wait_time_from(DefaultClock::default().now())
                    .as_secs(),
            ))
        }
        // Larger than the burst: never, within the body limit; refused all the same.
        Err(_) => Err(refused(60)),
    }
}

/// `permits` of `semaphore`, if they come within `patience`.
async fn wait_for(
    semaphore: &Arc<Semaphore>,
    permits: u32,
    patience: Duration,
) -> Option<OwnedSemaphorePermit> {
    tokio::time::timeout(patience, semaphore.clone().acquire_many_owned(permits))
        .await
        .ok()?
        .ok()
}

fn busy() -> AppError {
    AppError::Busy {
        message: "the server is serving as many requests as it can; retry shortly".into(),
        retry_after_s: BUSY_RETRY_AFTER_S,
    }
}

fn declared_length(parts: &Parts) -> Option<u64> {
    parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// Reads the body as it arrives, each piece taken from the credential's budget and the
/// server's before it is kept, within the body's deadline; returns it with the server's bytes
/// it holds.
async fn read_body(
    admission: &Admission,
    parts: &Parts,
    body: Body,
    limit_bytes: usize,
    spend: &Spend,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), AppError> {
    let too_large = || {
        AppError::TooLarge(format!(
            "the request body is over {limit_bytes} bytes, the most this request may send"
        ))
    };
    if declared_length(parts).is_some_and(|n| n > limit_bytes as u64) {
        return Err(too_large());
    }
    let deadline = admission.limits.body_timeout;
    let read = async {
        let mut body = body;
        let mut bytes: Vec<u8> = Vec::new();
        let mut held: Option<OwnedSemaphorePermit> = None;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                AppError::BadRequest(format!("the request body could not be read: {e}"))
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if bytes.len() + data.len() > limit_bytes {
                return Err(too_large());
            }
            if data.is_empty() {
                continue;
            }
            let n = data.len();
            {
                let mut share = spend.0.lock().unwrap_or_else(|e| e.into_inner());
                share
                    .body_bytes(n)
                    .map_err(|spent| admission.refuse(spent, share.credential()))?;
            }
            let permits = u32::try_from(n).unwrap_or(u32::MAX);
            let Some(permit) = wait_for(
                &admission.body_bytes,
                permits,
                admission.limits.queue_timeout,
            )
            .await
            else {
                return Err(busy());
            };
            match held.as_mut() {
                Some(held) => held.merge(permit),
                None => held = Some(permit),
            }
            bytes.extend_from_slice(&data);
        }
        Ok((Bytes::from(bytes), held))
    };
    match tokio::time::timeout(deadline, read).await {
        Ok(read) => read,
        Err(_) => Err(AppError::TimedOut(format!(
            "the request body did not arrive within {} s",
            deadline.as_secs()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, path: &str, headers: &[(&str, &str)]) -> Parts {
        let mut request = axum::http::Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    /// Method, path, headers, and the kind of request.
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Kind);

    #[test]
    fn each_request_is_known_by_what_it_carries() {
        let session = format!("theme=dark; {SESSION_COOKIE}=abc");
        let cases: [Case; 9] = [
            ("GET", "/healthz", &[], Kind::Health),
            (
                "GET",
                "/readyz",
                &[("authorization", "Bearer x")],
                Kind::Probe,
            ),
            ("GET", "/login", &[], Kind::Anonymous),
            ("POST", "/login", &[("cookie", &session)], Kind::Login),
            ("GET", "/", &[("cookie", &session)], Kind::Session),
            (
                "GET",
                "/",
                &[("cookie", "not_tickscope_session=abc")],
                Kind::Anonymous,
            ),
            (
                "POST",
                "/api/v1/reports",
                &[("authorization", "Bearer x")],
                Kind::Token,
            ),
            ("POST", "/api/v1/reports", &[], Kind::Anonymous),
            (
                "GET",
                "/",
                &[("cookie", &session), ("authorization", "Bearer x")],
                Kind::Token,
            ),
        ];
        for (method, path, headers, expected) in cases {
            assert_eq!(
                kind(&parts(method, path, headers)),
                expected,
                "{method} {path} {headers:?}"
            );
        }
    }
}
