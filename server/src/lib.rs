//! tickscope server: ingest → store → analyse → render.

pub mod alerts;
pub mod analysis;
pub mod api;
pub mod app;
pub mod auth;
pub mod budgets;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod crypto;
pub mod db;
pub mod demo;
pub mod domain;
pub mod error;
pub mod export;
pub mod fleet;
#[cfg(test)]
pub(crate) mod growth;
pub mod health;
pub mod http;
pub mod ingest;
pub mod intake;
pub mod lease;
pub mod logging;
pub mod metrics;
pub mod percent;
pub mod retention;
pub mod state;
pub mod visible;
pub mod web;
pub mod work;
