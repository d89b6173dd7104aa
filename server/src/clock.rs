//! Time, injected: the server reads "now" from a [`Clock`] it is given, so tests can move time
//! forward instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Where the server reads the current time, in milliseconds since the Unix epoch (the unit of
/// every stored time).
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> i64;
}

/// A clock to share between the state, the handlers and the background jobs.
pub type SharedClock = Arc<dyn Clock>;

/// The wall clock: what a server in production runs on.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        now_ms()
    }
}

/// A clock that moves only when told to: tests step it past a deadline instead of sleeping
/// through it.
#[derive(Debug)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        ManualClock {
            now_ms: AtomicI64::new(start_ms),
        }
    }

    /// Moves the clock forward (or back, with a negative step) by `step_ms`.
    pub fn advance_ms(&self, step_ms: i64) {
        self.now_ms.fetch_add(step_ms, Ordering::SeqCst);
    }

    pub fn set_ms(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

/// The wall clock's milliseconds since the Unix epoch. Code that serves requests or runs jobs
/// reads the state's [`Clock`] instead; this is for the edges that have none (the command line,
/// the agent-facing simulator).
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        clock.advance_ms(2_500);
        assert_eq!(clock.now_ms(), 3_500);
        clock.set_ms(10);
        assert_eq!(clock.now_ms(), 10);
    }
}
