//! What the shared statements (`db/sql/`) need of PostgreSQL: its types, and its SQL where it
//! says a thing otherwise than SQLite. Everything here has a namesake in `sqlite/dialect.rs`
//! with the same signature; the statements are written once against these names.

use sqlx::{PgConnection, Postgres};

pub(super) use super::store::{PgDb as Store, WriteTx};

/// The database the shared statements run on.
pub(super) type DB = Postgres;
/// A connection, in a write transaction or not.
pub(super) type Conn = PgConnection;

/// The larger of two values that are not NULL.
pub(super) const GREATEST: &str = "GREATEST";

/// A join where the guests must be the outer loop: PostgreSQL's planner orders joins itself
/// (and takes no `ON` after `CROSS JOIN`).
pub(super) const JOIN_IN_ORDER: &str = "JOIN";

/// Text ordered byte by byte, as SQLite orders it, whatever collation the database was created
/// with.
pub(super) const BYTEWISE: &str = r#" COLLATE "C""#;

/// Dashboard user names are compared ignoring ASCII case, and only ASCII (as SQLite's NOCASE):
/// the expression of the unique index `users_name`.
pub(super) const USER_NAME_KEY: &str = r#"lower(name COLLATE "C") COLLATE "C""#;
/// [`USER_NAME_KEY`] equal to the parameter `$1`.
pub(super) const USER_NAME_IS_PARAM_1: &str = r#"lower(name COLLATE "C") = lower($1 COLLATE "C")"#;
/// The conflict target of a name taken in another case: the index's expression.
pub(super) const USER_NAME_CONFLICT: &str = r#"((lower(name COLLATE "C")))"#;

/// Host names that do not match the `LIKE` pattern `$1` as SQLite's `LIKE` matches: ignoring
/// case, and with no escape character (PostgreSQL's `LIKE` heeds case and takes a backslash
/// for one).
pub(super) const NAME_NOT_LIKE_PARAM_1: &str = "name NOT ILIKE $1 ESCAPE ''";

/// `{table} {alias}` joined to each row of the tables before it: the rows that meet
/// `condition` (which names them by `{alias}`), looked up for one outer row at a time in an
/// index the condition fits. A lateral subquery that `OFFSET 0` keeps from being flattened: as
/// a plain join the planner may hash every row of `{table}`, all the more in the generic plan
/// of a prepared statement, which does not know how few outer rows a list of ids gives (a
/// follower's read of five hosts' new samples: a pass over 122,000 samples, 62 ms, for 118;
/// the newest facts of five hosts' guests: a pass over every guest's, 265 ms with the JIT
/// compilation the estimate set off).
pub(super) fn looked_up_for_each(table: &str, alias: &str, condition: &str) -> String {
    format!(
        "CROSS JOIN LATERAL (
             SELECT * FROM {table} {alias} WHERE {condition} OFFSET 0
         ) {alias}"
    )
}

/// `{table} {alias}` joined to each guest `g`, holding the rows of that guest received after
/// `g.last_seen_ms - $1`, where `{table}` is indexed by (guest_id, received_ms), looked up guest
/// by guest: as a plain join, on 30 days of one-minute samples of 40 guests (1.7 million rows),
/// the planner chose a hash join over every sample (273 ms) instead of a lookup per guest
/// (0.9 ms).
pub(super) fn recent_rows_of_each_guest(table: &str, alias: &str) -> String {
    looked_up_for_each(
        table,
        alias,
        &format!("{alias}.guest_id = g.id AND {alias}.received_ms > g.last_seen_ms - $1"),
    )
}

/// The smaller of two values, the one present where the other is NULL (`LEAST` skips NULLs).
pub(super) fn least_present(a: &str, b: &str) -> String {
    format!("LEAST({a}, {b})")
}

/// The larger of two values, the one present where the other is NULL.
pub(super) fn greatest_present(a: &str, b: &str) -> String {
    format!("GREATEST({a}, {b})")
}

/// A list of ids bound as one parameter: an array.
pub(super) type IdList = Vec<i64>;

pub(super) fn id_list(ids: impl IntoIterator<Item = i64>) -> IdList {
    ids.into_iter().collect()
}

/// `{column}` is one of the ids of the [`IdList`] bound as `$n`.
pub(super) fn in_id_list(column: &str, n: usize) -> String {
    format!("{column} = ANY(${n})")
}

/// Ends a subquery that must stay a lookup per outer row: `OFFSET 0` keeps PostgreSQL from
/// turning it into a (semi-)join, which it may plan as a pass over every row of the index (on
/// few rows, or on statistics that favour it).
pub(super) const KEEP_AS_LOOKUP: &str = "OFFSET 0";
