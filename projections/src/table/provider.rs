//! DataFusion over a table snapshot: segments are scanned as Parquet through object_store, with
//! the projection and the query's filters pushed into the scan (row groups pruned by their
//! statistics), each followed by a filter of its tombstoned rows; memtable rows are scanned
//! from memory. A scan of some rows alone ([`TableScan::within`]: the records a reader may
//! see) gives each segment's share to the Parquet reader as a row selection, so the other rows
//! are never decoded and no row id is tested.

use std::{collections::HashMap, fmt, sync::Arc};

use arrow::array::{BooleanArray, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::{
    catalog::{Session, TableProvider},
    common::{DFSchema, Result as DfResult, tree_node::TreeNodeRecursion},
    datasource::{
        TableType,
        listing::PartitionedFile,
        memory::MemorySourceConfig,
        physical_plan::{
            FileGroup, FileScanConfigBuilder, ParquetSource, parquet::ParquetRowSelection,
        },
        source::DataSourceExec,
    },
    execution::{SendableRecordBatchStream, TaskContext},
    logical_expr::{Expr, TableProviderFilterPushDown, utils::conjunction},
    physical_expr::PhysicalExpr,
    physical_plan::{
        ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties,
        ReplaceChildrenOptions, empty::EmptyExec, expressions::Column, projection::ProjectionExec,
        stream::RecordBatchStreamAdapter, union::UnionExec,
    },
};
use futures::StreamExt;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use roaring::RoaringTreemap;

use super::{
    Segment, TableSnapshot,
    rows::{ROW_ID, row_ids},
};

/// A table snapshot as a DataFusion table. `_row_id` is its first column.
#[derive(Debug, Clone)]
pub struct TableScan {
    snapshot: Arc<TableSnapshot>,
    /// The table's schema with its strings as views (see [`scan_schema`]).
    schema: SchemaRef,
    /// The only rows scanned (`None`: all).
    within: Option<Arc<RowsWithin>>,
}

impl TableScan {
    pub fn new(snapshot: Arc<TableSnapshot>) -> TableScan {
        let schema = scan_schema(&snapshot.schema);
        TableScan {
            snapshot,
            schema,
            within: None,
        }
    }

    /// The scan of `rows` alone (found in this scan's snapshot).
    pub fn within(self, rows: Arc<RowsWithin>) -> TableScan {
        TableScan {
            within: Some(rows),
            ..self
        }
    }
}

/// Some rows of a snapshot, as a scan reads them ([`TableScan::within`]): their ids, and which
/// rows of each segment's file to read. Finding the latter walks every id of the segments, so
/// a reader's visible rows are found once per snapshot and filter (see
/// [`TableSnapshot::kept_within`]), not once per statement.
pub struct RowsWithin {
    rows: Arc<RoaringTreemap>,
    /// By segment (`seq`): the rows of its file to read, `None` for all of them. A segment
    /// not here has none of the rows, or only deleted ones.
    segments: HashMap<u64, Option<RowSelection>>,
}

impl fmt::Debug for RowsWithin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowsWithin")
            .field("rows", &self.rows.len())
            .field("segments", &self.segments.len())
            .finish()
    }
}

impl RowsWithin {
    /// The live rows of `snapshot` with ids in `rows`.
    pub fn new(snapshot: &TableSnapshot, rows: Arc<RoaringTreemap>) -> RowsWithin {
        let mut segments = HashMap::new();
        for segment in snapshot.segments.iter().filter(|s| s.live_rows() > 0) {
            let mut hits = rows.as_ref() & segment.ids.as_ref();
            hits -= segment.deleted.as_ref();
            if hits.is_empty() {
                continue;
            }
            let read = (hits.len() != segment.rows).then(|| selection(&segment.ids, &hits));
            segments.insert(segment.seq, read);
        }
        RowsWithin { rows, segments }
    }

    /// The ids of the rows, as given.
    pub fn rows(&self) -> &Arc<RoaringTreemap> {
        &self.rows
    }

    /// About the bytes it takes: the ids, and the selections' runs.
    pub(crate) fn bytes(&self) -> usize {
        let runs: usize = self
            .segments
            .values()
            .flatten()
            .map(|read| read.iter().count())
            .sum();
        self.rows.serialized_size() + runs * std::mem::size_of::<RowSelector>()
    }

    /// Rows of no segment, one selection of `runs` runs: a stand-in of a given size.
    #[cfg(test)]
    pub(crate) fn of_runs(runs: usize) -> RowsWithin {
        let selectors = (0..runs).map(|i| match i % 2 {
            0 => RowSelector::skip(1),
            _ => RowSelector::select(1),
        });
        RowsWithin {
            rows: Arc::new(RoaringTreemap::new()),
            segments: HashMap::from([(0, Some(selectors.collect()))]),
        }
    }
}

/// Which rows of a segment's file to read: those with ids in `hits`, a subset of the file's
/// `ids`. The file holds exactly its ids, in ascending order (as [`super::search`] relies on
/// too), so a row's position is its id's rank; one pass over both sets finds the runs.
fn selection(ids: &RoaringTreemap, hits: &RoaringTreemap) -> RowSelection {
    let selector = |selected: bool, run: usize| match selected {
        true => RowSelector::select(run),
        false => RowSelector::skip(run),
    };
    let mut selectors = Vec::new();
    let mut hits = hits.iter().peekable();
    let (mut selecting, mut run) = (false, 0usize);
    for id in ids {
        let selected = hits.next_if_eq(&id).is_some();
        if selected != selecting && run > 0 {
            selectors.push(selector(selecting, run));
            run = 0;
        }
        selecting = selected;
        run += 1;
    }
    if run > 0 {
        selectors.push(selector(selecting, run));
    }
    RowSelection::from(selectors)
}

/// The schema queries see: the table's, with `utf8` columns as `utf8view`. Parquet decodes
/// strings into views without copying them into one buffer, and grouping and comparing views
/// is faster, as DataFusion does for its own Parquet tables. Query answers are cast back to the
/// table's types ([`strings_as_declared`]).
pub fn scan_schema(schema: &SchemaRef) -> SchemaRef {
    retyped(schema, &DataType::Utf8, &DataType::Utf8View)
}

/// `schema` with `utf8view` fields as `utf8`.
pub fn strings_as_declared_schema(schema: &SchemaRef) -> SchemaRef {
    retyped(schema, &DataType::Utf8View, &DataType::Utf8)
}

/// `batch` with its `utf8view` columns cast to `utf8`: a query answer in the types tables
/// declare.
pub fn strings_as_declared(batch: &RecordBatch) -> DfResult<RecordBatch> {
    let schema = batch.schema();
    if !schema
        .fields()
        .iter()
        .any(|f| f.data_type() == &DataType::Utf8View)
    {
        return Ok(batch.clone());
    }
    cast_batch(batch, &strings_as_declared_schema(&schema))
}

fn retyped(schema: &SchemaRef, from: &DataType, to: &DataType) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() == from {
            true => f.as_ref().clone().with_data_type(to.clone()),
            false => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `batch` with each column cast to the type `schema` gives it.
fn cast_batch(batch: &RecordBatch, schema: &SchemaRef) -> DfResult<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| arrow::compute::cast(c, f.data_type()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

#[async_trait]
impl TableProvider for TableScan {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Used to prune row groups; DataFusion still filters every row.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let snapshot = &self.snapshot;
        let schema = &self.schema;
        let wanted: Vec<usize> = projection
            .cloned()
            .unwrap_or_else(|| (0..schema.fields().len()).collect());
        // Tombstones are filtered by row id, so a scan of a segment with tombstones also reads
        // `_row_id` (column 0); a scan of a clean segment reads only what the query wants.
        let mut read = wanted.clone();
        if !read.contains(&0) {
            read.insert(0, 0);
        }
        let row_id_at = read.iter().position(|&i| i == 0).unwrap_or(0);
        let predicate = match conjunction(filters.to_vec()) {
            Some(filter) => {
                let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
                Some(state.create_physical_expr(filter, &df_schema)?)
            }
            None => None,
        };
        let parquet = |files: Vec<PartitionedFile>,
                       columns: &[usize]|
         -> DfResult<Arc<dyn ExecutionPlan>> {
            let mut source = ParquetSource::new(schema.clone());
            if let Some(predicate) = &predicate {
                source = source.with_predicate(predicate.clone());
            }
            let config = FileScanConfigBuilder::new(snapshot.store.url.clone(), Arc::new(source))
                .with_file_group(FileGroup::new(files))
                .with_projection_indices(Some(columns.to_vec()))?
                .build();
            Ok(DataSourceExec::from_data_source(config))
        };
        let file = |segment: &Segment| {
            PartitionedFile::new(segment.file.path.to_string(), segment.file.bytes)
        };
        // Keeps the `wanted` columns of a plan that read the `read` ones.
        let read_schema = Arc::new(schema.project(&read)?);
        let to_wanted = |plan: Arc<dyn ExecutionPlan>| -> DfResult<Arc<dyn ExecutionPlan>> {
            if read == wanted {
                return Ok(plan);
            }
            let columns: Vec<(Arc<dyn PhysicalExpr>, String)> = wanted
                .iter()
                .map(|&i| {
                    let at = read.iter().position(|&r| r == i).unwrap_or(0);
                    let name = read_schema.field(at).name().clone();
                    (
                        Arc::new(Column::new(&name, at)) as Arc<dyn PhysicalExpr>,
                        name,
                    )
                })
                .collect();
            Ok(Arc::new(ProjectionExec::try_new(columns, plan)?))
        };
        let mut parts: Vec<Arc<dyn ExecutionPlan>> = Vec::new();
        match &self.within {
            // Each segment reads its rows among those asked for, less its tombstones, as a
            // row selection; none of them needs its row ids read or tested.
            Some(within) => {
                let mut files = Vec::new();
                for segment in &snapshot.segments {
                    match within.segments.get(&segment.seq) {
                        None => {}
                        Some(None) => files.push(file(segment)),
                        Some(Some(read)) => files.push(
                            file(segment).with_extension(ParquetRowSelection::new(read.clone())),
                        ),
                    }
                }
                if !files.is_empty() {
                    parts.push(parquet(files, &wanted)?);
                }
            }
            // Segments without tombstones are read by one scan, which DataFusion spreads over
            // its partitions; each segment with tombstones gets a scan and a filter of its own.
            None => {
                let clean: Vec<PartitionedFile> = snapshot
                    .segments
                    .iter()
                    .filter(|s| s.deleted.is_empty() && s.rows > 0)
                    .map(file)
                    .collect();
                if !clean.is_empty() {
                    parts.push(parquet(clean, &wanted)?);
                }
                for segment in &snapshot.segments {
                    if segment.deleted.is_empty() || segment.live_rows() == 0 {
                        continue;
                    }
                    parts.push(to_wanted(Arc::new(DeletionFilterExec::new(
                        parquet(vec![file(segment)], &read)?,
                        segment.deleted.clone(),
                        row_id_at,
                    )))?);
                }
            }
        }
        let memtable: Vec<RecordBatch> = snapshot
            .memtable
            .iter()
            .map(|m| m.live())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?
            .into_iter()
            .map(|b| match &self.within {
                Some(within) => rows_of(&b, &within.rows),
                None => Ok(b),
            })
            .collect::<DfResult<Vec<_>>>()?
            .into_iter()
            .filter(|b| b.num_rows() > 0)
            .map(|b| cast_batch(&b, schema))
            .collect::<DfResult<_>>()?;
        if !memtable.is_empty() {
            parts.push(MemorySourceConfig::try_new_exec(
                &[memtable],
                schema.clone(),
                Some(wanted.clone()),
            )?);
        }
        match parts.len() {
            0 => Ok(Arc::new(EmptyExec::new(Arc::new(schema.project(&wanted)?)))),
            _ => UnionExec::try_new(parts),
        }
    }
}

/// The rows of `batch` (`_row_id` first) with ids in `rows`.
fn rows_of(batch: &RecordBatch, rows: &RoaringTreemap) -> DfResult<RecordBatch> {
    let ids =
        row_ids(batch).map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    let keep: BooleanArray = ids
        .values()
        .iter()
        .map(|id| Some(rows.contains(*id)))
        .collect();
    Ok(arrow::compute::filter_record_batch(batch, &keep)?)
}

/// Removes rows whose `_row_id` is in a bitmap: the tombstones of one segment.
#[derive(Debug)]
pub struct DeletionFilterExec {
    input: Arc<dyn ExecutionPlan>,
    deleted: Arc<RoaringTreemap>,
    row_id_at: usize,
}

impl DeletionFilterExec {
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        deleted: Arc<RoaringTreemap>,
        row_id_at: usize,
    ) -> Self {
        DeletionFilterExec {
            input,
            deleted,
            row_id_at,
        }
    }
}

impl DisplayAs for DeletionFilterExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "DeletionFilterExec: {} tombstones on {ROW_ID}",
            self.deleted.len()
        )
    }
}

impl ExecutionPlan for DeletionFilterExec {
    fn name(&self) -> &str {
        "DeletionFilterExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(DeletionFilterExec {
            input: children.swap_remove(0),
            deleted: self.deleted.clone(),
            row_id_at: self.row_id_at,
        }))
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let schema = input.schema();
        let (deleted, at) = (self.deleted.clone(), self.row_id_at);
        let stream = input.map(move |batch| {
            let batch = batch?;
            let ids = batch
                .column(at)
                .as_any()
                .downcast_ref::<UInt64Array>()
                .ok_or_else(|| {
                    datafusion::error::DataFusionError::Internal(format!(
                        "column {at} is not {ROW_ID}"
                    ))
                })?;
            let keep: BooleanArray = ids
                .values()
                .iter()
                .map(|id| Some(!deleted.contains(*id)))
                .collect();
            Ok(arrow::compute::filter_record_batch(&batch, &keep)?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

#[cfg(test)]
mod tests;
