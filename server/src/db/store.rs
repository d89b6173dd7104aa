//! [`Db`]: the one handle the rest of the server holds on storage, whichever database is behind
//! it. It is opened from a [`DbUrl`]; its operations are listed in `operations.rs` and forwarded
//! to the backend; what differs by nature (free disk space, the session store, how the database
//! describes itself) is answered here.

use std::path::Path;

use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

use super::cluster::Heard;
use super::error::StoreResult;
use super::postgres::{PgChangeListener, PgDb, PgLeaseSession};
use super::sqlite::SqliteDb;
use super::url::DbUrl;

#[derive(Clone)]
pub struct Db {
    pub(super) backend: Backend,
}

#[derive(Clone)]
pub(super) enum Backend {
    Sqlite(SqliteDb),
    Postgres(PgDb),
}

/// Which database a [`Db`] is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Sqlite,
    Postgres,
}

/// Where dashboard sessions are kept: tower-sessions' store on the same database.
#[derive(Debug, Clone)]
pub enum SessionStoreBackend {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl Db {
    /// Opens (creating if needed) an SQLite database file and brings its schema up to date.
    pub async fn open(path: &Path) -> StoreResult<Db> {
        Ok(Db {
            backend: Backend::Sqlite(SqliteDb::open(path).await?),
        })
    }

    /// Opens the database `url` names and brings its schema up to date: an SQLite file, or a
    /// PostgreSQL database with a pool of at most `max_connections`.
    pub async fn connect(url: &DbUrl, max_connections: u32) -> StoreResult<Db> {
        let backend = match url {
            DbUrl::Sqlite(path) => Backend::Sqlite(SqliteDb::open(path).await?),
            DbUrl::Postgres(url) => Backend::Postgres(PgDb::connect(url, max_connections).await?),
        };
        Ok(Db { backend })
    }

    pub fn kind(&self) -> BackendKind {
        match &self.backend {
            Backend::Sqlite(_) => BackendKind::Sqlite,
            Backend::Postgres(_) => BackendKind::Postgres,
        }
    }

    /// Bytes an unprivileged process may still write where the database is, when this server
    /// can see it: an SQLite file's file system; not a database server's disk.
    pub fn free_bytes(&self) -> Option<u64> {
        match &self.backend {
            Backend::Sqlite(db) => db.free_bytes().ok(),
            Backend::Postgres(_) => None,
        }
    }

    pub async fn close(&self) {
        match &self.backend {
            Backend::Sqlite(db) => db.close().await,
            Backend::Postgres(db) => db.close().await,
        }
    }

    /// Whether [`Db::close`] was called (the server is stopping): background work that fails
    /// then stops quietly instead of retrying.
    pub fn is_closed(&self) -> bool {
        match &self.backend {
            Backend::Sqlite(db) => db.pool.is_closed(),
            Backend::Postgres(db) => db.pool.is_closed(),
        }
    }

    /// Where dashboard sessions are kept (their table comes from tower-sessions' own migration,
    /// run when the server starts).
    pub fn session_store(&self) -> SessionStoreBackend {
        match &self.backend {
            Backend::Sqlite(db) => SessionStoreBackend::Sqlite(db.session_store()),
            Backend::Postgres(db) => SessionStoreBackend::Postgres(db.session_store()),
        }
    }

    /// What the database is, for the start-up log: SQLite's journal mode, PostgreSQL's version.
    pub async fn describe(&self) -> StoreResult<String> {
        match &self.backend {
            Backend::Sqlite(db) => Ok(format!("SQLite, journal mode {}", db.journal_mode().await?)),
            Backend::Postgres(db) => db.version().await,
        }
    }

    /// A session for the lease that picks the one server running the background jobs; `None`
    /// when this database serves one server only (SQLite), which then always holds it.
    pub async fn lease_session(&self) -> StoreResult<Option<LeaseSession>> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(db) => Ok(Some(LeaseSession(db.lease_session().await?))),
        }
    }

    /// Listens to the changes other servers on this database store; `None` when no other server
    /// can share it (SQLite).
    pub async fn listen_changes(&self) -> StoreResult<Option<ChangeListener>> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(db) => Ok(Some(ChangeListener(db.listen_changes().await?))),
        }
    }

    /// Sends a ping every listener of changes hears (nothing on SQLite).
    pub async fn ping_listeners(&self) -> StoreResult<()> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(()),
            Backend::Postgres(db) => db.ping().await,
        }
    }

    /// SQLite's journal mode in force (for tests); `None` on PostgreSQL.
    pub async fn journal_mode(&self) -> StoreResult<Option<String>> {
        match &self.backend {
            Backend::Sqlite(db) => Ok(Some(db.journal_mode().await?)),
            Backend::Postgres(_) => Ok(None),
        }
    }
}

/// A connection of its own that holds the lease while it lives (PostgreSQL: a session advisory
/// lock, released by the database when the session ends, the holder's process killed included).
pub struct LeaseSession(PgLeaseSession);

impl LeaseSession {
    /// Takes the lease if nobody holds it: `true` if this session holds it now.
    pub async fn try_take(&mut self) -> StoreResult<bool> {
        self.0.try_take().await
    }

    /// Answers only while the session (and so the lease, once taken) is alive.
    pub async fn check(&mut self) -> StoreResult<()> {
        self.0.check().await
    }
}

/// The changes other servers announce, as they commit.
pub struct ChangeListener(PgChangeListener);

impl ChangeListener {
    /// The next change another server announced (its own are skipped), or news that some
    /// may have been missed. An error: the database cannot be reached now.
    pub async fn next(&mut self) -> StoreResult<Heard> {
        self.0.next().await
    }
}
