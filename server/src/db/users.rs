use sqlx::FromRow;

#[derive(Debug, Clone, FromRow)]
pub struct UserRow {
    pub id: i64,
    pub name: String,
    pub role: String,
    pub password_hash: String,
    pub created_ms: i64,
    pub last_login_ms: Option<i64>,
}
