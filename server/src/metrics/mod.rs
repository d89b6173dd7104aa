//! `/metrics`: the fleet and the server itself for Prometheus, in OpenMetrics or the classic
//! text format, whichever the scraper asks for ([`mod@format`]).
//!
//! The server's own counters live as long as the server; the fleet's series are built from the
//! current state at each scrape, so a guest that stopped reporting leaves the output at once.
//! Per-guest series are labelled as [`labels`] explains: identity on the measured series, the
//! verdict and kernel facts on `tickscope_guest_info` only.

pub mod encoding;
pub mod format;
mod guests;
pub mod labels;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::db::HostRow;
use crate::domain::AlertState;
use crate::error::{AppError, AppResult};
use crate::fleet::published::Published;
use crate::visible::show_invisible;
pub use encoding::Encoding;
use encoding::Out;
pub use format::Format;

/// Outcomes of an agent report, each counted from 0 so a rate over them exists from the start.
pub const REPORT_OUTCOMES: &[&str] = &["stored", "duplicate", "refused"];
/// Outcomes of a notification attempt: a webhook delivery (`alerts::webhook`) or a post to
/// Alertmanager (`alerts::alertmanager`). A new outcome goes here too: counting one that is not
/// listed fails the debug build's tests.
pub const NOTIFICATION_OUTCOMES: &[&str] = &[
    "delivered",
    "retried",
    "given_up",
    "alertmanager_sent",
    "alertmanager_failed",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// A budget one credential spent, and the kind of credential (`http::spending`'s kinds).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    budget: &'static str,
    credential: &'static str,
}

/// The budgets a request can be refused for, each counted from 0 (see `crate::budgets`):
/// what one credential has at once (`requests`, `streams`, `body_bytes`), how fast it sends
/// (`reports`, `report_bytes`, `guest_samples`, `facts`), and what one host may bring (`new_guests`,
/// `guests_per_host`).
pub const BUDGETS: &[&str] = &[
    "requests",
    "streams",
    "body_bytes",
    "reports",
    "report_bytes",
    "guest_samples",
    "facts",
    "new_guests",
    "guests_per_host",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlertLabels {
    state: String,
    severity: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HostLabels {
    host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    version: &'static str,
    external_url: String,
}

/// What one scrape shows of the fleet, read at the time of the scrape.
pub struct Scrape<'a> {
    /// The analysed fleet as the server keeps it: its active guests, their running totals and
    /// the fleet's counts are written from it, with nothing read from the database.
    pub fleet: Arc<Published>,
    /// When the scrape is (server clock): the guests active then are shown.
    pub now_ms: i64,
    /// Every host that ever reported (silent ones too: that is what the series tells).
    pub hosts: &'a [HostRow],
    /// How many alerts are open, by state and severity.
    pub open_alerts: &'a [(AlertState, String, i64)],
    /// Where users reach the dashboard (`serve --external-url`), for links from alert rules.
    pub external_url: &'a str,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// How an OpenMetrics exposition ends.
const EOF: &str = "# EOF\n";

/// The server's own counters.
#[derive(Debug)]
pub struct Metrics {
    reports: Family<OutcomeLabels, Counter>,
    samples: Counter,
    ingest_seconds: Histogram,
    notifications: Family<OutcomeLabels, Counter>,
    refusals: Family<RefusalLabels, Counter>,
    connections_refused: Counter,
    warnings_held_back: Counter,
    follower_reads: Counter,
    follower_hosts: Counter,
    follower_read_seconds: Histogram,
    /// The last exposition's length: the next one's buffer starts that large, rather than
    /// doubling its way to 20 MB at 100,000 guests (not measured apart from the rest of the
    /// change it came with, docs/performance.md).
    last_exposition_bytes: AtomicUsize,
}

impl Default for Metrics {
    fn default() -> Self {
        let metrics = Metrics {
            reports: Family::default(),
            samples: Counter::default(),
            ingest_seconds: writer_time(),
            notifications: Family::default(),
            refusals: Family::default(),
            connections_refused: Counter::default(),
            warnings_held_back: Counter::default(),
            follower_reads: Counter::default(),
            follower_hosts: Counter::default(),
            follower_read_seconds: writer_time(),
            last_exposition_bytes: AtomicUsize::new(0),
        };
        // Known outcomes are 0 until they happen, instead of absent: `rate()` and alerts on
        // them then work from the first scrape.
        for &outcome in REPORT_OUTCOMES {
            metrics
                .reports
                .get_or_create(&OutcomeLabels { outcome })
                .inc_by(0);
        }
        for &outcome in NOTIFICATION_OUTCOMES {
            metrics
                .notifications
                .get_or_create(&OutcomeLabels { outcome })
                .inc_by(0);
        }
        for &budget in BUDGETS {
            for &credential in crate::budgets::CREDENTIAL_KINDS {
                metrics
                    .refusals
                    .get_or_create(&RefusalLabels { budget, credential })
                    .inc_by(0);
            }
        }
        metrics
    }
}

/// A histogram of the time work took the writer (a report stored, another server's hosts
/// read): 0.5 ms to about 4 s.
fn writer_time() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 14))
}

/// A gauge holding `value`.
fn gauge(value: f64) -> FloatGauge {
    let g = FloatGauge::default();
    g.set(value);
    g
}

/// Seconds since the epoch, from milliseconds.
fn seconds(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

impl Metrics {
    /// One report received: one of [`REPORT_OUTCOMES`], with its samples and how long storing
    /// and analysing it took.
    pub fn report(&self, outcome: &'static str, samples: usize, seconds: f64) {
        debug_assert!(REPORT_OUTCOMES.contains(&outcome), "unlisted {outcome}");
        self.reports.get_or_create(&OutcomeLabels { outcome }).inc();
        self.samples.inc_by(samples as u64);
        self.ingest_seconds.observe(seconds);
    }

    /// One notification attempt: one of [`NOTIFICATION_OUTCOMES`].
    pub fn notification(&self, outcome: &'static str) {
        debug_assert!(
            NOTIFICATION_OUTCOMES.contains(&outcome),
            "unlisted {outcome}"
        );
        self.notifications
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// A request refused because its credential (of kind `credential`) spent `budget`, one of
    /// [`BUDGETS`].
    pub fn refused(&self, budget: &'static str, credential: &'static str) {
        debug_assert!(BUDGETS.contains(&budget), "unlisted {budget}");
        self.refusals
            .get_or_create(&RefusalLabels { budget, credential })
            .inc();
    }

    /// A connection closed at once: its client address had its share open.
    pub fn connection_refused(&self) {
        self.connections_refused.inc();
    }

    /// Log lines of warning not written: their credential had written its share this minute.
    pub fn warnings_held_back(&self, lines: u64) {
        self.warnings_held_back.inc_by(lines);
    }

    /// What other servers on the database stored was read again: `hosts` of them, or every
    /// active guest (`None`), in `seconds` of the writer's time.
    pub fn read_elsewhere(&self, hosts: Option<usize>, seconds: f64) {
        self.follower_reads.inc();
        if let Some(hosts) = hosts {
            self.follower_hosts.inc_by(hosts as u64);
        }
        self.follower_read_seconds.observe(seconds);
    }

    /// How many requests were refused for `budget`, of every kind of credential (for tests).
    pub fn refusals_of(&self, budget: &'static str) -> u64 {
        crate::budgets::CREDENTIAL_KINDS
            .iter()
            .map(|&credential| {
                self.refusals
                    .get_or_create(&RefusalLabels { budget, credential })
                    .get()
            })
            .sum()
    }

    /// The exposition of what `scrape` holds and of the server's counters, in `format`, as it
    /// is sent in `encoding`: the fleet's and the server's own families from
    /// `prometheus-client`, then the per-guest ones ([`guests`]), as the crate would write them
    /// after its registered metrics.
    pub fn render(
        &self,
        scrape: &Scrape,
        format: Format,
        encoding: Encoding,
    ) -> AppResult<Vec<u8>> {
        let mut registry = Registry::default();
        register_fleet(&mut registry, scrape);
        self.register_own(&mut registry, scrape.external_url);
        let mut own = String::new();
        encode(&mut own, &registry).map_err(|e| AppError::encode("the metrics", e))?;
        let own = match format {
            Format::OpenMetrics => own
                .strip_suffix(EOF)
                .ok_or_else(|| AppError::Internal("the metrics ended without # EOF".into()))?
                .to_string(),
            Format::Classic => format::to_classic(&own)?,
        };
        // With an eighth more room, for guests that came since.
        let last_bytes = self.last_exposition_bytes.load(Ordering::Relaxed);
        let mut out = Out::new(encoding, last_bytes + last_bytes / 8);
        out.text.push_str(&own);
        guests::write(&mut out, &scrape.fleet, scrape.now_ms, format)?;
        if format == Format::OpenMetrics {
            out.text.push_str(EOF);
        }
        let (body, text_bytes) = out.finish()?;
        self.last_exposition_bytes
            .store(text_bytes, Ordering::Relaxed);
        Ok(body)
    }

    fn register_own(&self, registry: &mut Registry, external_url: &str) {
        let info = Family::<ServerLabels, FloatGauge>::default();
        info.get_or_create(&ServerLabels {
            version: env!("CARGO_PKG_VERSION"),
            external_url: show_invisible(external_url).into_owned(),
        })
        .set(1.0);
        registry.register(
            "tickscope_server_info",
            "Always 1: the server's version, and the address users reach its pages at (serve --external-url), for links",
            info,
        );
        registry.register(
            "tickscope_ingest_reports",
            "Agent reports received, by outcome",
            self.reports.clone(),
        );
        registry.register(
            "tickscope_ingest_samples",
            "Guest samples stored",
            self.samples.clone(),
        );
        registry.register_with_unit(
            "tickscope_ingest_duration",
            "Time to validate, store and analyse one report",
            Unit::Seconds,
            self.ingest_seconds.clone(),
        );
        registry.register(
            "tickscope_notifications",
            "Alert notification attempts, by outcome",
            self.notifications.clone(),
        );
        registry.register(
            "tickscope_budget_refusals",
            "Requests refused because their credential (a token, a session, or a client address without one) spent a budget, by budget and kind of credential (docs/security.md)",
            self.refusals.clone(),
        );
        registry.register(
            "tickscope_connections_refused",
            "Connections closed at once because their client address had its share open (serve --max-connections-per-address)",
            self.connections_refused.clone(),
        );
        registry.register(
            "tickscope_log_warnings_held_back",
            "Warnings not written to the log because their credential had written its share that minute (each written line says how many of its credential's were held back before it)",
            self.warnings_held_back.clone(),
        );
        registry.register(
            "tickscope_follower_reads",
            "Reads of what other servers on the database stored (PostgreSQL): of the hosts they announced within a quarter of a second together, or of every active guest after announcements may have been missed",
            self.follower_reads.clone(),
        );
        registry.register(
            "tickscope_follower_hosts_read",
            "Hosts those reads read again (hosts read over reads: how many one read takes)",
            self.follower_hosts.clone(),
        );
        registry.register_with_unit(
            "tickscope_follower_read_duration",
            "Time one of those reads kept the writer, which stores none of this server's reports meanwhile (a due read takes a bounded number of hosts)",
            Unit::Seconds,
            self.follower_read_seconds.clone(),
        );
    }
}

/// The fleet's totals, its hosts' last reports and its open alerts.
fn register_fleet(registry: &mut Registry, scrape: &Scrape) {
    // Counts only: the cost model does not change them.
    let totals = scrape
        .fleet
        .index(scrape.now_ms)
        .totals(&Default::default());
    registry.register(
        "tickscope_fleet_guests",
        "Guests reported in the last 15 minutes",
        gauge(totals.guests as f64),
    );
    registry.register(
        "tickscope_fleet_hosts",
        "Hosts with a guest reported in the last 15 minutes",
        gauge(totals.hosts as f64),
    );
    registry.register(
        "tickscope_fleet_ticking_guests",
        "Guests that tick or poll while idle",
        gauge(totals.ticking as f64),
    );
    registry.register(
        "tickscope_fleet_wasted_cpu_cores",
        "Host CPU the whole fleet wastes while idle, in cores",
        gauge(totals.wasted_cores),
    );

    let last_report = Family::<HostLabels, FloatGauge>::default();
    for h in scrape.hosts {
        last_report
            .get_or_create(&HostLabels {
                host: show_invisible(&h.name).into_owned(),
            })
            .set(seconds(h.last_report_ms));
    }
    registry.register_with_unit(
        "tickscope_host_last_report_timestamp",
        "When the host's agent last reported, in seconds since the epoch (server clock): time() minus it is how long the agent has been silent",
        Unit::Seconds,
        last_report,
    );

    let open = Family::<AlertLabels, FloatGauge>::default();
    for state in [AlertState::Pending, AlertState::Firing] {
        for severity in ["info", "warning", "critical"] {
            let count = scrape
                .open_alerts
                .iter()
                .find(|(s, v, _)| *s == state && v == severity)
                .map_or(0, |(_, _, count)| *count);
            let labels = AlertLabels {
                state: state.as_str().into(),
                severity: severity.into(),
            };
            open.get_or_create(&labels).set(count as f64);
        }
    }
    registry.register(
        "tickscope_alerts",
        "Open alerts by state and severity",
        open,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> Scrape<'static> {
        Scrape {
            fleet: Arc::default(),
            now_ms: 0,
            hosts: &[],
            open_alerts: &[],
            external_url: "https://tickscope.example",
        }
    }

    /// What `metrics` renders of an empty fleet in `format`, as text.
    fn text(metrics: &Metrics, format: Format) -> String {
        let body = metrics
            .render(&empty(), format, Encoding::Identity)
            .unwrap();
        String::from_utf8(body).unwrap()
    }

    #[test]
    fn known_outcomes_are_counted_from_zero_in_both_formats() {
        let metrics = Metrics::default();
        metrics.report("stored", 3, 0.01);
        let open_metrics = text(&metrics, Format::OpenMetrics);
        let classic = text(&metrics, Format::Classic);
        for text in [&open_metrics, &classic] {
            for (family, outcome, value) in [
                ("tickscope_ingest_reports_total", "stored", 1),
                ("tickscope_ingest_reports_total", "duplicate", 0),
                ("tickscope_ingest_reports_total", "refused", 0),
                ("tickscope_notifications_total", "delivered", 0),
                ("tickscope_notifications_total", "retried", 0),
                ("tickscope_notifications_total", "given_up", 0),
                ("tickscope_notifications_total", "alertmanager_sent", 0),
                ("tickscope_notifications_total", "alertmanager_failed", 0),
            ] {
                let line = format!("{family}{{outcome=\"{outcome}\"}} {value}\n");
                assert!(text.contains(&line), "{line} in\n{text}");
            }
        }
        assert!(open_metrics.ends_with("# EOF\n"));
        assert!(classic.contains("# TYPE tickscope_ingest_reports_total counter\n"));
        assert!(!classic.contains("# EOF") && !classic.contains("# UNIT"));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "unlisted")]
    fn an_unlisted_outcome_is_caught() {
        Metrics::default().notification("bounced");
    }

    #[test]
    fn help_texts_need_no_escaping_in_either_format() {
        // OpenMetrics escapes `"` in HELP and the classic format does not; texts without `"`,
        // `\` or newlines read the same in both.
        let text = text(&Metrics::default(), Format::OpenMetrics);
        for line in text.lines().filter(|l| l.starts_with("# HELP ")) {
            assert!(!line.contains(['"', '\\']), "{line}");
        }
        assert!(
            text.contains("external_url=\"https://tickscope.example\"} 1"),
            "{text}"
        );
    }
}
