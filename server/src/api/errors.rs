//! The answers every read of the API may get besides its own, described once for the OpenAPI
//! document instead of on each operation.

use crate::error::ErrorBody;

/// A read's failures: no caller, a caller who may not read, a server too slow or failing.
/// Never built: it only describes what `AppError` answers (`responses(…, ReadErrors)`).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub enum ReadErrors {
    #[response(
        status = 401,
        description = "No token or login, or an unknown or revoked token"
    )]
    Unauthorized(ErrorBody),
    #[response(status = 403, description = "The token is not a viewer token")]
    Forbidden(ErrorBody),
    #[response(
        status = 408,
        description = "The request took longer than the server's timeout"
    )]
    TimedOut,
    #[response(status = 500, description = "The server failed; its log says why")]
    Failed(ErrorBody),
}

/// What a delivery by an agent or a guest (a report, facts) may be answered besides its own
/// refusals (which token may send what, how large, how often): the body's form, the values, the
/// storage. Never built, as [`ReadErrors`].
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub enum DeliveryErrors {
    #[response(status = 400, description = "The body is not JSON")]
    NotJson(ErrorBody),
    #[response(status = 401, description = "No token, or an unknown or revoked one")]
    Unauthorized(ErrorBody),
    #[response(
        status = 408,
        description = "The body did not arrive within the server's body timeout, or the server took longer than its own"
    )]
    TimedOut(ErrorBody),
    #[response(status = 415, description = "The body is not sent as application/json")]
    NotJsonType(ErrorBody),
    #[response(
        status = 422,
        description = "A value is missing or not acceptable; `field` names it"
    )]
    Unacceptable(ErrorBody),
    #[response(status = 500, description = "The server failed; its log says why")]
    Failed(ErrorBody),
    #[response(
        status = 503,
        description = "Nothing was stored: the database cannot be written now, or every request slot is taken; see Retry-After",
        headers(("Retry-After" = u64, description = "Seconds to wait"))
    )]
    Unavailable(ErrorBody),
    #[response(
        status = 507,
        description = "Nothing was stored: the server's disk is full; keep the data and retry after Retry-After",
        headers(("Retry-After" = u64, description = "Seconds to wait"))
    )]
    Full(ErrorBody),
}
