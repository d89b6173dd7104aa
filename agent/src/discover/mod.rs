//! Recognising VM processes and their vCPU threads, one module per hypervisor family.
//!
//! Each family is a signature: a pure function from a process's name and arguments to a VM
//! identity, and one from a thread name to a vCPU index. Sampling (`crate::sampler`) walks
//! `/proc` and asks each family in turn.

pub mod args;
pub mod cloud_hypervisor;
pub mod family;
pub mod firecracker;
pub mod identity;
pub mod libvirt_xml;
pub mod qemu;
pub mod qemu_config;
pub mod virtualbox;
pub mod vmware;

pub use family::{FAMILIES, recognise};
pub use identity::{Family, ProcessView, VmIdentity};
