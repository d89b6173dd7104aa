//! What every page shows around its content: the demo banner, who is logged in, and the logout
//! form with the session's CSRF token.

use tower_sessions::Session;

use crate::auth::{self, User};
use crate::error::AppResult;
use crate::state::AppState;

#[derive(Debug, Clone, Default)]
pub struct Frame {
    pub demo: bool,
    /// The logged-in user's name and role; empty on pages shown before login.
    pub user: String,
    pub role: &'static str,
    pub csrf: String,
}

impl Frame {
    pub async fn new(state: &AppState, user: &User, session: &Session) -> AppResult<Frame> {
        Ok(Frame {
            demo: state.options.demo,
            user: user.name.clone(),
            role: user.role.as_str(),
            csrf: auth::csrf_token(session).await?,
        })
    }

    /// The frame of a page shown to nobody in particular (login, errors).
    pub fn anonymous(state: &AppState) -> Frame {
        Frame {
            demo: state.options.demo,
            ..Frame::default()
        }
    }
}
