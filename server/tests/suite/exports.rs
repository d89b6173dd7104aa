//! Exports: the ranked guests and the upgrade plan, as a spreadsheet, a script or Ansible would
//! read them. Every CSV is parsed with the `csv` crate and the inventory with a YAML parser; the
//! plan's guests must each appear exactly once, its groups must join the guest exports, and
//! hostile guest names must come through as data.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::Command;

use axum::http::{Method, StatusCode, header};
use serde_json::{Value, json};

use common::{Server, fleet_report, guest, server, server_with};
use tickscope_server::db::HOUR_MS;
use tickscope_server::domain::GuestId;
use tickscope_server::export::{self, GUEST_COLUMNS, PLAN_COLUMNS, PLAN_GUEST_COLUMNS};
use tickscope_server::fleet::History;
use tickscope_server::ingest;
use tickscope_server::retention::{self, Retention};
use tickscope_server::state::Options;

/// The guests.csv columns as they were before issue 16, documented as stable: they stay first,
/// in this order.
const FIRST_GUEST_COLUMNS: [&str; 19] = [
    "rank",
    "guest",
    "uuid",
    "host",
    "hypervisor",
    "vcpus",
    "host_cpu_pct",
    "wakeups_per_vcpu_s",
    "tick_mode",
    "tick_mode_confidence",
    "estimated_hz",
    "wasted_cpu_pct",
    "wasted_kwh_per_year",
    "wasted_cost_per_year",
    "currency",
    "kernel_release",
    "distro",
    "suggestion",
    "expected_saving_cpu_pct",
];
const FIRST_PLAN_COLUMNS: [&str; 9] = [
    "distro",
    "kernel_release",
    "tick_mode",
    "guests",
    "wasted_cpu_pct",
    "change",
    "change_guests",
    "projected_saving_cpu_pct",
    "projected_saving_per_year",
];

/// Names YAML, CSV and spreadsheets would each read as something else. Control characters
/// (newlines) are refused at ingest, so they are tested on the writers directly, below.
const HOSTILE_NAMES: [&str; 23] = [
    "=cmd|' /C calc'!A0",
    "quote\"d, 'and' comma",
    "*alias",
    "&anchor",
    "key: value",
    "- item",
    "{flow: map}",
    "[flow, seq]",
    "#not a comment",
    "!!python/object:os.system",
    "null",
    "yes",
    "evil\u{202e}gpj.exe",
    "@SUM(A1)",
    // What YAML 1.1 readers (PyYAML, Ansible) take for booleans, numbers, dates, a merge key.
    "on",
    "1:30",
    "010",
    "2024-01-01",
    "~",
    "<<",
    ".inf",
    "'single'",
    // Not control characters, so taken at ingest, but outside what YAML allows unescaped.
    "non\u{fffe}character",
];

/// A CSV export: header and rows as maps from column name to cell.
struct Table {
    header: Vec<String>,
    rows: Vec<HashMap<String, String>>,
}

fn parse_csv(body: &str) -> Table {
    let mut reader = csv::Reader::from_reader(body.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_string)
        .collect();
    let rows = reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            assert_eq!(r.len(), header.len(), "a row of another width: {r:?}");
            header
                .iter()
                .cloned()
                .zip(r.iter().map(str::to_string))
                .collect()
        })
        .collect();
    Table { header, rows }
}

/// Every money column has its currency in the column right after it, filled wherever the money
/// is.
fn assert_money_has_currency(table: &Table, money_columns: &[&str], currency: &str) {
    for money in money_columns {
        let at = table.header.iter().position(|h| h == money).unwrap();
        assert_eq!(
            table.header.get(at + 1).map(String::as_str),
            Some("currency"),
            "{money} without its currency beside it: {:?}",
            table.header
        );
        for row in &table.rows {
            if !row[*money].is_empty() {
                row[*money].parse::<f64>().unwrap();
                assert_eq!(row["currency"], currency, "{row:?}");
            }
        }
    }
}

async fn get(s: &Server, path: &str) -> String {
    let reply = s.call(Method::GET, path, Some(&s.viewer_token), None).await;
    assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.body);
    reply.body
}

fn host_report(host: &str, seq: u64, guests: Vec<Value>) -> Value {
    let mut r = common::report(seq, guests);
    r["agent"]["id"] = json!(format!("agent-{host}"));
    r["agent"]["run_id"] = json!(format!("run-{host}"));
    r["host"]["name"] = json!(host);
    r
}

fn with_facts(mut guest: Value, release: &str, distro: &str, hz: u32) -> Value {
    guest["facts"] = json!({"source": "probe_channel", "received_ms": tickscope_server::clock::now_ms() - 1000, "facts": {
        "collected_ms": tickscope_server::clock::now_ms() - 1000, "kernel_release": release, "distro_name": distro,
        "config": {"source": "/boot/config", "hz": hz, "hz_periodic": false, "no_hz_idle": true},
        "measured_hz": 250.0, "cmdline": "quiet nohz=off", "idle_fraction": 0.98,
        "idle_measured_s": 10.0, "cpus": 1
    }});
    guest
}

/// A fleet on two hosts: hostile names that tick with `nohz=off`, one name on both hosts, a
/// guest with facts, a `idle=poll` guest and a quiet tickless one.
async fn hostile_fleet(s: &Server) {
    let mut hv1: Vec<Value> = HOSTILE_NAMES
        .iter()
        .map(|name| guest(name, 1, 5.3, 650.0, Some("console=ttyS0 nohz=off")))
        .collect();
    hv1.push(guest("quiet", 2, 0.3, 38.0, None));
    hv1.push(guest("twin", 1, 5.0, 640.0, Some("nohz=off")));
    hv1.push(with_facts(
        guest("debian", 1, 4.0, 250.0, Some("quiet nohz=off")),
        "6.1.0-57-cloud-amd64",
        "Debian GNU/Linux 12 (bookworm)",
        250,
    ));
    let hv2 = vec![
        guest("twin", 1, 6.0, 640.0, Some("nohz=off")),
        guest("poller", 1, 99.3, 485.0, Some("idle=poll")),
        guest("quiet-2", 1, 0.3, 38.0, None),
    ];
    // Each host reports with its own token.
    let second_token = tickscope_server::auth::new_token().unwrap();
    s.db.insert_token(
        "hv2",
        tickscope_server::domain::TokenRole::Agent,
        &tickscope_server::auth::token_hash(&second_token),
        None,
        tickscope_server::clock::now_ms(),
    )
    .await
    .unwrap();
    for (host, token, guests) in [("hv1", &s.agent_token, hv1), ("hv2", &second_token, hv2)] {
        let reply = s
            .post_report(Some(token), &host_report(host, 1, guests))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
}

#[tokio::test]
async fn the_guest_csv_parses_back_to_the_ranking_and_defuses_formulas() {
    let s = server().await;
    let mut r = fleet_report(1);
    r["guests"][1]["name"] = json!("=HYPERLINK(\"http://evil.example\",\"click\")");
    s.post_report(Some(&s.agent_token), &r).await;
    let ranking = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    let table = parse_csv(&get(&s, "/api/v1/guests.csv").await);
    assert_eq!(table.header, GUEST_COLUMNS);
    assert_eq!(table.header[..19], FIRST_GUEST_COLUMNS);
    assert_eq!(table.rows.len(), 3);
    for (row, guest) in table.rows.iter().zip(ranking["guests"].as_array().unwrap()) {
        let name = guest["name"].as_str().unwrap();
        let expected = if name.starts_with('=') {
            format!("'{name}")
        } else {
            name.to_string()
        };
        assert_eq!(row["guest"], expected);
        assert_eq!(row["guest_id"], guest["id"].to_string());
        assert_eq!(row["tick_mode"], guest["tick_mode"].as_str().unwrap());
        let waste: f64 = row["wasted_cpu_pct"].parse().unwrap();
        assert!((waste - guest["wasted_cpu_pct"].as_f64().unwrap()).abs() < 1e-3);
        assert_eq!(row["demo"], "false");
        for time in ["last_report", "window_start", "window_end", "computed_at"] {
            chrono::DateTime::parse_from_rfc3339(&row[time])
                .unwrap_or_else(|e| panic!("{time} {:?}: {e}", row[time]));
            assert!(row[time].ends_with('Z'), "{time} not in UTC: {}", row[time]);
        }
    }
    assert_money_has_currency(&table, &["wasted_cost_per_year"], "EUR");
    assert!(
        table.rows.iter().all(|r| !r["guest"].starts_with('=')),
        "a formula reached the CSV"
    );
}

#[tokio::test]
async fn the_plan_groups_guests_and_is_readable_as_json_csv_and_a_page() {
    let s = server().await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    let plan = s
        .call(Method::GET, "/api/v1/plan", Some(&s.viewer_token), None)
        .await;
    assert_eq!(plan.status, StatusCode::OK, "{}", plan.body);
    let plan = plan.json();
    assert_eq!(plan["demo"], false);
    let groups = plan["groups"].as_array().unwrap().clone();
    // Without guest facts: one group of two periodic guests, one of the tickless guest.
    assert_eq!(groups.len(), 2, "{groups:#?}");
    assert_eq!(groups[0]["tick_mode"], "periodic");
    assert_eq!(groups[0]["guests"], 2);
    assert_eq!(groups[0]["change"], "Remove `nohz=off`");
    assert_eq!(groups[0]["change_kind"], "boot_parameter");
    assert!((groups[0]["projected_saving_cpu_pct"].as_f64().unwrap() - 12.4).abs() < 1e-9);
    assert_eq!(groups[1]["change"], "");
    assert_eq!(groups[1]["change_kind"], Value::Null);
    // Each group lists its guests, with their own change.
    let members: Vec<(&str, &str)> = groups[0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap(),
                m["change"]["needs"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(members, [("ticker-2", "reboot"), ("ticker-1", "reboot")]);
    assert_eq!(groups[1]["members"][0]["name"], "quiet");
    assert_eq!(groups[1]["members"][0]["change"], Value::Null);

    let table = parse_csv(&get(&s, "/api/v1/plan.csv").await);
    assert_eq!(table.header, PLAN_COLUMNS);
    assert_eq!(table.header[..9], FIRST_PLAN_COLUMNS);
    assert_eq!(table.rows.len(), 2);
    assert_eq!(
        table.rows[0]["group_key"],
        groups[0]["key"].as_str().unwrap()
    );
    assert_eq!(table.rows[0]["needs"], "reboot");
    assert_eq!(table.rows[1]["change_kind"], "none");
    assert_money_has_currency(&table, &["projected_saving_per_year"], "EUR");

    let page = s.page("/plan", &s.login("alice", "viewer").await).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Kernel-upgrade plan"));
    assert!(page.body.contains("at 7 W per busy core"));
    for link in [
        "/api/v1/plan.csv",
        "/api/v1/plan-guests.csv",
        "/api/v1/plan-inventory.yml",
        "/api/v1/guests.csv",
    ] {
        assert!(
            page.body.contains(&format!("href=\"{link}\"")),
            "no link to {link}"
        );
    }
    assert!(page.body.contains(groups[0]["key"].as_str().unwrap()));
    assert!(page.body.contains("a reboot"));

    for path in [
        "/api/v1/plan",
        "/api/v1/plan.csv",
        "/api/v1/guests.csv",
        "/api/v1/plan-guests.csv",
        "/api/v1/plan-inventory.yml",
    ] {
        let denied = s.call(Method::GET, path, Some(&s.agent_token), None).await;
        assert_eq!(denied.status, StatusCode::FORBIDDEN, "{path}");
        let anonymous = s.call(Method::GET, path, None, None).await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{path}");
    }
}

/// A host variable of an inventory host, as a string.
fn var<'a>(host: &'a serde_norway::Value, name: &str) -> &'a serde_norway::Value {
    host.get(name)
        .unwrap_or_else(|| panic!("no {name} in {host:?}"))
}

#[tokio::test]
async fn every_planned_guest_is_in_each_plan_export_once_and_the_groups_join() {
    let s = server().await;
    hostile_fleet(&s).await;
    let ranking = s
        .call(Method::GET, "/api/v1/guests", Some(&s.viewer_token), None)
        .await
        .json();
    let names: HashMap<i64, String> = ranking["guests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["id"].as_i64().unwrap(),
                g["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(names.len(), HOSTILE_NAMES.len() + 6, "every guest stored");
    let plan: Value = serde_json::from_str(&get(&s, "/api/v1/plan").await).unwrap();
    let groups = plan["groups"].as_array().unwrap();
    // The plan's guests: every member with a change; each guest a member of one group.
    let mut planned: BTreeMap<i64, (String, String)> = BTreeMap::new();
    let mut members = BTreeSet::new();
    for group in groups {
        let key = group["key"].as_str().unwrap().to_string();
        assert_eq!(
            group["members"].as_array().unwrap().len(),
            group["guests"].as_u64().unwrap() as usize
        );
        for m in group["members"].as_array().unwrap() {
            let id = m["id"].as_i64().unwrap();
            assert!(members.insert(id), "guest {id} in two groups");
            assert_eq!(m["name"].as_str().unwrap(), names[&id]);
            if !m["change"].is_null() {
                let title = m["change"]["title"].as_str().unwrap().to_string();
                planned.insert(id, (key.clone(), title));
            }
        }
    }
    assert_eq!(members.len(), names.len(), "every guest in a group");
    // The quiet tickless guests need nothing; every other guest something.
    assert_eq!(planned.len(), names.len() - 2, "{planned:?}");
    let group_keys: BTreeSet<String> = groups
        .iter()
        .map(|g| g["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(group_keys.len(), groups.len(), "two groups share a key");
    assert!(
        groups.iter().all(|g| g["key"] != "unknown / unknown"),
        "a group is named only by what is unknown of it"
    );

    // plan.csv: a row per group, its key and size as the JSON has them.
    let plan_csv = parse_csv(&get(&s, "/api/v1/plan.csv").await);
    assert_eq!(plan_csv.header, PLAN_COLUMNS);
    assert_money_has_currency(&plan_csv, &["projected_saving_per_year"], "EUR");
    let plan_keys: BTreeMap<String, usize> = plan_csv
        .rows
        .iter()
        .map(|r| (r["group_key"].clone(), r["guests"].parse().unwrap()))
        .collect();
    assert_eq!(
        plan_keys.keys().cloned().collect::<BTreeSet<_>>(),
        group_keys
    );

    // plan-guests.csv: each planned guest once, in its group, with its own change.
    let by_guest = parse_csv(&get(&s, "/api/v1/plan-guests.csv").await);
    assert_eq!(by_guest.header, PLAN_GUEST_COLUMNS);
    assert_money_has_currency(&by_guest, &["projected_saving_per_year"], "EUR");
    let mut seen = BTreeMap::new();
    for row in &by_guest.rows {
        let id: i64 = row["guest_id"].parse().unwrap();
        assert!(
            seen.insert(id, (row["group_key"].clone(), row["change"].clone()))
                .is_none(),
            "guest {id} listed twice"
        );
        assert_eq!(row["guest"], export::text_cell(&names[&id]), "{row:?}");
        assert!(plan_keys.contains_key(&row["group_key"]), "{row:?}");
        let expected_needs = match row["change_kind"].as_str() {
            "boot_parameter" => "reboot",
            "kernel_config" | "kernel_upgrade" => "new_kernel",
            "investigate" => "unknown",
            other => panic!("unexpected change kind {other}"),
        };
        assert_eq!(row["needs"], expected_needs, "{row:?}");
        assert!(!row["change_text"].is_empty());
        assert!(
            ["low", "medium", "high"].contains(&row["tick_mode_confidence"].as_str()),
            "{row:?}"
        );
    }
    assert_eq!(seen.len(), by_guest.rows.len());
    assert_eq!(seen, planned);

    // guests.csv: every guest carries its group's key, and each group has as many guests there
    // as plan.csv says.
    let guests_csv = parse_csv(&get(&s, "/api/v1/guests.csv").await);
    let mut per_group: BTreeMap<String, usize> = BTreeMap::new();
    for row in &guests_csv.rows {
        let id: i64 = row["guest_id"].parse().unwrap();
        *per_group.entry(row["group_key"].clone()).or_default() += 1;
        if let Some((key, _)) = planned.get(&id) {
            assert_eq!(&row["group_key"], key, "guest {id}");
        }
        assert_eq!(row["guest"], export::text_cell(&names[&id]));
    }
    assert_eq!(per_group, plan_keys);
    let debian = guests_csv
        .rows
        .iter()
        .find(|r| r["guest"] == "debian")
        .unwrap();
    assert_eq!(debian["nohz_build"], "idle");
    assert_eq!(debian["config_hz"], "250");
    assert_eq!(debian["measured_hz"], "250.0000");
    assert_eq!(debian["facts_source"], "probe_channel");
    // Grouped by its cause first, then what it runs.
    assert!(!debian["cause"].is_empty());
    assert!(
        debian["group_key"].starts_with(&format!(
            "{}_debian-gnu-linux-12-bookworm_6.1.0-57-cloud-amd64_",
            debian["cause"]
        )),
        "{debian:?}"
    );
    assert_eq!(debian["os"], "linux");

    // The inventory: each planned guest once, under its change's group, its name intact.
    let reply = s
        .call(
            Method::GET,
            "/api/v1/plan-inventory.yml",
            Some(&s.viewer_token),
            None,
        )
        .await;
    assert!(reply.content_type.starts_with("application/yaml"));
    let inventory: serde_norway::Value = serde_norway::from_str(&reply.body).unwrap();
    assert_eq!(inventory["all"]["vars"]["tickscope_demo"], false);
    let children = inventory["all"]["children"].as_mapping().unwrap();
    let mut in_inventory: BTreeMap<i64, (String, String)> = BTreeMap::new();
    let mut host_names = BTreeSet::new();
    // Inventory host name → cause, from each cause's group and from each host's variables.
    let mut under_cause: BTreeMap<String, String> = BTreeMap::new();
    let mut cause_of_host: BTreeMap<String, String> = BTreeMap::new();
    for (group_name, group) in children {
        let group_name = group_name.as_str().unwrap();
        assert!(
            group_name.starts_with("tickscope_")
                && group_name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "{group_name}"
        );
        if let Some(cause) = group_name.strip_prefix("tickscope_cause_") {
            assert_eq!(var(&group["vars"], "tickscope_cause"), cause);
            for (host_name, _) in group["hosts"].as_mapping().unwrap() {
                let host_name = host_name.as_str().unwrap().to_string();
                assert!(under_cause.insert(host_name, cause.to_string()).is_none());
            }
            continue;
        }
        let title = var(&group["vars"], "tickscope_change_title")
            .as_str()
            .unwrap();
        assert_eq!(export::ansible_group(title), group_name);
        for (host_name, host) in group["hosts"].as_mapping().unwrap() {
            let host_name = host_name.as_str().unwrap().to_string();
            assert!(host_names.insert(host_name.clone()), "{host_name} twice");
            let id = var(host, "tickscope_guest_id").as_i64().unwrap();
            let name = var(host, "tickscope_guest_name").as_str().unwrap();
            assert_eq!(name, names[&id], "a name changed on the way");
            // Its inventory name is its guest name, unless that is not a plain host name or
            // another guest took it first.
            if export::plain_host_name(name).is_none() || host_name != name {
                assert!(
                    host_name.starts_with(&format!("tickscope-guest-{id}")),
                    "{host_name} for {name}"
                );
            }
            assert!(
                ["hv1", "hv2"].contains(&var(host, "tickscope_host").as_str().unwrap()),
                "{host:?}"
            );
            let key = var(host, "tickscope_plan_group").as_str().unwrap();
            assert!(
                in_inventory
                    .insert(id, (key.to_string(), title.to_string()))
                    .is_none(),
                "guest {id} twice in the inventory"
            );
            assert_eq!(var(host, "tickscope_currency"), "EUR");
            if let Some(cause) = var(host, "tickscope_cause").as_str() {
                cause_of_host.insert(host_name.clone(), cause.to_string());
            }
        }
    }
    assert_eq!(in_inventory, planned);
    // Each guest with a cause is listed again under its cause's group, and only there.
    assert!(!under_cause.is_empty());
    assert_eq!(under_cause, cause_of_host);
    // Every hostile name made it through as itself, and the twins stayed two hosts.
    let inventory_names: BTreeSet<&str> =
        in_inventory.keys().map(|id| names[id].as_str()).collect();
    for name in HOSTILE_NAMES {
        assert!(inventory_names.contains(name), "{name:?} lost");
    }
    let twins: Vec<&String> = host_names
        .iter()
        .filter(|h| {
            h.starts_with("twin") || {
                let id: i64 = h
                    .trim_start_matches("tickscope-guest-")
                    .parse()
                    .unwrap_or(0);
                names.get(&id).is_some_and(|n| n == "twin")
            }
        })
        .collect();
    assert_eq!(twins.len(), 2, "{host_names:?}");
    assert!(host_names.contains("twin"), "{host_names:?}");
    check_with_other_yaml_readers(&reply.body, &in_inventory, &names);
}

/// The inventory read by PyYAML, and by Ansible itself when installed: the same hosts with the
/// same ids and names. Skipped, saying so, where the program is missing.
fn check_with_other_yaml_readers(
    yaml: &str,
    planned: &BTreeMap<i64, (String, String)>,
    names: &HashMap<i64, String>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inventory.yml");
    std::fs::write(&path, yaml).unwrap();
    // Host name → (id, name) as a reader found them.
    let expected: BTreeMap<i64, String> =
        planned.keys().map(|id| (*id, names[id].clone())).collect();
    let python = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml\n\
             doc = yaml.safe_load(open(sys.argv[1]))\n\
             hosts = {}\n\
             for group in doc['all']['children'].values():\n\
             \x20   for name, v in group['hosts'].items():\n\
             \x20       if v is not None:\n\
             \x20           hosts[str(v['tickscope_guest_id'])] = v['tickscope_guest_name']\n\
             print(json.dumps(hosts))",
        ])
        .arg(&path)
        .output();
    match python {
        Ok(out) if out.status.success() => {
            let hosts: BTreeMap<String, String> = serde_json::from_slice(&out.stdout).unwrap();
            let hosts: BTreeMap<i64, String> = hosts
                .into_iter()
                .map(|(id, name)| (id.parse().unwrap(), name))
                .collect();
            assert_eq!(hosts, expected, "PyYAML reads other hosts");
        }
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if stderr.contains("No module named 'yaml'") {
                eprintln!("SKIPPED: PyYAML is not installed (apt-get install python3-yaml)");
            } else {
                panic!("PyYAML failed on the inventory: {stderr}");
            }
        }
        Err(e) => eprintln!("SKIPPED: no python3 to read the inventory with PyYAML: {e}"),
    }
    let ansible = Command::new("ansible-inventory")
        .arg("-i")
        .arg(&path)
        .arg("--list")
        .env("ANSIBLE_INVENTORY_UNPARSED_FAILED", "true")
        .env("ANSIBLE_LOCAL_TEMP", dir.path())
        .env("ANSIBLE_HOME", dir.path())
        .output();
    match ansible {
        Ok(out) => {
            assert!(
                out.status.success(),
                "ansible-inventory refused the inventory: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
            let hostvars = listed["_meta"]["hostvars"].as_object().unwrap();
            let found: BTreeMap<i64, String> = hostvars
                .values()
                .map(|v| {
                    (
                        v["tickscope_guest_id"].as_i64().unwrap(),
                        v["tickscope_guest_name"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            assert_eq!(found, expected, "Ansible reads other hosts");
            assert_eq!(hostvars.len(), expected.len(), "Ansible merged hosts");
            // A cause's group holds the hosts whose variables name that cause.
            for (group, members) in listed.as_object().unwrap() {
                let Some(cause) = group.strip_prefix("tickscope_cause_") else {
                    continue;
                };
                for host in members["hosts"].as_array().unwrap() {
                    let vars = &hostvars[host.as_str().unwrap()];
                    assert_eq!(vars["tickscope_cause"], cause, "{host}");
                }
            }
        }
        Err(_) => eprintln!(
            "SKIPPED: ansible-inventory is not installed (apt-get install ansible-core); \
             the inventory was read by serde_norway and PyYAML only"
        ),
    }
}

#[tokio::test]
async fn demo_exports_say_they_are_demo_data() {
    let s = server_with(Options {
        demo: true,
        ..Options::default()
    })
    .await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    let cases = [
        ("/api/v1/guests.csv", "tickscope-demo-guests.csv"),
        ("/api/v1/plan.csv", "tickscope-demo-plan.csv"),
        ("/api/v1/plan-guests.csv", "tickscope-demo-plan-guests.csv"),
        (
            "/api/v1/plan-inventory.yml",
            "tickscope-demo-plan-inventory.yml",
        ),
    ];
    for (path, file) in cases {
        let headers = s.headers_of(Method::GET, path, Some(&s.viewer_token)).await;
        assert_eq!(
            headers[header::CONTENT_DISPOSITION],
            format!("attachment; filename=\"{file}\""),
            "{path}"
        );
        let body = get(&s, path).await;
        if path.ends_with(".csv") {
            let table = parse_csv(&body);
            assert!(table.header.iter().any(|c| c == "demo"), "{path}");
            assert!(!table.rows.is_empty());
            assert!(table.rows.iter().all(|r| r["demo"] == "true"), "{path}");
        } else {
            let inventory: serde_norway::Value = serde_norway::from_str(&body).unwrap();
            assert_eq!(inventory["all"]["vars"]["tickscope_demo"], true);
            assert!(body.lines().any(|l| l.starts_with("# Demo data")), "{body}");
        }
    }
    let plan: Value = serde_json::from_str(&get(&s, "/api/v1/plan").await).unwrap();
    assert_eq!(plan["demo"], true);
    // The printed page keeps its label: the print stylesheet shows the banner.
    let page = s.page("/plan", &s.login("alice", "viewer").await).await;
    assert!(page.body.contains("class=\"demo-banner\""));
    let css = s
        .call(Method::GET, "/static/style.css", None, None)
        .await
        .body;
    for block in css.split("@media print").skip(1) {
        let block = &block[..block.find("\n}").unwrap_or(block.len())];
        for rule in block.split('}') {
            if rule.contains(".demo-banner") && !rule.contains(".demo-banner {") {
                panic!("a print rule reaches the demo banner: {rule}");
            }
            if rule.contains(".demo-banner {") {
                assert!(rule.contains("display: block"), "{rule}");
            }
        }
    }
}

/// The demo plan page printed to PDF by Chromium (print media, the served stylesheet) still
/// says "Demo data". Skipped, saying so, without chromium or pdftotext (poppler-utils).
#[tokio::test]
async fn a_printed_demo_plan_keeps_its_label() {
    let installed = |program: &str, version: &str| {
        Command::new(program)
            .arg(version)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !installed("chromium", "--version") || !installed("pdftotext", "-v") {
        eprintln!(
            "SKIPPED: printing the plan needs chromium and pdftotext \
             (apt-get install chromium poppler-utils)"
        );
        return;
    }
    let s = server_with(Options {
        demo: true,
        ..Options::default()
    })
    .await;
    s.post_report(Some(&s.agent_token), &fleet_report(1)).await;
    let page = s.page("/plan", &s.login("alice", "viewer").await).await;
    let css = s
        .call(Method::GET, "/static/style.css", None, None)
        .await
        .body;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("style.css"), css).unwrap();
    let html = page
        .body
        .replace("href=\"/static/style.css\"", "href=\"style.css\"");
    assert_ne!(
        html, page.body,
        "the page links the stylesheet elsewhere now"
    );
    std::fs::write(dir.path().join("plan.html"), html).unwrap();
    let pdf = dir.path().join("plan.pdf");
    let printed = Command::new("timeout")
        .arg("120")
        .arg("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-pdf-header-footer",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--print-to-pdf={}", pdf.display()))
        .arg(format!("file://{}", dir.path().join("plan.html").display()))
        .output()
        .unwrap();
    assert!(
        pdf.exists(),
        "chromium printed nothing: {}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let text = Command::new("pdftotext")
        .arg(&pdf)
        .arg("-")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Kernel-upgrade plan"), "{text}");
    assert!(
        text.contains("Demo data."),
        "the printed plan lost its label: {text}"
    );
    // What only works on screen is left out of print.
    assert!(!text.contains("Log out"), "{text}");
}

const DAY_MS: i64 = 24 * HOUR_MS;
const STEP_MS: i64 = 2 * 60_000;

/// Reports every two minutes for the last two days: a `nohz=off` guest at a steady 5.14 % of a
/// core, a tickless one at 0.43 %.
async fn two_days(s: &Server, now_ms: i64) {
    let token = s.db.tokens().await.unwrap()[0].id;
    let start_ms = now_ms - 2 * DAY_MS;
    for (seq, end_ms) in (start_ms..now_ms).step_by(STEP_MS as usize).enumerate() {
        let sample = |name: &str, vcpus: u32, cpu_pct: f64, wakeups: f64, args: Option<&str>| {
            json!({
                "hypervisor": "qemu", "name": name, "pid": 4000 + vcpus, "vcpus": vcpus,
                "host_cpu_seconds": cpu_pct / 100.0 * 120.0,
                "vcpu_wakeups": (wakeups * f64::from(vcpus) * 120.0) as u64,
                "wakeups_source": "vcpu_threads", "boot_args": args
            })
        };
        let report = json!({
            "agent": {"id": "machine-1", "run_id": "run-1", "version": "0.1.0"},
            "seq": seq,
            "host": {"name": "hv1", "cpus": 8, "kernel": "6.1.0"},
            "interval": {"start_ms": end_ms - STEP_MS, "end_ms": end_ms, "length_ns": STEP_MS * 1_000_000},
            "guests": [
                // Figures no short decimal holds: they must come back from storage exactly.
                sample("ticker", 1, 5.0 + 1.0 / 7.0, 640.0, Some("nohz=off")),
                sample("quiet", 2, 0.4 + 1.0 / 30.0, 38.0, None),
            ]
        });
        // Every hour the ticker's guest probe says how idle it was, so that the history read
        // for the export holds idle readings too (the all-guests query once decoded them
        // wrongly, and no stored reading meant no row to fail on).
        let mut report = report;
        if seq % 30 == 0 {
            report["guests"][0]["facts"] = json!({
                "source": "probe_channel", "received_ms": end_ms - 1000,
                "facts": {"collected_ms": end_ms - 1000, "kernel_release": "6.1.0",
                          "cmdline": "quiet nohz=off", "idle_fraction": 0.99,
                          "idle_measured_s": 60.0, "cpus": 1}
            });
        }
        let valid = ingest::validate(serde_json::from_value(report).unwrap(), end_ms).unwrap();
        s.state
            .ingest_report(std::sync::Arc::new(valid), token, end_ms)
            .await
            .unwrap();
    }
    s.state.fleet.caught_up().await;
}

fn close(what: &str, a: f64, b: f64, tolerance: f64) {
    assert!((a - b).abs() <= tolerance, "{what}: {a} != {b}");
}

/// Each guest's waste over the last 24 h and 7 d up to `now_ms` as its own page reads it (one
/// guest's history at a time), and as the export reads it (all guests at once): (24 h wasted
/// core-hours, measured hours, 7 d wasted core-hours, measured hours), by guest.
async fn waste_both_ways(s: &Server, now_ms: i64) -> [BTreeMap<GuestId, [f64; 4]>; 2] {
    let guests = s.state.fleet.ranked(now_ms).await;
    let figures = |w: &tickscope_server::fleet::WasteSoFar| {
        [
            w.last_24h.wasted_core_hours,
            w.last_24h.measured_hours,
            w.last_7d.wasted_core_hours,
            w.last_7d.measured_hours,
        ]
    };
    let mut one_by_one = BTreeMap::new();
    for g in &guests {
        let history = History::load(&s.db, g.id, now_ms - 7 * DAY_MS, now_ms + 1)
            .await
            .unwrap();
        one_by_one.insert(g.id, figures(&history.waste_so_far(g, now_ms)));
    }
    let at_once = tickscope_server::fleet::waste_so_far_of(&s.db, &guests, now_ms)
        .await
        .unwrap()
        .iter()
        .map(|(id, w)| (*id, figures(w)))
        .collect();
    [one_by_one, at_once]
}

fn assert_same_waste(
    a: &BTreeMap<GuestId, [f64; 4]>,
    b: &BTreeMap<GuestId, [f64; 4]>,
    tolerance: f64,
) {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (id, x) in a {
        for (i, (x, y)) in x.iter().zip(&b[id]).enumerate() {
            close(&format!("guest {id} figure {i}"), *x, *y, tolerance);
        }
    }
}

#[tokio::test]
async fn the_24_hour_and_7_day_waste_is_what_the_stored_samples_give() {
    let s = server().await;
    let now = tickscope_server::clock::now_ms();
    two_days(&s, now).await;
    // Without `history` the columns are there, empty: the export does not read the week.
    let quick = parse_csv(&get(&s, "/api/v1/guests.csv").await);
    assert_eq!(quick.header, GUEST_COLUMNS);
    for row in &quick.rows {
        for column in [
            "wasted_core_hours_24h",
            "wasted_cpu_pct_7d",
            "history_until",
        ] {
            assert_eq!(row[column], "", "{column}");
        }
    }
    let bad = s
        .call(
            Method::GET,
            "/api/v1/guests.csv?history=maybe",
            Some(&s.viewer_token),
            None,
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    let table = parse_csv(&get(&s, "/api/v1/guests.csv?history=true").await);
    assert_eq!(table.rows.len(), 2);
    let row = |name: &str| table.rows.iter().find(|r| r["guest"] == name).unwrap();
    let f = |row: &HashMap<String, String>, column: &str| -> f64 {
        row[column]
            .parse()
            .unwrap_or_else(|e| panic!("{column} {:?}: {e}", row[column]))
    };
    let (ticker, quiet) = (row("ticker"), row("quiet"));
    // What the samples give, by hand: the guest ran all the time at one steady waste, so a day
    // of 2-minute samples is 24 measured hours, the 7 days reach back to the first sample two
    // days ago, and the waste averaged over either is the waste of now.
    let waste_now = f(ticker, "wasted_cpu_pct");
    assert!(waste_now > 4.0, "{waste_now}");
    // Analysis windows are whole five minutes, and the export ran a little after `now`: a
    // window at each end may fall in or out.
    close("measured 24 h", f(ticker, "measured_hours_24h"), 24.0, 0.2);
    close("measured 7 d", f(ticker, "measured_hours_7d"), 48.0, 0.2);
    close(
        "average 24 h",
        f(ticker, "wasted_cpu_pct_24h"),
        waste_now,
        0.01,
    );
    close(
        "average 7 d",
        f(ticker, "wasted_cpu_pct_7d"),
        waste_now,
        0.01,
    );
    close(
        "core-hours 24 h",
        f(ticker, "wasted_core_hours_24h"),
        waste_now / 100.0 * f(ticker, "measured_hours_24h"),
        1e-3,
    );
    close(
        "core-hours 7 d",
        f(ticker, "wasted_core_hours_7d"),
        waste_now / 100.0 * f(ticker, "measured_hours_7d"),
        1e-3,
    );
    close("tickless 7 d", f(quiet, "wasted_core_hours_7d"), 0.0, 1e-9);
    close("tickless 24 h %", f(quiet, "wasted_cpu_pct_24h"), 0.0, 1e-9);

    // Read for all guests at once, the figures are those each guest's page reads one by one;
    // also once the retention has rolled all but the last two hours up.
    // The same samples read either way give the same figures, to the bit.
    let [one_by_one, at_once] = waste_both_ways(&s, now).await;
    assert_same_waste(&one_by_one, &at_once, 0.0);
    let keep = Retention {
        raw_ms: 2 * HOUR_MS,
        five_minute_ms: DAY_MS,
        hourly_ms: 400 * DAY_MS,
    };
    let outcome = retention::run(&s.state, keep, now).await.unwrap();
    assert!(outcome.samples_deleted > 0, "{outcome:?}");
    let [rolled_one_by_one, rolled_at_once] = waste_both_ways(&s, now).await;
    assert_same_waste(&rolled_one_by_one, &rolled_at_once, 0.0);
    // Rolled-up windows add up in another order: equal to rounding.
    assert_same_waste(&rolled_at_once, &at_once, 1e-9);
}
