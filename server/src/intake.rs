//! The one writer of what agents and guests send: group commit, then the fleet brought up to
//! date, then the answer.
//!
//! Every report and every guest's own facts go through one task, in the order they arrived.
//! Reports that arrive while a batch is being written are committed together in the next
//! transaction (one fsync for all of them, instead of one each); there is no added wait: a lone
//! report is written at once, and a batch waits at most for the one before it. Each report is
//! acknowledged only after its batch committed and the live fleet took in what it stored, so
//! an agent's 200 means "stored", and a page read after it shows it. One writer also means the
//! fleet is updated in commit order, so it never needs to read back what it was just told.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use crate::clock::SharedClock;
use crate::db::{Db, ReportToStore, StoreError, StoreOutcome, StoredFacts};
use crate::domain::{GuestId, HostId, TokenId};
use crate::error::{AppError, AppResult};
use crate::fleet::LiveFleet;
use crate::ingest::ValidReport;
use crate::ingest::facts::ValidFacts;

/// Most reports in one transaction: large enough that a burst of a thousand hosts costs a
/// handful of commits, small enough that one batch's transaction stays short.
const MAX_BATCH_REPORTS: usize = 256;
/// Most guests in one transaction (reports hold up to 10,000 each).
const MAX_BATCH_GUESTS: usize = 20_000;
/// Jobs waiting for the writer before senders wait too: admission and the request timeout
/// bound how long.
const QUEUE_JOBS: usize = 4_096;

/// Hands reports and facts to the writer.
#[derive(Clone)]
pub struct Intake {
    jobs: mpsc::Sender<Job>,
    elsewhere: Arc<Mutex<Elsewhere>>,
}

/// What other servers on the database stored and this one has not read yet. However often
/// they announce a host meanwhile, it is read once: one [`Job::Reload`] waits in the queue at
/// most, and takes everything gathered here when its turn comes.
#[derive(Default)]
struct Elsewhere {
    hosts: BTreeSet<HostId>,
    /// Announcements may have been missed (the listener's connection was lost): read every
    /// active guest again.
    everything: bool,
    /// A [`Job::Reload`] is in the queue and has not taken what is gathered here yet.
    queued: bool,
}

enum Job {
    Report {
        report: Arc<ValidReport>,
        token_id: TokenId,
        received_ms: i64,
        reply: oneshot::Sender<AppResult<StoreOutcome>>,
    },
    Facts(Box<FactsJob>),
    /// Read again what other servers stored (see [`Elsewhere`]). In the writer's queue, so
    /// that it never overlaps this server's own reports: what it reads includes every report
    /// applied before it, and every report after it applies on top.
    Reload,
}

struct FactsJob {
    token_id: TokenId,
    uuid: String,
    guest_id: GuestId,
    facts: ValidFacts,
    received_ms: i64,
    reply: oneshot::Sender<AppResult<()>>,
}

impl Intake {
    /// Starts the writer.
    pub fn start(db: Db, fleet: LiveFleet, clock: SharedClock) -> Intake {
        let (jobs, queue) = mpsc::channel(QUEUE_JOBS);
        let elsewhere = Arc::new(Mutex::new(Elsewhere::default()));
        tokio::spawn(write_forever(db, fleet, clock, elsewhere.clone(), queue));
        Intake { jobs, elsewhere }
    }

    /// Has the fleet read `hosts` again (another server stored reports or facts of theirs), or
    /// every active guest (`None`: announcements may have been missed). Returns at once.
    pub async fn stored_elsewhere(&self, hosts: Option<&[HostId]>) -> AppResult<()> {
        let queue = {
            let mut elsewhere = self.elsewhere.lock().unwrap_or_else(|e| e.into_inner());
            match hosts {
                Some(hosts) => elsewhere.hosts.extend(hosts.iter().copied()),
                None => elsewhere.everything = true,
            }
            !std::mem::replace(&mut elsewhere.queued, true)
        };
        if queue {
            self.send(Job::Reload).await?;
        }
        Ok(())
    }

    /// Stores a report, brings the fleet up to date with it, and says what happened.
    pub async fn store_report(
        &self,
        report: Arc<ValidReport>,
        token_id: TokenId,
        received_ms: i64,
    ) -> AppResult<StoreOutcome> {
        let (reply, answer) = oneshot::channel();
        self.send(Job::Report {
            report,
            token_id,
            received_ms,
            reply,
        })
        .await?;
        answer.await.map_err(|_| stopped())?
    }

    /// Stores facts a guest posted itself (see `Db::record_guest_facts`), then the same.
    pub async fn store_guest_facts(
        &self,
        token_id: TokenId,
        uuid: String,
        guest_id: GuestId,
        facts: ValidFacts,
        received_ms: i64,
    ) -> AppResult<()> {
        let (reply, answer) = oneshot::channel();
        self.send(Job::Facts(Box::new(FactsJob {
            token_id,
            uuid,
            guest_id,
            facts,
            received_ms,
            reply,
        })))
        .await?;
        answer.await.map_err(|_| stopped())?
    }

    async fn send(&self, job: Job) -> AppResult<()> {
        self.jobs.send(job).await.map_err(|_| stopped())
    }
}

/// The writer is gone (the server is stopping): nothing more is stored.
fn stopped() -> AppError {
    AppError::Unavailable {
        message: "the server is stopping and stores nothing more; retry later".into(),
        retry_after_s: crate::error::STORAGE_RETRY_AFTER_S,
    }
}

async fn write_forever(
    db: Db,
    fleet: LiveFleet,
    clock: SharedClock,
    elsewhere: Arc<Mutex<Elsewhere>>,
    mut queue: mpsc::Receiver<Job>,
) {
    let mut next: Option<Job> = None;
    loop {
        let first = match next.take() {
            Some(job) => job,
            None => match queue.recv().await {
                Some(job) => job,
                None => return,
            },
        };
        match first {
            Job::Facts(job) => {
                contained(write_facts(db.clone(), fleet.clone(), job)).await;
            }
            Job::Reload => {
                let taken = {
                    let mut elsewhere = elsewhere.lock().unwrap_or_else(|e| e.into_inner());
                    std::mem::take(&mut *elsewhere)
                };
                let (fleet, now_ms) = (fleet.clone(), clock.now_ms());
                contained(async move {
                    let hosts = (!taken.everything).then(|| taken.hosts.into_iter().collect());
                    if let Err(e) = fleet.stored_elsewhere(hosts, now_ms).await {
                        // Read again with the host's next report, here or elsewhere.
                        tracing::warn!(error = %e, "what another server stored could not be read");
                    }
                })
                .await;
            }
            Job::Report { .. } => {
                // Whatever else is waiting joins the batch, up to its limits or a job of
                // another kind, which goes next.
                let mut batch = vec![first];
                let mut guests = batch_guests(&batch[0]);
                while batch.len() < MAX_BATCH_REPORTS && guests < MAX_BATCH_GUESTS {
                    match queue.try_recv() {
                        Ok(job @ Job::Report { .. }) => {
                            guests += batch_guests(&job);
                            batch.push(job);
                        }
                        Ok(job) => {
                            next = Some(job);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                contained(write_reports(db.clone(), fleet.clone(), batch)).await;
            }
        }
    }
}

fn batch_guests(job: &Job) -> usize {
    match job {
        Job::Report { report, .. } => report.guests.len().max(1),
        Job::Facts(_) | Job::Reload => 0,
    }
}

/// Runs one write in a task of its own, so that a panic fails that write's callers (their
/// answers are dropped: "stopped") and not every later one.
async fn contained(write: impl Future<Output = ()> + Send + 'static) {
    if let Err(e) = tokio::spawn(write).await {
        tracing::error!(error = %e, "writing reports panicked");
    }
}

async fn write_reports(db: Db, fleet: LiveFleet, batch: Vec<Job>) {
    let mut replies = Vec::with_capacity(batch.len());
    let mut items = Vec::with_capacity(batch.len());
    for job in batch {
        if let Job::Report {
            report,
            token_id,
            received_ms,
            reply,
        } = job
        {
            items.push((report, token_id, received_ms));
            replies.push(reply);
        }
    }
    let to_store: Vec<ReportToStore<'_>> = items
        .iter()
        .map(|(report, token_id, received_ms)| ReportToStore {
            report,
            token_id: *token_id,
            received_ms: *received_ms,
        })
        .collect();
    let outcomes = db
        .store_reports(&to_store, crate::ingest::samples::sample_spans)
        .await;
    let outcomes: Vec<Result<StoreOutcome, StoreError>> = match outcomes {
        Ok(outcomes) => outcomes,
        Err(e) => {
            tracing::warn!(reports = replies.len(), error = %e, "a batch of reports was not stored");
            (0..replies.len()).map(|_| Err(e.again())).collect()
        }
    };
    for (((_, _, received_ms), reply), outcome) in items.iter().zip(replies).zip(outcomes) {
        if let Ok(StoreOutcome::Stored {
            host_id, guests, ..
        }) = &outcome
            && let Err(e) = fleet.apply_report(*host_id, guests, *received_ms).await
        {
            // Stored all the same: the host is read again with its next report.
            tracing::warn!(host_id = host_id.0, error = %e, "a stored report could not be analysed");
        }
        let _ = reply.send(outcome.map_err(AppError::from));
    }
}

async fn write_facts(db: Db, fleet: LiveFleet, job: Box<FactsJob>) {
    let stored: AppResult<StoredFacts> = db
        .record_guest_facts(
            job.token_id,
            &job.uuid,
            job.guest_id,
            &job.facts,
            job.received_ms,
        )
        .await
        .map_err(AppError::from);
    let stored = match stored {
        Ok(stored) => stored,
        Err(e) => {
            let _ = job.reply.send(Err(e));
            return;
        }
    };
    match db.guest_host_id(job.guest_id).await {
        Ok(Some(host_id)) => {
            if let Err(e) = fleet
                .apply_facts(host_id, job.guest_id, &stored, job.received_ms)
                .await
            {
                tracing::warn!(guest_id = job.guest_id.0, error = %e, "stored facts could not be analysed");
            }
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(guest_id = job.guest_id.0, error = %e, "stored facts could not be analysed")
        }
    }
    let _ = job.reply.send(Ok(()));
}
