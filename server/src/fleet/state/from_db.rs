//! What the fleet's state reads from the database: the whole fleet when a server starts, hosts
//! another server stored (a follower's bulk read) or a host the memory does not hold, and the
//! measurements of kernel and command-line changes.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use super::kept::{FIRST_FIGURES_WITHIN_MS, FleetState};
use crate::db::{Db, GuestScope};
use crate::domain::{GuestId, HostId};
use crate::error::AppResult;
use crate::fleet::analysed::ACTIVE_WITHIN_MS;
use crate::fleet::changes;
use crate::fleet::inputs::{self, GuestInputs};

/// Hosts read again in one statement per table: each statement reads their guests' windows,
/// about 600 samples a host of 20 guests.
const HOSTS_READ_AT_ONCE: usize = 256;

impl FleetState {
    /// Reads and analyses every active guest, host by host, and measures their changes: a
    /// few statements for the whole fleet, then two for each guest with a change to measure.
    pub async fn load(db: &Db, now_ms: i64) -> AppResult<FleetState> {
        let current = FleetState::default();
        let started = std::time::Instant::now();
        let hosts = current.reload_all(db, now_ms).await?;
        let read_ms = started.elapsed().as_millis() as u64;
        current.measure_all_changes(db, &hosts, now_ms).await?;
        tracing::info!(
            hosts = hosts.len(),
            read_and_analysed_ms = read_ms,
            changes_measured_ms = started.elapsed().as_millis() as u64 - read_ms,
            "loaded the fleet's state"
        );
        Ok(current)
    }

    /// Measures the last changes of `hosts`' guests from every guest's changes, read at once.
    async fn measure_all_changes(&self, db: &Db, hosts: &[HostId], now_ms: i64) -> AppResult<()> {
        // Each host's ticket before the read, as `measure_changes` takes it.
        let tickets: Vec<(HostId, u64)> = hosts
            .iter()
            .map(|&host_id| (host_id, self.next_ticket.fetch_add(1, Ordering::Relaxed)))
            .collect();
        let host_of: HashMap<GuestId, HostId> = {
            let held = self.lock();
            hosts
                .iter()
                .filter_map(|host_id| Some((*host_id, held.by_id.get(host_id)?)))
                .flat_map(|(host_id, host)| host.analysed.iter().map(move |&g| (g, host_id)))
                .collect()
        };
        let mut by_host: HashMap<HostId, Vec<(GuestId, String, i64)>> = HashMap::new();
        for change in db.fact_changes(None).await? {
            if let Some(host_id) = host_of.get(&change.0) {
                by_host.entry(*host_id).or_default().push(change);
            }
        }
        for (host_id, ticket) in tickets {
            let changes = by_host.remove(&host_id).unwrap_or_default();
            self.measure_changes_from(db, host_id, ticket, changes, now_ms)
                .await?;
        }
        Ok(())
    }

    /// Reads every active guest from the database and analyses them again, host by host;
    /// returns the hosts read. A host held here with no active guest left is forgotten by
    /// [`FleetState::forget_silent`], as always.
    pub async fn reload_all(&self, db: &Db, now_ms: i64) -> AppResult<Vec<HostId>> {
        let scope = GuestScope::Active {
            since_ms: now_ms - ACTIVE_WITHIN_MS,
        };
        let by_host = read_by_host(db, scope, HashMap::new()).await?;
        let hosts: Vec<HostId> = by_host.keys().copied().collect();
        // Published once, when every host is in: each host published on its own copied the
        // kept orders' paths again for every guest (2.5 s of a start at 100,000 guests).
        self.replace_hosts(by_host, now_ms);
        Ok(hosts)
    }

    /// Reads one host's active guests from the database and analyses them as of `now_ms`.
    pub async fn reload_host(&self, db: &Db, host_id: HostId, now_ms: i64) -> AppResult<()> {
        self.reload_hosts(db, &[host_id], now_ms).await
    }

    /// Reads some hosts' active guests from the database, in one statement per table (a few
    /// hundred hosts at a time), and analyses each host as of `now_ms`. A host with no active
    /// guest left holds none.
    pub async fn reload_hosts(&self, db: &Db, host_ids: &[HostId], now_ms: i64) -> AppResult<()> {
        for chunk in host_ids.chunks(HOSTS_READ_AT_ONCE) {
            let scope = GuestScope::Hosts {
                host_ids: chunk,
                active_since_ms: now_ms - ACTIVE_WITHIN_MS,
            };
            let none_yet = chunk.iter().map(|&host_id| (host_id, Vec::new())).collect();
            let by_host = read_by_host(db, scope, none_yet).await?;
            self.replace_hosts(by_host, now_ms);
        }
        Ok(())
    }

    /// Puts hosts read from the database in place of what is held of them; readers see them
    /// all at once, as a batch of reports.
    fn replace_hosts(&self, by_host: HashMap<HostId, Vec<GuestInputs>>, now_ms: i64) {
        let _held = self.hold_back();
        for (host_id, guests) in by_host {
            self.replace_inputs(host_id, guests, now_ms);
        }
    }

    fn replace_inputs(&self, host_id: HostId, guests: Vec<GuestInputs>, now_ms: i64) {
        let mut guard = self.lock();
        let hosts = &mut *guard;
        let host = hosts.by_id.entry(host_id).or_default();
        host.inputs.clear();
        host.identities.clear();
        let mut name = None;
        for guest in guests {
            host.reports_stored = host.reports_stored.max(guest.row.host_reports);
            name = Some(guest.row.host_name.clone());
            host.hold(guest);
        }
        if let Some(name) = name {
            hosts.names.insert(name, host_id);
        }
        self.analyse_host(hosts, host_id, now_ms);
    }

    /// Measures the last kernel or command-line change of each of a host's active guests, from
    /// the database (an hour around each change).
    pub async fn measure_changes(&self, db: &Db, host_id: HostId, now_ms: i64) -> AppResult<()> {
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        if !self.holds_host(host_id) {
            return Ok(());
        }
        let changes = db.fact_changes_of_host(host_id).await?;
        self.measure_changes_from(db, host_id, ticket, changes, now_ms)
            .await
    }

    /// Measures the last changes of a host's guests from `changes` (every source's, oldest
    /// first by guest; those of guests the host does not hold are left out). `ticket` was taken
    /// before `changes` were read: a measurement from an older read never replaces a newer one.
    async fn measure_changes_from(
        &self,
        db: &Db,
        host_id: HostId,
        ticket: u64,
        changes: Vec<(GuestId, String, i64)>,
        now_ms: i64,
    ) -> AppResult<()> {
        let (guests, settled) = {
            let hosts = self.lock();
            match hosts.by_id.get(&host_id) {
                Some(host) => (
                    host.analysed.iter().copied().collect::<HashSet<GuestId>>(),
                    host.settled.clone(),
                ),
                None => return Ok(()),
            }
        };
        let last: HashMap<GuestId, (i64, Option<i64>)> = changes::last_changes(changes)
            .into_iter()
            .filter(|(guest, _)| guests.contains(guest))
            .collect();
        let pending: Vec<(GuestId, i64)> = last.iter().map(|(g, (at, _))| (*g, *at)).collect();
        let (measured, settled) = changes::measure_changes(db, last, now_ms, &settled).await?;
        let unsettled = pending.iter().any(|key| !settled.contains_key(key));
        let unmeasured_at_ms = pending
            .iter()
            .filter(|key| !measured.contains_key(&key.0) && !settled.contains_key(key))
            .map(|(_, at_ms)| *at_ms)
            .max();
        let mut guard = self.lock();
        let Some(host) = guard.by_id.get_mut(&host_id) else {
            return Ok(());
        };
        if host.changes_ticket > ticket {
            return Ok(());
        }
        host.changes_ticket = ticket;
        let before = std::mem::replace(&mut host.changes, measured);
        host.settled = settled;
        host.unsettled = unsettled;
        host.unmeasured_at_ms = unmeasured_at_ms;
        let after = host.changes.clone();
        // Seen at once, also while a batch of reports is held back: whoever waits for the
        // measurements (`LiveFleet::caught_up`) reads them next.
        self.publish_now(&mut guard.draft, |next| {
            next.forget_changes(before.keys());
            next.set_changes(&after);
        });
        Ok(())
    }

    /// Whether any of a host's guests has a change made less than [`FIRST_FIGURES_WITHIN_MS`]
    /// before `now_ms` that has no figures yet: each report may bring the idle time after it
    /// that its first figures need.
    pub fn has_unmeasured_changes(&self, host_id: HostId, now_ms: i64) -> bool {
        self.lock()
            .by_id
            .get(&host_id)
            .and_then(|host| host.unmeasured_at_ms)
            .is_some_and(|at_ms| now_ms < at_ms + FIRST_FIGURES_WITHIN_MS)
    }

    /// Whether any of a host's guests has a change whose figures can still move (measured less
    /// than the settling time ago).
    pub fn has_unsettled_changes(&self, host_id: HostId) -> bool {
        self.lock()
            .by_id
            .get(&host_id)
            .is_some_and(|host| host.unsettled)
    }
}

/// The guests of `scope` read from the database, added to `by_host` under their hosts.
async fn read_by_host(
    db: &Db,
    scope: GuestScope<'_>,
    mut by_host: HashMap<HostId, Vec<GuestInputs>>,
) -> AppResult<HashMap<HostId, Vec<GuestInputs>>> {
    for guest in inputs::load(db, scope).await? {
        by_host.entry(guest.row.host_id).or_default().push(guest);
    }
    Ok(by_host)
}
