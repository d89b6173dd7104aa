//! The command line of `tickscope-server`, above every other layer: the clap definitions
//! ([`args`]), and what each subcommand does: [`serve`] (with its flags checked and worked out
//! in [`serve_settings`]), [`user`], [`token`] (with [`hosts_file`]: one agent token per host of a file, for the Ansible rollout) and [`migrate_data`]. `main.rs` parses, sets up
//! logging and hands the subcommand to its module.

pub mod args;
pub mod hosts_file;
pub mod migrate_data;
pub mod serve;
pub mod serve_settings;
pub mod token;
pub mod user;
