//! The JSON API, versioned in its paths.

mod alerts;
mod body;
mod changes;
mod cursor;
mod errors;
mod exports;
mod facts;
mod fleet;
mod guest_path;
mod guests;
mod health;
mod hosts;
mod metrics;
mod openapi;
mod reports;
mod routes;

pub use routes::{OPENAPI_PATH, openapi, router};
