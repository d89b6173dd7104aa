//! How many requests of each kind are served at once, how long a client may take, and the
//! most a request's body may hold by who sends it.

use std::time::Duration;

/// How many requests of each kind are served at once, and how long a client may take.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionLimits {
    /// Requests with an agent's or a guest's token, served at once: reports and facts, which
    /// wait for the one writer.
    pub sender_slots: usize,
    /// Requests with a dashboard session or a viewer's token, served at once: pages, the API's
    /// reads, an admin's changes. Slots of their own, so that a fleet reporting faster than
    /// the writer stores keeps no one waiting for the dashboard (with one pool, pages waited
    /// behind reports: docs/performance.md, issue 28, ninth part).
    pub user_slots: usize,
    /// Requests without a credential (the login page, logins, the stylesheet), served at once.
    /// Each login hashes a password with argon2 (tens of milliseconds of CPU and 19 MiB), so a
    /// few suffice.
    pub anonymous_slots: usize,
    /// A request waits this long for a slot before it is answered 503.
    pub queue_timeout: Duration,
    /// A request's whole body must arrive within this long, or it is answered 408.
    pub body_timeout: Duration,
    /// An answer must be read to its end within this long (a streamed export of a large fleet
    /// included), or it is cut off: its slot is not held for ever by a client reading slowly.
    pub answer_timeout: Duration,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        AdmissionLimits {
            sender_slots: 64,
            user_slots: 32,
            anonymous_slots: 8,
            queue_timeout: Duration::from_secs(1),
            body_timeout: Duration::from_secs(20),
            answer_timeout: Duration::from_secs(600),
        }
    }
}

/// How long the server may take over one request once its body is read (the options'
/// `request_timeout`), before it is answered 408: a database that is stuck.
#[derive(Debug, Clone, Copy)]
pub struct RequestTimeout(pub Duration);

/// The largest body an agent token may send: a report of 10,000 guests is about 3 MB.
pub const MAX_AGENT_BODY_BYTES: usize = 16 * 1024 * 1024;
/// The largest body any other token may send: a guest's facts are a few KiB (and guest tokens
/// live inside guests, which are not to be trusted with the server's memory).
pub const MAX_OTHER_TOKEN_BODY_BYTES: usize = 256 * 1024;
/// The largest body of a request without a token: the dashboard's forms are a few hundred
/// bytes. With the connection cap this bounds the memory slow clients can make the server hold.
pub const MAX_FORM_BODY_BYTES: usize = 64 * 1024;
