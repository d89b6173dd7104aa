//! `tickscope-server`: stores what the agents measure and serves the dashboard and API.

use std::num::NonZeroU32;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;

use tickscope_server::alerts::alertmanager::AlertmanagerOptions;
use tickscope_server::alerts::client::Reach;
use tickscope_server::analysis::cost::CostModel;
use tickscope_server::auth::{self, Role, UserRole};
use tickscope_server::budgets::Budgets;
use tickscope_server::db::{Db, DbUrl};
use tickscope_server::http::admission::AdmissionLimits;
use tickscope_server::http::listener::{self, ConnectionLimits, Proxies};
use tickscope_server::retention::Retention;
use tickscope_server::state::{AppState, Options};
use tickscope_server::{app, clock};

#[derive(Parser)]
#[command(
    version,
    about = "tickscope server: ranks idle VMs by the host CPU their ticking kernels waste"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the dashboard and the API.
    Serve {
        /// Address to listen on.
        #[arg(long, env = "TICKSCOPE_LISTEN", default_value = "127.0.0.1:8080")]
        listen: String,
        #[command(flatten)]
        db: DbArg,
        /// Fill the database with a simulated fleet that keeps reporting, labelled as demo data
        /// on every page. Use a database of its own (the default is `./tickscope-demo.db`).
        #[arg(long)]
        demo: bool,
        /// Extra power a busy host core draws, in watts, to turn wasted CPU into energy.
        #[arg(long, env = "TICKSCOPE_WATTS_PER_CORE", default_value_t = 7.0)]
        watts_per_core: f64,
        /// Price of a kWh, to turn energy into money.
        #[arg(long, env = "TICKSCOPE_PRICE_PER_KWH", default_value_t = 0.25)]
        price_per_kwh: f64,
        /// Currency of --price-per-kwh.
        #[arg(long, env = "TICKSCOPE_CURRENCY", default_value = "EUR")]
        currency: String,
        /// Mark the session cookie Secure: set this when users reach the server over HTTPS
        /// (a TLS reverse proxy in front of it).
        #[arg(long, env = "TICKSCOPE_SECURE_COOKIES")]
        secure_cookies: bool,
        /// The address users reach the dashboard at, for the links in alert notifications
        /// (default: http:// and --listen).
        #[arg(long, env = "TICKSCOPE_EXTERNAL_URL")]
        external_url: Option<String>,
        /// Serve HTTPS with this certificate chain (PEM); needs --tls-key. Without it, plain
        /// HTTP, for a TLS reverse proxy in front (docs/reverse-proxy.md).
        #[arg(long, env = "TICKSCOPE_TLS_CERT", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The private key of --tls-cert (PEM).
        #[arg(long, env = "TICKSCOPE_TLS_KEY", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// How often alert rules are evaluated, in seconds.
        #[arg(long, env = "TICKSCOPE_ALERT_INTERVAL", default_value_t = 15)]
        alert_interval: u64,
        /// Where alerts go besides webhooks (boxed: the options are many, read once).
        #[command(flatten)]
        alertmanager: Box<AlertmanagerArgs>,
        /// Reports per second one agent token may send; beyond it, 429 with Retry-After.
        #[arg(long, env = "TICKSCOPE_INGEST_RATE", default_value = "20")]
        ingest_rate: NonZeroU32,
        /// Reports one agent token may send at once above its rate (an agent replaying the
        /// spool it kept through an outage).
        #[arg(long, env = "TICKSCOPE_INGEST_BURST", default_value = "200")]
        ingest_burst: NonZeroU32,
        /// Hours raw samples are kept; older ones become five-minute rollups.
        #[arg(long, env = "TICKSCOPE_KEEP_RAW_HOURS", default_value_t = 48)]
        keep_raw_hours: i64,
        /// Days five-minute rollups are kept; older ones are merged into hourly ones.
        #[arg(long, env = "TICKSCOPE_KEEP_5M_DAYS", default_value_t = 14)]
        keep_5m_days: i64,
        /// Days hourly rollups are kept; older ones are deleted.
        #[arg(long, env = "TICKSCOPE_KEEP_HOURLY_DAYS", default_value_t = 400)]
        keep_hourly_days: i64,
        /// Connections open at once; more wait in the kernel's backlog. Lowered to fit the
        /// open-files limit (LimitNOFILE=), which the server raises to its hard limit at start.
        #[arg(long, env = "TICKSCOPE_MAX_CONNECTIONS", default_value_t = 4096)]
        max_connections: usize,
        /// Seconds a client may take to send a request's headers, counted from when it connected
        /// or from its previous response (so also how long an idle connection stays open).
        #[arg(long, env = "TICKSCOPE_HEADER_TIMEOUT", default_value_t = 10)]
        header_timeout: u64,
        /// Seconds a client may take to send a request's whole body.
        #[arg(long, env = "TICKSCOPE_BODY_TIMEOUT", default_value_t = 20)]
        body_timeout: u64,
        /// Seconds writing an answer may make no progress (a client that stopped reading)
        /// before the connection is closed.
        #[arg(long, env = "TICKSCOPE_WRITE_TIMEOUT", default_value_t = 30)]
        write_timeout: u64,
        /// What one credential and one input may spend (docs/security.md; boxed: read once).
        #[command(flatten)]
        budgets: Box<Budgets>,
        /// Load balancers in front of the server.
        #[command(flatten)]
        proxies: Proxies,
    },
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

#[derive(Subcommand)]
enum TokenCommand {
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
        #[command(flatten)]
        db: DbArg,
    },
}

#[derive(Subcommand)]
enum UserCommand {
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
enum UserRoleArg {
    /// Changes settings, tokens and users.
    Admin,
    /// Reads everything, changes nothing.
    Viewer,
}

#[derive(Clone, Copy, ValueEnum)]
enum RoleArg {
    /// A host agent: submits reports for one host.
    Agent,
    /// Reads the API.
    Viewer,
    /// A guest probe: submits its own guest's facts.
    Guest,
}

/// `serve`'s Alertmanager options.
#[derive(clap::Args)]
struct AlertmanagerArgs {
    /// Send alerts to this Alertmanager (its base address; repeat for each of a cluster,
    /// or separate them with commas), as Prometheus does: POST /api/v2/alerts on a cadence.
    /// tickscope's own silences do not apply to them; Alertmanager's do.
    #[arg(
        long = "alertmanager-url",
        value_name = "URL",
        env = "TICKSCOPE_ALERTMANAGER_URL",
        value_delimiter = ','
    )]
    urls: Vec<String>,
    /// Seconds between two sends of every alert to Alertmanager (Prometheus's
    /// resend_delay); a change is sent at once.
    #[arg(
        long = "alertmanager-resend",
        env = "TICKSCOPE_ALERTMANAGER_RESEND",
        default_value_t = 60
    )]
    resend: u64,
    /// A file holding the bearer token Alertmanager wants (sent to every --alertmanager-url).
    #[arg(
        long = "alertmanager-bearer-token-file",
        value_name = "FILE",
        env = "TICKSCOPE_ALERTMANAGER_BEARER_TOKEN_FILE",
        conflicts_with = "basic_auth_file"
    )]
    bearer_token_file: Option<PathBuf>,
    /// A file holding `user:password` for Alertmanager's basic auth.
    #[arg(
        long = "alertmanager-basic-auth-file",
        value_name = "FILE",
        env = "TICKSCOPE_ALERTMANAGER_BASIC_AUTH_FILE"
    )]
    basic_auth_file: Option<PathBuf>,
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
    allow_networks: Vec<tickscope_server::domain::Network>,
    /// The CA certificate(s) (PEM) an https Alertmanager is checked against, instead of the
    /// built-in roots.
    #[arg(
        long = "alertmanager-ca-file",
        value_name = "FILE",
        env = "TICKSCOPE_ALERTMANAGER_CA_FILE"
    )]
    ca_file: Option<PathBuf>,
}

#[derive(clap::Args)]
struct DbArg {
    /// The database: an SQLite file (a path or sqlite://PATH; created on first use), or a
    /// PostgreSQL database (postgres://USER:PASSWORD@HOST/DATABASE; see the README's install
    /// section).
    #[arg(long = "db", env = "TICKSCOPE_DB")]
    url: Option<DbUrl>,
    /// Connections kept to PostgreSQL at most (SQLite keeps its own 8).
    #[arg(long = "db-pool", env = "TICKSCOPE_DB_POOL", default_value_t = 16)]
    pool: u32,
}

impl DbArg {
    fn url(&self, demo: bool) -> DbUrl {
        self.url.clone().unwrap_or_else(|| {
            DbUrl::Sqlite(PathBuf::from(if demo {
                "tickscope-demo.db"
            } else {
                "tickscope.db"
            }))
        })
    }

    /// Opens the database this names (`demo` picks the demo's default file).
    async fn open(&self, demo: bool) -> Result<Db> {
        let url = self.url(demo);
        Db::connect(&url, self.pool)
            .await
            .with_context(|| format!("cannot open the database {url}"))
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("TICKSCOPE_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        // Every event escaped on its way out: no field from outside can forge a line, an ANSI
        // escape or reversed text.
        .with_writer(tickscope_server::logging::EscapingWriter::new(
            std::io::stderr,
        ))
        // No colours, even on a terminal: the escaping writer cannot tell the subscriber's own
        // ANSI escapes from injected ones, so it would print them as `\u{1b}[2m` text.
        .with_ansi(false)
        .init();
    match Cli::parse().command {
        Command::Serve {
            listen,
            db,
            demo,
            watts_per_core,
            price_per_kwh,
            currency,
            secure_cookies,
            external_url,
            alert_interval,
            alertmanager,
            ingest_rate,
            ingest_burst,
            keep_raw_hours,
            keep_5m_days,
            keep_hourly_days,
            tls_cert,
            tls_key,
            max_connections,
            header_timeout,
            body_timeout,
            write_timeout,
            budgets,
            proxies,
        } => {
            let usable = |v: f64| v.is_finite() && v >= 0.0;
            if !(usable(watts_per_core) && usable(price_per_kwh)) {
                anyhow::bail!("--watts-per-core and --price-per-kwh must be zero or more");
            }
            let cost = CostModel {
                watts_per_busy_core: watts_per_core,
                price_per_kwh,
                currency,
            };
            if alert_interval == 0 {
                anyhow::bail!("--alert-interval must be at least 1 second");
            }
            if [header_timeout, body_timeout, write_timeout].contains(&0) || max_connections == 0 {
                anyhow::bail!(
                    "--header-timeout, --body-timeout, --write-timeout and --max-connections must \
                     be at least 1"
                );
            }
            budgets.check().map_err(|e| anyhow::anyhow!("{e}"))?;
            if proxies.proxy_protocol && proxies.trusted.is_empty() {
                anyhow::bail!(
                    "--proxy-protocol reads the PROXY header from --trusted-proxies only: name them"
                );
            }
            let limits = ConnectionLimits {
                per_address: budgets.connections_per_address,
                new_per_address_per_second: budgets.new_connections_per_address_per_second,
                max_connections: connection_cap(max_connections),
                header_read_timeout: std::time::Duration::from_secs(header_timeout),
                tls_handshake_timeout: std::time::Duration::from_secs(header_timeout),
                write_stall_timeout: std::time::Duration::from_secs(write_timeout),
            };
            let tls = tls_cert.zip(tls_key);
            let scheme = if tls.is_some() { "https" } else { "http" };
            let options = Options {
                external_url: external_url.unwrap_or_else(|| format!("{scheme}://{listen}")),
                demo,
                cost,
                // Over TLS the cookie is always Secure; behind a proxy, when told so.
                secure_cookies: secure_cookies || tls.is_some(),
                tls: tls.is_some(),
                ingest_per_second: ingest_rate,
                ingest_burst,
                budgets: *budgets,
                proxies: proxies.clone(),
                receiver_networks: alertmanager.allow_networks.clone(),
                admission: AdmissionLimits {
                    body_timeout: std::time::Duration::from_secs(body_timeout),
                    ..AdmissionLimits::default()
                },
                ..Options::default()
            };
            let alert_every = std::time::Duration::from_secs(alert_interval);
            let read = |path: &Option<PathBuf>| -> Result<Option<Vec<u8>>> {
                path.as_ref()
                    .map(|p| {
                        std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))
                    })
                    .transpose()
            };
            let text = |bytes: Option<Vec<u8>>| -> Result<Option<String>> {
                bytes
                    .map(|b| String::from_utf8(b).context("an Alertmanager auth file is not UTF-8"))
                    .transpose()
            };
            let alertmanagers = AlertmanagerOptions::new(
                &alertmanager.urls,
                text(read(&alertmanager.bearer_token_file)?)?.as_deref(),
                text(read(&alertmanager.basic_auth_file)?)?.as_deref(),
                read(&alertmanager.ca_file)?,
                std::time::Duration::from_secs(alertmanager.resend),
                Reach {
                    allowed: alertmanager.allow_networks.clone(),
                },
            )
            .map_err(|e| anyhow::anyhow!("--alertmanager-*: {e}"))?;
            const HOUR_MS: i64 = 3_600_000;
            let retention = Retention {
                raw_ms: keep_raw_hours.saturating_mul(HOUR_MS),
                five_minute_ms: keep_5m_days.saturating_mul(24 * HOUR_MS),
                hourly_ms: keep_hourly_days.saturating_mul(24 * HOUR_MS),
            };
            retention.check().map_err(|e| anyhow::anyhow!("{e}"))?;
            serve(
                &listen,
                &db,
                options,
                (alert_every, alertmanagers),
                retention,
                tls,
                (limits, proxies),
            )
            .await
        }
        Command::User { command } => user_command(command).await,
        Command::MigrateData { from, to } => migrate_data(&from, &to).await,
        Command::Token {
            command:
                TokenCommand::Bind {
                    token,
                    host,
                    guest_uuid,
                    db,
                },
        } => bind_guest_token(&token, &host, guest_uuid.as_deref(), &db).await,
        Command::Token {
            command:
                TokenCommand::Add {
                    name,
                    role,
                    host,
                    guest_uuid,
                    count,
                    db,
                },
        } => {
            let role = match role {
                RoleArg::Agent => Role::Agent,
                RoleArg::Viewer => Role::Viewer,
                RoleArg::Guest => Role::Guest,
            };
            let db = db.open(false).await?;
            if let Some(count) = count {
                if role != Role::Agent {
                    anyhow::bail!("--count makes agent tokens, one per host");
                }
                eprintln!(
                    "Agent tokens for hosts {name}-0001 to {name}-{count:04}, shown only this once:"
                );
                for i in 1..=count {
                    let host = format!("{name}-{i:04}");
                    let token = auth::new_token()?;
                    db.insert_token(
                        &host,
                        role,
                        &auth::token_hash(&token),
                        Some(&host),
                        clock::now_ms(),
                    )
                    .await?;
                    println!("{token}");
                }
                db.close().await;
                return Ok(());
            }
            let host = host.map(|h| h.trim().to_string());
            let guest_uuid = match (role, guest_uuid) {
                (Role::Guest, Some(uuid)) => Some(
                    tickscope_wire::normalise_uuid(&uuid)
                        .with_context(|| format!("--guest-uuid {uuid:?} is not a UUID"))?,
                ),
                (Role::Guest, None) if host.is_some() => {
                    anyhow::bail!("--host pins a guest token with --guest-uuid: give both")
                }
                (_, Some(_)) => anyhow::bail!("--guest-uuid is for guest tokens"),
                (_, None) => None,
            };
            let token = auth::new_token()?;
            let agent_host = host.as_deref().filter(|_| role == Role::Agent);
            let id = db
                .insert_token(
                    &name,
                    role,
                    &auth::token_hash(&token),
                    agent_host,
                    clock::now_ms(),
                )
                .await?;
            if let Some(uuid) = &guest_uuid {
                db.pin_guest_token(id, uuid, host.as_deref()).await?;
            }
            db.close().await;
            println!(
                "Created {} token {name:?}. It is shown only this once:",
                role.as_str()
            );
            println!("{token}");
            Ok(())
        }
    }
}

/// `token bind`: pins a guest token to a VM on a host.
async fn bind_guest_token(
    token: &str,
    host: &str,
    guest_uuid: Option<&str>,
    db: &DbArg,
) -> Result<()> {
    let db = db.open(false).await?;
    let tokens = db.tokens().await?;
    let found: Vec<_> = tokens
        .iter()
        .filter(|t| t.id.0.to_string() == token || t.name == token)
        .filter(|t| t.role == Role::Guest && t.revoked_ms.is_none())
        .collect();
    let row = match found.as_slice() {
        [row] => *row,
        [] => anyhow::bail!("there is no guest token {token:?} in use (by id or name)"),
        _ => anyhow::bail!("several guest tokens are named {token:?}: give its id"),
    };
    let uuid = match guest_uuid {
        Some(uuid) => tickscope_wire::normalise_uuid(uuid)
            .with_context(|| format!("--guest-uuid {uuid:?} is not a UUID"))?,
        None => row.guest_uuid.clone().with_context(|| {
            format!("guest token {token:?} has not delivered for a VM yet: give --guest-uuid")
        })?,
    };
    let host = host.trim();
    db.pin_guest_token(row.id, &uuid, Some(host)).await?;
    db.close().await;
    println!(
        "Guest token {:?} now delivers for the VM {uuid} on host {host:?}, from its next delivery.",
        row.name
    );
    Ok(())
}

async fn user_command(command: UserCommand) -> Result<()> {
    // AppError's own messages are written for the person at the keyboard.
    let clear = |e: tickscope_server::error::AppError| anyhow::anyhow!("{e}");
    let clear_store = |e: tickscope_server::db::StoreError| clear(e.into());
    match command {
        UserCommand::Add { name, role, db } => {
            let role = match role {
                UserRoleArg::Admin => UserRole::Admin,
                UserRoleArg::Viewer => UserRole::Viewer,
            };
            let name = auth::user_name(&name).map_err(|e| anyhow::anyhow!("user {e}"))?;
            let password = read_password(&name)?;
            let hash = auth::hash_password(&password).map_err(clear)?;
            let db = db.open(false).await?;
            db.insert_user(&name, role, &hash, clock::now_ms())
                .await
                .map_err(clear_store)?;
            db.close().await;
            println!("Created {} user {name:?}.", role.as_str());
        }
        UserCommand::Passwd { name, db } => {
            let db = db.open(false).await?;
            let user = db
                .user_by_name(&name)
                .await?
                .with_context(|| format!("there is no user {name:?}"))?;
            let password = read_password(&user.name)?;
            let hash = auth::hash_password(&password).map_err(clear)?;
            db.set_password(user.id, &hash).await.map_err(clear_store)?;
            db.close().await;
            println!(
                "New password set for {:?}; their open sessions are logged out.",
                user.name
            );
        }
        UserCommand::Remove { name, db } => {
            let db = db.open(false).await?;
            let user = db
                .user_by_name(&name)
                .await?
                .with_context(|| format!("there is no user {name:?}"))?;
            db.delete_user(user.id).await.map_err(clear_store)?;
            db.close().await;
            println!("Removed user {:?}.", user.name);
        }
        UserCommand::List { db } => {
            let db = db.open(false).await?;
            println!("{:<24} {:<8} last login", "name", "role");
            for user in db.users().await? {
                let last = user.last_login_ms.map_or("never".to_string(), |ms| {
                    chrono::DateTime::from_timestamp_millis(ms).map_or(ms.to_string(), |t| {
                        t.format("%Y-%m-%d %H:%M UTC").to_string()
                    })
                });
                println!("{:<24} {:<8} {last}", user.name, user.role);
            }
            db.close().await;
        }
    }
    Ok(())
}

/// The new user's password: prompted for twice without echo on a terminal, else the first line
/// of standard input.
fn read_password(name: &str) -> Result<String> {
    use std::io::{BufRead, IsTerminal};
    if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password(format!("Password for {name}: "))?;
        let again = rpassword::prompt_password("Again: ")?;
        if first != again {
            anyhow::bail!("the two passwords differ");
        }
        return Ok(first);
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

async fn migrate_data(from: &DbUrl, to: &DbUrl) -> Result<()> {
    if !matches!(from, DbUrl::Sqlite(_)) || !matches!(to, DbUrl::Postgres(_)) {
        anyhow::bail!(
            "migrate-data copies an SQLite database (--from) into a PostgreSQL one (--to)"
        );
    }
    let source = Db::connect(from, 1)
        .await
        .with_context(|| format!("cannot open {from}"))?;
    let target = Db::connect(to, 2)
        .await
        .with_context(|| format!("cannot open {to}"))?;
    let started = std::time::Instant::now();
    let copies = tickscope_server::db::migrate_data(&source, &target)
        .await
        .with_context(|| format!("nothing was copied from {from} to {to}"))?;
    println!(
        "{:<20} {:>12}  sha256 (the same on both sides)",
        "table", "rows"
    );
    for copy in &copies {
        println!("{:<20} {:>12}  {}", copy.table, copy.rows, copy.sha256_hex);
    }
    println!(
        "copied and verified {} rows in {} tables in {:.1} s",
        copies.iter().map(|c| c.rows).sum::<u64>(),
        copies.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn serve(
    listen: &str,
    db_arg: &DbArg,
    options: Options,
    (alert_every, alertmanagers): (std::time::Duration, AlertmanagerOptions),
    retention: Retention,
    tls: Option<(PathBuf, PathBuf)>,
    (limits, proxies): (ConnectionLimits, Proxies),
) -> Result<()> {
    let demo = options.demo;
    let db_url = db_arg.url(demo);
    let db = db_arg.open(demo).await?;
    // A database that opens but cannot be written (a read-only file or mount, a full disk)
    // would answer every report 5xx while looking healthy: refuse to start instead.
    db.probe_write(clock::now_ms()).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot write the database {db_url}: {e}; check the free space and the permissions \
             of the file, its directory and the mount, or the database server and its role"
        )
    })?;
    // Before anything else starts, so that a wrong certificate stops the server at once.
    let tls = tls
        .map(|(cert, key)| tickscope_server::http::tls::acceptor(&cert, &key))
        .transpose()?;
    tracing::info!(
        db = %db_url,
        database = %db.describe().await?,
        "database ready"
    );
    // Sessions that lapsed are deleted hourly; a lapsed one is refused anyway.
    let store = tickscope_server::auth::session_store::Sessions::new(db.session_store());
    tokio::spawn(async move {
        use tower_sessions::session_store::ExpiredDeletion;
        let hourly = tokio::time::Duration::from_secs(3600);
        if let Err(e) = store.continuously_delete_expired(hourly).await {
            tracing::warn!(error = %e, "lapsed sessions are no longer deleted");
        }
    });
    let state = AppState::new(db.clone(), options)
        .await
        .context("cannot read the saved settings or analyse the fleet")?;
    if demo {
        tickscope_server::demo::start(&state)
            .await
            .context("cannot fill the demo database")?;
    }
    // Several servers on one PostgreSQL: each follows what the others store.
    tickscope_server::cluster::follow::spawn(state.clone());
    tickscope_server::alerts::spawn(
        axum::extract::FromRef::from_ref(&state),
        alert_every,
        alertmanagers,
    );
    // Every five minutes: one analysis window more of each guest becomes due.
    tickscope_server::retention::spawn(
        state.clone(),
        retention,
        std::time::Duration::from_secs(300),
    );
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    tracing::info!(
        max_connections = limits.max_connections,
        "tickscope-server listening on {}://{}",
        if tls.is_some() { "https" } else { "http" },
        listener.local_addr()?
    );
    let metrics = state.metrics.clone();
    listener::serve(
        listener,
        app::router(state),
        tls,
        limits,
        proxies,
        metrics,
        shutdown_signal(),
    )
    .await;
    db.close().await;
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM (systemd stop), letting in-flight requests finish.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down");
}

/// File descriptors kept for the database, the log and the notification sender's connections.
const RESERVED_FILES: u64 = 256;

/// The connection cap that fits the open-files limit: the soft limit is raised to the hard one
/// first (systemd's default soft limit is 1024, its hard limit far higher), and the cap stays
/// below it, so that `accept` never fails for want of a descriptor.
fn connection_cap(wanted: usize) -> usize {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if let Some(hard) = limit.maximum
        && limit.current.is_some_and(|soft| soft < hard)
    {
        limit.current = Some(hard);
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            tracing::warn!(error = %e, "cannot raise the open-files limit to its hard limit");
        }
    }
    let Some(files) = getrlimit(Resource::Nofile).current else {
        return wanted; // unlimited
    };
    let fits = usize::try_from(files.saturating_sub(RESERVED_FILES).max(1)).unwrap_or(usize::MAX);
    if fits < wanted {
        tracing::warn!(
            open_files = files,
            max_connections = fits,
            "the open-files limit allows fewer connections than asked; raise LimitNOFILE="
        );
    }
    wanted.min(fits)
}
