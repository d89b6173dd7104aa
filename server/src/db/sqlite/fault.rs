//! SQLite's error codes that say the storage failed, not the statement.

use sqlx::error::DatabaseError;
use sqlx::sqlite::SqliteError;

use crate::db::error::StorageFault;

// SQLite's primary result codes (https://www.sqlite.org/rescode.html); sqlx reports the extended
// code, whose low byte is the primary one.
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;
const SQLITE_READONLY: i64 = 8;
const SQLITE_IOERR: i64 = 10;
const SQLITE_FULL: i64 = 13;
const SQLITE_CANTOPEN: i64 = 14;

/// A full disk (SQLITE_FULL); a read-only file or mount, an I/O error, a write lock held past
/// the busy timeout.
pub fn storage_fault(error: &SqliteError) -> Option<StorageFault> {
    let primary = error.code()?.parse::<i64>().ok()? & 0xff;
    match primary {
        SQLITE_FULL => Some(StorageFault::Full),
        SQLITE_BUSY | SQLITE_LOCKED | SQLITE_READONLY | SQLITE_IOERR | SQLITE_CANTOPEN => {
            Some(StorageFault::Unavailable)
        }
        _ => None,
    }
}
