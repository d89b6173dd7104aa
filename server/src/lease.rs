//! The lease: which one of the servers on a database runs the background jobs that must run
//! once (the alert evaluation, the notification senders, the retention).
//!
//! On PostgreSQL a server holds it by holding a session advisory lock on a connection of its
//! own (`db::cluster::LeaseSession`). A standby tries to take it every [`RETRY_EVERY`]; the
//! holder checks its session every [`CHECK_EVERY`] and stands down the moment a check fails or
//! takes longer than [`CHECK_TIMEOUT`]. The database lets go of a holder's lock when its
//! session ends: at once when its process dies (the kernel closes the socket), within about
//! 11 s when its machine or network vanishes (TCP keepalives). So a standby takes over within
//! [`RETRY_EVERY`] of a holder killed, and within about 13 s of one lost; and a holder cut off
//! from the database stops within [`CHECK_EVERY`] + [`CHECK_TIMEOUT`] = 3 s, before the database
//! could hand the lock to anyone else.
//!
//! On SQLite one server owns the file: it always holds the lease.

use std::time::Duration;

use tokio::sync::watch;

use crate::db::Db;
use crate::db::LeaseSession;

/// How often a standby tries to take the lease.
pub const RETRY_EVERY: Duration = Duration::from_secs(2);
/// How often the holder checks that its session, and so the lease, is alive.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);
/// A check (or an attempt to take the lease) that takes longer counts as failed.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// A cheap handle on whether this server holds the lease now.
#[derive(Clone)]
pub struct Lease {
    /// The term this server holds the lease in (its first taking is 1, each taking after a
    /// loss the next), or `None` while it stands by.
    held: watch::Receiver<Option<u64>>,
}

impl Lease {
    /// A lease always held: the only server on its database.
    pub fn always_held() -> Lease {
        let (keep, held) = watch::channel(Some(1));
        // The sender lives on: a dropped one would end `wait_held`'s waits.
        std::mem::forget(keep);
        Lease { held }
    }

    /// Starts keeping the lease on `db`: always held on SQLite; on PostgreSQL taken when free,
    /// given up when this server loses its session.
    pub async fn start(db: &Db) -> Lease {
        let mut first = match db.lease_session().await {
            Ok(None) => return Lease::always_held(),
            Ok(Some(session)) => Some(session),
            Err(_) => None,
        };
        // Tried once before the server serves, so that a lone server holds it from the start.
        let taken = match &mut first {
            Some(session) => matches!(
                tokio::time::timeout(CHECK_TIMEOUT, session.try_take()).await,
                Ok(Ok(true))
            ),
            None => false,
        };
        if taken {
            log_taken();
        }
        let (held_tx, held) = watch::channel(taken.then_some(1));
        tokio::spawn(keep(db.clone(), first, held_tx));
        Lease { held }
    }

    /// Whether this server holds the lease now.
    pub fn held(&self) -> bool {
        self.held.borrow().is_some()
    }

    /// Which of this server's terms holds the lease now (the first taking is 1), or `None` when
    /// it stands by: a lease lost and taken again between two looks is a new term.
    pub fn term(&self) -> Option<u64> {
        *self.held.borrow()
    }

    /// Waits until this server holds the lease.
    pub async fn wait_held(&self) {
        let mut held = self.held.clone();
        let _ = held.wait_for(Option::is_some).await;
    }

    /// `held` or `standby`, as `/readyz` says it.
    pub fn state(&self) -> &'static str {
        if self.held() { "held" } else { "standby" }
    }
}

/// Takes the lease whenever it is free and holds it while the session lives, for ever, each
/// taking a new term in `held`; `held` starts at term 1 when `session` holds it already.
async fn keep(db: Db, mut session: Option<LeaseSession>, held: watch::Sender<Option<u64>>) {
    // This server's terms so far.
    let mut terms = held.borrow().unwrap_or(0);
    loop {
        let mut s = match session.take() {
            Some(s) => s,
            None => match tokio::time::timeout(CHECK_TIMEOUT, db.lease_session()).await {
                Ok(Ok(Some(s))) => s,
                Ok(Ok(None)) => return,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot reach the database to take the lease; trying again");
                    tokio::time::sleep(RETRY_EVERY).await;
                    continue;
                }
                Err(_) => {
                    tokio::time::sleep(RETRY_EVERY).await;
                    continue;
                }
            },
        };
        if held.borrow().is_none() {
            // A standby: try until taken or the session fails.
            let taken = loop {
                match tokio::time::timeout(CHECK_TIMEOUT, s.try_take()).await {
                    Ok(Ok(true)) => break true,
                    Ok(Ok(false)) => tokio::time::sleep(RETRY_EVERY).await,
                    Ok(Err(_)) | Err(_) => break false,
                }
            };
            if !taken {
                continue;
            }
            terms += 1;
            held.send_replace(Some(terms));
            log_taken();
        }
        // The holder: check until a check fails, then stand down at once.
        loop {
            tokio::time::sleep(CHECK_EVERY).await;
            match tokio::time::timeout(CHECK_TIMEOUT, s.check()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "lost the lease: the database session ended; standing by");
                    break;
                }
                Err(_) => {
                    tracing::warn!(
                        timeout_s = CHECK_TIMEOUT.as_secs(),
                        "lost the lease: the database did not answer in time; standing by"
                    );
                    break;
                }
            }
        }
        held.send_replace(None);
        // Dropping the session closes it: if the database still thinks it alive, this lets
        // the lock go at once rather than after the keepalives.
        drop(s);
    }
}

fn log_taken() {
    tracing::info!(
        "took the lease: this server runs the alert evaluation, the notifications and the retention"
    );
}
