//! The command line's definitions (clap): the subcommands, their flags, the environment
//! variables that set them, their defaults and help texts. What each subcommand does is in its
//! own module beside this one.

use std::num::NonZeroU32;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use crate::budgets::Budgets;
use crate::db::{Db, DbUrl};
use crate::http::listener::Proxies;
use crate::intake::DEFAULT_FOLLOW_EVERY_S;

#[derive(Parser)]
#[command(
    version,
    about = "tickscope server: ranks idle VMs by the host CPU their ticking kernels waste"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve the dashboard and the API.
    // Boxed: its flags are many, read once, and would make every other variant as large.
    Serve(Box<ServeArgs>),
    /// Manage dashboard users.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Copy an SQLite installation into a new PostgreSQL database, verified table by table
    /// (row counts and SHA-256 of the rows); nothing is committed unless every table matches.
    /// Stop the server first. Sessions are not copied: users log in again.
    MigrateData {
        /// The SQLite database: a path or sqlite://PATH.
        #[arg(long)]
        from: DbUrl,
        /// The PostgreSQL database, created and empty: postgres://USER:PASSWORD@HOST/DATABASE.
        #[arg(long)]
        to: DbUrl,
    },
}

/// `serve`'s flags, read into [`super::serve_settings::ServeSettings`] once, checked.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "TICKSCOPE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    #[command(flatten)]
    pub db: DbArg,
    /// Fill the database with a simulated fleet that keeps reporting, labelled as demo data
    /// on every page. Use a database of its own (the default is `./tickscope-demo.db`).
    #[arg(long)]
    pub demo: bool,
    /// Extra power a busy host core draws, in watts, to turn wasted CPU into energy.
    #[arg(long, env = "TICKSCOPE_WATTS_PER_CORE", default_value_t = 7.0)]
    pub watts_per_core: f64,
    /// Price of a kWh, to turn energy into money.
    #[arg(long, env = "TICKSCOPE_PRICE_PER_KWH", default_value_t = 0.25)]
    pub price_per_kwh: f64,
    /// Currency of --price-per-kwh.
    #[arg(long, env = "TICKSCOPE_CURRENCY", default_value = "EUR")]
    pub currency: String,
    /// Mark the session cookie Secure: set this when users reach the server over HTTPS
    /// (a TLS reverse proxy in front of it).
    #[arg(long, env = "TICKSCOPE_SECURE_COOKIES")]
    pub secure_cookies: bool,
    /// The address users reach the dashboard at, for the links in alert notifications
    /// (default: http:// and --listen).
    #[arg(long, env = "TICKSCOPE_EXTERNAL_URL")]
    pub external_url: Option<String>,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key. Without it, plain
    /// HTTP, for a TLS reverse proxy in front (docs/reverse-proxy.md).
    #[arg(long, env = "TICKSCOPE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "TICKSCOPE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// How often alert rules are evaluated, in seconds.
    #[arg(long, env = "TICKSCOPE_ALERT_INTERVAL", default_value_t = 15)]
    pub alert_interval: u64,
    /// Where alerts go besides webhooks.
    #[command(flatten)]
    pub alertmanager: AlertmanagerArgs,
    /// Reports per second one agent token may send; beyond it, 429 with Retry-After.
    #[arg(long, env = "TICKSCOPE_INGEST_RATE", default_value = "20")]
    pub ingest_rate: NonZeroU32,
    /// Reports one agent token may send at once above its rate (an agent replaying the
    /// spool it kept through an outage).
    #[arg(long, env = "TICKSCOPE_INGEST_BURST", default_value = "200")]
    pub ingest_burst: NonZeroU32,
    /// Hours raw samples are kept; older ones become five-minute rollups.
    #[arg(long, env = "TICKSCOPE_KEEP_RAW_HOURS", default_value_t = 48)]
    pub keep_raw_hours: i64,
    /// Days five-minute rollups are kept; older ones are merged into hourly ones.
    #[arg(long, env = "TICKSCOPE_KEEP_5M_DAYS", default_value_t = 14)]
    pub keep_5m_days: i64,
    /// Days hourly rollups (and the fleet's five-minute points) are kept; older ones are deleted.
    #[arg(long, env = "TICKSCOPE_KEEP_HOURLY_DAYS", default_value_t = 400)]
    pub keep_hourly_days: i64,
    /// Connections open at once; more wait in the kernel's backlog. Lowered to fit the
    /// open-files limit (LimitNOFILE=), which the server raises to its hard limit at start.
    #[arg(long, env = "TICKSCOPE_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,
    /// Seconds a client may take to send a request's headers, counted from when it connected
    /// or from its previous response (so also how long an idle connection stays open).
    #[arg(long, env = "TICKSCOPE_HEADER_TIMEOUT", default_value_t = 10)]
    pub header_timeout: u64,
    /// Seconds a client may take to send a request's whole body.
    #[arg(long, env = "TICKSCOPE_BODY_TIMEOUT", default_value_t = 20)]
    pub body_timeout: u64,
    /// Seconds writing an answer may make no progress (a client that stopped reading)
    /// before the connection is closed.
    #[arg(long, env = "TICKSCOPE_WRITE_TIMEOUT", default_value_t = 30)]
    pub write_timeout: u64,
    /// With other servers on the same PostgreSQL: seconds between two reads here of a host
    /// they store reports of, at most; what this server shows of their hosts is at most that
    /// old. 0 reads each report (each costs about what storing it cost there); up to 60.
    #[arg(long, env = "TICKSCOPE_FOLLOW_EVERY", default_value_t = DEFAULT_FOLLOW_EVERY_S)]
    pub follow_every: u64,
    /// What one credential and one input may spend (docs/security.md).
    #[command(flatten)]
    pub budgets: Budgets,
    /// Load balancers in front of the server.
    #[command(flatten)]
    pub proxies: Proxies,
}

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Pin a guest token to the VM with UUID on HOST: its facts go to that host's guest from
    /// its next delivery on (a VM moved where its token did not follow: several hosts report
    /// its UUID, or the old one still does).
    Bind {
        /// The token's id (the settings page lists it) or its name, if only one token has it.
        token: String,
        #[arg(long)]
        host: String,
        /// The VM's UUID (default: the one it delivers for now).
        #[arg(long, value_name = "UUID")]
        guest_uuid: Option<String>,
        #[command(flatten)]
        db: DbArg,
    },
    /// Create a token and print it (last line of stdout). Only its hash is stored.
    Add {
        /// What the token is for, e.g. the host it will run on.
        name: String,
        #[arg(long, value_enum)]
        role: RoleArg,
        /// The host an agent token may report for (default: the first host it reports for); for a
        /// guest token, the host its VM is on (default: the one host that reports its UUID when
        /// it first delivers).
        #[arg(long)]
        host: Option<String>,
        /// For a guest token: the UUID of the VM it delivers for (default: the first it
        /// delivers for, if no other guest token holds it). An admin's pin takes the VM even
        /// from another token.
        #[arg(long, value_name = "UUID")]
        guest_uuid: Option<String>,
        /// Make this many agent tokens at once, for hosts named `<NAME>-0001` on, each bound to
        /// its host, printed one per line (for `tickscope-agent simulate --tokens-file`).
        #[arg(long, conflicts_with = "host")]
        count: Option<u32>,
        /// Make one agent token per host named in this file (one name per line, as each host's
        /// agent reports it; `#` starts a comment), each bound to its host, and write them to
        /// `--output` as Ansible variables (`tickscope_agent_tokens`), for the agent rollout
        /// role. Nothing is made if any line is refused.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["host", "count", "guest_uuid"], requires = "output")]
        hosts_file: Option<std::path::PathBuf>,
        /// Where `--hosts-file` writes the tokens: a new file (an existing one is refused),
        /// readable by its owner alone. Encrypt it with `ansible-vault encrypt`.
        #[arg(long, value_name = "FILE", requires = "hosts_file")]
        output: Option<std::path::PathBuf>,
        #[command(flatten)]
        db: DbArg,
    },
}

#[derive(Subcommand)]
pub enum UserCommand {
    /// Add a user. The password is read from standard input (one line), or prompted for without
    /// echo on a terminal; never from the command line, where other users could see it.
    Add {
        name: String,
        #[arg(long, value_enum, default_value = "viewer")]
        role: UserRoleArg,
        #[command(flatten)]
        db: DbArg,
    },
    /// Set a user's password (read as for `add`), for instance a locked-out admin's. Their open
    /// sessions end.
    Passwd {
        name: String,
        #[command(flatten)]
        db: DbArg,
    },
    /// Remove a user; their open sessions end. The last admin cannot be removed.
    Remove {
        name: String,
        #[command(flatten)]
        db: DbArg,
    },
    /// List the users with their role and last login.
    List {
        #[command(flatten)]
        db: DbArg,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum UserRoleArg {
    /// Changes settings, tokens and users.
    Admin,
    /// Reads everything, changes nothing.
    Viewer,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum RoleArg {
    /// A host agent: submits reports for one host.
    Agent,
    /// Reads the API.
    Viewer,
    /// A guest probe: submits its own guest's facts.
    Guest,
}

/// `serve`'s Alertmanager options.
#[derive(clap::Args)]
pub struct AlertmanagerArgs {
    /// Send alerts to this Alertmanager (its base address; repeat for each of a cluster,
    /// or separate them with commas), as Prometheus does: POST /api/v2/alerts on a cadence.
    /// tickscope's own silences do not apply to them; Alertmanager's do.
    #[arg(
        long = "alertmanager-url",
        value_name = "URL",
        env = "TICKSCOPE_ALERTMANAGER_URL",
        value_delimiter = ','
    )]
    pub urls: Vec<String>,
    /// Seconds between two sends of every alert to Alertmanager (Prometheus's
    /// resend_delay); a change is sent at once.
    #[arg(
        long = "alertmanager-resend",
        env = "TICKSCOPE_ALERTMANAGER_RESEND",
        default_value_t = 60
    )]
    pub resend: u64,
    /// A file holding the bearer token Alertmanager wants (sent to every --alertmanager-url).
    #[arg(
        long = "alertmanager-bearer-token-file",
        value_name = "FILE",
        env = "TICKSCOPE_ALERTMANAGER_BEARER_TOKEN_FILE",
        conflicts_with = "basic_auth_file"
    )]
    pub bearer_token_file: Option<PathBuf>,
    /// A file holding `user:password` for Alertmanager's basic auth.
    #[arg(
        long = "alertmanager-basic-auth-file",
        value_name = "FILE",
        env = "TICKSCOPE_ALERTMANAGER_BASIC_AUTH_FILE"
    )]
    pub basic_auth_file: Option<PathBuf>,
    /// Networks notifications (webhooks, Alertmanager) may be sent to although they are the
    /// server's own or its link's: loopback, link-local (the cloud metadata service), ...
    /// (addresses or blocks, comma-separated: 127.0.0.1,fe80::/10). Without it, such addresses
    /// are refused, and no redirect is ever followed.
    #[arg(
        long = "allow-receiver-networks",
        env = "TICKSCOPE_ALLOW_RECEIVER_NETWORKS",
        value_delimiter = ',',
        value_name = "ADDRESS[/PREFIX]"
    )]
    pub allow_networks: Vec<crate::domain::Network>,
    /// The CA certificate(s) (PEM) an https Alertmanager is checked against, instead of the
    /// built-in roots.
    #[arg(
        long = "alertmanager-ca-file",
        value_name = "FILE",
        env = "TICKSCOPE_ALERTMANAGER_CA_FILE"
    )]
    pub ca_file: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct DbArg {
    /// The database: an SQLite file (a path or sqlite://PATH; created on first use), or a
    /// PostgreSQL database (postgres://USER:PASSWORD@HOST/DATABASE; see the README's install
    /// section).
    #[arg(long = "db", env = "TICKSCOPE_DB")]
    pub url: Option<DbUrl>,
    /// Connections kept to PostgreSQL at most (SQLite keeps its own 8).
    #[arg(long = "db-pool", env = "TICKSCOPE_DB_POOL", default_value_t = 16)]
    pub pool: u32,
}

impl DbArg {
    pub fn url(&self, demo: bool) -> DbUrl {
        self.url.clone().unwrap_or_else(|| {
            DbUrl::Sqlite(PathBuf::from(if demo {
                "tickscope-demo.db"
            } else {
                "tickscope.db"
            }))
        })
    }

    /// Opens the database this names (`demo` picks the demo's default file).
    pub async fn open(&self, demo: bool) -> Result<Db> {
        let url = self.url(demo);
        Db::connect(&url, self.pool)
            .await
            .with_context(|| format!("cannot open the database {url}"))
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// clap checks the definitions only when a command line reaches them (a `requires` or
    /// `conflicts_with` that names no argument, two flags alike, a default its parser refuses):
    /// checked here for every subcommand at once.
    #[test]
    fn the_definitions_hold_together() {
        Cli::command().debug_assert();
    }
}
