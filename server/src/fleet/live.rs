//! The live fleet: the analysed guests, kept current as reports and facts are stored, as the
//! pages, the API, the alert evaluation and the retention read them.
//!
//! Readers never wait: what they read is the state after every report acknowledged so far
//! (the one writer applies each stored report before answering its agent, see
//! `crate::intake`). Kernel-change measurements follow in the background; a reader that must
//! see those for what it just stored (a test) asks with [`LiveFleet::caught_up`].

use std::sync::Arc;

use super::analysed::AnalysedGuest;
use super::inputs;
use super::published::Published;
use super::refresher::Refresher;
use super::state::{Applied, FleetState, HeldBack};
use crate::analysis::change::Change;
use crate::db::{Db, StoredFacts, StoredGuest};
use crate::domain::{GuestId, HostId};
use crate::error::AppResult;
use crate::work::cpu_bound;

/// A cheap handle (three `Arc`s) on the analysed fleet and what keeps it current.
#[derive(Clone)]
pub struct LiveFleet {
    db: Db,
    current: Arc<FleetState>,
    refresher: Arc<Refresher>,
}

impl LiveFleet {
    /// Starts the refresher that measures changes into `current`.
    pub fn start(db: Db, current: FleetState) -> LiveFleet {
        let current = Arc::new(current);
        LiveFleet {
            refresher: Refresher::start(db.clone(), current.clone()),
            db,
            current,
        }
    }

    /// Brings the fleet up to date with what one report stored for `host_id`, as of when the
    /// report arrived (a backfill's reports arrive on their own timeline); with `read_again`,
    /// by reading the host from the database. Only the one writer calls this, in the order the
    /// reports were committed. Returns whether the host was read from the database.
    pub async fn apply_report(
        &self,
        host_id: HostId,
        host_reports: i64,
        stored: &[StoredGuest],
        received_ms: i64,
        read_again: bool,
    ) -> AppResult<bool> {
        let applied = if read_again {
            Applied::NeedsReload
        } else {
            cpu_bound(|| {
                self.current
                    .apply(host_id, host_reports, stored, received_ms)
            })
        };
        match applied {
            Applied::NeedsReload => {
                self.current
                    .reload_host(&self.db, host_id, received_ms)
                    .await?;
                self.refresher.ask(host_id, received_ms);
                return Ok(true);
            }
            Applied::Analysed { changed: true } => self.refresher.ask(host_id, received_ms),
            Applied::Analysed { changed: false } => {
                // A change still waiting for the idle time its first figures need is measured
                // on each report, so that it shows as soon as it can (also while the first
                // measurement of a change runs, which may not have seen this report); one that
                // has figures is measured again at most once a minute until they settle.
                if self.current.has_unmeasured_changes(host_id, received_ms)
                    || self.refresher.outstanding(host_id)
                {
                    self.refresher.ask(host_id, received_ms);
                } else if self.current.has_unsettled_changes(host_id) {
                    self.refresher
                        .ask_at_most_every_minute(host_id, received_ms);
                }
            }
        }
        Ok(false)
    }

    /// Holds back what readers see while a batch of stored reports is applied (see
    /// [`FleetState::hold_back`]); acknowledge them after the guard is dropped.
    pub fn hold_back(&self) -> HeldBack<'_> {
        self.current.hold_back()
    }

    /// The same for facts a guest posted itself.
    pub async fn apply_facts(
        &self,
        host_id: HostId,
        guest_id: GuestId,
        facts: &StoredFacts,
        received_ms: i64,
    ) -> AppResult<()> {
        if !self
            .current
            .apply_facts(host_id, guest_id, facts, received_ms)
        {
            self.current
                .reload_host(&self.db, host_id, received_ms)
                .await?;
        }
        if facts.changed {
            self.refresher.ask(host_id, received_ms);
        }
        Ok(())
    }

    /// Reads again what another server on the database stored: `hosts`, or every active guest
    /// (`None`). Only the one writer calls this, between reports, so that it never overlaps
    /// this server's own. Their changes are measured again at most once a minute: the server
    /// that stored a change measures it at once, and the alerts read that server's figures
    /// only when it holds the lease.
    pub async fn stored_elsewhere(&self, hosts: Option<Vec<HostId>>, now_ms: i64) -> AppResult<()> {
        let hosts = match hosts {
            Some(hosts) => {
                let reread = self.current.reload_hosts(&self.db, &hosts, now_ms).await?;
                tracing::debug!(
                    caught_up = reread.caught_up,
                    whole = reread.whole,
                    "read again the hosts another server stored reports of"
                );
                hosts
            }
            None => self.current.reload_all(&self.db, now_ms).await?,
        };
        for host_id in hosts {
            self.refresher.ask_at_most_every_minute(host_id, now_ms);
        }
        Ok(())
    }

    /// Forgets the hosts silent past the active limit (the retention calls this).
    pub fn forget_silent(&self, now_ms: i64) -> usize {
        let forgotten = self.current.forget_silent(now_ms);
        self.refresher
            .forget(|host_id| self.current.holds_host(host_id));
        forgotten
    }

    /// Waits until every change measurement asked for so far has run (tests and benchmarks:
    /// what reports stored is applied before they are acknowledged).
    pub async fn caught_up(&self) {
        self.refresher.caught_up().await;
    }

    /// The active guests, most wasteful first, as of every report acknowledged so far.
    pub async fn ranked(&self, now_ms: i64) -> Vec<Arc<AnalysedGuest>> {
        self.current.ranked(now_ms)
    }

    /// The active guests' last kernel or command-line changes, measured, by guest (for the
    /// tests: see [`super::published::Published::changes`]).
    #[cfg(feature = "test-support")]
    pub async fn changes(&self, now_ms: i64) -> std::collections::HashMap<GuestId, Change> {
        self.current.changes(now_ms)
    }

    /// One guest's last kernel or command-line change, measured: the same figure the ranking's
    /// realised savings count, read from the database only for a guest not held here.
    pub async fn change(&self, guest_id: GuestId, now_ms: i64) -> AppResult<Option<Change>> {
        if let Some(change) = self.current.change(guest_id) {
            return Ok(change);
        }
        Ok(super::changes::changes(&self.db, Some(guest_id), now_ms)
            .await?
            .remove(&guest_id))
    }

    /// One guest as the ranking has it; a guest that stopped reporting is analysed from its
    /// last window. `None` if there is no such guest.
    pub async fn guest(
        &self,
        guest_id: GuestId,
        now_ms: i64,
    ) -> AppResult<Option<Arc<AnalysedGuest>>> {
        if let Some(guest) = self.current.guest(guest_id, now_ms) {
            return Ok(Some(guest));
        }
        Ok(inputs::guest(&self.db, guest_id, now_ms)
            .await?
            .map(Arc::new))
    }

    /// The analysed fleet as it is now, to read at leisure: no writer waits for a reader.
    pub fn published(&self) -> Arc<Published> {
        self.current.published()
    }

    /// The analysed state itself.
    pub fn current(&self) -> &FleetState {
        &self.current
    }
}
