//! What each credential has in use at this moment: requests, streamed answers and request body
//! bytes, counted while they last and given back when they end (a [`Held`] dropped), so that one
//! credential's total is bounded whatever it sends ([`crate::budgets::Budgets`]).
//!
//! A credential with nothing in use has no entry: the map holds at most as many entries as there
//! are requests in flight, which the connection caps bound.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::domain::{TokenId, TokenRole};

/// Who a request spends for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Credential {
    Token {
        id: TokenId,
        role: TokenRole,
    },
    /// A dashboard session, by its id.
    Session(i128),
    /// A request without a (valid) credential, by the client's address.
    Address(IpAddr),
}

impl Credential {
    /// Its kind, as `/metrics` and the log name it: `agent`, `guest`, `viewer`, `session` or
    /// `address`.
    pub fn kind(&self) -> &'static str {
        match self {
            Credential::Token { role, .. } => role.as_str(),
            Credential::Session(_) => "session",
            Credential::Address(_) => "address",
        }
    }
}

/// What one credential may have in use at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub requests: usize,
    pub streams: usize,
    pub body_bytes: usize,
}

/// Which budget a credential has spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    Requests(usize),
    Streams(usize),
    BodyBytes(usize),
}

impl Spent {
    /// The budget's name, as `/metrics` counts refusals.
    pub fn budget(&self) -> &'static str {
        match self {
            Spent::Requests(_) => "requests",
            Spent::Streams(_) => "streams",
            Spent::BodyBytes(_) => "body_bytes",
        }
    }

    /// What the client is told, with the limit and the setting that sets it.
    pub fn message(&self) -> String {
        match self {
            Spent::Requests(n) => format!(
                "this credential has {n} requests in flight already, the most it may \
                 (serve --max-requests-per-credential, or --max-requests-per-address without \
                 one); retry once one is answered"
            ),
            Spent::Streams(n) => format!(
                "this credential reads {n} streamed answers already, the most it may at once \
                 (serve --max-streams-per-credential); finish one first, or ask for a page \
                 (limit=)"
            ),
            Spent::BodyBytes(n) => format!(
                "this credential's requests have {n} bytes of body in flight, the most they may \
                 (serve --max-body-bytes-per-credential); retry once one is answered"
            ),
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct InUse {
    requests: usize,
    streams: usize,
    body_bytes: usize,
}

impl InUse {
    fn is_empty(&self) -> bool {
        self.requests == 0 && self.streams == 0 && self.body_bytes == 0
    }
}

/// Every credential's use.
#[derive(Debug, Default)]
pub struct Spending {
    in_use: Mutex<HashMap<Credential, InUse>>,
}

impl Spending {
    /// One more request of `credential`, if it has fewer than its limit in flight.
    pub fn request(
        self: &Arc<Self>,
        credential: Credential,
        limits: Limits,
    ) -> Result<Held, Spent> {
        let mut in_use = self.lock();
        let used = in_use.entry(credential).or_default();
        if used.requests >= limits.requests {
            let n = used.requests;
            if used.is_empty() {
                in_use.remove(&credential);
            }
            return Err(Spent::Requests(n));
        }
        used.requests += 1;
        Ok(Held {
            spending: self.clone(),
            credential,
            limits,
            streams: 0,
            body_bytes: 0,
        })
    }

    /// Credentials with something in use, for the tests that they are given back.
    pub fn credentials_in_use(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Credential, InUse>> {
        self.in_use.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One request's share of its credential's budget: its request, and the streams and body bytes
/// it took since; all given back when it is dropped (when the answer's last byte went, or the
/// request was refused).
#[derive(Debug)]
pub struct Held {
    spending: Arc<Spending>,
    credential: Credential,
    limits: Limits,
    streams: usize,
    body_bytes: usize,
}

impl Held {
    pub fn credential(&self) -> Credential {
        self.credential
    }

    /// `bytes` more of the request's body, if the credential's bodies stay within its limit.
    pub fn body_bytes(&mut self, bytes: usize) -> Result<(), Spent> {
        let mut in_use = self.spending.lock();
        let used = in_use.entry(self.credential).or_default();
        if used.body_bytes + bytes > self.limits.body_bytes {
            return Err(Spent::BodyBytes(used.body_bytes));
        }
        used.body_bytes += bytes;
        self.body_bytes += bytes;
        Ok(())
    }

    /// One streamed answer, if the credential reads fewer than its limit.
    pub fn stream(&mut self) -> Result<(), Spent> {
        let mut in_use = self.spending.lock();
        let used = in_use.entry(self.credential).or_default();
        if used.streams >= self.limits.streams {
            return Err(Spent::Streams(used.streams));
        }
        used.streams += 1;
        self.streams += 1;
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut in_use = self.spending.lock();
        if let Some(used) = in_use.get_mut(&self.credential) {
            used.requests = used.requests.saturating_sub(1);
            used.streams = used.streams.saturating_sub(self.streams);
            used.body_bytes = used.body_bytes.saturating_sub(self.body_bytes);
            if used.is_empty() {
                in_use.remove(&self.credential);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        requests: 2,
        streams: 1,
        body_bytes: 100,
    };

    fn token(id: i64) -> Credential {
        Credential::Token {
            id: TokenId(id),
            role: TokenRole::Agent,
        }
    }

    #[test]
    fn a_credential_holds_at_most_its_limits_and_gets_them_back() {
        let spending = Arc::new(Spending::default());
        let mut first = spending.request(token(1), LIMITS).unwrap();
        let mut second = spending.request(token(1), LIMITS).unwrap();
        assert_eq!(
            spending.request(token(1), LIMITS).unwrap_err(),
            Spent::Requests(2)
        );
        // Another credential is not affected.
        let other = spending.request(token(2), LIMITS).unwrap();
        assert_eq!(first.body_bytes(60), Ok(()));
        assert_eq!(second.body_bytes(50), Err(Spent::BodyBytes(60)));
        assert_eq!(second.body_bytes(40), Ok(()));
        assert_eq!(first.stream(), Ok(()));
        assert_eq!(second.stream(), Err(Spent::Streams(1)));
        drop(first);
        // The first request's stream and bytes are given back with it.
        assert_eq!(second.stream(), Ok(()));
        assert_eq!(second.body_bytes(60), Ok(()));
        let third = spending.request(token(1), LIMITS).unwrap();
        drop((second, third, other));
        assert_eq!(
            spending.credentials_in_use(),
            0,
            "nothing left once all ended"
        );
    }
}
