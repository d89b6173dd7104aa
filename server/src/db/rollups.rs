//! Rollups of guests' history, as stored.

use std::collections::HashSet;

use sqlx::FromRow;

use crate::analysis::history::Summary;

/// The two resolutions rollups are kept at.
pub const FIVE_MINUTES_MS: i64 = 5 * 60 * 1000;
pub const HOUR_MS: i64 = 60 * 60 * 1000;

/// One stored rollup: its resolution and start, and what it sums.
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct RollupRow {
    pub resolution_ms: i64,
    pub start_ms: i64,
    #[sqlx(flatten)]
    pub summary: Summary,
}

/// Rows each kind of table holds, for the retention job's log and the benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, FromRow)]
pub struct StoredCounts {
    pub reports: i64,
    pub samples: i64,
    pub rollups_5m: i64,
    pub rollups_1h: i64,
}

/// Splits `windows` into runs of at most `max`, in order, none of which holds one start twice.
/// PostgreSQL refuses an `INSERT .. ON CONFLICT DO UPDATE` that would write one row twice
/// ("cannot affect row a second time"), where SQLite adds the second to the first: split there,
/// the second statement adds to what the first wrote.
pub(crate) fn runs_without_repeats(
    windows: &[(i64, Summary)],
    max: usize,
) -> Vec<&[(i64, Summary)]> {
    let mut runs = Vec::new();
    let mut starts = HashSet::new();
    let mut begin = 0;
    for (i, (start_ms, _)) in windows.iter().enumerate() {
        if i - begin == max || !starts.insert(*start_ms) {
            runs.push(&windows[begin..i]);
            begin = i;
            starts.clear();
            starts.insert(*start_ms);
        }
    }
    if begin < windows.len() {
        runs.push(&windows[begin..]);
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_split_where_a_start_repeats_and_at_the_maximum_in_order() {
        let w = |start: i64| (start, Summary::default());
        let windows = [w(0), w(1), w(2), w(1), w(3), w(4), w(5)];
        let starts = |max| -> Vec<Vec<i64>> {
            runs_without_repeats(&windows, max)
                .into_iter()
                .map(|run| run.iter().map(|(s, _)| *s).collect())
                .collect()
        };
        assert_eq!(starts(10), vec![vec![0, 1, 2], vec![1, 3, 4, 5]]);
        assert_eq!(starts(2), vec![vec![0, 1], vec![2, 1], vec![3, 4], vec![5]]);
        assert!(runs_without_repeats(&[], 10).is_empty());
    }
}
