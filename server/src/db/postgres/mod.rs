//! The PostgreSQL backend: [`PgDb`], a pool of connections to one database, and what is
//! PostgreSQL's own: its dialect (`dialect`), its write transaction (an advisory lock first,
//! `store`), its error codes (`fault`), what several servers on one database tell each other
//! (`cluster`), the deletion of old reports a sample may still refer to, and its query plans.
//! Every statement else is the shared one of `db/sql/`, compiled here against `dialect`.

mod cluster;
mod dialect;
mod fault;
mod history_samples;
mod old_reports;
#[cfg(feature = "test-support")]
mod plans;
mod store;

// The shared statements of `db/sql/`, compiled against this backend's `dialect`.
super::statements::shared_statements!();

pub use cluster::{PgChangeListener, PgLeaseSession};
pub use fault::storage_fault;
pub use store::{MIGRATOR, PgDb, WRITE_LOCK};
