//! Projections rebuilt from the log, compared with live ones: the parts of `strata-replay
//! verify` shared by its two ways of running, in its own process over a stopped server's data
//! directory, and inside a running server (which compares its in-memory snapshots with a rebuild
//! over a [`strata_log::Prefix`] of the log ending where each snapshot ends).
//!
//! Compared: the control state (accounts, keys, databases), each database's catalog (its table
//! definitions), and each table's content (every live row, by row id and value; see
//! [`crate::table::digest`]), plus, on both sides, that every segment's indexes hold exactly its
//! rows.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use datafusion::execution::object_store::ObjectStoreUrl;
use object_store::local::LocalFileSystem;
use serde::{Deserialize, Serialize};
use strata_log::{
    CommitLog, PartitionId,
    envelope::Body,
    fence::{EpochFence, Verdict},
};

use crate::{
    Projector, StateStore,
    catalog::{CatalogProjection, CatalogState, TableDef},
    control::{ControlProjection, ControlState, Database},
    error::{Error, Result},
    table::{
        TableOptions, TableProjection, TableSnapshot, TableStore,
        digest::{TableDigest, index_problems},
    },
};

/// What a verify found: the line format `strata-replay verify` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Projections compared.
    pub checked: usize,
    /// Tables that matched ("account/database/table").
    pub matched: Vec<String>,
    /// One line per difference.
    pub problems: Vec<String>,
    /// Projections left out, and why.
    pub skipped: Vec<String>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }

    /// The lines `strata-replay verify` prints.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.matched.iter().map(|t| format!("ok {t}")).collect();
        lines.extend(self.skipped.iter().map(|s| format!("skipped {s}")));
        lines.extend(self.problems.iter().map(|p| format!("MISMATCH {p}")));
        lines.push(format!(
            "{} projections checked, {} mismatched, {} skipped",
            self.checked,
            self.problems.len(),
            self.skipped.len()
        ));
        lines
    }
}

/// A table's digest and the problems found in its indexes.
pub struct TableCheck {
    pub digest: TableDigest,
    pub problems: Vec<String>,
}

impl TableCheck {
    pub async fn of(snapshot: Arc<TableSnapshot>) -> Result<TableCheck> {
        let problems = index_problems(&snapshot);
        let digest = TableDigest::of(snapshot).await?;
        Ok(TableCheck { digest, problems })
    }
}

/// One set of projections loaded from a directory: the live ones of a stopped server's data
/// directory, or a rebuild in a scratch one.
pub struct Side {
    dir: PathBuf,
    state: StateStore,
    tables: Arc<LocalFileSystem>,
    rebuild: bool,
}

impl Side {
    /// The projections in a data directory no server is using, loaded as a server loads them
    /// (newest checkpoint, then the log's tail) but without writing anything.
    pub fn live(dir: &Path) -> Result<Side> {
        Self::open(dir, false)
    }

    /// Projections built from nothing in `dir`, an empty scratch directory.
    pub fn rebuild(dir: &Path) -> Result<Side> {
        Self::open(dir, true)
    }

    fn open(dir: &Path, rebuild: bool) -> Result<Side> {
        let tables_dir = dir.join("tables");
        std::fs::create_dir_all(&tables_dir)
            .map_err(|e| Error::Refused(format!("cannot create {}: {e}", tables_dir.display())))?;
        Ok(Side {
            dir: dir.to_owned(),
            state: StateStore::open(dir.join("state"))?,
            tables: Arc::new(LocalFileSystem::new_with_prefix(&tables_dir)?),
            rebuild,
        })
    }

    /// The control state caught up with `log`.
    pub async fn control(&self, log: &Arc<dyn CommitLog>) -> Result<ControlState> {
        let projection = ControlProjection::open(&self.state)?;
        let projector = Projector::start(log.clone(), projection).await?;
        Ok((*projector.snapshot()).clone())
    }

    /// The catalog of `database` caught up with `log`.
    pub async fn catalog(
        &self,
        log: &Arc<dyn CommitLog>,
        database: &Database,
    ) -> Result<CatalogState> {
        let projection =
            CatalogProjection::open(&self.state, &database.account, &database.name, &database.id)?;
        let projector = Projector::start(log.clone(), projection).await?;
        Ok((*projector.snapshot()).clone())
    }

    /// The table's projection caught up with `log`: its digest and its index problems.
    pub async fn table(
        &self,
        log: &Arc<dyn CommitLog>,
        database: &Database,
        def: &Arc<TableDef>,
    ) -> Result<TableCheck> {
        let store = TableStore {
            store: self.tables.clone(),
            url: ObjectStoreUrl::parse(format!("strata://{}", database.id))?,
            prefix: object_store::path::Path::from(format!("{}/{}", database.id, def.id)),
            index_dir: self.dir.join("indexes").join(&database.id).join(&def.id),
            local: Some(self.tables.clone()),
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
        let check = TableCheck::of(handle.snapshot()).await;
        handle.close().await;
        check
    }
}

/// `None` when the live table matches its rebuild; otherwise what differs. An error when the
/// rebuild itself is inconsistent.
pub async fn compare_tables(
    log: &dyn CommitLog,
    database: &Database,
    def: &TableDef,
    live: TableCheck,
    rebuilt: TableCheck,
) -> Result<Option<String>> {
    if !rebuilt.problems.is_empty() {
        return Err(Error::Refused(format!(
            "the rebuild itself is inconsistent: {}",
            rebuilt.problems.join("; ")
        )));
    }
    let mut problems = live.problems;
    let differing = live.digest.differing(&rebuilt.digest);
    if let Some(&first_row) = differing.first() {
        let partition = PartitionId::table(&database.account, &database.name, &def.name);
        let offset = first_offset_touching(log, &partition, &def.id, &differing).await?;
        problems.insert(
            0,
            format!(
                "live {} rows, rebuilt {}; {} (first row id {first_row}); first offset {}",
                live.digest.rows.len(),
                rebuilt.digest.rows.len(),
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
) -> Result<Option<u64>> {
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
                Some(Body::RowsAppended(b)) if b.table_id == table_id => {
                    wanted
                        .range(b.first_row_id..b.first_row_id + b.row_count)
                        .next()
                        .is_some()
                        || b.tombstoned_row_ids.iter().any(|id| wanted.contains(id))
                }
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

/// What differs between a live control state and its rebuild.
pub fn control_difference(live: &ControlState, rebuilt: &ControlState) -> String {
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
    if live.users != rebuilt.users {
        parts.push("users");
    }
    format!(
        "control state: the live {} differ from the log's",
        parts.join(", ")
    )
}

/// What differs between a live catalog and its rebuild.
pub fn catalog_difference(name: &str, live: &CatalogState, rebuilt: &CatalogState) -> String {
    if live.tables != rebuilt.tables {
        return format!(
            "{name}: the live catalog has tables {:?}, the log says {:?}",
            live.tables.keys().collect::<Vec<_>>(),
            rebuilt.tables.keys().collect::<Vec<_>>()
        );
    }
    format!(
        "{name}: the live catalog has aliases {:?}, the log says {:?}",
        live.aliases, rebuilt.aliases
    )
}

/// The skip line of a table whose segments are in the database's own bucket.
pub fn bucket_skip(target: &str) -> String {
    format!("{target}: its segments are in the database's own bucket, which verify does not reach")
}
