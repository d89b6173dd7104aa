//! The two exposition formats `/metrics` speaks, and which one a scraper asked for.
//!
//! `prometheus-client` writes OpenMetrics 1.0 only. Prometheus (2.42 sends `Accept:
//! application/openmetrics-text;version=1.0.0,...;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1`)
//! reads it, but `curl`, `promtool check metrics` and older scrapers read the classic text format
//! 0.0.4, where a counter's `# HELP`/`# TYPE` name the `_total` series, there is no `# UNIT`, no
//! `_created` series and no `# EOF`. [`to_classic`] rewrites the one into the other.

use crate::error::{AppError, AppResult};

/// The `Accept` header Prometheus 2.42 scrapes with by default (for the tests and benchmarks
/// that scrape as it does).
pub const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// An exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    /// The Prometheus text format 0.0.4.
    Classic,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Classic => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// The format for a request's `Accept` header: OpenMetrics when it names
/// `application/openmetrics-text` (version 1.0.0, 0.0.1 or none) at least as high as it ranks
/// the classic format (`text/plain`, `text/*`, `*/*`), the classic format otherwise, also
/// without a header.
pub fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Classic;
    };
    let (mut open_metrics_q, mut classic_q) = (0.0_f64, 0.0_f64);
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut q = 1.0;
        let mut version_ok = true;
        for param in parts {
            let Some((key, value)) = param.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"');
            match key.trim().to_ascii_lowercase().as_str() {
                "q" => q = value.parse::<f64>().unwrap_or(0.0).clamp(0.0, 1.0),
                "version" if media == "application/openmetrics-text" => {
                    version_ok = matches!(value, "1.0.0" | "0.0.1");
                }
                _ => {}
            }
        }
        match media.as_str() {
            "application/openmetrics-text" if version_ok => {
                open_metrics_q = open_metrics_q.max(q);
            }
            "text/plain" | "text/*" | "*/*" => classic_q = classic_q.max(q),
            _ => {}
        }
    }
    if open_metrics_q > 0.0 && open_metrics_q >= classic_q {
        Format::OpenMetrics
    } else {
        Format::Classic
    }
}

/// The classic family name and type for an OpenMetrics family.
fn classic_family(name: &str, kind: &str) -> AppResult<(String, &'static str)> {
    Ok(match kind {
        "counter" => (format!("{name}_total"), "counter"),
        "gauge" => (name.to_string(), "gauge"),
        "histogram" => (name.to_string(), "histogram"),
        "summary" => (name.to_string(), "summary"),
        "info" => (format!("{name}_info"), "gauge"),
        "stateset" => (name.to_string(), "gauge"),
        "unknown" => (name.to_string(), "untyped"),
        other => {
            return Err(AppError::Internal(format!(
                "metric family {name} of type {other} has no classic text form"
            )));
        }
    })
}

/// Where a sample line's label set ends (after its `}`), skipping braces inside quoted values;
/// or where its name ends when it has no labels.
fn labels_end(line: &str) -> usize {
    let bytes = line.as_bytes();
    let Some(open) = line.find(['{', ' ']) else {
        return line.len();
    };
    if bytes[open] == b' ' {
        return open;
    }
    let (mut quoted, mut escaped) = (false, false);
    for (i, &b) in bytes.iter().enumerate().skip(open + 1) {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b'}' if !quoted => return i + 1,
            _ => {}
        }
    }
    line.len()
}

/// One OpenMetrics sample line in the classic format, added to `out` with its newline: the same
/// name, labels and value, the timestamp in milliseconds instead of seconds, no exemplar.
/// Written in place: a scrape of 100,000 guests has some 700,000 lines.
fn push_classic_sample(out: &mut String, line: &str) -> AppResult<()> {
    let end = labels_end(line);
    let (series, rest) = line.split_at(end);
    let rest = rest.split(" # ").next().unwrap_or("");
    let mut fields = rest.split_whitespace();
    let value = fields
        .next()
        .ok_or_else(|| AppError::Internal(format!("a metric sample without a value: {line}")))?;
    out.push_str(series);
    out.push(' ');
    out.push_str(value);
    if let Some(seconds) = fields.next() {
        let seconds: f64 = seconds.parse().map_err(|_| {
            AppError::Internal(format!("a metric sample with a bad timestamp: {line}"))
        })?;
        out.push(' ');
        out.push_str(&((seconds * 1000.0).round() as i64).to_string());
    }
    out.push('\n');
    Ok(())
}

/// The OpenMetrics exposition `text` (as `prometheus-client` writes it: `# HELP`, then
/// `# TYPE`, then `# UNIT` of each family) in the classic text format 0.0.4.
pub fn to_classic(text: &str) -> AppResult<String> {
    let mut out = String::with_capacity(text.len());
    let mut help: Option<(String, String)> = None;
    // The family being read: its OpenMetrics name and type.
    let mut family: Option<(String, String)> = None;
    for line in text.lines() {
        if line.is_empty() || line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            help = Some((name.to_string(), text.to_string()));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest
                .split_once(' ')
                .ok_or_else(|| AppError::Internal(format!("a TYPE line without a type: {line}")))?;
            let (classic_name, classic_kind) = classic_family(name, kind)?;
            if let Some((_, text)) = help.take().filter(|(n, _)| n == name) {
                // OpenMetrics escapes `"` in HELP, the classic format does not.
                let text = text.replace("\\\"", "\"");
                out.push_str(&format!("# HELP {classic_name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {classic_name} {classic_kind}\n"));
            family = Some((name.to_string(), kind.to_string()));
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let series_name = &line[..line.find(['{', ' ']).unwrap_or(line.len())];
        if let Some((name, kind)) = &family
            && kind == "counter"
            && series_name.strip_prefix(name.as_str()) == Some("_created")
        {
            continue;
        }
        push_classic_sample(&mut out, line)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_follows_what_the_scraper_accepts() {
        let cases = [
            (None, Format::Classic),
            (Some(PROMETHEUS_ACCEPT), Format::OpenMetrics),
            // Prometheus with `scrape_classic_histograms`-era defaults, or told to prefer text.
            (
                Some("text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.5"),
                Format::Classic,
            ),
            (Some("*/*"), Format::Classic),
            (Some("text/plain"), Format::Classic),
            (Some("application/openmetrics-text"), Format::OpenMetrics),
            (
                Some("Application/OpenMetrics-Text; version=1.0.0; charset=utf-8"),
                Format::OpenMetrics,
            ),
            (
                Some("application/openmetrics-text;version=1.0.0;q=0"),
                Format::Classic,
            ),
            // A version this server does not write.
            (
                Some("application/openmetrics-text;version=2.0.0"),
                Format::Classic,
            ),
            (Some("application/json"), Format::Classic),
            (Some("garbage;;q=x,,"), Format::Classic),
        ];
        for (accept, want) in cases {
            assert_eq!(negotiate(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn openmetrics_becomes_the_classic_format() {
        let open_metrics = concat!(
            "# HELP reports Reports received.\n",
            "# TYPE reports counter\n",
            "reports_total{outcome=\"stored\"} 3\n",
            "reports_created{outcome=\"stored\"} 1700000000.5\n",
            "# HELP cpu_seconds CPU \\\"used\\\".\n",
            "# TYPE cpu_seconds counter\n",
            "# UNIT cpu_seconds seconds\n",
            "cpu_seconds_total{guest=\"a}\\\" # b\\\\\\n\"} 1.5 1700000000.25 # {trace=\"x\"} 1.0\n",
            "# HELP build Build.\n",
            "# TYPE build info\n",
            "build_info{version=\"1\"} 1\n",
            "# HELP up Whether.\n",
            "# TYPE up gauge\n",
            "up 1.0\n",
            "# HELP ingest_duration_seconds Time.\n",
            "# TYPE ingest_duration_seconds histogram\n",
            "# UNIT ingest_duration_seconds seconds\n",
            "ingest_duration_seconds_sum 0.5\n",
            "ingest_duration_seconds_count 2\n",
            "ingest_duration_seconds_bucket{le=\"+Inf\"} 2\n",
            "# EOF\n",
        );
        let want = concat!(
            "# HELP reports_total Reports received.\n",
            "# TYPE reports_total counter\n",
            "reports_total{outcome=\"stored\"} 3\n",
            "# HELP cpu_seconds_total CPU \"used\".\n",
            "# TYPE cpu_seconds_total counter\n",
            "cpu_seconds_total{guest=\"a}\\\" # b\\\\\\n\"} 1.5 1700000000250\n",
            "# HELP build_info Build.\n",
            "# TYPE build_info gauge\n",
            "build_info{version=\"1\"} 1\n",
            "# HELP up Whether.\n",
            "# TYPE up gauge\n",
            "up 1.0\n",
            "# HELP ingest_duration_seconds Time.\n",
            "# TYPE ingest_duration_seconds histogram\n",
            "ingest_duration_seconds_sum 0.5\n",
            "ingest_duration_seconds_count 2\n",
            "ingest_duration_seconds_bucket{le=\"+Inf\"} 2\n",
        );
        assert_eq!(to_classic(open_metrics).unwrap(), want);
    }

    #[test]
    fn a_family_without_a_classic_form_is_an_error() {
        let text = "# HELP q Queue.\n# TYPE q gaugehistogram\nq_bucket{le=\"+Inf\"} 1\n";
        assert!(to_classic(text).is_err());
        assert!(to_classic("x\n").is_err(), "a sample without a value");
    }
}
