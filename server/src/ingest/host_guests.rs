//! How many guests one host may bring into the live fleet: at most so many at once, and new
//! ones (guests the fleet does not hold: never seen, or gone and back) at so many a minute after
//! a first burst, so that one agent token inventing VMs cannot grow the fleet, and what every
//! report costs, without end. A report over either is refused whole, before it is stored.

use std::collections::HashMap;

use crate::budgets::Budgets;
use crate::error::AppError;

/// The limits, from the server's budgets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GuestLimits {
    /// Guests one host may have in the live fleet at once; also the first burst of new ones.
    pub per_host: usize,
    /// New guests a host may bring per minute after that burst.
    pub new_per_minute: u32,
}

impl GuestLimits {
    pub fn of(budgets: &Budgets) -> GuestLimits {
        GuestLimits {
            per_host: budgets.guests_per_host,
            new_per_minute: budgets.new_guests_per_host_per_minute,
        }
    }

    fn burst(&self) -> f64 {
        self.per_host as f64
    }

    fn per_ms(&self) -> f64 {
        f64::from(self.new_per_minute) / 60_000.0
    }
}

/// New guests a host may still bring: a bucket that refills at the limit's rate up to its burst.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Allowance {
    left: f64,
    at_ms: i64,
}

/// Every host's allowance, by host name (a host not yet stored has no id). A host with a full
/// allowance has no entry.
#[derive(Debug, Default)]
pub struct HostAllowances {
    hosts: HashMap<String, Allowance>,
}

impl HostAllowances {
    /// What `host` may bring at `now_ms`.
    fn left(&self, host: &str, limits: &GuestLimits, now_ms: i64) -> f64 {
        match self.hosts.get(host) {
            None => limits.burst(),
            Some(a) => {
                let elapsed_ms = (now_ms - a.at_ms).max(0) as f64;
                (a.left + elapsed_ms * limits.per_ms()).min(limits.burst())
            }
        }
    }

    /// Judges a report of `host` that brings `new_guests` and leaves it holding `held_after`:
    /// spends its new guests from the host's allowance, or says why it is refused (422 over the
    /// host's limit, 429 with when to retry over its allowance).
    pub fn admit(
        &mut self,
        host: &str,
        new_guests: usize,
        held_after: usize,
        limits: &GuestLimits,
        now_ms: i64,
    ) -> Result<(), AppError> {
        if held_after > limits.per_host {
            return Err(AppError::invalid(
                "guests",
                format!(
                    "this report would give host {host:?} {held_after} guests; this server \
                     takes at most {} per host (serve --max-guests-per-host)",
                    limits.per_host
                ),
            ));
        }
        let left = self.left(host, limits, now_ms);
        let new = new_guests as f64;
        if new > left {
            let wait_s = ((new - left) / limits.per_ms() / 1000.0).ceil().max(1.0);
            return Err(AppError::TooManyRequests {
                message: format!(
                    "host {host:?} brings {new_guests} new guests; it may bring {} at once and \
                     {} more a minute after that (serve --new-guests-per-host-per-minute, \
                     --max-guests-per-host); retry later",
                    limits.per_host, limits.new_per_minute
                ),
                retry_after_s: wait_s as u64,
            });
        }
        if new_guests > 0 {
            self.hosts.insert(
                host.to_string(),
                Allowance {
                    left: left - new,
                    at_ms: now_ms,
                },
            );
        }
        Ok(())
    }

    /// Gives back what [`HostAllowances::admit`] spent for a report that was then not stored.
    pub fn refund(&mut self, host: &str, new_guests: usize, limits: &GuestLimits) {
        if let Some(a) = self.hosts.get_mut(host) {
            a.left = (a.left + new_guests as f64).min(limits.burst());
        }
    }

    /// Forgets the hosts whose allowance is full again at `now_ms` (as if never seen).
    pub fn forget_full(&mut self, limits: &GuestLimits, now_ms: i64) {
        let burst = limits.burst();
        self.hosts
            .retain(|_, a| a.left + (now_ms - a.at_ms).max(0) as f64 * limits.per_ms() < burst);
    }

    /// Hosts with an entry.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: GuestLimits = GuestLimits {
        per_host: 100,
        new_per_minute: 60,
    };

    #[test]
    fn a_host_brings_its_burst_then_so_many_a_minute() {
        let mut a = HostAllowances::default();
        // (at ms, new guests, held after, what happens)
        let steps: [(i64, usize, usize, Option<u16>); 8] = [
            (0, 100, 100, None),
            // Over the host's limit: refused whatever its allowance.
            (0, 0, 101, Some(422)),
            (0, 1, 100, Some(429)),
            // One a second comes back.
            (1_000, 1, 100, None),
            (1_000, 1, 100, Some(429)),
            (10_000, 9, 100, None),
            (10_000, 1, 100, Some(429)),
            // Guests it holds already cost nothing.
            (10_000, 0, 100, None),
        ];
        for (at_ms, new, held, refused) in steps {
            let got = a.admit("hv", new, held, &LIMITS, at_ms);
            assert_eq!(
                got.as_ref().err().map(|e| e.status().as_u16()),
                refused,
                "{new} new, {held} held at {at_ms} ms: {got:?}"
            );
        }
        // Another host is not affected.
        assert!(a.admit("other", 100, 100, &LIMITS, 10_000).is_ok());
        // A refused report's guests come back.
        a.refund("other", 40, &LIMITS);
        assert!(a.admit("other", 40, 100, &LIMITS, 10_000).is_ok());
        // Full again after a long silence, and then forgotten.
        a.forget_full(&LIMITS, 10_000 + 200_000);
        assert!(a.is_empty());
    }

    #[test]
    fn the_refusal_says_the_limit_its_setting_and_when_to_retry() {
        let mut a = HostAllowances::default();
        a.admit("hv", 100, 100, &LIMITS, 0).unwrap();
        match a.admit("hv", 30, 100, &LIMITS, 0) {
            Err(AppError::TooManyRequests {
                message,
                retry_after_s,
            }) => {
                assert!(
                    message.contains("--new-guests-per-host-per-minute"),
                    "{message}"
                );
                assert_eq!(retry_after_s, 30);
            }
            other => panic!("{other:?}"),
        }
    }
}
