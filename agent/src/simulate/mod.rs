//! A simulated fleet, for load tests (`tickscope-agent simulate`), the server's demo and its
//! benchmarks: reports as real agents would send them, from a model of idle guests grounded in
//! measurements.
//!
//! What an idle vCPU costs its host, by tick mode:
//! - tickless: 0.3 % of a core and 37 wake-ups a second (docs/measurements.md, Debian 6.1, 1 vCPU:
//!   0.2-0.4 % and 34-41 wake-ups);
//! - periodic at `hz`: one wake-up per tick and 0.0047 % of a core per Hz on top of the tickless
//!   cost (the second seed report: Fedora Core 6 at CONFIG_HZ=1000 near 5 % under VMware, 1-2 %
//!   rebuilt at 250 Hz, Ubuntu at 100 Hz under 1 %; under TCG, docs/measurements.md has more, 5.3 % at
//!   250 Hz);
//! - polling (`idle=poll`): 99.3 % and 485 wake-ups a second (docs/measurements.md).
//!
//! Guests work through the day: a guest's load follows office hours (UTC) with noise, and some
//! run short batch jobs at any hour. VMs restart now and then (a new process, its counters from
//! zero), and ticking guests may get a tickless kernel mid-run (a kernel upgrade: new facts, a
//! restart, a lower cost). About half the guests run the guest probe and report their facts.

pub mod fleet;
pub mod kernel;
#[cfg(feature = "cli")]
pub mod latency;
#[cfg(feature = "cli")]
pub mod send;

pub use fleet::{GuestSpec, HostSpec, SimulatedHost, random_fleet};
pub use kernel::{Kernel, Tick};
