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
    pub async fn insert_token(
        &self,
        name: &str,
        role: &str,
        sha256_hex: &str,
        now_ms: i64,
    ) -> AppResult<i64> {
        let id = sqlx::query_scalar(
            "INSERT INTO tokens (name, role, sha256_hex, created_ms) VALUES (?, ?, ?, ?) RETURNING id",
        )
        .bind(name)
        .bind(role)
        .bind(sha256_hex)
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
