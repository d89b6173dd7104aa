//! Measuring kernel and command-line changes off the report's path.
//!
//! A change is measured over the hour around it, from the database: too much to read on every
//! report. A report that stored a change asks for its host's changes to be measured, and so does
//! each report while that change has no figures yet; a host whose last change has not settled
//! yet (its "after" side still grows) is measured again at most once a minute. One worker measures the hosts asked for, each once however often it was asked
//! meanwhile. Nobody waits for it: pages show the last measurement. A reader that must see a
//! measurement of what it just stored (a test) waits with [`Refresher::caught_up`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, watch};

use super::state::FleetState;
use crate::db::Db;
use crate::domain::HostId;

/// How often a host's unsettled change is measured again while it reports.
pub const REMEASURE_EVERY_MS: i64 = 60_000;

pub struct Refresher {
    queue: Mutex<Queue>,
    wake: Notify,
    /// How many requests the finished measurements answered, counted like `Queue::asked`.
    done: watch::Sender<u64>,
}

#[derive(Default)]
struct Queue {
    /// Hosts to measure, each as of the latest time it was asked for.
    hosts: HashMap<HostId, i64>,
    /// When each host was last measured (server clock), for the once-a-minute limit.
    measured_ms: HashMap<HostId, i64>,
    /// Hosts the limit held back, each as of the latest time it was asked for.
    held_back: HashMap<HostId, i64>,
    /// Hosts being measured now: a report stored meanwhile may not be in what they read.
    measuring: HashSet<HostId>,
    /// Requests so far.
    asked: u64,
}

impl Queue {
    /// Takes every host asked for; they are being measured until [`Queue::finished`].
    fn take(&mut self) -> (HashMap<HostId, i64>, u64) {
        let hosts = std::mem::take(&mut self.hosts);
        self.measuring.extend(hosts.keys().copied());
        (hosts, self.asked)
    }

    fn finished(&mut self, host_id: HostId) {
        self.measuring.remove(&host_id);
    }

    /// Whether a measurement of `host_id` is asked for or running.
    fn outstanding(&self, host_id: HostId) -> bool {
        self.hosts.contains_key(&host_id) || self.measuring.contains(&host_id)
    }
}

impl Refresher {
    /// Starts the worker that measures the hosts asked for into `current`.
    pub fn start(db: Db, current: Arc<FleetState>) -> Arc<Refresher> {
        let refresher = Arc::new(Refresher {
            queue: Mutex::new(Queue::default()),
            wake: Notify::new(),
            done: watch::channel(0).0,
        });
        let worker = refresher.clone();
        tokio::spawn(async move {
            loop {
                worker.wake.notified().await;
                loop {
                    let (hosts, asked) = worker.lock().take();
                    if hosts.is_empty() {
                        break;
                    }
                    for (host_id, at_ms) in hosts {
                        // In a task of its own, so that a panic in one host's measurement is
                        // that host's failure, not the end of every measurement.
                        let (db, current) = (db.clone(), current.clone());
                        let measured = tokio::spawn(async move {
                            current.measure_changes(&db, host_id, at_ms).await
                        })
                        .await;
                        match measured {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => {
                                tracing::warn!(host_id = host_id.0, error = %e, "the host's kernel changes could not be measured")
                            }
                            Err(e) => {
                                tracing::error!(host_id = host_id.0, error = %e, "measuring the host's kernel changes panicked")
                            }
                        }
                        worker.lock().finished(host_id);
                    }
                    worker.done.send_replace(asked);
                }
            }
        });
        refresher
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks for `host_id`'s changes to be measured as of `at_ms`.
    pub fn ask(&self, host_id: HostId, at_ms: i64) {
        {
            let mut queue = self.lock();
            let at = queue.hosts.entry(host_id).or_insert(at_ms);
            *at = (*at).max(at_ms);
            queue.measured_ms.insert(host_id, at_ms);
            queue.held_back.remove(&host_id);
            queue.asked += 1;
        }
        self.wake.notify_one();
    }

    /// Asks for `host_id`'s changes to be measured again unless they were within
    /// [`REMEASURE_EVERY_MS`] before `at_ms`.
    pub fn ask_at_most_every_minute(&self, host_id: HostId, at_ms: i64) {
        {
            let mut queue = self.lock();
            let recent = queue
                .measured_ms
                .get(&host_id)
                .is_some_and(|&last_ms| (last_ms..last_ms + REMEASURE_EVERY_MS).contains(&at_ms));
            if recent {
                let at = queue.held_back.entry(host_id).or_insert(at_ms);
                *at = (*at).max(at_ms);
                return;
            }
        }
        self.ask(host_id, at_ms);
    }

    /// Whether a measurement of `host_id` is asked for or running: one that is running may have
    /// read the database before a report stored now, so a change it finds without figures must
    /// be measured again with what that report brought.
    pub fn outstanding(&self, host_id: HostId) -> bool {
        self.lock().outstanding(host_id)
    }

    /// Forgets when silent hosts were last measured.
    pub fn forget(&self, keep: impl Fn(HostId) -> bool) {
        let mut queue = self.lock();
        queue.measured_ms.retain(|host_id, _| keep(*host_id));
        queue.held_back.retain(|host_id, _| keep(*host_id));
    }

    /// Measures every host asked for so far, the ones the once-a-minute limit held back too,
    /// and waits, however long it takes, until that has run: what a reader that must see the
    /// measurements of everything stored so far (a test) calls.
    pub async fn caught_up(&self) {
        let held_back: Vec<(HostId, i64)> = self.lock().held_back.drain().collect();
        for (host_id, at_ms) in held_back {
            self.ask(host_id, at_ms);
        }
        let asked = self.lock().asked;
        let mut done = self.done.subscribe();
        let _ = done.wait_for(|&d| d >= asked).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_outstanding_from_its_request_until_its_measurement_finished() {
        let (a, b) = (HostId(1), HostId(2));
        let mut queue = Queue::default();
        assert!(!queue.outstanding(a));
        queue.hosts.insert(a, 10);
        queue.asked += 1;
        assert!(queue.outstanding(a) && !queue.outstanding(b));
        let (taken, asked) = queue.take();
        assert_eq!((taken, asked), (HashMap::from([(a, 10)]), 1));
        // Taken is not done: a report stored now may not be in what is being read.
        assert!(queue.outstanding(a));
        queue.finished(a);
        assert!(!queue.outstanding(a));
    }
}
