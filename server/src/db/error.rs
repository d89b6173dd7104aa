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

/// A failure of the storage underneath the database, not of the request or of the server's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageFault {
    /// No space left for the database or its log.
    Full,
    /// The database cannot be written or read now: a read-only file, mount or server, an I/O
    /// error, a lock held past its timeout, no free connection in time, the connection to the
    /// database server lost.
    Unavailable,
}

impl StoreError {
    /// The same failure again, for each caller one failed operation answers (a batch of
    /// reports): sqlx's errors cannot be cloned, so the copy keeps the kind and the message.
    pub fn again(&self) -> StoreError {
        let copy = |e: &sqlx::Error| sqlx::Error::Protocol(e.to_string());
        match self {
            StoreError::NotFound(m) => StoreError::NotFound(m.clone()),
            StoreError::Conflict(m) => StoreError::Conflict(m.clone()),
            StoreError::Refused(m) => StoreError::Refused(m.clone()),
            StoreError::Full(e) => StoreError::Full(copy(e)),
            StoreError::Unavailable(e) => StoreError::Unavailable(copy(e)),
            StoreError::Backend(e) => StoreError::Backend(copy(e)),
            StoreError::Migrate(e) => StoreError::Corrupt(e.to_string()),
            StoreError::Corrupt(m) => StoreError::Corrupt(m.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_told_again_keeps_its_kind_and_message() {
        let io = || sqlx::Error::Io(std::io::Error::other("disk I/O error"));
        let cases = [
            StoreError::NotFound("no such rule".into()),
            StoreError::Conflict("taken".into()),
            StoreError::Refused("other host".into()),
            StoreError::Full(io()),
            StoreError::Unavailable(io()),
            StoreError::Backend(io()),
            StoreError::Corrupt("bad row".into()),
        ];
        for e in cases {
            let again = e.again();
            assert_eq!(
                std::mem::discriminant(&e),
                std::mem::discriminant(&again),
                "{e:?}"
            );
            assert!(
                again
                    .to_string()
                    .contains(&e.to_string().replace("database error: ", "")),
                "{e} / {again}"
            );
        }
    }
}
