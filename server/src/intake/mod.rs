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

mod elsewhere;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tickscope_wire::Hypervisor;
use tokio::sync::{mpsc, oneshot};

use crate::clock::SharedClock;
use crate::db::GONE_AFTER_MISSED_REPORTS;
use crate::db::{Db, ReportToStore, StoreError, StoreOutcome};
use crate::domain::{GuestId, HostId, TokenId};
use crate::error::{AppError, AppResult};
use crate::fleet::ACTIVE_WITHIN_MS;
use crate::fleet::LiveFleet;
use crate::ingest::ValidReport;
use crate::ingest::binding::{self, Candidate, Presence, Refusal, TokenBinding};
use crate::ingest::facts::{ValidFacts, uuid_forms};
pub use crate::ingest::host_guests::GuestLimits;
use crate::ingest::host_guests::HostAllowances;
use crate::metrics::Metrics;
use crate::work::cpu_bound;
pub use elsewhere::Pace;
use elsewhere::{Elsewhere, Taken};

/// Most reports in one transaction: large enough that a burst of a thousand hosts costs a
/// handful of commits, small enough that one batch's transaction stays short.
const MAX_BATCH_REPORTS: usize = 256;
/// Most guests in one transaction (reports hold up to 10,000 each).
const MAX_BATCH_GUESTS: usize = 20_000;
/// Jobs waiting for the writer before senders wait too: admission and the request timeout
/// bound how long.
const QUEUE_JOBS: usize = 4_096;

/// How long the announcements of other servers' writes are gathered before they are read:
/// each read then takes the hosts of a quarter of a second at once (at 30,000 guests on two
/// servers, about 19 where it took 1.6 a read; docs/performance.md), in the same four
/// statements and under one copy of the kept orders' paths.
pub const GATHER_ELSEWHERE: std::time::Duration = std::time::Duration::from_millis(250);

/// The most hosts one due read of what other servers stored takes: hosts read together are
/// due together again and gather more each round, so that without a bound the reads grew and
/// the reports queued behind one waited for all of it. Those past it that are already due are
/// read next, after the reports queued meanwhile. Each read has a fixed cost too, so a smaller
/// bound costs more in all; the figures behind 32 are in docs/performance.md (issue 28, ninth
/// part).
pub const MOST_HOSTS_A_READ: usize = 32;

/// How often at most a host another server stores reports of is read here, unless `serve
/// --follow-every` says otherwise: every other report of an agent reporting every 10 s, so a
/// second server costs about half of what reading every report did (docs/scaling.md), and
/// what it shows of the other's hosts is at most 20 s older than there.
pub const DEFAULT_FOLLOW_EVERY_S: u64 = 20;
/// The most `--follow-every` may be: well within the 5 minutes a read may catch a host up by
/// its new samples rather than read it whole.
pub const MOST_FOLLOW_EVERY_S: u64 = 60;

/// Hands reports and facts to the writer.
#[derive(Clone)]
pub struct Intake {
    jobs: mpsc::Sender<Job>,
    /// What other servers stored and this one has not read yet; the writer takes it when a
    /// wake-up it asked for comes (a [`Job::Reload`]).
    elsewhere: Arc<Mutex<Elsewhere>>,
}

enum Job {
    Report {
        report: Arc<ValidReport>,
        token_id: TokenId,
        received_ms: i64,
        reply: oneshot::Sender<AppResult<StoreOutcome>>,
    },
    Facts(Box<FactsJob>),
    /// Read again what other servers stored that is due now (see [`Elsewhere`]). In the
    /// writer's queue, so that it never overlaps this server's own reports: what it reads
    /// includes every report applied before it, and every report after it applies on top.
    Reload,
    /// Read again everything other servers stored that is not read yet, due or not, then say
    /// so (see [`Intake::catch_up_with_others`]).
    CatchUp(oneshot::Sender<()>),
}

struct FactsJob {
    token_id: TokenId,
    uuid: String,
    facts: ValidFacts,
    received_ms: i64,
    reply: oneshot::Sender<AppResult<GuestId>>,
}

impl Intake {
    /// Starts the writer; a report that would bring its host more guests than `limits` allow
    /// is refused before it is stored, and what other servers store is read as `pace` says.
    pub fn start(
        db: Db,
        fleet: LiveFleet,
        clock: SharedClock,
        limits: GuestLimits,
        pace: Pace,
        metrics: Arc<Metrics>,
    ) -> Intake {
        let (jobs, queue) = mpsc::channel(QUEUE_JOBS);
        let elsewhere = Arc::new(Mutex::new(Elsewhere::new(pace)));
        let writer = Writer {
            db,
            fleet,
            clock,
            elsewhere: elsewhere.clone(),
            wake: jobs.downgrade(),
            limits,
            allowances: Arc::new(Mutex::new(HostAllowances::default())),
            metrics,
        };
        tokio::spawn(writer.write_forever(queue));
        Intake { jobs, elsewhere }
    }

    /// Has the fleet read `hosts` again (another server stored reports or facts of theirs), or
    /// every active guest (`None`: announcements may have been missed), when the pace says
    /// (see [`elsewhere`]): gathered with the others heard meanwhile, and a host at most every
    /// so often. Returns at once.
    pub fn stored_elsewhere(&self, hosts: Option<&[HostId]>) {
        let wake = lock(&self.elsewhere).announced(hosts, tokio::time::Instant::now());
        if let Some(at) = wake {
            wake_writer_at(&self.jobs.downgrade(), at);
        }
    }

    /// Returns once the fleet has read everything other servers on the database announced so
    /// far, however recently it read their hosts: the server that takes the lease evaluates
    /// the alerts on what they stored up to then, not on what it read up to `every` ago.
    pub async fn catch_up_with_others(&self) {
        let (done, caught_up) = oneshot::channel();
        if self.send(Job::CatchUp(done)).await.is_ok() {
            // The writer is gone only when the server stops: nothing is evaluated then.
            let _ = caught_up.await;
        }
    }

    /// Hands a report to the writer, which stores it with the others waiting and brings the
    /// fleet up to date with it; says what happened.
    pub async fn submit_report(
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

    /// Stores facts a guest posted itself, for the guest its token is bound to (see
    /// `ingest::binding`), then the same; says which guest that was.
    pub async fn store_guest_facts(
        &self,
        token_id: TokenId,
        uuid: String,
        facts: ValidFacts,
        received_ms: i64,
    ) -> AppResult<GuestId> {
        let (reply, answer) = oneshot::channel();
        self.send(Job::Facts(Box::new(FactsJob {
            token_id,
            uuid,
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

fn lock(elsewhere: &Mutex<Elsewhere>) -> std::sync::MutexGuard<'_, Elsewhere> {
    elsewhere.lock().unwrap_or_else(|e| e.into_inner())
}

/// What other servers stored that `take` takes now (what is due, or all of it); the next
/// read's wake-up is set.
fn take_elsewhere(
    elsewhere: &Mutex<Elsewhere>,
    wake: &mpsc::WeakSender<Job>,
    take: fn(&mut Elsewhere, tokio::time::Instant) -> (Taken, Option<tokio::time::Instant>),
) -> Taken {
    let (taken, next) = take(&mut lock(elsewhere), tokio::time::Instant::now());
    if let Some(at) = next {
        wake_writer_at(wake, at);
    }
    taken
}

/// Queues a [`Job::Reload`] at `at`. The wake-up does not keep the writer's queue open: a
/// server that stops does not wait for it.
fn wake_writer_at(jobs: &mpsc::WeakSender<Job>, at: tokio::time::Instant) {
    let jobs = jobs.clone();
    tokio::spawn(async move {
        tokio::time::sleep_until(at).await;
        if let Some(jobs) = jobs.upgrade() {
            // Refused only once the writer is gone: nothing is read any more then.
            let _ = jobs.send(Job::Reload).await;
        }
    });
}

/// The writer is gone (the server is stopping): nothing more is stored.
fn stopped() -> AppError {
    AppError::Unavailable {
        message: "the server is stopping and stores nothing more; retry later".into(),
        retry_after_s: crate::error::STORAGE_RETRY_AFTER_S,
    }
}

/// The writer's own: what it writes to, and what it keeps across batches.
struct Writer {
    db: Db,
    fleet: LiveFleet,
    clock: SharedClock,
    elsewhere: Arc<Mutex<Elsewhere>>,
    /// Queues the reads of what other servers stored when they are due.
    wake: mpsc::WeakSender<Job>,
    limits: GuestLimits,
    /// Each host's new guests still allowed.
    allowances: Arc<Mutex<HostAllowances>>,
    metrics: Arc<Metrics>,
}

impl Writer {
    /// Reads again what other servers stored that was taken for a read.
    async fn read_elsewhere(&self, taken: Taken) {
        let hosts = match taken {
            Taken::Nothing => return,
            Taken::Hosts(hosts) => Some(hosts),
            Taken::Everything => None,
        };
        let (fleet, now_ms) = (self.fleet.clone(), self.clock.now_ms());
        let read_hosts = hosts.as_ref().map(Vec::len);
        let elsewhere = self.elsewhere.clone();
        // The writer's time, as the reports waiting behind the read see it (a duration for
        // the metrics, not a time of the data: the injected clock is not for this).
        let started = std::time::Instant::now();
        contained(async move {
            if let Err(e) = fleet.stored_elsewhere(hosts.clone(), now_ms).await {
                // Read again with the host's next report, here or elsewhere, a gathering time
                // after it rather than the least interval after this read.
                if let Some(hosts) = &hosts {
                    lock(&elsewhere).read_failed(hosts);
                }
                tracing::warn!(error = %e, "what another server stored could not be read");
            }
        })
        .await;
        let seconds = started.elapsed().as_secs_f64();
        self.metrics.read_elsewhere(read_hosts, seconds);
    }

    async fn write_forever(self, mut queue: mpsc::Receiver<Job>) {
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
                    contained(write_facts(self.db.clone(), self.fleet.clone(), job)).await;
                }
                Job::Reload => {
                    self.read_elsewhere(take_elsewhere(
                        &self.elsewhere,
                        &self.wake,
                        Elsewhere::take_due,
                    ))
                    .await;
                }
                Job::CatchUp(done) => {
                    let taken = take_elsewhere(&self.elsewhere, &self.wake, Elsewhere::take_all);
                    self.read_elsewhere(taken).await;
                    let _ = done.send(());
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
                    let batch = self.admit(batch);
                    if !batch.is_empty() {
                        let (allowances, limits) = (self.allowances.clone(), self.limits);
                        let write = write_reports(self.db.clone(), self.fleet.clone(), batch);
                        contained(async move {
                            // The new guests of reports that were then not stored come back.
                            let refunds = write.await;
                            let mut allowances =
                                allowances.lock().unwrap_or_else(|e| e.into_inner());
                            for (host, new_guests) in refunds {
                                allowances.refund(&host, new_guests, &limits);
                            }
                        })
                        .await;
                    }
                }
            }
        }
    }

    /// The reports of `batch` their hosts may bring (within their guests' limits: see
    /// `ingest::host_guests`), each with the new guests it spent; the others are answered
    /// here. A report counts the guests of the batch's earlier reports of its host as held.
    fn admit(&self, batch: Vec<Job>) -> Vec<(Job, usize)> {
        let now_ms = self.clock.now_ms();
        let mut allowances = self.allowances.lock().unwrap_or_else(|e| e.into_inner());
        if allowances.len() > ALLOWANCES_KEPT {
            allowances.forget_full(&self.limits, now_ms);
        }
        let mut earlier: HashMap<String, HashSet<(Hypervisor, String)>> = HashMap::new();
        let mut admitted = Vec::with_capacity(batch.len());
        let no_earlier = HashSet::new();
        for job in batch {
            let Job::Report { report, .. } = &job else {
                continue;
            };
            let host = report.host.name.clone();
            let guests = || {
                report
                    .guests
                    .iter()
                    .map(|g| (g.hypervisor, g.identity.as_str()))
            };
            let footprint = self.fleet.current().footprint(
                &host,
                guests(),
                earlier.get(&host).unwrap_or(&no_earlier),
            );
            let judged = allowances.admit(
                &host,
                footprint.new_guests,
                footprint.held_after,
                &self.limits,
                now_ms,
            );
            match judged {
                Ok(()) => {
                    earlier
                        .entry(host)
                        .or_default()
                        .extend(guests().map(|(family, identity)| (family, identity.to_string())));
                    admitted.push((job, footprint.new_guests));
                }
                Err(e) => {
                    let budget = match e {
                        AppError::TooManyRequests { .. } => "new_guests",
                        _ => "guests_per_host",
                    };
                    self.metrics.refused(budget, "agent");
                    if let Job::Report { reply, .. } = job {
                        let _ = reply.send(Err(e));
                    }
                }
            }
        }
        admitted
    }
}

/// Hosts whose allowance is remembered before the full ones are forgotten.
const ALLOWANCES_KEPT: usize = 10_000;

fn batch_guests(job: &Job) -> usize {
    match job {
        Job::Report { report, .. } => report.guests.len().max(1),
        Job::Facts(_) | Job::Reload | Job::CatchUp(_) => 0,
    }
}

/// Runs one write in a task of its own, so that a panic fails that write's callers (their
/// answers are dropped: "stopped") and not every later one.
async fn contained(write: impl Future<Output = ()> + Send + 'static) {
    if let Err(e) = tokio::spawn(write).await {
        tracing::error!(error = %e, "writing reports panicked");
    }
}

/// Stores a batch of admitted reports (each with the new guests it spent) and answers each;
/// returns the hosts and new guests of those not stored.
async fn write_reports(db: Db, fleet: LiveFleet, batch: Vec<(Job, usize)>) -> Vec<(String, usize)> {
    let mut replies = Vec::with_capacity(batch.len());
    let mut items = Vec::with_capacity(batch.len());
    for (job, new_guests) in batch {
        if let Job::Report {
            report,
            token_id,
            received_ms,
            reply,
        } = job
        {
            items.push((report, token_id, received_ms, new_guests));
            replies.push(reply);
        }
    }
    let to_store: Vec<ReportToStore<'_>> = items
        .iter()
        .map(|(report, token_id, received_ms, _)| ReportToStore {
            report,
            token_id: *token_id,
            received_ms: *received_ms,
        })
        .collect();
    let started = std::time::Instant::now();
    let outcomes = db
        .store_reports(&to_store, crate::ingest::samples::sample_spans)
        .await;
    let stored_in = started.elapsed();
    let outcomes: Vec<Result<StoreOutcome, StoreError>> = match outcomes {
        Ok(outcomes) => outcomes,
        Err(e) => {
            tracing::warn!(reports = replies.len(), error = %e, "a batch of reports was not stored");
            (0..replies.len()).map(|_| Err(e.again())).collect()
        }
    };
    let mut refunds = Vec::new();
    let mut answers = Vec::with_capacity(replies.len());
    // The batch is published to readers whole, then acknowledged: a report is seen once its
    // sender hears it was stored.
    // Bringing the spare copy up to date costs the last batch's edits (`fleet::state`).
    let held_back = cpu_bound(|| fleet.hold_back());
    // Hosts read from the database for an earlier report of the batch: they hold every report
    // of it already (the batch was committed before any was applied), and taking a later one
    // in again would count its samples twice; they are read again instead.
    let mut read = HashSet::new();
    for (((report, _, received_ms, new_guests), reply), outcome) in
        items.iter().zip(replies).zip(outcomes)
    {
        match &outcome {
            Ok(StoreOutcome::Stored {
                host_id,
                host_reports,
                guests,
                ..
            }) => {
                let read_again = read.contains(host_id);
                match fleet
                    .apply_report(*host_id, *host_reports, guests, *received_ms, read_again)
                    .await
                {
                    Ok(true) => {
                        read.insert(*host_id);
                    }
                    Ok(false) => {}
                    // Stored all the same: the host is read again with its next report.
                    Err(e) => {
                        tracing::warn!(host_id = host_id.0, error = %e, "a stored report could not be analysed");
                    }
                }
            }
            _ => refunds.push((report.host.name.clone(), *new_guests)),
        }
        answers.push((reply, outcome.map_err(AppError::from)));
    }
    let reused_spare = held_back.reused_spare();
    drop(held_back);
    for (reply, answer) in answers {
        let _ = reply.send(answer);
    }
    // What the writer's time went to, for whoever wonders why reports wait (`TICKSCOPE_LOG=
    // tickscope_server::intake=debug`).
    tracing::debug!(
        reports = items.len(),
        guests = items.iter().map(|(r, ..)| r.guests.len()).sum::<usize>(),
        stored_ms = stored_in.as_millis() as u64,
        applied_ms = (started.elapsed() - stored_in).as_millis() as u64,
        reused_spare,
        "a batch of reports written"
    );
    refunds
}

async fn write_facts(db: Db, fleet: LiveFleet, job: Box<FactsJob>) {
    let presence = Presence {
        active_since_ms: job.received_ms - ACTIVE_WITHIN_MS,
        gone_after_missed_reports: GONE_AFTER_MISSED_REPORTS,
    };
    let forms = uuid_forms(&job.uuid);
    let decide = |token: &TokenBinding, candidates: &[Candidate], held: bool| {
        binding::decide(token, &forms, candidates, held, presence)
    };
    let stored = db
        .record_guest_facts(job.token_id, &job.uuid, &job.facts, job.received_ms, decide)
        .await
        .map_err(AppError::from);
    let delivered = match stored {
        Ok(Ok(delivered)) => delivered,
        Ok(Err(refusal)) => {
            let answer = refused(&job, refusal);
            let _ = job.reply.send(Err(answer));
            return;
        }
        Err(e) => {
            let _ = job.reply.send(Err(e));
            return;
        }
    };
    if let Some(from) = delivered.moved_from {
        tracing::info!(
            token_id = job.token_id.0,
            uuid = ?job.uuid,
            from_guest = from.0,
            to_guest = delivered.guest_id.0,
            "a guest token follows its VM to another host: the old host stopped reporting it"
        );
    }
    if let Err(e) = fleet
        .apply_facts(
            delivered.host_id,
            delivered.guest_id,
            &delivered.stored,
            job.received_ms,
        )
        .await
    {
        tracing::warn!(guest_id = delivered.guest_id.0, error = %e, "stored facts could not be analysed");
    }
    let _ = job.reply.send(Ok(delivered.guest_id));
}

/// What a guest token is told when its facts go nowhere. Unknown, held and ambiguous UUIDs get
/// the same answer; an ambiguous one is named to the admin in the log.
fn refused(job: &FactsJob, refusal: Refusal) -> AppError {
    match refusal {
        Refusal::OtherUuid(bound) => AppError::Forbidden(format!(
            "this guest token delivers facts for the VM with UUID {bound}, not {}; give each \
             guest its own token",
            job.uuid
        )),
        Refusal::Ambiguous(hosts) => {
            tracing::warn!(
                token_id = job.token_id.0,
                uuid = ?job.uuid,
                hosts = ?hosts,
                "guest facts refused: several hosts report a VM with this UUID; pin the token to \
                 the right one (tickscope-server token bind)"
            );
            unavailable(&job.uuid)
        }
        Refusal::Unavailable => unavailable(&job.uuid),
    }
}

fn unavailable(uuid: &str) -> AppError {
    AppError::NotFound(format!(
        "no VM with UUID {uuid} (in either byte order) that this token may deliver for is \
         reported by a host agent now; its host's agent may not have reported it yet"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACE: Pace = Pace {
        gather: GATHER_ELSEWHERE,
        every: std::time::Duration::from_secs(20),
        most_hosts: MOST_HOSTS_A_READ,
    };

    fn intake() -> (Intake, mpsc::Receiver<Job>) {
        let (jobs, queue) = mpsc::channel(16);
        let intake = Intake {
            jobs,
            elsewhere: Arc::new(Mutex::new(Elsewhere::new(PACE))),
        };
        (intake, queue)
    }

    /// The queue's jobs so far: how many are reads of what other servers stored.
    fn reads_queued(queue: &mut mpsc::Receiver<Job>) -> usize {
        std::iter::from_fn(|| queue.try_recv().ok())
            .filter(|job| matches!(job, Job::Reload))
            .count()
    }

    /// Takes a read as the writer does.
    fn take(intake: &Intake) -> Taken {
        take_elsewhere(
            &intake.elsewhere,
            &intake.jobs.downgrade(),
            Elsewhere::take_due,
        )
    }

    fn hosts(ids: &[i64]) -> Taken {
        Taken::Hosts(ids.iter().copied().map(HostId).collect())
    }

    #[tokio::test(start_paused = true)]
    async fn what_others_announce_is_gathered_and_a_host_read_at_most_every_so_often() {
        let (intake, mut queue) = intake();
        let step = GATHER_ELSEWHERE / 5;
        intake.stored_elsewhere(Some(&[HostId(1)]));
        tokio::time::sleep(step).await;
        intake.stored_elsewhere(Some(&[HostId(2), HostId(1)]));
        tokio::time::sleep(step * 3).await;
        intake.stored_elsewhere(Some(&[HostId(3)]));
        assert_eq!(
            reads_queued(&mut queue),
            0,
            "read before the gathering time"
        );
        tokio::time::sleep(step * 2).await;
        assert_eq!(reads_queued(&mut queue), 1);
        assert_eq!(take(&intake), hosts(&[1, 2, 3]));

        // Host 1's next report: read 20 s after its last read, not before.
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        intake.stored_elsewhere(Some(&[HostId(1)]));
        tokio::time::sleep(std::time::Duration::from_secs(9)).await;
        assert_eq!(
            reads_queued(&mut queue),
            0,
            "read before its least interval"
        );
        tokio::time::sleep(std::time::Duration::from_secs(1) + step).await;
        assert_eq!(reads_queued(&mut queue), 1);
        assert_eq!(take(&intake), hosts(&[1]));

        intake.stored_elsewhere(None);
        tokio::time::sleep(GATHER_ELSEWHERE + step).await;
        assert_eq!(reads_queued(&mut queue), 1);
        assert_eq!(take(&intake), Taken::Everything);
        // Nothing more was announced: nothing more is read.
        tokio::time::sleep(PACE.every * 2).await;
        assert_eq!(reads_queued(&mut queue), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_up_set_does_not_keep_a_stopping_writer_waiting() {
        let (intake, mut queue) = intake();
        intake.stored_elsewhere(Some(&[HostId(1)]));
        drop(intake);
        let started = tokio::time::Instant::now();
        assert!(queue.recv().await.is_none(), "the queue stayed open");
        assert_eq!(started.elapsed(), std::time::Duration::ZERO);
    }
}
