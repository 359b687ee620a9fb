//! The tables of active databases, as every API uses them: a table's runtime (its leader,
//! projection and maintenance), activated on first use and replaced when its definition grows;
//! how a catalog change begins (the permit, then the database still there); and what becomes of
//! a dropped table's files.

use std::{sync::Arc, sync::atomic::Ordering, time::Duration};

use strata_log::PartitionId;
use strata_projections::{
    Projector,
    catalog::{CatalogState, TableDef},
    control::DatabaseStatus,
    table::{TableHandle, TableOptions, TableProjection, TableSnapshot, TableStore},
};

use super::{
    DatabaseRuntime, Engine,
    leader::{Leader, Permit},
};
use crate::error::{Error, Result};

/// The live parts of one active table.
pub struct TableRuntime {
    pub def: Arc<TableDef>,
    pub(super) leader: Leader<Arc<TableSnapshot>>,
    handle: TableHandle,
    maintenance: tokio::task::JoinHandle<()>,
}

impl Drop for TableRuntime {
    fn drop(&mut self) {
        self.maintenance.abort();
    }
}

impl TableRuntime {
    pub fn snapshot(&self) -> Arc<TableSnapshot> {
        self.leader.snapshot()
    }

    pub fn handle(&self) -> &TableHandle {
        &self.handle
    }

    /// Whether a runtime opened with a newer definition (the table's columns grew) replaced
    /// this one: its leader hands out no more permits, and a write that held one retries.
    pub(super) fn retired(&self) -> bool {
        self.leader.is_retired()
    }

    /// The table's partition and the next offset its projection will apply.
    pub(super) fn progress(&self) -> (PartitionId, u64) {
        (
            self.leader.partition().clone(),
            self.leader.projector().checkpoint().next_offset,
        )
    }
}

/// How long a table's new runtime waits for the write in flight of the runtime it replaces (a
/// write holds its permit for one append and its application: well under a second).
const DRAIN_WAIT: Duration = Duration::from_secs(10);

impl Engine {
    /// After taking a catalog permit: the database may have been deleted while the request
    /// waited.
    pub(super) fn still_ready(&self, runtime: &DatabaseRuntime) -> Result<()> {
        let current = self.control_state();
        let ready = !runtime.closed.load(Ordering::Acquire)
            && current
                .database(&runtime.account, &runtime.name)
                .is_some_and(|d| d.id == runtime.id && d.status == DatabaseStatus::Ready);
        match ready {
            true => Ok(()),
            false => Err(Error::DatabaseNotFound(runtime.name.clone())),
        }
    }

    /// The write permit of `runtime`'s catalog, waiting at most `wait` for a change in flight
    /// (`busy` says why it is refused after that), once the database is known to be still
    /// there: how every catalog change begins.
    pub(super) async fn catalog_permit<'a>(
        &self,
        runtime: &'a DatabaseRuntime,
        wait: std::time::Duration,
        busy: impl FnOnce() -> Error,
    ) -> Result<Permit<'a, Arc<CatalogState>>> {
        let permit = runtime.catalog.try_permit(wait).await?.ok_or_else(busy)?;
        self.still_ready(runtime)?;
        Ok(permit)
    }

    /// After a table was dropped: its usage is forgotten, and its files go in the background
    /// (the log keeps its history).
    pub(super) fn release_table(&self, runtime: &DatabaseRuntime, table: &TableDef) {
        self.forget_table_usage(&runtime.account, &table.id);
        let active = runtime.take_table(&table.id);
        let store = runtime.store.clone();
        let prefix = runtime.root.clone().join(table.id.as_str()).to_string();
        let indexes = self.index_dir(&runtime.id, &table.id);
        tokio::spawn(async move {
            if let Some(active) = active {
                active.handle().close().await;
            }
            if let Err(error) = super::remove_files(&store, &prefix).await {
                tracing::warn!(%prefix, %error, "could not delete a dropped table's files");
            }
            super::remove_local_dir(&indexes).await;
        });
    }

    fn table_options(&self) -> TableOptions {
        let t = &self.config.tables;
        TableOptions {
            flush_rows: t.flush_rows,
            flush_bytes: t.flush_bytes,
            flush_age: Duration::from_millis(t.flush_age_ms),
            memtable_batches: t.memtable_batches,
            index_rows: t.index_rows,
            compact_min_segments: t.compact_min_segments,
            small_segment_rows: t.small_segment_rows,
            page_bytes: t.segment_page_bytes,
            vectors: strata_projections::table::vector::VectorOptions {
                graph_min_rows: t.vector_graph_min_rows,
                max_connections: t.hnsw_m,
                ef_construction: t.hnsw_ef_construction,
                ef_search: t.hnsw_ef_search,
            },
        }
    }

    /// The runtime of a table of an active database, activating it on first use.
    ///
    /// A runtime opened with an older definition of the table (a dataset whose columns have
    /// grown since) is retired and replaced: the new one opens, after the old one's flushes
    /// and compactions end, with the catalog's current definition, and reads everything
    /// written before in its schema.
    pub(super) async fn table_runtime(
        &self,
        database: &DatabaseRuntime,
        def: &Arc<TableDef>,
    ) -> Result<Arc<TableRuntime>> {
        // The catalog's definition now. It is read again under the lock and when the runtime
        // opens, never taken from before: the catalog only moves forward, so a caller that read
        // it a moment ago (and found a runtime newer than its read) must not replace that
        // runtime with an older one. A projection opened with an older definition than the rows
        // already written with the newer one would stop on them.
        let current = || {
            database
                .catalog
                .snapshot()
                .tables
                .get(&def.name)
                .filter(|t| t.id == def.id)
                .cloned()
                .unwrap_or_else(|| def.clone())
        };
        let cell = {
            let mut tables = database.tables.lock();
            let cell = tables.entry(def.id.clone()).or_default();
            // Columns that grew, or fields a mapping declared since: a runtime with the new
            // definition.
            let now = current();
            if let Some(old) = cell.get().filter(|old| old.def != now) {
                old.leader.retire();
                database.retiring.lock().insert(def.id.clone(), old.clone());
                *cell = Arc::default();
            }
            cell.clone()
        };
        let runtime = cell
            .get_or_try_init(|| async {
                let old = database.retiring.lock().remove(&def.id);
                if let Some(old) = old {
                    if !old.leader.drain(DRAIN_WAIT).await {
                        tracing::warn!(table = %def.name, "a write of the replaced runtime outlasted the wait for it");
                    }
                    old.handle().close().await;
                    tracing::debug!(table = %def.name, "table reopened with its grown columns");
                }
                self.activate_table(database, &current()).await
            })
            .await?
            .clone();
        Ok(runtime)
    }

    async fn activate_table(
        &self,
        database: &DatabaseRuntime,
        def: &Arc<TableDef>,
    ) -> Result<Arc<TableRuntime>> {
        let partition = PartitionId::table(&database.account, &database.name, &def.name);
        let store = TableStore {
            store: database.store.clone(),
            url: database.url.clone(),
            prefix: database.root.clone().join(def.id.as_str()),
            index_dir: self.index_dir(&database.id, &def.id),
            local: database.local.clone(),
        };
        let options = self.table_options();
        // How often the table checks whether its memtable is due a flush.
        let every = options.maintenance_every();
        let (projection, handle) =
            TableProjection::open(def.clone(), partition, store, options).await?;
        let projector = Projector::start(self.log.clone(), projection).await?;
        let maintenance = {
            let handle = handle.clone();
            let table = def.name.clone();
            let refresher = projector.refresher();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(every);
                loop {
                    every.tick().await;
                    if let Err(error) = handle.maintain().await {
                        tracing::warn!(%table, %error, "table maintenance failed");
                    }
                    // A flush or compaction since the last event published a new layout:
                    // readers get it now, not at the next write, and the segments it replaced
                    // go once their last reader does.
                    if !Arc::ptr_eq(&refresher.published(), &handle.snapshot()) {
                        refresher.refresh(|| handle.snapshot());
                    }
                }
            })
        };
        tracing::debug!(database = %database.name, table = %def.name, "table activated");
        Ok(Arc::new(TableRuntime {
            def: def.clone(),
            leader: Leader::new(
                self.log.clone(),
                projector,
                self.config.cluster.node_id.clone(),
                Duration::from_millis(self.config.debug.hold_write_permit_ms),
                self.metrics.clone(),
            ),
            handle,
            maintenance,
        }))
    }

    /// The local directory of a table's segment indexes: `<data_dir>/indexes/<database id>/<table id>`
    /// (of every table of a database when `table` is empty).
    pub(super) fn index_dir(&self, database_id: &str, table_id: &str) -> std::path::PathBuf {
        let dir = self.config.data_dir.join("indexes").join(database_id);
        if table_id.is_empty() {
            dir
        } else {
            dir.join(table_id)
        }
    }
}
