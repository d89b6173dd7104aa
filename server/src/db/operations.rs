//! Every operation storage offers the rest of the server, in one list: the contract each backend
//! (`sqlite/`, `postgres/`) fulfils with a method of the same name and signature. [`Db`] forwards
//! each call to the backend it was opened on; a backend that lacks one does not compile.

#[cfg(feature = "test-support")]
use std::collections::HashMap;

use super::alerts::{
    AlertRow, AlertWrite, OutboxCounts, OutboxRow, PendingGroup, ReceiverRow, ReceiverSettings,
    RuleRow, RuleSettings, SilenceRow,
};
use super::change_records::{ChangeRecordRow, NewChangeRecord, SettledFigures};
use super::error::StoreResult;
use super::facts::{DeliveredFacts, FactsEventRow, FactsRow, FactsSpanRow};
use super::guests::{GuestRow, GuestScope, IdleReading, IntervalRow, ReportedSample, SampleRow};
use super::history::StoredHistories;
use super::hosts::{HostRow, HostsOutstanding};
#[cfg(feature = "test-support")]
use super::reports::RawSample;
use super::reports::{ReportToStore, StoreOutcome};
use super::rollups::RollupRow;
#[cfg(feature = "test-support")]
use super::rollups::StoredCounts;
use super::store::{Backend, Db};
use super::tokens::{TokenListRow, TokenRow};
use super::users::UserRow;
use crate::analysis::fleet_trend::FleetPoint;
use crate::analysis::history::Summary;
use crate::domain::{
    AlertId, AlertState, ChangeRecordId, GuestId, HostId, OutboxId, ReceiverId, ReportId, RuleId,
    SilenceId, Subject, TokenId, TokenRole, UserId, UserRole,
};
use crate::ingest::ValidReport;
use crate::ingest::binding::{Candidate, Delivery, Refusal, TokenBinding};
use crate::ingest::facts::ValidFacts;
use crate::ingest::process_totals::SampleSpan;
use crate::ingest::samples::PreviousTotals;

/// Writes, for each signature, a method of [`Db`] that calls the backend's method of the same
/// name with the same arguments.
macro_rules! forward {
    ($(
        $(#[$attr:meta])*
        pub async fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
    )*) => {
        impl Db {
            $(
                $(#[$attr])*
                pub async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    match &self.backend {
                        Backend::Sqlite(db) => db.$name($($arg),*).await,
                        Backend::Postgres(db) => db.$name($($arg),*).await,
                    }
                }
            )*
        }
    };
}

forward! {
        /// Commits one write, to learn whether the database can be written now (a read-only file
        /// or mount, a full disk, a database server that is down or read-only).
        pub async fn probe_write(&self, now_ms: i64) -> StoreResult<()>;
        // Reports and samples
        /// Stores a batch of reports in one transaction (group commit): one fsync for all of them
        /// instead of one each, and a few statements a table for the reports of distinct hosts
        /// and tokens, whatever their number. Each report is stored whole or not at all: a
        /// duplicate, a refused report or one whose statement fails leaves the others alone (a set
        /// that fails is written again report by report). `decide_samples` decides each guest's
        /// sample from the running totals stored before (`ingest::samples::sample_spans`); it is
        /// called inside the transaction, so that what it was given is what the report follows, a
        /// second report of the same host in the batch seeing the first.
        ///
        /// The outer error is the batch's: nothing of it was written (the commit failed, or the
        /// database did). The inner ones are each report's.
        pub async fn store_reports(&self, batch: &[ReportToStore<'_>], decide_samples: impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>) -> StoreResult<Vec<StoreResult<StoreOutcome>>>;
        /// Stores one report in a transaction of its own: [`Db::store_reports`] with a batch of one.
        pub async fn store_lone_report(&self, report: &ValidReport, token_id: TokenId, received_ms: i64, decide_samples: impl Fn(&ValidReport, &PreviousTotals) -> Vec<SampleSpan>) -> StoreResult<StoreOutcome>;
        /// Rows in the reports and samples tables, for checking that refused input stored nothing.
        pub async fn count_reports_and_samples(&self) -> StoreResult<(i64, i64)>;
        /// Hosts whose name does not match a SQL LIKE pattern: the demo refuses to mix its simulated
        /// hosts into a database that real agents report to. The pattern matches ignoring case,
        /// with no escape character.
        pub async fn count_hosts_not_like(&self, pattern: &str) -> StoreResult<i64>;
        // Guests and their windows
        /// The guests in `scope`.
        pub async fn guests_in(&self, scope: GuestScope<'_>) -> StoreResult<Vec<GuestRow>>;
        /// The samples of the guests in `scope` received within `window_ms` before each guest's
        /// newest one, by guest, oldest first. Both ends are on the server's clock, so a host whose
        /// clock is off, or jumps, still gets a full window.
        pub async fn window_intervals(&self, scope: GuestScope<'_>, window_ms: i64) -> StoreResult<Vec<IntervalRow>>;
        /// The idle readings of the guests in `scope` that can cover samples of their windows (those
        /// received since `reach_ms` before the window began), by guest, oldest first.
        pub async fn window_idle_readings(&self, scope: GuestScope<'_>, window_ms: i64, reach_ms: i64) -> StoreResult<Vec<IdleReading>>;
        pub async fn guest_host_id(&self, guest_id: GuestId) -> StoreResult<Option<HostId>>;
        /// The newest report stored of each of `hosts` (those that have one).
        pub async fn newest_reports(&self, hosts: &[HostId]) -> StoreResult<Vec<(HostId, ReportId)>>;
        /// The samples of the reports of `hosts` stored after report `after` (ids are given in the
        /// order a host's reports commit: each report's transaction holds its host's row), by
        /// guest, oldest first; with their hosts and reports.
        pub async fn samples_of_reports_after(&self, hosts: &[HostId], after: ReportId) -> StoreResult<Vec<ReportedSample>>;
        /// A guest's newest samples, newest stored first.
        pub async fn recent_samples(&self, guest_id: GuestId, limit: i64) -> StoreResult<Vec<SampleRow>>;
        /// A guest's samples received in [from_ms, to_ms), oldest first, and the idle readings
        /// that can cover them (received from `reach_ms` before `from_ms` on).
        pub async fn samples_between(&self, guest_id: GuestId, from_ms: i64, to_ms: i64, reach_ms: i64) -> StoreResult<(Vec<IntervalRow>, Vec<IdleReading>)>;
        // Guest facts
        /// Stores facts a guest probe posted itself with a guest token, for the guest `decide`
        /// chooses (`ingest::binding`) from the token's binding and the guests with the UUID the
        /// facts name (`uuid`, as the guest sent it; either byte order), read in the same
        /// transaction; binds the token to that guest when it says so. The inner error is the
        /// decision's refusal: nothing was written.
        pub async fn record_guest_facts(&self, token_id: TokenId, uuid: &str, facts: &ValidFacts, now_ms: i64, decide: impl Fn(&TokenBinding, &[Candidate], bool) -> Result<Delivery, Refusal>) -> StoreResult<Result<DeliveredFacts, Refusal>>;
        /// The newest facts from every source of every guest, or of some hosts' guests, by id.
        pub async fn latest_facts(&self, hosts: Option<&[HostId]>) -> StoreResult<Vec<FactsRow>>;
        /// Every set of facts a guest reported, from when it was first to when it was last received
        /// (server clock), with the newest full facts of the set; oldest first.
        pub async fn facts_spans(&self, guest_id: GuestId) -> StoreResult<Vec<FactsSpanRow>>;
        /// A guest's kernel events, newest first.
        pub async fn facts_history(&self, guest_id: GuestId) -> StoreResult<Vec<FactsEventRow>>;
        /// Every kernel or command-line change of each guest (or of `guest_id`): a facts row that
        /// has an older one from the same source (the first facts a guest reports are not a change).
        /// As (guest id, source, first received, server clock ms), oldest first (equal times by id,
        /// so that the order does not depend on the plan).
        pub async fn fact_changes(&self, guest_id: Option<GuestId>) -> StoreResult<Vec<(GuestId, String, i64)>>;
        /// [`Db::fact_changes`] of one host's guests.
        pub async fn fact_changes_of_host(&self, host_id: HostId) -> StoreResult<Vec<(GuestId, String, i64)>>;
        // Many guests' history
        /// The samples of `guest_ids` received in [from_ms, to_ms), the idle readings that can cover
        /// them (received from `reach_ms` before `from_ms` on), their rollups starting in the span
        /// and every set of facts they reported: what [`Db::samples_between`],
        /// [`Db::rollups_between`] and [`Db::facts_spans`] give for one guest, for all of them in
        /// four queries. Ties (of received_ms, of a rollup's start) come in a fixed order.
        pub async fn histories_between(&self, guest_ids: &[GuestId], from_ms: i64, to_ms: i64, reach_ms: i64) -> StoreResult<StoredHistories>;
        // Hosts
        /// Every host that ever reported, by name.
        pub async fn hosts(&self) -> StoreResult<Vec<HostRow>>;
        /// One host.
        pub async fn host(&self, id: HostId) -> StoreResult<Option<HostRow>>;
        /// The hosts of `ids` that exist, in no promised order.
        pub async fn hosts_by_id(&self, ids: &[HostId]) -> StoreResult<Vec<HostRow>>;
        /// How many hosts ever reported, how many are silent (last report before
        /// `silent_before_ms`) and how many blind (their agent names something it cannot see),
        /// and the first `limit` silent ones, most recently silent first.
        pub async fn hosts_outstanding(&self, silent_before_ms: i64, limit: i64) -> StoreResult<HostsOutstanding>;
        /// Up to `limit` hosts that reported since `silent_before_ms`, by name byte by byte,
        /// after `after_name`.
        pub async fn reporting_hosts_by_name(&self, silent_before_ms: i64, after_name: Option<&str>, limit: i64) -> StoreResult<Vec<HostRow>>;
        // Rollups and retention
        /// Guests with raw samples received before `before_ms`.
        pub async fn guests_with_samples_before(&self, before_ms: i64) -> StoreResult<Vec<GuestId>>;
        /// Replaces a guest's raw samples received before `before_ms` by their five-minute rollups,
        /// in one transaction: the history is never counted twice, nor lost.
        /// Samples received in `keep` ([from, to)) stay raw whatever their age.
        pub async fn roll_up_guest(&self, guest_id: GuestId, windows: &[(i64, Summary)], before_ms: i64, keep: Option<(i64, i64)>) -> StoreResult<u64>;
        /// Merges the five-minute rollups of whole hours before `before_ms` (a multiple of an hour)
        /// into hourly ones. Returns the five-minute rows merged.
        pub async fn merge_hourly_rollups(&self, before_ms: i64) -> StoreResult<u64>;
        /// The reports of a guest's samples received in [from_ms, to_ms).
        pub async fn reports_of_samples(&self, guest_id: GuestId, from_ms: i64, to_ms: i64) -> StoreResult<Vec<ReportId>>;
        /// Deletes hourly rollups that start before `rollups_before_ms` (and the fleet's points
        /// written before it), and reports received
        /// before `reports_before_ms`, whose samples must have been rolled up (a sample refers to
        /// its report), but `keep_reports`, which samples still refer to. Returns the rows deleted.
        pub async fn expire(&self, rollups_before_ms: i64, reports_before_ms: i64, keep_reports: &[ReportId]) -> StoreResult<u64>;
        /// A guest's rollups starting in [from_ms, to_ms), oldest first.
        pub async fn rollups_between(&self, guest_id: GuestId, from_ms: i64, to_ms: i64) -> StoreResult<Vec<RollupRow>>;
        // The fleet over time
        /// Writes the fleet's point of its five minutes, replacing one written earlier in them.
        pub async fn record_fleet_point(&self, point: &FleetPoint) -> StoreResult<()>;
        /// The fleet's points written in [from_ms, to_ms), oldest first.
        pub async fn fleet_points(&self, from_ms: i64, to_ms: i64) -> StoreResult<Vec<FleetPoint>>;
        // Changes made to guests, as recorded
        /// Stores a change made to a guest; returns its id.
        pub async fn record_change(&self, change: &NewChangeRecord<'_>) -> StoreResult<ChangeRecordId>;
        /// The recorded changes of one guest, or of every guest, newest first, at most `limit`.
        pub async fn change_records(&self, guest_id: Option<GuestId>, limit: i64) -> StoreResult<Vec<ChangeRecordRow>>;
        /// One recorded change, by its id.
        pub async fn change_record(&self, id: ChangeRecordId) -> StoreResult<Option<ChangeRecordRow>>;
        /// Changes made before `made_before_ms` whose measurement is not settled yet, oldest
        /// first, at most `limit`.
        pub async fn unsettled_change_records(&self, made_before_ms: i64, limit: i64) -> StoreResult<Vec<ChangeRecordRow>>;
        /// Stores a change's measurement once it can no longer change.
        pub async fn settle_change_record(&self, id: ChangeRecordId, figures: &SettledFigures) -> StoreResult<()>;
        /// The host an agent token is bound to; `None` for a token bound to none yet, or not an
        /// agent's.
        pub async fn agent_token_host(&self, token_id: TokenId) -> StoreResult<Option<String>>;
        // Alerts, silences, receivers and the outbox
        pub async fn alert_rules(&self) -> StoreResult<Vec<RuleRow>>;
        /// Adds a rule (`id` None) or replaces one; returns its id.
        pub async fn save_alert_rule(&self, id: Option<RuleId>, rule: &RuleSettings, by: &str, now_ms: i64) -> StoreResult<RuleId>;
        /// Deletes a rule with its alerts and their notifications still waiting.
        pub async fn delete_alert_rule(&self, id: RuleId) -> StoreResult<()>;
        /// Pending and firing alerts, oldest first.
        pub async fn open_alerts(&self) -> StoreResult<Vec<AlertRow>>;
        /// How many alerts are open, by state and severity (those with none are left out): counted
        /// in the database, for `/metrics`.
        pub async fn open_alert_counts(&self) -> StoreResult<Vec<(AlertState, String, i64)>>;
        /// The `limit` oldest firing alerts (as `open_alerts` orders them), and how many fire:
        /// what a page shows of them costs what it shows, however many fire.
        pub async fn firing_alerts(&self, limit: i64) -> StoreResult<(Vec<AlertRow>, i64)>;
        /// Resolved alerts, newest first.
        pub async fn resolved_alerts(&self, limit: i64) -> StoreResult<Vec<AlertRow>>;
        /// Every alert a guest or host has had, newest first.
        pub async fn alerts_of(&self, subject: Subject, subject_id: i64) -> StoreResult<Vec<AlertRow>>;
        /// Writes one evaluation's alert changes and their notifications, all or nothing.
        pub async fn write_alerts(&self, writes: Vec<AlertWrite>, now_ms: i64) -> StoreResult<()>;
        /// Marks an open alert acknowledged; `false` if there is no such open alert.
        pub async fn acknowledge_alert(&self, id: AlertId, by: &str, now_ms: i64) -> StoreResult<bool>;
        /// Silences that have not ended by `now_ms`, soonest ending first.
        pub async fn silences(&self, now_ms: i64) -> StoreResult<Vec<SilenceRow>>;
        #[allow(clippy::too_many_arguments)]
        pub async fn insert_silence(&self, rule_id: Option<RuleId>, pattern: &str, starts_ms: i64, ends_ms: i64, reason: &str, by: &str, now_ms: i64) -> StoreResult<SilenceId>;
        /// Ends a silence now; `false` if there is no such silence still running.
        pub async fn expire_silence(&self, id: SilenceId, now_ms: i64) -> StoreResult<bool>;
        pub async fn receivers(&self) -> StoreResult<Vec<ReceiverRow>>;
        pub async fn receiver(&self, id: ReceiverId) -> StoreResult<Option<ReceiverRow>>;
        pub async fn insert_receiver(&self, r: &ReceiverSettings, now_ms: i64) -> StoreResult<ReceiverId>;
        /// Changes a receiver; `None` for the auth header or CA keeps the stored one, `Some("")`
        /// removes it.
        pub async fn update_receiver(&self, id: ReceiverId, r: &ReceiverSettings) -> StoreResult<()>;
        /// Deletes a receiver with the notifications still waiting for it.
        pub async fn delete_receiver(&self, id: ReceiverId) -> StoreResult<()>;
        /// Every (receiver, group) of an enabled receiver with notifications waiting.
        pub async fn pending_groups(&self) -> StoreResult<Vec<PendingGroup>>;
        /// The notifications of one (receiver, group) whose attempt is due by `now_ms`, oldest
        /// first.
        pub async fn group_notifications(&self, receiver_id: ReceiverId, group_key: &str, now_ms: i64) -> StoreResult<Vec<OutboxRow>>;
        /// Marks the notifications of one POST delivered, and the group as notified now.
        /// `group_key` None: rows posted alone, whose group is not remembered.
        pub async fn group_delivered(&self, receiver_id: ReceiverId, group_key: Option<&str>, ids: &[OutboxId], now_ms: i64) -> StoreResult<()>;
        /// Alerts Alertmanager is told about at `now_ms`: every firing one, and those that fired
        /// and resolved at `resolved_since_ms` or later.
        pub async fn alerts_to_announce(&self, resolved_since_ms: i64) -> StoreResult<Vec<AlertRow>>;
        /// Records a failed attempt: tried again at `next_attempt_ms`, or given up when `None`.
        pub async fn notification_failed(&self, id: OutboxId, error: &str, next_attempt_ms: Option<i64>, now_ms: i64) -> StoreResult<()>;
        pub async fn outbox_counts(&self) -> StoreResult<OutboxCounts>;
        // Settings
        /// A setting's stored value, if an admin ever saved it.
        pub async fn setting(&self, name: &str) -> StoreResult<Option<String>>;
        pub async fn save_setting(&self, name: &str, value: &str, by: &str, now_ms: i64) -> StoreResult<()>;
        // Tokens
        /// Stores a new token's hash. `host_name` binds an agent token to one host from the start,
        /// even one another token reports for (an admin replacing a host's token); without it, the
        /// first report binds it, to a host no other token has.
        pub async fn insert_token(&self, name: &str, role: TokenRole, sha256_hex: &str, host_name: Option<&str>, now_ms: i64) -> StoreResult<TokenId>;
        /// Stores agent tokens, given as (name, hash, host), each bound to its host, in one
        /// transaction: all of them or none.
        pub async fn insert_agent_tokens(&self, tokens: &[(String, String, String)], now_ms: i64) -> StoreResult<Vec<TokenId>>;
        /// Pins a guest token to a VM (its UUID) and, if given, to the host it is on: an admin's
        /// word, which it keeps even where another token held the UUID. The token's next delivery
        /// binds it to that host's guest (`ingest::binding`); `false` when there is no such
        /// guest token.
        pub async fn pin_guest_token(&self, id: TokenId, uuid: &str, host_name: Option<&str>) -> StoreResult<bool>;
        /// The tokens whose hash starts with `prefix` (its first [`LOOKUP_PREFIX_CHARS`](super::LOOKUP_PREFIX_CHARS) hex
        /// digits): the caller compares the whole hash itself, in constant time.
        pub async fn tokens_by_hash_prefix(&self, prefix: &str) -> StoreResult<Vec<TokenRow>>;
        /// Every token, newest first.
        pub async fn tokens(&self) -> StoreResult<Vec<TokenListRow>>;
        /// Revokes a token from now on; false when there is no such token or it was revoked before.
        pub async fn revoke_token(&self, id: TokenId, now_ms: i64) -> StoreResult<bool>;
        // Users
        /// Adds a user; a name already taken is refused.
        pub async fn insert_user(&self, name: &str, role: UserRole, password_hash: &str, now_ms: i64) -> StoreResult<UserId>;
        pub async fn user_by_name(&self, name: &str) -> StoreResult<Option<UserRow>>;
        pub async fn user_by_id(&self, id: UserId) -> StoreResult<Option<UserRow>>;
        pub async fn record_login(&self, user_id: UserId, now_ms: i64) -> StoreResult<()>;
        /// Every user, by name.
        pub async fn users(&self) -> StoreResult<Vec<UserRow>>;
        /// Gives a user a new password hash (which ends their sessions).
        pub async fn set_password(&self, user_id: UserId, password_hash: &str) -> StoreResult<()>;
        /// Changes a user's role; refused when it would leave no admin.
        pub async fn set_role(&self, user_id: UserId, role: UserRole) -> StoreResult<()>;
        /// Removes a user (whose sessions then lead nowhere); refused for the last admin.
        pub async fn delete_user(&self, user_id: UserId) -> StoreResult<()>;
        // Tests and benchmarks only (the `test-support` feature)
        /// Writes out what the database holds only in its log, so that a benchmark measures what
        /// comes next alone (SQLite empties its write-ahead log; PostgreSQL checkpoints).
        #[cfg(feature = "test-support")]
        pub async fn checkpoint(&self) -> StoreResult<()>;
        /// Rebuilds the tables without their free space (after a retention deleted much), so that
        /// a size measured next is what the live rows take.
        #[cfg(feature = "test-support")]
        pub async fn vacuum(&self) -> StoreResult<()>;
        /// Makes every later insert of a sample with `vcpus` vCPUs fail (a trigger), as a
        /// statement fails on a fault: what a batch does with one failing report is tested so.
        #[cfg(feature = "test-support")]
        pub async fn plant_sample_failure(&self, vcpus: u32) -> StoreResult<()>;
        /// The sequence numbers of one agent run's reports, in the order they were stored.
        #[cfg(feature = "test-support")]
        pub async fn report_sequence(&self, run_id: &str) -> StoreResult<Vec<i64>>;
        /// Inserts sample rows as they are, in one transaction, one `INSERT` each: the ingest
        /// benchmark's baseline of bare inserts.
        #[cfg(feature = "test-support")]
        pub async fn insert_raw_samples(&self, rows: &[RawSample]) -> StoreResult<()>;
        /// Every guest's id by (host name, guest name).
        #[cfg(feature = "test-support")]
        pub async fn guest_ids_by_name(&self) -> StoreResult<HashMap<(String, String), GuestId>>;
        /// Some stored report's id.
        #[cfg(feature = "test-support")]
        pub async fn any_report_id(&self) -> StoreResult<ReportId>;
        /// The database's plan for [`Db::window_intervals`], one line per step, in its own
        /// wording: the tests check that it looks the window up by index rather than scanning
        /// every sample ever stored.
        #[cfg(feature = "test-support")]
        pub async fn window_query_plan(&self, scope: GuestScope<'_>) -> StoreResult<Vec<String>>;
        /// The database's plan for [`Db::tokens_by_hash_prefix`], for the test that it uses its
        /// index.
        #[cfg(feature = "test-support")]
        pub async fn token_lookup_plan(&self) -> StoreResult<Vec<String>>;
        /// The database's plans for the retention's search for guests to roll up and for a
        /// guest's rollups, one line per step: the tests check that both go through an index.
        #[cfg(feature = "test-support")]
        pub async fn rollup_query_plans(&self) -> StoreResult<Vec<String>>;
        #[cfg(feature = "test-support")]
        /// Rows in each table that holds the fleet's history.
        pub async fn stored_counts(&self) -> StoreResult<StoredCounts>;
}
