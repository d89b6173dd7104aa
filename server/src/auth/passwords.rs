//! Dashboard passwords: argon2id with the crate's default parameters (19 MiB, 2 passes), stored
//! as PHC strings that carry their own salt and parameters.

use argon2::Argon2;
use std::sync::{LazyLock, OnceLock};

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

use tokio::sync::Semaphore;

use crate::error::{AppError, AppResult};

/// Hashes running at once: one per two CPUs (at least one). Each takes 19 MiB and tens of
/// milliseconds of a CPU, so a flood of logins waits its turn instead of taking all the memory,
/// and at most half the machine: the other half serves everyone else.
static HASHING_SLOTS: LazyLock<Semaphore> = LazyLock::new(|| {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    Semaphore::new((cpus / 2).max(1))
});

/// How much lower than the server's own threads the hashing runs (a nice value): a request
/// that needs a CPU while passwords are being hashed gets it first.
const HASHING_NICENESS: i32 = 10;

/// A hash of no password, checked when the user name is unknown, so that a wrong name costs as
/// long as a wrong password and the time does not tell which names exist.
static DUMMY_HASH: OnceLock<String> = OnceLock::new();

/// Runs `work` (hashing) on a thread of its own at a lower priority, at most `HASHING_SLOTS`
/// at once. Not on tokio's blocking threads: a thread's priority stays with it, and those
/// threads also read reports for everyone. (A thread per hash: tens of microseconds against
/// the hash's tens of milliseconds.)
async fn in_a_slot<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> AppResult<T> {
    let _slot = HASHING_SLOTS
        .acquire()
        .await
        .map_err(|e| AppError::Internal(format!("hashing slots closed: {e}")))?;
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("password-hash".into())
        .spawn(move || {
            lower_priority();
            let _ = done.send(work());
        })
        .map_err(|e| AppError::Internal(format!("cannot start a hashing thread: {e}")))?;
    result
        .await
        .map_err(|_| AppError::Internal("a password hashing thread ended without an answer".into()))
}

/// Lowers this thread's priority to the hashing's (Linux nice values are per thread).
fn lower_priority() {
    let thread = rustix::thread::gettid();
    let now = rustix::process::getpriority_process(Some(thread)).unwrap_or(0);
    // Raising one's own nice value needs no privilege; failing to is not worth failing a login.
    let _ = rustix::process::setpriority_process(Some(thread), now + HASHING_NICENESS);
}

/// [`hash_password`] off the async threads.
pub async fn hash_password_async(password: String) -> AppResult<String> {
    in_a_slot(move || hash_password(&password)).await?
}

/// Whether `password` matches `phc`, off the async threads; with no user (`phc` None) it checks
/// a dummy hash and says no, taking as long.
pub async fn check_password(password: String, phc: Option<String>) -> AppResult<bool> {
    in_a_slot(move || match phc {
        Some(phc) => verify_password(&password, &phc),
        None => {
            let dummy = DUMMY_HASH
                .get_or_init(|| hash_password("no user has this password").unwrap_or_default());
            verify_password(&password, dummy);
            false
        }
    })
    .await
}

/// Longest user name, in characters.
pub const MAX_USER_NAME_CHARS: usize = 64;

/// A user name as typed (on the command line or the settings page): trimmed, 1 to
/// `MAX_USER_NAME_CHARS` characters, no control characters.
pub fn user_name(text: &str) -> AppResult<String> {
    let name = text.trim();
    if name.is_empty()
        || name.chars().count() > MAX_USER_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(AppError::invalid(
            "name",
            format!("must be 1 to {MAX_USER_NAME_CHARS} characters, without control characters"),
        ));
    }
    Ok(name.to_string())
}

/// Shortest password `user add` accepts, in characters.
pub const MIN_PASSWORD_CHARS: usize = 10;

pub fn hash_password(password: &str) -> AppResult<String> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(AppError::invalid(
            "password",
            format!("must be at least {MIN_PASSWORD_CHARS} characters"),
        ));
    }
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| AppError::Internal(format!("cannot hash a password: {e}")))
}

/// Whether `password` matches the stored PHC string; a malformed one matches nothing.
pub fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|hash| {
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_verifies_against_its_own_hash_only() {
        let hash = hash_password("correct horse battery").unwrap();
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(verify_password("correct horse battery", &hash));
        assert!(!verify_password("correct horse batterY", &hash));
        assert!(!verify_password("correct horse battery", "not a hash"));
        // Salted: the same password hashes differently each time.
        assert_ne!(hash, hash_password("correct horse battery").unwrap());
        assert!(hash_password("short").is_err());
    }
}
