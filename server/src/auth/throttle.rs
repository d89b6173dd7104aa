//! Login throttling per account: after a few wrong passwords for a name, each next attempt for
//! that name must wait, twice as long after each failure. It applies to every name typed, known
//! or not, so it tells nothing about which accounts exist; a correct login clears it.
//!
//! The password hashing semaphore bounds what guessing costs the server; this bounds how fast
//! one account can be guessed at, whoever guesses. Guesses at a user's current password on the
//! account page count against the same name: it is the same password, whichever door.
//!
//! Its memory is bounded in bytes, not only in names: the map is keyed by the SHA-256 of the
//! normalised name, 32 bytes whatever was typed, so `MAX_NAMES` entries take at most about
//! `MAX_NAMES` × 64 bytes (key, counts, the hash table's overhead), under 1 MiB. Counting the
//! bytes of each name kept instead would bound the map as well, but every eviction would have to
//! weigh names; a fixed-size key makes the count bound a byte bound. (Names longer than a user
//! name can be are refused before they reach the throttle anyway: `web::form`.)

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// Failures allowed before the first wait.
pub const FREE_FAILURES: u32 = 5;
/// The first wait, in seconds; it doubles with each further failure.
const FIRST_WAIT_S: i64 = 2;
/// The longest wait, in seconds.
const MAX_WAIT_S: i64 = 15 * 60;
/// Names remembered at most; beyond it the stalest are forgotten (a flood of random names must
/// not grow the map without end).
const MAX_NAMES: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last_ms: i64,
}

/// How long, in seconds, a name that failed `count` times must wait after its last failure.
pub fn wait_s(count: u32) -> i64 {
    if count < FREE_FAILURES {
        return 0;
    }
    let doublings = (count - FREE_FAILURES).min(20);
    (FIRST_WAIT_S << doublings).min(MAX_WAIT_S)
}

#[derive(Debug, Default)]
pub struct LoginThrottle {
    names: Mutex<HashMap<Key, Failures>>,
}

/// A name as the throttle keeps it: the SHA-256 of its normalised form.
type Key = [u8; 32];

/// Names that differ only in case or surrounding space are one name.
fn key(name: &str) -> Key {
    Sha256::digest(name.trim().to_lowercase().as_bytes()).into()
}

impl LoginThrottle {
    /// `Err(seconds to wait)` while `name` may not try again.
    pub fn check(&self, name: &str, now_ms: i64) -> Result<(), i64> {
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        let Some(f) = names.get(&key(name)) else {
            return Ok(());
        };
        let until_ms = f.last_ms + wait_s(f.count) * 1000;
        if now_ms < until_ms {
            Err((until_ms - now_ms + 999) / 1000)
        } else {
            Ok(())
        }
    }

    pub fn failed(&self, name: &str, now_ms: i64) {
        let key = key(name);
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        if names.len() >= MAX_NAMES && !names.contains_key(&key) {
            // Forget those whose wait is long over, else the stalest half.
            names.retain(|_, f| now_ms - f.last_ms < MAX_WAIT_S * 1000);
            if names.len() >= MAX_NAMES {
                let mut last: Vec<i64> = names.values().map(|f| f.last_ms).collect();
                last.sort_unstable();
                let cut = last[last.len() / 2];
                names.retain(|_, f| f.last_ms > cut);
            }
        }
        let entry = names.entry(key).or_insert(Failures {
            count: 0,
            last_ms: now_ms,
        });
        entry.count += 1;
        entry.last_ms = now_ms;
    }

    pub fn succeeded(&self, name: &str) {
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key(name));
    }

    /// How many names it remembers.
    pub fn names(&self) -> usize {
        self.names.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_after_the_free_failures_up_to_a_cap() {
        let cases = [
            (0, 0),
            (4, 0),
            (5, 2),
            (6, 4),
            (7, 8),
            (13, 512),
            (14, 900),
            (40, 900),
        ];
        for (count, expected) in cases {
            assert_eq!(wait_s(count), expected, "{count}");
        }
    }

    #[test]
    fn a_name_is_held_back_after_five_failures_whatever_its_case_until_a_success() {
        let t = LoginThrottle::default();
        for i in 0..5 {
            assert_eq!(t.check("Alice", 1_000 * i), Ok(()));
            t.failed("alice", 1_000 * i);
        }
        // The fifth failure at 4 s: wait 2 s.
        assert_eq!(t.check(" ALICE ", 4_500), Err(2));
        assert_eq!(t.check("alice", 6_000), Ok(()));
        // Another name is not affected.
        assert_eq!(t.check("bob", 4_500), Ok(()));
        t.failed("alice", 6_000);
        assert_eq!(t.check("alice", 6_001), Err(4));
        t.succeeded("Alice");
        assert_eq!(t.check("alice", 6_001), Ok(()));
    }

    #[test]
    fn a_flood_of_names_stays_bounded() {
        let t = LoginThrottle::default();
        for i in 0..(MAX_NAMES as i64 + 10) {
            t.failed(&format!("n{i}"), i);
        }
        assert!(t.names() <= MAX_NAMES);
    }
}
