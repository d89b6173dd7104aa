//! tickscope server: ingest → store → analyse → render.

pub mod alerts;
pub mod analysis;
pub mod api;
pub mod app;
pub mod auth;
pub mod current;
pub mod db;
pub mod demo;
pub mod error;
pub mod export;
pub mod facts;
pub mod fleet;
pub mod http;
pub mod ingest;
pub mod logging;
pub mod metrics;
pub mod refresher;
pub mod retention;
pub mod visible;
pub mod web;
