//! The guest list's filters, sort order and pages, from the URL's query string: a view can be
//! bookmarked and shared. Pure: it orders and cuts what the analysis produced.

use std::cmp::Ordering;
use std::sync::Arc;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::{Deserialize, Serialize};

use crate::fleet::AnalysedGuest;

/// Rows per page.
pub const PAGE_ROWS: usize = 50;

/// The query string of `/guests`. Empty values mean "any".
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct ListQuery {
    /// Name or UUID contains this (any case).
    pub q: String,
    pub host: String,
    pub hypervisor: String,
    pub mode: String,
    pub distro: String,
    pub kernel: String,
    /// The kernel's tick rate in Hz (as the guest reported it, else as measured), or `unknown`.
    pub hz: String,
    /// A column key (see [`Column`]); the default is waste.
    pub sort: String,
    /// `asc` or `desc`; the default depends on the column.
    pub dir: String,
    /// 1-based.
    pub page: usize,
}

/// The columns the list sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Name,
    Host,
    Hypervisor,
    Vcpus,
    Cpu,
    Wakeups,
    Mode,
    Waste,
    Distro,
    Kernel,
}

impl Column {
    pub const ALL: [Column; 10] = [
        Column::Name,
        Column::Host,
        Column::Hypervisor,
        Column::Vcpus,
        Column::Cpu,
        Column::Wakeups,
        Column::Mode,
        Column::Waste,
        Column::Distro,
        Column::Kernel,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Column::Name => "name",
            Column::Host => "host",
            Column::Hypervisor => "hypervisor",
            Column::Vcpus => "vcpus",
            Column::Cpu => "cpu",
            Column::Wakeups => "wakeups",
            Column::Mode => "mode",
            Column::Waste => "waste",
            Column::Distro => "distro",
            Column::Kernel => "kernel",
        }
    }

    fn parse(key: &str) -> Option<Column> {
        Column::ALL.into_iter().find(|c| c.key() == key)
    }

    /// Figures read best largest first; names in alphabetical order.
    fn descending_by_default(self) -> bool {
        matches!(
            self,
            Column::Vcpus | Column::Cpu | Column::Wakeups | Column::Waste
        )
    }

    fn compare(self, a: &AnalysedGuest, b: &AnalysedGuest) -> Ordering {
        let cpu = |g: &AnalysedGuest| g.verdict.rates.map_or(-1.0, |r| r.host_cpu_pct);
        let wakeups = |g: &AnalysedGuest| g.verdict.rates.map_or(-1.0, |r| r.wakeups_per_vcpu_s);
        match self {
            Column::Name => compare_lowercase(&a.name, &b.name),
            Column::Host => a.host.cmp(&b.host),
            Column::Hypervisor => a.hypervisor.cmp(&b.hypervisor),
            Column::Vcpus => a.vcpus.cmp(&b.vcpus),
            Column::Cpu => cpu(a).total_cmp(&cpu(b)),
            Column::Wakeups => wakeups(a).total_cmp(&wakeups(b)),
            Column::Mode => mode(a).cmp(mode(b)),
            Column::Waste => a.wasted_cpu_pct().total_cmp(&b.wasted_cpu_pct()),
            Column::Distro => distro_of(a).cmp(distro_of(b)),
            Column::Kernel => kernel_of(a).cmp(kernel_of(b)),
        }
    }
}

pub fn mode(g: &AnalysedGuest) -> &'static str {
    g.verdict.classification.mode.as_str()
}

/// The `mode` filter value that matches every guest that ticks or polls while idle.
pub const WASTEFUL: &str = "wasteful";

/// Names compared as their lower-case forms are, without making those forms when both are
/// ASCII (nearly always): a sort of 100,000 guests by name compares about two million pairs.
fn compare_lowercase(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        let lower = |s: &str| {
            s.bytes()
                .map(|c| c.to_ascii_lowercase())
                .collect::<Vec<_>>()
        };
        let (mut x, mut y) = (a.bytes(), b.bytes());
        loop {
            match (x.next(), y.next()) {
                (None, None) => return Ordering::Equal,
                (None, Some(_)) => return Ordering::Less,
                (Some(_), None) => return Ordering::Greater,
                (Some(c), Some(d)) => match c.to_ascii_lowercase().cmp(&d.to_ascii_lowercase()) {
                    Ordering::Equal => {}
                    other => {
                        debug_assert_eq!(other, lower(a).cmp(&lower(b)));
                        return other;
                    }
                },
            }
        }
    } else {
        a.to_lowercase().cmp(&b.to_lowercase())
    }
}

/// The guest's tick rate: CONFIG_HZ as it reported it, else the rate its wake-ups match.
pub fn hz_of(g: &AnalysedGuest) -> Option<u32> {
    g.kernel
        .as_ref()
        .and_then(|k| k.config_hz)
        .or(g.verdict.classification.estimated_hz)
}

/// [`hz_of`] as the `hz` filter and the overview write it: the number, or `unknown`.
pub fn hz_text(hz: Option<u32>) -> String {
    hz.map_or("unknown".into(), |hz| hz.to_string())
}

/// The distribution the guest reported, empty when none.
pub fn distro_of(g: &AnalysedGuest) -> &str {
    g.kernel
        .as_ref()
        .and_then(|k| k.distro.as_deref())
        .unwrap_or_default()
}

/// The kernel release the guest reported, empty when none.
pub fn kernel_of(g: &AnalysedGuest) -> &str {
    g.kernel
        .as_ref()
        .and_then(|k| k.kernel_release.as_deref())
        .unwrap_or_default()
}

pub fn distro(g: &AnalysedGuest) -> String {
    distro_of(g).to_string()
}

pub fn kernel(g: &AnalysedGuest) -> String {
    kernel_of(g).to_string()
}

/// The `hz` filter's value read once per request: any rate, a rate, or none known.
#[derive(Debug, Clone, Copy, PartialEq)]
enum HzFilter {
    Any,
    Is(Option<u32>),
    /// A value no guest's rate is written as (`abc`, `0250`): matches nothing.
    Nothing,
}

impl HzFilter {
    fn parse(text: &str) -> HzFilter {
        match text {
            "" => HzFilter::Any,
            "unknown" => HzFilter::Is(None),
            _ => match text.parse::<u32>() {
                Ok(hz) if hz.to_string() == text => HzFilter::Is(Some(hz)),
                _ => HzFilter::Nothing,
            },
        }
    }

    fn keeps(self, hz: Option<u32>) -> bool {
        match self {
            HzFilter::Any => true,
            HzFilter::Is(wanted) => wanted == hz,
            HzFilter::Nothing => false,
        }
    }
}

/// A query's filters read once, so that testing each of 100,000 guests allocates nothing
/// (but the lower-case form of a non-ASCII name when searching).
struct Filters<'q> {
    query: &'q ListQuery,
    search: String,
    hz: HzFilter,
}

impl Filters<'_> {
    fn keeps(&self, g: &AnalysedGuest) -> bool {
        let query = self.query;
        let is = |wanted: &str, value: &str| wanted.is_empty() || wanted == value;
        let mode_matches = if query.mode == WASTEFUL {
            g.verdict.classification.mode.is_wasteful()
        } else {
            is(&query.mode, mode(g))
        };
        is(&query.host, &g.host)
            && is(&query.hypervisor, &g.hypervisor)
            && mode_matches
            && self.hz.keeps(hz_of(g))
            && is(&query.distro, distro_of(g))
            && is(&query.kernel, kernel_of(g))
            && (self.search.is_empty()
                || contains_lowercase(&g.name, &self.search)
                || g.uuid.as_deref().is_some_and(|u| u.contains(&self.search)))
    }
}

/// Whether `text`'s lower-case form contains `needle` (already lower case).
fn contains_lowercase(text: &str, needle: &str) -> bool {
    if text.is_ascii() {
        let needle = needle.as_bytes();
        needle.is_empty()
            || text
                .as_bytes()
                .windows(needle.len())
                .any(|w| w.eq_ignore_ascii_case(needle))
    } else {
        text.to_lowercase().contains(needle)
    }
}

impl ListQuery {
    pub fn column(&self) -> Column {
        Column::parse(&self.sort).unwrap_or(Column::Waste)
    }

    pub fn descending(&self) -> bool {
        match self.dir.as_str() {
            "asc" => false,
            "desc" => true,
            _ => self.column().descending_by_default(),
        }
    }

    fn filters(&self) -> Filters<'_> {
        Filters {
            query: self,
            search: self.q.trim().to_lowercase(),
            hz: HzFilter::parse(&self.hz),
        }
    }

    /// This query with other values, as a query string (`?…`), leaving out empty ones.
    pub fn with(&self, change: impl FnOnce(&mut ListQuery)) -> String {
        let mut q = self.clone();
        change(&mut q);
        let fields = [
            ("q", q.q.clone()),
            ("host", q.host.clone()),
            ("hypervisor", q.hypervisor.clone()),
            ("mode", q.mode.clone()),
            ("distro", q.distro.clone()),
            ("kernel", q.kernel.clone()),
            ("hz", q.hz.clone()),
            ("sort", q.sort.clone()),
            ("dir", q.dir.clone()),
            (
                "page",
                if q.page > 1 {
                    q.page.to_string()
                } else {
                    String::new()
                },
            ),
        ];
        let pairs: Vec<String> = fields
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        if pairs.is_empty() {
            "?".into()
        } else {
            format!("?{}", pairs.join("&"))
        }
    }

    /// The link a column header sorts by: that column, or the other direction if it is the
    /// current one; back to the first page.
    pub fn sort_link(&self, column: Column) -> String {
        let current = self.column() == column;
        let descending = if current {
            !self.descending()
        } else {
            column.descending_by_default()
        };
        self.with(|q| {
            q.sort = column.key().into();
            q.dir = if descending { "desc" } else { "asc" }.into();
            q.page = 1;
        })
    }
}

/// What a query-string value keeps as is: the unreserved characters of RFC 3986.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn encode(value: &str) -> String {
    utf8_percent_encode(value, QUERY_VALUE).to_string()
}

/// One page of the filtered, sorted guests.
pub struct Page<'a> {
    pub rows: Vec<&'a AnalysedGuest>,
    /// Guests that passed the filters, on all pages.
    pub matching: usize,
    pub page: usize,
    pub pages: usize,
}

pub fn page<'a>(guests: &'a [Arc<AnalysedGuest>], query: &ListQuery) -> Page<'a> {
    let filters = query.filters();
    let mut rows: Vec<&AnalysedGuest> = guests
        .iter()
        .map(|g| &**g)
        .filter(|g| filters.keeps(g))
        .collect();
    let column = query.column();
    let descending = query.descending();
    // A total order (the id breaks the last ties), so that cutting a page out of a partial
    // sort gives the rows a full sort would.
    let order = |a: &&AnalysedGuest, b: &&AnalysedGuest| {
        let order = column.compare(a, b);
        let order = if descending { order.reverse() } else { order };
        // Ties keep a stable, meaningful order: most waste first, then by name.
        order
            .then_with(|| b.wasted_cpu_pct().total_cmp(&a.wasted_cpu_pct()))
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.id.cmp(&b.id))
    };
    let matching = rows.len();
    let pages = matching.div_ceil(PAGE_ROWS).max(1);
    let page = query.page.clamp(1, pages);
    let (skip, end) = ((page - 1) * PAGE_ROWS, (page * PAGE_ROWS).min(matching));
    // Only the rows up to the page's end are sorted: the rest is set apart in linear time.
    if end < matching {
        rows.select_nth_unstable_by(end, order);
        rows.truncate(end);
    }
    rows.sort_unstable_by(order);
    rows.drain(..skip.min(rows.len()));
    Page {
        rows,
        matching,
        page,
        pages,
    }
}

/// The distinct values of a field, sorted, for a filter's choices (empty ones left out).
pub fn choices<'a>(
    guests: &'a [Arc<AnalysedGuest>],
    field: impl Fn(&'a AnalysedGuest) -> &'a str,
) -> Vec<String> {
    let distinct: std::collections::HashSet<&str> = guests
        .iter()
        .map(|g| field(g))
        .filter(|v| !v.is_empty())
        .collect();
    let mut values: Vec<String> = distinct.into_iter().map(str::to_string).collect();
    values.sort();
    values
}

/// The distinct tick rates, as the `hz` filter writes them, sorted as text.
pub fn hz_choices(guests: &[Arc<AnalysedGuest>]) -> Vec<String> {
    let distinct: std::collections::HashSet<Option<u32>> =
        guests.iter().map(|g| hz_of(g)).collect();
    let mut values: Vec<String> = distinct.into_iter().map(hz_text).collect();
    values.sort();
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyse_host, test_window};

    fn guest(id: i64, name: &str, host: &str, cpu_pct: f64, wakeups: f64) -> Arc<AnalysedGuest> {
        let mut window = test_window(1, cpu_pct, wakeups, None);
        // Under TCG, where a host-side rate tells the HZ: 2935 wake-ups a second are 1000 Hz.
        window.uses_kvm = Some(false);
        let verdict = analyse_host(std::slice::from_ref(&window)).remove(0);
        Arc::new(AnalysedGuest {
            id: crate::domain::GuestId(id),
            name: name.into(),
            uuid: Some(format!("00000000-0000-4000-8000-{id:012}")),
            host: host.into(),
            host_id: crate::domain::HostId(1),
            hypervisor: "qemu".into(),
            management: None,
            vcpus: 1,
            pid: 1000 + id,
            boot_args: None,
            uses_kvm: None,
            cpu_source: None,
            last_seen_ms: 0,
            intervals: 6,
            window_s: 60.0,
            analysed_ms: 0,
            kernel: None,
            verdict,
        })
    }

    fn fleet() -> Vec<Arc<AnalysedGuest>> {
        vec![
            guest(1, "web-01", "hv-a", 0.3, 20.0),
            guest(2, "DB-legacy", "hv-a", 4.1, 2935.0),
            guest(3, "ci-runner", "hv-b", 5.3, 650.0),
            guest(4, "build-box", "hv-b", 78.0, 300.0),
        ]
    }

    fn names(guests: &[Arc<AnalysedGuest>], query: &str) -> Vec<String> {
        let query: ListQuery = serde_urlencoded_like(query);
        page(guests, &query)
            .rows
            .iter()
            .map(|g| g.name.clone())
            .collect()
    }

    /// Parses a query string the way axum's `Query` does (serde over `key=value` pairs).
    fn serde_urlencoded_like(query: &str) -> ListQuery {
        let uri: axum::http::Uri = format!("/guests?{query}").parse().unwrap();
        axum::extract::Query::<ListQuery>::try_from_uri(&uri)
            .unwrap()
            .0
    }

    #[test]
    fn filters_search_and_sort_come_from_the_query_string() {
        let guests = fleet();
        let cases: [(&str, &[&str]); 11] = [
            // Most waste first by default; ties (no waste) by name.
            ("", &["ci-runner", "DB-legacy", "build-box", "web-01"]),
            (
                "sort=name",
                &["build-box", "ci-runner", "DB-legacy", "web-01"],
            ),
            (
                "sort=name&dir=desc",
                &["web-01", "DB-legacy", "ci-runner", "build-box"],
            ),
            (
                "sort=cpu",
                &["build-box", "ci-runner", "DB-legacy", "web-01"],
            ),
            (
                "sort=cpu&dir=asc",
                &["web-01", "DB-legacy", "ci-runner", "build-box"],
            ),
            ("host=hv-b", &["ci-runner", "build-box"]),
            ("mode=periodic&sort=name", &["ci-runner", "DB-legacy"]),
            ("mode=wasteful&sort=name", &["ci-runner", "DB-legacy"]),
            ("hz=1000", &["DB-legacy"]),
            // Search ignores case, and finds UUIDs too.
            ("q=db", &["DB-legacy"]),
            ("q=000000000004", &["build-box"]),
        ];
        for (query, expected) in cases {
            assert_eq!(names(&guests, query), expected, "{query}");
        }
        // An unknown column sorts by waste rather than failing.
        assert_eq!(names(&guests, "sort=bogus"), names(&guests, ""));
    }

    #[test]
    fn pages_hold_fifty_rows_and_a_page_past_the_end_shows_the_last() {
        let guests: Vec<Arc<AnalysedGuest>> = (0..120)
            .map(|i| guest(i, &format!("g{i:03}"), "hv", 0.3, 20.0))
            .collect();
        let cases = [
            ("", 1, 50),
            ("page=2", 2, 50),
            ("page=3", 3, 20),
            ("page=99", 3, 20),
            ("page=0", 1, 50),
        ];
        for (query, expected_page, rows) in cases {
            let q = serde_urlencoded_like(query);
            let p = page(&guests, &q);
            assert_eq!(
                (p.page, p.rows.len(), p.pages, p.matching),
                (expected_page, rows, 3, 120),
                "{query}"
            );
        }
        let q = serde_urlencoded_like("sort=name&page=2");
        assert_eq!(page(&guests, &q).rows[0].name, "g050");
    }

    #[test]
    fn each_page_holds_the_rows_a_full_sort_puts_there() {
        // Many ties (four figures, mixed-case and non-ASCII names), so that only the tie-breaks
        // decide where a page cuts.
        let guests: Vec<Arc<AnalysedGuest>> = (0..230)
            .map(|i| {
                let name = match i % 4 {
                    0 => format!("Web-{}", i % 7),
                    1 => format!("web-{}", i % 5),
                    2 => format!("Ωmega-{}", i % 3),
                    _ => format!("db{i}"),
                };
                let (cpu, wakeups) = [(0.3, 20.0), (5.3, 650.0), (4.1, 2935.0), (78.0, 300.0)]
                    [i as usize % 4 * 7 % 4];
                guest(i, &name, ["hv-a", "hv-b"][i as usize % 2], cpu, wakeups)
            })
            .collect();
        for column in Column::ALL {
            for dir in ["asc", "desc"] {
                let query = |page: usize| ListQuery {
                    sort: column.key().into(),
                    dir: dir.into(),
                    page,
                    ..ListQuery::default()
                };
                let mut full: Vec<&AnalysedGuest> = guests.iter().map(|g| &**g).collect();
                let descending = query(1).descending();
                full.sort_by(|a, b| {
                    let order = column.compare(a, b);
                    let order = if descending { order.reverse() } else { order };
                    order
                        .then_with(|| b.wasted_cpu_pct().total_cmp(&a.wasted_cpu_pct()))
                        .then_with(|| a.name.cmp(&b.name))
                        .then_with(|| a.id.cmp(&b.id))
                });
                let paged: Vec<i64> = (1..=5)
                    .flat_map(|n| page(&guests, &query(n)).rows)
                    .map(|g| g.id.0)
                    .collect();
                let sorted: Vec<i64> = full.iter().map(|g| g.id.0).collect();
                assert_eq!(paged, sorted, "{column:?} {dir}");
            }
        }
    }

    #[test]
    fn names_compare_as_their_lower_case_forms() {
        for (a, b) in [
            ("web", "Web"),
            ("abc", "ABD"),
            ("a", "ab"),
            ("Z", "a"),
            ("Ωmega", "ωmega"),
            ("straße", "STRASSE"),
            ("a_b", "A-B"),
        ] {
            let want = a.to_lowercase().cmp(&b.to_lowercase());
            assert_eq!(compare_lowercase(a, b), want, "{a} {b}");
            assert_eq!(compare_lowercase(b, a), want.reverse(), "{b} {a}");
        }
        for (text, needle, want) in [
            ("DB-legacy", "db", true),
            ("DB-legacy", "y", true),
            ("DB-legacy", "legacyx", false),
            ("ΩMEGA", "ωm", true),
            ("web", "", true),
        ] {
            assert_eq!(contains_lowercase(text, needle), want, "{text} {needle}");
        }
    }

    #[test]
    fn the_hz_filter_matches_the_rate_as_written() {
        let guests = fleet();
        for (hz, want) in [
            ("1000", vec!["DB-legacy"]),
            ("01000", vec![]),
            ("abc", vec![]),
            ("unknown", vec!["ci-runner", "build-box", "web-01"]),
        ] {
            assert_eq!(names(&guests, &format!("hz={hz}")), want, "{hz}");
        }
    }

    #[test]
    fn links_keep_the_view_and_encode_what_they_carry() {
        let q = serde_urlencoded_like("host=hv%20a&q=%3Cx%3E&page=3&sort=cpu&dir=asc");
        assert_eq!(q.host, "hv a");
        assert_eq!(q.q, "<x>");
        // The next page keeps every filter.
        assert_eq!(
            q.with(|q| q.page += 1),
            "?q=%3Cx%3E&host=hv%20a&sort=cpu&dir=asc&page=4"
        );
        // Sorting by the current column turns it around and goes back to page 1.
        assert_eq!(
            q.sort_link(Column::Cpu),
            "?q=%3Cx%3E&host=hv%20a&sort=cpu&dir=desc"
        );
        // Another column starts in its natural direction.
        assert_eq!(
            q.sort_link(Column::Name),
            "?q=%3Cx%3E&host=hv%20a&sort=name&dir=asc"
        );
        assert_eq!(ListQuery::default().with(|_| {}), "?");
    }
}
