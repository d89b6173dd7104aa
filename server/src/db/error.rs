//! What can go wrong in storage, in storage's own terms: the HTTP answer to each is the web
//! layer's business (`AppError: From<StoreError>` in `crate::error`).

/// A storage operation that did not happen. Nothing was written when one is returned: every
/// write is one transaction.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The row the operation is about does not exist ("there is no such rule").
    #[error("{0}")]
    NotFound(String),
    /// The operation clashes with what is stored (a name already taken, the last admin).
    #[error("{0}")]
    Conflict(String),
    /// The stored bindings refuse the caller: a token bound to another host or guest.
    #[error("{0}")]
    Refused(String),
    /// No space left for the database or its write-ahead log.
    #[error("{0}")]
    Full(sqlx::Error),
    /// The database cannot be written or read now: a read-only file or mount, an I/O error, a
    /// write lock held past the busy timeout, no free connection in time.
    #[error("{0}")]
    Unavailable(sqlx::Error),
    /// Any other failure of the database: the server's, not the caller's.
    #[error("database error: {0}")]
    Backend(sqlx::Error),
    /// The schema could not be brought up to date at start-up.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Something stored or about to be stored does not read as it must (a value that does not
    /// encode, a row that does not decode).
    #[error("{0}")]
    Corrupt(String),
}

pub type StoreResult<T> = Result<T, StoreError>;
