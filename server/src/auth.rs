//! API tokens: how they are made, stored and checked.
//!
//! A token is 32 random bytes shown once as `tks_<64 hex>`; the database holds only its SHA-256,
//! which is enough for a secret with this much entropy (no password hashing needed), and is looked
//! up by that hash, so the comparison reveals nothing about the token through timing.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};

use crate::app::AppState;
use crate::error::{AppError, AppResult};

const TOKEN_PREFIX: &str = "tks_";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Submits reports for a host.
    Agent,
    /// Reads the API.
    Viewer,
    /// A guest probe: submits its own guest's facts, nothing else.
    Guest,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Viewer => "viewer",
            Role::Guest => "guest",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "agent" => Some(Role::Agent),
            "viewer" => Some(Role::Viewer),
            "guest" => Some(Role::Guest),
            _ => None,
        }
    }
}

/// A new random token, as shown to the user once.
pub fn new_token() -> AppResult<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| AppError::Internal(format!("no randomness from the OS: {e}")))?;
    Ok(format!("{TOKEN_PREFIX}{}", hex::encode(bytes)))
}

/// What the database stores for a token.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The caller of an API request, authenticated by its bearer token.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token_id: i64,
    pub role: Role,
}

impl Caller {
    pub fn require(&self, role: Role) -> AppResult<()> {
        if self.role == role {
            Ok(())
        } else {
            Err(AppError::Forbidden(format!(
                "this needs a {} token; this one is a {} token",
                role.as_str(),
                self.role.as_str()
            )))
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> AppResult<Caller> {
        let header = parts.headers.get(AUTHORIZATION).ok_or_else(|| {
            AppError::Unauthorized("missing Authorization: Bearer <token>".into())
        })?;
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                AppError::Unauthorized("the Authorization header must be `Bearer <token>`".into())
            })?;
        let row = state
            .db
            .token_by_hash(&token_hash(token))
            .await?
            .filter(|row| row.revoked_ms.is_none())
            .ok_or_else(|| AppError::Unauthorized("unknown or revoked token".into()))?;
        let role = Role::parse(&row.role).ok_or_else(|| {
            AppError::Internal(format!("token {} has role {:?}", row.id, row.role))
        })?;
        Ok(Caller {
            token_id: row.id,
            role,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_32_random_bytes_in_hex_behind_a_prefix() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_ne!(a, b);
        let hex_part = a.strip_prefix(TOKEN_PREFIX).unwrap();
        assert_eq!(hex_part.len(), 64);
        assert!(hex_part.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn the_stored_hash_is_the_sha256_of_the_token() {
        // FIPS 180-2 test vector for "abc".
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
