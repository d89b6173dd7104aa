//! The kernel-upgrade plan: guests grouped by what they run and how they tick, the change each
//! group needs, and what it would save, largest saving first. Each group has a key made from what
//! groups it, which the guest exports carry too, and lists its guests.

use std::collections::BTreeMap;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::attribution;
use super::cause::Cause;
use super::change_kind::{ChangeKind, Needs};
use super::suggest::Suggestion;
use super::tick_mode::Confidence;

/// The change the plan schedules for a guest, from its suggestions: the one its cause comes
/// from ([`attribution::main_suggestion`]: the largest saving), else the first at all (one
/// that says what to look at).
pub fn planned(suggestions: &[Suggestion]) -> Option<&Suggestion> {
    attribution::main_suggestion(suggestions).or(suggestions.first())
}

/// One guest's planned change.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PlannedChange {
    /// The change in a few words; guests with the same title make the same change.
    pub title: &'static str,
    /// The change to make on this guest, exactly.
    pub text: String,
    /// The rule that suggested it.
    pub rule: &'static str,
    /// The cause it takes away.
    pub cause: Cause,
    pub kind: ChangeKind,
    pub needs: Needs,
    /// How sure the suggestion is.
    pub confidence: Confidence,
    /// Host CPU it should save, in % of one core, when it can be estimated.
    pub saving_cpu_pct: Option<f64>,
}

impl From<&Suggestion> for PlannedChange {
    fn from(s: &Suggestion) -> Self {
        PlannedChange {
            title: s.title,
            text: s.change.clone(),
            rule: s.rule,
            cause: s.cause,
            kind: s.kind,
            needs: s.kind.needs(),
            confidence: s.confidence,
            saving_cpu_pct: s.saving_cpu_pct,
        }
    }
}

/// What the plan needs to know of one guest; its text borrowed from the analysed guest, since a
/// plan of 100,000 guests would otherwise copy every name twice.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanGuest<'a> {
    pub id: i64,
    pub name: &'a str,
    pub host: &'a str,
    pub distro: Option<&'a str>,
    pub kernel_release: Option<&'a str>,
    pub tick_mode: &'static str,
    /// The cause it is filed under, if any.
    pub cause: Option<Cause>,
    /// How sure the tick mode is.
    pub tick_mode_confidence: Confidence,
    /// Host CPU wasted now, in % of one core.
    pub wasted_cpu_pct: f64,
    pub change: Option<PlannedChange>,
}

/// One guest of a group, as the JSON plan lists it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PlanMember {
    pub id: i64,
    pub name: String,
    pub host: String,
    pub tick_mode_confidence: Confidence,
    /// Host CPU it wastes now, in % of one core.
    pub wasted_cpu_pct: f64,
    /// Its own change (not necessarily the group's); `null` when it needs none.
    pub change: Option<PlannedChange>,
}

/// One group of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PlanGroup {
    /// Stable identifier of the group, made from its cause, distribution, kernel release and
    /// tick mode (see [`group_key`]): the `group_key` column of the guest exports.
    pub key: String,
    /// The cause of idle burn its guests are filed under; `null` for guests nothing is wrong
    /// with.
    pub cause: Option<Cause>,
    /// `unknown` when its guests did not report one.
    pub distro: String,
    pub kernel_release: String,
    pub tick_mode: &'static str,
    pub guests: usize,
    /// Summed waste of the group, in % of one core.
    pub wasted_cpu_pct: f64,
    /// The change most of the group's guests need; empty when none needs one.
    pub change: String,
    /// What that change takes; `null` when there is none.
    pub change_kind: Option<ChangeKind>,
    /// How many of the group's guests that change is suggested for.
    pub change_guests: usize,
    /// Summed expected saving of that change, in % of one core.
    pub projected_saving_cpu_pct: f64,
    /// Its guests, most wasteful first.
    pub members: Vec<PlanMember>,
}

const UNKNOWN: &str = "unknown";
/// Longest a part of a group key may be before its hash; the hash keeps longer ones apart.
const KEY_PART_MAX_CHARS: usize = 40;

/// A group's key: each part made safe (lower-case ASCII letters, digits and dots, other runs as
/// `-`, at most 40 characters), joined by `_`, then 8 hex digits of a SHA-256 of the exact parts,
/// so that groups whose safe forms meet (`Debian 12` and `debian-12`, an unknown distribution and
/// one reported as `unknown`) still get keys of their own. The same group gets the same key in
/// every export and on every run. A group with a cause starts with it (`ticking_kernel_...`);
/// one without has the key groups had before causes were named.
pub fn group_key(
    cause: Option<Cause>,
    distro: Option<&str>,
    kernel_release: Option<&str>,
    tick_mode: &str,
) -> String {
    let safe = |part: Option<&str>| -> String {
        let Some(text) = part else {
            return UNKNOWN.into();
        };
        let mut out = String::new();
        for c in text.chars().flat_map(char::to_lowercase) {
            if c.is_ascii_alphanumeric() || c == '.' {
                out.push(c);
            } else if !out.ends_with('-') {
                out.push('-');
            }
        }
        let out: String = out
            .trim_matches('-')
            .chars()
            .take(KEY_PART_MAX_CHARS)
            .collect();
        let out = out.trim_end_matches('-');
        if out.is_empty() {
            "other".into()
        } else {
            out.into()
        }
    };
    let mut hash = Sha256::new();
    if let Some(cause) = cause {
        hash.update([2u8]);
        hash.update(cause.as_str().as_bytes());
    }
    for part in [distro, kernel_release, Some(tick_mode)] {
        // A missing part hashes apart from any text, `unknown` included.
        match part {
            None => hash.update([0u8]),
            Some(text) => {
                hash.update([1u8]);
                hash.update((text.len() as u64).to_be_bytes());
                hash.update(text.as_bytes());
            }
        }
    }
    let digest = hex::encode(hash.finalize());
    let cause = cause.map_or(String::new(), |c| format!("{}_", c.as_str()));
    format!(
        "{cause}{}_{}_{}_{}",
        safe(distro),
        safe(kernel_release),
        safe(Some(tick_mode)),
        &digest[..8]
    )
}

/// Groups guests by distribution, kernel release and tick mode; orders groups by projected
/// saving, then waste, then size. Each group lists its members.
pub fn plan(guests: &[PlanGuest]) -> Vec<PlanGroup> {
    plan_of(guests, Members::Listed)
}

/// The same groups without their members (`members` empty), for a page that shows the groups
/// only: listing them copies and sorts every guest.
pub fn groups(guests: &[PlanGuest]) -> Vec<PlanGroup> {
    plan_of(guests, Members::Left)
}

#[derive(Clone, Copy, PartialEq)]
enum Members {
    Listed,
    Left,
}

fn plan_of(guests: &[PlanGuest], members_are: Members) -> Vec<PlanGroup> {
    type Key<'a> = (
        Option<Cause>,
        Option<&'a str>,
        Option<&'a str>,
        &'static str,
    );
    let mut groups: BTreeMap<Key, Vec<&PlanGuest>> = BTreeMap::new();
    for g in guests {
        let key = (g.cause, g.distro, g.kernel_release, g.tick_mode);
        groups.entry(key).or_default().push(g);
    }
    let mut plan: Vec<PlanGroup> = groups
        .into_iter()
        .map(
            |((cause, distro, kernel_release, tick_mode), mut members)| {
                let mut votes: BTreeMap<&'static str, (usize, f64, ChangeKind)> = BTreeMap::new();
                for change in members.iter().filter_map(|g| g.change.as_ref()) {
                    let vote = votes.entry(change.title).or_insert((0, 0.0, change.kind));
                    vote.0 += 1;
                    vote.1 += change.saving_cpu_pct.unwrap_or(0.0);
                }
                let (change, (change_guests, projected, kind)) = votes
                    .into_iter()
                    .max_by(|a, b| a.1.0.cmp(&b.1.0).then(a.1.1.total_cmp(&b.1.1)))
                    .map_or(("", (0, 0.0, None)), |(title, (n, saving, kind))| {
                        (title, (n, saving, Some(kind)))
                    });
                let guests = members.len();
                let wasted_cpu_pct = members.iter().map(|g| g.wasted_cpu_pct).sum();
                if members_are == Members::Left {
                    members.clear();
                }
                members.sort_by(|a, b| {
                    b.wasted_cpu_pct
                        .total_cmp(&a.wasted_cpu_pct)
                        .then_with(|| a.id.cmp(&b.id))
                });
                PlanGroup {
                    key: group_key(cause, distro, kernel_release, tick_mode),
                    cause,
                    distro: distro.unwrap_or(UNKNOWN).to_string(),
                    kernel_release: kernel_release.unwrap_or(UNKNOWN).to_string(),
                    tick_mode,
                    guests,
                    wasted_cpu_pct,
                    change: change.to_string(),
                    change_kind: kind,
                    change_guests,
                    projected_saving_cpu_pct: projected,
                    members: members
                        .into_iter()
                        .map(|g| PlanMember {
                            id: g.id,
                            name: g.name.to_string(),
                            host: g.host.to_string(),
                            tick_mode_confidence: g.tick_mode_confidence,
                            wasted_cpu_pct: g.wasted_cpu_pct,
                            change: g.change.clone(),
                        })
                        .collect(),
                }
            },
        )
        .collect();
    plan.sort_by(|a, b| {
        b.projected_saving_cpu_pct
            .total_cmp(&a.projected_saving_cpu_pct)
            .then(b.wasted_cpu_pct.total_cmp(&a.wasted_cpu_pct))
            .then(b.guests.cmp(&a.guests))
            .then_with(|| a.key.cmp(&b.key))
    });
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(title: &'static str, kind: ChangeKind, saving: Option<f64>) -> PlannedChange {
        PlannedChange {
            title,
            text: format!("{title}, exactly"),
            rule: "test",
            cause: Cause::TickingKernel,
            kind,
            needs: kind.needs(),
            confidence: Confidence::High,
            saving_cpu_pct: saving,
        }
    }

    const NAMES: [&str; 6] = [
        "guest-0", "guest-1", "guest-2", "guest-3", "guest-4", "guest-5",
    ];

    fn g<'a>(
        id: i64,
        distro: &'a str,
        release: &'a str,
        mode: &'static str,
        waste: f64,
        change: Option<PlannedChange>,
    ) -> PlanGuest<'a> {
        PlanGuest {
            id,
            name: NAMES[id as usize],
            host: "hv1",
            distro: (!distro.is_empty()).then_some(distro),
            kernel_release: (!release.is_empty()).then_some(release),
            tick_mode: mode,
            cause: change.as_ref().map(|c| c.cause),
            tick_mode_confidence: Confidence::High,
            wasted_cpu_pct: waste,
            change,
        }
    }

    #[test]
    fn groups_by_what_guests_run_and_orders_by_saving() {
        let nohz = Some(change(
            "Remove `nohz=off`",
            ChangeKind::BootParameter,
            Some(4.8),
        ));
        let rhel = Some(change(
            "Upgrade to a kernel that can stop its tick",
            ChangeKind::KernelUpgrade,
            Some(15.0),
        ));
        let guests = [
            g(1, "Debian 12", "6.1.0-57", "periodic", 4.8, nohz.clone()),
            g(2, "Debian 12", "6.1.0-57", "periodic", 4.8, nohz),
            g(3, "Debian 12", "6.1.0-57", "tickless", 0.0, None),
            g(4, "CentOS 5.11", "2.6.18-398.el5", "periodic", 15.0, rhel),
            g(
                5,
                "",
                "",
                "periodic",
                3.0,
                Some(change(
                    "Make the guest kernel tickless",
                    ChangeKind::Investigate,
                    Some(3.0),
                )),
            ),
        ];
        let p = plan(&guests);
        let rows: Vec<(&str, &str, usize, f64)> = p
            .iter()
            .map(|r| {
                (
                    r.kernel_release.as_str(),
                    r.tick_mode,
                    r.guests,
                    r.projected_saving_cpu_pct,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("2.6.18-398.el5", "periodic", 1, 15.0),
                ("6.1.0-57", "periodic", 2, 9.6),
                ("unknown", "periodic", 1, 3.0),
                ("6.1.0-57", "tickless", 1, 0.0),
            ]
        );
        assert_eq!(p[1].change, "Remove `nohz=off`");
        assert_eq!(p[1].change_kind, Some(ChangeKind::BootParameter));
        assert_eq!(p[1].change_guests, 2);
        assert_eq!(p[3].change, "");
        assert_eq!(p[3].change_kind, None);
        assert_eq!(p[2].distro, "unknown");
        // Every guest is a member of exactly one group, and the group's key is its own.
        let mut ids: Vec<i64> = p
            .iter()
            .flat_map(|g| g.members.iter().map(|m| m.id))
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, [1, 2, 3, 4, 5]);
        assert_eq!(
            p[1].key,
            group_key(
                Some(Cause::TickingKernel),
                Some("Debian 12"),
                Some("6.1.0-57"),
                "periodic"
            )
        );
        assert!(
            p[1].key.starts_with("ticking_kernel_debian-12_"),
            "{}",
            p[1].key
        );
        assert_eq!(p[1].cause, Some(Cause::TickingKernel));
        assert_eq!(
            p[2].key,
            group_key(Some(Cause::TickingKernel), None, None, "periodic")
        );
        assert_eq!(p[3].cause, None);
        assert_eq!(p[0].members[0].name, "guest-4");
        // The groups alone are the same groups, without their members.
        let alone = groups(&guests);
        assert!(alone.iter().all(|g| g.members.is_empty()));
        let emptied: Vec<PlanGroup> = p
            .into_iter()
            .map(|g| PlanGroup {
                members: Vec::new(),
                ..g
            })
            .collect();
        assert_eq!(alone, emptied);
    }

    #[test]
    fn guests_of_one_kernel_and_mode_but_another_cause_are_planned_apart() {
        let windows = PlannedChange {
            cause: Cause::WindowsTimers,
            ..change(
                "Give this Windows guest Hyper-V's synthetic timers",
                ChangeKind::VmConfig,
                Some(20.0),
            )
        };
        let guests = [
            g(1, "", "", "periodic", 20.0, Some(windows)),
            g(
                2,
                "",
                "",
                "periodic",
                3.0,
                Some(change(
                    "Make the guest kernel tickless",
                    ChangeKind::Investigate,
                    Some(3.0),
                )),
            ),
        ];
        let p = plan(&guests);
        let got: Vec<(Option<Cause>, &str, usize)> = p
            .iter()
            .map(|r| (r.cause, r.change.as_str(), r.guests))
            .collect();
        assert_eq!(
            got,
            [
                (
                    Some(Cause::WindowsTimers),
                    "Give this Windows guest Hyper-V's synthetic timers",
                    1
                ),
                (
                    Some(Cause::TickingKernel),
                    "Make the guest kernel tickless",
                    1
                ),
            ]
        );
        assert_ne!(p[0].key, p[1].key);
    }

    #[test]
    fn the_change_most_guests_need_is_the_groups_change() {
        let a = |s| Some(change("A", ChangeKind::BootParameter, s));
        let b = |s| Some(change("B", ChangeKind::KernelConfig, s));
        let guests = [
            g(1, "D", "1", "periodic", 5.0, a(Some(1.0))),
            g(2, "D", "1", "periodic", 5.0, b(Some(4.0))),
            g(3, "D", "1", "periodic", 5.0, b(None)),
        ];
        let p = plan(&guests);
        assert_eq!((p[0].change.as_str(), p[0].change_guests), ("B", 2));
        assert_eq!(p[0].change_kind, Some(ChangeKind::KernelConfig));
        assert!((p[0].projected_saving_cpu_pct - 4.0).abs() < 1e-9);
        // Each member keeps its own change.
        let titles: Vec<&str> = p[0]
            .members
            .iter()
            .map(|m| m.change.as_ref().unwrap().title)
            .collect();
        assert_eq!(titles, ["A", "B", "B"]);
    }

    #[test]
    fn group_keys_are_safe_stable_and_apart() {
        // (distro, release, tick mode, the key before its hash)
        let cases: [(Option<&str>, Option<&str>, &str, &str); 7] = [
            (
                Some("Debian 12"),
                Some("6.1.0-57-cloud-amd64"),
                "periodic",
                "debian-12_6.1.0-57-cloud-amd64_periodic",
            ),
            (None, None, "periodic", "unknown_unknown_periodic"),
            (
                Some("unknown"),
                Some("unknown"),
                "periodic",
                "unknown_unknown_periodic",
            ),
            (
                Some("=cmd|' /C calc'!A0"),
                Some("a\nb: *x &y {z}"),
                "tickless",
                "cmd-c-calc-a0_a-b-x-y-z_tickless",
            ),
            (Some("Дебиан"), Some("-"), "busy", "other_other_busy"),
            (
                Some("CentOS Linux release 5.11 (Final) with a very long name indeed"),
                Some("2.6.18-398.el5"),
                "periodic",
                "centos-linux-release-5.11-final-with-a-v_2.6.18-398.el5_periodic",
            ),
            (
                Some("debian-12"),
                Some("6.1"),
                "periodic",
                "debian-12_6.1_periodic",
            ),
        ];
        let mut keys = std::collections::HashSet::new();
        for (distro, release, mode, readable) in cases {
            let key = group_key(None, distro, release, mode);
            let (head, hash) = key.rsplit_once('_').unwrap();
            assert_eq!(head, readable, "{distro:?} {release:?}");
            assert_eq!(hash.len(), 8);
            assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{key}");
            assert!(
                key.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c)),
                "{key}"
            );
            // The same group, the same key.
            assert_eq!(key, group_key(None, distro, release, mode));
            // Another cause, another group.
            let caused = group_key(Some(Cause::WindowsTimers), distro, release, mode);
            assert_eq!(
                caused,
                format!("windows_timers_{head}_{}", &caused[caused.len() - 8..])
            );
            assert!(keys.insert(caused.clone()), "{caused} given twice");
            assert!(keys.insert(key.clone()), "{key} given twice");
        }
        // Names whose safe forms meet keep keys of their own.
        assert_ne!(
            group_key(None, Some("Debian 12"), Some("6.1"), "periodic"),
            group_key(None, Some("debian-12"), Some("6.1"), "periodic")
        );
        // Without a cause, the key groups had before causes were named.
        assert_eq!(
            group_key(None, Some("Debian 12"), Some("6.1.0-57"), "periodic"),
            "debian-12_6.1.0-57_periodic_861f607f"
        );
    }

    #[test]
    fn the_planned_change_is_the_largest_saving_else_the_first() {
        use crate::analysis::tick_mode::Confidence::Low;
        let s = |rule: &'static str, saving: Option<f64>| Suggestion {
            rule,
            cause: crate::analysis::cause::Cause::TickingKernel,
            title: rule,
            change: String::new(),
            kind: ChangeKind::Investigate,
            why: String::new(),
            confidence: Low,
            saving_cpu_pct: saving,
        };
        // (suggestions, the rule planned)
        let cases: [(Vec<Suggestion>, Option<&str>); 6] = [
            (vec![], None),
            (vec![s("a", None)], Some("a")),
            (vec![s("a", None), s("b", Some(1.0))], Some("b")),
            (vec![s("a", Some(0.0)), s("b", Some(1.0))], Some("b")),
            (vec![s("a", Some(2.0)), s("b", Some(1.0))], Some("a")),
            (vec![s("a", Some(1.0)), s("b", Some(1.0))], Some("a")),
        ];
        for (suggestions, expected) in cases {
            assert_eq!(planned(&suggestions).map(|s| s.rule), expected);
        }
    }
}
