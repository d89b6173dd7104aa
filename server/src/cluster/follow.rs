//! Following what the other servers on the database store: each server keeps its analysed
//! fleet and its settings current from the changes the others announce (PostgreSQL `NOTIFY`,
//! sent in the transaction that stored them, so heard exactly once it is committed).
//!
//! A host announced is read again by the one writer, between this server's own reports
//! ([`crate::intake::Intake::stored_elsewhere`]), with the others announced within a quarter
//! of a second of it ([`crate::intake::GATHER_ELSEWHERE`]); however often it was announced
//! meanwhile, it is read once. A listener whose connection was lost may have missed announcements: once it
//! listens again, every active guest is read again. A connection lost without a word (a
//! network cut) would leave the listener waiting for ever, so every server pings the channel
//! every [`PING_EVERY`]; a listener that hears nothing for [`SILENT_FOR`] listens anew.
//!
//! Between the start-up read of the fleet and the first listen, announcements are not heard:
//! a host that reports again (every agent interval) is read again then; settings are read
//! again once the listener listens.

use std::time::Duration;

use crate::db::cluster::{ClusterChange, Heard};
use crate::state::AppState;

/// How often each server pings the changes channel.
pub const PING_EVERY: Duration = Duration::from_secs(10);
/// A listener that hears nothing (not even a ping) this long listens anew.
pub const SILENT_FOR: Duration = Duration::from_secs(35);
/// How long to wait before listening again after the database could not be reached.
const RETRY_EVERY: Duration = Duration::from_secs(2);

/// Starts following the other servers on `state`'s database (nothing on SQLite).
pub fn spawn(state: AppState) {
    let pinging = state.db.clone();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(PING_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if pinging.is_closed() {
                return;
            }
            if let Err(e) = pinging.ping_listeners().await {
                tracing::debug!(error = %e, "could not ping the changes channel");
            }
        }
    });
    tokio::spawn(follow(state));
}

async fn follow(state: AppState) {
    let mut first = true;
    loop {
        let mut listener = match state.db.listen_changes().await {
            Ok(Some(listener)) => listener,
            Ok(None) => return,
            Err(_) if state.db.is_closed() => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen to the changes other servers store; trying again");
                tokio::time::sleep(RETRY_EVERY).await;
                continue;
            }
        };
        if first {
            first = false;
            settings_saved_elsewhere(&state).await;
        } else {
            tracing::info!(
                "listening again to the changes other servers store; reading every active guest again"
            );
            missed_some(&state).await;
        }
        loop {
            let heard = match tokio::time::timeout(SILENT_FOR, listener.next()).await {
                Ok(Ok(heard)) => heard,
                Ok(Err(_)) if state.db.is_closed() => return,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "lost the changes other servers store; listening again");
                    break;
                }
                Err(_) => {
                    tracing::warn!(
                        silent_s = SILENT_FOR.as_secs(),
                        "heard nothing from the database, not even a ping; listening again"
                    );
                    break;
                }
            };
            let applied = match heard {
                Heard::Reconnected => {
                    missed_some(&state).await;
                    Ok(())
                }
                Heard::Notice(notice) => match notice.change {
                    ClusterChange::Hosts(hosts) => {
                        state.intake.stored_elsewhere(Some(&hosts));
                        Ok(())
                    }
                    ClusterChange::Setting(name) => state.setting_saved_elsewhere(&name).await,
                    // Heard: the listener is alive, which is all a ping says.
                    ClusterChange::Ping => Ok(()),
                },
            };
            if let Err(e) = applied {
                tracing::warn!(error = %e, "a change another server stored could not be taken in");
            }
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

/// Announcements may have been missed: every active guest and every setting is read again.
async fn missed_some(state: &AppState) {
    state.intake.stored_elsewhere(None);
    settings_saved_elsewhere(state).await;
}

async fn settings_saved_elsewhere(state: &AppState) {
    if let Err(e) = state
        .setting_saved_elsewhere(crate::state::COST_MODEL_SETTING)
        .await
    {
        tracing::warn!(error = %e, "cannot read the settings again");
    }
}
