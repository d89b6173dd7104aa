use sqlx::FromRow;

use super::Db;
use crate::error::AppResult;

#[derive(Debug, Clone, FromRow)]
pub struct TokenRow {
    pub id: i64,
    pub name: String,
    pub role: String,
    pub revoked_ms: Option<i64>,
}

impl Db {
    /// Stores a new token's hash. `host_name` binds an agent token to one host from the start;
    /// without it, the first report binds it.
    pub async fn insert_token(
        &self,
        name: &str,
        role: &str,
        sha256_hex: &str,
        host_name: Option<&str>,
        now_ms: i64,
    ) -> AppResult<i64> {
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

    pub async fn token_by_hash(&self, sha256_hex: &str) -> AppResult<Option<TokenRow>> {
        Ok(
            sqlx::query_as("SELECT id, name, role, revoked_ms FROM tokens WHERE sha256_hex = ?")
                .bind(sha256_hex)
                .fetch_optional(&self.pool)
                .await?,
        )
    }
}
