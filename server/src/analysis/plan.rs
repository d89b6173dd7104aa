//! The kernel-upgrade plan: guests grouped by what they run and how they tick, the change each
//! group needs, and what it would save, largest saving first.

use std::collections::BTreeMap;

use serde::Serialize;

/// What the plan needs to know of one guest.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanGuest {
    pub distro: Option<String>,
    pub kernel_release: Option<String>,
    pub tick_mode: &'static str,
    /// Host CPU wasted now, in % of one core.
    pub wasted_cpu_pct: f64,
    /// The first suggestion's title and its expected saving (% of a core), if any.
    pub change: Option<(&'static str, Option<f64>)>,
}

/// One group of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PlanGroup {
    pub distro: String,
    pub kernel_release: String,
    pub tick_mode: &'static str,
    pub guests: usize,
    /// Summed waste of the group, in % of one core.
    pub wasted_cpu_pct: f64,
    /// The change most of the group's guests need; empty when none needs one.
    pub change: String,
    /// How many of the group's guests that change is suggested for.
    pub change_guests: usize,
    /// Summed expected saving of that change, in % of one core.
    pub projected_saving_cpu_pct: f64,
}

const UNKNOWN: &str = "unknown";

/// Groups guests by distribution, kernel release and tick mode; orders groups by projected
/// saving, then waste, then size.
pub fn plan(guests: &[PlanGuest]) -> Vec<PlanGroup> {
    let mut groups: BTreeMap<(String, String, &'static str), Vec<&PlanGuest>> = BTreeMap::new();
    for g in guests {
        let key = (
            g.distro.clone().unwrap_or_else(|| UNKNOWN.into()),
            g.kernel_release.clone().unwrap_or_else(|| UNKNOWN.into()),
            g.tick_mode,
        );
        groups.entry(key).or_default().push(g);
    }
    let mut plan: Vec<PlanGroup> = groups
        .into_iter()
        .map(|((distro, kernel_release, tick_mode), members)| {
            let mut votes: BTreeMap<&'static str, (usize, f64)> = BTreeMap::new();
            for (title, saving) in members.iter().filter_map(|g| g.change) {
                let vote = votes.entry(title).or_default();
                vote.0 += 1;
                vote.1 += saving.unwrap_or(0.0);
            }
            let (change, (change_guests, projected)) = votes
                .into_iter()
                .max_by(|a, b| a.1.0.cmp(&b.1.0).then(a.1.1.total_cmp(&b.1.1)))
                .unwrap_or(("", (0, 0.0)));
            PlanGroup {
                distro,
                kernel_release,
                tick_mode,
                guests: members.len(),
                wasted_cpu_pct: members.iter().map(|g| g.wasted_cpu_pct).sum(),
                change: change.to_string(),
                change_guests,
                projected_saving_cpu_pct: projected,
            }
        })
        .collect();
    plan.sort_by(|a, b| {
        b.projected_saving_cpu_pct
            .total_cmp(&a.projected_saving_cpu_pct)
            .then(b.wasted_cpu_pct.total_cmp(&a.wasted_cpu_pct))
            .then(b.guests.cmp(&a.guests))
    });
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(
        distro: &str,
        release: &str,
        mode: &'static str,
        waste: f64,
        change: Option<(&'static str, Option<f64>)>,
    ) -> PlanGuest {
        PlanGuest {
            distro: (!distro.is_empty()).then(|| distro.to_string()),
            kernel_release: (!release.is_empty()).then(|| release.to_string()),
            tick_mode: mode,
            wasted_cpu_pct: waste,
            change,
        }
    }

    #[test]
    fn groups_by_what_guests_run_and_orders_by_saving() {
        let nohz = Some(("Remove `nohz=off`", Some(4.8)));
        let rhel = Some(("Upgrade to a kernel that can stop its tick", Some(15.0)));
        let guests = [
            g("Debian 12", "6.1.0-57", "periodic", 4.8, nohz),
            g("Debian 12", "6.1.0-57", "periodic", 4.8, nohz),
            g("Debian 12", "6.1.0-57", "tickless", 0.0, None),
            g("CentOS 5.11", "2.6.18-398.el5", "periodic", 15.0, rhel),
            g(
                "",
                "",
                "periodic",
                3.0,
                Some(("Make the guest kernel tickless", Some(3.0))),
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
        assert_eq!(p[1].change_guests, 2);
        assert_eq!(p[3].change, "");
        assert_eq!(p[2].distro, "unknown");
    }

    #[test]
    fn the_change_most_guests_need_is_the_groups_change() {
        let guests = [
            g("D", "1", "periodic", 5.0, Some(("A", Some(1.0)))),
            g("D", "1", "periodic", 5.0, Some(("B", Some(4.0)))),
            g("D", "1", "periodic", 5.0, Some(("B", None))),
        ];
        let p = plan(&guests);
        assert_eq!((p[0].change.as_str(), p[0].change_guests), ("B", 2));
        assert!((p[0].projected_saving_cpu_pct - 4.0).abs() < 1e-9);
    }
}
