//! Which database `--db` (`TICKSCOPE_DB`) names: a file path or `sqlite://` URL for SQLite (the
//! default), a `postgres://` or `postgresql://` URL for PostgreSQL.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

#[derive(Clone, PartialEq, Eq)]
pub enum DbUrl {
    /// An SQLite database file, created on first use.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL, as libpq reads it (`postgres://user:password@host/db`,
    /// `postgres:///db?host=/run/postgresql` for a local socket).
    Postgres(String),
}

impl FromStr for DbUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<DbUrl, String> {
        if s.is_empty() {
            return Err("the database is empty: give a file path or a postgres:// URL".into());
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(DbUrl::Postgres(s.to_string()));
        }
        if let Some(path) = s
            .strip_prefix("sqlite://")
            .or_else(|| s.strip_prefix("sqlite:"))
        {
            if path.is_empty() {
                return Err(format!("{s:?} names no file"));
            }
            return Ok(DbUrl::Sqlite(PathBuf::from(path)));
        }
        if let Some((scheme, _)) = s.split_once("://") {
            return Err(format!(
                "{scheme}:// is not a database tickscope keeps its data in: give a file path, \
                 sqlite://PATH or postgres://..."
            ));
        }
        Ok(DbUrl::Sqlite(PathBuf::from(s)))
    }
}

/// The URL with its password replaced by `***`, for logs and error messages.
impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbUrl::Sqlite(path) => write!(f, "{}", path.display()),
            DbUrl::Postgres(url) => f.write_str(&redact_password(url)),
        }
    }
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DbUrl({self})")
    }
}

/// `scheme://user:secret@host/...` → `scheme://user:***@host/...`; a `password=` query
/// parameter likewise.
fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => {
                        format!("{key}=***")
                    }
                    _ => pair.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_names_its_database() {
        let cases: &[(&str, Result<DbUrl, &str>)] = &[
            ("tickscope.db", Ok(DbUrl::Sqlite("tickscope.db".into()))),
            (
                "/var/lib/tickscope/t.db",
                Ok(DbUrl::Sqlite("/var/lib/tickscope/t.db".into())),
            ),
            (
                "sqlite:///var/lib/t.db",
                Ok(DbUrl::Sqlite("/var/lib/t.db".into())),
            ),
            ("sqlite://t.db", Ok(DbUrl::Sqlite("t.db".into()))),
            ("sqlite:t.db", Ok(DbUrl::Sqlite("t.db".into()))),
            (
                "postgres://u:p@db/tickscope",
                Ok(DbUrl::Postgres("postgres://u:p@db/tickscope".into())),
            ),
            (
                "postgresql:///tickscope?host=/run/postgresql",
                Ok(DbUrl::Postgres(
                    "postgresql:///tickscope?host=/run/postgresql".into(),
                )),
            ),
            ("", Err("empty")),
            ("sqlite://", Err("names no file")),
            ("mysql://db/t", Err("mysql:// is not")),
        ];
        for (input, want) in cases {
            match (input.parse::<DbUrl>(), want) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{input}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{input}: {got}"),
                (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn passwords_never_reach_the_log() {
        let cases = [
            (
                "postgres://u:secret@db:5432/t",
                "postgres://u:***@db:5432/t",
            ),
            ("postgres://u@db/t", "postgres://u@db/t"),
            ("postgres://u:s%40x@db", "postgres://u:***@db"),
            (
                "postgresql:///t?host=/run/postgresql&password=secret",
                "postgresql:///t?host=/run/postgresql&password=***",
            ),
        ];
        for (url, shown) in cases {
            let parsed: DbUrl = url.parse().unwrap();
            assert_eq!(parsed.to_string(), shown);
            assert!(!format!("{parsed:?}").contains("secret"));
        }
    }
}
