//! `strata-replay verify`: rebuild projections from the log in a scratch directory and compare
//! them with the live ones (see `strata_projections::verify` for what is compared).
//!
//! With no server on the data directory, the live projections are loaded from its files as the
//! server loads them at start, with flushes held back so that verifying writes nothing new.
//! With a server running, the request goes through its admin socket: the server compares its
//! own snapshots with a rebuild over the log up to exactly where each snapshot is, so writes may
//! go on meanwhile.
//!
//! Exit status 0 only when everything matches; otherwise 1, with one line per difference naming
//! the table, the row counts, and the first offset of the table's log that touches a differing
//! row.

use std::path::Path;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::json;
use strata_projections::{
    control::{Database, DatabaseStatus},
    verify::{Report, Side, bucket_skip, catalog_difference, compare_tables, control_difference},
};

use strata_datadir::DataDir;

use crate::{Location, admin, open_log, progress};

#[derive(Args)]
pub struct Verify {
    #[command(flatten)]
    location: Location,
    /// Only this database: "<account>/<database>", or "<database>" in any account
    #[arg(long)]
    database: Option<String>,
    /// Only this table (with --database)
    #[arg(long, requires = "database")]
    table: Option<String>,
}

pub async fn run(verify: Verify) -> anyhow::Result<bool> {
    let data_dir = verify.location.data_dir()?;
    let report = match DataDir::try_acquire(&data_dir)? {
        Some(_lock) => offline(&data_dir, &verify).await?,
        None => {
            let result = admin(
                &data_dir,
                json!({"op": "verify", "database": verify.database, "table": verify.table}),
            )
            .await?;
            serde_json::from_value::<Report>(result).context("bad verify report from the server")?
        }
    };
    for line in report.lines() {
        println!("{line}");
    }
    Ok(report.passed())
}

async fn offline(data_dir: &Path, verify: &Verify) -> anyhow::Result<Report> {
    let log = open_log(&verify.location).await?;
    let scratch = tempfile::Builder::new()
        .prefix("strata-verify-")
        .tempdir()
        .context("cannot create a scratch directory")?;
    let live = Side::live(data_dir)?;
    let rebuilt = Side::rebuild(scratch.path())?;
    let scope = verify.database.as_deref().map(|d| match d.split_once('/') {
        Some((account, name)) => (Some(account.to_owned()), name.to_owned()),
        None => (None, d.to_owned()),
    });

    let mut report = Report::default();
    let live_control = live.control(&log).await?;
    let rebuilt_control = rebuilt.control(&log).await?;
    report.checked += 1;
    if live_control != rebuilt_control {
        report
            .problems
            .push(control_difference(&live_control, &rebuilt_control));
    }
    let databases: Vec<&Database> = rebuilt_control
        .databases
        .values()
        .filter(|d| d.status == DatabaseStatus::Ready)
        .filter(|d| {
            scope.as_ref().is_none_or(|(account, name)| {
                *name == d.name && account.as_ref().is_none_or(|a| *a == d.account)
            })
        })
        .collect();
    if scope.is_some() && databases.is_empty() {
        bail!(
            "no such database: {}",
            verify.database.as_deref().unwrap_or_default()
        );
    }
    let bar = progress::bar(databases.len() as u64, "databases");
    for database in databases {
        let name = format!("{}/{}", database.account, database.name);
        let live_catalog = live.catalog(&log, database).await?;
        let rebuilt_catalog = rebuilt.catalog(&log, database).await?;
        report.checked += 1;
        if live_catalog != rebuilt_catalog {
            report
                .problems
                .push(catalog_difference(&name, &live_catalog, &rebuilt_catalog));
        }
        for (table, def) in &rebuilt_catalog.tables {
            if verify.table.as_ref().is_some_and(|t| t != table) {
                continue;
            }
            let target = format!("{name}/{table}");
            if database.storage.is_some() {
                report.skipped.push(bucket_skip(&target));
                continue;
            }
            report.checked += 1;
            let outcome = async {
                let rebuilt_table = rebuilt.table(&log, database, def).await?;
                let live_table = live.table(&log, database, def).await?;
                compare_tables(log.as_ref(), database, def, live_table, rebuilt_table).await
            };
            match outcome.await {
                Ok(None) => report.matched.push(target),
                Ok(Some(problem)) => report.problems.push(format!("{target}: {problem}")),
                Err(error) => report.problems.push(format!("{target}: {error}")),
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(report)
}
