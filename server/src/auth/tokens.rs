//! API tokens: how they are made and stored.
//!
//! A token is 32 random bytes shown once as `tks_<64 hex>`; the database holds only its SHA-256,
//! which is enough for a secret with this much entropy (no password hashing needed). A token is
//! looked up by the first 16 hex digits of its hash, and the whole hash is then compared in
//! constant time, so timing reveals nothing about the token.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::crypto::{random_hex, sha256_hex};
use crate::error::AppResult;

const TOKEN_PREFIX: &str = "tks_";

/// A new random token, as shown to the user once.
pub fn new_token() -> AppResult<String> {
    Ok(format!("{TOKEN_PREFIX}{}", random_hex()?))
}

/// What the database stores for a token.
pub fn token_hash(token: &str) -> String {
    sha256_hex(token.as_bytes())
}

/// Tokens made on the settings page, kept in the server's memory for the one page that shows
/// them: the redirect after the form carries only a ticket for it in the session, so the token
/// itself is never written to the session store (a database table), nor kept once shown.
#[derive(Debug, Default)]
pub struct NewTokens {
    /// By ticket: the token, its name, and when it is forgotten unshown (ms).
    kept: Mutex<HashMap<String, (String, String, i64)>>,
}

/// How long a new token waits for its page.
const NEW_TOKEN_KEPT_MS: i64 = 5 * 60 * 1000;
/// New tokens waiting at most (each a few hundred bytes); past it the oldest are dropped.
const MAX_NEW_TOKENS: usize = 1000;

impl NewTokens {
    /// Keeps `token` (named `name`) for its page; returns the ticket the page shows it for.
    pub fn keep(&self, token: String, name: String, now_ms: i64) -> AppResult<String> {
        let ticket = random_hex()?;
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|_, (_, _, until_ms)| *until_ms > now_ms);
        if kept.len() >= MAX_NEW_TOKENS
            && let Some(oldest) = kept
                .iter()
                .min_by_key(|(_, (_, _, until_ms))| *until_ms)
                .map(|(ticket, _)| ticket.clone())
        {
            kept.remove(&oldest);
        }
        kept.insert(ticket.clone(), (token, name, now_ms + NEW_TOKEN_KEPT_MS));
        Ok(ticket)
    }

    /// The token and name kept under `ticket`, once: taken away.
    pub fn take(&self, ticket: &str, now_ms: i64) -> Option<(String, String)> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let (token, name, until_ms) = kept.remove(ticket)?;
        (until_ms > now_ms).then_some((token, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_32_random_bytes_in_hex_behind_a_prefix() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_ne!(a, b);
        let hex_part = a.strip_prefix(TOKEN_PREFIX).unwrap();
        assert_eq!(hex_part.len(), 64);
        assert!(hex_part.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn a_new_token_is_shown_once_within_its_time() {
        let kept = NewTokens::default();
        let ticket = kept.keep("tks_1".into(), "hv1".into(), 0).unwrap();
        assert_eq!(kept.take("made-up", 1), None);
        assert_eq!(kept.take(&ticket, 1), Some(("tks_1".into(), "hv1".into())));
        assert_eq!(kept.take(&ticket, 2), None);
        let late = kept.keep("tks_2".into(), "hv2".into(), 0).unwrap();
        assert_eq!(kept.take(&late, NEW_TOKEN_KEPT_MS), None);
    }

    #[test]
    fn the_stored_hash_is_the_sha256_of_the_token() {
        // FIPS 180-2 test vector for "abc".
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
