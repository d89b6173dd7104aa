//! Exports for spreadsheets and scripts: the ranked guests and the upgrade plan as CSV (the
//! columns below are stable; new ones are only ever added at the end) and JSON.
//!
//! VM names and kernel strings come from machines we do not control: a cell that a spreadsheet
//! would read as a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return) is
//! prefixed with `'`, which spreadsheets show as text; bidi controls, zero-width and control
//! characters are written as escapes (`\u{202e}`), so that a cell shows what was stored.

use crate::analysis::cost::{self, CostModel};
use crate::analysis::plan::PlanGroup;
use crate::error::{AppError, AppResult};
use crate::fleet::AnalysedGuest;
use crate::visible::show_invisible;
use std::sync::Arc;

/// Columns of the guests export, in order.
pub const GUEST_COLUMNS: [&str; 19] = [
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
];

/// Columns of the plan export, in order.
pub const PLAN_COLUMNS: [&str; 9] = [
    "distro",
    "kernel_release",
    "tick_mode",
    "guests",
    "wasted_cpu_pct",
    "change",
    "change_guests",
    "projected_saving_cpu_pct",
    "projected_saving_per_year",
];

/// A text cell a spreadsheet cannot mistake for a formula, nor show reversed or blank.
pub fn text_cell(text: &str) -> String {
    // A leading tab or carriage return, which some spreadsheets also read as a formula's
    // start, is written `\t` or `\r` here.
    let text = show_invisible(text);
    match text.chars().next() {
        Some('=' | '+' | '-' | '@') => format!("'{text}"),
        _ => text.into_owned(),
    }
}

fn number(value: f64) -> String {
    format!("{value:.4}")
}

fn write_csv(header: &[&str], rows: impl Iterator<Item = Vec<String>>) -> AppResult<String> {
    // Every field quoted: a spreadsheet set to split on `;` must not find a new cell, starting
    // with `=`, inside a VM's name.
    let mut writer = csv::WriterBuilder::new()
        .quote_style(csv::QuoteStyle::Always)
        .from_writer(Vec::new());
    let failed = |e: csv::Error| AppError::Internal(format!("CSV export: {e}"));
    writer.write_record(header).map_err(failed)?;
    for row in rows {
        writer.write_record(&row).map_err(failed)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| AppError::Internal(format!("CSV export: {e}")))?;
    String::from_utf8(bytes).map_err(|e| AppError::Internal(format!("CSV export: {e}")))
}

pub fn guests_csv(guests: &[Arc<AnalysedGuest>], model: &CostModel) -> AppResult<String> {
    let rows = guests.iter().enumerate().map(|(i, g)| {
        let v = &g.verdict;
        let yearly = cost::of_waste(v.waste.wasted_cpu_pct, model);
        let first = v.suggestions.first();
        let k = g.kernel.as_ref();
        vec![
            (i + 1).to_string(),
            text_cell(&g.name),
            g.uuid.clone().unwrap_or_default(),
            text_cell(&g.host),
            text_cell(&g.hypervisor),
            g.vcpus.to_string(),
            v.rates.map_or(String::new(), |r| number(r.host_cpu_pct)),
            v.rates
                .map_or(String::new(), |r| number(r.wakeups_per_vcpu_s)),
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
            first
                .and_then(|s| s.saving_cpu_pct)
                .map_or(String::new(), number),
        ]
    });
    write_csv(&GUEST_COLUMNS, rows)
}

pub fn plan_csv(plan: &[PlanGroup], model: &CostModel) -> AppResult<String> {
    let rows = plan.iter().map(|p| {
        vec![
            text_cell(&p.distro),
            text_cell(&p.kernel_release),
            p.tick_mode.to_string(),
            p.guests.to_string(),
            number(p.wasted_cpu_pct),
            text_cell(&p.change),
            p.change_guests.to_string(),
            number(p.projected_saving_cpu_pct),
            number(cost::of_waste(p.projected_saving_cpu_pct, model).money_per_year),
        ]
    });
    write_csv(&PLAN_COLUMNS, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_that_could_be_formulas_are_made_text() {
        let cases = [
            (
                "=HYPERLINK(\"http://x\",\"y\")",
                "'=HYPERLINK(\"http://x\",\"y\")",
            ),
            ("+1", "'+1"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tx", "\\tx"),
            ("\r=1", "\\r=1"),
            ("=\u{200b}1", "'=\\u{200b}1"),
            ("evil\u{202e}gpj.exe", "evil\\u{202e}gpj.exe"),
            ("web-01", "web-01"),
            ("", ""),
        ];
        for (text, expected) in cases {
            assert_eq!(text_cell(text), expected, "{text:?}");
        }
    }

    #[test]
    fn every_field_is_quoted_so_no_separator_can_start_a_cell() {
        let plan = vec![PlanGroup {
            distro: "x;=HYPERLINK(\"http://evil\")".into(),
            kernel_release: "6.1".into(),
            tick_mode: "periodic",
            guests: 1,
            wasted_cpu_pct: 1.0,
            change: String::new(),
            change_guests: 0,
            projected_saving_cpu_pct: 0.0,
        }];
        let text = plan_csv(&plan, &CostModel::default()).unwrap();
        let line = text.lines().nth(1).unwrap();
        assert!(
            line.starts_with("\"x;=HYPERLINK(\"\"http://evil\"\")\",\"6.1\""),
            "{line}"
        );
    }

    #[test]
    fn the_plan_exports_with_its_columns_and_parses_back() {
        let plan = vec![PlanGroup {
            distro: "=cmd|' /C calc'!A0".into(),
            kernel_release: "2.6.18-398.el5".into(),
            tick_mode: "periodic",
            guests: 3,
            wasted_cpu_pct: 45.0,
            change: "Divide the RHEL 5 tick by ten, \"safely\"".into(),
            change_guests: 3,
            projected_saving_cpu_pct: 40.5,
        }];
        let text = plan_csv(&plan, &CostModel::default()).unwrap();
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
    }
}
