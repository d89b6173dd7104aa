//! Turning a measured interval into the numbered report the server receives.

use crate::sampler::Measured;
use crate::wire::{AgentInfo, HostInfo, Interval, Report};

/// Numbers reports within one agent run.
pub struct Reporter {
    agent: AgentInfo,
    next_seq: u64,
}

impl Reporter {
    pub fn new(agent: AgentInfo) -> Self {
        Reporter { agent, next_seq: 0 }
    }

    pub fn report(&mut self, mut host: HostInfo, measured: Measured) -> Report {
        host.blind_spots = measured.blind_spots;
        let seq = self.next_seq;
        self.next_seq += 1;
        Report {
            agent: self.agent.clone(),
            seq,
            host,
            interval: Interval {
                start_ms: measured.start_ms,
                end_ms: measured.end_ms,
                length_ns: u64::try_from(measured.length.as_nanos()).unwrap_or(u64::MAX),
            },
            guests: measured.guests,
            dropped_reports: 0,
        }
    }
}
