use sqlx::FromRow;

use crate::domain::{TokenId, TokenRole};

/// A token as the settings page lists it (never the token itself: only its hash is kept).
#[derive(Debug, Clone, FromRow)]
pub struct TokenListRow {
    pub id: TokenId,
    pub name: String,
    pub role: TokenRole,
    pub host_name: Option<String>,
    pub guest_uuid: Option<String>,
    pub created_ms: i64,
    pub last_used_ms: Option<i64>,
    pub revoked_ms: Option<i64>,
}

#[derive(Debug, Clone, FromRow)]
pub struct TokenRow {
    pub id: TokenId,
    pub name: String,
    pub role: TokenRole,
    pub revoked_ms: Option<i64>,
    pub sha256_hex: String,
}

/// Hex digits of a token's hash it is looked up by.
pub const LOOKUP_PREFIX_CHARS: usize = 16;
