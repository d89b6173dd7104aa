//! The tokens and sessions found in the database, remembered a few seconds, so that a flood of
//! requests with the same credential costs no lookup each.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Mutex;

use tower_sessions::SessionStore;

use crate::auth::Caller;
use crate::auth::session_store::Sessions;
use crate::db::Db;
use crate::domain::TokenId;
use crate::error::AppError;

/// How long a session found in the store counts as checked (a logout within it still ends the
/// session for the pages, which check it themselves; this only says which budget it spends).
const SESSION_CHECKED_FOR_MS: i64 = 60_000;
/// Sessions remembered as checked at most.
const MAX_CHECKED_SESSIONS: usize = 10_000;
/// How long a token found in the database is taken as it was without looking it up again (a
/// token revoked on another server, or with the command line, works this long at most; one
/// revoked on this server's settings page stops at once).
const TOKEN_CHECKED_FOR_MS: i64 = 5_000;
/// Tokens remembered as checked at most.
const MAX_CHECKED_TOKENS: usize = 10_000;

/// The credentials looked up lately, and the session store they are looked up in (tokens are
/// looked up in the database each call names).
pub(super) struct Lookups {
    /// Tokens found in the database by the SHA-256 of the token, and until when (ms) that holds.
    checked_tokens: Mutex<HashMap<String, (Caller, i64)>>,
    sessions: Sessions,
    /// Session ids found in the store, and until when (ms) that holds.
    checked_sessions: Mutex<HashMap<i128, i64>>,
}

impl Lookups {
    pub(super) fn new(sessions: Sessions) -> Lookups {
        Lookups {
            checked_tokens: Mutex::new(HashMap::new()),
            sessions,
            checked_sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The session the cookie names, if it was found in the store within the last minute.
    pub(super) fn checked_session(&self, cookie: &str, now_ms: i64) -> Option<i128> {
        let id = tower_sessions::session::Id::from_str(cookie).ok()?;
        let mut checked = self.lock_sessions();
        match checked.get(&id.0) {
            Some(until_ms) if *until_ms > now_ms => Some(id.0),
            Some(_) => {
                checked.remove(&id.0);
                None
            }
            None => None,
        }
    }

    /// Whether the session the cookie names is one the store holds, unexpired (remembered for a
    /// minute when it is).
    pub(super) async fn session_exists(&self, cookie: &str, now_ms: i64) -> Option<i128> {
        let id = tower_sessions::session::Id::from_str(cookie).ok()?;
        let record = self.sessions.load(&id).await.ok()??;
        if record.expiry_date <= time_now() {
            return None;
        }
        let mut checked = self.lock_sessions();
        if checked.len() >= MAX_CHECKED_SESSIONS {
            checked.retain(|_, until_ms| *until_ms > now_ms);
            if checked.len() >= MAX_CHECKED_SESSIONS {
                checked.clear();
            }
        }
        checked.insert(id.0, now_ms + SESSION_CHECKED_FOR_MS);
        Some(id.0)
    }

    /// The caller of the token whose SHA-256 is `hash`, from the tokens checked within the last
    /// few seconds, else from the database (remembered then).
    pub(super) async fn token_caller(
        &self,
        db: &Db,
        hash: &str,
        now_ms: i64,
    ) -> Result<Caller, AppError> {
        {
            let checked = self.lock_tokens();
            if let Some((caller, until_ms)) = checked.get(hash)
                && *until_ms > now_ms
            {
                return Ok(caller.clone());
            }
        }
        let caller = crate::auth::caller_of_token(db, hash).await?;
        let mut checked = self.lock_tokens();
        if checked.len() >= MAX_CHECKED_TOKENS {
            checked.retain(|_, (_, until_ms)| *until_ms > now_ms);
            if checked.len() >= MAX_CHECKED_TOKENS {
                checked.clear();
            }
        }
        checked.insert(
            hash.to_string(),
            (caller.clone(), now_ms + TOKEN_CHECKED_FOR_MS),
        );
        Ok(caller)
    }

    /// Forgets what it remembers of a token (it was just revoked).
    pub(super) fn forget_token(&self, id: TokenId) {
        self.lock_tokens().retain(
            |_, (caller, _)| !matches!(caller, Caller::Token { token_id, .. } if *token_id == id),
        );
    }

    fn lock_tokens(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Caller, i64)>> {
        self.checked_tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<i128, i64>> {
        self.checked_sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

fn time_now() -> tower_sessions::cookie::time::OffsetDateTime {
    tower_sessions::cookie::time::OffsetDateTime::now_utc()
}
