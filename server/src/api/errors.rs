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
