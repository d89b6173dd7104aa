//! Changes made to guests, as recorded: what storage is given and returns.

use sqlx::FromRow;

use crate::domain::{ChangeRecordId, GuestId, TokenId};

/// A change to record: the rule it follows, who made it and when.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChangeRecord<'a> {
    pub guest_id: GuestId,
    pub rule: &'a str,
    pub kind: &'a str,
    pub title: &'a str,
    pub made_at_ms: i64,
    pub recorded_ms: i64,
    pub made_by: &'a str,
    pub token_id: Option<TokenId>,
    pub note: &'a str,
    pub projected_cpu_pct: Option<f64>,
}

/// A recorded change, with its measurement once settled.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct ChangeRecordRow {
    pub id: ChangeRecordId,
    pub guest_id: GuestId,
    pub rule: String,
    pub kind: String,
    pub title: String,
    pub made_at_ms: i64,
    pub recorded_ms: i64,
    pub made_by: String,
    /// The name of the token that recorded it, if it still exists.
    pub token_name: Option<String>,
    pub note: String,
    pub projected_cpu_pct: Option<f64>,
    #[sqlx(flatten)]
    pub settled: SettledFigures,
}

/// A change's measurement as stored once it can no longer change: `settled_ms` is `None` until
/// then; the figures are `None` where a side had too little idle time.
#[derive(Debug, Clone, Copy, PartialEq, Default, FromRow)]
pub struct SettledFigures {
    pub settled_ms: Option<i64>,
    pub cpu_before_pct: Option<f64>,
    pub cpu_after_pct: Option<f64>,
    pub wakeups_before: Option<f64>,
    pub wakeups_after: Option<f64>,
    pub idle_share_after: Option<f64>,
    pub saved_cpu_pct: Option<f64>,
}
