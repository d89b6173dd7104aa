//! Where dashboard sessions are kept: the database, through tower-sessions' SQLite or PostgreSQL
//! store, except that a session is written at most once a minute when only its expiry moved, and
//! that a session the database cannot save now does not cost the visitor the page.
//!
//! tower-sessions saves the session of every page (the router asks it to: the expiry moves on
//! with activity). A save that would change nothing but the expiry, within a minute of the last
//! one written, is skipped: a page view costs no database write, and the session still lapses
//! within a minute of its idle limit. When the disk is full that
//! write fails, and tower-sessions would answer every page with an empty 500, hiding the
//! dashboard exactly when an admin needs it. A failed save is logged and the page served: what
//! is lost is an expiry moved on (or a flash message); logins make new sessions, which still
//! fail loudly, and so do logouts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, ExpiredDeletion, SessionStore};

use crate::crypto::sha256_hex;
use crate::db::SessionStoreBackend;

/// A session whose data did not change is written again at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(60);
/// Sessions whose last write is remembered at most (a few MiB); past it, the oldest are
/// forgotten and written again at their next page.
const MAX_REMEMBERED: usize = 10_000;

#[derive(Debug, Clone)]
pub struct Sessions {
    inner: SessionStoreBackend,
    /// Each session's data as last written (a digest) and when.
    written: Arc<Mutex<HashMap<i128, (String, Instant)>>>,
}

impl Sessions {
    pub fn new(inner: SessionStoreBackend) -> Sessions {
        Sessions {
            inner,
            written: Arc::default(),
        }
    }

    /// Whether `record` holds what was last written for it less than [`TOUCH_EVERY`] ago: then
    /// only its expiry moved, and writing it can wait.
    fn unchanged(&self, record: &Record) -> bool {
        let digest = digest(record);
        let now = Instant::now();
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        match written.get(&record.id.0) {
            Some((last, at)) if *last == digest && now.duration_since(*at) < TOUCH_EVERY => true,
            _ => {
                if written.len() >= MAX_REMEMBERED {
                    written.retain(|_, (_, at)| now.duration_since(*at) < TOUCH_EVERY);
                    if written.len() >= MAX_REMEMBERED {
                        written.clear();
                    }
                }
                written.insert(record.id.0, (digest, now));
                false
            }
        }
    }

    fn forget(&self, id: &Id) {
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id.0);
    }
}

/// A digest of a session's data, whatever order its map iterates in.
fn digest(record: &Record) -> String {
    let mut data: Vec<(&String, String)> = record
        .data
        .iter()
        .map(|(key, value)| (key, value.to_string()))
        .collect();
    data.sort();
    sha256_hex(format!("{data:?}").as_bytes())
}

/// Calls the same method of whichever store the database has.
macro_rules! on_store {
    ($store:expr, $s:ident => $call:expr) => {
        match $store {
            SessionStoreBackend::Sqlite($s) => $call,
            SessionStoreBackend::Postgres($s) => $call,
        }
    };
}

#[async_trait]
impl SessionStore for Sessions {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        on_store!(&self.inner, s => s.create(record).await)
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        if self.unchanged(record) {
            return Ok(());
        }
        if let Err(e) = on_store!(&self.inner, s => s.save(record).await) {
            // Written again at the next page.
            self.forget(&record.id);
            tracing::warn!(error = %e, "a session could not be saved; the page is served anyway");
        }
        Ok(())
    }

    async fn load(&self, session_id: &Id) -> session_store::Result<Option<Record>> {
        on_store!(&self.inner, s => s.load(session_id).await)
    }

    async fn delete(&self, session_id: &Id) -> session_store::Result<()> {
        self.forget(session_id);
        on_store!(&self.inner, s => s.delete(session_id).await)
    }
}

#[async_trait]
impl ExpiredDeletion for Sessions {
    async fn delete_expired(&self) -> session_store::Result<()> {
        on_store!(&self.inner, s => s.delete_expired().await)
    }
}
