//! Storage: every SQL statement of the server lives under here.
//!
//! The files beside this one hold what storage speaks in, whatever the database: the rows it
//! returns and the values it is given, grouped by aggregate (reports and samples, guests and
//! facts, rollups and history, alerts, users and tokens), and [`StoreError`]. `sqlite/` is the
//! one backend: [`Db`] and its operations, one file per aggregate, and everything SQLite's own
//! (the pool, the write transaction, its error codes, `PRAGMA`s, `json_each`, query plans). A
//! second backend is a sibling of `sqlite/` implementing the same operations with these types.
//!
//! Queries are checked at run time (`query_as` + `FromRow`), so a fresh clone builds without a
//! database; every function is exercised by the tests against a real SQLite file.

mod alerts;
pub mod error;
mod facts;
mod guests;
mod history;
mod hosts;
mod reports;
mod rollups;
mod sqlite;
mod tokens;
mod totals;
mod users;

pub use alerts::{
    AlertRow, AlertWrite, NewReceiver, NewRule, Notify, OutboxCounts, OutboxRow, PendingGroup,
    ReceiverRow, RuleRow, SilenceRow,
};
pub use error::{StoreError, StoreResult};
pub use facts::{FactsEventRow, FactsRow, FactsSpanRow, IDLE_READINGS_KEPT_MS, StoredFacts};
pub use guests::{GuestRow, GuestScope, IdleReading, IntervalRow, SampleRow};
pub use history::{GuestFactsSpanRow, GuestRollupRow, StoredHistories};
pub use hosts::HostRow;
#[cfg(feature = "test-support")]
pub use reports::RawSample;
pub use reports::{ReportToStore, StoreOutcome, StoredGuest};
pub use rollups::{FIVE_MINUTES_MS, HOUR_MS, RollupRow, StoredCounts};
pub use sqlite::{Db, MIGRATOR};
pub use tokens::{LOOKUP_PREFIX_CHARS, TokenListRow, TokenRow};
pub use totals::ProcessTotalsRow;
pub use users::UserRow;
