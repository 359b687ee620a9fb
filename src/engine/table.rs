//! Rows of a table: append, update and delete through the table's leader (one write at a time,
//! refused as busy when another is in flight), and read-only SQL across a database's tables.
//!
//! The leader resolves everything before it appends: the row ids an append assigns, and the live
//! row ids an update or delete predicate matches (evaluated with DataFusion over the leader's
//! snapshot, which holds every write before it). Replay never evaluates a predicate.

use std::{sync::Arc, time::Duration};

use arrow::array::RecordBatch;
use serde::Serialize;
use strata_log::{
    PartitionId,
    envelope::Body,
    event::{RowsAppended, RowsDeleted, RowsUpdated},
};
use strata_projections::{
    Projector,
    catalog::TableDef,
    table::{TableHandle, TableOptions, TableProjection, TableSnapshot, TableStore, rows},
};

use super::{
    DatabaseRuntime, Engine, Origin, Principal,
    leader::{Leader, Permit},
    quota::Counts,
};
use crate::{
    error::{Error, Result},
    query::{self, QueryResult},
    rows::RowsBody,
};

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

/// The answer of update and delete.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RowCount {
    /// Rows the predicate matched.
    pub matched: u64,
    /// Rows this request tombstoned.
    pub n_tombstoned: u64,
    /// Row ids the predicate names explicitly that do not exist.
    pub n_not_found: u64,
}

/// How often each active table checks whether its memtable is due a flush.
const MAINTENANCE_EVERY: Duration = Duration::from_secs(1);

impl Engine {
    fn table_options(&self) -> TableOptions {
        let t = &self.config.tables;
        TableOptions {
            flush_rows: t.flush_rows,
            flush_bytes: t.flush_bytes,
            flush_age: Duration::from_millis(t.flush_age_ms),
            memtable_batches: t.memtable_batches,
            compact_min_segments: t.compact_min_segments,
            small_segment_rows: t.small_segment_rows,
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
        let current = database
            .catalog
            .snapshot()
            .tables
            .get(&def.name)
            .filter(|t| t.id == def.id)
            .cloned()
            .unwrap_or_else(|| def.clone());
        let cell = {
            let mut tables = database.tables.lock();
            let cell = tables.entry(def.id.clone()).or_default();
            // Columns that grew, or fields a mapping declared since: a runtime with the new
            // definition.
            if let Some(old) = cell.get().filter(|old| old.def != current) {
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
                    old.handle().close().await;
                    tracing::debug!(table = %def.name, "table reopened with its grown columns");
                }
                self.activate_table(database, &current).await
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
        };
        let (projection, handle) =
            TableProjection::open(def.clone(), partition, store, self.table_options()).await?;
        let projector = Projector::start(self.log.clone(), projection).await?;
        let maintenance = {
            let handle = handle.clone();
            let table = def.name.clone();
            let refresher = projector.refresher();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(MAINTENANCE_EVERY);
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

    /// The active database and the definition of one of its tables.
    pub(super) async fn table_of(
        &self,
        principal: &Principal,
        database: &str,
        table: &str,
    ) -> Result<(super::DatabaseGuard, Arc<TableDef>)> {
        let database = self.ready_database(principal, database)?;
        crate::names::check_table(table)?;
        let runtime = self.runtime(&database).await?;
        let def = runtime
            .catalog
            .snapshot()
            .tables
            .get(table)
            .cloned()
            .ok_or_else(|| Error::TableNotFound(table.to_owned()))?;
        Ok((runtime, def))
    }

    /// The write permit of table `def` (`runtime` its runtime in `database`), once the table is
    /// known to be still there: how every write to a table begins.
    async fn table_permit<'a>(
        &self,
        database: &DatabaseRuntime,
        def: &TableDef,
        runtime: &'a TableRuntime,
    ) -> Result<Permit<'a, Arc<TableSnapshot>>> {
        let permit = runtime
            .leader
            .try_permit(self.write_wait())
            .await?
            .ok_or_else(|| Self::table_busy(&def.name))?;
        self.table_still_there(database, def, runtime)?;
        Ok(permit)
    }

    fn table_busy(table: &str) -> Error {
        Error::Busy(format!(
            "another write to table {table:?} is in flight; retry after the Retry-After interval, or send more rows per request"
        ))
    }

    /// After taking a table's permit: the table may have been dropped while the request waited,
    /// or its columns grown (the runtime whose permit it holds is retired).
    fn table_still_there(
        &self,
        database: &DatabaseRuntime,
        def: &TableDef,
        runtime: &TableRuntime,
    ) -> Result<()> {
        self.still_ready(database)?;
        match database.catalog.snapshot().tables.get(&def.name) {
            Some(current) if current.id == def.id => {}
            _ => return Err(Error::TableNotFound(def.name.clone())),
        }
        if runtime.retired() {
            return Err(Error::Unavailable(format!(
                "the columns of table {:?} changed while this write waited; retry it",
                def.name
            )));
        }
        Ok(())
    }

    /// Appends rows; returns them with the `_row_id`s they were given.
    pub async fn append(
        &self,
        principal: &Principal,
        database: &str,
        table: &str,
        rows: RowsBody,
        origin: &Origin,
    ) -> Result<RecordBatch> {
        let (database, def) = self.table_of(principal, database, table).await?;
        let batch = rows.into_batch(&rows::data_schema(&def))?;
        let vectors =
            strata_projections::table::count_vectors(&batch, def.vector_column.as_deref());
        let add = Counts {
            rows: batch.num_rows() as u64,
            vectors,
        };
        let _reservation = match add.rows {
            0 => None,
            _ => Some(self.reserve(&database.account, add).await?),
        };
        let runtime = self.table_runtime(&database, &def).await?;
        let mut permit = self.table_permit(&database, &def, &runtime).await?;
        let first = permit.snapshot().next_row_id;
        let count = batch.num_rows() as u64;
        let ids: Vec<u64> = (first..first + count).collect();
        let with_ids = rows::with_row_ids(&rows::table_schema(&def), &batch, ids)
            .map_err(Error::Projection)?;
        if count == 0 {
            return Ok(with_ids);
        }
        let body = Body::RowsAppended(RowsAppended {
            table_id: def.id.clone(),
            first_row_id: first,
            row_count: count,
            arrow_ipc: rows::encode_ipc(&batch)?.into(),
            vector_count: vectors,
            ..Default::default()
        });
        let after = permit.write(body, origin).await?;
        self.record_usage(&database.account, &database.id, &def.id, Counts::of(&after));
        Ok(with_ids)
    }

    /// Tombstones the rows `predicate` matches.
    pub async fn delete(
        &self,
        principal: &Principal,
        database: &str,
        table: &str,
        predicate: &str,
        origin: &Origin,
    ) -> Result<RowCount> {
        let (database, def) = self.table_of(principal, database, table).await?;
        let runtime = self.table_runtime(&database, &def).await?;
        let mut permit = self.table_permit(&database, &def, &runtime).await?;
        let snapshot = permit.snapshot();
        let ctx = query::session(&self.queries);
        let matched = query::matching(&ctx, snapshot.clone(), predicate).await?;
        let count = row_count(&snapshot, &matched);
        if !matched.ids.is_empty() {
            let body = Body::RowsDeleted(RowsDeleted {
                table_id: def.id.clone(),
                row_ids: matched.ids,
                vector_count: matched.vectors,
            });
            let after = permit.write(body, origin).await?;
            self.record_usage(&database.account, &database.id, &def.id, Counts::of(&after));
        }
        Ok(count)
    }

    /// Replaces the rows `predicate` matches, 1:1 in row-id order, by `rows`; each replacement
    /// keeps the row id of the row it replaces.
    pub async fn update(
        &self,
        principal: &Principal,
        database: &str,
        table: &str,
        predicate: &str,
        rows: RowsBody,
        origin: &Origin,
    ) -> Result<RowCount> {
        let (database, def) = self.table_of(principal, database, table).await?;
        let batch = rows.into_batch(&rows::data_schema(&def))?;
        let vectors_added =
            strata_projections::table::count_vectors(&batch, def.vector_column.as_deref());
        let runtime = self.table_runtime(&database, &def).await?;
        let mut permit = self.table_permit(&database, &def, &runtime).await?;
        let snapshot = permit.snapshot();
        let ctx = query::session(&self.queries);
        let matched = query::matching(&ctx, snapshot.clone(), predicate).await?;
        if matched.ids.len() != batch.num_rows() {
            return Err(Error::BadRequest(format!(
                "the predicate matched {} rows but {} replacement rows were given; they must be 1:1, in row-id order",
                matched.ids.len(),
                batch.num_rows()
            )));
        }
        // Replacing rows may add vectors (never rows): that part of the update needs room.
        let add = Counts {
            rows: 0,
            vectors: vectors_added.saturating_sub(matched.vectors),
        };
        let _reservation = match add.vectors {
            0 => None,
            _ => Some(self.reserve(&database.account, add).await?),
        };
        let count = row_count(&snapshot, &matched);
        if !matched.ids.is_empty() {
            let body = Body::RowsUpdated(RowsUpdated {
                table_id: def.id.clone(),
                row_ids: matched.ids,
                arrow_ipc: rows::encode_ipc(&batch)?.into(),
                vectors_removed: matched.vectors,
                vectors_added,
            });
            let after = permit.write(body, origin).await?;
            self.record_usage(&database.account, &database.id, &def.id, Counts::of(&after));
        }
        Ok(count)
    }

    /// Runs one read-only query across the database's tables.
    pub async fn query_sql(
        &self,
        principal: &Principal,
        database: &str,
        sql: &str,
    ) -> Result<QueryResult> {
        let database = self.ready_database(principal, database)?;
        let runtime = self.runtime(&database).await?;
        let ctx = query::session(&self.queries);
        let statement = query::parse(&ctx, sql)?;
        let catalog = runtime.catalog.snapshot();
        for name in query::table_names(&ctx, &statement)? {
            // An unknown name is left for the planner, which says so (400).
            if let Some(def) = catalog.tables.get(&name) {
                let table = self.table_runtime(&runtime, def).await?;
                ctx.register_table(
                    name.as_str(),
                    Arc::new(strata_projections::table::TableScan::new(table.snapshot())),
                )
                .map_err(query::classify)?;
            }
        }
        query::run(&ctx, statement).await
    }
}

fn row_count(snapshot: &TableSnapshot, matched: &query::Matched) -> RowCount {
    let n = matched.ids.len() as u64;
    RowCount {
        matched: n,
        n_tombstoned: n,
        n_not_found: matched
            .named
            .iter()
            .filter(|id| !snapshot.is_live(**id))
            .count() as u64,
    }
}
