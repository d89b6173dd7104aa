//! The database a test runs on: an SQLite file in the test's directory, or, when
//! `TICKSCOPE_TEST_POSTGRES` names a PostgreSQL server (`postgres://user:password@host:port`, a
//! role that may create databases; `scripts/postgres.sh` starts one), a fresh database of its
//! own there. The test command runs the suite both ways, so every test that goes through here
//! holds for both backends.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::Connection;
use tickscope_server::db::{BackendKind, Db, DbUrl};

/// The PostgreSQL server the suite runs against, if it was given one.
fn postgres_base() -> Option<String> {
    std::env::var("TICKSCOPE_TEST_POSTGRES")
        .ok()
        .filter(|s| !s.is_empty())
}

/// Which backend this run of the suite tests.
pub fn backend() -> BackendKind {
    if postgres_base().is_some() {
        BackendKind::Postgres
    } else {
        BackendKind::Sqlite
    }
}

/// True, after saying so, when this run is on PostgreSQL: for the few tests about SQLite's own
/// file (a full disk under it, its migrations, its journal), which return early then.
pub fn sqlite_only(what: &str) -> bool {
    let skip = backend() != BackendKind::Sqlite;
    if skip {
        eprintln!("{what}: SQLite's own file; not run on PostgreSQL");
    }
    skip
}

/// True, after saying so, when this run is on SQLite: for the tests of several servers on one
/// database, which only PostgreSQL can be; they return early then.
pub fn postgres_only(what: &str) -> bool {
    let skip = backend() != BackendKind::Postgres;
    if skip {
        eprintln!("{what}: several servers on one database; run on PostgreSQL only");
    }
    skip
}

/// What `--db` takes for a test's database, and how the test opens it itself.
#[derive(Debug, Clone)]
pub struct TestDb {
    pub url: String,
}

impl TestDb {
    /// A new database no other test uses: `name` in `dir` for SQLite (an empty file), a new
    /// database on the PostgreSQL server otherwise (with the schema already in place: see
    /// [`postgres_template`]).
    pub async fn new(dir: &Path, name: &str) -> TestDb {
        let url = match postgres_base() {
            Some(base) => fresh_postgres_database(&base).await,
            None => dir.join(name).display().to_string(),
        };
        TestDb { url }
    }

    /// [`TestDb::new`] from a test that has no runtime of its own.
    pub fn new_blocking(dir: &Path, name: &str) -> TestDb {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(TestDb::new(dir, name))
    }

    pub fn parsed(&self) -> DbUrl {
        self.url.parse().unwrap()
    }

    /// Opens it as the server does (migrations included).
    pub async fn open(&self) -> Db {
        Db::connect(&self.parsed(), 4)
            .await
            .unwrap_or_else(|e| panic!("cannot open the test database {}: {e}", self.parsed()))
    }
}

impl AsRef<OsStr> for TestDb {
    fn as_ref(&self) -> &OsStr {
        OsStr::new(&self.url)
    }
}

/// A test's own database, opened: the in-process servers' store.
pub async fn open_test_db(dir: &Path) -> Db {
    TestDb::new(dir, "t.db").await.open().await
}

/// Creates a database no other test uses on the server at `base`, a copy of
/// [`postgres_template`], and returns its URL. The databases stay until the throwaway cluster
/// is deleted (`scripts/test.sh` deletes it).
async fn fresh_postgres_database(base: &str) -> String {
    let base = base.trim_end_matches('/');
    let template = postgres_template(base).await;
    create_postgres_database(base, Some(template)).await
}

/// A database made once per run of the suite and brought up to date as a server opens one
/// (its migrations and the session store's). Each test's database is copied from it: a copy
/// costs a few files, where running every migration again was about a sixth of the
/// hostile-input property tests' time there (each case makes a database). The server still
/// runs its migrations on the copy, finding each applied, as on any restart; the migrations
/// from an empty database run here once per run, and from an empty file in every SQLite test.
async fn postgres_template(base: &str) -> &'static str {
    static TEMPLATE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    TEMPLATE
        .get_or_init(|| async {
            let url = create_postgres_database(base, None).await;
            let db = Db::connect(&url.parse().unwrap(), 1)
                .await
                .unwrap_or_else(|e| panic!("cannot migrate the template database {url}: {e}"));
            // A database is copied only while no one is connected to it.
            db.close().await;
            url.rsplit('/').next().unwrap().to_string()
        })
        .await
}

/// Creates a new database on the server at `base`, a copy of `template` if given, and returns
/// its URL.
async fn create_postgres_database(base: &str, template: Option<&str>) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "t_{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        tickscope_server::clock::now_ms()
    );
    let mut admin = sqlx::PgConnection::connect(&format!("{base}/postgres"))
        .await
        .unwrap_or_else(|e| panic!("TICKSCOPE_TEST_POSTGRES: cannot connect to {base}: {e}"));
    // The names are made here of digits and underscores: nothing to quote.
    let template = template.map_or(String::new(), |t| format!(" TEMPLATE {t}"));
    sqlx::query(&format!("CREATE DATABASE {name}{template}"))
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.ok();
    format!("{base}/{name}")
}

/// A connection of the test's own beside the server's, to change the database under it (a
/// trigger that refuses a row) or hold its write lock, in each backend's terms.
pub enum RawDb {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl RawDb {
    pub async fn connect(db: &TestDb) -> RawDb {
        match db.parsed() {
            DbUrl::Sqlite(path) => RawDb::Sqlite(
                sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
                    .await
                    .unwrap(),
            ),
            DbUrl::Postgres(url) => {
                RawDb::Postgres(sqlx::PgConnection::connect(&url).await.unwrap())
            }
        }
    }

    /// Runs `sqlite` or `postgres`, whichever this database speaks, one statement at a time.
    pub async fn execute(&mut self, sqlite: &[&str], postgres: &[&str]) {
        match self {
            RawDb::Sqlite(c) => {
                for sql in sqlite {
                    sqlx::query(sql).execute(&mut *c).await.unwrap();
                }
            }
            RawDb::Postgres(c) => {
                for sql in postgres {
                    sqlx::query(sql).execute(&mut *c).await.unwrap();
                }
            }
        }
    }

    /// Rows in `table`.
    pub async fn count(&mut self, table: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        match self {
            RawDb::Sqlite(c) => sqlx::query_scalar(&sql).fetch_one(&mut *c).await.unwrap(),
            RawDb::Postgres(c) => sqlx::query_scalar(&sql).fetch_one(&mut *c).await.unwrap(),
        }
    }

    /// Every stored dashboard session as text: its data (the encoded bytes read as text) and
    /// its expiry.
    pub async fn sessions(&mut self) -> Vec<(String, String)> {
        let rows: Vec<(Vec<u8>, String)> = match self {
            RawDb::Sqlite(c) => {
                sqlx::query_as("SELECT data, CAST(expiry_date AS TEXT) FROM tower_sessions")
                    .fetch_all(&mut *c)
                    .await
                    .unwrap()
            }
            RawDb::Postgres(c) => {
                sqlx::query_as("SELECT data, expiry_date::text FROM tower_sessions.session")
                    .fetch_all(&mut *c)
                    .await
                    .unwrap()
            }
        };
        rows.into_iter()
            .map(|(data, expiry)| (String::from_utf8_lossy(&data).into_owned(), expiry))
            .collect()
    }

    /// Takes the lock every write of the server waits for: SQLite's write lock, or the
    /// advisory lock of PostgreSQL's write transactions. Held until [`RawDb::release`].
    pub async fn hold_write_lock(&mut self) {
        let key = tickscope_server::db::POSTGRES_WRITE_LOCK.to_string();
        self.execute(
            &["BEGIN IMMEDIATE"],
            &[&format!("SELECT pg_advisory_lock({key})")],
        )
        .await;
    }

    pub async fn release(&mut self) {
        let key = tickscope_server::db::POSTGRES_WRITE_LOCK.to_string();
        self.execute(
            &["ROLLBACK"],
            &[&format!("SELECT pg_advisory_unlock({key})")],
        )
        .await;
    }
}
