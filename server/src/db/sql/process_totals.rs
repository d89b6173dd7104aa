//! VM process running totals, as columns of a guest's row.

/// The columns `cpu_s_total`, `wakeups_total` and `has_totals` of a guest row (`{t}` its
/// table's alias and a dot, or nothing): the totals count only when the row holds a whole set
/// (the process they count, both figures and when they were read). The figures come as stored,
/// not through a `CASE`: SQLite hands an expression back without its column's type, and a
/// whole number of seconds would then read as an integer.
pub(super) fn totals_columns(t: &str) -> String {
    format!(
        "{t}cpu_s_total, {t}wakeups_total,
         ({t}process_key IS NOT NULL AND {t}cpu_s_total IS NOT NULL
          AND {t}wakeups_total IS NOT NULL AND {t}totals_at_ms IS NOT NULL) AS has_totals"
    )
}
