//! The server's integration tests, in one test binary: each file of this directory is a module,
//! so the server is linked once for all of them instead of once per file. Run one file's tests
//! with its module path as the filter: `cargo test -p tickscope-server --test suite login::`.
//!
//! Tests marked `#[ignore]` need what `cargo test` alone may not have (the agent binary, root,
//! QEMU, libvirt, Chromium, Alertmanager, Prometheus); `scripts/test.sh` runs them. The tests
//! that boot guests (`real_guests`, `libvirt`) take turns through `common::processes::guest_turn`.

mod agent_to_server;
mod alert_pages;
mod alertmanager;
mod alerts;
mod ansible;
mod api;
mod batched_store;
mod bindings;
mod blind_spots;
mod browser;
mod changes;
mod common;
mod compression;
mod demo;
mod disk_full;
mod exports;
mod facts;
mod fleet_history;
mod fleet_state;
mod guest_list_pages;
mod hardening;
mod hostile_input;
mod hostile_reports;
mod incremental;
mod libvirt;
mod login;
mod metrics;
mod migrate_data;
mod migrations;
mod one_sender;
mod openapi;
mod outage;
mod process_totals;
mod prometheus;
mod real_guests;
mod rollups;
mod server_env;
mod settings;
mod simulate;
mod slow_clients;
mod tls;
mod two_servers;
mod visible_names;
mod write_stall;
