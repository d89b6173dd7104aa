//! `tickscope-server token`: API tokens made and bound from the command line. A token is
//! printed once; only its SHA-256 is stored.

use anyhow::{Context, Result};

use super::args::{DbArg, RoleArg, TokenCommand};
use super::hosts_file;
use crate::auth::{self, Role};
use crate::clock;
use crate::db::Db;

pub async fn run(command: TokenCommand) -> Result<()> {
    match command {
        TokenCommand::Bind {
            token,
            host,
            guest_uuid,
            db,
        } => bind(&token, &host, guest_uuid.as_deref(), &db).await,
        TokenCommand::Add {
            name,
            role,
            host,
            guest_uuid,
            count,
            hosts_file,
            output,
            db,
        } => {
            let role = match role {
                RoleArg::Agent => Role::Agent,
                RoleArg::Viewer => Role::Viewer,
                RoleArg::Guest => Role::Guest,
            };
            if let (Some(hosts_file), Some(output)) = (hosts_file, output) {
                if role != Role::Agent {
                    anyhow::bail!(
                        "--hosts-file makes agent tokens, one per host: add --role agent"
                    );
                }
                return hosts_file::enrol(&name, &hosts_file, &output, &db).await;
            }
            let db = db.open(false).await?;
            match count {
                Some(count) => add_for_hosts(db, &name, role, count).await,
                None => add(db, &name, role, host, guest_uuid).await,
            }
        }
    }
}

/// `token add NAME --count N`: N agent tokens, for the hosts `NAME-0001` on, each bound to its
/// host, printed one per line (for `tickscope-agent simulate --tokens-file`).
async fn add_for_hosts(db: Db, name: &str, role: Role, count: u32) -> Result<()> {
    if role != Role::Agent {
        anyhow::bail!("--count makes agent tokens, one per host");
    }
    eprintln!("Agent tokens for hosts {name}-0001 to {name}-{count:04}, shown only this once:");
    for i in 1..=count {
        let host = format!("{name}-{i:04}");
        let token = auth::new_token()?;
        db.insert_token(
            &host,
            role,
            &auth::token_hash(&token),
            Some(&host),
            clock::now_ms(),
        )
        .await?;
        println!("{token}");
    }
    db.close().await;
    Ok(())
}

/// `token add NAME`: one token, an agent's bound to `host` if given, a guest's pinned to
/// `guest_uuid` (on `host`) if given.
async fn add(
    db: Db,
    name: &str,
    role: Role,
    host: Option<String>,
    guest_uuid: Option<String>,
) -> Result<()> {
    let host = host.map(|h| h.trim().to_string());
    let guest_uuid = match (role, guest_uuid) {
        (Role::Guest, Some(uuid)) => Some(
            tickscope_wire::normalise_uuid(&uuid)
                .with_context(|| format!("--guest-uuid {uuid:?} is not a UUID"))?,
        ),
        (Role::Guest, None) if host.is_some() => {
            anyhow::bail!("--host pins a guest token with --guest-uuid: give both")
        }
        (_, Some(_)) => anyhow::bail!("--guest-uuid is for guest tokens"),
        (_, None) => None,
    };
    let token = auth::new_token()?;
    let agent_host = host.as_deref().filter(|_| role == Role::Agent);
    let id = db
        .insert_token(
            name,
            role,
            &auth::token_hash(&token),
            agent_host,
            clock::now_ms(),
        )
        .await?;
    if let Some(uuid) = &guest_uuid {
        db.pin_guest_token(id, uuid, host.as_deref()).await?;
    }
    db.close().await;
    println!(
        "Created {} token {name:?}. It is shown only this once:",
        role.as_str()
    );
    println!("{token}");
    Ok(())
}

/// `token bind`: pins a guest token to a VM on a host.
async fn bind(token: &str, host: &str, guest_uuid: Option<&str>, db: &DbArg) -> Result<()> {
    let db = db.open(false).await?;
    let tokens = db.tokens().await?;
    let found: Vec<_> = tokens
        .iter()
        .filter(|t| t.id.0.to_string() == token || t.name == token)
        .filter(|t| t.role == Role::Guest && t.revoked_ms.is_none())
        .collect();
    let row = match found.as_slice() {
        [row] => *row,
        [] => anyhow::bail!("there is no guest token {token:?} in use (by id or name)"),
        _ => anyhow::bail!("several guest tokens are named {token:?}: give its id"),
    };
    let uuid = match guest_uuid {
        Some(uuid) => tickscope_wire::normalise_uuid(uuid)
            .with_context(|| format!("--guest-uuid {uuid:?} is not a UUID"))?,
        None => row.guest_uuid.clone().with_context(|| {
            format!("guest token {token:?} has not delivered for a VM yet: give --guest-uuid")
        })?,
    };
    let host = host.trim();
    db.pin_guest_token(row.id, &uuid, Some(host)).await?;
    db.close().await;
    println!(
        "Guest token {:?} now delivers for the VM {uuid} on host {host:?}, from its next delivery.",
        row.name
    );
    Ok(())
}
