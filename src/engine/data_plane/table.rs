//! Rows of a table: append, update and delete through the table's leader (one write at a time,
//! refused as busy when another is in flight), and read-only SQL across a database's tables.
//!
//! The leader resolves everything before it appends: the row ids an append assigns, and the live
//! row ids an update or delete predicate matches (evaluated with DataFusion over the leader's
//! snapshot, which holds every write before it). Replay never evaluates a predicate.

use std::sync::Arc;

use arrow::array::RecordBatch;
use serde::Serialize;
use strata_log::{
    envelope::Body,
    event::{RowsAppended, RowsDeleted, RowsUpdated},
};
use strata_projections::{
    catalog::TableDef,
    table::{TableSnapshot, rows},
};

use crate::engine::{
    DatabaseRuntime, Engine, Origin, Principal, TableRuntime, leader::Permit, quota::Counts,
};
use crate::{
    error::{Error, Result},
    query::{self, QueryResult},
    rows::RowsBody,
};

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

impl Engine {
    /// The active database and the definition of one of its tables.
    pub(in crate::engine) async fn table_of(
        &self,
        principal: &Principal,
        database: &str,
        table: &str,
    ) -> Result<(crate::engine::DatabaseGuard, Arc<TableDef>)> {
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
