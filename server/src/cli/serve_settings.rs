//! What `serve` runs with: its flags checked and worked out into the settings of each part of
//! the server, in one place, before anything opens or listens.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use super::args::{AlertmanagerArgs, DbArg, ServeArgs};
use crate::alerts::alertmanager::AlertmanagerOptions;
use crate::alerts::client::Reach;
use crate::analysis::cost::CostModel;
use crate::http::admission::AdmissionLimits;
use crate::http::listener::{ConnectionLimits, Proxies};
use crate::intake::MOST_FOLLOW_EVERY_S;
use crate::retention::Retention;
use crate::state::Options;

/// `serve`'s settings, checked.
pub struct ServeSettings {
    /// The address to listen on (`--listen`).
    pub listen: String,
    /// The database (`--db`, `--db-pool`; without `--db`, `options.demo` picks the file).
    pub db: DbArg,
    /// What the application state is made with (the demo flag among them).
    pub options: Options,
    /// Where alerts go besides webhooks.
    pub alertmanagers: AlertmanagerOptions,
    /// How long samples and rollups are kept.
    pub retention: Retention,
    /// HTTPS from these files: the certificate chain and its key (PEM), read when the server
    /// starts.
    pub tls: Option<TlsFiles>,
    /// The caps and deadlines of connections.
    pub connections: ConnectionLimits,
    /// The load balancers in front of the server.
    pub proxies: Proxies,
}

/// `--tls-cert` and `--tls-key`.
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

const HOUR_MS: i64 = 3_600_000;

impl ServeSettings {
    /// Checks the flags and works out the settings; an error names the flags at fault. Raises
    /// the open-files limit to what the connection cap needs (see `connection_cap`), and reads
    /// the Alertmanager's auth and CA files.
    pub fn from_args(args: ServeArgs) -> Result<ServeSettings> {
        let usable = |v: f64| v.is_finite() && v >= 0.0;
        if !(usable(args.watts_per_core) && usable(args.price_per_kwh)) {
            anyhow::bail!("--watts-per-core and --price-per-kwh must be zero or more");
        }
        let cost = CostModel {
            watts_per_busy_core: args.watts_per_core,
            price_per_kwh: args.price_per_kwh,
            currency: args.currency,
        };
        if args.alert_interval == 0 {
            anyhow::bail!("--alert-interval must be at least 1 second");
        }
        if [args.header_timeout, args.body_timeout, args.write_timeout].contains(&0)
            || args.max_connections == 0
        {
            anyhow::bail!(
                "--header-timeout, --body-timeout, --write-timeout and --max-connections must \
                 be at least 1"
            );
        }
        if args.follow_every > MOST_FOLLOW_EVERY_S {
            anyhow::bail!("--follow-every must be at most {MOST_FOLLOW_EVERY_S} seconds");
        }
        args.budgets.check().map_err(|e| anyhow::anyhow!("{e}"))?;
        if args.proxies.proxy_protocol && args.proxies.trusted.is_empty() {
            anyhow::bail!(
                "--proxy-protocol reads the PROXY header from --trusted-proxies only: name them"
            );
        }
        let connections = ConnectionLimits {
            per_address: args.budgets.connections_per_address,
            new_per_address_per_second: args.budgets.new_connections_per_address_per_second,
            max_connections: connection_cap(args.max_connections),
            header_read_timeout: Duration::from_secs(args.header_timeout),
            tls_handshake_timeout: Duration::from_secs(args.header_timeout),
            write_stall_timeout: Duration::from_secs(args.write_timeout),
        };
        let tls = args
            .tls_cert
            .zip(args.tls_key)
            .map(|(cert, key)| TlsFiles { cert, key });
        let scheme = if tls.is_some() { "https" } else { "http" };
        let options = Options {
            external_url: args
                .external_url
                .unwrap_or_else(|| format!("{scheme}://{}", args.listen)),
            demo: args.demo,
            cost,
            // Over TLS the cookie is always Secure; behind a proxy, when told so.
            secure_cookies: args.secure_cookies || tls.is_some(),
            tls: tls.is_some(),
            ingest_per_second: args.ingest_rate,
            ingest_burst: args.ingest_burst,
            budgets: args.budgets,
            follow_every: Duration::from_secs(args.follow_every),
            alert_interval: Duration::from_secs(args.alert_interval),
            proxies: args.proxies.clone(),
            receiver_networks: args.alertmanager.allow_networks.clone(),
            admission: AdmissionLimits {
                body_timeout: Duration::from_secs(args.body_timeout),
                ..AdmissionLimits::default()
            },
            ..Options::default()
        };
        let alertmanagers = alertmanagers(&args.alertmanager)?;
        let retention = Retention {
            raw_ms: args.keep_raw_hours.saturating_mul(HOUR_MS),
            five_minute_ms: args.keep_5m_days.saturating_mul(24 * HOUR_MS),
            hourly_ms: args.keep_hourly_days.saturating_mul(24 * HOUR_MS),
        };
        retention.check().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(ServeSettings {
            listen: args.listen,
            db: args.db,
            options,
            alertmanagers,
            retention,
            tls,
            connections,
            proxies: args.proxies,
        })
    }
}

/// The Alertmanagers' options, their auth and CA files read.
fn alertmanagers(args: &AlertmanagerArgs) -> Result<AlertmanagerOptions> {
    let read = |path: &Option<PathBuf>| -> Result<Option<Vec<u8>>> {
        path.as_ref()
            .map(|p| std::fs::read(p).with_context(|| format!("cannot read {}", p.display())))
            .transpose()
    };
    let text = |bytes: Option<Vec<u8>>| -> Result<Option<String>> {
        bytes
            .map(|b| String::from_utf8(b).context("an Alertmanager auth file is not UTF-8"))
            .transpose()
    };
    AlertmanagerOptions::new(
        &args.urls,
        text(read(&args.bearer_token_file)?)?.as_deref(),
        text(read(&args.basic_auth_file)?)?.as_deref(),
        read(&args.ca_file)?,
        Duration::from_secs(args.resend),
        Reach {
            allowed: args.allow_networks.clone(),
        },
    )
    .map_err(|e| anyhow::anyhow!("--alertmanager-*: {e}"))
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
            // The target the binary's own lines had before the command line moved into the
            // library: log filters and searches written for them still match.
            tracing::warn!(
                target: "tickscope_server",
                error = %e,
                "cannot raise the open-files limit to its hard limit"
            );
        }
    }
    let Some(files) = getrlimit(Resource::Nofile).current else {
        return wanted; // unlimited
    };
    let fits = usize::try_from(files.saturating_sub(RESERVED_FILES).max(1)).unwrap_or(usize::MAX);
    if fits < wanted {
        tracing::warn!(
            target: "tickscope_server",
            open_files = files,
            max_connections = fits,
            "the open-files limit allows fewer connections than asked; raise LimitNOFILE="
        );
    }
    wanted.min(fits)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::args::{Cli, Command};

    /// `serve` with these flags, read as the binary reads them (the environment's TICKSCOPE_*
    /// variables included: none is set where the tests run).
    fn settings(flags: &[&str]) -> Result<ServeSettings> {
        let argv = ["tickscope-server", "serve"].iter().chain(flags);
        match Cli::try_parse_from(argv)?.command {
            Command::Serve(args) => ServeSettings::from_args(*args),
            _ => unreachable!("the command line was `serve`"),
        }
    }

    #[test]
    fn the_defaults_make_a_plain_http_server_on_loopback() {
        let settings = settings(&[]).unwrap();
        assert_eq!(settings.listen, "127.0.0.1:8080");
        assert_eq!(settings.options.external_url, "http://127.0.0.1:8080");
        assert!(!settings.options.secure_cookies && !settings.options.tls);
        assert!(settings.tls.is_none());
        assert_eq!(settings.options.alert_interval, Duration::from_secs(15));
        assert_eq!(settings.retention.raw_ms, 48 * HOUR_MS);
        assert_eq!(settings.retention.five_minute_ms, 14 * 24 * HOUR_MS);
        assert_eq!(settings.retention.hourly_ms, 400 * 24 * HOUR_MS);
        assert_eq!(
            settings.options.admission.body_timeout,
            Duration::from_secs(20)
        );
        assert_eq!(
            settings.connections.header_read_timeout,
            Duration::from_secs(10)
        );
        assert_eq!(
            settings.connections.write_stall_timeout,
            Duration::from_secs(30)
        );
        assert!(settings.connections.max_connections >= 1);
        assert_eq!(settings.options.follow_every, Duration::from_secs(20));
    }

    #[test]
    fn tls_files_make_the_links_https_and_the_cookie_secure() {
        let settings = settings(&[
            "--listen",
            "0.0.0.0:8443",
            "--tls-cert",
            "chain.pem",
            "--tls-key",
            "key.pem",
        ])
        .unwrap();
        assert_eq!(settings.options.external_url, "https://0.0.0.0:8443");
        assert!(settings.options.secure_cookies && settings.options.tls);
        let tls = settings.tls.unwrap();
        assert_eq!((tls.cert, tls.key), ("chain.pem".into(), "key.pem".into()));
    }

    #[test]
    fn flags_that_cannot_work_are_refused_by_name() {
        let cases: [(&[&str], &str); 6] = [
            (
                &["--price-per-kwh", "NaN"],
                "--price-per-kwh must be zero or more",
            ),
            (
                &["--alert-interval", "0"],
                "--alert-interval must be at least 1",
            ),
            (&["--body-timeout", "0"], "--body-timeout"),
            (&["--proxy-protocol"], "--trusted-proxies only"),
            (
                &["--follow-every", "61"],
                "--follow-every must be at most 60",
            ),
            (
                &["--keep-raw-hours", "1"],
                "raw samples must be kept at least",
            ),
        ];
        for (flags, expected) in cases {
            let error = settings(flags).err().expect("refused").to_string();
            assert!(error.contains(expected), "{flags:?}: {error}");
        }
    }
}
