//! `plan-inventory.yml`: the plan as an Ansible inventory (YAML), so that a playbook can make the
//! changes. One group per change (`tickscope_remove_nohz_off`), with what the change is and takes
//! as group variables; each guest the plan changes, once, as a host of its change's group, named
//! by its guest name, with its id, hypervisor host, kernel, OS, platform names, cause and saving
//! as host variables; and one group per cause (`tickscope_cause_windows_timers`) listing its
//! guests again, so that a playbook can take on one cause at a time.
//!
//! Guest names are hostile, and YAML reads many strings as something else: `*x` and `&x` as
//! aliases and anchors, `- x`, `{x}`, `a: b` as structure, and YAML 1.1 readers (PyYAML, so
//! Ansible) read `yes`, `on`, `1:30`, `010` and `2024-01-01` as booleans, numbers and dates. A
//! YAML 1.2 emitter (serde_norway's, tried first) leaves those last ones plain, and Ansible read
//! a guest named `yes` as `true`. So the inventory is written in YAML's flow style, which is
//! JSON's syntax (serde_json writes it): every string double-quoted and escaped, read as the same
//! string by YAML 1.1 and 1.2 readers alike. Comments at the top say what it is.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::cells::{Context, rfc3339};
use crate::analysis::cause::Cause;
use crate::analysis::cost;
use crate::analysis::plan::PlanGroup;
use crate::domain::GuestId;
use crate::error::{AppError, AppResult};
use crate::fleet::AnalysedGuest;

/// The Ansible group of a change: `tickscope_` and its title in lower-case letters, digits and
/// `_` (Ansible's rule for group names), `Remove `nohz=off`` → `tickscope_remove_nohz_off`.
pub fn ansible_group(title: &str) -> String {
    let mut slug = String::new();
    for c in title.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('_') {
            slug.push('_');
        }
    }
    match slug.trim_end_matches('_') {
        "" => "tickscope_change".into(),
        slug => format!("tickscope_{slug}"),
    }
}

type Mapping = Map<String, Value>;

fn entry(map: &mut Mapping, key: &str, value: impl Into<Value>) {
    map.insert(key.to_string(), value.into());
}

fn text(value: Option<&str>) -> Value {
    value.map_or(Value::Null, Value::from)
}

fn number(value: Option<f64>) -> Value {
    // Four decimals, as the CSV exports have them.
    value.map_or(Value::Null, |v| Value::from((v * 1e4).round() / 1e4))
}

/// A guest name Ansible reads as the host name it is: letters, digits, `-`, `_` and `.`,
/// starting with a letter or digit, at most 253 characters (a DNS name's length). Not a name
/// that would point a playbook elsewhere: `localhost` or an IP address (the change would be
/// made on the machine running Ansible, or on whatever has that address), nor Ansible's own
/// groups `all` and `ungrouped`.
pub fn plain_host_name(name: &str) -> Option<&str> {
    let plain = name.len() <= 253
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    let lower = name.to_ascii_lowercase();
    let elsewhere = ["localhost", "all", "ungrouped"].contains(&lower.trim_end_matches('.'))
        || lower.starts_with("localhost.")
        || name.parse::<std::net::IpAddr>().is_ok()
        // What resolvers also read as an IPv4 address: dotted numbers, however many parts.
        || name.chars().all(|c| c.is_ascii_digit() || c == '.');
    (plain && !elsewhere).then_some(name)
}

/// JSON as YAML readers take it: YAML allows fewer characters unescaped than JSON (PyYAML,
/// Ansible's reader, refuses a whole file for one U+FFFE in a VM's name), so each character
/// outside YAML's printable set is written as a `\uXXXX` escape, which both read alike. JSON
/// has such characters only inside strings, and already escapes those below U+0020.
pub fn yaml_printable(json: &str) -> String {
    let printable = |c: char| {
        matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}')
            || c >= '\u{10000}'
    };
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if printable(c) {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        }
    }
    out
}

/// The plan as an Ansible inventory in YAML. Each guest is a host named by its guest name, or
/// `tickscope-guest-<id>` where that name is not a plain host name or another guest of the plan
/// took it first; its exact name is always `tickscope_guest_name`.
pub fn plan_inventory(
    plan: &[PlanGroup],
    guests: &[Arc<AnalysedGuest>],
    context: &Context,
) -> AppResult<String> {
    let guests: HashMap<GuestId, &AnalysedGuest> =
        guests.iter().map(|g| (g.id, g.as_ref())).collect();
    let model = &context.model;
    // Groups in the order the plan first needs them.
    let mut children: Vec<(String, Mapping, Mapping)> = Vec::new();
    let mut group_of_title: HashMap<&str, usize> = HashMap::new();
    let mut taken: HashSet<String> = HashSet::new();
    // Each guest again under its cause (`tickscope_cause_windows_timers`): Ansible merges a
    // host's variables over its groups, so they are written once, under its change.
    let mut by_cause: BTreeMap<Cause, Mapping> = BTreeMap::new();
    for p in plan {
        for m in &p.members {
            let Some(change) = &m.change else {
                continue;
            };
            let index = *group_of_title.entry(change.title).or_insert_with(|| {
                let mut name = ansible_group(change.title);
                // Two titles that come out the same get names of their own.
                let base = name.clone();
                let mut n = 2;
                while children.iter().any(|(other, _, _)| *other == name) {
                    name = format!("{base}_{n}");
                    n += 1;
                }
                let mut vars = Mapping::new();
                entry(&mut vars, "tickscope_change_title", change.title);
                entry(&mut vars, "tickscope_change_rule", change.rule);
                entry(&mut vars, "tickscope_cause", change.cause.as_str());
                entry(&mut vars, "tickscope_change_kind", change.kind.as_str());
                entry(&mut vars, "tickscope_needs", change.needs.as_str());
                children.push((name, vars, Mapping::new()));
                children.len() - 1
            });
            let g = guests.get(&GuestId(m.id)).copied();
            let kernel = g.and_then(|g| g.kernel.as_ref());
            let mut host = Mapping::new();
            entry(&mut host, "tickscope_guest_id", m.id);
            entry(&mut host, "tickscope_guest_name", m.name.as_str());
            entry(&mut host, "tickscope_host", m.host.as_str());
            entry(
                &mut host,
                "tickscope_hypervisor",
                text(g.map(|g| g.hypervisor.as_str())),
            );
            entry(
                &mut host,
                "tickscope_kernel_release",
                text(kernel.and_then(|k| k.kernel_release.as_deref())),
            );
            entry(
                &mut host,
                "tickscope_distro",
                text(kernel.and_then(|k| k.distro.as_deref())),
            );
            entry(&mut host, "tickscope_plan_group", p.key.as_str());
            entry(
                &mut host,
                "tickscope_cause",
                text(p.cause.map(|c| c.as_str())),
            );
            entry(
                &mut host,
                "tickscope_os",
                text(g.map(|g| g.os().family.as_str())),
            );
            let platform = g.and_then(|g| g.platform.as_ref());
            entry(
                &mut host,
                "tickscope_platform",
                text(platform.map(|p| p.kind.as_str())),
            );
            for (var, part) in [
                (
                    "tickscope_platform_name",
                    platform.and_then(|p| p.name.as_deref()),
                ),
                (
                    "tickscope_platform_group",
                    platform.and_then(|p| p.group.as_deref()),
                ),
                (
                    "tickscope_platform_id",
                    platform.and_then(|p| p.id.as_deref()),
                ),
                (
                    "tickscope_platform_flavor",
                    platform.and_then(|p| p.flavor.as_deref()),
                ),
            ] {
                entry(&mut host, var, text(part));
            }
            entry(&mut host, "tickscope_tick_mode", p.tick_mode);
            entry(
                &mut host,
                "tickscope_tick_mode_confidence",
                m.tick_mode_confidence.as_str(),
            );
            entry(&mut host, "tickscope_change", change.text.as_str());
            entry(&mut host, "tickscope_change_kind", change.kind.as_str());
            entry(&mut host, "tickscope_needs", change.needs.as_str());
            entry(
                &mut host,
                "tickscope_saving_cpu_pct",
                number(change.saving_cpu_pct),
            );
            entry(
                &mut host,
                "tickscope_saving_per_year",
                number(
                    change
                        .saving_cpu_pct
                        .map(|pct| cost::of_waste(pct, model).money_per_year),
                ),
            );
            entry(&mut host, "tickscope_currency", model.currency.as_str());
            // Ansible reads a host's name as a pattern (`a:22` a port, `a[1:3]` a range) and
            // merges hosts of the same name: a guest whose name is not a plain host name, or
            // was taken by another guest first, is listed as `tickscope-guest-<id>`.
            let mut name = match plain_host_name(&m.name) {
                Some(plain) if !taken.contains(plain) => plain.to_string(),
                _ => format!("tickscope-guest-{}", m.id),
            };
            let base = name.clone();
            let mut n = 2;
            while taken.contains(&name) {
                name = format!("{base}-{n}");
                n += 1;
            }
            taken.insert(name.clone());
            if let Some(cause) = p.cause {
                by_cause
                    .entry(cause)
                    .or_default()
                    .insert(name.clone(), Value::Null);
            }
            children[index].2.insert(name, Value::from(host));
        }
    }
    let mut all_vars = Mapping::new();
    entry(&mut all_vars, "tickscope_demo", context.demo);
    entry(
        &mut all_vars,
        "tickscope_generated_at",
        rfc3339(context.now_ms),
    );
    let mut groups = Mapping::new();
    for (name, vars, hosts) in children {
        let mut group = Mapping::new();
        entry(&mut group, "vars", vars);
        entry(&mut group, "hosts", hosts);
        groups.insert(name, Value::from(group));
    }
    for (cause, hosts) in by_cause {
        let mut vars = Mapping::new();
        entry(&mut vars, "tickscope_cause", cause.as_str());
        entry(&mut vars, "tickscope_cause_label", cause.label());
        let mut group = Mapping::new();
        entry(&mut group, "vars", vars);
        entry(&mut group, "hosts", hosts);
        groups.insert(
            format!("tickscope_cause_{}", cause.as_str()),
            Value::from(group),
        );
    }
    let mut all = Mapping::new();
    entry(&mut all, "vars", all_vars);
    entry(&mut all, "children", groups);
    let mut root = Mapping::new();
    entry(&mut root, "all", all);
    let yaml = serde_json::to_string_pretty(&Value::from(root))
        .map_err(|e| AppError::encode("the inventory", e))?;
    let yaml = yaml_printable(&yaml);
    let demo = if context.demo {
        "# Demo data: a simulated fleet (tickscope-server serve --demo); no real host reported it.\n"
    } else {
        ""
    };
    Ok(format!(
        "# The tickscope upgrade plan as an Ansible inventory, made {}: one group per change,\n\
         # each guest the plan changes once, by its guest name, and again in its cause's group\n\
         # (tickscope_cause_<cause>). YAML in flow style: every string quoted, so that no\n\
         # guest name is read as a boolean, number or date.\n\
         {demo}{yaml}\n",
        rfc3339(context.now_ms)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_yaml_does_not_allow_are_escaped() {
        let cases = [
            ("\"web-01\"", "\"web-01\""),
            ("\"a\u{fffe}b\"", "\"a\\ufffeb\""),
            ("\"\u{ffff}\"", "\"\\uffff\""),
            ("\"\u{7f}\u{9f}\"", "\"\\u007f\\u009f\""),
            (
                "\"caf\u{e9} \u{1f600} \u{85}\"",
                "\"caf\u{e9} \u{1f600} \u{85}\"",
            ),
        ];
        for (json, expected) in cases {
            assert_eq!(yaml_printable(json), expected, "{json:?}");
        }
    }
    use crate::analysis::change_kind::ChangeKind;
    use crate::analysis::cost::CostModel;
    use crate::analysis::plan::{PlanMember, PlannedChange};
    use crate::analysis::tick_mode::Confidence;

    #[test]
    fn names_with_control_characters_and_duplicates_come_through_as_data() {
        // Ingest refuses control characters in names; the writer must not rely on it.
        let names = [
            "a\nb: c",
            "tab\there",
            "yes",
            "yes",
            "- x",
            "null",
            "web-01",
        ];
        let change = PlannedChange {
            title: "Remove `nohz=off`",
            text: "Remove it\n---\n*x".into(),
            rule: "remove_nohz_off",
            cause: Cause::TickingKernel,
            kind: ChangeKind::BootParameter,
            needs: ChangeKind::BootParameter.needs(),
            confidence: Confidence::High,
            saving_cpu_pct: Some(4.8),
        };
        let members = names
            .iter()
            .enumerate()
            .map(|(i, name)| PlanMember {
                id: i as i64 + 1,
                name: name.to_string(),
                host: "hv\n1".into(),
                tick_mode_confidence: Confidence::High,
                wasted_cpu_pct: 4.8,
                change: Some(change.clone()),
            })
            .collect();
        let plan = [PlanGroup {
            key: "ticking_kernel_unknown_unknown_periodic_00000000".into(),
            cause: Some(Cause::TickingKernel),
            distro: "unknown".into(),
            kernel_release: "unknown".into(),
            tick_mode: "periodic",
            guests: names.len(),
            wasted_cpu_pct: 0.0,
            change: change.title.into(),
            change_kind: Some(change.kind),
            change_guests: names.len(),
            projected_saving_cpu_pct: 0.0,
            members,
        }];
        let model = CostModel::default();
        let context = Context {
            model,
            now_ms: 0,
            demo: true,
        };
        let yaml = plan_inventory(&plan, &[], &context).unwrap();
        let doc: serde_norway::Value = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(doc["all"]["vars"]["tickscope_demo"], true);
        let group = &doc["all"]["children"]["tickscope_remove_nohz_off"];
        assert_eq!(group["vars"]["tickscope_needs"], "reboot");
        let hosts = group["hosts"].as_mapping().unwrap();
        let found: Vec<(String, i64, String)> = hosts
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().unwrap().to_string(),
                    v["tickscope_guest_id"].as_i64().unwrap(),
                    v["tickscope_guest_name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let mut expected: Vec<(String, i64, String)> = vec![
            ("tickscope-guest-1".into(), 1, "a\nb: c".into()),
            ("tickscope-guest-2".into(), 2, "tab\there".into()),
            ("yes".into(), 3, "yes".into()),
            ("tickscope-guest-4".into(), 4, "yes".into()),
            ("tickscope-guest-5".into(), 5, "- x".into()),
            ("null".into(), 6, "null".into()),
            ("web-01".into(), 7, "web-01".into()),
        ];
        expected.sort();
        let mut found = found;
        found.sort();
        assert_eq!(found, expected);
        assert_eq!(hosts.values().next().unwrap()["tickscope_host"], "hv\n1");
        assert_eq!(
            hosts.values().next().unwrap()["tickscope_change"],
            "Remove it\n---\n*x"
        );
        assert!(yaml.starts_with("# The tickscope upgrade plan"));
        assert!(yaml.contains("\n# Demo data"));
        assert_eq!(group["vars"]["tickscope_cause"], "ticking_kernel");
        // Every guest again under its cause, by the same inventory name.
        let cause = &doc["all"]["children"]["tickscope_cause_ticking_kernel"];
        assert_eq!(cause["vars"]["tickscope_cause_label"], "Ticking kernel");
        let mut under_cause: Vec<String> = cause["hosts"]
            .as_mapping()
            .unwrap()
            .keys()
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        under_cause.sort();
        let names: Vec<String> = expected.iter().map(|(name, _, _)| name.clone()).collect();
        assert_eq!(under_cause, names);
        assert_eq!(
            hosts.values().next().unwrap()["tickscope_cause"],
            "ticking_kernel"
        );
    }

    #[test]
    fn only_plain_names_are_used_as_ansible_host_names() {
        let long = "a".repeat(254);
        let cases = [
            ("web-01", true),
            ("db_2.example.com", true),
            ("01x", true),
            ("yes", true),
            ("01", false),
            ("localhost", false),
            ("LocalHost.localdomain", false),
            ("127.0.0.1", false),
            ("10.1", false),
            ("all", false),
            ("ungrouped", false),
            ("allhosts", true),
            ("host:22", false),
            ("web[1:3]", false),
            ("-x", false),
            (".hidden", false),
            ("two words", false),
            ("a,b", false),
            ("caf\u{e9}", false),
            ("evil\u{202e}gpj", false),
            ("", false),
            (long.as_str(), false),
        ];
        for (name, plain) in cases {
            assert_eq!(plain_host_name(name).is_some(), plain, "{name:?}");
        }
    }

    #[test]
    fn change_titles_make_ansible_group_names() {
        let cases = [
            ("Remove `nohz=off`", "tickscope_remove_nohz_off"),
            ("Remove `idle=poll`", "tickscope_remove_idle_poll"),
            (
                "Divide the RHEL 5 tick by ten",
                "tickscope_divide_the_rhel_5_tick_by_ten",
            ),
            (
                "Stop idle vCPUs from polling (haltpoll)",
                "tickscope_stop_idle_vcpus_from_polling_haltpoll",
            ),
            ("Give it fewer vCPUs", "tickscope_give_it_fewer_vcpus"),
            ("", "tickscope_change"),
            ("***", "tickscope_change"),
            ("Ünïcode 5", "tickscope_n_code_5"),
        ];
        for (title, expected) in cases {
            let name = ansible_group(title);
            assert_eq!(name, expected, "{title:?}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{name}"
            );
        }
    }
}
