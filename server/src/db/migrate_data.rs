//! `tickscope-server migrate-data`: moves an SQLite installation into a new PostgreSQL database,
//! every table in one PostgreSQL transaction, read from one SQLite snapshot, and proves the copy
//! by reading it back: each table's row count and a SHA-256 over its rows in key order must match
//! what was read from SQLite, or nothing is committed.
//!
//! Rows keep their ids, so links, tokens and alert ids stay what they were; each identity is then
//! moved past the highest id copied. Dashboard sessions are not copied: users log in again.

use futures_util::TryStreamExt;
use sha2::{Digest, Sha256};
use sqlx::{Postgres, QueryBuilder, Row};

use super::error::{StoreError, StoreResult};
use super::store::{Backend, Db};

/// Every table, parents before children, with the columns that order its rows (its key).
const TABLES: &[(&str, &str)] = &[
    ("tokens", "id"),
    ("hosts", "id"),
    ("guests", "id"),
    ("reports", "id"),
    ("samples", "id"),
    ("guest_facts", "id"),
    ("guest_idle_readings", "guest_id, received_ms, source"),
    ("rollups", "guest_id, resolution_ms, start_ms"),
    ("fleet_history", "at_ms"),
    ("change_records", "id"),
    ("users", "id"),
    ("settings", "name"),
    ("alert_rules", "id"),
    ("alerts", "id"),
    ("silences", "id"),
    ("receivers", "id"),
    ("outbox", "id"),
    ("receiver_groups", "receiver_id, group_key"),
    ("write_probe", "id"),
];

/// Tables a fresh PostgreSQL database may hold rows in: the schema's default alert rules, and
/// the probe row a server writes at start. The copy replaces both; any other row means the
/// database is in use.
const REPLACED_TABLES: &[&str] = &["alert_rules", "write_probe"];

/// SQLite's own tables and those the server does not copy (sessions: users log in again).
const NOT_COPIED: &[&str] = &["_sqlx_migrations", "sqlite_sequence", "tower_sessions"];

/// Rows per INSERT: PostgreSQL takes at most 65,535 parameters in a statement.
const MAX_ROWS_PER_INSERT: usize = 1000;

/// One table as copied: its rows and their checksum, the same on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCopy {
    pub table: &'static str,
    pub rows: u64,
    pub sha256_hex: String,
}

/// A column's type on PostgreSQL, which says how to read it from SQLite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnType {
    Int,
    Float,
    Text,
    Bool,
    Bytes,
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
    Bool(bool),
    Bytes(Vec<u8>),
}

impl Value {
    /// Feeds the value to the checksum, tagged by kind so that no two values hash alike.
    fn hash_into(&self, hasher: &mut Sha256) {
        match self {
            Value::Null => hasher.update([0]),
            Value::Int(v) => {
                hasher.update([1]);
                hasher.update(v.to_le_bytes());
            }
            Value::Float(v) => {
                hasher.update([2]);
                hasher.update(v.to_bits().to_le_bytes());
            }
            Value::Text(v) => {
                hasher.update([3]);
                hasher.update((v.len() as u64).to_le_bytes());
                hasher.update(v.as_bytes());
            }
            Value::Bool(v) => hasher.update([4, u8::from(*v)]),
            Value::Bytes(v) => {
                hasher.update([5]);
                hasher.update((v.len() as u64).to_le_bytes());
                hasher.update(v);
            }
        }
    }
}

fn column_type(pg_type: &str) -> StoreResult<ColumnType> {
    Ok(match pg_type {
        "bigint" | "integer" => ColumnType::Int,
        "double precision" | "real" => ColumnType::Float,
        "text" => ColumnType::Text,
        "boolean" => ColumnType::Bool,
        "bytea" => ColumnType::Bytes,
        other => {
            return Err(StoreError::Corrupt(format!(
                "migrate-data does not know the PostgreSQL type {other}"
            )));
        }
    })
}

fn decode_error(table: &str, column: &str, e: sqlx::Error) -> StoreError {
    StoreError::Corrupt(format!("{table}.{column} does not read as expected: {e}"))
}

/// A row's values by the columns' PostgreSQL types, from either database: the same reading of
/// both sides is what makes their checksums comparable.
fn read_row<R>(row: &R, table: &str, columns: &[(String, ColumnType)]) -> StoreResult<Vec<Value>>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> f64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> bool: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Vec<u8>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    columns
        .iter()
        .enumerate()
        .map(|(i, (name, kind))| {
            let e = |e| decode_error(table, name, e);
            Ok(match kind {
                ColumnType::Int => row.try_get::<Option<i64>, _>(i).map_err(e)?.map(Value::Int),
                ColumnType::Float => row
                    .try_get::<Option<f64>, _>(i)
                    .map_err(e)?
                    .map(Value::Float),
                ColumnType::Text => row
                    .try_get::<Option<String>, _>(i)
                    .map_err(e)?
                    .map(Value::Text),
                ColumnType::Bool => row
                    .try_get::<Option<bool>, _>(i)
                    .map_err(e)?
                    .map(Value::Bool),
                ColumnType::Bytes => row
                    .try_get::<Option<Vec<u8>>, _>(i)
                    .map_err(e)?
                    .map(Value::Bytes),
            }
            .unwrap_or(Value::Null))
        })
        .collect()
}

/// `ORDER BY` for `key` on PostgreSQL: text compared byte by byte, as SQLite's BINARY collation
/// does, whatever the database's own collation.
fn postgres_order(key: &str, columns: &[(String, ColumnType)]) -> String {
    key.split(',')
        .map(|k| {
            let k = k.trim();
            let text = columns
                .iter()
                .any(|(name, kind)| name == k && *kind == ColumnType::Text);
            if text {
                format!("{k} COLLATE \"C\"")
            } else {
                k.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

async fn insert_rows(
    tx: &mut sqlx::PgConnection,
    table: &str,
    columns: &[(String, ColumnType)],
    rows: &[Vec<Value>],
) -> StoreResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    // OVERRIDING SYSTEM VALUE is not needed for identities GENERATED BY DEFAULT: the ids go in
    // as they are.
    let mut insert: QueryBuilder<Postgres> =
        QueryBuilder::new(format!("INSERT INTO {table} ({}) ", names.join(", ")));
    insert.push_values(rows, |mut b, row| {
        for value in row {
            match value {
                Value::Null => b.push("NULL"),
                Value::Int(v) => b.push_bind(*v),
                Value::Float(v) => b.push_bind(*v),
                Value::Text(v) => b.push_bind(v.clone()),
                Value::Bool(v) => b.push_bind(*v),
                Value::Bytes(v) => b.push_bind(v.clone()),
            };
        }
    });
    insert.build().execute(&mut *tx).await?;
    Ok(())
}

/// Refuses a source that PostgreSQL would refuse row by row, before anything is copied: a table
/// this copy does not know, or a row whose foreign key points nowhere (SQLite checks none when
/// its retention deletes old reports).
async fn check_source(snapshot: &mut sqlx::SqliteConnection) -> StoreResult<()> {
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(&mut *snapshot)
            .await?;
    let unknown: Vec<&String> = tables
        .iter()
        .filter(|t| {
            !NOT_COPIED.contains(&t.as_str()) && !TABLES.iter().any(|(known, _)| known == t)
        })
        .collect();
    if !unknown.is_empty() {
        return Err(StoreError::Corrupt(format!(
            "the SQLite database has tables this migrate-data does not know: {unknown:?}"
        )));
    }
    let dangling: Vec<(String, String, i64)> = sqlx::query_as(
        r#"SELECT "table", parent, COUNT(*) FROM pragma_foreign_key_check
           GROUP BY "table", parent ORDER BY "table", parent"#,
    )
    .fetch_all(&mut *snapshot)
    .await?;
    if !dangling.is_empty() {
        let list: Vec<String> = dangling
            .iter()
            .map(|(table, parent, rows)| format!("{rows} row(s) of {table} point to no {parent}"))
            .collect();
        return Err(StoreError::Corrupt(format!(
            "the SQLite database has rows PostgreSQL would refuse: {}; nothing was copied",
            list.join(", ")
        )));
    }
    Ok(())
}

/// Copies everything `from` (SQLite) holds into `to` (a PostgreSQL database with the schema and
/// no data yet), verifies the copy, and commits it; or returns why not, having written nothing.
pub async fn migrate_data(from: &Db, to: &Db) -> StoreResult<Vec<TableCopy>> {
    let (Backend::Sqlite(source), Backend::Postgres(target)) = (&from.backend, &to.backend) else {
        return Err(StoreError::Refused(
            "migrate-data copies an SQLite database (--from) into a PostgreSQL one (--to)".into(),
        ));
    };
    let mut tx = target.pool.begin().await?;
    // A server started on the target meanwhile waits until the copy is committed.
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(super::postgres::WRITE_LOCK)
        .execute(&mut *tx)
        .await?;
    for &(table, _) in TABLES {
        if REPLACED_TABLES.contains(&table) {
            continue;
        }
        let rows: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(&mut *tx)
            .await?;
        if rows > 0 {
            return Err(StoreError::Conflict(format!(
                "the PostgreSQL database already holds data ({rows} row(s) in {table}): give \
                 migrate-data a new, empty database"
            )));
        }
    }
    for table in REPLACED_TABLES {
        sqlx::query(&format!("DELETE FROM {table}"))
            .execute(&mut *tx)
            .await?;
    }

    // One read transaction: every table as of the same instant, even if something writes.
    let mut snapshot = source.pool.begin().await?;
    check_source(&mut snapshot).await?;
    let mut copies = Vec::new();
    for &(table, key) in TABLES {
        let columns: Vec<(String, ColumnType)> = sqlx::query_as::<_, (String, String)>(
            "SELECT column_name::TEXT, data_type::TEXT FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1
             ORDER BY ordinal_position",
        )
        .bind(table)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|(name, pg_type)| Ok((name, column_type(&pg_type)?)))
        .collect::<StoreResult<_>>()?;
        let mut in_sqlite: Vec<String> =
            sqlx::query_scalar("SELECT name FROM pragma_table_info(?)")
                .bind(table)
                .fetch_all(&mut *snapshot)
                .await?;
        let mut in_postgres: Vec<String> = columns.iter().map(|(n, _)| n.clone()).collect();
        in_sqlite.sort();
        in_postgres.sort();
        if in_sqlite != in_postgres {
            return Err(StoreError::Corrupt(format!(
                "{table} has the columns {in_sqlite:?} in SQLite and {in_postgres:?} in \
                 PostgreSQL: this migrate-data does not know how to copy it"
            )));
        }
        let list = columns
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ");

        // Streamed, a batch at a time: the samples of a big installation do not fit in memory.
        let per_insert = (65_535 / columns.len().max(1)).min(MAX_ROWS_PER_INSERT);
        let mut source_hash = Sha256::new();
        let mut source_rows = 0u64;
        let mut batch = Vec::with_capacity(per_insert);
        let select = format!("SELECT {list} FROM {table} ORDER BY {key}");
        let mut rows = sqlx::query(&select).fetch(&mut *snapshot);
        while let Some(row) = rows.try_next().await? {
            let values = read_row(&row, table, &columns)?;
            values.iter().for_each(|v| v.hash_into(&mut source_hash));
            source_rows += 1;
            batch.push(values);
            if batch.len() == per_insert {
                insert_rows(&mut tx, table, &columns, &batch).await?;
                batch.clear();
            }
        }
        drop(rows);
        insert_rows(&mut tx, table, &columns, &batch).await?;

        // Read back what PostgreSQL now holds, in the same order, and compare.
        let readback = format!(
            "SELECT {list} FROM {table} ORDER BY {}",
            postgres_order(key, &columns)
        );
        let mut target_hash = Sha256::new();
        let mut target_rows = 0u64;
        let mut copied = sqlx::query(&readback).fetch(&mut *tx);
        while let Some(row) = copied.try_next().await? {
            read_row(&row, table, &columns)?
                .iter()
                .for_each(|v| v.hash_into(&mut target_hash));
            target_rows += 1;
        }
        drop(copied);
        let (source_sum, target_sum) = (
            hex::encode(source_hash.finalize()),
            hex::encode(target_hash.finalize()),
        );
        if target_rows != source_rows || source_sum != target_sum {
            return Err(StoreError::Corrupt(format!(
                "{table}: {source_rows} row(s) read from SQLite (SHA-256 {source_sum}), \
                 {target_rows} in PostgreSQL (SHA-256 {target_sum}); nothing was committed"
            )));
        }
        if key == "id" && table != "write_probe" {
            // The next id PostgreSQL makes comes after the highest copied, and after the
            // highest SQLite ever gave (AUTOINCREMENT tables never reuse a deleted row's id).
            let given: Option<i64> =
                sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = ?")
                    .bind(table)
                    .fetch_optional(&mut *snapshot)
                    .await?;
            sqlx::query(&format!(
                "SELECT setval(pg_get_serial_sequence('{table}', 'id'),
                               GREATEST(COALESCE((SELECT MAX(id) FROM {table}), 0), $1) + 1,
                               false)"
            ))
            .bind(given.unwrap_or(0))
            .execute(&mut *tx)
            .await?;
        }
        copies.push(TableCopy {
            table,
            rows: source_rows,
            sha256_hex: source_sum,
        });
    }
    snapshot.rollback().await?;
    tx.commit().await?;
    Ok(copies)
}
