//! The live fleet: the analysed guests kept current by the refresher, as the pages, the API, the
//! alert evaluation and the retention read them.

use std::collections::HashMap;
use std::sync::Arc;

use super::analysed::{self, AnalysedGuest};
use super::current::Current;
use super::refresher::Refresher;
use crate::analysis::change::Change;
use crate::db::Db;
use crate::domain::{GuestId, HostId};
use crate::error::AppResult;

/// A cheap handle (three `Arc`s) on the analysed fleet and what keeps it current.
#[derive(Clone)]
pub struct LiveFleet {
    db: Db,
    current: Arc<Current>,
    refresher: Arc<Refresher>,
}

impl LiveFleet {
    /// Starts the refresher that keeps `current` in step with what is stored in `db`.
    pub fn start(db: Db, current: Current) -> LiveFleet {
        let current = Arc::new(current);
        LiveFleet {
            refresher: Refresher::start(db.clone(), current.clone()),
            db,
            current,
        }
    }

    /// Asks for a host's guests to be analysed again as of `at_ms`, after something it or
    /// they sent was stored.
    pub fn refresh_host(&self, host_id: HostId, at_ms: i64) {
        self.refresher.ask(host_id, at_ms);
    }

    /// Waits until every analysis asked for so far is done.
    pub async fn settled(&self) {
        self.refresher.settled().await;
    }

    /// Waits until the refresher has nothing left to do (tests and benchmarks).
    pub async fn caught_up(&self) {
        self.refresher.caught_up().await;
    }

    /// The active guests, most wasteful first, with everything stored so far analysed.
    pub async fn ranked(&self, now_ms: i64) -> Vec<Arc<AnalysedGuest>> {
        self.settled().await;
        self.current.ranked(now_ms)
    }

    /// The active guests' last kernel or command-line changes, measured, by guest.
    pub async fn changes(&self, now_ms: i64) -> HashMap<GuestId, Change> {
        self.settled().await;
        self.current.changes(now_ms)
    }

    /// One guest as the ranking has it; a guest that stopped reporting is analysed from its
    /// last window. `None` if there is no such guest.
    pub async fn guest(
        &self,
        guest_id: GuestId,
        now_ms: i64,
    ) -> AppResult<Option<Arc<AnalysedGuest>>> {
        self.settled().await;
        self.guest_as_is(guest_id, now_ms).await
    }

    /// The same without waiting for the analyses asked before (a caller that waited once for a
    /// whole batch of guests).
    pub async fn guest_as_is(
        &self,
        guest_id: GuestId,
        now_ms: i64,
    ) -> AppResult<Option<Arc<AnalysedGuest>>> {
        if let Some(guest) = self.current.guest(guest_id, now_ms) {
            return Ok(Some(guest));
        }
        Ok(analysed::guest(&self.db, guest_id, now_ms)
            .await?
            .map(Arc::new))
    }

    /// The analysed state itself, as of the last analysis (no waiting).
    pub fn current(&self) -> &Current {
        &self.current
    }
}
