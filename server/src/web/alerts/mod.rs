//! `/alerts`: what fires, what is pending, what is silenced, what fired before; and, for admins,
//! the rules, the silences and the webhook receivers. Forms redirect back (post/redirect/get).
//!
//! One module per part of the page, each with its routes: `page` (the page itself, the
//! acknowledgement of an alert, and the answer every form gives), `rules`, `silences`,
//! `receivers`; `rows` makes the page's rows from what storage holds.

mod page;
mod receivers;
mod rows;
mod rules;
mod silences;

use axum::Router;

use crate::state::AppState;

pub use rows::AlertLine;

/// Every route of `/alerts` and its forms.
pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(page::routes())
        .merge(rules::routes())
        .merge(silences::routes())
        .merge(receivers::routes())
}
