//! What a report's interval may be: a span of time that ended recently enough to be sent (or
//! replayed from an agent's spool) and not in the future, whose length on the agent's monotonic
//! clock agrees with its ends on the agent's wall clock.

use tickscope_wire::{Interval, MAX_SPOOL_AGE_S};

use crate::error::{AppError, AppResult};

pub const MIN_INTERVAL_MS: f64 = 100.0;
pub const MAX_INTERVAL_MS: f64 = 86_400_000.0;
/// How far ahead of the server's clock a report may end, in milliseconds.
pub const MAX_CLOCK_SKEW_MS: i64 = 600_000;
/// How long before the server's clock a report may end, in milliseconds: the oldest report an
/// agent's spool keeps (`MAX_SPOOL_AGE_S`, the most `--spool-max-hours` allows), on a host clock
/// as far behind the server's as it may be ahead. An older report cannot be a replay.
pub const MAX_REPLAY_AGE_MS: i64 = MAX_SPOOL_AGE_S as i64 * 1000 + MAX_CLOCK_SKEW_MS;
/// How far the length may be from the span between the ends, besides the share below: the agent
/// reads the monotonic and the wall clock one after the other at each end (a preempted agent on
/// a busy host can be descheduled between the two reads for tens of milliseconds), and the ends
/// are whole milliseconds.
pub const LENGTH_TOLERANCE_MS: i64 = 100;
/// How far, in thousandths of the length, the length may be from the span between the ends: NTP
/// slews the wall clock while the monotonic clock runs on (ntpd and timesyncd by at most 500 ppm,
/// chrony by up to 83,333 ppm, 8.3 %, while it corrects a large offset). A clock stepped by more
/// (set by hand, a resumed VM) leaves an interval that cannot be taken at its word.
pub const LENGTH_TOLERANCE_PER_MILLE: i64 = 100;

const NS_PER_MS: i128 = 1_000_000;

/// Checks an interval against the server's clock (`now_ms`); its length in milliseconds.
pub fn check(interval: &Interval, now_ms: i64) -> AppResult<f64> {
    let (start_ms, end_ms) = (i128::from(interval.start_ms), i128::from(interval.end_ms));
    let now_ms = i128::from(now_ms);
    if end_ms > now_ms + i128::from(MAX_CLOCK_SKEW_MS) {
        return Err(AppError::invalid(
            "interval.end_ms",
            "is more than 10 minutes ahead of the server's clock; check the host's clock",
        ));
    }
    if end_ms < now_ms - i128::from(MAX_REPLAY_AGE_MS) {
        return Err(AppError::invalid(
            "interval.end_ms",
            format!(
                "is more than {} days before the server's clock, older than any agent's spool keeps a report; check the host's clock",
                MAX_SPOOL_AGE_S / 86_400
            ),
        ));
    }
    if start_ms >= end_ms {
        return Err(AppError::invalid(
            "interval.end_ms",
            "does not end after it starts",
        ));
    }
    let length_ms = interval.length_ns as f64 / 1e6;
    if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&length_ms) {
        return Err(AppError::invalid(
            "interval.length_ns",
            format!("must be between {MIN_INTERVAL_MS} ms and one day"),
        ));
    }
    let length_ns = i128::from(interval.length_ns);
    let off_ns = (length_ns - (end_ms - start_ms) * NS_PER_MS).abs();
    let tolerance_ns = i128::from(LENGTH_TOLERANCE_MS) * NS_PER_MS
        + length_ns * i128::from(LENGTH_TOLERANCE_PER_MILLE) / 1000;
    if off_ns > tolerance_ns {
        return Err(AppError::invalid(
            "interval.length_ns",
            format!(
                "is {:.3} s, but the interval runs {:.3} s from start_ms to end_ms; they may differ by at most {LENGTH_TOLERANCE_MS} ms and {} %",
                length_ms / 1000.0,
                (end_ms - start_ms) as f64 / 1000.0,
                LENGTH_TOLERANCE_PER_MILLE / 10
            ),
        ));
    }
    Ok(length_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: i64 = 1_800_000_000_000;
    const MIN_NS: u64 = MIN_INTERVAL_MS as u64 * 1_000_000;
    const MAX_NS: u64 = MAX_INTERVAL_MS as u64 * 1_000_000;

    fn field_of(start_ms: i64, end_ms: i64, length_ns: u64) -> Option<String> {
        let interval = Interval {
            start_ms,
            end_ms,
            length_ns,
        };
        match check(&interval, NOW) {
            Ok(_) => None,
            Err(AppError::Invalid { field, .. }) => Some(field),
            Err(other) => panic!("not a refusal naming a field: {other:?}"),
        }
    }

    /// The rules, stated on their own in exact integers: which field a triple is refused for.
    fn rule(start_ms: i64, end_ms: i64, length_ns: u64) -> Option<&'static str> {
        let (start, end, now) = (start_ms as i128, end_ms as i128, NOW as i128);
        let length = length_ns as i128;
        let span_ns = (end - start) * 1_000_000;
        let too_far_off = (length - span_ns).abs() * 1000 > 100_000_000 * 1000 + length * 100;
        if end > now + 600_000 || end < now - (30 * 86_400_000 + 600_000) || start >= end {
            Some("interval.end_ms")
        } else if !(MIN_NS..=MAX_NS).contains(&length_ns) || too_far_off {
            Some("interval.length_ns")
        } else {
            None
        }
    }

    #[test]
    fn intervals_that_cannot_be_are_refused_naming_the_field() {
        let day_ns = 86_400_000_000_000u64;
        let cases: [(&str, i64, i64, u64, Option<&str>); 14] = [
            (
                "ten seconds just ended",
                NOW - 10_000,
                NOW,
                10_000_000_000,
                None,
            ),
            (
                "shorter by 10 % of its length and 100 ms",
                NOW - 10_000,
                NOW,
                9_000_000_000,
                None,
            ),
            (
                "shorter by more",
                NOW - 10_000,
                NOW,
                8_999_999_999,
                Some("interval.length_ns"),
            ),
            (
                "no time between the ends, a day long",
                NOW,
                NOW,
                day_ns,
                Some("interval.end_ms"),
            ),
            (
                "a second between the ends, a day long",
                NOW - 1000,
                NOW,
                day_ns,
                Some("interval.length_ns"),
            ),
            (
                "a day between the ends, a second long",
                NOW - 86_400_000,
                NOW,
                1_000_000_000,
                Some("interval.length_ns"),
            ),
            (
                "ends at the epoch",
                -10_000,
                0,
                10_000_000_000,
                Some("interval.end_ms"),
            ),
            (
                "ends at i64::MIN",
                i64::MIN,
                i64::MIN,
                10_000_000_000,
                Some("interval.end_ms"),
            ),
            (
                "starts at i64::MIN",
                i64::MIN,
                NOW,
                10_000_000_000,
                Some("interval.length_ns"),
            ),
            (
                "ends at i64::MAX",
                i64::MAX - 10_000,
                i64::MAX,
                10_000_000_000,
                Some("interval.end_ms"),
            ),
            (
                "replayed from a full spool",
                NOW - MAX_REPLAY_AGE_MS - 10_000,
                NOW - MAX_REPLAY_AGE_MS,
                10_000_000_000,
                None,
            ),
            (
                "older than any spool keeps",
                NOW - MAX_REPLAY_AGE_MS - 10_001,
                NOW - MAX_REPLAY_AGE_MS - 1,
                10_000_000_000,
                Some("interval.end_ms"),
            ),
            (
                "ends as far ahead as a clock may be",
                NOW + MAX_CLOCK_SKEW_MS - 10_000,
                NOW + MAX_CLOCK_SKEW_MS,
                10_000_000_000,
                None,
            ),
            (
                "ends after it starts",
                NOW,
                NOW - 10_000,
                10_000_000_000,
                Some("interval.end_ms"),
            ),
        ];
        for (case, start_ms, end_ms, length_ns, field) in cases {
            assert_eq!(
                field_of(start_ms, end_ms, length_ns).as_deref(),
                field,
                "{case}"
            );
        }
    }

    /// Ends around the limits of the server's clock, and anywhere at all.
    fn end_ms() -> impl Strategy<Value = i64> {
        prop_oneof![
            any::<i64>(),
            Just(i64::MIN),
            Just(0),
            (-3_600_000..=3_600_000i64).prop_map(|d| NOW + d),
            (-3..=3i64).prop_map(|d| NOW + MAX_CLOCK_SKEW_MS + d),
            (-3..=3i64).prop_map(|d| NOW - MAX_REPLAY_AGE_MS + d),
        ]
    }

    /// Lengths around the limits, and anywhere at all.
    fn length_ns() -> impl Strategy<Value = u64> {
        prop_oneof![
            any::<u64>(),
            0..=2 * MAX_NS,
            (MIN_NS - 3..=MIN_NS + 3),
            (MAX_NS - 3..=MAX_NS + 3),
        ]
    }

    /// A start anywhere, where the length puts it give or take the tolerance, or a millisecond
    /// either side of the longest and the shortest span the tolerance allows.
    fn triple() -> impl Strategy<Value = (i64, i64, u64)> {
        (end_ms(), length_ns()).prop_flat_map(|(end, length_ns)| {
            let length_ms = (length_ns / 1_000_000) as i64;
            let tolerance_ms = LENGTH_TOLERANCE_MS + length_ms / 10;
            let tolerance_ns = 100_000_000 + i128::from(length_ns) / 10;
            let longest_ms = ((i128::from(length_ns) + tolerance_ns) / 1_000_000) as i64;
            let shortest_ms = ((i128::from(length_ns) - tolerance_ns + 999_999) / 1_000_000) as i64;
            let start = prop_oneof![
                any::<i64>(),
                Just(end),
                (-tolerance_ms - 3..=tolerance_ms + 3)
                    .prop_map(move |d| end.saturating_sub(length_ms.saturating_add(d))),
                (-1..=1i64).prop_map(move |d| end.saturating_sub(longest_ms.saturating_add(d))),
                (-1..=1i64).prop_map(move |d| end.saturating_sub(shortest_ms.saturating_add(d))),
            ];
            (start, Just(end), Just(length_ns))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2000,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn exactly_the_intervals_the_rules_allow_are_accepted((start, end, length) in triple()) {
            let refused_for = field_of(start, end, length);
            prop_assert_eq!(refused_for.as_deref(), rule(start, end, length));
        }
    }
}
