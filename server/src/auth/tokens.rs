//! API tokens: how they are made and stored.
//!
//! A token is 32 random bytes shown once as `tks_<64 hex>`; the database holds only its SHA-256,
//! which is enough for a secret with this much entropy (no password hashing needed). A token is
//! looked up by the first 16 hex digits of its hash, and the whole hash is then compared in
//! constant time, so timing reveals nothing about the token.

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
    fn the_stored_hash_is_the_sha256_of_the_token() {
        // FIPS 180-2 test vector for "abc".
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
