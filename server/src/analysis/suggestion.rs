//! What a rule of [`super::suggest`] looks at and what it says: shared by the rule tables.

use serde::Serialize;

use super::cause::Cause;
use super::change_kind::ChangeKind;
use super::idle::Activity;
use super::tick_mode::{Classification, Confidence, TickMode};
use super::waste::Waste;
use super::window::{CpuSplit, Rates, Window};

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Suggestion {
    /// Stable identifier of the rule that made it.
    pub rule: &'static str,
    /// What the change takes away.
    pub cause: Cause,
    /// The change in a few words, for lists.
    pub title: &'static str,
    /// The change to make, exactly.
    pub change: String,
    /// What making it takes (a reboot, a new kernel, ...).
    pub kind: ChangeKind,
    /// Why it helps.
    pub why: String,
    pub confidence: Confidence,
    /// Host CPU the change should save, in % of one core, when it can be estimated.
    pub saving_cpu_pct: Option<f64>,
}

/// What the rules look at.
pub struct Input<'a> {
    pub window: &'a Window,
    /// Over the guest's idle intervals.
    pub rates: Option<&'a Rates>,
    /// Where its host CPU went among the VM's threads over the same intervals, when known.
    pub split: Option<&'a CpuSplit>,
    /// Host CPU KVM spent halt-polling its vCPUs over the same intervals, in % of a core, where
    /// it was measured.
    pub halt_poll_pct: Option<f64>,
    pub activity: &'a Activity,
    pub classification: &'a Classification,
    pub waste: &'a Waste,
}

/// The least share of the window a guest idles for the rules that price its idle cost to judge
/// it: below it, its CPU is mostly work.
pub const MIN_IDLE_SHARE: f64 = 0.5;

impl Input<'_> {
    /// The share of the window the guest idled, for a guest measured long enough, not busy, and
    /// idle at least [`MIN_IDLE_SHARE`] of the time; `None` otherwise.
    pub fn mostly_idle_share(&self) -> Option<f64> {
        let idle_share = self.activity.idle_share()?;
        let judged = !matches!(self.classification.mode, TickMode::Busy | TickMode::Unknown);
        (judged && idle_share >= MIN_IDLE_SHARE).then_some(idle_share)
    }
}
