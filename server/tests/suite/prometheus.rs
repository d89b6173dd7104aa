//! `/metrics` against the real Prometheus tools (Debian's `prometheus` package: Prometheus and
//! promtool 2.42): promtool checks a real scrape and the rules file; a real Prometheus scrapes
//! a `serve --demo` server (a simulated fleet, labelled as such, with ticking guests) in both
//! formats, loads contrib/prometheus/tickscope.rules.yml, fires the idle-guest alert for a
//! ticking guest, and answers every query of the Grafana dashboard with data.
//!
//! Each test is skipped, saying so, when the binary it needs is not installed
//! (`apt-get install prometheus`; scripts/test.sh installs it).

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tickscope_server::metrics::format::PROMETHEUS_ACCEPT;

use common::processes::{
    Processes, add_token, free_port, output_with_stdin, repo_root, start_server,
};

/// `name` on the PATH, or in /usr/bin where Debian puts it.
fn binary(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn required(name: &str) -> Option<PathBuf> {
    let found = binary(name);
    if found.is_none() {
        eprintln!(
            "SKIPPED: `{name}` is not installed (Debian: apt-get install prometheus); scripts/test.sh installs it"
        );
    }
    found
}

fn rules_file() -> PathBuf {
    repo_root().join("contrib/prometheus/tickscope.rules.yml")
}

fn dashboard() -> Value {
    let path = repo_root().join("contrib/grafana/tickscope.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", path.display()))
}

/// Every query of the dashboard's panels, with the variables as "All" selects them (`.*`) and
/// Grafana's `$__rate_interval` as a window that holds several 1 s scrapes.
fn panel_queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap().to_string();
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("a target of {title} has no expr"));
            let expr = expr
                .replace("$__rate_interval", "30s")
                .replace("${host}", ".*")
                .replace("$host", ".*")
                .replace("${hypervisor}", ".*")
                .replace("$hypervisor", ".*");
            assert!(!expr.contains('$'), "{title}: a variable left in {expr}");
            queries.push((title.clone(), expr));
        }
    }
    queries
}

/// `promtool <args>`, with `stdin`: whether it succeeded, and what it said.
fn promtool(promtool: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let out = output_with_stdin(
        Command::new(promtool)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        stdin.unwrap_or("").as_bytes(),
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn promtool_accepts_the_rules_file_and_its_unit_tests() {
    let Some(promtool_bin) = required("promtool") else {
        return;
    };
    let rules = rules_file();
    let (ok, said) = promtool(
        &promtool_bin,
        &["check", "rules", rules.to_str().unwrap()],
        None,
    );
    assert!(ok, "{said}");
    assert!(said.contains("SUCCESS: 9 rules found"), "{said}");
    let tests = repo_root().join("contrib/prometheus/tickscope.rules.test.yml");
    let (ok, said) = promtool(
        &promtool_bin,
        &["test", "rules", tests.to_str().unwrap()],
        None,
    );
    assert!(ok, "{said}");
}

#[test]
fn the_grafana_dashboard_is_importable() {
    let d = dashboard();
    assert!(d["schemaVersion"].as_u64().unwrap() >= 36);
    let variables = d["templating"]["list"].as_array().unwrap();
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no ${name} variable"))
    };
    assert_eq!(variable("datasource")["type"], "datasource");
    assert_eq!(variable("datasource")["query"], "prometheus");
    for name in ["host", "hypervisor"] {
        assert_eq!(variable(name)["type"], "query");
        assert_eq!(variable(name)["allValue"], ".*");
    }
    let panels = d["panels"].as_array().unwrap();
    let mut ids: Vec<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    ids.dedup();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    for panel in panels {
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
        for target in panel["targets"].as_array().unwrap() {
            assert_eq!(target["datasource"]["uid"], "${datasource}");
        }
    }
    let titles: Vec<&str> = panels
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    for wanted in [
        "Fleet wasted CPU",
        "Ticking guests",
        "Top wasting guests",
        "Host CPU per guest (from the counters)",
        "vCPU wake-ups per vCPU per second (from the counters)",
        "Guests by tick mode",
        "Alerts",
    ] {
        assert!(titles.contains(&wanted), "no panel {wanted}: {titles:?}");
    }
    assert!(panel_queries(&d).len() >= titles.len());
}

/// A loopback proxy in front of `upstream` that asks for the classic text format whatever the
/// scraper's `Accept` said: Prometheus 2.42 cannot be told to prefer it. One request per
/// connection (`Connection: close` both ways), which Prometheus copes with by reconnecting.
fn classic_proxy(upstream: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let upstream = upstream.clone();
            std::thread::spawn(move || {
                let _ = forward_classic(client, &upstream);
            });
        }
    });
    address
}

fn forward_classic(client: TcpStream, upstream: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line == "\r\n" {
            break;
        }
        let name = line.split(':').next().unwrap_or("").to_ascii_lowercase();
        if name != "accept" && name != "connection" {
            head.push_str(&line);
        }
    }
    head.push_str("Accept: text/plain;version=0.0.4\r\nConnection: close\r\n\r\n");
    let mut server = TcpStream::connect(upstream)?;
    server.write_all(head.as_bytes())?;
    let mut response = Vec::new();
    server.read_to_end(&mut response)?;
    let mut client = client;
    client.write_all(&response)
}

fn get_json(url: &str, query: &[(&str, &str)]) -> Value {
    let mut request = ureq::get(url);
    for (k, v) in query {
        request = request.query(*k, *v);
    }
    request
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .body_mut()
        .read_json()
        .unwrap()
}

/// Polls `check` every half second until it returns `Some`, or fails after `seconds`.
fn wait_for<T>(what: &str, seconds: u64, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        match check() {
            Ok(found) => return found,
            Err(last) if Instant::now() > deadline => {
                panic!("timed out after {seconds} s waiting for {what}; last: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

fn scrape(url: &str, token: &str, accept: Option<&str>) -> (String, String) {
    let mut request =
        ureq::get(format!("{url}/metrics")).header("Authorization", &format!("Bearer {token}"));
    if let Some(accept) = accept {
        request = request.header("Accept", accept);
    }
    let mut response = request.call().unwrap();
    let content_type = response
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    (content_type, response.body_mut().read_to_string().unwrap())
}

#[test]
fn prometheus_scrapes_the_demo_fires_the_alert_and_answers_every_panel() {
    let (Some(prometheus), Some(promtool_bin)) = (required("prometheus"), required("promtool"))
    else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("demo.db");
    let token = add_token(&db, "viewer");
    let mut processes = Processes::default();
    let url = start_server(
        &db,
        &["--demo", "--external-url", "http://tickscope.test/"],
        &mut processes,
    );
    let target = url.trim_start_matches("http://").to_string();

    // promtool on real scrapes: the classic format, which it reads, passes without a word.
    let (content_type, classic) = scrape(&url, &token, None);
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    let (ok, said) = promtool(&promtool_bin, &["check", "metrics"], Some(&classic));
    assert!(
        ok && said.trim().is_empty(),
        "promtool check metrics: {said}"
    );
    let (content_type, open_metrics) = scrape(&url, &token, Some(PROMETHEUS_ACCEPT));
    assert!(content_type.starts_with("application/openmetrics-text; version=1.0.0"));
    let (ok, said) = promtool(&promtool_bin, &["check", "metrics"], Some(&open_metrics));
    // promtool 2.42 parses its input as the classic format, where OpenMetrics' counter HELP
    // (on the name without `_total`) is "no help text": reported, not asserted.
    eprintln!("promtool check metrics on the OpenMetrics scrape: success={ok}: {said}");

    // The rules with every `for:` cut to 5 s, so the alerts fire within the test: the only
    // change to the file.
    let rules = std::fs::read_to_string(rules_file()).unwrap();
    let mut shortened = 0;
    let test_rules: String = rules
        .lines()
        .map(|line| match line.trim_start().strip_prefix("for: ") {
            Some(_) => {
                shortened += 1;
                format!("{}for: 5s\n", &line[..line.len() - line.trim_start().len()])
            }
            None => format!("{line}\n"),
        })
        .collect();
    assert_eq!(shortened, 2, "one `for:` per alert rule");
    std::fs::write(work.path().join("tickscope.rules.yml"), test_rules).unwrap();
    std::fs::write(work.path().join("token"), &token).unwrap();
    let proxy = classic_proxy(target.clone());
    let config = format!(
        "global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - tickscope.rules.yml
scrape_configs:
  # Prometheus's own Accept: OpenMetrics.
  - job_name: tickscope
    authorization:
      credentials_file: {token}
    static_configs:
      - targets: ['{target}']
  # Through a proxy that asks for the classic text format.
  - job_name: tickscope-classic
    authorization:
      credentials_file: {token}
    static_configs:
      - targets: ['{proxy}']
",
        token = work.path().join("token").display(),
    );
    let config_file = work.path().join("prometheus.yml");
    std::fs::write(&config_file, config).unwrap();
    let port = free_port();
    let log = std::fs::File::create(work.path().join("prometheus.log")).unwrap();
    let child = Command::new(prometheus)
        .arg(format!("--config.file={}", config_file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            work.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    processes.add("prometheus", child);
    let api = format!("http://127.0.0.1:{port}/api/v1");
    let prometheus_log =
        || std::fs::read_to_string(work.path().join("prometheus.log")).unwrap_or_default();

    // Both targets up.
    wait_for("both targets up", 60, || {
        let reply = ureq::get(format!("{api}/targets"))
            .call()
            .map_err(|e| e.to_string())?
            .body_mut()
            .read_json::<Value>()
            .map_err(|e| e.to_string())?;
        let targets = reply["data"]["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let up: Vec<&Value> = targets.iter().filter(|t| t["health"] == "up").collect();
        if up.len() == 2 {
            Ok(())
        } else {
            Err(format!("{targets:?}\n{}", prometheus_log()))
        }
    });

    // Both ways, the counters are counters, with their HELP.
    for (job, family) in [
        ("tickscope", "tickscope_guest_cpu_seconds"),
        ("tickscope-classic", "tickscope_guest_cpu_seconds_total"),
    ] {
        let selector = format!("{{job=\"{job}\"}}");
        let metadata = get_json(
            &format!("{api}/targets/metadata"),
            &[("match_target", selector.as_str()), ("metric", family)],
        );
        let entry = &metadata["data"][0];
        assert_eq!(entry["type"], "counter", "{job}: {metadata}");
        assert!(
            entry["help"].as_str().unwrap().contains("rate()"),
            "{job}: {metadata}"
        );
    }

    // The alert rule fires for a ticking guest, with tickscope's labels and a link to its page.
    let alert = wait_for("TickscopeIdleGuestBurningCPU firing for rt-lab", 90, || {
        let alerts = get_json(&format!("{api}/alerts"), &[]);
        alerts["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| {
                a["labels"]["alertname"] == "TickscopeIdleGuestBurningCPU"
                    && a["labels"]["guest"] == "rt-lab"
                    && a["labels"]["job"] == "tickscope"
                    && a["state"] == "firing"
            })
            .cloned()
            .ok_or_else(|| alerts.to_string())
    });
    assert_eq!(alert["labels"]["severity"], "warning");
    assert_eq!(alert["labels"]["host"], "demo-hv-02");
    let guest_id = alert["labels"]["guest_id"].as_str().unwrap();
    assert_eq!(
        alert["annotations"]["dashboard"],
        format!("http://tickscope.test/guests/{guest_id}")
    );
    let summary = alert["annotations"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("rt-lab on demo-hv-02 wastes ") && summary.ends_with("(polling)."),
        "{summary}"
    );
    // A tickless guest does not fire.
    let alerts = get_json(&format!("{api}/alerts"), &[]);
    assert!(
        !alerts.to_string().contains("\"guest\":\"web-01\""),
        "{alerts}"
    );

    // Every panel's query, and every recording rule, returns data.
    let mut queries = panel_queries(&dashboard());
    for line in rules.lines() {
        if let Some(record) = line.trim().strip_prefix("- record: ") {
            queries.push(("recording rule".into(), record.to_string()));
        }
    }
    for (title, expr) in &queries {
        wait_for(&format!("data for {title}: {expr}"), 60, || {
            let reply = get_json(&format!("{api}/query"), &[("query", expr.as_str())]);
            if reply["status"] != "success" {
                return Err(reply.to_string());
            }
            match reply["data"]["result"].as_array() {
                Some(result) if !result.is_empty() => Ok(()),
                _ => Err(reply.to_string()),
            }
        });
    }
    // The same series came in both formats.
    for metric in [
        "tickscope_guest_cpu_seconds_total",
        "tickscope_guest_info",
        "tickscope_ingest_reports_total",
    ] {
        let count = |job: &str| {
            let expr = format!("count({metric}{{job=\"{job}\"}})");
            let reply = get_json(&format!("{api}/query"), &[("query", expr.as_str())]);
            reply["data"]["result"][0]["value"][1]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(count("tickscope"), count("tickscope-classic"), "{metric}");
    }
}
