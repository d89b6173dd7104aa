//! The SQLite backend (the default): [`SqliteDb`], the pool on one database file, and what is
//! SQLite's own: its dialect (`dialect`), its write transaction (`BEGIN IMMEDIATE`,
//! `write_tx`), its error codes (`fault`), the packed read of many guests' samples, the
//! deletion of old reports without the foreign-key check, and its query plans. Every statement
//! else is the shared one of `db/sql/`, compiled here against `dialect`.

mod dialect;
mod fault;
mod old_reports;
#[cfg(feature = "test-support")]
mod plans;
mod samples_read;
mod store;
mod write_tx;

// The shared statements of `db/sql/`, compiled against this backend's `dialect` (a new file
// there is added to every backend's list; a backend that lacks one lacks its operations, and
// `Db` does not compile). Listed here, not in a macro both backends expand: rustfmt follows
// only the module declarations it can see, and `cargo fmt` would skip `db/sql/`.
#[path = "../sql/alert_writes.rs"]
mod alert_writes;
#[path = "../sql/alerts.rs"]
mod alerts;
#[path = "../sql/change_records.rs"]
mod change_records;
#[path = "../sql/facts.rs"]
mod facts;
#[path = "../sql/fleet_history.rs"]
mod fleet_history;
#[path = "../sql/guests.rs"]
mod guests;
#[path = "../sql/history.rs"]
mod history;
#[path = "../sql/hosts.rs"]
mod hosts;
#[path = "../sql/probe.rs"]
mod probe;
#[path = "../sql/process_totals.rs"]
mod process_totals;
#[path = "../sql/report_rows.rs"]
mod report_rows;
#[path = "../sql/reports.rs"]
mod reports;
#[path = "../sql/rollups.rs"]
mod rollups;
#[path = "../sql/settings.rs"]
mod settings;
#[cfg(feature = "test-support")]
#[path = "../sql/test_support.rs"]
mod test_support;
#[path = "../sql/tokens.rs"]
mod tokens;
#[path = "../sql/users.rs"]
mod users;

pub use fault::storage_fault;
pub use store::{MIGRATOR, SqliteDb};

#[cfg(test)]
mod tests;
