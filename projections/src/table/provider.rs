//! DataFusion over a table snapshot: segments are scanned as Parquet (mapped in place when they
//! are on this machine, through object_store when in a bucket: [`files`]), with the projection
//! and the query's filters pushed into the scan (row groups pruned by their statistics), each
//! followed by a filter of its tombstoned rows; memtable rows are scanned
//! from memory. A scan of some rows alone ([`TableScan::within`]: the records a reader may
//! see) gives each segment's share to the Parquet reader as a row selection, so the other rows
//! are never decoded and no row id is tested.

use std::{collections::HashMap, fmt, sync::Arc};

use arrow::{
    array::BooleanBufferBuilder,
    array::{BooleanArray, Int64Array, RecordBatch, UInt64Array},
    buffer::BooleanBuffer,
};
use arrow_schema::{DataType, Field, FieldRef, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::{
    catalog::{Session, TableProvider},
    common::{DFSchema, Result as DfResult, ScalarValue, tree_node::TreeNodeRecursion},
    datasource::{
        TableType,
        listing::PartitionedFile,
        memory::MemorySourceConfig,
        physical_plan::{
            FileGroup, FileScanConfigBuilder, ParquetSource,
            parquet::{DefaultParquetFileReaderFactory, ParquetRowSelection},
        },
        source::DataSourceExec,
        table_schema::TableSchema,
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
use parquet::arrow::{
    RowNumber,
    arrow_reader::{RowSelection, RowSelector},
};
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
    /// By segment (`seq`): its share of the rows. A segment not here has none of the rows, or
    /// only deleted ones.
    segments: HashMap<u64, Share>,
}

/// How a scan reads a segment's share of some rows.
enum Share {
    /// Every row of the file.
    All,
    /// Rows in a few long runs: the Parquet reader reads them alone, and skips the pages that
    /// hold none of them.
    Runs(RowSelection),
    /// Rows in many short runs, which would skip hardly a page, and cost the Parquet reader a
    /// walk over every run per statement and per column: every row of the file is read, and a
    /// filter keeps those whose position in the file is set here.
    Positions(BooleanBuffer),
}

/// Below this many rows per run on average, a share is read as [`Share::Positions`]. The
/// Parquet reader itself turns selections with runs shorter than this (its default) into masks.
const SHORT_RUNS: usize = 32;

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
            let share = match hits.len() == segment.rows {
                true => Share::All,
                false => share(&segment.ids, &hits),
            };
            segments.insert(segment.seq, share);
        }
        RowsWithin { rows, segments }
    }

    /// The ids of the rows, as given.
    pub fn rows(&self) -> &Arc<RoaringTreemap> {
        &self.rows
    }

    /// About the bytes it takes: the ids, and the selections' runs or positions.
    pub(crate) fn bytes(&self) -> usize {
        let shares: usize = self
            .segments
            .values()
            .map(|share| match share {
                Share::All => 0,
                Share::Runs(read) => read.iter().count() * std::mem::size_of::<RowSelector>(),
                Share::Positions(at) => at.inner().len(),
            })
            .sum();
        self.rows.serialized_size() + shares
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
            segments: HashMap::from([(0, Share::Runs(selectors.collect()))]),
        }
    }
}

/// Which rows of a segment's file to read: those with ids in `hits`, a subset of the file's
/// `ids`. The file holds exactly its ids, in ascending order (as [`super::search`] relies on
/// too), so a row's position is its id's rank; one pass over both sets finds the runs.
fn share(ids: &RoaringTreemap, hits: &RoaringTreemap) -> Share {
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
    if selectors.len() * SHORT_RUNS <= ids.len() as usize {
        return Share::Runs(RowSelection::from(selectors));
    }
    let mut positions = BooleanBufferBuilder::new(ids.len() as usize);
    for run in selectors {
        positions.append_n(run.row_count, !run.skip);
    }
    Share::Positions(positions.finish())
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
        let predicate = match conjunction(filters.to_vec()) {
            Some(filter) => {
                let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
                Some(state.create_physical_expr(filter, &df_schema)?)
            }
            None => None,
        };
        let segment_files = Arc::new(files::SegmentFiles::new(
            snapshot.segments.iter().map(|segment| &segment.file),
            DefaultParquetFileReaderFactory::new(snapshot.store.store.clone()),
        ));
        // A scan of the files reading `columns` of the table; `numbered`: and after them, each
        // row's segment (`seq`, from the file's partition value) and its position in the file.
        let parquet = |files: Vec<PartitionedFile>,
                       columns: &[usize],
                       numbered: bool|
         -> DfResult<Arc<dyn ExecutionPlan>> {
            let mut table = TableSchema::builder(schema.clone());
            let mut columns = columns.to_vec();
            if numbered {
                table = table
                    .with_table_partition_cols(vec![segment_field()])
                    .with_virtual_columns(vec![position_field()]);
                columns.extend([schema.fields().len(), schema.fields().len() + 1]);
            }
            let mut source = ParquetSource::new(table.build())
                .with_parquet_file_reader_factory(segment_files.clone());
            if let Some(predicate) = &predicate {
                source = source.with_predicate(predicate.clone());
            }
            let config = FileScanConfigBuilder::new(snapshot.store.url.clone(), Arc::new(source))
                .with_file_group(FileGroup::new(files))
                .with_projection_indices(Some(columns))?
                .build();
            Ok(DataSourceExec::from_data_source(config))
        };
        let file = |segment: &Segment| {
            PartitionedFile::new(segment.file.path.to_string(), segment.file.bytes)
        };
        let mut parts: Vec<Arc<dyn ExecutionPlan>> = Vec::new();
        match &self.within {
            // Each segment reads its rows among those asked for, less its tombstones: as a row
            // selection, or every row kept or not by its position; no row id is tested.
            Some(within) => {
                // Rows kept by position need their segment told apart, by a partition value.
                let numbered =
                    (within.segments.values()).any(|share| matches!(share, Share::Positions(_)));
                let mut files = Vec::new();
                let mut positions = HashMap::new();
                for segment in &snapshot.segments {
                    let Some(share) = within.segments.get(&segment.seq) else {
                        continue;
                    };
                    let mut read = file(segment);
                    match share {
                        Share::All => {}
                        Share::Runs(runs) => {
                            read = read.with_extension(ParquetRowSelection::new(runs.clone()))
                        }
                        Share::Positions(kept) => {
                            positions.insert(segment.seq, kept.clone());
                        }
                    }
                    if numbered {
                        read.partition_values = vec![ScalarValue::UInt64(Some(segment.seq))];
                    }
                    files.push(read);
                }
                if !files.is_empty() && !numbered {
                    parts.push(parquet(files, &wanted, false)?);
                } else if !files.is_empty() {
                    let kept = Kept::AtPositions {
                        positions: Arc::new(positions),
                        segment_at: wanted.len(),
                        position_at: wanted.len() + 1,
                    };
                    let plan = KeepExec::new(parquet(files, &wanted, true)?, kept);
                    parts.push(first_columns(Arc::new(plan), wanted.len())?);
                }
            }
            // Segments without tombstones are read by one scan, which DataFusion spreads over
            // its partitions; each segment with tombstones gets a scan and a filter of its own,
            // which reads `_row_id` (column 0) too.
            None => {
                let clean: Vec<PartitionedFile> = snapshot
                    .segments
                    .iter()
                    .filter(|s| s.deleted.is_empty() && s.rows > 0)
                    .map(file)
                    .collect();
                if !clean.is_empty() {
                    parts.push(parquet(clean, &wanted, false)?);
                }
                let (read, at) = match wanted.iter().position(|&i| i == 0) {
                    Some(at) => (wanted.clone(), at),
                    None => ([wanted.as_slice(), &[0]].concat(), wanted.len()),
                };
                for segment in &snapshot.segments {
                    if segment.deleted.is_empty() || segment.live_rows() == 0 {
                        continue;
                    }
                    let kept = Kept::NotDeleted {
                        deleted: segment.deleted.clone(),
                        at,
                    };
                    let plan = KeepExec::new(parquet(vec![file(segment)], &read, false)?, kept);
                    parts.push(first_columns(Arc::new(plan), wanted.len())?);
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

/// The virtual column of a row's position in its segment's file (Parquet's row number).
fn position_field() -> FieldRef {
    Arc::new(
        Field::new("__strata_file_position", DataType::Int64, false).with_extension_type(RowNumber),
    )
}

/// The partition column of a row's segment (`seq`), its file's partition value.
fn segment_field() -> FieldRef {
    Arc::new(Field::new("__strata_segment", DataType::UInt64, false))
}

/// The first `n` columns of `plan`.
fn first_columns(plan: Arc<dyn ExecutionPlan>, n: usize) -> DfResult<Arc<dyn ExecutionPlan>> {
    let output = plan.schema();
    if output.fields().len() == n {
        return Ok(plan);
    }
    let columns: Vec<(Arc<dyn PhysicalExpr>, String)> = (0..n)
        .map(|i| {
            let name = output.field(i).name().clone();
            (
                Arc::new(Column::new(&name, i)) as Arc<dyn PhysicalExpr>,
                name,
            )
        })
        .collect();
    Ok(Arc::new(ProjectionExec::try_new(columns, plan)?))
}

/// Which rows of a scan a [`KeepExec`] keeps, by columns of the scan (`at`).
#[derive(Debug, Clone)]
enum Kept {
    /// Those whose `_row_id` is not among one segment's tombstones.
    NotDeleted {
        deleted: Arc<RoaringTreemap>,
        at: usize,
    },
    /// Those of a segment here ([`segment_field`]) whose position in the file
    /// ([`position_field`]) is set; all those of the other segments.
    AtPositions {
        positions: Arc<HashMap<u64, BooleanBuffer>>,
        segment_at: usize,
        position_at: usize,
    },
}

impl Kept {
    /// Which rows of `batch` are kept (`None`: all).
    fn mask(&self, batch: &RecordBatch) -> DfResult<Option<BooleanArray>> {
        let column = |at: usize| batch.column(at).as_any();
        let not_of = |at: usize, what: &str| {
            datafusion::error::DataFusionError::Internal(format!("column {at} is not {what}"))
        };
        Ok(Some(match self {
            Kept::NotDeleted { deleted, at } => column(*at)
                .downcast_ref::<UInt64Array>()
                .ok_or_else(|| not_of(*at, ROW_ID))?
                .values()
                .iter()
                .map(|id| Some(!deleted.contains(*id)))
                .collect(),
            Kept::AtPositions {
                positions,
                segment_at,
                position_at,
            } => {
                let segments = column(*segment_at)
                    .downcast_ref::<UInt64Array>()
                    .ok_or_else(|| not_of(*segment_at, "a segment"))?
                    .values();
                let numbers = column(*position_at)
                    .downcast_ref::<Int64Array>()
                    .ok_or_else(|| not_of(*position_at, "a file position"))?
                    .values();
                // A batch usually holds rows of one file, but may hold the last rows of one
                // and the first of the next: each run of one segment is looked up on its own.
                // (Whether the rest is one run is checked first, without a branch per row.)
                let mut kept = BooleanBufferBuilder::new(segments.len());
                let mut start = 0;
                while let Some(&seq) = segments.get(start) {
                    let rest = &segments[start..];
                    let run = match rest.iter().fold(true, |one, &s| one & (s == seq)) {
                        true => rest.len(),
                        false => rest.iter().take_while(|&&s| s == seq).count(),
                    };
                    let end = start + run;
                    match positions.get(&seq) {
                        None if run == segments.len() => return Ok(None),
                        None => kept.append_n(run, true),
                        Some(set) => kept.append_buffer(
                            &at_positions(set, &numbers[start..end])
                                .ok_or_else(|| not_of(*position_at, "a file position"))?,
                        ),
                    }
                    start = end;
                }
                BooleanArray::new(kept.finish(), None)
            }
        }))
    }
}

/// Whether each of `numbers`, positions in a file, is set in `kept` (`None`: one is out of
/// range). A batch's positions are usually one run, whose answer is a slice of `kept`.
fn at_positions(kept: &BooleanBuffer, numbers: &[i64]) -> Option<BooleanBuffer> {
    let index = |n: i64| usize::try_from(n).ok().filter(|&n| n < kept.len());
    let (Some(&first), Some(&last)) = (numbers.first(), numbers.last()) else {
        return Some(BooleanBuffer::new_unset(0));
    };
    let (first, last) = (index(first)?, index(last)?);
    // Without a branch per number, so that it vectorizes.
    let start = numbers[0];
    let one_run = last.checked_sub(first) == Some(numbers.len() - 1)
        && (numbers.iter().zip(0..)).fold(true, |one, (&n, i): (&i64, i64)| one & (n == start + i));
    if one_run {
        return Some(kept.slice(first, numbers.len()));
    }
    let mut out = BooleanBufferBuilder::new(numbers.len());
    for &n in numbers {
        out.append(kept.value(index(n)?));
    }
    Some(out.finish())
}

/// Keeps some rows of one segment's scan: those not tombstoned, or those at given positions.
#[derive(Debug)]
pub struct KeepExec {
    input: Arc<dyn ExecutionPlan>,
    kept: Kept,
}

impl KeepExec {
    fn new(input: Arc<dyn ExecutionPlan>, kept: Kept) -> KeepExec {
        KeepExec { input, kept }
    }
}

impl DisplayAs for KeepExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.kept {
            Kept::NotDeleted { deleted, .. } => write!(
                f,
                "KeepExec: rows without {} tombstones on {ROW_ID}",
                deleted.len()
            ),
            Kept::AtPositions { positions, .. } => write!(
                f,
                "KeepExec: rows at set positions of {} segments",
                positions.len()
            ),
        }
    }
}

impl ExecutionPlan for KeepExec {
    fn name(&self) -> &str {
        "KeepExec"
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
        Ok(Arc::new(KeepExec {
            input: children.swap_remove(0),
            kept: self.kept.clone(),
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
        let kept = self.kept.clone();
        let stream = input.map(move |batch| {
            let batch = batch?;
            Ok(match kept.mask(&batch)? {
                Some(mask) => arrow::compute::filter_record_batch(&batch, &mask)?,
                None => batch,
            })
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

mod files;
#[cfg(test)]
mod tests;
