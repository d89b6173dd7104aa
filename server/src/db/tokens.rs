use sqlx::FromRow;

use super::Db;
use super::StoreResult;

/// A token as the settings page lists it (never the token itself: only its hash is kept).
#[derive(Debug, Clone, FromRow)]
pub struct TokenListRow {
    pub id: i64,
    pub name: String,
    pub role: String,
    pub host_name: Option<String>,
    pub guest_uuid: Option<String>,
    pub created_ms: i64,
    pub last_used_ms: Option<i64>,
    pub revoked_ms: Option<i64>,
}

#[derive(Debug, Clone, FromRow)]
pub struct TokenRow {
    pub id: i64,
    pub name: String,
    pub role: String,
    pub revoked_ms: Option<i64>,
    pub sha256_hex: String,
}

/// Hex digits of a token's hash it is looked up by.
pub const LOOKUP_PREFIX_CHARS: usize = 16;

impl Db {
    /// Stores a new token's hash. `host_name` binds an agent token to one host from the start,
    /// even one another token reports for (an admin replacing a host's token); without it, the
    /// first report binds it, to a host no other token has.
    pub async fn insert_token(
        &self,
        name: &str,
        role: &str,
        sha256_hex: &str,
        host_name: Option<&str>,
        now_ms: i64,
    ) -> StoreResult<i64> {
        let id = sqlx::query_scalar(
            "INSERT INTO tokens (name, role, sha256_hex, host_name, created_ms) VALUES (?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(name)
        .bind(role)
        .bind(sha256_hex)
        .bind(host_name)
        .bind(now_ms)
        .fetch_one(&self.pool)
        .await?;
        Ok(id)
    }

    /// The tokens whose hash starts with `prefix` (its first [`LOOKUP_PREFIX_CHARS`] hex
    /// digits): the caller compares the whole hash itself, in constant time.
    pub async fn tokens_by_hash_prefix(&self, prefix: &str) -> StoreResult<Vec<TokenRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, revoked_ms, sha256_hex FROM tokens
             WHERE substr(sha256_hex, 1, 16) = ?",
        )
        .bind(prefix)
        .fetch_all(&self.pool)
        .await?)
    }

    /// SQLite's plan for [`Db::tokens_by_hash_prefix`], for the test that it uses its index.
    pub async fn token_lookup_plan(&self) -> StoreResult<Vec<String>> {
        let rows: Vec<(i64, i64, i64, String)> = sqlx::query_as(
            "EXPLAIN QUERY PLAN SELECT id, name, role, revoked_ms, sha256_hex FROM tokens
             WHERE substr(sha256_hex, 1, 16) = ?",
        )
        .bind("0000000000000000")
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(_, _, _, detail)| detail).collect())
    }

    /// Every token, newest first.
    pub async fn tokens(&self) -> StoreResult<Vec<TokenListRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, host_name, guest_uuid, created_ms, last_used_ms, revoked_ms
             FROM tokens ORDER BY id DESC",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Revokes a token from now on; false when there is no such token or it was revoked before.
    pub async fn revoke_token(&self, id: i64, now_ms: i64) -> StoreResult<bool> {
        let done =
            sqlx::query("UPDATE tokens SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL")
                .bind(now_ms)
                .bind(id)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }
}
