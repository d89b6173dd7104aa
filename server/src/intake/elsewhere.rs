//! What other servers on the database stored and this one has not read yet, and when to read
//! it.
//!
//! Reading a host again costs this server about what applying the report there cost (the
//! host's new samples read back, its guests analysed, the kept orders updated), so it is paced
//! two ways:
//! - **Gathered:** a host announced is read [`Pace::gather`] later, with every other host
//!   announced meanwhile, in the same statements and under one copy of the kept orders' paths.
//! - **At most every [`Pace::every`]:** a host read at `t` is not due again before `t +
//!   every` (a read may take it up to `gather` early, with the others it gathered); the
//!   reports stored meanwhile are caught up in that next read, all at once. With
//!   agents reporting every 10 s and `every` at 20 s, a follower reads each of the others'
//!   hosts half as often, and its figures of them are at most `every + gather` older than the
//!   storing server's.
//!
//! A host never read (a new one, or one read longer than `every` ago) is read after `gather`
//! alone.
//!
//! - **At most [`Pace::most_hosts`] a read:** hosts read together are due together again
//!   `every` later, and gather the hosts due just after them into the same read, so that the
//!   reads grow round after round. A read takes the soonest due up to the bound; those left
//!   that are already due are read next (after the reports that came meanwhile), the others
//!   at their time.
//!
//! Time is passed in: this is bookkeeping only, and the caller sets the wake-ups it asks for
//! (see [`Elsewhere::announced`]).

use std::collections::{BTreeSet, HashMap, VecDeque};

use tokio::time::{Duration, Instant};

use crate::domain::HostId;

/// How the reads of what other servers stored are paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// How long the announcements are gathered before they are read.
    pub gather: Duration,
    /// A host is read again at most this often (zero: after every announcement).
    pub every: Duration,
    /// The most hosts a read of what is due takes.
    pub most_hosts: usize,
}

/// What a read takes.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// Nothing is due yet (a wake-up set for what was since taken, or for later).
    Nothing,
    /// These hosts, in id order.
    Hosts(Vec<HostId>),
    /// Every active guest: announcements may have been missed.
    Everything,
}

/// The announcements heard and not read yet, and the recent reads.
#[derive(Debug)]
pub struct Elsewhere {
    pace: Pace,
    /// Hosts announced and not read yet, by when they are read.
    due: BTreeSet<(Instant, HostId)>,
    due_at: HashMap<HostId, Instant>,
    /// When each host read within the last `every` was read, and the same oldest first, to
    /// forget them once `every` has passed.
    read_at: HashMap<HostId, Instant>,
    reads: VecDeque<(Instant, HostId)>,
    /// Announcements may have been missed: every active guest is read at this time.
    everything_at: Option<Instant>,
    /// The wake-ups set that have not come yet.
    wakes: BTreeSet<Instant>,
}

impl Elsewhere {
    pub fn new(pace: Pace) -> Elsewhere {
        Elsewhere {
            pace,
            due: BTreeSet::new(),
            due_at: HashMap::new(),
            read_at: HashMap::new(),
            reads: VecDeque::new(),
            everything_at: None,
            wakes: BTreeSet::new(),
        }
    }

    /// Notes that another server announced `hosts` (`None`: announcements may have been
    /// missed) at `now`. Returns when a wake-up must be set for them, unless one set comes
    /// soon enough.
    pub fn announced(&mut self, hosts: Option<&[HostId]>, now: Instant) -> Option<Instant> {
        let gathered = now + self.pace.gather;
        let soonest = match hosts {
            None => {
                let at = self.everything_at.map_or(gathered, |at| at.min(gathered));
                self.everything_at = Some(at);
                at
            }
            Some(hosts) => {
                let mut soonest: Option<Instant> = None;
                for &host_id in hosts {
                    if self.due_at.contains_key(&host_id) {
                        continue;
                    }
                    let at = match self.read_at.get(&host_id) {
                        Some(&read) => gathered.max(read + self.pace.every),
                        None => gathered,
                    };
                    self.due.insert((at, host_id));
                    self.due_at.insert(host_id, at);
                    soonest = Some(soonest.map_or(at, |s| s.min(at)));
                }
                soonest?
            }
        };
        self.wake(soonest)
    }

    /// Takes what is due at `now` (a wake-up came): the hosts to read now, or every active
    /// guest. Returns the next wake-up to set too, if one set does not come soon enough.
    pub fn take_due(&mut self, now: Instant) -> (Taken, Option<Instant>) {
        self.take(now, Some((now + self.pace.gather, self.pace.most_hosts)))
    }

    /// Takes everything announced and not read yet, due or not (this server took the lease:
    /// its alerts are evaluated on what the others stored up to now).
    pub fn take_all(&mut self, now: Instant) -> (Taken, Option<Instant>) {
        self.take(now, None)
    }

    /// Takes what is due by `through`, at most so many hosts (everything: `None`).
    fn take(
        &mut self,
        now: Instant,
        through: Option<(Instant, usize)>,
    ) -> (Taken, Option<Instant>) {
        let due = |at: Instant| through.is_none_or(|(through, _)| at <= through);
        let most = through.map_or(usize::MAX, |(_, most)| most);
        while let Some(&wake) = self.wakes.first()
            && wake <= now
        {
            self.wakes.pop_first();
        }
        while let Some(&(read, host_id)) = self.reads.front()
            && read + self.pace.every <= now
        {
            self.reads.pop_front();
            if self.read_at.get(&host_id) == Some(&read) {
                self.read_at.remove(&host_id);
            }
        }
        let taken = if self.everything_at.is_some_and(due) {
            // The whole read takes every host announced so far.
            self.everything_at = None;
            self.due.clear();
            self.due_at.clear();
            Taken::Everything
        } else {
            // Those due within the gathering time join this read rather than wake the
            // writer again for a read of their own, up to the bound: past it, what is
            // already due is read next, after the reports queued meanwhile.
            let mut hosts = Vec::new();
            while hosts.len() < most
                && let Some(&(at, host_id)) = self.due.first()
                && due(at)
            {
                self.due.pop_first();
                self.due_at.remove(&host_id);
                self.read_at.insert(host_id, now);
                self.reads.push_back((now, host_id));
                hosts.push(host_id);
            }
            hosts.sort_unstable();
            if hosts.is_empty() {
                Taken::Nothing
            } else {
                Taken::Hosts(hosts)
            }
        };
        let next = [self.due.first().map(|(at, _)| *at), self.everything_at]
            .into_iter()
            .flatten()
            .min();
        (taken, next.and_then(|at| self.wake(at)))
    }

    /// A read of `hosts` failed: they are not counted as read, so the next announcement of
    /// each is read a gathering time after it, as a host never read.
    pub fn read_failed(&mut self, hosts: &[HostId]) {
        for host_id in hosts {
            self.read_at.remove(host_id);
        }
    }

    /// `at`, unless a wake-up set comes by then.
    fn wake(&mut self, at: Instant) -> Option<Instant> {
        if self.wakes.first().is_some_and(|&set| set <= at) {
            return None;
        }
        self.wakes.insert(at);
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACE: Pace = Pace {
        gather: Duration::from_millis(250),
        every: Duration::from_secs(20),
        most_hosts: 3,
    };

    /// What happens at a time, in milliseconds from the start.
    enum Step {
        /// Hosts announced (`None`: every active guest); the wake-up asked for, if any.
        Announce(Option<&'static [u64]>, Option<u64>),
        /// A wake-up came: what is taken, and the next wake-up asked for, if any.
        Take(Taken, Option<u64>),
    }
    use Step::{Announce, Take};

    fn hosts(ids: &[u64]) -> Taken {
        Taken::Hosts(ids.iter().map(|&id| HostId(id as i64)).collect())
    }

    #[track_caller]
    fn check(pace: Pace, steps: &[(u64, Step)]) {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut elsewhere = Elsewhere::new(pace);
        for (i, (ms, step)) in steps.iter().enumerate() {
            match step {
                Announce(ids, wake) => {
                    let ids: Option<Vec<HostId>> =
                        ids.map(|ids| ids.iter().map(|&id| HostId(id as i64)).collect());
                    let asked = elsewhere.announced(ids.as_deref(), at(*ms));
                    assert_eq!(asked, wake.map(at), "step {i}: the wake-up asked for");
                }
                Take(taken, wake) => {
                    let (got, asked) = elsewhere.take_due(at(*ms));
                    assert_eq!(&got, taken, "step {i}: what is taken");
                    assert_eq!(asked, wake.map(at), "step {i}: the next wake-up");
                }
            }
        }
    }

    #[test]
    fn hosts_announced_together_are_read_after_the_gathering_time() {
        check(
            PACE,
            &[
                (0, Announce(Some(&[1]), Some(250))),
                // Already due, or due later than the wake-up set: no new one.
                (50, Announce(Some(&[2, 1]), None)),
                (200, Announce(Some(&[3]), None)),
                // Due within the gathering time: taken in the same read.
                (250, Take(hosts(&[1, 2, 3]), None)),
                (400, Announce(Some(&[4]), Some(650))),
                (500, Announce(Some(&[5]), None)),
                (650, Take(hosts(&[4, 5]), None)),
            ],
        );
    }

    #[test]
    fn a_host_read_is_read_again_at_most_every_so_often_with_all_it_stored_meanwhile() {
        check(
            PACE,
            &[
                (0, Announce(Some(&[1, 2]), Some(250))),
                (250, Take(hosts(&[1, 2]), None)),
                // Its next report, 10 s later: read 20 s after the last read.
                (10_000, Announce(Some(&[1]), Some(20_250))),
                // Another in the meantime is taken in the same read.
                (15_000, Announce(Some(&[1]), None)),
                // A host not read recently is not held back by the one that was.
                (16_000, Announce(Some(&[3]), Some(16_250))),
                (16_250, Take(hosts(&[3]), None)),
                (20_000, Announce(Some(&[2]), None)),
                (20_250, Take(hosts(&[1, 2]), None)),
                // Announced longer than `every` after its last read: only gathered.
                (45_000, Announce(Some(&[3]), Some(45_250))),
                (45_250, Take(hosts(&[3]), None)),
            ],
        );
    }

    #[test]
    fn a_read_takes_at_most_so_many_hosts_the_soonest_due_first_and_the_rest_at_once() {
        check(
            PACE,
            &[
                (0, Announce(Some(&[1, 2, 3, 4]), Some(250))),
                (100, Announce(Some(&[5]), None)),
                (250, Take(hosts(&[1, 2, 3]), Some(250))),
                // The rest of what was due: at the next wake-up, with what came due since.
                (260, Take(hosts(&[4, 5]), None)),
                // Read again together 20 s later, and still at most three a read.
                (10_000, Announce(Some(&[1, 2, 3, 4, 5]), Some(20_250))),
                (20_250, Take(hosts(&[1, 2, 3]), Some(20_260))),
                (20_260, Take(hosts(&[4, 5]), None)),
            ],
        );
    }

    #[test]
    fn a_wake_up_that_finds_nothing_due_takes_nothing() {
        check(
            PACE,
            &[
                (0, Announce(Some(&[1]), Some(250))),
                (250, Take(hosts(&[1]), None)),
                (5_000, Announce(Some(&[1]), Some(20_250))),
                // A host announced later is due sooner: a sooner wake-up.
                (6_000, Announce(Some(&[2]), Some(6_250))),
                (6_250, Take(hosts(&[2]), None)),
                (7_000, Take(Taken::Nothing, None)),
                (20_250, Take(hosts(&[1]), None)),
            ],
        );
    }

    #[test]
    fn a_read_of_everything_takes_every_host_announced() {
        check(
            PACE,
            &[
                (0, Announce(Some(&[1]), Some(250))),
                (250, Take(hosts(&[1]), None)),
                (1_000, Announce(Some(&[1]), Some(20_250))),
                (1_100, Announce(None, Some(1_350))),
                (1_200, Announce(Some(&[2]), None)),
                (1_350, Take(Taken::Everything, None)),
                (20_250, Take(Taken::Nothing, None)),
            ],
        );
    }

    #[test]
    fn taking_all_takes_what_is_not_due_yet() {
        let mut elsewhere = Elsewhere::new(PACE);
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        elsewhere.announced(Some(&[HostId(1)]), at(0));
        assert_eq!(elsewhere.take_due(at(250)), (hosts(&[1]), None));
        elsewhere.announced(Some(&[HostId(1)]), at(1_000));
        // More than a due read takes at once.
        let others: Vec<HostId> = (2..=5).map(HostId).collect();
        elsewhere.announced(Some(&others), at(1_100));
        assert_eq!(
            elsewhere.take_all(at(1_200)),
            (hosts(&[1, 2, 3, 4, 5]), None)
        );
        assert_eq!(elsewhere.take_due(at(20_250)), (Taken::Nothing, None));
        elsewhere.announced(None, at(21_000));
        assert_eq!(elsewhere.take_all(at(21_000)), (Taken::Everything, None));
        assert_eq!(elsewhere.take_all(at(21_100)), (Taken::Nothing, None));
    }

    #[test]
    fn a_host_whose_read_failed_is_read_at_its_next_announcement() {
        let mut elsewhere = Elsewhere::new(PACE);
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        elsewhere.announced(Some(&[HostId(1), HostId(2)]), at(0));
        assert_eq!(elsewhere.take_due(at(250)), (hosts(&[1, 2]), None));
        elsewhere.read_failed(&[HostId(1)]);
        assert_eq!(
            elsewhere.announced(Some(&[HostId(1)]), at(1_000)),
            Some(at(1_250))
        );
        assert_eq!(elsewhere.announced(Some(&[HostId(2)]), at(1_000)), None);
        assert_eq!(
            elsewhere.take_due(at(1_250)),
            (hosts(&[1]), Some(at(20_250)))
        );
    }

    #[test]
    fn without_a_least_interval_every_announcement_is_read_after_the_gathering_time() {
        let every_time = Pace {
            every: Duration::ZERO,
            ..PACE
        };
        check(
            every_time,
            &[
                (0, Announce(Some(&[1]), Some(250))),
                (250, Take(hosts(&[1]), None)),
                (260, Announce(Some(&[1]), Some(510))),
                (510, Take(hosts(&[1]), None)),
            ],
        );
    }
}
