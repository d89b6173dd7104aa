//! What the fleet's state reads from the database: the whole fleet when a server starts, hosts
//! another server stored (a follower's bulk read) or a host the memory does not hold, and the
//! measurements of kernel and command-line changes.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use super::kept::{FIRST_FIGURES_WITHIN_MS, FleetState};
use crate::db::{Db, FactsRow, GuestScope, IdleReading, IntervalRow, ReportedSample};
use crate::domain::{GuestId, HostId, ReportId};
use crate::error::AppResult;
use crate::fleet::analysed::ACTIVE_WITHIN_MS;
use crate::fleet::changes;
use crate::fleet::inputs::{self, GuestInputs, NewInputs};
use crate::fleet::published::Edit;

/// Hosts read again in one statement per table: a whole read's statements read their guests'
/// windows, about 600 samples a host of 20 guests.
const HOSTS_READ_AT_ONCE: usize = 256;

/// A host whose newest read report was read longer ago than this is read whole: a catch-up
/// would read every report since (a host that reported here meanwhile, say), which a whole
/// read bounds by the window.
const CATCH_UP_WITHIN_MS: i64 = 5 * 60 * 1000;

/// How [`FleetState::reload_hosts`] read its hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reread {
    /// Caught up with the samples of the reports stored since their last read.
    pub caught_up: usize,
    /// Read whole.
    pub whole: usize,
}

impl FleetState {
    /// Reads and analyses every active guest, host by host, and measures their changes: a
    /// few statements for the whole fleet, then two for each guest with a change to measure.
    pub async fn load(db: &Db, now_ms: i64) -> AppResult<FleetState> {
        let current = FleetState::default();
        let started = std::time::Instant::now();
        let (hosts, read_ms) = current.read_and_replace_all(db, now_ms).await?;
        let analysed_ms = started.elapsed().as_millis() as u64 - read_ms;
        current.measure_all_changes(db, &hosts, now_ms).await?;
        tracing::info!(
            hosts = hosts.len(),
            read_ms,
            analysed_ms,
            changes_measured_ms = started.elapsed().as_millis() as u64 - read_ms - analysed_ms,
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
        Ok(self.read_and_replace_all(db, now_ms).await?.0)
    }

    /// [`FleetState::reload_all`], and how long its read took in milliseconds.
    async fn read_and_replace_all(&self, db: &Db, now_ms: i64) -> AppResult<(Vec<HostId>, u64)> {
        let started = std::time::Instant::now();
        let scope = GuestScope::Active {
            since_ms: now_ms - ACTIVE_WITHIN_MS,
        };
        let by_host = read_by_host(db, scope, HashMap::new()).await?;
        let read_ms = started.elapsed().as_millis() as u64;
        let hosts: Vec<HostId> = by_host.keys().copied().collect();
        // Published once, when every host is in: each host published on its own copied the
        // kept orders' paths again for every guest (2.5 s of a start at 100,000 guests).
        self.replace_hosts(by_host, &HashMap::new(), now_ms);
        Ok((hosts, read_ms))
    }

    /// Reads one host's active guests from the database and analyses them as of `now_ms`.
    pub async fn reload_host(&self, db: &Db, host_id: HostId, now_ms: i64) -> AppResult<()> {
        self.reload_hosts(db, &[host_id], now_ms).await.map(|_| ())
    }

    /// Reads some hosts' active guests from the database, in one statement per table (a few
    /// hundred hosts at a time), and analyses each host as of `now_ms`. A host held here whose
    /// newest read report is known is caught up with the samples of the reports stored since
    /// (a follower's read of what another server stored: a report's samples, not its guests'
    /// windows); the others are read whole. A host with no active guest left holds none.
    pub async fn reload_hosts(
        &self,
        db: &Db,
        host_ids: &[HostId],
        now_ms: i64,
    ) -> AppResult<Reread> {
        let (known, mut whole) = self.split_by_newest_read(host_ids, now_ms);
        for chunk in known.chunks(HOSTS_READ_AT_ONCE) {
            whole.extend(self.catch_up_hosts(db, chunk, now_ms).await?);
        }
        let reread = Reread {
            caught_up: host_ids.len() - whole.len(),
            whole: whole.len(),
        };
        for chunk in whole.chunks(HOSTS_READ_AT_ONCE) {
            // Read before the windows: every report up to these is in what they read (a
            // report committed meanwhile may be read again by the next catch-up, which takes
            // a sample once).
            let newest: HashMap<HostId, ReportId> =
                db.newest_reports(chunk).await?.into_iter().collect();
            let scope = GuestScope::Hosts {
                host_ids: chunk,
                active_since_ms: now_ms - ACTIVE_WITHIN_MS,
            };
            let none_yet = chunk.iter().map(|&host_id| (host_id, Vec::new())).collect();
            let by_host = read_by_host(db, scope, none_yet).await?;
            self.replace_hosts(by_host, &newest, now_ms);
        }
        Ok(reread)
    }

    /// `host_ids` split into those held with a newest read report recent enough to catch up
    /// from, and those to read whole.
    fn split_by_newest_read(
        &self,
        host_ids: &[HostId],
        now_ms: i64,
    ) -> (Vec<(HostId, ReportId)>, Vec<HostId>) {
        let hosts = self.lock();
        let mut known = Vec::new();
        let mut whole = Vec::new();
        for &host_id in host_ids {
            match hosts.by_id.get(&host_id).and_then(|h| h.samples_through) {
                Some((report, read_ms)) if now_ms - read_ms <= CATCH_UP_WITHIN_MS => {
                    known.push((host_id, report));
                }
                _ => whole.push(host_id),
            }
        }
        (known, whole)
    }

    /// Catches `hosts` up with the reports stored after the newest each has read, in four
    /// statements; returns the hosts that must be read whole instead (a guest read that is not
    /// held here, or a new sample of a guest not read).
    async fn catch_up_hosts(
        &self,
        db: &Db,
        hosts: &[(HostId, ReportId)],
        now_ms: i64,
    ) -> AppResult<Vec<HostId>> {
        let ids: Vec<HostId> = hosts.iter().map(|(host_id, _)| *host_id).collect();
        // One bound for the statement, each host's own applied below: the hosts of a notice
        // read theirs at about the same time.
        let Some(after) = hosts.iter().map(|(_, report)| *report).min() else {
            return Ok(Vec::new());
        };
        let new = inputs::load_new(db, &ids, after, now_ms - ACTIVE_WITHIN_MS).await?;
        let mut by_host: HashMap<HostId, NewInputs> = ids
            .iter()
            .map(|&host_id| (host_id, NewInputs::default()))
            .collect();
        let mut host_of: HashMap<GuestId, HostId> = HashMap::new();
        for row in new.rows {
            host_of.insert(row.id, row.host_id);
            if let Some(host) = by_host.get_mut(&row.host_id) {
                host.rows.push(row);
            }
        }
        for sample in new.samples {
            if let Some(host) = by_host.get_mut(&sample.host_id) {
                host.samples.push(sample);
            }
        }
        for reading in new.readings {
            let host = host_of.get(&reading.guest_id);
            if let Some(host) = host.and_then(|h| by_host.get_mut(h)) {
                host.readings.push(reading);
            }
        }
        for facts in new.facts {
            let host = host_of.get(&facts.guest_id);
            if let Some(host) = host.and_then(|h| by_host.get_mut(h)) {
                host.facts.push(facts);
            }
        }
        let _held = self.hold_back();
        Ok(by_host
            .into_iter()
            .filter_map(|(host_id, new)| (!self.catch_up(host_id, new, now_ms)).then_some(host_id))
            .collect())
    }

    /// Puts hosts read from the database in place of what is held of them, with the newest
    /// report each had stored before the read (`newest`); readers see them all at once, as a
    /// batch of reports.
    fn replace_hosts(
        &self,
        by_host: HashMap<HostId, Vec<GuestInputs>>,
        newest: &HashMap<HostId, ReportId>,
        now_ms: i64,
    ) {
        let _held = self.hold_back();
        for (host_id, guests) in by_host {
            let through = newest.get(&host_id).map(|report| (*report, now_ms));
            self.replace_inputs(host_id, guests, through, now_ms);
        }
    }

    fn replace_inputs(
        &self,
        host_id: HostId,
        guests: Vec<GuestInputs>,
        samples_through: Option<(ReportId, i64)>,
        now_ms: i64,
    ) {
        let mut guard = self.lock();
        let hosts = &mut *guard;
        let host = hosts.by_id.entry(host_id).or_default();
        host.inputs.clear();
        host.identities.clear();
        host.samples_through = samples_through;
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

    /// Catches one host up with what [`FleetState::catch_up_hosts`] read of it and analyses it
    /// as of `now_ms`; `false` (nothing changed) when it must be read whole.
    fn catch_up(&self, host_id: HostId, new: NewInputs, now_ms: i64) -> bool {
        let mut guard = self.lock();
        let hosts = &mut *guard;
        let Some(host) = hosts.by_id.get_mut(&host_id) else {
            return false;
        };
        let Some((through, _)) = host.samples_through else {
            return false;
        };
        let NewInputs {
            rows,
            samples,
            readings,
            facts,
        } = new;
        let read: HashSet<GuestId> = rows.iter().map(|row| row.id).collect();
        let samples: Vec<ReportedSample> = samples
            .into_iter()
            .filter(|s| s.report_id > through)
            .collect();
        if rows.iter().any(|row| !host.inputs.contains_key(&row.id))
            || samples.iter().any(|s| !read.contains(&s.sample.guest_id))
        {
            return false;
        }
        // Those not read are gone from the host or silent, as a whole read would leave them.
        host.inputs.retain(|id, _| read.contains(id));
        host.identities.retain(|_, id| read.contains(id));
        let newest = samples.iter().map(|s| s.report_id).max();
        let mut samples_of: HashMap<GuestId, Vec<IntervalRow>> = HashMap::new();
        for s in samples {
            samples_of
                .entry(s.sample.guest_id)
                .or_default()
                .push(s.sample);
        }
        let mut readings_of: HashMap<GuestId, Vec<IdleReading>> = HashMap::new();
        for r in readings {
            readings_of.entry(r.guest_id).or_default().push(r);
        }
        let mut facts_of: HashMap<GuestId, Vec<FactsRow>> = HashMap::new();
        for f in facts {
            facts_of.entry(f.guest_id).or_default().push(f);
        }
        let name = rows.last().map(|row| row.host_name.clone());
        for row in rows {
            host.reports_stored = host.reports_stored.max(row.host_reports);
            let id = row.id;
            let Some(inputs) = host.inputs.get_mut(&id) else {
                continue;
            };
            inputs.catch_up(
                row,
                samples_of.remove(&id).unwrap_or_default(),
                readings_of.remove(&id).unwrap_or_default(),
                facts_of.get(&id).map_or(&[][..], Vec::as_slice),
            );
        }
        host.samples_through = Some((newest.map_or(through, |n| n.max(through)), now_ms));
        if let Some(name) = name {
            hosts.names.insert(name, host_id);
        }
        self.analyse_host(hosts, host_id, now_ms);
        true
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
        let edit = Edit::Changes {
            previous: before.into_keys().collect(),
            measured: host.changes.clone(),
        };
        // Seen at once, also while a batch of reports is held back: whoever waits for the
        // measurements (`LiveFleet::caught_up`) reads them next.
        self.publish_now(&mut guard, edit);
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
