//! What every request of one server shares: the slots, the budgets and what each credential has
//! in use, the rate limiters, the credentials looked up lately, and the server's budget of body
//! bytes.

use std::num::NonZeroU32;
use std::sync::Arc;

use tokio::sync::Semaphore;

use super::body_meter::BodyMeter;
use super::limits::AdmissionLimits;
use super::lookups::Lookups;
use super::rates::Rates;
use super::slots::{LOOKUP_SLOTS, PROBE_SLOTS};
use super::spend::refusal;
use crate::auth::session_store::Sessions;
use crate::budgets::Budgets;
use crate::domain::{TokenId, TokenRole};
use crate::error::AppError;
use crate::http::client::Network;
use crate::http::spending::{Credential, Held, Limits, Spending};
use crate::metrics::Metrics;

/// The slots and budgets, shared by every request of one server.
pub struct Admission {
    pub(super) limits: AdmissionLimits,
    budgets: Budgets,
    pub(super) trusted_proxies: Vec<Network>,
    senders: Arc<Semaphore>,
    users: Arc<Semaphore>,
    anonymous: Arc<Semaphore>,
    pub(super) probes: Arc<Semaphore>,
    /// Token and session lookups at once.
    pub(super) lookup_slots: Arc<Semaphore>,
    pub(super) body: BodyMeter,
    spending: Arc<Spending>,
    pub(super) rates: Rates,
    pub(super) lookups: Lookups,
    pub(super) metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("limits", &self.limits)
            .field("budgets", &self.budgets)
            .finish_non_exhaustive()
    }
}

/// What [`Admission::new`] is made of.
pub struct AdmissionSettings {
    pub limits: AdmissionLimits,
    pub budgets: Budgets,
    pub trusted_proxies: Vec<Network>,
    /// Reports one agent token may send per second, and at once above that.
    pub reports_per_second: NonZeroU32,
    pub reports_burst: NonZeroU32,
}

impl Admission {
    pub fn new(
        settings: AdmissionSettings,
        sessions: Sessions,
        metrics: Arc<Metrics>,
    ) -> Admission {
        let AdmissionSettings {
            limits,
            budgets,
            trusted_proxies,
            reports_per_second,
            reports_burst,
        } = settings;
        Admission {
            limits,
            budgets,
            trusted_proxies,
            senders: Arc::new(Semaphore::new(limits.sender_slots)),
            users: Arc::new(Semaphore::new(limits.user_slots)),
            anonymous: Arc::new(Semaphore::new(limits.anonymous_slots)),
            probes: Arc::new(Semaphore::new(PROBE_SLOTS)),
            lookup_slots: Arc::new(Semaphore::new(LOOKUP_SLOTS)),
            body: BodyMeter::new(&limits),
            spending: Arc::new(Spending::default()),
            rates: Rates::new(reports_per_second, reports_burst, &budgets),
            lookups: Lookups::new(sessions),
            metrics,
        }
    }

    /// What each credential has in use now (for the tests that it is given back).
    pub fn spending(&self) -> &Spending {
        &self.spending
    }

    /// Forgets what it remembers of a token (it was just revoked).
    pub fn forget_token(&self, id: TokenId) {
        self.lookups.forget_token(id);
    }

    fn limits_of(&self, credential: Credential) -> Limits {
        let requests = match credential {
            Credential::Address(_) => self.budgets.requests_per_address,
            _ => self.budgets.requests_per_credential,
        };
        Limits {
            requests,
            streams: self.budgets.streams_per_credential,
            body_bytes: self.budgets.body_bytes_per_credential,
        }
    }

    /// The slots a request spending for `credential` waits for: senders (agents' and
    /// guests' tokens), users (sessions and viewers' tokens) and requests without a
    /// credential each have their own (see [`AdmissionLimits::user_slots`]).
    pub(super) fn slots_of(&self, credential: Credential) -> &Arc<Semaphore> {
        match credential {
            Credential::Token {
                role: TokenRole::Agent | TokenRole::Guest,
                ..
            } => &self.senders,
            Credential::Token {
                role: TokenRole::Viewer,
                ..
            }
            | Credential::Session(_) => &self.users,
            Credential::Address(_) => &self.anonymous,
        }
    }

    /// One more request of `credential`, or 429 saying which budget it spent.
    pub(super) fn spend(&self, credential: Credential) -> Result<Held, AppError> {
        self.spending
            .request(credential, self.limits_of(credential))
            .map_err(|spent| refusal(&self.metrics, spent, credential))
    }
}
