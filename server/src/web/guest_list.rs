//! The guest list's filters, sort order and pages, from the URL's query string: a view can be
//! bookmarked and shared. Pure: it orders and cuts what the analysis produced.

use serde::{Deserialize, Serialize};

use crate::fleet::AnalysedGuest;
pub use crate::fleet::listing::{Column, GuestFilter, Order, WASTEFUL, distro, kernel};
use crate::fleet::published::Published;
use crate::percent;

/// Rows per page.
pub const PAGE_ROWS: usize = 50;

/// The query string of `/guests`: the filters, then the order and the page.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct ListQuery {
    #[serde(flatten)]
    pub filter: GuestFilter,
    /// A column key (see [`Column`]); the default is waste.
    pub sort: String,
    /// `asc` or `desc`; the default depends on the column.
    pub dir: String,
    /// 1-based.
    pub page: usize,
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

    pub fn order(&self) -> Order {
        Order {
            column: self.column(),
            descending: self.descending(),
        }
    }

    /// This query with other values, as a query string (`?…`), leaving out empty ones.
    pub fn with(&self, change: impl FnOnce(&mut ListQuery)) -> String {
        let mut q = self.clone();
        change(&mut q);
        let f = &q.filter;
        let mut fields: Vec<(&str, String)> = f
            .params()
            .into_iter()
            .map(|(name, value)| (name, value.to_string()))
            .collect();
        fields.extend([
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
        ]);
        let pairs: Vec<String> = fields
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", percent::query_value(v)))
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

/// One page of the filtered, sorted guests.
pub struct Page<'a> {
    pub rows: Vec<&'a AnalysedGuest>,
    /// Guests that passed the filters, on all pages.
    pub matching: usize,
    pub page: usize,
    pub pages: usize,
}

/// One page of the list `query` asks for, as of `now_ms`: the pages before it are walked,
/// not the fleet.
pub fn page<'a>(published: &'a Published, query: &'a ListQuery, now_ms: i64) -> Page<'a> {
    let listed = published.list(query.order(), &query.filter, None, now_ms);
    let matching = listed.matching;
    let pages = matching.div_ceil(PAGE_ROWS).max(1);
    let page = query.page.clamp(1, pages);
    let rows = listed
        .guests
        .skip((page - 1) * PAGE_ROWS)
        .take(PAGE_ROWS)
        .map(|g| &**g)
        .collect();
    Page {
        rows,
        matching,
        page,
        pages,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::analysis::test_window;

    fn guest(id: i64, name: &str, host: &str, cpu_pct: f64, wakeups: f64) -> Arc<AnalysedGuest> {
        let mut window = test_window(1, cpu_pct, wakeups, None);
        // Under TCG, where a host-side rate tells the HZ: 2935 wake-ups a second are 1000 Hz.
        window.uses_kvm = Some(false);
        Arc::new(AnalysedGuest {
            name: name.into(),
            uuid: Some(format!("00000000-0000-4000-8000-{id:012}")),
            host: host.into(),
            uses_kvm: None,
            ..AnalysedGuest::example(id, &window)
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
        page(&Published::of(guests), &query, 0)
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
            let published = Published::of(&guests);
            let p = page(&published, &q, 0);
            assert_eq!(
                (p.page, p.rows.len(), p.pages, p.matching),
                (expected_page, rows, 3, 120),
                "{query}"
            );
        }
        let q = serde_urlencoded_like("sort=name&page=2");
        assert_eq!(page(&Published::of(&guests), &q, 0).rows[0].name, "g050");
    }

    #[test]
    fn links_keep_the_view_and_encode_what_they_carry() {
        let q = serde_urlencoded_like("host=hv%20a&q=%3Cx%3E&page=3&sort=cpu&dir=asc");
        assert_eq!(q.filter.host, "hv a");
        assert_eq!(q.filter.q, "<x>");
        assert_eq!(q.page, 3);
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
