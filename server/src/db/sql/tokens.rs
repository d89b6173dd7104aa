//! Tokens. The hash-prefix lookup is the very expression of the index `tokens_lookup_prefix`
//! (`substr(sha256_hex, 1, 16)`), so that both databases use it.

use super::dialect::Store;
use crate::db::error::StoreResult;
use crate::db::tokens::{TokenListRow, TokenRow};
use crate::domain::{TokenId, TokenRole};

impl Store {
    pub async fn insert_token(
        &self,
        name: &str,
        role: TokenRole,
        sha256_hex: &str,
        host_name: Option<&str>,
        now_ms: i64,
    ) -> StoreResult<TokenId> {
        let id = sqlx::query_scalar(
            "INSERT INTO tokens (name, role, sha256_hex, host_name, created_ms)
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
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

    pub async fn insert_agent_tokens(
        &self,
        tokens: &[(String, String, String)],
        now_ms: i64,
    ) -> StoreResult<Vec<TokenId>> {
        let mut tx = self.begin_write().await?;
        let mut ids = Vec::with_capacity(tokens.len());
        for (name, sha256_hex, host_name) in tokens {
            ids.push(
                sqlx::query_scalar(
                    "INSERT INTO tokens (name, role, sha256_hex, host_name, created_ms)
                     VALUES ($1, 'agent', $2, $3, $4) RETURNING id",
                )
                .bind(name)
                .bind(sha256_hex)
                .bind(host_name)
                .bind(now_ms)
                .fetch_one(&mut *tx)
                .await?,
            );
        }
        tx.commit().await?;
        Ok(ids)
    }

    pub async fn pin_guest_token(
        &self,
        id: TokenId,
        uuid: &str,
        host_name: Option<&str>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE tokens SET guest_uuid = $1, host_name = $2, guest_id = NULL
             WHERE id = $3 AND role = 'guest'",
        )
        .bind(uuid)
        .bind(host_name)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The tokens whose hash starts with `prefix` (its first [`LOOKUP_PREFIX_CHARS`] hex
    /// digits): the caller compares the whole hash itself, in constant time.
    ///
    /// [`LOOKUP_PREFIX_CHARS`]: crate::db::tokens::LOOKUP_PREFIX_CHARS
    pub async fn tokens_by_hash_prefix(&self, prefix: &str) -> StoreResult<Vec<TokenRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, revoked_ms, sha256_hex FROM tokens
             WHERE substr(sha256_hex, 1, 16) = $1",
        )
        .bind(prefix)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn tokens(&self) -> StoreResult<Vec<TokenListRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, host_name, guest_uuid, created_ms, last_used_ms, revoked_ms
             FROM tokens ORDER BY id DESC",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn revoke_token(&self, id: TokenId, now_ms: i64) -> StoreResult<bool> {
        let done =
            sqlx::query("UPDATE tokens SET revoked_ms = $1 WHERE id = $2 AND revoked_ms IS NULL")
                .bind(now_ms)
                .bind(id)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }
}
