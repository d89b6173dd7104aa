//! Which guest a guest token's facts go to: the decision, apart from storage (which reads what
//! it needs and calls it inside the write's transaction).
//!
//! A guest token delivers for one VM: its UUID on one host. The first delivery binds it to the
//! one guest with that UUID that a host agent reports now (on the host an admin pinned it to, if
//! one did), unless another guest token in use holds that UUID. From then on its facts go to that
//! guest, never to another host's VM with the same UUID (anyone with an agent token can report
//! any UUID). The binding follows the VM to another host only once the old host stopped
//! reporting it (a live migration), or when an admin moves it (`tickscope-server token bind`).
//! Unknown UUIDs, UUIDs another token holds and UUIDs several hosts report get the same answer,
//! so a token cannot tell them apart.

use crate::domain::GuestId;

/// What a guest token is bound to now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenBinding {
    /// The UUID it delivers for (as first sent, or as an admin pinned it).
    pub uuid: Option<String>,
    /// The host an admin pinned it to.
    pub pinned_host: Option<String>,
    /// The guest it delivers to.
    pub guest: Option<GuestId>,
}

/// A guest with the delivery's UUID (in either byte order), as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub guest: GuestId,
    pub host: String,
    pub last_seen_ms: i64,
    /// Reports its host stored since its last one.
    pub missed_reports: i64,
}

impl Candidate {
    /// Whether a host agent reports it now: reported since `active_since_ms`, and not gone from
    /// its host (`gone_after` reports without it).
    fn present(&self, active_since_ms: i64, gone_after: i64) -> bool {
        self.last_seen_ms >= active_since_ms && self.missed_reports < gone_after
    }
}

/// What the decision reads besides the token and candidates.
#[derive(Debug, Clone, Copy)]
pub struct Presence {
    pub active_since_ms: i64,
    pub gone_after_missed_reports: i64,
}

/// Where a delivery goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub guest: GuestId,
    /// The token is bound (or moved) to this guest by this delivery.
    pub binds: bool,
    /// The guest it was bound to before, when the binding followed the VM to another host.
    pub moved_from: Option<GuestId>,
}

/// Why a delivery is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The token delivers for another UUID.
    OtherUuid(String),
    /// No guest it may deliver to: the UUID is unknown, held by another token, or reported by
    /// several hosts at once (said the same way, so that a token cannot tell which).
    Unavailable,
    /// As `Unavailable` to the token; the log names the hosts for the admin.
    Ambiguous(Vec<String>),
}

/// Decides where a delivery for `uuid` (its forms, as sent and byte-swapped) with a token bound
/// as `token` goes, among `candidates`; `held_elsewhere` says whether another guest token in
/// use holds the UUID.
pub fn decide(
    token: &TokenBinding,
    uuid_forms: &[String; 2],
    candidates: &[Candidate],
    held_elsewhere: bool,
    presence: Presence,
) -> Result<Delivery, Refusal> {
    if let Some(bound) = &token.uuid
        && !uuid_forms.iter().any(|form| form == bound)
    {
        return Err(Refusal::OtherUuid(bound.clone()));
    }
    let present = |c: &&Candidate| {
        c.present(presence.active_since_ms, presence.gone_after_missed_reports)
            && token
                .pinned_host
                .as_ref()
                .is_none_or(|host| *host == c.host)
    };
    if let Some(bound) = token.guest {
        // Its own guest, while a host reports it (or while no other does: nothing else to go
        // to, and the facts are its).
        let own = candidates.iter().find(|c| c.guest == bound);
        if own.is_some_and(|c| present(&c)) {
            return Ok(Delivery {
                guest: bound,
                binds: false,
                moved_from: None,
            });
        }
        let elsewhere: Vec<&Candidate> = candidates
            .iter()
            .filter(present)
            .filter(|c| c.guest != bound)
            .collect();
        return match (elsewhere.as_slice(), own) {
            // Its host stopped reporting it, and one other host reports it: it moved there.
            ([moved], _) => Ok(Delivery {
                guest: moved.guest,
                binds: true,
                moved_from: Some(bound),
            }),
            ([], Some(_)) => Ok(Delivery {
                guest: bound,
                binds: false,
                moved_from: None,
            }),
            ([], None) => Err(Refusal::Unavailable),
            (several, _) => Err(Refusal::Ambiguous(
                several.iter().map(|c| c.host.clone()).collect(),
            )),
        };
    }
    // A first delivery: an admin's pin takes the UUID whoever held it; without one, a UUID
    // another token holds is not free.
    let pinned = token.uuid.is_some() || token.pinned_host.is_some();
    if held_elsewhere && !pinned {
        return Err(Refusal::Unavailable);
    }
    let reported: Vec<&Candidate> = candidates.iter().filter(present).collect();
    match reported.as_slice() {
        [one] => Ok(Delivery {
            guest: one.guest,
            binds: true,
            moved_from: None,
        }),
        [] => Err(Refusal::Unavailable),
        several => Err(Refusal::Ambiguous(
            several.iter().map(|c| c.host.clone()).collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;
    const PRESENCE: Presence = Presence {
        active_since_ms: NOW - 900_000,
        gone_after_missed_reports: 3,
    };

    fn forms() -> [String; 2] {
        ["u1".to_string(), "u1-swapped".to_string()]
    }

    fn on(guest: i64, host: &str, missed_reports: i64) -> Candidate {
        Candidate {
            guest: GuestId(guest),
            host: host.into(),
            last_seen_ms: NOW,
            missed_reports,
        }
    }

    fn bound(guest: Option<i64>, uuid: Option<&str>, host: Option<&str>) -> TokenBinding {
        TokenBinding {
            uuid: uuid.map(str::to_string),
            pinned_host: host.map(str::to_string),
            guest: guest.map(GuestId),
        }
    }

    fn to(guest: i64, binds: bool, moved_from: Option<i64>) -> Result<Delivery, Refusal> {
        Ok(Delivery {
            guest: GuestId(guest),
            binds,
            moved_from: moved_from.map(GuestId),
        })
    }

    #[test]
    fn a_delivery_goes_to_the_guest_its_token_is_bound_to() {
        let silent = Candidate {
            last_seen_ms: NOW - 1_000_000,
            ..on(3, "c", 0)
        };
        // (token, candidates, another token holds the UUID, where it goes)
        type Case = (
            TokenBinding,
            Vec<Candidate>,
            bool,
            Result<Delivery, Refusal>,
        );
        let cases: Vec<Case> = vec![
            // First delivery: the one guest reported, bound.
            (
                bound(None, None, None),
                vec![on(1, "a", 0)],
                false,
                to(1, true, None),
            ),
            // Unknown, held by another token, or reported by two hosts: refused alike.
            (
                bound(None, None, None),
                vec![],
                false,
                Err(Refusal::Unavailable),
            ),
            (
                bound(None, None, None),
                vec![on(1, "a", 0)],
                true,
                Err(Refusal::Unavailable),
            ),
            (
                bound(None, None, None),
                vec![on(1, "a", 0), on(2, "b", 0)],
                false,
                Err(Refusal::Ambiguous(vec!["a".into(), "b".into()])),
            ),
            // A guest gone from its host, or silent, is not reported now.
            (
                bound(None, None, None),
                vec![on(1, "a", 3), on(2, "b", 0)],
                false,
                to(2, true, None),
            ),
            (
                bound(None, None, None),
                vec![silent.clone()],
                false,
                Err(Refusal::Unavailable),
            ),
            // Pinned by an admin to a host: that host's guest, whoever held the UUID.
            (
                bound(None, Some("u1"), Some("b")),
                vec![on(1, "a", 0), on(2, "b", 0)],
                true,
                to(2, true, None),
            ),
            (
                bound(None, None, Some("c")),
                vec![on(1, "a", 0)],
                false,
                Err(Refusal::Unavailable),
            ),
            // Bound: another host reporting the same UUID changes nothing.
            (
                bound(Some(1), Some("u1"), None),
                vec![on(1, "a", 0), on(2, "b", 0)],
                false,
                to(1, false, None),
            ),
            // Its host stopped reporting it, one other host does: it moved there.
            (
                bound(Some(1), Some("u1"), None),
                vec![on(1, "a", 3), on(2, "b", 0)],
                false,
                to(2, true, Some(1)),
            ),
            // Gone from its host and reported nowhere else: still its own guest's facts.
            (
                bound(Some(1), Some("u1"), None),
                vec![on(1, "a", 5)],
                false,
                to(1, false, None),
            ),
            // Gone, and two others report it: nobody can tell which it is.
            (
                bound(Some(1), Some("u1"), None),
                vec![on(1, "a", 3), on(2, "b", 0), on(3, "c", 0)],
                false,
                Err(Refusal::Ambiguous(vec!["b".into(), "c".into()])),
            ),
            // A UUID in the other byte order is the same VM.
            (
                bound(Some(1), Some("u1-swapped"), None),
                vec![on(1, "a", 0)],
                false,
                to(1, false, None),
            ),
            // Another UUID than its own: refused, naming its own.
            (
                bound(Some(1), Some("u9"), None),
                vec![on(1, "a", 0)],
                false,
                Err(Refusal::OtherUuid("u9".into())),
            ),
        ];
        for (token, candidates, held, expected) in cases {
            assert_eq!(
                decide(&token, &forms(), &candidates, held, PRESENCE),
                expected,
                "{token:?} {candidates:?} held elsewhere: {held}"
            );
        }
    }
}
