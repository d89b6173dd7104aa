//! What one sender may spend: the budgets that keep any one credential (an agent token, a guest
//! token, a viewer token, a session, or one client address for requests without a credential)
//! and any one input from costing everyone else. Each has a default here, a setting of
//! `tickscope-server serve` (these are its flags), a clear answer when it is spent (429 with
//! `Retry-After` for a credential's own budget, 422 for an input over its limit) and a counter
//! in `/metrics`; docs/security.md lists them with what an attacker still gets.

/// The kinds of credential a request spends for, as `/metrics` and the log name them: tokens by
/// their role, dashboard sessions, and client addresses for requests without a credential.
pub const CREDENTIAL_KINDS: &[&str] = &["agent", "guest", "viewer", "session", "address"];

const DEFAULT_REQUESTS_PER_CREDENTIAL: usize = 8;
const DEFAULT_REQUESTS_PER_ADDRESS: usize = 8;
const DEFAULT_STREAMS_PER_CREDENTIAL: usize = 2;
const DEFAULT_BODY_BYTES_PER_CREDENTIAL: usize = 32 * 1024 * 1024;
const DEFAULT_CONNECTIONS_PER_ADDRESS: usize = 256;
const DEFAULT_NEW_CONNECTIONS_PER_ADDRESS_PER_SECOND: u32 = 100;
const DEFAULT_GUESTS_PER_REPORT: usize = 10_000;
const DEFAULT_GUESTS_PER_HOST: usize = 10_000;
const DEFAULT_NEW_GUESTS_PER_HOST_PER_MINUTE: u32 = 120;
const DEFAULT_GUEST_SAMPLES_PER_TOKEN_PER_SECOND: u32 = 2_000;
const DEFAULT_FACTS_PER_GUEST_TOKEN_PER_MINUTE: u32 = 12;
const DEFAULT_REPORT_KIB_PER_TOKEN_PER_SECOND: u32 = 4096;
const DEFAULT_WARNINGS_PER_CREDENTIAL_PER_MINUTE: u32 = 10;

/// The budgets, as the server was started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct Budgets {
    /// Requests one credential (a token or a dashboard session) may have in flight at once;
    /// more are answered 429.
    #[arg(
        long = "max-requests-per-credential",
        env = "TICKSCOPE_MAX_REQUESTS_PER_CREDENTIAL",
        default_value_t = DEFAULT_REQUESTS_PER_CREDENTIAL
    )]
    pub requests_per_credential: usize,
    /// Requests without a credential (logins, the login page) one client address may have in
    /// flight at once.
    #[arg(
        long = "max-requests-per-address",
        env = "TICKSCOPE_MAX_REQUESTS_PER_ADDRESS",
        default_value_t = DEFAULT_REQUESTS_PER_ADDRESS
    )]
    pub requests_per_address: usize,
    /// Streamed answers (the whole guest list, CSV exports) one credential may read at once.
    #[arg(
        long = "max-streams-per-credential",
        env = "TICKSCOPE_MAX_STREAMS_PER_CREDENTIAL",
        default_value_t = DEFAULT_STREAMS_PER_CREDENTIAL
    )]
    pub streams_per_credential: usize,
    /// Request body bytes one credential's requests may have arrived and not yet answered: a
    /// body holds what has arrived, growing up to its role's limit, never the limit up front.
    #[arg(
        long = "max-body-bytes-per-credential",
        env = "TICKSCOPE_MAX_BODY_BYTES_PER_CREDENTIAL",
        default_value_t = DEFAULT_BODY_BYTES_PER_CREDENTIAL
    )]
    pub body_bytes_per_credential: usize,
    /// Connections one client address may have open at once; more are closed at once.
    #[arg(
        long = "max-connections-per-address",
        env = "TICKSCOPE_MAX_CONNECTIONS_PER_ADDRESS",
        default_value_t = DEFAULT_CONNECTIONS_PER_ADDRESS
    )]
    pub connections_per_address: usize,
    /// Connections one client address may open per second, in bursts of twice that; more are
    /// closed at once, before a byte is read (a client that reconnects in a loop costs an accept
    /// each, not a request each).
    #[arg(
        long = "max-new-connections-per-address",
        env = "TICKSCOPE_MAX_NEW_CONNECTIONS_PER_ADDRESS",
        default_value_t = DEFAULT_NEW_CONNECTIONS_PER_ADDRESS_PER_SECOND
    )]
    pub new_connections_per_address_per_second: u32,
    /// Guests one report may hold (422 beyond).
    #[arg(
        long = "max-guests-per-report",
        env = "TICKSCOPE_MAX_GUESTS_PER_REPORT",
        default_value_t = DEFAULT_GUESTS_PER_REPORT
    )]
    pub guests_per_report: usize,
    /// Guests one host may have in the live fleet at once (422 beyond).
    #[arg(
        long = "max-guests-per-host",
        env = "TICKSCOPE_MAX_GUESTS_PER_HOST",
        default_value_t = DEFAULT_GUESTS_PER_HOST
    )]
    pub guests_per_host: usize,
    /// Guests a host may bring per minute that the fleet does not hold (never seen, or gone and
    /// back), after a first burst of --max-guests-per-host (429 beyond).
    #[arg(
        long = "new-guests-per-host-per-minute",
        env = "TICKSCOPE_NEW_GUESTS_PER_HOST_PER_MINUTE",
        default_value_t = DEFAULT_NEW_GUESTS_PER_HOST_PER_MINUTE
    )]
    pub new_guests_per_host_per_minute: u32,
    /// Guest samples (a guest in a report) one agent token may send per second, sustained; twice
    /// --max-guests-per-report at once (429 beyond).
    #[arg(
        long = "ingest-guest-samples-rate",
        env = "TICKSCOPE_INGEST_GUEST_SAMPLES_RATE",
        default_value_t = DEFAULT_GUEST_SAMPLES_PER_TOKEN_PER_SECOND
    )]
    pub guest_samples_per_token_per_second: u32,
    /// KiB of reports one agent token may send per second, sustained; two of the largest
    /// reports at once (429 beyond, before the report is read as JSON: a report is parsed only
    /// within its token's budget).
    #[arg(
        long = "ingest-kib-rate",
        env = "TICKSCOPE_INGEST_KIB_RATE",
        default_value_t = DEFAULT_REPORT_KIB_PER_TOKEN_PER_SECOND
    )]
    pub report_kib_per_token_per_second: u32,
    /// Facts deliveries one guest token may make per minute (the probe delivers once a minute
    /// by default; the rest is room for retries; 429 beyond).
    #[arg(
        long = "facts-per-guest-token-per-minute",
        env = "TICKSCOPE_FACTS_PER_GUEST_TOKEN_PER_MINUTE",
        default_value_t = DEFAULT_FACTS_PER_GUEST_TOKEN_PER_MINUTE
    )]
    pub facts_per_guest_token_per_minute: u32,
    /// Warnings one credential's requests may write to the log per minute; the rest are counted
    /// and said in its next line.
    #[arg(
        long = "log-warnings-per-credential-per-minute",
        env = "TICKSCOPE_LOG_WARNINGS_PER_CREDENTIAL_PER_MINUTE",
        default_value_t = DEFAULT_WARNINGS_PER_CREDENTIAL_PER_MINUTE
    )]
    pub warnings_per_credential_per_minute: u32,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            requests_per_credential: DEFAULT_REQUESTS_PER_CREDENTIAL,
            requests_per_address: DEFAULT_REQUESTS_PER_ADDRESS,
            streams_per_credential: DEFAULT_STREAMS_PER_CREDENTIAL,
            body_bytes_per_credential: DEFAULT_BODY_BYTES_PER_CREDENTIAL,
            connections_per_address: DEFAULT_CONNECTIONS_PER_ADDRESS,
            new_connections_per_address_per_second: DEFAULT_NEW_CONNECTIONS_PER_ADDRESS_PER_SECOND,
            guests_per_report: DEFAULT_GUESTS_PER_REPORT,
            guests_per_host: DEFAULT_GUESTS_PER_HOST,
            new_guests_per_host_per_minute: DEFAULT_NEW_GUESTS_PER_HOST_PER_MINUTE,
            guest_samples_per_token_per_second: DEFAULT_GUEST_SAMPLES_PER_TOKEN_PER_SECOND,
            facts_per_guest_token_per_minute: DEFAULT_FACTS_PER_GUEST_TOKEN_PER_MINUTE,
            report_kib_per_token_per_second: DEFAULT_REPORT_KIB_PER_TOKEN_PER_SECOND,
            warnings_per_credential_per_minute: DEFAULT_WARNINGS_PER_CREDENTIAL_PER_MINUTE,
        }
    }
}

impl Budgets {
    /// Whether every budget lets something through (a budget of 0 would refuse everything).
    pub fn check(&self) -> Result<(), String> {
        let counts = [
            (
                "--max-requests-per-credential",
                self.requests_per_credential,
            ),
            ("--max-requests-per-address", self.requests_per_address),
            ("--max-streams-per-credential", self.streams_per_credential),
            (
                "--max-body-bytes-per-credential",
                self.body_bytes_per_credential,
            ),
            (
                "--max-connections-per-address",
                self.connections_per_address,
            ),
            ("--max-guests-per-report", self.guests_per_report),
            ("--max-guests-per-host", self.guests_per_host),
            (
                "--new-guests-per-host-per-minute",
                self.new_guests_per_host_per_minute as usize,
            ),
            (
                "--ingest-guest-samples-rate",
                self.guest_samples_per_token_per_second as usize,
            ),
            (
                "--facts-per-guest-token-per-minute",
                self.facts_per_guest_token_per_minute as usize,
            ),
            (
                "--ingest-kib-rate",
                self.report_kib_per_token_per_second as usize,
            ),
        ];
        match counts.iter().find(|(_, n)| *n == 0) {
            Some((flag, _)) => Err(format!("{flag} must be at least 1")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        budgets: Budgets,
    }

    #[test]
    fn the_defaults_are_the_flags_defaults() {
        let b = Budgets::default();
        let flags = <Flags as clap::Parser>::parse_from(["tickscope-server"]).budgets;
        assert_eq!(b, flags);
        assert_eq!(b.body_bytes_per_credential, 32 << 20);
        assert_eq!(b.check(), Ok(()));
        let none = Budgets {
            streams_per_credential: 0,
            ..b
        };
        assert!(
            none.check()
                .unwrap_err()
                .contains("--max-streams-per-credential")
        );
    }
}
