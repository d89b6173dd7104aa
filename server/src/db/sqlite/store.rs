//! The SQLite store: one database file, a pool of connections to it and one connection for its
//! write transactions, and the file's upkeep.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use tower_sessions_sqlx_store::SqliteStore;

use crate::db::error::StoreResult;

/// The migrations in `migrations/`, embedded in the binary and run at start-up.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// How long a write waits for the writers' connection, and then for SQLite's lock, before it
/// fails.
const WRITE_WAIT: Duration = Duration::from_secs(5);

/// Statements the writers' connection keeps prepared (sqlx's default is 100): the writes'
/// statements, each multi-row one in at most ten shapes, with room, so that none is prepared
/// again for want of room (a 512-row insert takes milliseconds to prepare). The shapes bound
/// what they hold: some megabytes.
const WRITER_STATEMENTS: usize = 256;

#[derive(Clone)]
pub struct SqliteDb {
    /// `pub` only as far as this backend's type reaches, which is `db/` (`migrate_data` reads
    /// and writes whole tables through it).
    pub pool: SqlitePool,
    /// The one connection write transactions take turns on ([`SqliteDb::begin_write`]).
    /// SQLite has one writer at a time anyway; on a connection of their own, writers queue in
    /// order for it rather than poll SQLite's lock, and the large multi-row statements of a
    /// batch (`rows_at_once`) are prepared on this connection alone, not on each of the pool's.
    pub(super) writer: SqlitePool,
    /// The database file, to ask its file system for free space.
    path: Arc<PathBuf>,
}

impl SqliteDb {
    /// Opens (creating if needed) the database file and brings its schema up to date.
    pub async fn open(path: &Path) -> StoreResult<SqliteDb> {
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            // WAL lets the dashboard read while an agent's report is written; FULL sync means a
            // report acknowledged to an agent survives a power cut, not only a crash.
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(WRITE_WAIT);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options.clone())
            .await?;
        MIGRATOR.run(&pool).await?;
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            // As long as a writer waited for SQLite's lock on a pooled connection (its BEGIN
            // IMMEDIATE can then still wait for a single write on another connection).
            .acquire_timeout(WRITE_WAIT)
            .connect_with(options.statement_cache_capacity(WRITER_STATEMENTS))
            .await?;
        Ok(SqliteDb {
            pool,
            writer,
            path: Arc::new(path.to_path_buf()),
        })
    }

    /// Bytes an unprivileged process may still write on the file system holding the database.
    pub fn free_bytes(&self) -> std::io::Result<u64> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let stat = rustix::fs::statvfs(dir)?;
        Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
    }

    pub async fn close(&self) {
        self.writer.close().await;
        self.pool.close().await;
    }

    /// Where dashboard sessions are kept: tower-sessions' store on this same database (its
    /// table comes from tower-sessions' own migration, run when the server starts).
    pub fn session_store(&self) -> SqliteStore {
        SqliteStore::new(self.pool.clone())
    }

    /// The journal mode in force, for the start-up log and tests.
    pub async fn journal_mode(&self) -> StoreResult<String> {
        Ok(sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&self.pool)
            .await?)
    }
}
