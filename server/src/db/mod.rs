//! All SQL lives here: one function per statement (or per transaction), SQLite via sqlx.
//!
//! Queries are checked at run time (`query_as` + `FromRow`), so a fresh clone builds without a
//! database; every function is exercised by the tests against a real SQLite file.

mod alerts;
mod error;
mod facts;
mod fault;
mod guests;
mod history;
mod hosts;
mod reports;
mod rollups;
mod settings;
mod tokens;
mod totals;
mod users;
mod write_tx;

pub use alerts::{
    AlertRow, AlertWrite, NewReceiver, NewRule, Notify, OutboxCounts, OutboxRow, PendingGroup,
    ReceiverRow, RuleRow, SilenceRow,
};
pub use error::{StoreError, StoreResult};
pub use facts::{FactsEventRow, FactsRow, FactsSpanRow, IDLE_READINGS_KEPT_MS};
pub use guests::{GuestRow, GuestScope, IdleReading, IntervalRow, SampleRow};
pub use history::{GuestFactsSpanRow, GuestRollupRow, StoredHistories};
pub use hosts::HostRow;
pub use reports::{RawSample, StoreOutcome};
pub use rollups::{FIVE_MINUTES_MS, HOUR_MS, RollupRow, StoredCounts};
pub use tokens::{LOOKUP_PREFIX_CHARS, TokenListRow, TokenRow};
pub use totals::ProcessTotalsRow;
pub use users::UserRow;
pub use write_tx::WriteTx;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

/// The migrations in `migrations/`, embedded in the binary and run at start-up.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

#[derive(Clone)]
pub struct Db {
    pool: SqlitePool,
    /// The database file, to ask its file system for free space.
    path: Arc<PathBuf>,
}

impl Db {
    /// Opens (creating if needed) the database file and brings its schema up to date.
    pub async fn open(path: &Path) -> StoreResult<Db> {
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            // WAL lets the dashboard read while an agent's report is written; FULL sync means a
            // report acknowledged to an agent survives a power cut, not only a crash.
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        Ok(Db {
            pool,
            path: Arc::new(path.to_path_buf()),
        })
    }

    /// Commits one write, to learn whether the database can be written now (a read-only file or
    /// mount, a full disk).
    pub async fn probe_write(&self, now_ms: i64) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO write_probe (id, at_ms) VALUES (1, ?)
             ON CONFLICT (id) DO UPDATE SET at_ms = excluded.at_ms",
        )
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await
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
        self.pool.close().await;
    }

    /// The journal mode in force, for the start-up log and tests.
    /// Copies the write-ahead log into the database file and empties it.
    pub async fn checkpoint(&self) -> StoreResult<()> {
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Rebuilds the database file without its free pages (after a retention deleted much).
    pub async fn vacuum(&self) -> StoreResult<()> {
        sqlx::query("VACUUM").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn journal_mode(&self) -> StoreResult<String> {
        Ok(sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&self.pool)
            .await?)
    }
}
