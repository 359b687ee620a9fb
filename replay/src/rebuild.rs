//! `strata-replay rebuild`: replace one table's projections (segments, manifests, indexes) by a
//! rebuild from the log, to recover from lost or damaged files.
//!
//! The rebuild is written beside the table's directories (`<table id>.rebuild`) and swapped in
//! only once it is complete, so an interrupted rebuild leaves the old files in place. The server
//! must be stopped: it reads and writes these files, so rebuild refuses to run beside it.

use std::{path::Path, sync::Arc};

use anyhow::{Context, bail};
use clap::Args;
use datafusion::execution::object_store::ObjectStoreUrl;
use object_store::local::LocalFileSystem;
use strata_log::PartitionId;
use strata_projections::{
    Projector, StateStore,
    catalog::CatalogProjection,
    control::ControlProjection,
    table::{TableOptions, TableProjection, TableStore},
};

use strata_datadir::DataDir;

use crate::{Location, open_log, progress};

#[derive(Args)]
pub struct Rebuild {
    #[command(flatten)]
    location: Location,
    /// The table's database: "<account>/<database>", or "<database>" when one account has it
    #[arg(long)]
    database: String,
    /// The table to rebuild
    #[arg(long)]
    table: String,
}

pub async fn run(rebuild: Rebuild) -> anyhow::Result<()> {
    let data_dir = rebuild.location.data_dir()?;
    let Some(_lock) = DataDir::try_acquire(&data_dir)? else {
        bail!(
            "a strata server is running on {}: rebuild replaces files the server has open, so stop it first (verify and restore work beside a running server)",
            data_dir.display()
        );
    };
    let log = open_log(&rebuild.location).await?;
    let state = StateStore::open(data_dir.join("state"))?;
    let control = Projector::start(log.clone(), ControlProjection::open(&state)?).await?;
    let control = control.snapshot();
    let database = control.find_ready(&rebuild.database)?.clone();
    if database.storage.is_some() {
        bail!(
            "{}/{}: its segments are in the database's own bucket, which rebuild does not reach",
            database.account,
            database.name
        );
    }
    let catalog = CatalogProjection::open(&state, &database.account, &database.name, &database.id)?;
    let catalog = Projector::start(log.clone(), catalog).await?.snapshot();
    let Some(def) = catalog.tables.get(&rebuild.table).cloned() else {
        bail!(
            "no such table: {}/{}/{}",
            database.account,
            database.name,
            rebuild.table
        );
    };
    let target = format!("{}/{}/{}", database.account, database.name, def.name);

    let tables = data_dir.join("tables");
    let table_dir = tables.join(&database.id).join(&def.id);
    let index_dir = data_dir.join("indexes").join(&database.id).join(&def.id);
    let staging = format!("{}.rebuild", def.id);
    let staged_tables = tables.join(&database.id).join(&staging);
    let staged_indexes = data_dir.join("indexes").join(&database.id).join(&staging);
    for dir in [&staged_tables, &staged_indexes] {
        remove_dir(dir)?;
    }
    std::fs::create_dir_all(&tables)
        .with_context(|| format!("cannot create {}", tables.display()))?;
    let local = Arc::new(LocalFileSystem::new_with_prefix(&tables)?);
    let store = TableStore {
        store: local.clone(),
        url: ObjectStoreUrl::parse(format!("strata://{}", database.id))?,
        prefix: object_store::path::Path::from(format!("{}/{staging}", database.id)),
        index_dir: staged_indexes.clone(),
        local: Some(local),
    };
    let partition = PartitionId::table(&database.account, &database.name, &def.name);
    let events = log.high_water_mark(&partition).await?;
    let bar = progress::bar(events, "events");
    let (projection, handle) =
        TableProjection::open(def.clone(), partition, store, TableOptions::default()).await?;
    let projector = Projector::start(log.clone(), projection).await?;
    bar.set_position(projector.checkpoint().next_offset);
    handle.flush().await?;
    handle.close().await;
    drop(projector);
    bar.finish_and_clear();
    let rows = handle.snapshot().live_rows;

    // Swap: the old files go only once the new ones are complete.
    remove_dir(&table_dir)?;
    remove_dir(&index_dir)?;
    if staged_tables.exists() {
        std::fs::rename(&staged_tables, &table_dir)
            .with_context(|| format!("cannot move {} into place", staged_tables.display()))?;
    }
    if staged_indexes.exists() {
        std::fs::rename(&staged_indexes, &index_dir)
            .with_context(|| format!("cannot move {} into place", staged_indexes.display()))?;
    }
    println!("rebuilt {target}: {rows} rows from {events} events of the log");
    Ok(())
}

fn remove_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error).with_context(|| format!("cannot remove {}", dir.display())),
    }
}
