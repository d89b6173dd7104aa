//! Where dashboard sessions are kept: the database, through tower-sessions' SQLite or PostgreSQL
//! store, except
//! that a session the database cannot save now does not cost the visitor the page.
//!
//! Every page saves its session, to move the session's expiry on. When the disk is full that
//! write fails, and tower-sessions would answer every page with an empty 500, hiding the
//! dashboard exactly when an admin needs it. A failed save is logged and the page served: what
//! is lost is an expiry moved on (or a flash message); logins make new sessions, which still
//! fail loudly, and so do logouts.

use async_trait::async_trait;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, ExpiredDeletion, SessionStore};

use crate::db::SessionStoreBackend;

#[derive(Debug, Clone)]
pub struct Sessions {
    inner: SessionStoreBackend,
}

impl Sessions {
    pub fn new(inner: SessionStoreBackend) -> Sessions {
        Sessions { inner }
    }
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
        if let Err(e) = on_store!(&self.inner, s => s.save(record).await) {
            tracing::warn!(error = %e, "a session could not be saved; the page is served anyway");
        }
        Ok(())
    }

    async fn load(&self, session_id: &Id) -> session_store::Result<Option<Record>> {
        on_store!(&self.inner, s => s.load(session_id).await)
    }

    async fn delete(&self, session_id: &Id) -> session_store::Result<()> {
        on_store!(&self.inner, s => s.delete(session_id).await)
    }
}

#[async_trait]
impl ExpiredDeletion for Sessions {
    async fn delete_expired(&self) -> session_store::Result<()> {
        on_store!(&self.inner, s => s.delete_expired().await)
    }
}
