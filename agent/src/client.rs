//! Sending reports to the server, through the on-disk spool when it is needed.
//!
//! While nothing waits, a new report goes straight to the server and touches no disk (the agent
//! must cost its host next to nothing). A report the server does not take (unreachable, slow, 5xx,
//! 408, 429) is written to the [`Spool`], and so is every report made while others wait; the
//! spool is sent oldest first, and a report leaves it once the server acknowledged it (2xx).
//! After a failure, sending waits a delay that doubles with each failure (with jitter, and never
//! shorter than the server's `Retry-After`); the server stores each (agent, run, seq) once, so a
//! resend is harmless. A report the server refuses for what it is (any other 4xx) is moved aside
//! with the server's reason, because sending it again cannot succeed.

use std::time::{Duration, Instant};

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, parse_pem};
use ureq::unversioned::transport::DefaultConnector;

use crate::error::Error;
use crate::resolver::KeptResolver;
use crate::spool::Spool;
use crate::wire::{FactsSubmission, GUEST_FACTS_PATH, GuestFacts, REPORTS_PATH, Report};

/// Most of a 2xx answer's body read (to reach its end, so that the connection is kept).
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// Sends to one server over one kept-alive connection: a report costs no connection set-up (no
/// TCP or TLS handshake, no lookup of the server's name), only its own writes and the wait for
/// the answer.
pub struct Client {
    agent: ureq::Agent,
    resolver: KeptResolver,
    /// The server's base URL, without a trailing slash.
    server: String,
    authorization: String,
}

/// What became of one attempt to deliver the spool.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Delivery {
    pub sent: usize,
    /// Reports still in the spool.
    pub pending: usize,
    pub rejected: Vec<String>,
    pub error: Option<String>,
    /// When sending is tried again, after an error.
    pub retry_in: Option<Duration>,
}

/// Sends the spool to the server, backing off while it fails.
pub struct Sender {
    client: Client,
    spool: Spool,
    /// The first retry waits this long; each next one twice as long, up to `max_delay`.
    base_delay: Duration,
    max_delay: Duration,
    failures: u32,
    next_attempt: Option<Instant>,
}

impl Sender {
    pub fn new(client: Client, spool: Spool, base_delay: Duration) -> Sender {
        Sender {
            client,
            spool,
            base_delay,
            max_delay: Duration::from_secs(300),
            failures: 0,
            next_attempt: None,
        }
    }

    pub fn spool(&self) -> &Spool {
        &self.spool
    }

    /// Numbers a new report from the spool (its run and next sequence number, and the reports
    /// the spool dropped so far) and sends it: straight to the server when nothing waits, else
    /// behind what waits.
    pub fn submit(&mut self, mut report: Report, now: Instant) -> std::io::Result<Delivery> {
        let seq = self.spool.next_seq()?;
        report.seq = seq;
        report.agent.run_id = self.spool.state().run_id.clone();
        report.dropped_reports = self.spool.state().dropped;
        let json = serde_json::to_vec(&report).expect("a report serialises");
        let backing_off = self.next_attempt.is_some_and(|at| at > now);
        if backing_off || !self.spool.is_empty()? {
            self.spool.push(seq, &json)?;
            return Ok(self.deliver(now));
        }
        let mut delivery = Delivery::default();
        match self.client.post(REPORTS_PATH, json.clone()) {
            Ok(()) => {
                delivery.sent = 1;
                self.failures = 0;
                self.next_attempt = None;
            }
            Err(Error::Rejected { status, message }) => {
                let aside = self.spool.reject_unspooled(seq, &json)?;
                delivery.rejected.push(format!(
                    "report {seq} refused ({status}): {message}; kept in {}",
                    aside.display()
                ));
            }
            Err(e) => {
                self.spool.push(seq, &json)?;
                self.failed(e, now, &mut delivery);
                delivery.pending = 1;
            }
        }
        Ok(delivery)
    }

    /// Notes a failed attempt and when to try again.
    fn failed(&mut self, e: Error, now: Instant, delivery: &mut Delivery) {
        self.failures += 1;
        let retry_after = match &e {
            Error::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        };
        let delay = retry_delay(self.failures, self.base_delay, self.max_delay, jitter())
            .max(retry_after.unwrap_or_default());
        // From when the failure came back, not from when sending began: a server that asked
        // for a second gets a second.
        self.next_attempt = Some(now.max(Instant::now()) + delay);
        delivery.retry_in = Some(delay);
        delivery.error = Some(e.to_string());
    }

    /// Sends what the spool holds, oldest first, unless an earlier failure asks to wait.
    pub fn deliver(&mut self, now: Instant) -> Delivery {
        let mut delivery = Delivery::default();
        if let Some(at) = self.next_attempt.filter(|at| *at > now) {
            delivery.retry_in = Some(at - now);
            delivery.pending = self.spool.pending().map_or(0, |p| p.len());
            return delivery;
        }
        let pending = match self.spool.pending() {
            Ok(pending) => pending,
            Err(e) => {
                delivery.error = Some(e.to_string());
                return delivery;
            }
        };
        let total = pending.len();
        for report in pending {
            let body = match std::fs::read(&report.path) {
                Ok(body) => body,
                Err(e) => {
                    delivery.error = Some(format!("cannot read {}: {e}", report.path.display()));
                    break;
                }
            };
            let outcome = self.client.post(REPORTS_PATH, body);
            let done = match outcome {
                Ok(()) => {
                    delivery.sent += 1;
                    self.spool.acknowledged(&report)
                }
                Err(Error::Rejected { status, message }) => {
                    let aside = self.spool.rejected(&report);
                    delivery.rejected.push(format!(
                        "report {} refused ({status}): {message}; kept in {}",
                        report.seq,
                        aside
                            .as_ref()
                            .map_or("the spool".into(), |p| p.display().to_string())
                    ));
                    aside.map(|_| ())
                }
                Err(e) => {
                    self.failures += 1;
                    let retry_after = match &e {
                        Error::Unavailable { retry_after, .. } => *retry_after,
                        _ => None,
                    };
                    let delay =
                        retry_delay(self.failures, self.base_delay, self.max_delay, jitter())
                            .max(retry_after.unwrap_or_default());
                    // From when the failure came back, not from when sending began: a server
                    // that asked for a second gets a second.
                    self.next_attempt = Some(now.max(Instant::now()) + delay);
                    delivery.retry_in = Some(delay);
                    delivery.error = Some(e.to_string());
                    break;
                }
            };
            if let Err(e) = done {
                delivery.error = Some(e.to_string());
                break;
            }
        }
        if delivery.error.is_none() {
            self.failures = 0;
            self.next_attempt = None;
        }
        delivery.pending = total - delivery.sent - delivery.rejected.len();
        delivery
    }
}

/// Whether a request failed because the connection was closed under it (reset, or ended before
/// an answer), as a kept-alive connection the server closed while idle does; not a refused or
/// timed-out connection, which a second try at once would not change.
fn connection_dropped(e: &ureq::Error) -> bool {
    use std::io::ErrorKind;
    matches!(e, ureq::Error::Io(io) if matches!(
        io.kind(),
        ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
            | ErrorKind::UnexpectedEof
    ))
}

/// A number in 0..1000 that differs from call to call: spreads the retries of many agents that
/// failed together. Not for secrets.
fn jitter() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_micros() % 1000)
}

/// The wait after failure number `failures` (1-based): `base` doubled per failure, at most
/// `max`, plus up to a fifth more by `jitter` (0..1000).
pub fn retry_delay(failures: u32, base: Duration, max: Duration, jitter: u32) -> Duration {
    let doubled = base.saturating_mul(1 << failures.saturating_sub(1).min(20));
    let delay = doubled.min(max);
    delay + delay / 5 * jitter.min(999) / 1000
}

impl Client {
    /// A client that trusts the public web's certificate authorities (Mozilla's roots, built
    /// in) for an `https://` server.
    pub fn new(server: &str, token: &str) -> Self {
        Self::build(server, token, RootCerts::WebPki)
    }

    /// A client that trusts only the certificate authorities in `ca_pem` (a PEM file of one or
    /// more certificates): for a server whose certificate a private CA signed.
    pub fn with_ca(server: &str, token: &str, ca_pem: &[u8]) -> Result<Self, String> {
        let certs: Vec<Certificate<'static>> = parse_pem(ca_pem)
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(cert)) => Some(cert.to_owned()),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            return Err("no PEM certificate in it".into());
        }
        Ok(Self::build(
            server,
            token,
            RootCerts::Specific(std::sync::Arc::new(certs)),
        ))
    }

    fn build(server: &str, token: &str, roots: RootCerts) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .http_status_as_error(false)
            .user_agent(concat!("tickscope-agent/", env!("CARGO_PKG_VERSION")))
            .tls_config(TlsConfig::builder().root_certs(roots).build())
            .build();
        let resolver = KeptResolver::new();
        let agent = ureq::Agent::with_parts(config, DefaultConnector::new(), resolver.clone());
        Client {
            agent,
            resolver,
            server: server.trim_end_matches('/').to_string(),
            authorization: format!("Bearer {token}"),
        }
    }

    /// One attempt at a POST.
    fn send(
        &self,
        url: &str,
        body: &[u8],
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        self.agent
            .post(url)
            .header("Authorization", &self.authorization)
            .header("Content-Type", "application/json")
            .send(body)
    }

    /// Sends a guest probe's facts (with a guest token); not queued, the next ones will follow.
    pub fn send_facts(&self, facts: GuestFacts) -> Result<(), Error> {
        let body = serde_json::to_vec(&FactsSubmission { facts }).expect("facts serialise");
        self.post(GUEST_FACTS_PATH, body)
    }

    /// POSTs a report's JSON; `Ok` on 2xx.
    pub fn post_report(&self, json: Vec<u8>) -> Result<(), Error> {
        self.post(REPORTS_PATH, json)
    }

    /// POSTs a JSON body; `Ok` on 2xx.
    ///
    /// A kept-alive connection the server closed while it was idle (its idle timeout can end
    /// just as the next interval's report goes out) fails before any answer: the request is
    /// sent once more on a new connection. The server stores a report once, so a second copy
    /// of one it did take is harmless.
    fn post(&self, path: &str, body: Vec<u8>) -> Result<(), Error> {
        let url = format!("{}{path}", self.server);
        let sent = match self.send(&url, &body) {
            Err(e) if connection_dropped(&e) => self.send(&url, &body),
            other => other,
        };
        let response = sent.map_err(|e| {
            // The server may have moved: look its name up again at the next attempt.
            self.resolver.forget();
            Error::Unreachable(format!("{url}: {e}"))
        })?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            // Read to its end, the connection goes back to the pool for the next report; an
            // answer that cannot be read only costs the connection (the report was taken).
            let _ = response
                .into_body()
                .with_config()
                .limit(MAX_ANSWER_BYTES)
                .read_to_vec();
            return Ok(());
        }
        // Only the delay-seconds form: servers behind proxies send it that way in practice.
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s.min(3600)));
        let message = response
            .into_body()
            .read_to_string()
            .unwrap_or_default()
            .chars()
            .take(500)
            .collect();
        if matches!(status, 408 | 429) || status >= 500 {
            Err(Error::Unavailable {
                status,
                message,
                retry_after,
            })
        } else {
            Err(Error::Rejected { status, message })
        }
    }
}
