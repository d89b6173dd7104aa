//! The API's callers by what they may do, checked before a handler runs: a handler that takes
//! a [`Viewer`] or an [`AgentToken`] is never called by anyone else.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;

use super::caller::{Caller, Role};
use crate::db::Db;
use crate::domain::TokenId;
use crate::error::{AppError, AppResult};

/// A caller who may read: a viewer token, or any logged-in user (admin or viewer).
pub struct Viewer(pub Caller);

/// An agent's bearer token, which reports for a host.
pub struct AgentToken {
    pub token_id: TokenId,
}

/// A guest probe's bearer token, which delivers its own guest's facts.
pub struct GuestToken {
    pub token_id: TokenId,
}

/// The caller, if it may act as `role`; the same 401 and 403 answers as `Caller::require`.
async fn caller_as<S>(parts: &mut Parts, state: &S, role: Role) -> AppResult<Caller>
where
    Db: FromRef<S>,
    S: Send + Sync,
{
    let caller = Caller::from_request_parts(parts, state).await?;
    caller.require(role)?;
    Ok(caller)
}

impl<S> FromRequestParts<S> for Viewer
where
    Db: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> AppResult<Viewer> {
        caller_as(parts, state, Role::Viewer).await.map(Viewer)
    }
}

/// The extractor of a token that delivers (`$token`), for `$role` alone: its id.
macro_rules! delivery_token {
    ($token:ident, $role:expr) => {
        impl<S> FromRequestParts<S> for $token
        where
            Db: FromRef<S>,
            S: Send + Sync,
        {
            type Rejection = AppError;

            async fn from_request_parts(parts: &mut Parts, state: &S) -> AppResult<$token> {
                let caller = caller_as(parts, state, $role).await?;
                Ok($token {
                    token_id: caller.token_id()?,
                })
            }
        }
    };
}

delivery_token!(AgentToken, Role::Agent);
delivery_token!(GuestToken, Role::Guest);
