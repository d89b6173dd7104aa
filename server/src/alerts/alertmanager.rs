//! Alerts sent into Alertmanager the way Prometheus sends them: every firing alert is POSTed to
//! `/api/v2/alerts` on a fixed cadence (and at once after an evaluation in which an alert fired
//! or resolved) with `endsAt` a few cadences ahead, so that Alertmanager resolves it by itself if
//! tickscope stops; an alert that resolved is sent for 15 minutes more with `endsAt` = when it
//! resolved. Each Alertmanager has a task of its own, so a slow one delays nobody else.
//!
//! tickscope's own silences and acknowledgements do not apply here: Alertmanager's silences,
//! inhibitions and routes do.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use super::client::{self, PostError, Reach};
use super::context::AlertContext;
use super::evaluate::figures_refresh;
use super::labels::{self, parse_set};
use super::webhook::{rfc3339, subject_url};
use crate::db::AlertRow;
use crate::domain::RuleId;

/// How long a resolved alert is still sent, as Prometheus does.
pub const RESOLVED_SENT_FOR_MS: i64 = 15 * 60 * 1000;

/// Prometheus's `resend_delay`: the default cadence.
pub const DEFAULT_RESEND: Duration = Duration::from_secs(60);

/// One Alertmanager.
#[derive(Debug, Clone)]
pub struct Target {
    /// Its base address (with its path prefix, if it has one); alerts go to
    /// `{url}/api/v2/alerts`.
    pub url: String,
    /// The Authorization header, if it needs one.
    pub authorization: Option<String>,
}

/// Where alerts go besides the webhook receivers.
#[derive(Debug, Clone, Default)]
pub struct AlertmanagerOptions {
    pub targets: Vec<Target>,
    /// The CA (PEM) their https certificates are checked against, instead of the built-in roots.
    pub ca_pem: Option<Vec<u8>>,
    /// How often every alert is sent again.
    pub resend: Duration,
    /// The addresses they may be at (see `client::Reach`).
    pub reach: Reach,
}

impl AlertmanagerOptions {
    /// The options from `serve`'s flags: the URLs, and the contents of the token, basic-auth
    /// (`user:password`) and CA files. A bearer token and basic auth together are refused.
    pub fn new(
        urls: &[String],
        bearer_token: Option<&str>,
        basic_auth: Option<&str>,
        ca_pem: Option<Vec<u8>>,
        resend: Duration,
        reach: Reach,
    ) -> Result<AlertmanagerOptions, String> {
        let authorization = match (bearer_token, basic_auth) {
            (Some(_), Some(_)) => {
                return Err("give a bearer token or basic auth for Alertmanager, not both".into());
            }
            (Some(token), None) => Some(format!("Bearer {}", token.trim())),
            (None, Some(pair)) => {
                let pair = pair.trim_end_matches(['\r', '\n']);
                if !pair.contains(':') {
                    return Err("the basic-auth file must hold user:password".into());
                }
                Some(format!("Basic {}", BASE64.encode(pair)))
            }
            (None, None) => None,
        };
        if let Some(pem) = &ca_pem {
            client::agent(Some(pem), client::POST_TIMEOUT, &reach)?;
        }
        if resend.is_zero() {
            return Err("the Alertmanager resend interval must be at least 1 second".into());
        }
        let mut targets = Vec::new();
        for url in urls {
            let url = url.trim_end_matches('/');
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("{url:?} is not an http:// or https:// address"));
            }
            // Addresses are logged with every failed send: a password must not be in one.
            let authority = url.split("://").nth(1).unwrap_or("").split('/').next();
            if authority.is_some_and(|a| a.contains('@')) {
                return Err(
                    "an Alertmanager address may not hold a user or password: give them in \
                     --alertmanager-basic-auth-file"
                        .into(),
                );
            }
            reach
                .check_url(url)
                .map_err(|e| format!("--alertmanager-url {url}: {e}"))?;
            targets.push(Target {
                url: url.to_string(),
                authorization: authorization.clone(),
            });
        }
        Ok(AlertmanagerOptions {
            targets,
            ca_pem,
            resend,
            reach,
        })
    }
}

/// What the evaluation tells the Alertmanager senders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evaluations {
    /// Evaluations in which an alert fired or resolved: each one wakes the senders.
    pub changed: u64,
    /// When this server's last evaluation that succeeded ran.
    pub last_ms: Option<i64>,
    /// The rules that evaluation could not read: it did not judge their alerts.
    pub unread_rules: Vec<RuleId>,
}

/// The body POSTed to `/api/v2/alerts` (Alertmanager's `PostableAlerts`): every firing alert
/// with `endsAt` `ends_ahead_ms` after its last evaluation (so that if the evaluation stops,
/// Alertmanager resolves it by itself although this sender goes on), every resolved one with
/// `endsAt` when it resolved; `startsAt` when it fired; the labels stored when it opened. Alerts stored
/// without labels (opened before they were kept, not evaluated since) are left out.
///
/// An alert's last evaluation is the later of when it was last written and `last`, this
/// server's last evaluation, which judged every open alert but those of the rules it could not
/// read: an open alert whose state and cause hold is written only every so often
/// (`evaluate::figures_refresh`).
pub fn postable_alerts(
    alerts: &[AlertRow],
    ends_ahead_ms: i64,
    last: &Evaluations,
    external_url: &str,
) -> Value {
    let evaluated_ms = |a: &AlertRow| match last.last_ms {
        Some(last_ms) if !last.unread_rules.contains(&a.rule_id) => a.evaluated_ms.max(last_ms),
        _ => a.evaluated_ms,
    };
    let postable: Vec<Value> = alerts
        .iter()
        .filter_map(|a| {
            let labels = parse_set(&a.labels_json);
            let fired_ms = a.fired_ms?;
            if labels.is_empty() {
                return None;
            }
            let ends_ms = match (a.state.as_str(), a.resolved_ms) {
                ("resolved", Some(resolved_ms)) => resolved_ms,
                ("firing", _) => evaluated_ms(a) + ends_ahead_ms,
                _ => return None,
            };
            Some(json!({
                "labels": labels,
                "annotations": parse_set(&a.annotations_json),
                "startsAt": rfc3339(fired_ms),
                "endsAt": rfc3339(ends_ms),
                "generatorURL": subject_url(external_url, a.subject, a.subject_id),
            }))
        })
        .collect();
    Value::Array(postable)
}

/// The fingerprints Alertmanager gives the alerts of a body from [`postable_alerts`].
pub fn fingerprints(body: &Value) -> Vec<String> {
    body.as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            labels::fingerprint(&serde_json::from_value(a["labels"].clone()).unwrap_or_default())
        })
        .collect()
}

/// Starts one sender per Alertmanager: each sends every `options.resend`, and at once when
/// an evaluation changed an alert (`evaluations`). A firing alert's `endsAt` is four times the
/// longer of the resend and evaluation intervals ahead of its last evaluation, plus the period
/// its stored figures are refreshed in: the last evaluation this server knows of is its own,
/// and a server that just took the lease has none yet.
pub fn spawn(
    state: AlertContext,
    options: AlertmanagerOptions,
    evaluations: tokio::sync::watch::Receiver<Evaluations>,
) {
    let ends_ahead_ms =
        (4 * options.resend.max(state.every) + figures_refresh(state.every)).as_millis() as i64;
    for target in options.targets {
        let agent = match client::agent(
            options.ca_pem.as_deref(),
            client::POST_TIMEOUT,
            &options.reach,
        ) {
            Ok(agent) => agent,
            Err(e) => {
                tracing::error!(error = %e, "alerts cannot be sent to Alertmanager");
                return;
            }
        };
        let state = state.clone();
        let latest = evaluations.clone();
        let mut changes = Some(evaluations.clone());
        let resend = options.resend;
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(resend);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    changed = async { changes.as_mut()?.changed().await.ok() }, if changes.is_some() => {
                        if changed.is_none() {
                            // The evaluation stopped: keep the cadence alone (a closed channel
                            // would answer at once, forever).
                            changes = None;
                            continue;
                        }
                    }
                }
                // Another server on the database announces the alerts while it holds the lease.
                if state.lease.held() {
                    let last = latest.borrow().clone();
                    send(&state, &agent, &target, ends_ahead_ms, &last).await;
                }
            }
        });
    }
}

/// One POST of every alert to announce now; a failure is logged and counted, and the next
/// send (on the cadence) carries the same alerts again.
async fn send(
    state: &AlertContext,
    agent: &ureq::Agent,
    target: &Target,
    ends_ahead_ms: i64,
    last: &Evaluations,
) {
    let now_ms = state.clock.now_ms();
    let alerts = match state
        .db
        .alerts_to_announce(now_ms - RESOLVED_SENT_FOR_MS)
        .await
    {
        Ok(alerts) => alerts,
        Err(e) => {
            tracing::warn!(error = %e, "alerts for Alertmanager cannot be read");
            return;
        }
    };
    let body = postable_alerts(&alerts, ends_ahead_ms, last, &state.external_url);
    let count = body.as_array().map_or(0, Vec::len);
    if count == 0 {
        return;
    }
    let url = format!("{}/api/v2/alerts", target.url);
    let (agent, auth, body) = (
        agent.clone(),
        target.authorization.clone(),
        body.to_string(),
    );
    let posted = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || client::post_json(&agent, &url, auth.as_deref(), &body))
            .await
    };
    match posted {
        Ok(Ok(())) => {
            state.metrics.notification("alertmanager_sent");
            tracing::debug!(alertmanager = ?url, alerts = count, "alerts sent to Alertmanager");
        }
        Ok(Err(e)) => {
            state.metrics.notification("alertmanager_failed");
            let refused = matches!(e, PostError::Refused(_));
            tracing::warn!(alertmanager = ?url, error = ?e.to_string(), refused, "alerts could not be sent to Alertmanager; sent again at the next resend");
        }
        Err(e) => {
            state.metrics.notification("alertmanager_failed");
            tracing::warn!(alertmanager = ?url, error = ?e.to_string(), "the Alertmanager sender failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(
        state: &str,
        fired_ms: Option<i64>,
        resolved_ms: Option<i64>,
        labels: &str,
    ) -> AlertRow {
        AlertRow {
            id: crate::domain::AlertId(1),
            rule_id: crate::domain::RuleId(1),
            rule_name: "r".into(),
            severity: "warning".into(),
            subject: crate::domain::Subject::Guest,
            subject_id: 7,
            subject_name: "web-01".into(),
            host_name: "hv1".into(),
            state: crate::domain::AlertState::parse(state).unwrap(),
            active_ms: 1_000,
            fired_ms,
            resolved_ms,
            value: 5.0,
            evaluated_ms: 10_000,
            acked_by: None,
            acked_ms: None,
            labels_json: labels.into(),
            annotations_json: r#"{"summary":"s"}"#.into(),
        }
    }

    #[test]
    fn firing_alerts_end_ahead_and_resolved_ones_when_they_resolved() {
        let labels = r#"{"alertname":"r","guest":"web-01"}"#;
        let alerts = [
            alert("firing", Some(2_000), None, labels),
            alert("resolved", Some(2_000), Some(5_000), labels),
            alert("firing", Some(2_000), None, "{}"),
            alert("pending", None, None, labels),
        ];
        // Each alert was last written at 10 s; this server has evaluated nothing yet.
        let nothing_yet = Evaluations::default();
        let body = postable_alerts(&alerts, 240_000, &nothing_yet, "https://t.example/");
        let body = body.as_array().unwrap();
        assert_eq!(body.len(), 2);
        assert_eq!(body[0]["startsAt"], "1970-01-01T00:00:02.000Z");
        assert_eq!(body[0]["endsAt"], "1970-01-01T00:04:10.000Z");
        assert_eq!(body[1]["endsAt"], "1970-01-01T00:00:05.000Z");
        // An evaluation at 70 s that left the firing alert as it was (not written): it ends
        // ahead of that evaluation; one before its last writing changes nothing; one that could
        // not read its rule did not judge it; a resolved one still ends when it resolved.
        let evaluated = |last_ms: i64, unread_rules: Vec<crate::domain::RuleId>| Evaluations {
            changed: 0,
            last_ms: Some(last_ms),
            unread_rules,
        };
        for (last, ends) in [
            (evaluated(70_000, vec![]), "1970-01-01T00:05:10.000Z"),
            (evaluated(5_000, vec![]), "1970-01-01T00:04:10.000Z"),
            (
                evaluated(70_000, vec![crate::domain::RuleId(1)]),
                "1970-01-01T00:04:10.000Z",
            ),
            (
                evaluated(70_000, vec![crate::domain::RuleId(2)]),
                "1970-01-01T00:05:10.000Z",
            ),
        ] {
            let body = postable_alerts(&alerts, 240_000, &last, "https://t.example/");
            assert_eq!(body[0]["endsAt"], ends, "{last:?}");
            assert_eq!(body[1]["endsAt"], "1970-01-01T00:00:05.000Z");
        }
        let body = postable_alerts(&alerts, 240_000, &nothing_yet, "https://t.example/");
        assert_eq!(body[0]["labels"], body[1]["labels"]);
        assert_eq!(body[0]["generatorURL"], "https://t.example/guests/7");
        assert_eq!(body[0]["annotations"]["summary"], "s");
    }

    #[test]
    fn options_refuse_what_cannot_work() {
        let urls = ["http://am:9093/".to_string()];
        let ok = AlertmanagerOptions::new(
            &urls,
            None,
            Some("ada:pw\n"),
            None,
            DEFAULT_RESEND,
            Reach::default(),
        )
        .unwrap();
        assert_eq!(ok.targets[0].url, "http://am:9093");
        assert_eq!(
            ok.targets[0].authorization.as_deref(),
            Some("Basic YWRhOnB3")
        );
        let cases = [
            (Some("t"), Some("a:b"), DEFAULT_RESEND),
            (None, Some("no colon"), DEFAULT_RESEND),
            (None, None, Duration::ZERO),
        ];
        for (bearer, basic, resend) in cases {
            assert!(
                AlertmanagerOptions::new(&urls, bearer, basic, None, resend, Reach::default())
                    .is_err()
            );
        }
        for url in [
            "am:9093",
            "http://ada:pw@am:9093",
            "https://ada@am:9093/prefix",
        ] {
            assert!(
                AlertmanagerOptions::new(
                    &[url.into()],
                    None,
                    None,
                    None,
                    DEFAULT_RESEND,
                    Reach::default()
                )
                .is_err(),
                "{url}"
            );
        }
        // The server's own addresses, unless allowed.
        let loopback = ["http://127.0.0.1:9093".to_string()];
        assert!(
            AlertmanagerOptions::new(
                &loopback,
                None,
                None,
                None,
                DEFAULT_RESEND,
                Reach::default()
            )
            .is_err()
        );
        let allowed = Reach {
            allowed: vec!["127.0.0.1".parse().unwrap()],
        };
        assert!(
            AlertmanagerOptions::new(&loopback, None, None, None, DEFAULT_RESEND, allowed).is_ok()
        );
        // An @ in the path is no user.
        assert!(
            AlertmanagerOptions::new(
                &["http://am:9093/a@b".into()],
                None,
                None,
                None,
                DEFAULT_RESEND,
                Reach::default()
            )
            .is_ok()
        );
    }
}
