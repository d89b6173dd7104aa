//! Login throttling per account: after a few wrong passwords for a name, each next attempt for
//! that name must wait, twice as long after each failure. It applies to every name typed, known
//! or not, so it tells nothing about which accounts exist; a correct login clears it, and so does
//! a new password (`tickscope-server user passwd`, the account page).
//!
//! Each attempt takes its place before its password is checked ([`LoginThrottle::attempt`]
//! counts it as a failure until it succeeds), so attempts that arrive together are held to the
//! same count as attempts one after another: five concurrent guesses are checked, the rest wait.
//! The password hashing semaphore bounds what guessing costs the server; this bounds how fast
//! one account can be guessed at, whoever guesses. Guesses at a user's current password on the
//! account page count against the same name: it is the same password, whichever door.
//!
//! Its memory is bounded in bytes, not only in names: the map is keyed by the SHA-256 of the
//! normalised name, 32 bytes whatever was typed, so an entry takes about 80 bytes (key, counts,
//! the hash table's overhead). A flood of made-up names is forgotten stalest first, but never a
//! name that is being held back: forgetting it would let its guessing start over. Held-back
//! names are kept up to [`MAX_HELD_NAMES`] (8 MiB); past that every new name waits too.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// Failures allowed before the first wait.
pub const FREE_FAILURES: u32 = 5;
/// The first wait, in seconds; it doubles with each further failure.
const FIRST_WAIT_S: i64 = 2;
/// The longest wait, in seconds.
const MAX_WAIT_S: i64 = 15 * 60;
/// Names remembered before those not held back are forgotten, stalest first.
const MAX_NAMES: usize = 10_000;
/// Names held back remembered at most: a flood that holds back this many names (five argon2
/// checks each) makes every new name wait `FLOOD_WAIT_S`.
pub const MAX_HELD_NAMES: usize = 100_000;
const FLOOD_WAIT_S: i64 = 60;

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last_ms: i64,
    /// A fingerprint of the password hash the failures were against (0: no such user): a new
    /// password makes them moot.
    password: u64,
}

impl Failures {
    /// When the name may try again, in ms.
    fn until_ms(&self) -> i64 {
        self.last_ms + wait_s(self.count) * 1000
    }

    /// Whether the name is being held back: it failed past its free attempts, and its last
    /// failure is recent (within the longest wait). Such a name is never forgotten to make room:
    /// its guessing would start over.
    fn held_back(&self, now_ms: i64) -> bool {
        self.count >= FREE_FAILURES && now_ms - self.last_ms < MAX_WAIT_S * 1000
    }
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
    names: Mutex<Names>,
}

#[derive(Debug, Default)]
struct Names {
    map: HashMap<Key, Failures>,
    /// The size at which room is made next: a quarter of [`MAX_NAMES`] new names after the
    /// last time, so that making room (a sort of the names) is paid once per that many.
    sweep_at: usize,
}

/// A name as the throttle keeps it: the SHA-256 of its normalised form.
type Key = [u8; 32];

/// Names that differ only in case or surrounding space are one name.
fn key(name: &str) -> Key {
    Sha256::digest(name.trim().to_lowercase().as_bytes()).into()
}

/// A fingerprint of a stored password hash (0 for a name without a user).
pub fn password_fingerprint(password_hash: Option<&str>) -> u64 {
    password_hash.map_or(0, |hash| {
        let digest = Sha256::digest(hash.as_bytes());
        u64::from_le_bytes(digest[..8].try_into().unwrap_or_default()).max(1)
    })
}

/// An attempt that took its place: counted as a failure unless it [`Attempt::succeeded`].
#[must_use = "an attempt that succeeds must say so, or it counts as a failure"]
pub struct Attempt<'a> {
    throttle: &'a LoginThrottle,
    key: Key,
}

impl Attempt<'_> {
    /// The password was right: the name's failures are forgotten.
    pub fn succeeded(self) {
        self.throttle.lock().map.remove(&self.key);
    }
}

impl LoginThrottle {
    /// Takes an attempt for `name` at `now_ms`, before its password is checked: counted as a
    /// failure until it succeeds. `Err(seconds to wait)` while the name may not try. `password`
    /// is [`password_fingerprint`] of the name's stored hash now: failures against another
    /// password (the user was given a new one since) no longer count.
    pub fn attempt(&self, name: &str, password: u64, now_ms: i64) -> Result<Attempt<'_>, i64> {
        let key = key(name);
        let mut guard = self.lock();
        let names = &mut *guard;
        if let Some(f) = names.map.get(&key)
            && f.password != password
        {
            names.map.remove(&key);
        }
        if let Some(f) = names.map.get(&key) {
            let until_ms = f.until_ms();
            if now_ms < until_ms {
                return Err((until_ms - now_ms + 999) / 1000);
            }
        } else if names.map.len() >= names.sweep_at.max(MAX_NAMES) {
            make_room(&mut names.map, now_ms);
            names.sweep_at = names.map.len() + MAX_NAMES / 4;
        }
        if !names.map.contains_key(&key) && names.map.len() >= MAX_HELD_NAMES {
            return Err(FLOOD_WAIT_S);
        }
        let f = names.map.entry(key).or_insert(Failures {
            count: 0,
            last_ms: now_ms,
            password,
        });
        f.count += 1;
        f.last_ms = now_ms;
        Ok(Attempt {
            throttle: self,
            key,
        })
    }

    /// How many names it remembers.
    pub fn names(&self) -> usize {
        self.lock().map.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Names> {
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Forgets the names not held back now, stalest first, down to three quarters of
/// [`MAX_NAMES`]; a name held back is never forgotten (it would start its guessing over).
fn make_room(names: &mut HashMap<Key, Failures>, now_ms: i64) {
    let mut free: Vec<(i64, Key)> = names
        .iter()
        .filter(|(_, f)| !f.held_back(now_ms))
        .map(|(key, f)| (f.last_ms, *key))
        .collect();
    free.sort_unstable();
    let excess = names.len().saturating_sub(MAX_NAMES * 3 / 4);
    for (_, key) in free.into_iter().take(excess) {
        names.remove(&key);
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
            // Failed: the attempt is dropped without succeeding.
            let _ = t.attempt("Alice", 7, 1_000 * i).unwrap();
        }
        // The fifth failure at 4 s: wait 2 s.
        assert_eq!(t.attempt(" ALICE ", 7, 4_500).err(), Some(2));
        let failed = t.attempt("alice", 7, 6_000).unwrap();
        drop(failed);
        // Another name is not affected.
        let _ = t.attempt("bob", 0, 6_000).unwrap();
        assert_eq!(t.attempt("alice", 7, 6_001).err(), Some(4));
        // Its wait over, a right password clears it.
        t.attempt("Alice", 7, 10_000).unwrap().succeeded();
        assert!(t.attempt("alice", 7, 10_001).is_ok());
    }

    #[test]
    fn attempts_count_before_their_passwords_are_checked() {
        let t = LoginThrottle::default();
        // Thirty attempts arrive before any is answered: five are let through.
        let attempts: Vec<_> = (0..30).map(|_| t.attempt("alice", 7, 1_000)).collect();
        assert_eq!(attempts.iter().filter(|a| a.is_ok()).count(), 5);
    }

    #[test]
    fn a_new_password_clears_the_failures_against_the_old_one() {
        let t = LoginThrottle::default();
        for _ in 0..8 {
            let _ = t.attempt("alice", 7, 1_000);
        }
        assert!(t.attempt("alice", 7, 1_001).is_err());
        // `user passwd` gave alice another hash.
        assert!(t.attempt("alice", 8, 1_002).is_ok());
    }

    #[test]
    fn a_flood_of_names_stays_bounded_and_never_forgets_a_held_back_one() {
        let t = LoginThrottle::default();
        for _ in 0..6 {
            let _ = t.attempt("alice", 7, 0);
        }
        // Made-up names, long after alice's wait ended but within the time she is remembered.
        for i in 0..(MAX_NAMES as i64 + 10) {
            let _ = t.attempt(&format!("n{i}"), 0, 60_000 + i);
        }
        assert!(t.names() <= MAX_NAMES);
        // Alice still counts her five failures (the sixth attempt at 0 was held back): her sixth
        // makes her wait 4 s.
        let _ = t.attempt("alice", 7, 100_000);
        assert_eq!(t.attempt("alice", 7, 100_001).err(), Some(4));
    }
}
