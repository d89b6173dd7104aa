//! Row ids, one type per table: a guest's id cannot be passed where a host's is wanted. Stored
//! and serialised as the bare integer they wrap (`#[sqlx(transparent)]`, `#[serde(transparent)]`),
//! so neither the schema nor the API changes.

macro_rules! row_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize,
            serde::Deserialize, sqlx::Type,
        )]
        #[serde(transparent)]
        #[sqlx(transparent)]
        pub struct $name(pub i64);

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl From<$name> for i64 {
            fn from(id: $name) -> i64 {
                id.0
            }
        }
    };
}

row_id!(
    /// A row of `guests`.
    GuestId
);
row_id!(
    /// A row of `hosts`.
    HostId
);
row_id!(
    /// A row of `reports`.
    ReportId
);
row_id!(
    /// A row of `tokens`.
    TokenId
);
row_id!(
    /// A row of `users`.
    UserId
);
row_id!(
    /// A row of `alerts`.
    AlertId
);
row_id!(
    /// A row of `alert_rules`.
    RuleId
);
row_id!(
    /// A row of `silences`.
    SilenceId
);
row_id!(
    /// A row of `receivers`.
    ReceiverId
);
row_id!(
    /// A row of `outbox`: one notification.
    OutboxId
);
row_id!(
    /// A row of `change_records`: a change made to a guest, as recorded.
    ChangeRecordId
);
