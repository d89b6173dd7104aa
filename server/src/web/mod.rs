//! The dashboard: server-rendered askama pages. Every string that came from a VM or a host is
//! escaped by askama's HTML escaping, which is on for every `.html` template, with bidi
//! controls and invisible characters shown as escapes (`escape.rs`). Every page but
//! `/login` needs a logged-in user, and every form carries the session's CSRF token.

mod account;
mod alerts;
mod change_view;
mod chart;
mod error;
mod escape;
mod extract;
mod flash;
mod fleet_chart;
mod form;
mod frame;
mod guest;
mod guest_list;
mod guest_view;
mod guests;
mod hosts;
mod login;
mod overview;
mod plan;
mod routes;
mod settings;
mod view;

pub use error::not_found;
pub use routes::router;
