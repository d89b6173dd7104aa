//! The hypervisor families, listed once.
//!
//! One `macro_rules!` list makes the enum, its wire and storage names (`as_str`, the serde names),
//! [`Hypervisor::ALL`] and [`Hypervisor::parse`], so a family added to the list is known
//! everywhere at once: a family listed a second time elsewhere (the server's storage did) and
//! missed there reads back as `Other` without a word.

use serde::{Deserialize, Serialize};

/// Writes the enum and everything that goes by its names from one list of `Variant = "name"`.
/// `Other` is added last: what a family this version does not know deserializes as. The names
/// are taken as `tt`, not `literal`: a `literal` fragment reaches the derives wrapped in an
/// invisible group, which serde reads but utoipa's derive does not (the OpenAPI document would
/// then name the variants `Qemu`, `CloudHypervisor`).
macro_rules! hypervisor_families {
    ($($(#[$doc:meta])* $variant:ident = $name:tt,)+) => {
        /// Hypervisor family, as recognised from the VM process.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub enum Hypervisor {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)+
            /// A family this version does not know (sent by a newer agent).
            #[serde(rename = "other", other)]
            Other,
        }

        impl Hypervisor {
            /// Every family, `Other` last (the server stores `other` for a family it does not
            /// know).
            pub const ALL: [Hypervisor; [$($name,)+ "other"].len()] =
                [$(Hypervisor::$variant,)+ Hypervisor::Other];

            /// The family's name on the wire and in storage.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Hypervisor::$variant => $name,)+
                    Hypervisor::Other => "other",
                }
            }

            /// The family named by [`Hypervisor::as_str`] (`other` included), or `None` for any
            /// other name: for readers that must notice a name they do not know, where the wire
            /// format quietly takes it as `Other`.
            pub fn parse(name: &str) -> Option<Hypervisor> {
                match name {
                    $($name => Some(Hypervisor::$variant),)+
                    "other" => Some(Hypervisor::Other),
                    _ => None,
                }
            }
        }
    };
}

hypervisor_families! {
    /// QEMU/KVM, plain or under libvirt or Proxmox.
    Qemu = "qemu",
    Virtualbox = "virtualbox",
    /// VMware Workstation.
    Vmware = "vmware",
    Firecracker = "firecracker",
    CloudHypervisor = "cloud_hypervisor",
}

impl Hypervisor {
    /// The family named by [`Hypervisor::as_str`]; `Other` for any other name, as on the wire.
    pub fn from_name(name: &str) -> Hypervisor {
        Hypervisor::parse(name).unwrap_or(Hypervisor::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_round_trips_through_json_and_parse_under_its_name() {
        for family in Hypervisor::ALL {
            let json = serde_json::to_value(family).unwrap();
            assert_eq!(json, family.as_str(), "{family:?} on the wire");
            assert_eq!(
                serde_json::from_value::<Hypervisor>(json).unwrap(),
                family,
                "{family:?} read back"
            );
            assert_eq!(Hypervisor::parse(family.as_str()), Some(family));
            assert_eq!(Hypervisor::from_name(family.as_str()), family);
        }
    }

    #[test]
    fn all_holds_each_family_once_with_other_last() {
        let mut names: Vec<&str> = Hypervisor::ALL.iter().map(|h| h.as_str()).collect();
        assert_eq!(names.last(), Some(&"other"));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Hypervisor::ALL.len(), "a name is used twice");
    }

    #[test]
    fn an_unknown_name_is_other_on_the_wire_and_refused_by_parse() {
        for name in ["bhyve", "QEMU", "Qemu", "", "cloud-hypervisor"] {
            let read: Hypervisor = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(read, Hypervisor::Other, "{name:?} from a newer agent");
            assert_eq!(Hypervisor::parse(name), None, "{name:?}");
            assert_eq!(Hypervisor::from_name(name), Hypervisor::Other, "{name:?}");
        }
    }

    /// The OpenAPI document lists each family under the name the wire carries.
    #[cfg(feature = "openapi")]
    #[test]
    fn the_schema_names_every_family_as_the_wire_does() {
        use utoipa::PartialSchema;
        let schema = serde_json::to_value(Hypervisor::schema()).unwrap();
        let names: Vec<&str> = Hypervisor::ALL.iter().map(|h| h.as_str()).collect();
        assert_eq!(schema["enum"], serde_json::json!(names));
    }

    /// Servers already deployed, and databases already written, know the families by these
    /// names: renaming one would make them read it as `other`. A new family needs no line here.
    #[test]
    fn names_older_servers_and_stored_rows_know_still_parse() {
        for (name, family) in [
            ("qemu", Hypervisor::Qemu),
            ("virtualbox", Hypervisor::Virtualbox),
            ("vmware", Hypervisor::Vmware),
            ("firecracker", Hypervisor::Firecracker),
            ("cloud_hypervisor", Hypervisor::CloudHypervisor),
            ("other", Hypervisor::Other),
        ] {
            assert_eq!(Hypervisor::parse(name), Some(family), "{name:?}");
        }
    }
}
