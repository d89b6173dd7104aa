//! tickscope agent library.
//!
//! `wire` is the report format shared with the server (the tickscope-wire crate, under the name
//! every `crate::wire` path of the agent already uses), and `simulate` the model of a simulated
//! fleet (the server's demo and benchmarks use it); they are all the server links. The rest
//! (discovery, sampling, the HTTP client) is the agent itself, behind the `cli` feature.

pub mod simulate;
pub use tickscope_wire as wire;

#[cfg(feature = "cli")]
pub mod blind_spots;
#[cfg(feature = "cli")]
pub mod channel;
#[cfg(feature = "cli")]
pub mod client;
#[cfg(feature = "cli")]
pub mod clock;
#[cfg(feature = "cli")]
pub mod cpu;
#[cfg(feature = "cli")]
pub mod discover;
#[cfg(feature = "cli")]
pub mod error;
#[cfg(feature = "cli")]
pub mod guest;
#[cfg(feature = "cli")]
pub mod guest_agent;
#[cfg(feature = "cli")]
pub mod host;
#[cfg(feature = "cli")]
pub mod procfs;
#[cfg(feature = "cli")]
pub mod report;
#[cfg(feature = "cli")]
pub mod resolver;
#[cfg(feature = "cli")]
pub mod sampler;
#[cfg(feature = "cli")]
pub mod spool;
