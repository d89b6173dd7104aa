//! All SQL lives here: one function per statement (or per transaction), SQLite via sqlx.
//!
//! Queries are checked at run time (`query_as` + `FromRow`), so a fresh clone builds without a
//! database; every function is exercised by the tests against a real SQLite file.

mod alerts;
mod facts;
mod guests;
mod hosts;
mod reports;
mod rollups;
mod settings;
mod tokens;
mod users;

pub use alerts::{
    AlertRow, AlertWrite, NewRule, OutboxCounts, OutboxRow, ReceiverRow, RuleRow, SilenceRow,
};
pub use facts::{FactsEventRow, FactsRow, FactsSpanRow, IDLE_READINGS_KEPT_MS};
pub use guests::{GuestRow, GuestScope, IdleReading, IntervalRow, SampleRow};
pub use hosts::HostRow;
pub use reports::{RawSample, StoreOutcome};
pub use rollups::{FIVE_MINUTES_MS, HOUR_MS, RollupRow, StoredCounts};
pub use tokens::{LOOKUP_PREFIX_CHARS, TokenListRow, TokenRow};
pub use users::UserRow;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::error::AppResult;

/// The migrations in `migrations/`, embedded in the binary and run at start-up.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

#[derive(Clone)]
pub struct Db {
    pool: SqlitePool,
}

impl Db {
    /// Opens (creating if needed) the database file and brings its schema up to date.
    pub async fn open(path: &Path) -> AppResult<Db> {
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
        Ok(Db { pool })
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The journal mode in force, for the start-up log and tests.
    /// Copies the write-ahead log into the database file and empties it.
    pub async fn checkpoint(&self) -> AppResult<()> {
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Rebuilds the database file without its free pages (after a retention deleted much).
    pub async fn vacuum(&self) -> AppResult<()> {
        sqlx::query("VACUUM").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn journal_mode(&self) -> AppResult<String> {
        Ok(sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&self.pool)
            .await?)
    }
}
