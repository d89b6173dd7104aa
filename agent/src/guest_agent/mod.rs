//! Asking a VM's own guest agent what kernel it runs: qemu-guest-agent (`guest-get-osinfo`) and
//! VirtualBox guest properties. They know less than the guest probe (release and distribution,
//! not the timer setup) but are often already installed.
//!
//! These calls can block (a guest agent that is not running never answers), so the sampler makes
//! them after it has read every VM's counters, with a short timeout, and rarely once answered
//! ([`schedule`]).

pub mod command;
pub mod qga;
pub mod schedule;
pub mod virtualbox;
