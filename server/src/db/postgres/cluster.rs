//! Several servers on one PostgreSQL: the lease (a session advisory lock on a connection of its
//! own) and the changes each server announces with `NOTIFY` in the transaction that stored
//! them, so that the others hear of a change exactly when it is committed, and never of one
//! rolled back.

use sqlx::postgres::{PgConnection, PgListener};
use sqlx::{Connection, PgExecutor};

use super::store::PgDb;
use crate::db::cluster::{CHANNEL, ClusterChange, ClusterNotice, HOSTS_PER_NOTICE, Heard, Origin};
use crate::db::error::StoreResult;
use crate::domain::HostId;

/// The lease's advisory lock ("tickleas" in ASCII, as a number): another key than
/// [`super::WRITE_LOCK`], which every write transaction takes and releases.
pub const LEASE_LOCK: i64 = 0x7469_636b_6c65_6173;

/// How soon the database lets go of the lease of a holder that vanished without closing its
/// connection (its machine lost, a network cut): TCP keepalives after 5 s of silence, every
/// 2 s, 3 unanswered ones end the session (11 s), and data unacknowledged for 10 s ends it
/// too. A holder whose process was killed is let go at once: its kernel closes the socket.
const SESSION_KEEPALIVE: [(&str, &str); 4] = [
    ("tcp_keepalives_idle", "5"),
    ("tcp_keepalives_interval", "2"),
    ("tcp_keepalives_count", "3"),
    ("tcp_user_timeout", "10000"),
];

pub struct PgLeaseSession {
    conn: PgConnection,
}

impl PgLeaseSession {
    pub async fn try_take(&mut self) -> StoreResult<bool> {
        Ok(sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(LEASE_LOCK)
            .fetch_one(&mut self.conn)
            .await?)
    }

    pub async fn check(&mut self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&mut self.conn).await?;
        Ok(())
    }
}

pub struct PgChangeListener {
    listener: PgListener,
    origin: Origin,
}

impl PgChangeListener {
    pub async fn next(&mut self) -> StoreResult<Heard> {
        loop {
            let Some(notification) = self.listener.try_recv().await? else {
                // sqlx made a new connection (and listens again) before saying so.
                return Ok(Heard::Reconnected);
            };
            match notification.payload().parse::<ClusterNotice>() {
                // This server's own changes are applied already; its pings are not changes.
                Ok(notice)
                    if notice.origin == self.origin && notice.change != ClusterChange::Ping => {}
                Ok(notice) => return Ok(Heard::Notice(notice)),
                Err(e) => {
                    tracing::warn!(error = %e, "a notification on the changes channel was ignored")
                }
            }
        }
    }
}

impl PgDb {
    /// A connection of its own for the lease, made from the pool's options (the pool would hand
    /// it to others between checks; the lock lives as long as this session).
    pub async fn lease_session(&self) -> StoreResult<PgLeaseSession> {
        let options = (*self.pool.connect_options())
            .clone()
            .options(SESSION_KEEPALIVE);
        let conn = PgConnection::connect_with(&options).await?;
        Ok(PgLeaseSession { conn })
    }

    /// Listens to the changes other servers announce (one pooled connection, kept).
    pub async fn listen_changes(&self) -> StoreResult<PgChangeListener> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(CHANNEL).await?;
        Ok(PgChangeListener {
            listener,
            origin: self.origin,
        })
    }

    /// Announces `change` when the transaction `tx` commits (nothing if it rolls back).
    pub(super) async fn announce<'c>(
        &self,
        tx: impl PgExecutor<'c>,
        change: ClusterChange,
    ) -> StoreResult<()> {
        let payload = ClusterNotice {
            origin: self.origin,
            change,
        }
        .to_string();
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(payload)
            .execute(tx)
            .await?;
        Ok(())
    }

    /// Sends a ping on the changes channel, which every listener hears.
    pub async fn ping(&self) -> StoreResult<()> {
        self.announce(&self.pool, ClusterChange::Ping).await
    }

    /// Announces that reports of `hosts` were stored, in notices small enough for PostgreSQL.
    pub(super) async fn announce_hosts(
        &self,
        tx: &mut super::store::WriteTx,
        mut hosts: Vec<HostId>,
    ) -> StoreResult<()> {
        hosts.sort_unstable();
        hosts.dedup();
        for chunk in hosts.chunks(HOSTS_PER_NOTICE) {
            self.announce(&mut **tx, ClusterChange::Hosts(chunk.to_vec()))
                .await?;
        }
        Ok(())
    }
}
