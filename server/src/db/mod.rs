//! Storage: every SQL statement of the server lives under here.
//!
//! The files beside this one hold what storage speaks in, whatever the database: the rows it
//! returns and the values it is given, grouped by aggregate (reports and samples, guests and
//! facts, rollups and history, alerts, users and tokens), and [`StoreError`]. [`Db`]
//! (`store.rs`) is the handle the server holds, opened from a [`DbUrl`]; `operations.rs` lists
//! every operation it offers and forwards each to the backend. `sqlite/` (the default) and
//! `postgres/` are the backends: each has the same operations with these types, and everything
//! its database's own (the pool, the write transaction, its error codes, its SQL dialect).
//!
//! Queries are checked at run time (`query_as` + `FromRow`), so a fresh clone builds without a
//! database; every function is exercised by the tests against a real database of each kind.

mod alerts;
pub mod cluster;
pub mod error;
mod facts;
mod fault;
mod guests;
mod history;
mod hosts;
mod migrate_data;
mod operations;
mod postgres;
mod reports;
mod rollups;
mod sqlite;
mod store;
mod tokens;
mod totals;
mod url;
mod users;

pub use alerts::{
    AlertRow, AlertWrite, NewReceiver, NewRule, Notify, OutboxCounts, OutboxRow, PendingGroup,
    ReceiverRow, RuleRow, SilenceRow,
};
pub use error::{StoreError, StoreResult};
pub use facts::{
    DeliveredFacts, FactsEventRow, FactsRow, FactsSpanRow, IDLE_READINGS_KEPT_MS, StoredFacts,
};
pub use guests::{
    GONE_AFTER_MISSED_REPORTS, GuestRow, GuestScope, IdleReading, IntervalRow, SampleRow,
};
pub use history::{GuestFactsSpanRow, GuestRollupRow, StoredHistories};
pub use hosts::HostRow;
pub use migrate_data::{TableCopy, migrate_data};
pub use postgres::{MIGRATOR as POSTGRES_MIGRATOR, WRITE_LOCK as POSTGRES_WRITE_LOCK};
#[cfg(feature = "test-support")]
pub use reports::RawSample;
pub use reports::{ReportToStore, StoreOutcome, StoredGuest};
pub use rollups::{FIVE_MINUTES_MS, HOUR_MS, RollupRow, StoredCounts};
pub use sqlite::MIGRATOR;
pub use store::{BackendKind, ChangeListener, Db, LeaseSession, SessionStoreBackend};
pub use tokens::{LOOKUP_PREFIX_CHARS, TokenListRow, TokenRow};
pub use totals::ProcessTotalsRow;
pub use url::DbUrl;
pub use users::UserRow;
