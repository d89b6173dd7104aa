//! Where the sampler reads the time: the wall clock, or a clock a test moves by hand so that an
//! interval can be as long as it needs without the test sleeping through it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Default)]
pub struct SampleClock {
    /// `None`: the wall clock. `Some`: a clock that stands at its start plus what it was moved
    /// forward, in milliseconds.
    manual: Option<Arc<Manual>>,
}

#[derive(Debug)]
struct Manual {
    start: Instant,
    start_ms: i64,
    moved_ms: AtomicU64,
}

impl SampleClock {
    /// The wall clock.
    pub fn system() -> Self {
        SampleClock::default()
    }

    /// A clock that starts now and moves only when [`SampleClock::advance`] says so.
    pub fn manual() -> Self {
        SampleClock {
            manual: Some(Arc::new(Manual {
                start: Instant::now(),
                start_ms: unix_ms(SystemTime::now()),
                moved_ms: AtomicU64::new(0),
            })),
        }
    }

    /// Moves a manual clock forward by `step`; the wall clock moves by itself.
    pub fn advance(&self, step: Duration) {
        if let Some(m) = &self.manual {
            m.moved_ms
                .fetch_add(step.as_millis() as u64, Ordering::SeqCst);
        }
    }

    /// Now, as an instant (for interval lengths) and as milliseconds since the Unix epoch (for
    /// the report's times).
    pub fn now(&self) -> (Instant, i64) {
        match &self.manual {
            None => (Instant::now(), unix_ms(SystemTime::now())),
            Some(m) => {
                let moved_ms = m.moved_ms.load(Ordering::SeqCst);
                (
                    m.start + Duration::from_millis(moved_ms),
                    m.start_ms + moved_ms as i64,
                )
            }
        }
    }
}

pub fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_both_readings_move_together() {
        let clock = SampleClock::manual();
        let (i0, ms0) = clock.now();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(clock.now(), (i0, ms0), "a manual clock stands still");
        clock.advance(Duration::from_millis(2_100));
        let (i1, ms1) = clock.now();
        assert_eq!(i1.duration_since(i0), Duration::from_millis(2_100));
        assert_eq!(ms1 - ms0, 2_100);
    }
}
