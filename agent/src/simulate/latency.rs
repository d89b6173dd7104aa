//! How long the server took to take each simulated report: a histogram of the posts' latencies
//! and its percentiles, printed as one line a script can read (`scripts/capacity.sh` does).

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Longest latency told apart from longer ones, in microseconds: an hour (a post times out
/// after 10 s; anything longer is clamped to this).
const MAX_LATENCY_US: u64 = 3_600_000_000;
/// Significant figures kept of each latency: 0.1 % resolution.
const SIGNIFICANT_FIGURES: u8 = 3;

/// The latencies of the successful posts so far, in microseconds, shared by the sender threads.
pub struct Latencies(Mutex<Histogram<u64>>);

impl Default for Latencies {
    fn default() -> Self {
        Latencies(Mutex::new(
            Histogram::new_with_bounds(1, MAX_LATENCY_US, SIGNIFICANT_FIGURES)
                .expect("the histogram's bounds are valid"),
        ))
    }
}

impl Latencies {
    pub fn record(&self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let mut histogram = self.0.lock().unwrap_or_else(|e| e.into_inner());
        histogram.saturating_record(us.clamp(1, MAX_LATENCY_US));
    }

    pub fn summary(&self) -> LatencySummary {
        LatencySummary::of(&self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Percentiles of the recorded latencies, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl LatencySummary {
    pub fn of(histogram: &Histogram<u64>) -> LatencySummary {
        let ms = |us: u64| us as f64 / 1000.0;
        LatencySummary {
            count: histogram.len(),
            p50_ms: ms(histogram.value_at_quantile(0.50)),
            p90_ms: ms(histogram.value_at_quantile(0.90)),
            p99_ms: ms(histogram.value_at_quantile(0.99)),
            max_ms: ms(histogram.max()),
        }
    }
}

/// One line, `key=value` after a fixed first word, so that scripts can read it:
/// `latency_ms count=1200 p50=3.1 p90=5.0 p99=12.4 max=40.2`.
impl fmt::Display for LatencySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "latency_ms count={} p50={:.1} p90={:.1} p99={:.1} max={:.1}",
            self.count, self.p50_ms, self.p90_ms, self.p99_ms, self.max_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary_of(latencies_ms: &[u64]) -> LatencySummary {
        let latencies = Latencies::default();
        for &ms in latencies_ms {
            latencies.record(Duration::from_millis(ms));
        }
        latencies.summary()
    }

    #[test]
    fn percentiles_are_read_from_every_recorded_latency() {
        let one_to_hundred: Vec<u64> = (1..=100).collect();
        let mostly_fast: Vec<u64> = [vec![2; 98], vec![900, 5_000]].concat();
        // (latencies in ms, the line expected); the histogram keeps 3 significant figures, so a
        // value may read up to 0.1 % high.
        let cases: [(&[u64], &str); 5] = [
            (&[], "latency_ms count=0 p50=0.0 p90=0.0 p99=0.0 max=0.0"),
            (&[7], "latency_ms count=1 p50=7.0 p90=7.0 p99=7.0 max=7.0"),
            (
                &one_to_hundred,
                "latency_ms count=100 p50=50.0 p90=90.0 p99=99.0 max=100.0",
            ),
            (
                &mostly_fast,
                "latency_ms count=100 p50=2.0 p90=2.0 p99=900.0 max=5000.0",
            ),
            // Longer than an hour is clamped to an hour rather than lost.
            (
                &[10, 7_200_000],
                "latency_ms count=2 p50=10.0 p90=3600000.0 p99=3600000.0 max=3600000.0",
            ),
        ];
        for (latencies, expected) in cases {
            let line = summary_of(latencies).to_string();
            let (got, want) = (numbers(&line), numbers(expected));
            assert_eq!(got.len(), want.len(), "{line} vs {expected}");
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= w * 0.001 + 0.05,
                    "{} latencies: {line}, expected {expected}",
                    latencies.len()
                );
            }
        }
    }

    fn numbers(line: &str) -> Vec<f64> {
        line.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(_, v)| v.parse().unwrap())
            .collect()
    }
}
