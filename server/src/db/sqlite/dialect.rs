//! What the shared statements (`db/sql/`) need of SQLite: its types, and its SQL where it says
//! a thing otherwise than PostgreSQL. Everything here has a namesake in `postgres/dialect.rs`
//! with the same signature; the statements are written once against these names.

use sqlx::{Sqlite, SqliteConnection};

pub(super) use super::store::SqliteDb as Store;
pub(super) use super::write_tx::WriteTx;

/// The database the shared statements run on.
pub(super) type DB = Sqlite;
/// A connection, in a write transaction or not.
pub(super) type Conn = SqliteConnection;

/// The larger of two values that are not NULL (SQLite's two-argument `MAX`).
pub(super) const GREATEST: &str = "MAX";

/// How a join is written where the guests must be the outer loop: `CROSS JOIN` fixes SQLite's
/// join order (left to itself, it may scan a whole table through an index and look each guest
/// up, reading every sample ever stored).
pub(super) const JOIN_IN_ORDER: &str = "CROSS JOIN";

/// Text ordered byte by byte: SQLite's own order for text (BINARY).
pub(super) const BYTEWISE: &str = "";

/// Dashboard user names are compared ignoring ASCII case: the column's `COLLATE NOCASE`, which
/// its unique index and `ORDER BY` follow.
pub(super) const USER_NAME_KEY: &str = "name";
/// [`USER_NAME_KEY`] equal to the parameter `$1`.
pub(super) const USER_NAME_IS_PARAM_1: &str = "name = $1";
/// The conflict target of a name taken in another case.
pub(super) const USER_NAME_CONFLICT: &str = "(name)";

/// Host names that do not match the `LIKE` pattern `$1`, ignoring ASCII case and with no escape
/// character (SQLite's `LIKE` as it is).
pub(super) const NAME_NOT_LIKE_PARAM_1: &str = "name NOT LIKE $1";

/// `{table} {alias}` joined to each row of the tables before it: the rows that meet
/// `condition` (which names them by `{alias}`), looked up for one outer row at a time. `CROSS
/// JOIN` fixes the order: the tables before it outside.
pub(super) fn looked_up_for_each(table: &str, alias: &str, condition: &str) -> String {
    format!("CROSS JOIN {table} {alias} ON {condition}")
}

/// `{table} {alias}` joined to each guest `g`, holding the rows of that guest received after
/// `g.last_seen_ms - $1`, where `{table}` is indexed by (guest_id, received_ms), looked up guest
/// by guest.
pub(super) fn recent_rows_of_each_guest(table: &str, alias: &str) -> String {
    looked_up_for_each(
        table,
        alias,
        &format!("{alias}.guest_id = g.id AND {alias}.received_ms > g.last_seen_ms - $1"),
    )
}

/// The smaller of two values, the one present where the other is NULL (SQLite's `MIN` is
/// NULL if either is).
pub(super) fn least_present(a: &str, b: &str) -> String {
    format!("MIN(COALESCE({a}, {b}), COALESCE({b}, {a}))")
}

/// The larger of two values, the one present where the other is NULL.
pub(super) fn greatest_present(a: &str, b: &str) -> String {
    format!("MAX(COALESCE({a}, {b}), COALESCE({b}, {a}))")
}

/// A list of ids bound as one parameter: a JSON array, read by `json_each`.
pub(super) type IdList = String;

pub(super) fn id_list(ids: impl IntoIterator<Item = i64>) -> IdList {
    let ids: Vec<String> = ids.into_iter().map(|id| id.to_string()).collect();
    format!("[{}]", ids.join(","))
}

/// `{column}` is one of the ids of the [`IdList`] bound as `$n`.
pub(super) fn in_id_list(column: &str, n: usize) -> String {
    format!("{column} IN (SELECT value FROM json_each(${n}))")
}

/// Ends a subquery that must stay a lookup per outer row (SQLite plans it so by itself).
pub(super) const KEEP_AS_LOOKUP: &str = "";
