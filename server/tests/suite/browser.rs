//! The dashboard in a real browser: Debian's headless Chromium, driven through chromedriver
//! (WebDriver), against the real server binary serving the demo fleet plus one hostile VM.
//!
//! Needs `chromium` and `chromium-driver` (the test command `scripts/test.sh` installs both).
//! Ignored by a plain `cargo test`; run it with
//! `cargo test -p tickscope-server --test suite -- --ignored browser::`. Full-page screenshots of each
//! page land in `target/browser-screenshots/`.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use common::processes::{Processes, add_token, free_port, in_own_group, repo_root, start_server};

const HOSTILE_NAME: &str = "<img src=x onerror=alert(1)>";
const HOSTILE_KERNEL: &str = "5.10.0-\"evil\"<b>bold</b>";

/// Starts chromedriver and waits until it listens; returns its URL.
fn start_chromedriver(processes: &mut Processes) -> String {
    let port = free_port();
    let child = in_own_group(&mut Command::new("chromedriver"))
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start chromedriver (apt-get install chromium chromium-driver)");
    processes.add_group("chromedriver", child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    format!("http://127.0.0.1:{port}")
}

async fn browser(webdriver: &str) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"]
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(webdriver)
        .await
        .expect("cannot start a Chromium session through chromedriver")
}

fn screenshot_dir() -> PathBuf {
    let dir = repo_root().join("target/browser-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Saves a screenshot of the whole page, not only the window.
async fn full_page_screenshot(client: &Client, name: &str) {
    let height = client
        .execute("return document.documentElement.scrollHeight", vec![])
        .await
        .unwrap()
        .as_u64()
        .unwrap_or(900)
        .clamp(600, 8000) as u32;
    client.set_window_size(1280, height).await.unwrap();
    let png = client.screenshot().await.unwrap();
    client.set_window_size(1280, 900).await.unwrap();
    let path = screenshot_dir().join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
}

/// Fails if markup from a VM became elements, or opened an alert. The CSP would stop an inline
/// handler from running even if escaping failed, so the elements are what is checked first.
async fn assert_nothing_injected(client: &Client, page: &str) {
    for injected in ["img[src='x']", "main b"] {
        assert!(
            client.find(Locator::Css(injected)).await.is_err(),
            "VM markup became an element ({injected}) on {page}"
        );
    }
    if let Ok(text) = client.get_alert_text().await {
        panic!("an alert fired on {page}: {text:?}");
    }
}

async fn click(client: &Client, css: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
        .click()
        .await
        .unwrap();
}

/// Clicks a form's submit button and waits until the next page has loaded: the old page's root
/// element goes stale, then the new document is complete. A click alone returns as soon as the
/// browser took it, and on a busy machine the old page may still be showing.
async fn submit(client: &Client, css: &str) {
    let old_page = client.find(Locator::Css("html")).await.unwrap();
    click(client, css).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while old_page.tag_name().await.is_ok() {
        assert!(Instant::now() < deadline, "{css} led to no new page");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    loop {
        let state = client
            .execute("return document.readyState", vec![])
            .await
            .ok();
        if state.as_ref().and_then(|s| s.as_str()) == Some("complete") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the page after {css} did not load"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn type_into(client: &Client, id: &str, text: &str) {
    client
        .find(Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("no #{id}: {e}"))
        .send_keys(text)
        .await
        .unwrap();
}

/// Reports one more VM, with a hostile name and kernel string, through the real API.
fn report_hostile_vm(url: &str, token: &str) {
    let now = tickscope_server::clock::now_ms();
    let report = json!({
        "agent": {"id": "hostile-machine", "run_id": "run-1", "version": "0.1.0"},
        "seq": 0,
        "host": {"name": "demo-hv-hostile", "cpus": 8, "kernel": "6.1.0"},
        "interval": {"start_ms": now - 10_000, "end_ms": now, "length_ns": 10_000_000_000u64},
        "guests": [{
            "hypervisor": "qemu", "name": HOSTILE_NAME, "pid": 4242, "vcpus": 1,
            "host_cpu_seconds": 0.53, "vcpu_wakeups": 6500, "wakeups_source": "vcpu_threads",
            "facts": {"source": "probe_channel", "received_ms": now,
                      "facts": {"kernel_release": HOSTILE_KERNEL, "idle_fraction": 0.99}}
        }]
    });
    let reply = ureq::post(&format!("{url}/api/v1/reports"))
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(&report)
        .unwrap();
    assert_eq!(reply.status(), 200);
}

#[tokio::test]
#[ignore = "drives Chromium through chromedriver; run by scripts/test.sh"]
async fn an_admin_logs_in_filters_guests_reads_a_chart_and_logs_out() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("browser.db");
    let mut processes = Processes::default();
    let token = add_token(&db, "agent");
    let url = start_server(&db, &["--demo"], &mut processes);
    let webdriver = start_chromedriver(&mut processes);
    let client = browser(&webdriver).await;

    // Without a session every page sends us to the login form.
    client.goto(&format!("{url}/guests")).await.unwrap();
    assert_eq!(client.current_url().await.unwrap().path(), "/login");
    full_page_screenshot(&client, "login").await;
    type_into(&client, "name", "demo").await;
    type_into(&client, "password", "demo-password").await;
    submit(&client, "form.login button").await;
    // Back where we were going.
    assert_eq!(client.current_url().await.unwrap().path(), "/guests");

    // The overview.
    client.goto(&format!("{url}/")).await.unwrap();
    let h1 = client
        .find(Locator::Css("h1"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(h1, "Fleet");
    assert!(client.find(Locator::Css(".demo-banner")).await.is_ok());
    assert_nothing_injected(&client, "the overview").await;
    full_page_screenshot(&client, "overview").await;
    // Now a VM whose name and kernel string are markup joins the fleet.
    let (report_url, report_token) = (url.clone(), token.clone());
    tokio::task::spawn_blocking(move || report_hostile_vm(&report_url, &report_token))
        .await
        .unwrap();

    // Filter the guest list by tick mode with its form: the address says so, and every row
    // is periodic.
    client.goto(&format!("{url}/guests")).await.unwrap();
    click(&client, "#f-mode option[value='periodic']").await;
    submit(&client, "form.filters button").await;
    let address = client.current_url().await.unwrap();
    assert!(
        address
            .query()
            .unwrap_or_default()
            .contains("mode=periodic"),
        "{address}"
    );
    let modes = client
        .find_all(Locator::Css("table.guest-list tbody td:nth-child(7) .mode"))
        .await
        .unwrap();
    assert!(!modes.is_empty());
    for mode in modes {
        assert_eq!(mode.text().await.unwrap(), "periodic");
    }
    // The hostile VM's name shows as text, and nothing ran.
    let hostile = client
        .find(Locator::LinkText(HOSTILE_NAME))
        .await
        .expect("the hostile name is shown as its own text");
    assert_nothing_injected(&client, "the guest list").await;
    full_page_screenshot(&client, "guests").await;

    // Its page: the name and kernel string as text, and the history charts.
    hostile.click().await.unwrap();
    let h1 = client
        .find(Locator::Css("h1"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(h1.contains(HOSTILE_NAME), "{h1}");
    let body = client
        .find(Locator::Css("main"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        body.contains(HOSTILE_KERNEL),
        "the kernel string is shown as text"
    );
    assert_nothing_injected(&client, "the hostile guest's page").await;

    // A demo guest's page with its charts.
    client
        .goto(&format!("{url}/guests?q=ci-runner"))
        .await
        .unwrap();
    client
        .find(Locator::LinkText("ci-runner"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let charts = client
        .find_all(Locator::Css(".charts svg[role='img']"))
        .await
        .unwrap();
    assert_eq!(charts.len(), 4);
    let first_title = client
        .find(Locator::Css(".charts svg title"))
        .await
        .unwrap()
        .attr("id")
        .await
        .unwrap();
    assert_eq!(first_title.as_deref(), Some("chart0-title"));
    assert!(
        !client
            .find_all(Locator::Css(".charts polyline"))
            .await
            .unwrap()
            .is_empty(),
        "the charts have lines"
    );
    full_page_screenshot(&client, "guest").await;

    for page in ["hosts", "alerts", "plan", "settings", "account"] {
        client.goto(&format!("{url}/{page}")).await.unwrap();
        assert_nothing_injected(&client, page).await;
        full_page_screenshot(&client, page).await;
    }

    // A token made on the settings page is shown once; reloading neither shows it again nor
    // makes another.
    client.goto(&format!("{url}/settings")).await.unwrap();
    type_into(&client, "token-name", "grafana").await;
    submit(&client, "form[action='/settings/tokens'] button").await;
    let shown = client
        .find(Locator::Id("new-token"))
        .await
        .expect("the new token is shown")
        .text()
        .await
        .unwrap();
    assert!(shown.starts_with("tks_"), "{shown}");
    client.refresh().await.unwrap();
    assert!(client.find(Locator::Id("new-token")).await.is_err());
    let body = client.source().await.unwrap();
    assert_eq!(
        body.matches(">grafana<").count(),
        1,
        "one token named grafana"
    );

    // Log out, and be refused.
    submit(&client, "form.logout button").await;
    assert_eq!(client.current_url().await.unwrap().path(), "/login");
    client.goto(&format!("{url}/")).await.unwrap();
    assert_eq!(client.current_url().await.unwrap().path(), "/login");
    client.close().await.unwrap();
}

/// A size the dashboard is read at: a phone (Chromium's mobile emulation of a 390 × 844 screen)
/// or a desktop window of 1400 × 1000.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Device {
    Phone,
    Desktop,
}

impl Device {
    fn width(self) -> u64 {
        match self {
            Device::Phone => 390,
            Device::Desktop => 1400,
        }
    }
}

/// A Chromium session as `device`, its pages in the dark colour scheme when `dark`.
async fn browser_as(webdriver: &str, device: Device, dark: bool) -> Client {
    let mut args = vec!["--headless=new", "--no-sandbox", "--disable-gpu"];
    if device == Device::Desktop {
        args.push("--window-size=1400,1000");
    }
    if dark {
        // What `prefers-color-scheme` answers; the test checks that it took.
        args.push("--force-dark-mode");
        args.push("--blink-settings=preferredColorScheme=0");
    }
    let mut options = json!({ "binary": "/usr/bin/chromium", "args": args });
    if device == Device::Phone {
        options["mobileEmulation"] = json!({
            "deviceMetrics": { "width": 390, "height": 844, "pixelRatio": 3.0, "mobile": true, "touch": true },
            "userAgent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0 Mobile Safari/537.36"
        });
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), options);
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(webdriver)
        .await
        .expect("cannot start a Chromium session through chromedriver")
}

async fn log_in(client: &Client, url: &str) {
    client.goto(&format!("{url}/login")).await.unwrap();
    type_into(client, "name", "demo").await;
    type_into(client, "password", "demo-password").await;
    submit(client, "form.login button").await;
    assert_eq!(client.current_url().await.unwrap().path(), "/");
}

async fn run_js(client: &Client, script: &str, args: Vec<serde_json::Value>) -> serde_json::Value {
    client
        .execute(script, args)
        .await
        .unwrap_or_else(|e| panic!("script failed: {e}"))
}

/// How wide the page is against the device, and the elements outside a scrolling box of their
/// own (a wide table's) that run past its right edge (for the message).
const OVERFLOW_JS: &str = r#"
const width = arguments[0];
const wide = [];
const scrolls = el => {
  for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
    if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(e).overflowX)) return true;
  }
  return false;
};
for (const el of document.querySelectorAll('body *')) {
  const r = el.getBoundingClientRect();
  if (r.width > 0 && r.right > width + 1 && !scrolls(el)) {
    wide.push(el.tagName.toLowerCase() + (el.className ? '.' + el.className : '') + ' right=' + Math.round(r.right));
  }
}
return { scrollWidth: document.documentElement.scrollWidth, wide: wide.slice(0, 8) };
"#;

/// Each main navigation link: whether it is shown, inside the device's width, and what a tap at
/// its middle lands on.
const NAV_JS: &str = r#"
const width = arguments[0];
return [...document.querySelectorAll('nav[aria-label="Main"] a')].map(a => {
  const r = a.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return {
    href: a.getAttribute('href'),
    shown: r.width > 0 && r.height > 0,
    inside: r.left >= 0 && r.right <= width,
    tapped: hit === a || a.contains(hit),
  };
});
"#;

/// Text whose contrast with what is behind it is under WCAG 2's AA level (4.5:1, 3:1 for large
/// text), HTML text and the charts' SVG text alike; and whether the page is in the dark scheme.
const CONTRAST_JS: &str = r#"
function parse(s) {
  const m = /rgba?\(([^)]+)\)/.exec(s || '');
  if (!m) return null;
  const p = m[1].split(/[\s,\/]+/).filter(x => x).map(Number);
  return { rgb: p.slice(0, 3), a: p.length > 3 ? p[3] : 1 };
}
function luminance(rgb) {
  const [r, g, b] = rgb.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
function background(el) {
  for (let e = el; e; e = e.parentElement) {
    const c = parse(getComputedStyle(e).backgroundColor);
    if (c && c.a > 0.5) return c.rgb;
  }
  return [255, 255, 255];
}
const low = [];
for (const el of document.querySelectorAll('body *')) {
  const inSvg = el.closest('svg') !== null;
  if (inSvg && el.tagName.toLowerCase() !== 'text') continue;
  const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim() !== '');
  if (!own) continue;
  const r = el.getBoundingClientRect();
  const style = getComputedStyle(el);
  if (r.width === 0 || r.height === 0 || style.visibility === 'hidden') continue;
  const fg = parse(inSvg ? style.fill : style.color);
  if (!fg) continue;
  const bg = background(inSvg ? el.closest('svg') : el);
  const [a, b] = [luminance(fg.rgb), luminance(bg)];
  const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  const size = parseFloat(style.fontSize);
  const large = size >= 24 || (parseInt(style.fontWeight, 10) >= 700 && size >= 18.66);
  if (ratio < (large ? 3 : 4.5)) {
    low.push(el.tagName.toLowerCase() + (el.className && el.className.baseVal === undefined ? '.' + el.className : '') + ' "' + el.textContent.trim().slice(0, 30) + '" ' + ratio.toFixed(2));
  }
}
return { dark: matchMedia('(prefers-color-scheme: dark)').matches, low: low.slice(0, 10) };
"#;

/// The pages an admin reaches, with the ids of a guest, a host and a rule of the demo fleet.
async fn every_page(client: &Client, url: &str) -> Vec<String> {
    let first_href = |css: &'static str| async move {
        client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .attr("href")
            .await
            .unwrap()
            .unwrap()
    };
    client.goto(&format!("{url}/guests")).await.unwrap();
    let guest = first_href("table.guest-list tbody a[href^='/guests/']").await;
    client.goto(&format!("{url}/hosts")).await.unwrap();
    let host = first_href("table.hosts tbody a[href^='/hosts/']").await;
    client.goto(&format!("{url}/alerts")).await.unwrap();
    let rule = first_href("table.rules a[href^='/alerts/rules/']").await;
    [
        "/",
        "/guests",
        "/guests?cause=ticking_kernel",
        guest.as_str(),
        "/hosts",
        host.as_str(),
        "/alerts",
        rule.as_str(),
        "/plan",
        "/settings",
        "/account",
    ]
    .into_iter()
    .map(str::to_string)
    .collect()
}

#[tokio::test]
#[ignore = "drives Chromium through chromedriver; run by scripts/test.sh"]
async fn every_page_fits_a_phone_and_a_desktop_and_reads_in_light_and_dark() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("devices.db");
    let mut processes = Processes::default();
    let url = start_server(&db, &["--demo"], &mut processes);
    let webdriver = start_chromedriver(&mut processes);
    for (device, dark) in [
        (Device::Phone, false),
        (Device::Phone, true),
        (Device::Desktop, false),
        (Device::Desktop, true),
    ] {
        let client = browser_as(&webdriver, device, dark).await;
        log_in(&client, &url).await;
        let width = device.width();
        let pages = every_page(&client, &url).await;
        for page in &pages {
            client.goto(&format!("{url}{page}")).await.unwrap();
            let what = format!(
                "{page} on a {device:?} ({})",
                if dark { "dark" } else { "light" }
            );
            // Nothing wider than the device: compared with the device's width, since Chrome
            // widens the layout viewport to fit content that runs over.
            let fit = run_js(&client, OVERFLOW_JS, vec![json!(width)]).await;
            assert!(
                fit["scrollWidth"].as_u64().unwrap() <= width,
                "{what}: {fit}"
            );
            let contrast = run_js(&client, CONTRAST_JS, vec![]).await;
            assert_eq!(
                contrast["dark"], dark,
                "{what}: the colour scheme asked for"
            );
            assert_eq!(
                contrast["low"],
                json!([]),
                "{what}: text under WCAG AA contrast"
            );
            // Every navigation link can be reached: on a phone behind the menu button.
            if device == Device::Phone {
                let links = run_js(&client, NAV_JS, vec![json!(width)]).await;
                assert!(
                    links
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|l| l["shown"] == false),
                    "{what}: the navigation is folded: {links}"
                );
                click(&client, "label.menu-button").await;
            }
            let links = run_js(&client, NAV_JS, vec![json!(width)]).await;
            let links = links.as_array().unwrap();
            assert!(links.len() >= 5, "{what}: {links:?}");
            for link in links {
                assert!(
                    link["shown"] == true && link["inside"] == true && link["tapped"] == true,
                    "{what}: {link}"
                );
            }
        }
        // The overview and a guest page, at each size, for the docs.
        if !dark {
            for (page, name) in [("/", "overview"), (pages[3].as_str(), "guest")] {
                client.goto(&format!("{url}{page}")).await.unwrap();
                let file = format!("{name}-{}", format!("{device:?}").to_lowercase());
                if device == Device::Phone {
                    let png = client.screenshot().await.unwrap();
                    std::fs::write(screenshot_dir().join(format!("{file}.png")), png).unwrap();
                } else {
                    full_page_screenshot(&client, &file).await;
                }
            }
            // On a phone, the guest page starts with what an alert points to.
            if device == Device::Phone {
                client.goto(&format!("{url}{}", pages[3])).await.unwrap();
                let headings: Vec<String> = run_js(
                    &client,
                    "return [...document.querySelectorAll('main h2')].map(h => h.textContent)",
                    vec![],
                )
                .await
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h.as_str().unwrap().to_string())
                .collect();
                assert_eq!(
                    headings[..4],
                    ["Now", "Suggestions", "Waste", "History"],
                    "{headings:?}"
                );
            }
        }
        client.close().await.unwrap();
    }
}
