//! The PostgreSQL backend: [`PgDb`] and every statement it runs, one file per aggregate, the
//! same operations as `sqlite/` in PostgreSQL's dialect (`$n` parameters, `RETURNING`,
//! `= ANY($1)` for lists, `ON CONFLICT`), on the schema of `migrations/postgres/`.

mod alerts;
mod cluster;
mod facts;
mod fault;
mod guests;
mod history;
mod hosts;
mod reports;
mod rollups;
mod settings;
mod store;
#[cfg(feature = "test-support")]
mod test_support;
mod tokens;
mod totals;
mod users;

pub use cluster::{PgChangeListener, PgLeaseSession};
pub use fault::storage_fault;
pub use store::{MIGRATOR, PgDb, WRITE_LOCK};
