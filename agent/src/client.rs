//! Sending reports to the server, with a bounded in-memory backlog.
//!
//! A report that could not be delivered (server down, timeout, 5xx, 408, 429) is kept and sent
//! again, oldest first, before the next one; the server stores each (agent, run, seq) once, so a
//! resend is harmless. A report the server refuses for what it is (any other 4xx) is dropped with
//! the server's reason, because sending it again cannot succeed.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

use crate::error::Error;
use crate::wire::{FactsSubmission, GUEST_FACTS_PATH, GuestFacts, REPORTS_PATH, Report};

/// At a 10 s interval, an hour of reports.
const MAX_BACKLOG: usize = 360;

pub struct Client {
    agent: ureq::Agent,
    /// The server's base URL, without a trailing slash.
    server: String,
    authorization: String,
    backlog: VecDeque<Report>,
    dropped: u64,
}

/// What became of one attempt to deliver the backlog.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Delivery {
    pub sent: usize,
    pub pending: usize,
    pub rejected: Vec<String>,
    pub error: Option<String>,
}

impl Client {
    pub fn new(server: &str, token: &str) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .http_status_as_error(false)
            .user_agent(concat!("tickscope-agent/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Client {
            agent,
            server: server.trim_end_matches('/').to_string(),
            authorization: format!("Bearer {token}"),
            backlog: VecDeque::new(),
            dropped: 0,
        }
    }

    /// Reports lost because the backlog was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Queues a report and sends everything queued, oldest first, until one fails.
    pub fn send(&mut self, report: Report) -> Delivery {
        if self.backlog.len() == MAX_BACKLOG {
            self.backlog.pop_front();
            self.dropped += 1;
        }
        self.backlog.push_back(report);
        let mut delivery = Delivery::default();
        while let Some(report) = self.backlog.front() {
            match self.post(REPORTS_PATH, report) {
                Ok(()) => delivery.sent += 1,
                Err(Error::Rejected { status, message }) => {
                    delivery.rejected.push(format!(
                        "report {} refused ({status}): {message}",
                        report.seq
                    ));
                }
                Err(e) => {
                    delivery.error = Some(e.to_string());
                    break;
                }
            }
            self.backlog.pop_front();
        }
        delivery.pending = self.backlog.len();
        delivery
    }

    /// Sends a guest probe's facts (with a guest token); not queued, the next ones will follow.
    pub fn send_facts(&self, facts: GuestFacts) -> Result<(), Error> {
        self.post(GUEST_FACTS_PATH, &FactsSubmission { facts })
    }

    fn post(&self, path: &str, body: &impl Serialize) -> Result<(), Error> {
        let url = format!("{}{path}", self.server);
        let response = self
            .agent
            .post(&url)
            .header("Authorization", &self.authorization)
            .send_json(body)
            .map_err(|e| Error::Unreachable(format!("{url}: {e}")))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(());
        }
        let message = response
            .into_body()
            .read_to_string()
            .unwrap_or_default()
            .chars()
            .take(500)
            .collect();
        if matches!(status, 408 | 429) || status >= 500 {
            Err(Error::Unavailable { status, message })
        } else {
            Err(Error::Rejected { status, message })
        }
    }
}
