//! What every export shares: the context it is written in, file names, and cells made safe
//! for spreadsheets (see the module above for why).

use chrono::{DateTime, SecondsFormat, Utc};

use crate::analysis::cost::CostModel;
use crate::error::{AppError, AppResult};
use crate::visible::show_invisible;

/// What every export of one request shares; owned, so that a streamed export carries it.
#[derive(Debug, Clone)]
pub struct Context {
    pub model: CostModel,
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

/// Rows per chunk of a streamed CSV export: some 30-60 KiB of guests.csv, large enough that the
/// chunks' own cost (a write and a compressor's flush) is small, small enough that the first
/// arrives at once and memory stays flat whatever the fleet.
const ROWS_PER_CHUNK: usize = 128;

/// A CSV export written a chunk of rows at a time, as the response body asks for them: the
/// header, then the rows `next_row` gives until it gives none. The bytes are those one writer
/// would have written for the whole file.
pub struct CsvChunks<F> {
    header: Option<&'static [&'static str]>,
    next_row: F,
    finished: bool,
}

/// A writer of one chunk. Every field quoted: a spreadsheet set to split on `;` must not find a
/// new cell, starting with `=`, inside a VM's name. A writer keeps nothing from one whole
/// record to the next (the rows are all as long as the header), so a new one per chunk writes
/// what one writer for the whole file would.
fn chunk_writer() -> csv::Writer<Vec<u8>> {
    csv::WriterBuilder::new()
        .quote_style(csv::QuoteStyle::Always)
        .from_writer(Vec::new())
}

/// One chunk of CSV: `header` if given, then `rows`, as [`CsvChunks`] writes them (for an
/// export that makes its rows a batch at a time, as it reads them).
pub(super) fn csv_rows(
    header: Option<&'static [&'static str]>,
    rows: impl Iterator<Item = Vec<String>>,
) -> AppResult<Vec<u8>> {
    let failed = |e: csv::Error| AppError::encode("a CSV export", e);
    let mut writer = chunk_writer();
    if let Some(header) = header {
        writer.write_record(header).map_err(failed)?;
    }
    for row in rows {
        writer.write_record(&row).map_err(failed)?;
    }
    writer
        .into_inner()
        .map_err(|e| AppError::encode("a CSV export", e))
}

pub(super) fn csv_chunks<F>(header: &'static [&'static str], next_row: F) -> CsvChunks<F>
where
    F: FnMut() -> Option<Vec<String>>,
{
    CsvChunks {
        header: Some(header),
        next_row,
        finished: false,
    }
}

impl<F> CsvChunks<F>
where
    F: FnMut() -> Option<Vec<String>>,
{
    fn write_chunk(&mut self) -> AppResult<Vec<u8>> {
        let failed = |e: csv::Error| AppError::encode("a CSV export", e);
        let mut writer = chunk_writer();
        if let Some(header) = self.header.take() {
            writer.write_record(header).map_err(failed)?;
        }
        for _ in 0..ROWS_PER_CHUNK {
            let Some(row) = (self.next_row)() else {
                self.finished = true;
                break;
            };
            writer.write_record(&row).map_err(failed)?;
        }
        writer
            .into_inner()
            .map_err(|e| AppError::encode("a CSV export", e))
    }

    /// The whole export as text, for tests and callers that want it in one piece.
    pub fn text(self) -> AppResult<String> {
        let bytes = self.collect::<AppResult<Vec<Vec<u8>>>>()?.concat();
        String::from_utf8(bytes).map_err(|e| AppError::encode("a CSV export", e))
    }
}

impl<F> Iterator for CsvChunks<F>
where
    F: FnMut() -> Option<Vec<String>>,
{
    type Item = AppResult<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        match self.write_chunk() {
            Ok(bytes) if bytes.is_empty() => None,
            Ok(bytes) => Some(Ok(bytes)),
            Err(e) => {
                // A row that cannot be written ends the export: the body fails, not skips it.
                self.finished = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_join_into_what_one_writer_writes_for_the_whole_file() {
        const HEADER: [&str; 2] = ["n", "text"];
        for rows in [
            0,
            1,
            ROWS_PER_CHUNK - 1,
            ROWS_PER_CHUNK,
            2 * ROWS_PER_CHUNK + 3,
        ] {
            let row = |i: usize| vec![i.to_string(), format!("a \"quoted\", {i}\nline")];
            let mut whole = chunk_writer();
            whole.write_record(HEADER).unwrap();
            for i in 0..rows {
                whole.write_record(row(i)).unwrap();
            }
            let whole = String::from_utf8(whole.into_inner().unwrap()).unwrap();
            let mut i = 0;
            let chunks: Vec<Vec<u8>> = csv_chunks(&HEADER, || {
                i += 1;
                (i <= rows).then(|| row(i - 1))
            })
            .collect::<AppResult<_>>()
            .unwrap();
            assert_eq!(
                chunks.len(),
                rows.div_ceil(ROWS_PER_CHUNK).max(1),
                "{rows} rows"
            );
            assert_eq!(
                String::from_utf8(chunks.concat()).unwrap(),
                whole,
                "{rows} rows"
            );
        }
    }

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
