//! The SQLite backend (the default): [`SqliteDb`], the pool on one database file, and what is
//! SQLite's own: its dialect (`dialect`), its write transaction (`BEGIN IMMEDIATE`,
//! `write_tx`), its error codes (`fault`), the packed read of many guests' samples, the
//! deletion of old reports without the foreign-key check, and its query plans. Every statement
//! else is the shared one of `db/sql/`, compiled here against `dialect`.

mod dialect;
mod fault;
mod old_reports;
mod packed_samples;
#[cfg(feature = "test-support")]
mod plans;
mod store;
mod write_tx;

// The shared statements of `db/sql/`, compiled against this backend's `dialect`.
super::statements::shared_statements!();

pub use fault::storage_fault;
pub use store::{MIGRATOR, SqliteDb};

#[cfg(test)]
mod tests;
