//! What the alerting reads and writes, narrowed from the server's state: the database, the live
//! fleet, where links point, the counters, the delivery wake-up and the clock.

use std::sync::Arc;
use std::time::Duration;

use super::client::Reach;
use crate::clock::SharedClock;
use crate::db::Db;
use crate::fleet::LiveFleet;
use crate::intake::Intake;
use crate::lease::Lease;
use crate::metrics::Metrics;

#[derive(Clone)]
pub struct AlertContext {
    pub db: Db,
    pub fleet: LiveFleet,
    /// The address users reach the dashboard at, for the links in notifications.
    pub external_url: String,
    /// The first retry of a failed notification waits this long; each next one twice as long.
    pub retry_base_ms: i64,
    /// How often the rules are evaluated.
    pub every: Duration,
    pub metrics: Arc<Metrics>,
    /// Wakes the notification sender when an evaluation wrote something to the outbox.
    pub notifier: Arc<tokio::sync::Notify>,
    pub clock: SharedClock,
    /// The evaluation and the senders run only while this server holds the lease.
    pub lease: Lease,
    /// Brings the fleet up to date with what other servers on the database stored, before the
    /// first evaluation of each time this server takes the lease.
    pub intake: Intake,
    /// The addresses notifications may be sent to.
    pub reach: Reach,
}
