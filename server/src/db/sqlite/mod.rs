//! The SQLite backend: [`SqliteDb`] and every statement it runs, one file per aggregate.

mod alerts;
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
mod write_tx;

pub use fault::storage_fault;
pub use store::{MIGRATOR, SqliteDb};
