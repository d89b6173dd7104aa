//! Who calls the API: an API token (agents, guest probes, scripts) or the dashboard's session.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use subtle::ConstantTimeEq;
use tower_sessions::Session;

use super::session::{User, current_user};
use super::tokens::token_hash;
use crate::db::{Db, LOOKUP_PREFIX_CHARS};
use crate::domain::TokenId;
use crate::error::{AppError, AppResult};

/// What a token may do (stored as its name).
pub use crate::domain::TokenRole as Role;

/// The caller of an API request: a bearer token, or else the dashboard's session.
#[derive(Debug, Clone)]
pub enum Caller {
    Token { token_id: TokenId, role: Role },
    User(User),
}

impl Caller {
    /// Checks the caller may act as `role`: a token of that role, or for reading (`Viewer`) any
    /// logged-in user. Reports and guest facts need their own tokens.
    pub fn require(&self, role: Role) -> AppResult<()> {
        match self {
            Caller::Token { role: has, .. } if *has == role => Ok(()),
            Caller::User(_) if role == Role::Viewer => Ok(()),
            Caller::Token { role: has, .. } => Err(AppError::Forbidden(format!(
                "this needs a {} token; this one is a {} token",
                role.as_str(),
                has.as_str()
            ))),
            Caller::User(_) => Err(AppError::Forbidden(format!(
                "this needs a {} token, not a dashboard login",
                role.as_str()
            ))),
        }
    }

    /// The token's id, for calls that `require` a token role.
    pub fn token_id(&self) -> AppResult<TokenId> {
        match self {
            Caller::Token { token_id, .. } => Ok(*token_id),
            Caller::User(_) => Err(AppError::Forbidden("this needs a token".into())),
        }
    }
}

/// Reads only the database (through `FromRef`), so the admission middleware can authenticate
/// with nothing more.
impl<S> FromRequestParts<S> for Caller
where
    Db: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> AppResult<Caller> {
        // Admission authenticates tokens before it reads a body, and leaves the caller here.
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        let db = Db::from_ref(state);
        if !parts.headers.contains_key(AUTHORIZATION) {
            // No token: the dashboard's own session, if the browser has one.
            if let Ok(session) = Session::from_request_parts(parts, state).await
                && let Some(user) = current_user(&session, &db).await?
            {
                return Ok(Caller::User(user));
            }
            return Err(AppError::Unauthorized(
                "missing Authorization: Bearer <token> (or a dashboard login)".into(),
            ));
        }
        let hash = bearer_hash(parts)?.unwrap_or_default();
        caller_of_token(&db, &hash).await
    }
}

/// The SHA-256 (hex) of the bearer token the request carries, `None` without an Authorization
/// header; 401 for one that is not `Bearer <token>`.
pub fn bearer_hash(parts: &Parts) -> AppResult<Option<String>> {
    let Some(header) = parts.headers.get(AUTHORIZATION) else {
        return Ok(None);
    };
    let token = header
        .to_str()
        .ok()
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            AppError::Unauthorized("the Authorization header must be `Bearer <token>`".into())
        })?;
    Ok(Some(token_hash(token)))
}

/// The caller whose token hashes to `hash`: looked up by the hash's prefix, then the whole
/// hash compared in constant time; 401 for an unknown or revoked token.
pub async fn caller_of_token(db: &Db, hash: &str) -> AppResult<Caller> {
    let prefix = hash.get(..LOOKUP_PREFIX_CHARS).unwrap_or(hash);
    let row = db
        .tokens_by_hash_prefix(prefix)
        .await?
        .into_iter()
        .find(|row| bool::from(row.sha256_hex.as_bytes().ct_eq(hash.as_bytes())))
        .filter(|row| row.revoked_ms.is_none())
        .ok_or_else(|| AppError::Unauthorized("unknown or revoked token".into()))?;
    Ok(Caller::Token {
        token_id: row.id,
        role: row.role,
    })
}
