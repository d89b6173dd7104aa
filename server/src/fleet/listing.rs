//! Which guests a list shows and in what order: the filters and sort columns the `/guests` page
//! and `GET /api/v1/guests` share, and the key a page of the list resumes after. Pure: it
//! filters and orders what the analysis produced.
//!
//! The order is total: a column, then the most waste, the most host CPU (the ranking's own
//! order, `fleet::rank`), the name, and the guest id, so that each guest has one place and a
//! page can resume after a key (a keyset cursor) rather than at an offset that moves when a
//! guest ahead of it does.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::analysed::AnalysedGuest;
use crate::domain::GuestId;

/// The filters of a guest list. Empty values mean "any".
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, utoipa::IntoParams)]
#[serde(default)]
#[into_params(parameter_in = Query)]
pub struct GuestFilter {
    /// Name or UUID, or its platform's name, group (project, namespace) or id, contains this
    /// (any case).
    pub q: String,
    /// The hypervisor host's name, exactly.
    pub host: String,
    /// The hypervisor (`qemu`, `cloud-hypervisor`, ...), exactly.
    pub hypervisor: String,
    /// The tick mode (`periodic`, `tickless`, `polling`, ...), or `wasteful`: every guest that
    /// ticks or polls while idle.
    pub mode: String,
    /// The distribution the guest reported, exactly.
    pub distro: String,
    /// The kernel release the guest reported, exactly.
    pub kernel: String,
    /// The kernel's tick rate in Hz (as the guest reported it, else as measured), or `unknown`.
    pub hz: String,
    /// The cause it is filed under (`ticking_kernel`, `windows_timers`, ...).
    pub cause: String,
}

/// The `mode` filter value that matches every guest that ticks or polls while idle.
pub const WASTEFUL: &str = "wasteful";

impl GuestFilter {
    pub fn keeps(&self, g: &AnalysedGuest) -> bool {
        // Nothing is allocated for a filter left empty: this runs for every guest it walks.
        let q = self.q.trim();
        let q = if q.is_empty() {
            String::new()
        } else {
            q.to_lowercase()
        };
        let platform = g.platform.as_ref();
        let platform_has =
            |part: Option<&String>| part.is_some_and(|text| text.to_lowercase().contains(&q));
        Facet::ALL
            .into_iter()
            .all(|facet| facet.keeps(self.wanted(facet), g))
            && (q.is_empty()
                || g.name.to_lowercase().contains(&q)
                || g.uuid.as_deref().is_some_and(|u| u.contains(&q))
                || platform.is_some_and(|p| {
                    platform_has(p.name.as_ref())
                        || platform_has(p.group.as_ref())
                        || platform_has(p.id.as_ref())
                }))
    }

    /// Each filter's query parameter and value, in the order addresses list them.
    pub fn params(&self) -> [(&'static str, &str); 8] {
        [
            ("q", &self.q),
            ("host", &self.host),
            ("hypervisor", &self.hypervisor),
            ("mode", &self.mode),
            ("cause", &self.cause),
            ("distro", &self.distro),
            ("kernel", &self.kernel),
            ("hz", &self.hz),
        ]
    }

    /// The value this filter wants of `facet`, empty for any.
    pub fn wanted(&self, facet: Facet) -> &str {
        match facet {
            Facet::Host => &self.host,
            Facet::Hypervisor => &self.hypervisor,
            Facet::Mode => &self.mode,
            Facet::Hz => &self.hz,
            Facet::Distro => &self.distro,
            Facet::Kernel => &self.kernel,
            Facet::Cause => &self.cause,
        }
    }
}

/// What a guest list filters by value (besides the search), and the overview and the filters'
/// choices count guests by: each has one value per guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Facet {
    Host,
    Hypervisor,
    /// The tick mode; a filter may also want [`WASTEFUL`].
    Mode,
    /// See [`hz`].
    Hz,
    Distro,
    Kernel,
    /// See [`cause`].
    Cause,
}

impl Facet {
    pub const ALL: [Facet; 7] = [
        Facet::Host,
        Facet::Hypervisor,
        Facet::Mode,
        Facet::Hz,
        Facet::Distro,
        Facet::Kernel,
        Facet::Cause,
    ];

    /// The guest's value (empty when it has none: a distribution or kernel not reported).
    pub fn value(self, g: &AnalysedGuest) -> Cow<'_, str> {
        match self {
            Facet::Host => Cow::Borrowed(&g.host),
            Facet::Hypervisor => Cow::Borrowed(&g.hypervisor),
            Facet::Mode => Cow::Borrowed(mode(g)),
            Facet::Hz => Cow::Owned(hz(g)),
            Facet::Distro => Cow::Borrowed(distro_of(g)),
            Facet::Kernel => Cow::Borrowed(kernel_of(g)),
            Facet::Cause => Cow::Borrowed(cause(g)),
        }
    }

    /// Whether a guest has the `wanted` value (any when empty).
    pub fn keeps(self, wanted: &str, g: &AnalysedGuest) -> bool {
        if wanted.is_empty() {
            return true;
        }
        if self == Facet::Mode && wanted == WASTEFUL {
            return g.verdict.classification.mode.is_wasteful();
        }
        self.value(g) == wanted
    }

    /// Its place in [`Facet::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

pub fn mode(g: &AnalysedGuest) -> &'static str {
    g.verdict.classification.mode.as_str()
}

/// The cause the guest is filed under, empty when none.
pub fn cause(g: &AnalysedGuest) -> &'static str {
    g.verdict.cause.map_or("", |c| c.as_str())
}

/// The guest's tick rate: CONFIG_HZ as it reported it, else the rate its wake-ups match.
pub fn hz(g: &AnalysedGuest) -> String {
    hz_text(hz_of(g))
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

/// The columns a list sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
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
    /// The kernel's tick rate (see [`hz`]); unknown sorts below every rate.
    Hz,
    /// The cause it is filed under (see [`cause`]).
    Cause,
    /// The guest id: the one order no report changes.
    Id,
}

impl Column {
    pub const ALL: [Column; 13] = [
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
        Column::Hz,
        Column::Cause,
        Column::Id,
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
            Column::Hz => "hz",
            Column::Cause => "cause",
            Column::Id => "id",
        }
    }

    pub fn parse(key: &str) -> Option<Column> {
        Column::ALL.into_iter().find(|c| c.key() == key)
    }

    /// Figures read best largest first; names and ids in ascending order.
    pub fn descending_by_default(self) -> bool {
        matches!(
            self,
            Column::Vcpus | Column::Cpu | Column::Wakeups | Column::Waste | Column::Hz
        )
    }

    /// The column a facet's values are sorted by.
    pub fn of_facet(facet: Facet) -> Column {
        match facet {
            Facet::Host => Column::Host,
            Facet::Hypervisor => Column::Hypervisor,
            Facet::Mode => Column::Mode,
            Facet::Hz => Column::Hz,
            Facet::Distro => Column::Distro,
            Facet::Kernel => Column::Kernel,
            Facet::Cause => Column::Cause,
        }
    }

    /// The value of this column a guest sorts by, borrowed from it.
    pub fn val(self, g: &AnalysedGuest) -> Val<'_> {
        let cpu = |g: &AnalysedGuest| g.verdict.rates.map_or(-1.0, |r| r.host_cpu_pct);
        let wakeups = |g: &AnalysedGuest| g.verdict.rates.map_or(-1.0, |r| r.wakeups_per_vcpu_s);
        match self {
            Column::Name => Val::Folded(&g.name),
            Column::Host => Val::Text(&g.host),
            Column::Hypervisor => Val::Text(&g.hypervisor),
            Column::Vcpus => Val::Integer(i64::from(g.vcpus)),
            Column::Cpu => Val::Number(cpu(g)),
            Column::Wakeups => Val::Number(wakeups(g)),
            Column::Mode => Val::Text(mode(g)),
            Column::Waste => Val::Number(g.wasted_cpu_pct()),
            Column::Distro => Val::Text(distro_of(g)),
            Column::Kernel => Val::Text(kernel_of(g)),
            Column::Hz => Val::Integer(hz_of(g).map_or(-1, i64::from)),
            Column::Cause => Val::Text(cause(g)),
            Column::Id => Val::Integer(g.id.0),
        }
    }

    /// The value of this column a guest sorts by, as a cursor keeps it.
    fn value(self, g: &AnalysedGuest) -> KeyValue {
        self.val(g).to_owned()
    }

    /// The value a facet filter's `wanted` text stands for in this (the facet's) column;
    /// `None` when no guest can have it (an HZ that is not a number).
    pub fn filter_val(self, wanted: &str) -> Option<Val<'_>> {
        match self {
            Column::Hz if wanted == "unknown" => Some(Val::Integer(-1)),
            Column::Hz => wanted.parse::<u32>().ok().map(|hz| Val::Integer(hz.into())),
            _ => Some(Val::Text(wanted)),
        }
    }

    /// Whether `value` is of the kind this column sorts by (a key read back from a client).
    pub fn holds(self, value: &KeyValue) -> bool {
        let kind = match self {
            Column::Vcpus | Column::Id | Column::Hz => KeyValue::Integer(0),
            Column::Cpu | Column::Wakeups | Column::Waste => KeyValue::Number(0.0),
            _ => KeyValue::Text(String::new()),
        };
        std::mem::discriminant(&kind) == std::mem::discriminant(value)
    }
}

/// A column's value in a sort key.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyValue {
    Text(String),
    Number(f64),
    Integer(i64),
}

impl KeyValue {
    pub fn val(&self) -> Val<'_> {
        match self {
            KeyValue::Text(t) => Val::Text(t),
            KeyValue::Number(n) => Val::Number(*n),
            KeyValue::Integer(i) => Val::Integer(*i),
        }
    }
}

/// A column's value borrowed from a guest, a cursor's key or a filter.
#[derive(Debug, Clone, Copy)]
pub enum Val<'a> {
    Text(&'a str),
    /// A name, compared lower-cased (char by char, as [`Val::to_owned`] writes it).
    Folded(&'a str),
    Number(f64),
    Integer(i64),
}

impl Val<'_> {
    pub fn to_owned(self) -> KeyValue {
        match self {
            Val::Text(t) => KeyValue::Text(t.to_string()),
            Val::Folded(t) => KeyValue::Text(t.chars().flat_map(char::to_lowercase).collect()),
            Val::Number(n) => KeyValue::Number(n),
            Val::Integer(i) => KeyValue::Integer(i),
        }
    }

    /// The order of two values of one column. A folded name is compared lower-cased char by
    /// char, without allocating, against another or a cursor's (folded already: folding
    /// again changes nothing).
    pub fn order(self, other: Val<'_>) -> Ordering {
        match (self, other) {
            (Val::Text(a), Val::Text(b)) => a.cmp(b),
            (Val::Folded(a) | Val::Text(a), Val::Folded(b) | Val::Text(b)) => a
                .chars()
                .flat_map(char::to_lowercase)
                .cmp(b.chars().flat_map(char::to_lowercase)),
            (Val::Number(a), Val::Number(b)) => a.total_cmp(&b),
            (Val::Integer(a), Val::Integer(b)) => a.cmp(&b),
            // Keys of one order are all of one kind (`Column::holds`); any fixed answer would do.
            (a, b) => a.rank().cmp(&b.rank()),
        }
    }

    fn rank(self) -> u8 {
        match self {
            Val::Text(_) | Val::Folded(_) => 0,
            Val::Number(_) => 1,
            Val::Integer(_) => 2,
        }
    }
}

/// Where a guest stands in an order: its column's value, then what breaks ties.
#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    pub value: KeyValue,
    pub wasted_cpu_pct: f64,
    /// Host CPU in % of a core, 0 when unknown (as `fleet::rank` counts it).
    pub host_cpu_pct: f64,
    pub name: String,
    pub id: GuestId,
}

/// A column and a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Order {
    pub column: Column,
    pub descending: bool,
}

impl Default for Order {
    /// The ranking: most waste first.
    fn default() -> Self {
        Order::by(Column::Waste)
    }
}

impl Order {
    /// By `column` in its natural direction.
    pub fn by(column: Column) -> Order {
        Order {
            column,
            descending: column.descending_by_default(),
        }
    }

    pub fn key(&self, g: &AnalysedGuest) -> SortKey {
        SortKey {
            value: self.column.value(g),
            wasted_cpu_pct: g.wasted_cpu_pct(),
            host_cpu_pct: g.verdict.rates.map_or(0.0, |r| r.host_cpu_pct),
            name: g.name.clone(),
            id: g.id,
        }
    }

    /// The order of two keys: the column (turned round if descending), then ties as the
    /// ranking breaks them (most waste, most host CPU, name), then the id: two guests are
    /// never equal.
    pub fn compare(&self, a: &SortKey, b: &SortKey) -> Ordering {
        let by_column = a.value.val().order(b.value.val());
        let by_column = if self.descending {
            by_column.reverse()
        } else {
            by_column
        };
        by_column
            .then_with(|| b.wasted_cpu_pct.total_cmp(&a.wasted_cpu_pct))
            .then_with(|| b.host_cpu_pct.total_cmp(&a.host_cpu_pct))
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.id.cmp(&b.id))
    }

    /// The guests `filter` keeps that come after `after` (all of them without it), in this
    /// order, by sorting them all: what the kept orders (`super::lists`) are tested against.
    pub fn sorted<'a>(
        &self,
        guests: &'a [Arc<AnalysedGuest>],
        filter: &GuestFilter,
        after: Option<&SortKey>,
    ) -> Vec<&'a Arc<AnalysedGuest>> {
        let mut keyed: Vec<(SortKey, &Arc<AnalysedGuest>)> = guests
            .iter()
            .filter(|g| filter.keeps(g))
            .map(|g| (self.key(g), g))
            .filter(|(key, _)| after.is_none_or(|after| self.compare(key, after).is_gt()))
            .collect();
        keyed.sort_by(|(a, _), (b, _)| self.compare(a, b));
        keyed.into_iter().map(|(_, g)| g).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::test_window;

    fn guest(id: i64, name: &str, cpu_pct: f64, wakeups: f64) -> Arc<AnalysedGuest> {
        let mut window = test_window(1, cpu_pct, wakeups, None);
        window.uses_kvm = Some(false);
        Arc::new(AnalysedGuest {
            name: name.into(),
            host: format!("hv-{}", id % 3),
            vcpus: 1 + (id % 4) as u32,
            uses_kvm: None,
            ..AnalysedGuest::example(id, &window)
        })
    }

    /// Many ties: few distinct names and figures.
    fn fleet() -> Vec<Arc<AnalysedGuest>> {
        (1..=40)
            .map(|i| {
                let (cpu, wakeups) = [(0.3, 20.0), (4.1, 2935.0), (5.3, 650.0)][i as usize % 3];
                guest(i, ["a", "B", "c", "a"][i as usize % 4], cpu, wakeups)
            })
            .collect()
    }

    #[test]
    fn resuming_after_each_key_walks_every_order_once() {
        let guests = fleet();
        for column in Column::ALL {
            for descending in [false, true] {
                let order = Order { column, descending };
                let all = order.sorted(&guests, &GuestFilter::default(), None);
                assert_eq!(all.len(), guests.len(), "{order:?}");
                // Each guest is strictly after the one before: no two are equal.
                for pair in all.windows(2) {
                    assert!(
                        order
                            .compare(&order.key(pair[0]), &order.key(pair[1]))
                            .is_lt(),
                        "{order:?}"
                    );
                }
                // Pages of 7, each resumed after the last key of the one before.
                let mut walked = Vec::new();
                let mut after: Option<SortKey> = None;
                loop {
                    let page: Vec<_> = order
                        .sorted(&guests, &GuestFilter::default(), after.as_ref())
                        .into_iter()
                        .take(7)
                        .collect();
                    let Some(last) = page.last() else { break };
                    after = Some(order.key(last));
                    walked.extend(page.iter().map(|g| g.id));
                }
                let ids: Vec<GuestId> = all.iter().map(|g| g.id).collect();
                assert_eq!(walked, ids, "{order:?}");
                assert!(order.column.holds(&order.key(all[0]).value), "{order:?}");
            }
        }
    }

    #[test]
    fn guests_that_stay_put_are_walked_once_while_others_move() {
        let order = Order::default();
        let filter = GuestFilter::default();
        let mut guests = fleet();
        let first: Vec<GuestId> = order
            .sorted(&guests, &filter, None)
            .into_iter()
            .take(7)
            .map(|g| g.id)
            .collect();
        let after = order.key(order.sorted(&guests, &filter, None)[6]);
        // Between two pages: a guest already sent drops to the bottom, one not yet sent jumps
        // to the top, one leaves and one arrives.
        let sent = first[2];
        let sorted = order.sorted(&guests, &filter, None);
        let unsent = sorted[20].id;
        let left = sorted[30].id;
        // Another guest's figures, and a name that sorts first or last among its ties.
        let like = |model: &AnalysedGuest, id: GuestId, name: &str| {
            let mut g = model.clone();
            g.id = id;
            g.name = name.into();
            Arc::new(g)
        };
        let (top, bottom) = (sorted[0].clone(), sorted[sorted.len() - 1].clone());
        for g in guests.iter_mut() {
            if g.id == sent {
                *g = like(&bottom, sent, "zzz");
            } else if g.id == unsent {
                *g = like(&top, unsent, "0");
            }
        }
        guests.retain(|g| g.id != left);
        guests.push(guest(99, "new", 5.3, 650.0));
        let rest: Vec<GuestId> = order
            .sorted(&guests, &filter, Some(&after))
            .into_iter()
            .map(|g| g.id)
            .collect();
        let moved = [sent, unsent, left, GuestId(99)];
        let walked: Vec<GuestId> = first.iter().chain(&rest).copied().collect();
        for g in fleet().iter().filter(|g| !moved.contains(&g.id)) {
            let times = walked.iter().filter(|&&id| id == g.id).count();
            assert_eq!(
                times, 1,
                "{:?} stayed put and was walked {times} times",
                g.id
            );
        }
        // What the documentation says of the others.
        assert!(!rest.contains(&unsent), "it moved before the cursor");
        assert!(
            rest.contains(&sent),
            "it moved after the cursor: sent again"
        );
        assert!(!rest.contains(&left));
        assert!(rest.contains(&GuestId(99)));
    }

    #[test]
    fn the_default_order_is_the_rankings() {
        let guests = fleet();
        let mut ranked = guests.clone();
        crate::fleet::analysed::rank(&mut ranked);
        let sorted = Order::default().sorted(&guests, &GuestFilter::default(), None);
        let waste_cpu_name = |g: &AnalysedGuest| {
            (
                g.wasted_cpu_pct(),
                g.verdict.rates.map(|r| r.host_cpu_pct),
                g.name.clone(),
            )
        };
        assert_eq!(
            sorted.iter().map(|g| waste_cpu_name(g)).collect::<Vec<_>>(),
            ranked.iter().map(|g| waste_cpu_name(g)).collect::<Vec<_>>()
        );
    }
}
