//! PostgreSQL's error codes (SQLSTATE) that say the storage or the database server failed, not
//! the statement: <https://www.postgresql.org/docs/15/errcodes-appendix.html>

use sqlx::postgres::PgDatabaseError;

use crate::db::error::StorageFault;

/// Class 53 (insufficient resources: `53100` disk full), class 08 (connection exception), class
/// 57P (the server shutting down or starting), `25006` (a read-only transaction: a hot standby),
/// `40001` and `40P01` (a serialization failure or a deadlock: the same write can be tried
/// again), `55P03` (a lock not available in time: the write lock held past its 5 s), `57014`
/// (a statement cancelled: a statement_timeout of the server's, or an administrator).
pub fn storage_fault(error: &PgDatabaseError) -> Option<StorageFault> {
    let code = error.code();
    match code {
        "53100" => Some(StorageFault::Full),
        "25006" | "40001" | "40P01" | "55P03" | "57014" => Some(StorageFault::Unavailable),
        _ if code.starts_with("53") || code.starts_with("08") || code.starts_with("57P") => {
            Some(StorageFault::Unavailable)
        }
        _ => None,
    }
}
