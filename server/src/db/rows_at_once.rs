//! How many rows one multi-row statement writes or names: a few sizes, always the same ones.
//!
//! A statement built with a `VALUES` list of n rows is a different statement for each n, and
//! each connection keeps the statements it prepared (sqlx's cache, 100 a connection). SQLite's
//! prepared form of such an insert takes about 1.7 KB a row (a 650-row insert of 20 columns:
//! 1.1 MB), and a batch's guest count varies from batch to batch: with any count allowed, every
//! connection the writer used kept dozens of inserts of hundreds of rows, 133 MB of the server's
//! heap after 100 s of a 100,000-guest fleet reporting (heaptrack), and growing with each new
//! count (docs/performance.md). Preparing each one afresh instead costs about 10 µs a row.
//!
//! So every multi-row statement takes its rows in runs whose lengths are powers of two, largest
//! first: at most `log2(max) + 1` shapes of each statement are ever prepared, together about
//! twice the largest, and a list of n rows takes at most as many statements as n has one bits
//! (one for each `max` rows above that).

/// `items` in order, cut into runs whose lengths are powers of two no larger than `max` (a power
/// of two), each as long as it can be: full runs of `max`, then the rest's bits, largest first.
pub fn runs<T>(items: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    debug_assert!(
        max.is_power_of_two(),
        "{max} rows at once is not a power of two"
    );
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let len = if rest.len() >= max {
            max
        } else {
            1 << rest.len().ilog2()
        };
        let (run, after) = rest.split_at(len);
        rest = after;
        Some(run)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_powers_of_two_largest_first_and_keep_every_item_in_order() {
        let cases: &[(usize, usize, &[usize])] = &[
            (0, 512, &[]),
            (1, 512, &[1]),
            (2, 512, &[2]),
            (3, 512, &[2, 1]),
            (20, 512, &[16, 4]),
            (511, 512, &[256, 128, 64, 32, 16, 8, 4, 2, 1]),
            (512, 512, &[512]),
            (700, 512, &[512, 128, 32, 16, 8, 4]),
            (1100, 512, &[512, 512, 64, 8, 4]),
            (5, 1, &[1, 1, 1, 1, 1]),
        ];
        for &(n, max, lengths) in cases {
            let items: Vec<usize> = (0..n).collect();
            let got: Vec<&[usize]> = runs(&items, max).collect();
            let got_lengths: Vec<usize> = got.iter().map(|r| r.len()).collect();
            assert_eq!(got_lengths, lengths, "{n} items, at most {max} at once");
            assert_eq!(got.concat(), items, "{n} items, at most {max} at once");
        }
    }

    #[test]
    fn a_statement_has_few_shapes_whatever_the_count() {
        // Every count up to 4,096 rows uses at most ten lengths among them all.
        let mut lengths = std::collections::BTreeSet::new();
        for n in 0..4096 {
            let items = vec![(); n];
            lengths.extend(runs(&items, 512).map(<[()]>::len));
        }
        assert_eq!(
            lengths.into_iter().collect::<Vec<_>>(),
            [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
        );
    }
}
