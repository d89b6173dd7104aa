//! `tickscope-server serve`: opens the database, starts the background work (session cleanup,
//! the demo fleet, following other servers, alerts, retention) and serves until stopped.
//!
//! Its log lines keep the target `tickscope_server` they had when this was the binary's own
//! code, so that log filters and searches written for them still match.

use anyhow::{Context, Result};

use super::args::ServeArgs;
use super::serve_settings::ServeSettings;
use crate::http::listener;
use crate::state::AppState;
use crate::{app, clock};

/// Checks the flags, then serves with them.
pub async fn run(args: ServeArgs) -> Result<()> {
    serve(ServeSettings::from_args(args)?).await
}

async fn serve(settings: ServeSettings) -> Result<()> {
    let ServeSettings {
        listen,
        db: db_arg,
        options,
        alertmanagers,
        retention,
        tls,
        connections,
        proxies,
    } = settings;
    let demo = options.demo;
    let db_url = db_arg.url(demo);
    let db = db_arg.open(demo).await?;
    // A database that opens but cannot be written (a read-only file or mount, a full disk)
    // would answer every report 5xx while looking healthy: refuse to start instead.
    db.probe_write(clock::now_ms()).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot write the database {db_url}: {e}; check the free space and the permissions \
             of the file, its directory and the mount, or the database server and its role"
        )
    })?;
    // Before anything else starts, so that a wrong certificate stops the server at once.
    let tls = tls
        .map(|files| crate::http::tls::acceptor(&files.cert, &files.key))
        .transpose()?;
    tracing::info!(
        target: "tickscope_server",
        db = %db_url,
        database = %db.describe().await?,
        "database ready"
    );
    // Sessions that lapsed are deleted hourly; a lapsed one is refused anyway.
    let store = crate::auth::session_store::Sessions::new(db.session_store());
    tokio::spawn(async move {
        use tower_sessions::session_store::ExpiredDeletion;
        let hourly = tokio::time::Duration::from_secs(3600);
        if let Err(e) = store.continuously_delete_expired(hourly).await {
            tracing::warn!(
                target: "tickscope_server",
                error = %e,
                "lapsed sessions are no longer deleted"
            );
        }
    });
    let state = AppState::new(db.clone(), options)
        .await
        .context("cannot read the saved settings or analyse the fleet")?;
    if demo {
        crate::demo::start(&state)
            .await
            .context("cannot fill the demo database")?;
    }
    // Several servers on one PostgreSQL: each follows what the others store.
    crate::cluster::follow::spawn(state.clone());
    crate::alerts::spawn(axum::extract::FromRef::from_ref(&state), alertmanagers);
    // Every five minutes: one analysis window more of each guest becomes due.
    crate::retention::spawn(
        state.clone(),
        retention,
        std::time::Duration::from_secs(300),
    );
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    tracing::info!(
        target: "tickscope_server",
        max_connections = connections.max_connections,
        "tickscope-server listening on {}://{}",
        if tls.is_some() { "https" } else { "http" },
        listener.local_addr()?
    );
    let metrics = state.metrics.clone();
    listener::serve(
        listener,
        app::router(state),
        tls,
        connections,
        proxies,
        metrics,
        shutdown_signal(),
    )
    .await;
    db.close().await;
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM (systemd stop), letting in-flight requests finish.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!(target: "tickscope_server", "shutting down");
}
