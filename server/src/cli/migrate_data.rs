//! `tickscope-server migrate-data`: an SQLite installation copied into a new PostgreSQL
//! database, verified table by table (the copy itself is `db::migrate_data`).

use anyhow::{Context, Result};

use crate::db::{Db, DbUrl};

pub async fn run(from: &DbUrl, to: &DbUrl) -> Result<()> {
    if !matches!(from, DbUrl::Sqlite(_)) || !matches!(to, DbUrl::Postgres(_)) {
        anyhow::bail!(
            "migrate-data copies an SQLite database (--from) into a PostgreSQL one (--to)"
        );
    }
    let source = Db::connect(from, 1)
        .await
        .with_context(|| format!("cannot open {from}"))?;
    let target = Db::connect(to, 2)
        .await
        .with_context(|| format!("cannot open {to}"))?;
    let started = std::time::Instant::now();
    let copies = crate::db::migrate_data(&source, &target)
        .await
        .with_context(|| format!("nothing was copied from {from} to {to}"))?;
    println!(
        "{:<20} {:>12}  sha256 (the same on both sides)",
        "table", "rows"
    );
    for copy in &copies {
        println!("{:<20} {:>12}  {}", copy.table, copy.rows, copy.sha256_hex);
    }
    println!(
        "copied and verified {} rows in {} tables in {:.1} s",
        copies.iter().map(|c| c.rows).sum::<u64>(),
        copies.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
