//! The digests and random values the server makes: one place for SHA-256 and the OS's
//! randomness, for whoever needs them (tokens, sessions), without borrowing another module's.

use sha2::{Digest, Sha256};

use crate::error::{AppError, AppResult};

/// The SHA-256 of `bytes`, as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// 32 random bytes from the OS, in hex.
pub fn random_hex() -> AppResult<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(AppError::NoRandomness)?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_hex_matches_the_standards_test_vectors() {
        // FIPS 180-2 test vectors.
        let cases: [(&[u8], &str); 2] = [
            (
                b"abc",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                b"",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(sha256_hex(input), expected, "{input:?}");
        }
    }

    #[test]
    fn random_values_are_32_bytes_in_hex_and_differ() {
        let (a, b) = (random_hex().unwrap(), random_hex().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
