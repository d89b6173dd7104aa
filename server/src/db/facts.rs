//! The facts guests report about themselves, as stored.

use sqlx::FromRow;

use super::guests::IdleReading;
use crate::domain::{GuestId, HostId};

/// The newest facts of one guest from one source.
#[derive(Debug, Clone, FromRow)]
pub struct FactsRow {
    pub guest_id: GuestId,
    pub source: String,
    pub received_ms: i64,
    pub facts_json: String,
    /// When the guest's current VM process was first reported (server clock), if known: facts
    /// received before then are from an earlier boot.
    pub process_since_ms: Option<i64>,
}

/// Facts as one delivery stored them: now the guest's newest from their source.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredFacts {
    pub source: String,
    pub received_ms: i64,
    pub facts_json: String,
    /// The idle reading kept from them (none when the guest sent none, or sent one too soon
    /// after the last).
    pub reading: Option<IdleReading>,
    /// Whether they differ from the source's previous facts of this guest: a kernel or
    /// command-line change, to be measured.
    pub changed: bool,
}

/// Facts a guest delivered with its guest token, stored: for which guest, on which host.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveredFacts {
    pub guest_id: GuestId,
    pub host_id: HostId,
    /// The guest the token delivered to before, when its binding followed the VM to another
    /// host with this delivery.
    pub moved_from: Option<GuestId>,
    pub stored: StoredFacts,
}

/// One distinct set of facts of one guest and source, with the time it covers.
#[derive(Debug, Clone, FromRow)]
pub struct FactsSpanRow {
    pub source: String,
    pub first_received_ms: i64,
    pub received_ms: i64,
    pub facts_json: String,
}

/// One distinct set of facts a guest reported: a kernel or command-line event.
#[derive(Debug, Clone, FromRow)]
pub struct FactsEventRow {
    pub source: String,
    pub first_received_ms: i64,
    pub received_ms: i64,
    pub kernel_release: Option<String>,
    pub cmdline: Option<String>,
}

/// Events kept per guest and source: a guest that changes its command line on every delivery
/// cannot grow the table beyond this.
pub const MAX_EVENTS_PER_SOURCE: i64 = 100;

/// Idle readings are kept this long: the longest history a page reads (7 days) and a day more.
pub const IDLE_READINGS_KEPT_MS: i64 = 8 * 24 * 60 * 60 * 1000;
/// A source's readings of one guest closer together than this are not kept: agents report every
/// 10 s and the probe delivers every minute, so a reading per interval is all the analysis can
/// use, and a guest posting in a loop cannot grow the table faster (at most 69,120 rows a guest
/// and source over the eight days kept).
pub const IDLE_READING_MIN_GAP_MS: i64 = 10_000;
