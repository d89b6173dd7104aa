//! Write transactions that cannot leave a pooled connection inside a transaction.
//!
//! sqlx's own `Transaction` keeps a count of open transactions per connection and lowers it only
//! when its COMMIT or ROLLBACK succeeds. When the disk fills, SQLite answers a write or the
//! COMMIT with SQLITE_FULL and rolls the transaction back itself; sqlx's ROLLBACK then fails
//! ("no transaction is active"), the count stays at one, and the connection goes back to the pool
//! refusing every later `BEGIN` ("attempted to call begin_with at non-zero transaction depth")
//! until the server restarts. So this type issues BEGIN and COMMIT itself, and a transaction that
//! does not end in a successful COMMIT or ROLLBACK (an error, a cancelled request, a failed
//! COMMIT) closes its connection instead of returning it: closing rolls back whatever is left,
//! and the pool opens a fresh connection when it needs one.

use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use sqlx::{Sqlite, SqliteConnection};

use super::store::SqliteDb;
use crate::db::error::StoreResult;

pub struct WriteTx {
    conn: PoolConnection<Sqlite>,
    ended: bool,
}

impl SqliteDb {
    /// Begins a write transaction on the writers' connection (writers queue for it in order).
    /// IMMEDIATE takes SQLite's write lock up front, so a write outside these transactions (a
    /// pooled connection's single statement) and this one queue behind each other (busy
    /// timeout) instead of one failing at its first write.
    pub(super) async fn begin_write(&self) -> StoreResult<WriteTx> {
        // The guard exists before BEGIN is sent: if this future is dropped while BEGIN waits
        // for the write lock, SQLite's worker still opens the transaction, and the connection
        // must be closed rather than pooled.
        let mut tx = WriteTx {
            conn: self.writer.acquire().await?,
            ended: false,
        };
        match sqlx::query("BEGIN IMMEDIATE").execute(&mut *tx.conn).await {
            Ok(_) => Ok(tx),
            Err(e) => {
                // No transaction was opened: the connection is fine as it is.
                tx.ended = true;
                Err(e.into())
            }
        }
    }
}

impl WriteTx {
    pub async fn commit(mut self) -> StoreResult<()> {
        sqlx::query("COMMIT").execute(&mut *self.conn).await?;
        self.ended = true;
        Ok(())
    }

    /// Ends the transaction without writing anything (a duplicate, a refusal), keeping the
    /// connection for the pool.
    pub async fn rollback(mut self) -> StoreResult<()> {
        sqlx::query("ROLLBACK").execute(&mut *self.conn).await?;
        self.ended = true;
        Ok(())
    }
}

impl Drop for WriteTx {
    fn drop(&mut self) {
        if !self.ended {
            self.conn.close_on_drop();
        }
    }
}

impl Deref for WriteTx {
    type Target = SqliteConnection;
    fn deref(&self) -> &SqliteConnection {
        &self.conn
    }
}

impl DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.conn
    }
}

impl SqliteDb {
    /// Tells the other servers on this database of a change: none share an SQLite file.
    pub(super) async fn announce<'c>(
        &self,
        _conn: impl sqlx::SqliteExecutor<'c>,
        _change: crate::db::cluster::ClusterChange,
    ) -> StoreResult<()> {
        Ok(())
    }

    /// Tells the other servers that reports of `hosts` were stored: none share an SQLite file.
    pub(super) async fn announce_hosts(
        &self,
        _tx: &mut WriteTx,
        _hosts: Vec<crate::domain::HostId>,
    ) -> StoreResult<()> {
        Ok(())
    }
}
