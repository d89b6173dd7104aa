//! The PostgreSQL store: a pool of connections to one database, its migrations, and the write
//! transaction every write goes through.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};
use tower_sessions_sqlx_store::PostgresStore;

use crate::db::cluster::Origin;
use crate::db::error::StoreResult;

/// The migrations in `migrations/postgres/`, embedded in the binary and run at start-up (sqlx
/// holds an advisory lock while it runs them, so servers starting together take turns).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// The advisory lock every write transaction takes first ("tickscope" in ASCII, as a number).
/// Writes are serialised as SQLite's `BEGIN IMMEDIATE` serialises them: an operation that reads
/// what it is about to change inside its transaction (the last admin, a host's running totals)
/// cannot interleave with another connection's write of the same rows. Readers never take it.
/// It does not make a read-decide-write that spans several operations atomic (the alert
/// evaluation reads the open alerts, then writes): that is why one server runs the jobs.
pub const WRITE_LOCK: i64 = 0x7469_636b_7363_6f70;

#[derive(Clone)]
pub struct PgDb {
    /// `pub` only as far as this backend's type reaches, which is `db/` (`migrate_data` reads
    /// and writes whole tables through it).
    pub pool: PgPool,
    /// Who this server is in the changes it announces (see `db::cluster`).
    pub(super) origin: Origin,
}

pub(super) type WriteTx = Transaction<'static, Postgres>;

impl PgDb {
    /// Connects to the database `url` names (at most `max_connections` at once) and brings its
    /// schema, and the session store's, up to date.
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<PgDb> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            // As SQLite's busy timeout: a request that cannot get a connection in 5 s is
            // answered "retry later" rather than left waiting.
            .acquire_timeout(Duration::from_secs(5))
            // No JIT compilation: the server's statements are short lookups, but an estimate
            // over PostgreSQL's `jit_above_cost` (stale statistics, the generic plan of a
            // prepared statement) compiles one at each run: 15-50 ms of the database's CPU
            // for a follower's read of a few hosts' newest facts, which runs in about 2 ms
            // without (docs/performance.md, issue 28's sixth part).
            .connect_with(
                options
                    .application_name("tickscope-server")
                    .options([("jit", "off")]),
            )
            .await?;
        MIGRATOR.run(&pool).await?;
        PostgresStore::new(pool.clone()).migrate().await?;
        Ok(PgDb {
            pool,
            origin: Origin::random(),
        })
    }

    /// Begins a write transaction, holding the write lock until it ends. A writer waits for the
    /// lock at most 5 s, as SQLite's busy timeout: then the lock wait fails (SQLSTATE 55P03),
    /// the caller is told "retry later" and nothing was written, instead of queueing without
    /// end while each waiter holds a pooled connection.
    pub(super) async fn begin_write(&self) -> StoreResult<WriteTx> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET LOCAL lock_timeout = '5s'")
            .execute(&mut *tx)
            .await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(WRITE_LOCK)
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// tower-sessions' PostgreSQL store on this database (its own schema, `tower_sessions`).
    pub fn session_store(&self) -> PostgresStore {
        PostgresStore::new(self.pool.clone())
    }

    /// The server's version, for the start-up log.
    pub async fn version(&self) -> StoreResult<String> {
        let version: String = sqlx::query_scalar("SELECT version()")
            .fetch_one(&self.pool)
            .await?;
        Ok(version)
    }
}
