//! `guests.csv`: the ranked guests, one row each, most wasteful first.

use std::collections::HashMap;
use std::sync::Arc;

use super::cells::{Context, CsvChunks, csv_chunks, flag, number, rfc3339, text_cell};
use crate::analysis::history::Accumulated;
use crate::analysis::{cost, plan};
use crate::domain::GuestId;
use crate::fleet::{self, AnalysedGuest, WasteSoFar};

/// Columns of the guests export, in order. The first 19 are as they always were; the others were
/// added at the end (issues 16 and 29), so that a reader by position still finds what it did.
pub const GUEST_COLUMNS: [&str; 48] = [
    "rank",
    "guest",
    "uuid",
    "host",
    "hypervisor",
    "vcpus",
    "host_cpu_pct",
    "wakeups_per_vcpu_s",
    "tick_mode",
    "tick_mode_confidence",
    "estimated_hz",
    "wasted_cpu_pct",
    "wasted_kwh_per_year",
    "wasted_cost_per_year",
    "currency",
    "kernel_release",
    "distro",
    "suggestion",
    "expected_saving_cpu_pct",
    // Added in issue 16.
    "guest_id",
    "management",
    "nohz_build",
    "config_hz",
    "measured_hz",
    "idle_share",
    "last_report",
    "window_start",
    "window_end",
    "window_s",
    "wasted_core_hours_24h",
    "measured_hours_24h",
    "wasted_cpu_pct_24h",
    "wasted_core_hours_7d",
    "measured_hours_7d",
    "wasted_cpu_pct_7d",
    "history_until",
    "computed_at",
    "group_key",
    "facts_source",
    "demo",
    // Added in issue 29.
    "cause",
    "os",
    "platform",
    "platform_name",
    "platform_group",
    "platform_id",
    "platform_flavor",
    "idle_halt_poll_pct",
];

/// Waste averaged over the time measured in a span, in % of one core; `None` when nothing was
/// measured in it.
fn average_pct(a: &Accumulated) -> Option<f64> {
    (a.measured_hours > 0.0).then(|| 100.0 * a.wasted_core_hours / a.measured_hours)
}

/// The guests as CSV, written a chunk of rows at a time (see `CsvChunks`); `so_far` holds
/// each guest's waste over the last 24 h and 7 d up to `context.now_ms`; a guest missing from it
/// (all of them unless the export was asked for its history) gets empty cells there and in
/// `history_until`.
pub fn guests_csv(
    guests: Vec<Arc<AnalysedGuest>>,
    so_far: HashMap<GuestId, WasteSoFar>,
    context: Context,
) -> CsvChunks<impl FnMut() -> Option<Vec<String>> + Send + use<>> {
    let mut rows = guests.into_iter().enumerate();
    csv_chunks(&GUEST_COLUMNS, move || {
        let (i, g) = rows.next()?;
        Some(guest_row(i + 1, &g, so_far.get(&g.id), &context))
    })
}

/// Rows of the guests export for `guests`, the first of them ranked `first_rank`, after the
/// header if `header`: the export a batch of guests at a time, each batch with its history read
/// just before (`so_far`), so that a long export holds no copy of the fleet and no database
/// connection between batches. The batches' bytes, concatenated, are what [`guests_csv`] writes.
pub fn guests_csv_rows(
    first_rank: usize,
    guests: &[Arc<AnalysedGuest>],
    so_far: &HashMap<GuestId, WasteSoFar>,
    context: &Context,
    header: bool,
) -> crate::error::AppResult<Vec<u8>> {
    super::cells::csv_rows(
        header.then_some(&GUEST_COLUMNS[..]),
        guests
            .iter()
            .enumerate()
            .map(|(i, g)| guest_row(first_rank + i, g, so_far.get(&g.id), context)),
    )
}

/// The row of the guest ranked `rank`.
fn guest_row(
    rank: usize,
    g: &AnalysedGuest,
    spans: Option<&WasteSoFar>,
    context: &Context,
) -> Vec<String> {
    let model = &context.model;
    let v = &g.verdict;
    let yearly = cost::of_waste(v.waste.wasted_cpu_pct, model);
    // The change its cause comes from, as the plan has it.
    let first = plan::planned(&v.suggestions);
    let platform = g.platform.as_ref();
    let platform_part = |part: Option<&String>| part.map_or(String::new(), |t| text_cell(t));
    let k = g.kernel.as_ref();
    let opt = |value: Option<f64>| value.map_or(String::new(), number);
    let span = |pick: fn(&WasteSoFar) -> &Accumulated| -> [String; 3] {
        match spans.map(pick) {
            Some(a) => [
                number(a.wasted_core_hours),
                number(a.measured_hours),
                opt(average_pct(a)),
            ],
            None => Default::default(),
        }
    };
    let [day_wasted, day_measured, day_pct] = span(|w| &w.last_24h);
    let [week_wasted, week_measured, week_pct] = span(|w| &w.last_7d);
    vec![
        rank.to_string(),
        text_cell(&g.name),
        g.uuid.as_deref().map_or(String::new(), text_cell),
        text_cell(&g.host),
        text_cell(&g.hypervisor),
        g.vcpus.to_string(),
        opt(v.rates.map(|r| r.host_cpu_pct)),
        opt(v.rates.map(|r| r.wakeups_per_vcpu_s)),
        v.classification.mode.as_str().to_string(),
        v.classification.confidence.as_str().to_string(),
        v.classification
            .estimated_hz
            .map_or(String::new(), |hz| hz.to_string()),
        number(v.waste.wasted_cpu_pct),
        number(yearly.kwh_per_year),
        number(yearly.money_per_year),
        text_cell(&model.currency),
        text_cell(k.and_then(|k| k.kernel_release.as_deref()).unwrap_or("")),
        text_cell(k.and_then(|k| k.distro.as_deref()).unwrap_or("")),
        text_cell(first.map_or("", |s| s.title)),
        opt(first.and_then(|s| s.saving_cpu_pct)),
        // Added in issue 16.
        g.id.to_string(),
        text_cell(g.management.as_deref().unwrap_or("")),
        k.map_or(String::new(), |k| k.nohz.as_str().to_string()),
        k.and_then(|k| k.config_hz)
            .map_or(String::new(), |hz| hz.to_string()),
        k.and_then(|k| k.measured_hz).map_or(String::new(), number),
        opt(v.activity.idle_share()),
        rfc3339(g.last_seen_ms),
        // The window holds the samples received within its length before the newest.
        rfc3339(g.window_start_ms()),
        rfc3339(g.last_seen_ms),
        number(g.window_s),
        day_wasted,
        day_measured,
        day_pct,
        week_wasted,
        week_measured,
        week_pct,
        // Only where the 24 h and 7 d figures were read.
        spans.map_or(String::new(), |_| rfc3339(context.now_ms)),
        rfc3339(g.analysed_ms),
        fleet::group_key_of(g),
        text_cell(k.map_or("", |k| k.source.as_str())),
        flag(context.demo),
        // Added in issue 29.
        v.cause.map_or("", |c| c.as_str()).to_string(),
        g.os().family.as_str().to_string(),
        platform.map_or(String::new(), |p| text_cell(&p.kind)),
        platform_part(platform.and_then(|p| p.name.as_ref())),
        platform_part(platform.and_then(|p| p.group.as_ref())),
        platform_part(platform.and_then(|p| p.id.as_ref())),
        platform_part(platform.and_then(|p| p.flavor.as_ref())),
        opt(v.halt_poll_pct),
    ]
}
