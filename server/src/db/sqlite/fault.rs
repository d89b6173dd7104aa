//! Which database failures are the storage's (a full disk, a read-only file, a lock held too
//! long) rather than a bug: those pass, they are answered "retry later", and nothing was written.

use crate::db::error::StoreError;

/// A failure of the storage underneath the database, not of the request or of the server's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StorageFault {
    /// No space left for the database or its write-ahead log (SQLITE_FULL).
    Full,
    /// The database cannot be written or read now: a read-only file or mount, an I/O error, a
    /// write lock held past the busy timeout, no free connection in time.
    Unavailable,
}

// SQLite's primary result codes (https://www.sqlite.org/rescode.html); sqlx reports the extended
// code, whose low byte is the primary one.
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;
const SQLITE_READONLY: i64 = 8;
const SQLITE_IOERR: i64 = 10;
const SQLITE_FULL: i64 = 13;
const SQLITE_CANTOPEN: i64 = 14;

/// What kind of storage fault `error` is, if it is one.
fn storage_fault(error: &sqlx::Error) -> Option<StorageFault> {
    match error {
        sqlx::Error::PoolTimedOut => Some(StorageFault::Unavailable),
        sqlx::Error::Database(e) => {
            let primary = e.code()?.parse::<i64>().ok()? & 0xff;
            match primary {
                SQLITE_FULL => Some(StorageFault::Full),
                SQLITE_BUSY | SQLITE_LOCKED | SQLITE_READONLY | SQLITE_IOERR | SQLITE_CANTOPEN => {
                    Some(StorageFault::Unavailable)
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Which database failures are the storage's (a full disk, a read-only file, a lock held too
/// long) rather than a bug: those are told apart, so that the caller can be asked to retry. SQLite's codes: a
/// second backend classifies its own errors (with `DatabaseError::try_downcast_ref`).
impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match storage_fault(&e) {
            Some(StorageFault::Full) => StoreError::Full(e),
            Some(StorageFault::Unavailable) => StoreError::Unavailable(e),
            None => StoreError::Backend(e),
        }
    }
}
