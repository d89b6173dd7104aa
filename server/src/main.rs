//! `tickscope-server`: stores what the agents measure and serves the dashboard and API. The
//! subcommands are in the library's `cli` module; this parses, sets up logging, dispatches.

use anyhow::Result;
use clap::Parser;
use tracing_subscriber::EnvFilter;

use tickscope_server::cli::args::{Cli, Command};
use tickscope_server::cli::{migrate_data, serve, token, user};

/// See server/Cargo.toml for why.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("TICKSCOPE_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        // Every event escaped on its way out: no field from outside can forge a line, an ANSI
        // escape or reversed text.
        .with_writer(tickscope_server::logging::EscapingWriter::new(
            std::io::stderr,
        ))
        // No colours, even on a terminal: the escaping writer cannot tell the subscriber's own
        // ANSI escapes from injected ones, so it would print them as `\u{1b}[2m` text.
        .with_ansi(false)
        .init();
    match Cli::parse().command {
        Command::Serve(args) => serve::run(*args).await,
        Command::User { command } => user::run(command).await,
        Command::Token { command } => token::run(command).await,
        Command::MigrateData { from, to } => migrate_data::run(&from, &to).await,
    }
}
