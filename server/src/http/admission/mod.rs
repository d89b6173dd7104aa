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
//!   from everyone else (`kind`, `credential`, `lookups`).
//! - Each credential has at most [`Budgets::requests_per_credential`] requests in flight (a client
//!   address without one, [`Budgets::requests_per_address`]); beyond, 429 at once (`spend`).
//! - A report's or a guest's facts' rate is checked before their body is read (`rates`).
//! - A body holds the bytes that have arrived, against its credential's budget and the server's,
//!   growing up to its role's limit: never the whole limit up front, so a body that trickles in
//!   holds what it sent, nothing more (`body_meter`).
//! - Then a slot for the credential it spends for waits briefly, then is answered 503 with
//!   `Retry-After`: never a silent stall (`slots`). Senders (an agent's or a guest's token),
//!   users (a session or a viewer's token) and requests without a credential (logins hash
//!   passwords; a forged or expired session cookie counts as none) each have slots of their
//!   own, so that neither a fleet reporting faster than it is stored nor a flood of logins
//!   keeps the others waiting.
//! - The answer holds the slot and the credential's share until its last byte, and must be read
//!   within [`AdmissionLimits::answer_timeout`]; a streamed answer also takes one of its
//!   credential's streams ([`Spend::stream`]).
//!
//! What every request shares is [`Admission`] (`shared`); the numbers it is made with are in
//! `limits`. This module is the middleware that takes a request through those steps.
//!
//! [`Budgets::requests_per_credential`]: crate::budgets::Budgets::requests_per_credential
//! [`Budgets::requests_per_address`]: crate::budgets::Budgets::requests_per_address

mod body_meter;
mod credential;
mod kind;
mod limits;
mod lookups;
mod rates;
mod shared;
mod slots;
mod spend;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub use limits::{
    AdmissionLimits, MAX_AGENT_BODY_BYTES, MAX_FORM_BODY_BYTES, MAX_OTHER_TOKEN_BODY_BYTES,
    RequestTimeout,
};
pub use shared::{Admission, AdmissionSettings};
pub use spend::{Spend, take_stream};

use super::client::{ConnectedFrom, client_address};
use super::guarded_body::guarded;
use crate::db::Db;
use crate::error::AppError;
use kind::{Kind, kind};
use slots::{busy, wait_for};

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
    let (held, body_limit) = match credential::who(&admission, &db, kind, client, &mut parts).await
    {
        Ok(found) => found,
        Err(e) => return e.into_response(),
    };
    let metrics = &admission.metrics;
    if let Err(e) = admission
        .rates
        .before_body(&parts, held.credential(), metrics)
    {
        return e.into_response();
    }
    let spend = Spend::new(held);
    let read = admission
        .body
        .read(&parts, body, body_limit, &spend, metrics)
        .await;
    let (bytes, body_permit) = match read {
        Ok(read) => read,
        Err(e) => return e.into_response(),
    };
    if let Err(e) = admission
        .rates
        .report_bytes(&parts, spend.credential(), bytes.len(), metrics)
    {
        return e.into_response();
    }
    let slots = admission.slots_of(spend.credential());
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
