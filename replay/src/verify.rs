//! `strata-replay verify`: rebuild projections from the log in a scratch directory and compare
//! them with the live ones.
//!
//! Compared: the control state (accounts, keys, databases), each database's catalog (its table
//! definitions), and each table's content (every live row, by row id and value; see
//! `strata_projections::table::digest`), plus, on both sides, that every segment's indexes hold
//! exactly its rows. The live projections are loaded as the server loads them at start (newest
//! checkpoint, then the log's tail), with flushes held back so that verifying writes nothing new.
//! The server must be stopped: verify reads the files the server changes.
//!
//! Exit status 0 only when everything matches; otherwise 1, with one line per difference naming
//! the table, the row counts, and the first offset of the table's log that touches a differing
//! row.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::{Context, bail};
use clap::Args;
use datafusion::execution::object_store::ObjectStoreUrl;
use object_store::{ObjectStore, local::LocalFileSystem};
use strata_log::{
    CommitLog, PartitionId,
    envelope::Body,
    fence::{EpochFence, Verdict},
};
use strata_projections::{
    Projector, StateStore,
    catalog::{CatalogProjection, CatalogState, TableDef},
    control::{ControlProjection, ControlState, Database, DatabaseStatus},
    table::{
        TableOptions, TableProjection, TableStore,
        digest::{TableDigest, index_problems},
    },
};

use crate::{Location, open_log, progress};

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

/// What verify found.
#[derive(Default)]
struct Report {
    checked: usize,
    problems: Vec<String>,
    skipped: Vec<String>,
}

/// Holds `<data_dir>/LOCK`, as the server does, for as long as verify runs.
pub(crate) fn lock_data_dir(data_dir: &Path) -> anyhow::Result<std::fs::File> {
    let path = data_dir.join("LOCK");
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "a strata server is running on {}; stop it first",
            data_dir.display()
        ),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(error).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

pub async fn run(verify: Verify) -> anyhow::Result<bool> {
    let data_dir = verify.location.data_dir()?;
    let _lock = lock_data_dir(&data_dir)?;
    let log: Arc<dyn CommitLog> = Arc::new(open_log(&data_dir)?);
    let scratch = tempfile::Builder::new()
        .prefix("strata-verify-")
        .tempdir()
        .context("cannot create a scratch directory")?;
    let live = Side::open(&data_dir, false)?;
    let rebuilt = Side::open(scratch.path(), true)?;
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
        bail!("no such database: {}", verify.database.unwrap_or_default());
    }
    let bar = progress::bar(databases.len() as u64, "databases");
    for database in databases {
        let name = format!("{}/{}", database.account, database.name);
        let live_catalog = live.catalog(&log, database).await?;
        let rebuilt_catalog = rebuilt.catalog(&log, database).await?;
        report.checked += 1;
        if live_catalog != rebuilt_catalog {
            report.problems.push(format!(
                "{name}: the live catalog has tables {:?}, the log says {:?}",
                live_catalog.tables.keys().collect::<Vec<_>>(),
                rebuilt_catalog.tables.keys().collect::<Vec<_>>()
            ));
        }
        for (table, def) in &rebuilt_catalog.tables {
            if verify.table.as_ref().is_some_and(|t| t != table) {
                continue;
            }
            let target = format!("{name}/{table}");
            if database.storage.is_some() {
                report.skipped.push(format!(
                    "{target}: its segments are in the database's own bucket, which verify does not reach"
                ));
                continue;
            }
            report.checked += 1;
            match compare_table(&log, &live, &rebuilt, database, def).await {
                Ok(None) => println!("ok {target}"),
                Ok(Some(problem)) => report.problems.push(format!("{target}: {problem}")),
                Err(error) => report.problems.push(format!(
                    "{target}: cannot load the live projection: {error:#}"
                )),
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    for skipped in &report.skipped {
        println!("skipped {skipped}");
    }
    for problem in &report.problems {
        println!("MISMATCH {problem}");
    }
    println!(
        "{} projections checked, {} mismatched, {} skipped",
        report.checked,
        report.problems.len(),
        report.skipped.len()
    );
    Ok(report.problems.is_empty())
}

/// One set of projections: the live ones of the data directory, or a rebuild in a scratch one.
struct Side {
    dir: PathBuf,
    state: StateStore,
    tables: Arc<dyn ObjectStore>,
    rebuild: bool,
}

impl Side {
    fn open(dir: &Path, rebuild: bool) -> anyhow::Result<Side> {
        let tables_dir = dir.join("tables");
        std::fs::create_dir_all(&tables_dir)
            .with_context(|| format!("cannot create {}", tables_dir.display()))?;
        Ok(Side {
            dir: dir.to_owned(),
            state: StateStore::open(dir.join("state"))?,
            tables: Arc::new(LocalFileSystem::new_with_prefix(&tables_dir)?),
            rebuild,
        })
    }

    async fn control(&self, log: &Arc<dyn CommitLog>) -> anyhow::Result<ControlState> {
        let projection = ControlProjection::open(&self.state)?;
        let projector = Projector::start(log.clone(), projection).await?;
        Ok((*projector.snapshot()).clone())
    }

    async fn catalog(
        &self,
        log: &Arc<dyn CommitLog>,
        database: &Database,
    ) -> anyhow::Result<CatalogState> {
        let projection =
            CatalogProjection::open(&self.state, &database.account, &database.name, &database.id)?;
        let projector = Projector::start(log.clone(), projection).await?;
        Ok((*projector.snapshot()).clone())
    }

    /// The table's projection caught up with the log: its digest and its index problems.
    async fn table(
        &self,
        log: &Arc<dyn CommitLog>,
        database: &Database,
        def: &Arc<TableDef>,
    ) -> anyhow::Result<(TableDigest, Vec<String>)> {
        let store = TableStore {
            store: self.tables.clone(),
            url: ObjectStoreUrl::parse(format!("strata://{}", database.id))?,
            prefix: object_store::path::Path::from(format!("{}/{}", database.id, def.id)),
            index_dir: self.dir.join("indexes").join(&database.id).join(&def.id),
        };
        let options = match self.rebuild {
            true => TableOptions::default(),
            // Loading must not write: no flush while catching up.
            false => TableOptions {
                flush_rows: usize::MAX,
                flush_bytes: usize::MAX,
                ..TableOptions::default()
            },
        };
        let partition = PartitionId::table(&database.account, &database.name, &def.name);
        let (projection, handle) =
            TableProjection::open(def.clone(), partition, store, options).await?;
        let _projector = Projector::start(log.clone(), projection).await?;
        if self.rebuild {
            // Segments and their indexes built from the log, as a flush builds them.
            handle.flush().await?;
        }
        let snapshot = handle.snapshot();
        let problems = index_problems(&snapshot);
        let digest = TableDigest::of(snapshot).await?;
        handle.close().await;
        Ok((digest, problems))
    }
}

/// `None` when the live table matches its rebuild; otherwise what differs.
async fn compare_table(
    log: &Arc<dyn CommitLog>,
    live: &Side,
    rebuilt: &Side,
    database: &Database,
    def: &Arc<TableDef>,
) -> anyhow::Result<Option<String>> {
    let (rebuilt_digest, rebuilt_problems) = rebuilt.table(log, database, def).await?;
    if !rebuilt_problems.is_empty() {
        bail!(
            "the rebuild itself is inconsistent: {}",
            rebuilt_problems.join("; ")
        );
    }
    let (live_digest, live_problems) = live.table(log, database, def).await?;
    let mut problems = live_problems;
    let differing = live_digest.differing(&rebuilt_digest);
    if let Some(&first_row) = differing.first() {
        let partition = PartitionId::table(&database.account, &database.name, &def.name);
        let offset = first_offset_touching(log.as_ref(), &partition, &def.id, &differing).await?;
        problems.insert(
            0,
            format!(
                "live {} rows, rebuilt {}; {} (first row id {first_row}); first offset {}",
                live_digest.rows.len(),
                rebuilt_digest.rows.len(),
                match differing.len() {
                    1 => "1 row differs".to_owned(),
                    n => format!("{n} rows differ"),
                },
                offset.map_or_else(|| "unknown".to_owned(), |o| o.to_string())
            ),
        );
    }
    Ok((!problems.is_empty()).then(|| problems.join("; ")))
}

/// The first admitted event of the table that writes one of `rows`.
async fn first_offset_touching(
    log: &dyn CommitLog,
    partition: &PartitionId,
    table_id: &str,
    rows: &[u64],
) -> anyhow::Result<Option<u64>> {
    let wanted: std::collections::BTreeSet<u64> = rows.iter().copied().collect();
    let mut fence = EpochFence::default();
    let mut next = 0;
    loop {
        let events = log.read(partition, next, 1024).await?;
        let Some(last) = events.last() else {
            return Ok(None);
        };
        next = last.offset + 1;
        for event in &events {
            if fence.judge(event) != Verdict::Admit {
                continue;
            }
            let touches = match &event.body {
                Some(Body::RowsAppended(b)) if b.table_id == table_id => wanted
                    .range(b.first_row_id..b.first_row_id + b.row_count)
                    .next()
                    .is_some(),
                Some(Body::RowsDeleted(b)) if b.table_id == table_id => {
                    b.row_ids.iter().any(|id| wanted.contains(id))
                }
                Some(Body::RowsUpdated(b)) if b.table_id == table_id => {
                    b.row_ids.iter().any(|id| wanted.contains(id))
                }
                _ => false,
            };
            if touches {
                return Ok(Some(event.offset));
            }
        }
    }
}

fn control_difference(live: &ControlState, rebuilt: &ControlState) -> String {
    let mut parts = Vec::new();
    if live.accounts != rebuilt.accounts {
        parts.push("accounts");
    }
    if live.keys != rebuilt.keys {
        parts.push("api keys");
    }
    if live.databases != rebuilt.databases {
        parts.push("databases");
    }
    format!(
        "control state: the live {} differ from the log's",
        parts.join(", ")
    )
}
