//! `/metrics`: the fleet and the server itself in the Prometheus (OpenMetrics) text format.
//!
//! The server's own counters live as long as the server; the fleet's gauges are built from the
//! current state at each scrape, so a guest that stopped reporting leaves the output at once.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::db::AlertRow;
use crate::error::{AppError, AppResult};
use crate::fleet::{self, AnalysedGuest};
use crate::visible::show_invisible;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GuestLabels {
    guest: String,
    guest_id: String,
    uuid: String,
    host: String,
    hypervisor: String,
    tick_mode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlertLabels {
    state: String,
    severity: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// The server's own counters.
#[derive(Debug)]
pub struct Metrics {
    reports: Family<OutcomeLabels, Counter>,
    samples: Counter,
    ingest_seconds: Histogram,
    notifications: Family<OutcomeLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            reports: Family::default(),
            samples: Counter::default(),
            // 0.5 ms to about 4 s.
            ingest_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            notifications: Family::default(),
        }
    }
}

impl Metrics {
    /// One report received: `stored`, `duplicate` or `refused`, with its samples and how long
    /// storing and analysing it took.
    pub fn report(&self, outcome: &'static str, samples: usize, seconds: f64) {
        self.reports.get_or_create(&OutcomeLabels { outcome }).inc();
        self.samples.inc_by(samples as u64);
        self.ingest_seconds.observe(seconds);
    }

    /// One notification attempt: `delivered`, `retried` or `given_up`.
    pub fn notification(&self, outcome: &'static str) {
        self.notifications
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// The exposition: the fleet's `guests` (the current state), its open `alerts`, and the
    /// server's counters.
    pub fn render(
        &self,
        guests: &[std::sync::Arc<AnalysedGuest>],
        alerts: &[AlertRow],
    ) -> AppResult<String> {
        let mut registry = Registry::default();
        let family = || Family::<GuestLabels, FloatGauge>::default();
        let (cpu, waste, wakeups, vcpus) = (family(), family(), family(), family());
        for g in guests {
            let labels = GuestLabels {
                // Names as sent by agents: a dashboard must not show them reversed or blank.
                guest: show_invisible(&g.name).into_owned(),
                guest_id: g.id.to_string(),
                uuid: g.uuid.clone().unwrap_or_default(),
                host: show_invisible(&g.host).into_owned(),
                hypervisor: show_invisible(&g.hypervisor).into_owned(),
                tick_mode: g.verdict.classification.mode.as_str().to_string(),
            };
            if let Some(rates) = g.verdict.rates {
                cpu.get_or_create(&labels).set(rates.host_cpu_pct / 100.0);
                wakeups.get_or_create(&labels).set(rates.wakeups_per_vcpu_s);
            }
            waste.get_or_create(&labels).set(g.wasted_cpu_pct() / 100.0);
            vcpus.get_or_create(&labels).set(f64::from(g.vcpus));
        }
        registry.register(
            "tickscope_guest_host_cpu_ratio",
            "Host CPU the guest used over the last 5 minutes, in cores (1 = one host core)",
            cpu,
        );
        registry.register(
            "tickscope_guest_wasted_cpu_cores",
            "Host CPU the guest wastes ticking or polling while idle, in cores",
            waste,
        );
        registry.register(
            "tickscope_guest_wakeups_per_vcpu_per_second",
            "vCPU thread wake-ups per vCPU per second over the last 5 minutes",
            wakeups,
        );
        registry.register("tickscope_guest_vcpus", "vCPUs of the guest", vcpus);

        let totals = fleet::totals(guests, &Default::default());
        let gauge = |value: f64| {
            let g = FloatGauge::default();
            g.set(value);
            g
        };
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

        let open = Family::<AlertLabels, FloatGauge>::default();
        for state in ["pending", "firing"] {
            for severity in ["info", "warning", "critical"] {
                let labels = AlertLabels {
                    state: state.into(),
                    severity: severity.into(),
                };
                let count = alerts
                    .iter()
                    .filter(|a| a.state == state && a.severity == severity)
                    .count();
                open.get_or_create(&labels).set(count as f64);
            }
        }
        registry.register(
            "tickscope_alerts",
            "Open alerts by state and severity",
            open,
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
        let mut text = String::new();
        encode(&mut text, &registry)
            .map_err(|e| AppError::Internal(format!("encoding the metrics: {e}")))?;
        Ok(text)
    }
}
