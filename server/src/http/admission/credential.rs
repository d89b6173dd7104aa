//! Whose budget a request spends: its token's, its dashboard session's, or its client address's
//! (a request without a credential, or whose credential is being looked up).

use std::net::IpAddr;

use axum::http::request::Parts;

use super::kind::{Kind, session_cookie};
use super::limits::{MAX_AGENT_BODY_BYTES, MAX_FORM_BODY_BYTES, MAX_OTHER_TOKEN_BODY_BYTES};
use super::shared::Admission;
use super::slots::{busy, wait_for};
use crate::auth::{Caller, Role};
use crate::db::Db;
use crate::error::AppError;
use crate::http::spending::{Credential, Held};

/// Whose budget the request spends, with one of its requests taken, and the most its body may
/// hold. A token is looked up (and left in the extensions for the handler's extractor), a
/// session cookie checked; while either runs, the request spends for its client's address.
pub(super) async fn who(
    admission: &Admission,
    db: &Db,
    kind: Kind,
    client: IpAddr,
    parts: &mut Parts,
) -> Result<(Held, usize), AppError> {
    let anonymous = Credential::Address(client);
    match kind {
        Kind::Token => {
            let now_ms = crate::clock::now_ms();
            let hash = crate::auth::bearer_hash(parts)?.unwrap_or_default();
            let caller = {
                let looking = admission.spend(anonymous)?;
                let Some(_lookup) =
                    wait_for(&admission.lookup_slots, 1, admission.limits.queue_timeout).await
                else {
                    return Err(busy());
                };
                let caller = admission.lookups.token_caller(db, &hash, now_ms).await?;
                drop(looking);
                caller
            };
            let (credential, limit) = match caller {
                Caller::Token { token_id, role } => (
                    Credential::Token { id: token_id, role },
                    match role {
                        Role::Agent => MAX_AGENT_BODY_BYTES,
                        _ => MAX_OTHER_TOKEN_BODY_BYTES,
                    },
                ),
                Caller::User(_) => (anonymous, MAX_FORM_BODY_BYTES),
            };
            // The handler's extractor takes it from here instead of looking it up again.
            parts.extensions.insert(caller);
            Ok((admission.spend(credential)?, limit))
        }
        Kind::Session => {
            let now_ms = crate::clock::now_ms();
            let cookie = session_cookie(parts).unwrap_or_default();
            if let Some(id) = admission.lookups.checked_session(cookie, now_ms) {
                return Ok((
                    admission.spend(Credential::Session(id))?,
                    MAX_FORM_BODY_BYTES,
                ));
            }
            let credential = {
                let looking = admission.spend(anonymous)?;
                let Some(_lookup) =
                    wait_for(&admission.lookup_slots, 1, admission.limits.queue_timeout).await
                else {
                    return Err(busy());
                };
                let found = admission.lookups.session_exists(cookie, now_ms).await;
                drop(looking);
                found.map_or(anonymous, Credential::Session)
            };
            Ok((admission.spend(credential)?, MAX_FORM_BODY_BYTES))
        }
        _ => Ok((admission.spend(anonymous)?, MAX_FORM_BODY_BYTES)),
    }
}
