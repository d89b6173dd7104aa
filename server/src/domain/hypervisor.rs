//! A guest's hypervisor family as storage keeps it (the TEXT of `Hypervisor::as_str`). A name no
//! family has (a database a newer server wrote, then downgraded; a corruption) is read as
//! `Other` and said in the log, once: one odd row must not stop the server from starting or its
//! pages from answering, and it must not pass unnoticed either.
//!
//! `Hypervisor` is the wire crate's type, so it cannot be an `sqlx::Type` here (the orphan
//! rule); rows read it as a [`HypervisorName`], which checks the name as it decodes. The names
//! are the wire crate's own list (`Hypervisor::parse`): a family added there reads back here.

use tickscope_wire::Hypervisor;

/// A stored name that is no hypervisor family's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not the name of a hypervisor family")]
pub struct UnknownName(pub String);

/// The family named by [`Hypervisor::as_str`] (`other` included: ingest stores it for a family
/// this version does not know), or an error for any other name.
pub fn parse_hypervisor(name: &str) -> Result<Hypervisor, UnknownName> {
    Hypervisor::parse(name).ok_or_else(|| UnknownName(name.to_string()))
}

/// A hypervisor family as read from storage: its TEXT, checked while it is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HypervisorName(pub Hypervisor);

impl<DB: sqlx::Database> sqlx::Type<DB> for HypervisorName
where
    str: sqlx::Type<DB>,
{
    fn type_info() -> DB::TypeInfo {
        <str as sqlx::Type<DB>>::type_info()
    }

    fn compatible(ty: &DB::TypeInfo) -> bool {
        <str as sqlx::Type<DB>>::compatible(ty)
    }
}

impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for HypervisorName
where
    &'r str: sqlx::Decode<'r, DB>,
{
    fn decode(value: DB::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let name = <&'r str as sqlx::Decode<'r, DB>>::decode(value)?;
        Ok(HypervisorName(parse_hypervisor(name).unwrap_or_else(|unknown| {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::warn!(
                    name = %crate::visible::show_invisible(&unknown.0),
                    "a stored guest has a hypervisor name this server does not know; it is shown as other"
                );
            });
            Hypervisor::Other
        })))
    }
}

impl From<HypervisorName> for Hypervisor {
    fn from(name: HypervisorName) -> Hypervisor {
        name.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_read_back_as_their_family_and_others_are_refused() {
        let cases: [(&str, Result<Hypervisor, UnknownName>); 9] = [
            ("qemu", Ok(Hypervisor::Qemu)),
            ("virtualbox", Ok(Hypervisor::Virtualbox)),
            ("vmware", Ok(Hypervisor::Vmware)),
            ("firecracker", Ok(Hypervisor::Firecracker)),
            ("cloud_hypervisor", Ok(Hypervisor::CloudHypervisor)),
            ("other", Ok(Hypervisor::Other)),
            ("QEMU", Err(UnknownName("QEMU".into()))),
            ("", Err(UnknownName(String::new()))),
            ("xen", Err(UnknownName("xen".into()))),
        ];
        for (name, expected) in cases {
            assert_eq!(parse_hypervisor(name), expected, "{name:?}");
        }
    }

    #[test]
    fn every_family_reads_back_as_itself() {
        for family in Hypervisor::ALL {
            assert_eq!(parse_hypervisor(family.as_str()), Ok(family));
        }
    }
}
