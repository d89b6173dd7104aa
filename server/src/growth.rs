//! How the time a path takes grows with its input, for the tests that no input shape makes it
//! super-linear: one run at n against one at 8n, in the same process on the same machine, never
//! an absolute time. Linear or n log n work takes about 8 to 10 times as long at 8n; quadratic
//! work 64 times; the bound between them leaves room for a noisy machine.

use std::time::{Duration, Instant};

/// How many times as long 8n may take as n.
const MAX_RATIO_AT_8N: f64 = 24.0;

/// The fastest of `runs` timings of `f` (the others met a busy machine).
fn fastest(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs.max(1))
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Panics, naming `what`, when `large` (the same work on 8 times the input of `small`) takes
/// more than 24 times as long.
pub fn assert_not_super_linear(what: &str, small: impl FnMut(), large: impl FnMut()) {
    let small_s = fastest(5, small).as_secs_f64().max(1e-6);
    let large_s = fastest(2, large).as_secs_f64();
    let ratio = large_s / small_s;
    assert!(
        ratio < MAX_RATIO_AT_8N,
        "{what}: 8 times the input took {ratio:.1} times as long ({:.1} ms against {:.1} ms): \
         super-linear",
        large_s * 1000.0,
        small_s * 1000.0
    );
}
