//! The agent library's error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot reach the server at {0}")]
    Unreachable(String),
    #[error("the server is unavailable ({status}): {message}")]
    Unavailable {
        status: u16,
        message: String,
        /// How long the server asked to be left alone (`Retry-After`).
        retry_after: Option<std::time::Duration>,
    },
    #[error("the server refused the report ({status}): {message}")]
    Rejected { status: u16, message: String },
}
