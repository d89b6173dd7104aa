//! `plan.csv`, one row per group of the plan, and `plan-guests.csv`, one row per guest the plan
//! changes; the `group_key` column joins them to each other and to `guests.csv`.

use std::collections::HashMap;
use std::sync::Arc;

use super::cells::{Context, CsvChunks, csv_chunks, flag, number, rfc3339, text_cell};
use crate::analysis::cost;
use crate::analysis::plan::{PlanGroup, PlanMember};
use crate::domain::GuestId;
use crate::fleet::AnalysedGuest;

/// Columns of the plan export, in order. The first 9 are as they always were; the others were
/// added at the end (issue 16).
pub const PLAN_COLUMNS: [&str; 18] = [
    "distro",
    "kernel_release",
    "tick_mode",
    "guests",
    "wasted_cpu_pct",
    "change",
    "change_guests",
    "projected_saving_cpu_pct",
    "projected_saving_per_year",
    // Added in issue 16; the currency of `projected_saving_per_year` right after it.
    "currency",
    "group_key",
    "change_kind",
    "needs",
    "window_start",
    "window_end",
    "computed_at",
    "demo",
    // Added in issue 29.
    "cause",
];

/// Columns of the guest-level plan export, in order; `cause` added at the end in issue 29.
pub const PLAN_GUEST_COLUMNS: [&str; 26] = [
    "group_key",
    "guest_id",
    "guest",
    "uuid",
    "host",
    "hypervisor",
    "distro",
    "kernel_release",
    "tick_mode",
    "tick_mode_confidence",
    "wasted_cpu_pct",
    "change",
    "change_text",
    "change_rule",
    "change_kind",
    "needs",
    "change_confidence",
    "projected_saving_cpu_pct",
    "projected_saving_per_year",
    "currency",
    "window_start",
    "window_end",
    "window_s",
    "computed_at",
    "demo",
    "cause",
];

/// The span of time a set of guests' figures rest on: (earliest window start, latest window
/// end, earliest analysis), or `None` for no guest.
fn span_of<'a>(guests: impl Iterator<Item = &'a AnalysedGuest>) -> Option<(i64, i64, i64)> {
    guests.fold(None, |span, g| {
        let start = g.window_start_ms();
        Some(match span {
            None => (start, g.last_seen_ms, g.analysed_ms),
            Some((s, e, a)) => (s.min(start), e.max(g.last_seen_ms), a.min(g.analysed_ms)),
        })
    })
}

fn by_id(guests: &[Arc<AnalysedGuest>]) -> HashMap<GuestId, Arc<AnalysedGuest>> {
    guests.iter().map(|g| (g.id, g.clone())).collect()
}

/// The plan as CSV, one row per group, written a chunk of rows at a time; `guests` are the
/// analysed guests it was made from.
pub fn plan_csv(
    plan: Vec<PlanGroup>,
    guests: &[Arc<AnalysedGuest>],
    context: Context,
) -> CsvChunks<impl FnMut() -> Option<Vec<String>> + Send + use<>> {
    let guests = by_id(guests);
    let mut groups = plan.into_iter();
    csv_chunks(&PLAN_COLUMNS, move || {
        let p = groups.next()?;
        Some(group_row(&p, &guests, &context))
    })
}

fn group_row(
    p: &PlanGroup,
    guests: &HashMap<GuestId, Arc<AnalysedGuest>>,
    context: &Context,
) -> Vec<String> {
    let span = span_of(
        p.members
            .iter()
            .filter_map(|m| guests.get(&GuestId(m.id)).map(AsRef::as_ref)),
    );
    let time = |pick: fn((i64, i64, i64)) -> i64| span.map_or(String::new(), |s| rfc3339(pick(s)));
    vec![
        text_cell(&p.distro),
        text_cell(&p.kernel_release),
        p.tick_mode.to_string(),
        p.guests.to_string(),
        number(p.wasted_cpu_pct),
        text_cell(&p.change),
        p.change_guests.to_string(),
        number(p.projected_saving_cpu_pct),
        number(cost::of_waste(p.projected_saving_cpu_pct, &context.model).money_per_year),
        text_cell(&context.model.currency),
        text_cell(&p.key),
        p.change_kind.map_or("none", |k| k.as_str()).to_string(),
        p.change_kind
            .map_or("none", |k| k.needs().as_str())
            .to_string(),
        time(|s| s.0),
        time(|s| s.1),
        time(|s| s.2),
        flag(context.demo),
        p.cause.map_or("", |c| c.as_str()).to_string(),
    ]
}

/// The plan as CSV, one row per guest it changes (a guest with a suggested change), in the
/// plan's order: its group, then the guest's own change; written a chunk of rows at a time.
pub fn plan_guests_csv(
    plan: Vec<PlanGroup>,
    guests: &[Arc<AnalysedGuest>],
    context: Context,
) -> CsvChunks<impl FnMut() -> Option<Vec<String>> + Send + use<>> {
    let guests = by_id(guests);
    // (group, member) of each row, in order: the rows are made one by one from them.
    let changed: Vec<(usize, usize)> = plan
        .iter()
        .enumerate()
        .flat_map(|(i, p)| {
            p.members
                .iter()
                .enumerate()
                .filter(|(_, m)| m.change.is_some())
                .map(move |(j, _)| (i, j))
        })
        .collect();
    let mut rows = changed.into_iter();
    csv_chunks(&PLAN_GUEST_COLUMNS, move || {
        let (i, j) = rows.next()?;
        let p = &plan[i];
        plan_guest_row(p, &p.members[j], &guests, &context)
    })
}

fn plan_guest_row(
    p: &PlanGroup,
    m: &PlanMember,
    guests: &HashMap<GuestId, Arc<AnalysedGuest>>,
    context: &Context,
) -> Option<Vec<String>> {
    let model = &context.model;
    let change = m.change.as_ref()?;
    let g = guests.get(&GuestId(m.id)).map(AsRef::as_ref);
    let saving = change.saving_cpu_pct;
    Some(vec![
        text_cell(&p.key),
        m.id.to_string(),
        text_cell(&m.name),
        text_cell(g.and_then(|g| g.uuid.as_deref()).unwrap_or("")),
        text_cell(&m.host),
        text_cell(g.map_or("", |g| g.hypervisor.as_str())),
        text_cell(&p.distro),
        text_cell(&p.kernel_release),
        p.tick_mode.to_string(),
        m.tick_mode_confidence.as_str().to_string(),
        number(m.wasted_cpu_pct),
        text_cell(change.title),
        text_cell(&change.text),
        change.rule.to_string(),
        change.kind.as_str().to_string(),
        change.needs.as_str().to_string(),
        change.confidence.as_str().to_string(),
        saving.map_or(String::new(), number),
        saving.map_or(String::new(), |pct| {
            number(cost::of_waste(pct, model).money_per_year)
        }),
        text_cell(&model.currency),
        g.map_or(String::new(), |g| rfc3339(g.window_start_ms())),
        g.map_or(String::new(), |g| rfc3339(g.last_seen_ms)),
        g.map_or(String::new(), |g| number(g.window_s)),
        g.map_or(String::new(), |g| rfc3339(g.analysed_ms)),
        flag(context.demo),
        change.cause.as_str().to_string(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::change_kind::ChangeKind;
    use crate::analysis::cost::CostModel;

    fn group(distro: &str, change: &str) -> PlanGroup {
        PlanGroup {
            key: "k_1_periodic_00000000".into(),
            cause: None,
            distro: distro.into(),
            kernel_release: "2.6.18-398.el5".into(),
            tick_mode: "periodic",
            guests: 3,
            wasted_cpu_pct: 45.0,
            change: change.into(),
            change_kind: Some(ChangeKind::KernelUpgrade),
            change_guests: 3,
            projected_saving_cpu_pct: 40.5,
            members: Vec::new(),
        }
    }

    fn context(model: &CostModel) -> Context {
        Context {
            model: model.clone(),
            now_ms: 0,
            demo: false,
        }
    }

    #[test]
    fn every_field_is_quoted_so_no_separator_can_start_a_cell() {
        let plan = vec![group("x;=HYPERLINK(\"http://evil\")", "")];
        let model = CostModel::default();
        let text = plan_csv(plan, &[], context(&model)).text().unwrap();
        let line = text.lines().nth(1).unwrap();
        assert!(
            line.starts_with("\"x;=HYPERLINK(\"\"http://evil\"\")\",\"2.6.18-398.el5\""),
            "{line}"
        );
    }

    #[test]
    fn the_plan_exports_with_its_columns_and_parses_back() {
        let plan = vec![group(
            "=cmd|' /C calc'!A0",
            "Divide the RHEL 5 tick by ten, \"safely\"",
        )];
        let model = CostModel::default();
        let text = plan_csv(plan, &[], context(&model)).text().unwrap();
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        assert_eq!(
            reader.headers().unwrap().iter().collect::<Vec<_>>(),
            PLAN_COLUMNS
        );
        let row = reader.records().next().unwrap().unwrap();
        assert_eq!(&row[0], "'=cmd|' /C calc'!A0");
        assert_eq!(&row[5], "Divide the RHEL 5 tick by ten, \"safely\"");
        assert_eq!(&row[3], "3");
        assert!((row[8].parse::<f64>().unwrap() - 0.405 * 7.0 * 8.76 * 0.25).abs() < 1e-3);
        assert_eq!(&row[9], "EUR");
        assert_eq!(&row[11], "kernel_upgrade");
        assert_eq!(&row[12], "new_kernel");
        // No guest behind it: no window.
        assert_eq!(&row[13], "");
        assert_eq!(&row[16], "false");
    }
}
