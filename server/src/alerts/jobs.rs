//! The alerting background jobs: the evaluation on a timer, the webhook delivery, and the
//! Alertmanager senders.

use std::time::Duration;

use super::alertmanager::{self, Evaluations};
use super::context::AlertContext;
use super::evaluate::evaluate;
use super::webhook::{self, deliver_due};

/// Runs the evaluation every `state.every`, the webhook delivery whenever something is due,
/// and one sender per Alertmanager, until the server stops; each only while this server holds
/// the lease (`state.lease`), so that among several servers on one database one evaluates and
/// notifies.
pub fn spawn(state: AlertContext, alertmanagers: alertmanager::AlertmanagerOptions) {
    let every = state.every;
    let (told, evaluations) = tokio::sync::watch::channel(Evaluations::default());
    if !alertmanagers.targets.is_empty() {
        alertmanager::spawn(state.clone(), alertmanagers, evaluations);
    }
    let evaluating = state.clone();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut caught_up_in: Option<u64> = None;
        loop {
            ticker.tick().await;
            let Some(term) = evaluating.lease.term() else {
                continue;
            };
            // A follower reads the others' hosts at most every so often: the first evaluation
            // of each term waits until it has read all they announced, so that it does not
            // judge their guests on older figures than the last holder did.
            if caught_up_in != Some(term) {
                evaluating.intake.catch_up_with_others().await;
                // The catch-up waited its turn behind the writer's queue: the lease may have
                // moved meanwhile, and another server may evaluate now.
                if evaluating.lease.term() != Some(term) {
                    continue;
                }
                caught_up_in = Some(term);
            }
            let now_ms = evaluating.clock.now_ms();
            match evaluate(&evaluating, now_ms).await {
                // Alertmanager hears of a change at once, not at the next resend; of an
                // evaluation without one at its next send.
                Ok(e) => {
                    told.send_if_modified(|told| {
                        told.last_ms = Some(now_ms);
                        told.unread_rules = e.unread_rules;
                        told.changed += u64::from(e.transitions > 0);
                        e.transitions > 0
                    });
                }
                Err(e) => tracing::warn!(error = %e, "alert rules could not be evaluated"),
            }
        }
    });
    tokio::spawn(async move {
        loop {
            state.lease.wait_held().await;
            if let Err(e) = deliver_due(&state).await {
                tracing::warn!(error = %e, "notifications could not be delivered");
            }
            // Sleep until the next group is due (at most a minute), or until an evaluation
            // writes a new notification.
            let wait_ms = match webhook::next_delivery_ms(&state).await {
                Ok(Some(at)) => (at - state.clock.now_ms()).clamp(50, 60_000),
                _ => 60_000,
            };
            let _ = tokio::time::timeout(
                Duration::from_millis(wait_ms as u64),
                state.notifier.notified(),
            )
            .await;
        }
    });
}
