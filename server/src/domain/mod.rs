//! Values that keep their type from the edge to storage and back: row ids that cannot be mixed
//! up, the names storage keeps as TEXT read back into what they name, strictly, and address
//! blocks.

mod hypervisor;
mod ids;
mod kinds;
mod network;

pub use hypervisor::{HypervisorName, UnknownName, parse_hypervisor};
pub use ids::{
    AlertId, ChangeRecordId, GuestId, HostId, OutboxId, ReceiverId, ReportId, RuleId, SilenceId,
    TokenId, UserId,
};
pub use kinds::{AlertState, KindSpec, RuleKind, Subject, ThresholdBounds, TokenRole, UserRole};
pub use network::{Network, canonical, in_any};
