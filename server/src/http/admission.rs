//! Which requests get served, and when: a request's body is read, within a deadline, before it
//! takes one of the slots that do the work, and requests without a credential have slots of
//! their own.
//!
//! A client that sends its body one byte a second holds no slot anyone else needs: it is cut off
//! with 408 when its body deadline passes, and meanwhile costs a connection and a buffer of at
//! most its body limit, taken from a budget of bytes for all bodies being read. A request with a
//! token is authenticated before its body is read (a wrong token is answered 401 at once, and
//! only agent tokens may send the large bodies reports need); token lookups have a few slots of
//! their own, so a flood of made-up tokens cannot take the database from everyone else. Logins
//! and other requests without a credential share a smaller budget, so a flood of them cannot take
//! the slots agents and logged-in users need. A request that finds its budget full waits
//! briefly, then is answered 503 with `Retry-After`: never a silent stall.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio::sync::Semaphore;

use crate::auth::session::SESSION_COOKIE;
use crate::auth::{Caller, Role};
use crate::db::Db;
use crate::error::AppError;

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
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        AdmissionLimits {
            credentialed_slots: 64,
            anonymous_slots: 8,
            queue_timeout: Duration::from_secs(1),
            body_timeout: Duration::from_secs(20),
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
/// Token lookups at once: each is one indexed read, so a few keep up with any fleet, and leave
/// the database's other connections to the requests already admitted.
const TOKEN_LOOKUP_SLOTS: usize = 4;
/// Bodies being read at once may hold this much memory in all: every connection's 64 KiB at the
/// default cap, or a few dozen of the largest reports.
const MAX_BUFFERED_BODY_KIB: usize = 256 * 1024;

/// The slots, shared by every request of one server.
#[derive(Debug)]
pub struct Admission {
    limits: AdmissionLimits,
    credentialed: Arc<Semaphore>,
    anonymous: Arc<Semaphore>,
    token_lookups: Arc<Semaphore>,
    /// One permit per KiB of body being read or handled.
    body_kib: Arc<Semaphore>,
}

impl Admission {
    pub fn new(limits: AdmissionLimits) -> Admission {
        Admission {
            limits,
            credentialed: Arc::new(Semaphore::new(limits.credentialed_slots)),
            anonymous: Arc::new(Semaphore::new(limits.anonymous_slots)),
            token_lookups: Arc::new(Semaphore::new(TOKEN_LOOKUP_SLOTS)),
            body_kib: Arc::new(Semaphore::new(MAX_BUFFERED_BODY_KIB)),
        }
    }
}

/// Whose slots a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Budget {
    /// Health probes: no body, no work, always answered.
    None,
    Anonymous,
    Credentialed,
}

fn budget(parts: &Parts) -> Budget {
    if matches!(parts.uri.path(), "/healthz" | "/readyz") {
        return Budget::None;
    }
    // A login hashes a password whatever cookie it carries.
    if parts.method == Method::POST && parts.uri.path() == "/login" {
        return Budget::Anonymous;
    }
    if parts.headers.contains_key(header::AUTHORIZATION) || has_session_cookie(parts) {
        Budget::Credentialed
    } else {
        Budget::Anonymous
    }
}

/// The browser says it has a session; whether it is valid is checked later, cheaply (a forged
/// cookie gets a redirect to the login page, not a password hash).
fn has_session_cookie(parts: &Parts) -> bool {
    parts
        .headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .any(|c| {
            c.trim()
                .split_once('=')
                .is_some_and(|(name, _)| name == SESSION_COOKIE)
        })
}

/// The middleware: authenticates tokens, reads the body within its deadline, waits (briefly) for
/// a slot of the request's budget, then gives the server `request_timeout` to answer.
pub async fn admit(
    State(admission): State<Arc<Admission>>,
    State(RequestTimeout(request_timeout)): State<RequestTimeout>,
    State(db): State<Db>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let budget = budget(&parts);
    if budget == Budget::None {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let limits = admission.limits;
    let body_limit = if parts.headers.contains_key(header::AUTHORIZATION) {
        let Some(_lookup) = wait_for(&admission.token_lookups, 1, limits.queue_timeout).await
        else {
            return busy().into_response();
        };
        match Caller::from_request_parts(&mut parts, &db).await {
            Ok(caller) => {
                let limit = match caller {
                    Caller::Token {
                        role: Role::Agent, ..
                    } => MAX_AGENT_BODY_BYTES,
                    _ => MAX_OTHER_TOKEN_BODY_BYTES,
                };
                // The handler's extractor takes it from here instead of looking it up again.
                parts.extensions.insert(caller);
                limit
            }
            Err(e) => return e.into_response(),
        }
    } else {
        MAX_FORM_BODY_BYTES
    };
    let Some(_body_kib) = wait_for(
        &admission.body_kib,
        body_kib(&parts, body_limit),
        limits.queue_timeout,
    )
    .await
    else {
        return busy().into_response();
    };
    let bytes = match read_body(&parts, body, body_limit, limits.body_timeout).await {
        Ok(bytes) => bytes,
        Err(e) => return e.into_response(),
    };
    let slots = match budget {
        Budget::Anonymous => &admission.anonymous,
        _ => &admission.credentialed,
    };
    let Some(_slot) = wait_for(slots, 1, limits.queue_timeout).await else {
        return busy().into_response();
    };
    // The server's own part has its deadline too (a database that is stuck); a report's
    // transaction that is cut off rolls back.
    let work = next.run(Request::from_parts(parts, Body::from(bytes)));
    match tokio::time::timeout(request_timeout, work).await {
        Ok(response) => response,
        Err(_) => AppError::TimedOut(format!(
            "the server could not answer within {} s; what the request changed may or may not \
             have been kept (a report sent again is stored once)",
            request_timeout.as_secs()
        ))
        .into_response(),
    }
}

/// `permits` of `semaphore`, if they come within `patience`.
async fn wait_for(
    semaphore: &Arc<Semaphore>,
    permits: u32,
    patience: Duration,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
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

/// KiB of the body budget a request reserves: what it announces, or its limit if it does not say
/// (a chunked body); at least one, so that every request counts.
fn body_kib(parts: &Parts, limit_bytes: usize) -> u32 {
    let bytes = declared_length(parts).map_or(limit_bytes as u64, |n| n.min(limit_bytes as u64));
    u32::try_from(bytes.div_ceil(1024).max(1)).unwrap_or(u32::MAX)
}

fn declared_length(parts: &Parts) -> Option<u64> {
    parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

async fn read_body(
    parts: &Parts,
    body: Body,
    limit_bytes: usize,
    deadline: Duration,
) -> Result<axum::body::Bytes, AppError> {
    let too_large = || {
        AppError::TooLarge(format!(
            "the request body is over {limit_bytes} bytes, the most this request may send"
        ))
    };
    if declared_length(parts).is_some_and(|n| n > limit_bytes as u64) {
        return Err(too_large());
    }
    match tokio::time::timeout(deadline, Limited::new(body, limit_bytes).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => Err(too_large()),
        Ok(Err(e)) => Err(AppError::BadRequest(format!(
            "the request body could not be read: {e}"
        ))),
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

    /// Method, path, headers, and the budget the request takes.
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Budget);

    #[test]
    fn each_request_takes_the_slots_of_its_kind() {
        let session = format!("theme=dark; {SESSION_COOKIE}=abc");
        let cases: [Case; 8] = [
            ("GET", "/healthz", &[], Budget::None),
            (
                "GET",
                "/readyz",
                &[("authorization", "Bearer x")],
                Budget::None,
            ),
            ("GET", "/login", &[], Budget::Anonymous),
            ("POST", "/login", &[("cookie", &session)], Budget::Anonymous),
            ("GET", "/", &[("cookie", &session)], Budget::Credentialed),
            (
                "GET",
                "/",
                &[("cookie", "not_tickscope_session=abc")],
                Budget::Anonymous,
            ),
            (
                "POST",
                "/api/v1/reports",
                &[("authorization", "Bearer x")],
                Budget::Credentialed,
            ),
            ("POST", "/api/v1/reports", &[], Budget::Anonymous),
        ];
        for (method, path, headers, expected) in cases {
            assert_eq!(
                budget(&parts(method, path, headers)),
                expected,
                "{method} {path} {headers:?}"
            );
        }
    }
}
