//! Bringing the fleet's current state up to date after ingest, off the request path.
//!
//! A stored report asks for its host to be analysed again and is answered at once; one worker
//! analyses the hosts that asked, each once however many reports it sent meanwhile. An agent
//! replaying the spool it kept through an outage, or a thousand hosts reporting together, then
//! cost one analysis per host per pass instead of one per report, and ingest is never held up
//! by analysis. A reader that must see what was stored before it (a page, the API, an alert
//! evaluation) waits for the analyses asked for so far: [`Refresher::settled`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use super::current::Current;
use crate::db::Db;
use crate::domain::HostId;

/// Longest a reader waits for the analyses before it: past this, it reads the state as it is
/// (a server too busy to keep up should still answer).
const SETTLE_AT_MOST: Duration = Duration::from_secs(2);

pub struct Refresher {
    queue: Mutex<Queue>,
    wake: Notify,
    /// How many requests the finished analyses answered, counted like `Queue::asked`.
    done: watch::Sender<u64>,
}

#[derive(Default)]
struct Queue {
    /// Hosts to analyse again, each as of the latest time it was asked for.
    hosts: HashMap<HostId, i64>,
    /// Requests so far.
    asked: u64,
}

impl Refresher {
    /// Starts the worker that analyses the hosts asked for into `current`.
    pub fn start(db: Db, current: Arc<Current>) -> Arc<Refresher> {
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
                    let (hosts, asked) = {
                        let mut queue = worker.queue.lock().unwrap_or_else(|e| e.into_inner());
                        (std::mem::take(&mut queue.hosts), queue.asked)
                    };
                    if hosts.is_empty() {
                        break;
                    }
                    for (host_id, at_ms) in hosts {
                        // In a task of its own, so that a panic in one host's analysis is that
                        // host's failure, not the end of every analysis.
                        let (db, current) = (db.clone(), current.clone());
                        let analysed =
                            tokio::spawn(
                                async move { current.refresh_host(&db, host_id, at_ms).await },
                            )
                            .await;
                        match analysed {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => {
                                tracing::warn!(host_id = host_id.0, error = %e, "the host's guests could not be analysed again")
                            }
                            Err(e) => {
                                tracing::error!(host_id = host_id.0, error = %e, "the host's analysis panicked")
                            }
                        }
                    }
                    worker.done.send_replace(asked);
                }
            }
        });
        refresher
    }

    /// Asks for `host_id` to be analysed again as of `at_ms`.
    pub fn ask(&self, host_id: HostId, at_ms: i64) {
        {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            let at = queue.hosts.entry(host_id).or_insert(at_ms);
            *at = (*at).max(at_ms);
            queue.asked += 1;
        }
        self.wake.notify_one();
    }

    /// Waits until every analysis asked for before this call has run (at most a couple of
    /// seconds).
    pub async fn settled(&self) {
        let _ = tokio::time::timeout(SETTLE_AT_MOST, self.caught_up()).await;
    }

    /// Waits, however long it takes, until every analysis asked for before this call has run.
    pub async fn caught_up(&self) {
        let asked = self.queue.lock().unwrap_or_else(|e| e.into_inner()).asked;
        let mut done = self.done.subscribe();
        let _ = done.wait_for(|&d| d >= asked).await;
    }
}
