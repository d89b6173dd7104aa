//! `tickscope-server user`: the dashboard's users, managed from the command line (the way in
//! for the first admin, and for one locked out).

use anyhow::{Context, Result};

use super::args::{UserCommand, UserRoleArg};
use crate::auth::{self, UserRole};
use crate::clock;

pub async fn run(command: UserCommand) -> Result<()> {
    // AppError's own messages are written for the person at the keyboard.
    let clear = |e: crate::error::AppError| anyhow::anyhow!("{e}");
    let clear_store = |e: crate::db::StoreError| clear(e.into());
    match command {
        UserCommand::Add { name, role, db } => {
            let role = match role {
                UserRoleArg::Admin => UserRole::Admin,
                UserRoleArg::Viewer => UserRole::Viewer,
            };
            let name = auth::user_name(&name).map_err(|e| anyhow::anyhow!("user {e}"))?;
            let password = read_password(&name)?;
            let hash = auth::hash_password(&password).map_err(clear)?;
            let db = db.open(false).await?;
            db.insert_user(&name, role, &hash, clock::now_ms())
                .await
                .map_err(clear_store)?;
            db.close().await;
            println!("Created {} user {name:?}.", role.as_str());
        }
        UserCommand::Passwd { name, db } => {
            let db = db.open(false).await?;
            let user = db
                .user_by_name(&name)
                .await?
                .with_context(|| format!("there is no user {name:?}"))?;
            let password = read_password(&user.name)?;
            let hash = auth::hash_password(&password).map_err(clear)?;
            db.set_password(user.id, &hash).await.map_err(clear_store)?;
            db.close().await;
            println!(
                "New password set for {:?}; their open sessions are logged out.",
                user.name
            );
        }
        UserCommand::Remove { name, db } => {
            let db = db.open(false).await?;
            let user = db
                .user_by_name(&name)
                .await?
                .with_context(|| format!("there is no user {name:?}"))?;
            db.delete_user(user.id).await.map_err(clear_store)?;
            db.close().await;
            println!("Removed user {:?}.", user.name);
        }
        UserCommand::List { db } => {
            let db = db.open(false).await?;
            println!("{:<24} {:<8} last login", "name", "role");
            for user in db.users().await? {
                let last = user.last_login_ms.map_or("never".to_string(), |ms| {
                    chrono::DateTime::from_timestamp_millis(ms).map_or(ms.to_string(), |t| {
                        t.format("%Y-%m-%d %H:%M UTC").to_string()
                    })
                });
                println!("{:<24} {:<8} {last}", user.name, user.role);
            }
            db.close().await;
        }
    }
    Ok(())
}

/// The new user's password: prompted for twice without echo on a terminal, else the first line
/// of standard input.
fn read_password(name: &str) -> Result<String> {
    use std::io::{BufRead, IsTerminal};
    if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password(format!("Password for {name}: "))?;
        let again = rpassword::prompt_password("Again: ")?;
        if first != again {
            anyhow::bail!("the two passwords differ");
        }
        return Ok(first);
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}
