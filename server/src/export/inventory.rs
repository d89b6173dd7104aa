//! `plan-inventory.yml`: the plan as an Ansible inventory (YAML), so that a playbook can make the
//! changes. One group per change (`tickscope_remove_nohz_off`), with what the change is and takes
//! as group variables; each guest the plan changes, once, as a host of its change's group, named
//! by its guest name, with its id, hypervisor host, kernel and saving as host variables.
//!
//! Guest names are hostile: the YAML is written by a YAML library (serde_norway), which quotes
//! and escapes a name that YAML would otherwise read as something else (`*x`, `&x`, `- x`,
//! `{x}`, `a: b`, a newline), so that a name is always read back as the same string.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_norway::{Mapping, Value};

use super::{Context, rfc3339};
use crate::analysis::cost;
use crate::analysis::plan::PlanGroup;
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

fn entry(map: &mut Mapping, key: &str, value: impl Into<Value>) {
    map.insert(Value::from(key), value.into());
}

fn text(value: Option<&str>) -> Value {
    value.map_or(Value::Null, Value::from)
}

fn number(value: Option<f64>) -> Value {
    // Four decimals, as the CSV exports have them.
    value.map_or(Value::Null, |v| Value::from((v * 1e4).round() / 1e4))
}

/// The plan as an Ansible inventory in YAML. A guest whose name another guest of the plan took
/// first is listed as `name#id` (its exact name is `tickscope_guest_name`).
pub fn plan_inventory(
    plan: &[PlanGroup],
    guests: &[Arc<AnalysedGuest>],
    context: &Context,
) -> AppResult<String> {
    let guests: HashMap<i64, &AnalysedGuest> = guests.iter().map(|g| (g.id, g.as_ref())).collect();
    let model = context.model;
    // Groups in the order the plan first needs them.
    let mut children: Vec<(String, Mapping, Mapping)> = Vec::new();
    let mut group_of_title: HashMap<&str, usize> = HashMap::new();
    let mut taken: HashSet<String> = HashSet::new();
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
                entry(&mut vars, "tickscope_change_kind", change.kind.as_str());
                entry(&mut vars, "tickscope_needs", change.needs.as_str());
                children.push((name, vars, Mapping::new()));
                children.len() - 1
            });
            let g = guests.get(&m.id).copied();
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
            // Ansible merges hosts of the same name: each guest gets a name of its own.
            let mut name = m.name.clone();
            if taken.contains(&name) {
                name = format!("{}#{}", m.name, m.id);
            }
            let mut n = 2;
            while taken.contains(&name) {
                name = format!("{}#{}-{n}", m.name, m.id);
                n += 1;
            }
            taken.insert(name.clone());
            children[index]
                .2
                .insert(Value::from(name), Value::from(host));
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
        groups.insert(Value::from(name), Value::from(group));
    }
    let mut all = Mapping::new();
    entry(&mut all, "vars", all_vars);
    entry(&mut all, "children", groups);
    let mut root = Mapping::new();
    entry(&mut root, "all", all);
    let yaml = serde_norway::to_string(&Value::from(root))
        .map_err(|e| AppError::Internal(format!("inventory export: {e}")))?;
    let demo = if context.demo {
        "# Demo data: a simulated fleet (tickscope-server serve --demo); no real host reported it.\n"
    } else {
        ""
    };
    Ok(format!(
        "# The tickscope upgrade plan as an Ansible inventory, made {}: one group per change,\n\
         # each guest the plan changes once, by its guest name.\n{demo}{yaml}",
        rfc3339(context.now_ms)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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
