use sqlx::FromRow;

use crate::domain::{UserId, UserRole};

#[derive(Debug, Clone, FromRow)]
pub struct UserRow {
    pub id: UserId,
    pub name: String,
    pub role: UserRole,
    pub password_hash: String,
    pub created_ms: i64,
    pub last_login_ms: Option<i64>,
}
