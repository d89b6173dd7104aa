//! Storage: every SQL statement of the server lives under here.
//!
//! The files beside this one hold what storage speaks in, whatever the database: the rows it
//! returns and the values it is given, grouped by aggregate (reports and samples, guests and
//! facts, rollups and history, alerts, users and tokens), and [`StoreError`]. [`Db`]
//! (`store.rs`) is the handle the server holds, opened from a [`DbUrl`]; `operations.rs` lists
//! every operation it offers, with what it promises, and forwards each to the backend. The
//! statements are written once, in `sql/` (below), and compiled into each backend,
//! `sqlite/` (the default) and `postgres/`, against that backend's `dialect`; each backend
//! holds only what is its database's own (the pool, the write transaction, its error codes,
//! the few reads and deletes it does its own way).
//!
//! `sql/`: the statements of both backends, written once. Each file there is compiled into
//! `sqlite/` and into `postgres/` (each lists them with `#[path]`), where `super::dialect` names that
//! backend's types (`Store`, `DB`, `Conn`, `WriteTx`) and its SQL where the two databases
//! really differ (`GREATEST` or `MAX`, a lateral join or a pinned join order, byte-wise
//! collation, id lists as an array or JSON, case-blind user names). Parameters are `$n` on
//! both; unsigned values are bound and read as 64-bit integers. What each operation promises
//! is said once, in `operations.rs`; the files in `sql/` say only how.
//!
//! A third backend is a folder beside them with its `dialect.rs` (every name the other two
//! have), its store, write transaction, fault mapping and migrations, and the same list of
//! `#[path]` modules.
//!
//! Queries are checked at run time (`query_as` + `FromRow`), so a fresh clone builds without a
//! database; every function is exercised by the tests against a real database of each kind.

mod alerts;
mod change_records;
pub mod cluster;
pub mod error;
mod facts;
mod fault;
mod guests;
mod history;
mod hosts;
mod migrate_data;
mod operations;
// The two backends compile the same statement files of `sql/` (`#[path]`): on purpose.
#[allow(clippy::duplicate_mod)]
mod postgres;
mod process_totals;
mod reports;
mod rollups;
mod rows_at_once;
#[allow(clippy::duplicate_mod)]
mod sqlite;
mod store;
mod tokens;
mod url;
mod users;

pub use alerts::{
    AlertResolution, AlertRow, AlertUpdate, AlertWrite, NewAlert, Notify, OutboxCounts, OutboxRow,
    PendingGroup, ReceiverRow, ReceiverSettings, RuleRow, RuleSettings, SilenceRow,
};
pub use change_records::{ChangeRecordRow, NewChangeRecord, SettledFigures};
pub use error::{StoreError, StoreResult};
pub use facts::{
    DeliveredFacts, FactsEventRow, FactsRow, FactsSpanRow, IDLE_READINGS_KEPT_MS, StoredFacts,
};
pub use guests::{
    GONE_AFTER_MISSED_REPORTS, GuestRow, GuestScope, IdleReading, IntervalRow, ReportedSample,
    SampleRow, VmAsReported,
};
pub use history::{GuestFactsSpanRow, GuestRollupRow, StoredHistories};
pub use hosts::{HostRow, HostsOutstanding};
pub use migrate_data::{TableCopy, migrate_data};
pub use postgres::{MIGRATOR as POSTGRES_MIGRATOR, WRITE_LOCK as POSTGRES_WRITE_LOCK};
pub use process_totals::ProcessTotals;
#[cfg(feature = "test-support")]
pub use reports::RawSample;
pub use reports::{ReportToStore, StoreOutcome, StoredGuest};
pub use rollups::{FIVE_MINUTES_MS, HOUR_MS, RollupRow, StoredCounts};
pub use sqlite::MIGRATOR;
pub use store::{BackendKind, ChangeListener, Db, LeaseSession, SessionStoreBackend};
pub use tokens::{LOOKUP_PREFIX_CHARS, TokenListRow, TokenRow};
pub use url::DbUrl;
pub use users::UserRow;
