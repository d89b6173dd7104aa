//! Who is calling: an API token (agents, guest probes, scripts) or a user logged in to the
//! dashboard.

mod caller;
mod extract;
mod passwords;
pub mod session;
pub mod session_store;
pub mod throttle;
mod tokens;

pub use caller::{Caller, Role, bearer_hash, caller_of_token};
pub use extract::{AgentToken, GuestToken, Viewer};
pub use passwords::{
    MAX_USER_NAME_CHARS, MIN_PASSWORD_CHARS, check_password, hash_password, hash_password_async,
    user_name, verify_password,
};
pub use session::{
    CSRF_FIELD, LOGIN_CSRF_COOKIE, PageUser, User, UserRole, check_csrf, check_login_csrf,
    csrf_token, current_user, log_in, log_out, login_csrf, safe_next,
};
pub use tokens::{NewTokens, new_token, token_hash};
