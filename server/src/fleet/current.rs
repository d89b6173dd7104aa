//! The fleet's current state: every active guest analysed, held in memory and brought up to date
//! one host at a time as its reports and facts arrive.
//!
//! The ranking pages and the API read this instead of analysing every guest's raw window on
//! every request: at 10,000 guests that analysis takes seconds, while a host's own is a few
//! milliseconds and runs once per report. Nothing here is lost on a restart; the raw window is
//! always in the database and [`Current::load`] analyses it again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::analysed::{self, ACTIVE_WITHIN_MS, AnalysedGuest};
use super::changes::{self, SettledChanges};
use crate::analysis::change::Change;

use crate::db::{Db, GuestScope};
use crate::domain::{GuestId, HostId};
use crate::error::AppResult;

/// The analysed guests of every host, as of each host's last report.
#[derive(Default)]
pub struct Current {
    hosts: RwLock<HashMap<HostId, HostState>>,
    /// Orders the analyses: one that began later read a later database, so an earlier one that
    /// finishes after it must not overwrite it.
    next_ticket: AtomicU64,
}

#[derive(Default)]
struct HostState {
    ticket: u64,
    guests: Vec<Arc<AnalysedGuest>>,
    /// Its guests' last kernel or command-line changes, measured.
    changes: HashMap<GuestId, Change>,
    /// Measurements that can no longer change, kept so that they are not read again.
    settled: SettledChanges,
}

impl Current {
    /// Analyses every active guest, host by host.
    pub async fn load(db: &Db, now_ms: i64) -> AppResult<Current> {
        let current = Current::default();
        let ticket = current.ticket();
        let scope = GuestScope::Active {
            since_ms: now_ms - ACTIVE_WITHIN_MS,
        };
        let mut hosts: HashMap<HostId, HostState> = HashMap::new();
        let mut host_of = HashMap::new();
        for guest in analysed::analyse(db, scope, now_ms).await? {
            host_of.insert(guest.id, guest.host_id);
            let host = hosts.entry(guest.host_id).or_default();
            host.ticket = ticket;
            host.guests.push(Arc::new(guest));
        }
        let last = changes::last_changes(db.fact_changes(None).await?)
            .into_iter()
            .filter(|(guest, _)| host_of.contains_key(guest))
            .collect();
        let (changes, settled) =
            changes::measure_changes(db, last, now_ms, &SettledChanges::new()).await?;
        for (guest, change) in changes {
            hosts
                .entry(host_of[&guest])
                .or_default()
                .changes
                .insert(guest, change);
        }
        for ((guest, at_ms), change) in settled {
            let host = hosts.entry(host_of[&guest]).or_default();
            host.settled.insert((guest, at_ms), change);
        }
        for (host_id, host) in hosts {
            current.put(host_id, host);
        }
        Ok(current)
    }

    /// Analyses one host's active guests again, after it reported or one of its guests
    /// delivered facts.
    pub async fn refresh_host(&self, db: &Db, host_id: HostId, now_ms: i64) -> AppResult<()> {
        let ticket = self.ticket();
        let scope = GuestScope::Host {
            host_id,
            guest_id: None,
            active_since_ms: now_ms - ACTIVE_WITHIN_MS,
        };
        let guests = analysed::analyse(db, scope, now_ms).await?;
        let ids: HashSet<GuestId> = guests.iter().map(|g| g.id).collect();
        let last = changes::last_changes(db.fact_changes_of_host(host_id).await?)
            .into_iter()
            .filter(|(guest, _)| ids.contains(guest))
            .collect();
        let settled = self
            .read()
            .get(&host_id)
            .map(|h| h.settled.clone())
            .unwrap_or_default();
        let (changes, settled) = changes::measure_changes(db, last, now_ms, &settled).await?;
        self.put(
            host_id,
            HostState {
                ticket,
                guests: guests.into_iter().map(Arc::new).collect(),
                changes,
                settled,
            },
        );
        Ok(())
    }

    /// The active guests, most wasteful first (see [`analysed::rank`]).
    pub fn ranked(&self, now_ms: i64) -> Vec<Arc<AnalysedGuest>> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        let mut guests: Vec<Arc<AnalysedGuest>> = self
            .read()
            .values()
            .flat_map(|host| &host.guests)
            .filter(|g| g.last_seen_ms >= since_ms)
            .cloned()
            .collect();
        analysed::rank(&mut guests);
        guests
    }

    /// One guest as the ranking has it; `None` when it is not active (or unknown).
    pub fn guest(&self, guest_id: GuestId, now_ms: i64) -> Option<Arc<AnalysedGuest>> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        self.read()
            .values()
            .flat_map(|host| &host.guests)
            .find(|g| g.id == guest_id && g.last_seen_ms >= since_ms)
            .cloned()
    }

    /// The last kernel or command-line change of each active guest, measured (see
    /// [`changes::changes`]).
    pub fn changes(&self, now_ms: i64) -> HashMap<GuestId, Change> {
        let since_ms = now_ms - ACTIVE_WITHIN_MS;
        let hosts = self.read();
        hosts
            .values()
            .flat_map(|host| {
                host.guests
                    .iter()
                    .filter(|g| g.last_seen_ms >= since_ms)
                    .filter_map(|g| Some((g.id, *host.changes.get(&g.id)?)))
            })
            .collect()
    }

    fn ticket(&self) -> u64 {
        self.next_ticket.fetch_add(1, Ordering::Relaxed)
    }

    fn put(&self, host_id: HostId, state: HostState) {
        let mut hosts = self.hosts.write().unwrap_or_else(|e| e.into_inner());
        match hosts.get(&host_id) {
            Some(held) if held.ticket > state.ticket => {}
            _ => {
                hosts.insert(host_id, state);
            }
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<HostId, HostState>> {
        self.hosts.read().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyse_host, test_window};

    fn host_state(ticket: u64, names: &[&str]) -> HostState {
        let verdict = analyse_host(&[test_window(1, 0.3, 20.0, None)]).remove(0);
        let guests = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                Arc::new(AnalysedGuest {
                    id: GuestId(i as i64 + 1),
                    name: name.to_string(),
                    uuid: None,
                    host: "hv".into(),
                    host_id: HostId(1),
                    hypervisor: "qemu".into(),
                    management: None,
                    vcpus: 1,
                    pid: 1,
                    boot_args: None,
                    uses_kvm: None,
                    cpu_source: None,
                    last_seen_ms: 1_000,
                    intervals: 6,
                    window_s: 60.0,
                    analysed_ms: 1_000,
                    kernel: None,
                    verdict: verdict.clone(),
                })
            })
            .collect();
        HostState {
            ticket,
            guests,
            ..HostState::default()
        }
    }

    fn names(current: &Current) -> Vec<String> {
        let mut names: Vec<String> = current
            .ranked(1_000)
            .iter()
            .map(|g| g.name.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn an_analysis_that_began_earlier_never_replaces_a_later_one() {
        let current = Current::default();
        current.put(HostId(1), host_state(5, &["new-a", "new-b"]));
        // Began before the one above, read an older database, finished after it.
        current.put(HostId(1), host_state(3, &["old"]));
        assert_eq!(names(&current), ["new-a", "new-b"]);
        current.put(HostId(1), host_state(6, &["newest"]));
        assert_eq!(names(&current), ["newest"]);
    }

    #[test]
    fn guests_silent_longer_than_the_active_limit_are_not_ranked() {
        let current = Current::default();
        current.put(HostId(1), host_state(1, &["a"]));
        assert_eq!(current.ranked(1_000 + ACTIVE_WITHIN_MS).len(), 1);
        assert!(current.ranked(1_001 + ACTIVE_WITHIN_MS).is_empty());
        assert!(
            current
                .guest(GuestId(1), 1_001 + ACTIVE_WITHIN_MS)
                .is_none()
        );
        assert!(current.guest(GuestId(1), 1_000).is_some());
    }
}
