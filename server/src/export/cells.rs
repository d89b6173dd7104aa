//! What every export shares: the context it is written in, file names, and cells made safe
//! for spreadsheets (see the module above for why).

use chrono::{DateTime, SecondsFormat, Utc};

use crate::analysis::cost::CostModel;
use crate::error::{AppError, AppResult};
use crate::visible::show_invisible;

/// What every export of one request shares.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub model: &'a CostModel,
    /// When the export was made (server clock): the end of its 24 h and 7 d spans.
    pub now_ms: i64,
    /// The server shows the simulated demo fleet: every export says so (a `demo` column, a
    /// `"demo": true`, a `tickscope_demo` variable and a file name with `demo` in it).
    pub demo: bool,
}

/// The file name an export is downloaded as: `tickscope-demo-…` for demo data, so that a file
/// passed on without its contents being read still says what it holds.
pub fn file_name(name: &str, extension: &str, demo: bool) -> String {
    let demo = if demo { "demo-" } else { "" };
    format!("tickscope-{demo}{name}.{extension}")
}

/// A time as RFC 3339 in UTC, to the second (`2026-12-03T14:44:32Z`); empty if out of range.
pub fn rfc3339(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_default()
}

pub(super) fn flag(value: bool) -> String {
    value.to_string()
}

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

pub(super) fn number(value: f64) -> String {
    format!("{value:.4}")
}

pub(super) fn write_csv(
    header: &[&str],
    rows: impl Iterator<Item = Vec<String>>,
) -> AppResult<String> {
    // Every field quoted: a spreadsheet set to split on `;` must not find a new cell, starting
    // with `=`, inside a VM's name.
    let mut writer = csv::WriterBuilder::new()
        .quote_style(csv::QuoteStyle::Always)
        .from_writer(Vec::new());
    let failed = |e: csv::Error| AppError::encode("a CSV export", e);
    writer.write_record(header).map_err(failed)?;
    for row in rows {
        writer.write_record(&row).map_err(failed)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| AppError::encode("a CSV export", e))?;
    String::from_utf8(bytes).map_err(|e| AppError::encode("a CSV export", e))
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
}
