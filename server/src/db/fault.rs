//! Which database failures are the storage's (a full disk, a read-only file, a lock held too
//! long, a database server that is down) rather than a bug: those pass, they are answered "retry
//! later", and nothing was written. Each backend reads its own error codes (`sqlite/fault.rs`,
//! `postgres/fault.rs`).

use sqlx::postgres::PgDatabaseError;
use sqlx::sqlite::SqliteError;

use super::error::{StorageFault, StoreError};
use super::{postgres, sqlite};

/// What kind of storage fault `error` is, if it is one.
fn storage_fault(error: &sqlx::Error) -> Option<StorageFault> {
    match error {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) => Some(StorageFault::Unavailable),
        sqlx::Error::Database(e) => {
            if let Some(e) = e.try_downcast_ref::<SqliteError>() {
                sqlite::storage_fault(e)
            } else if let Some(e) = e.try_downcast_ref::<PgDatabaseError>() {
                postgres::storage_fault(e)
            } else {
                None
            }
        }
        _ => None,
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match storage_fault(&e) {
            Some(StorageFault::Full) => StoreError::Full(e),
            Some(StorageFault::Unavailable) => StoreError::Unavailable(e),
            None => StoreError::Backend(e),
        }
    }
}
