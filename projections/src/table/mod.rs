//! The table projection: the segment store of one table.
//!
//! A table's rows are immutable Parquet segments (sorted by `_row_id`, with statistics) plus a
//! memtable of recent Arrow batches; each segment and memtable batch carries roaring bitmaps of
//! the row ids it holds, the ones deleted since, and the ones with a vector.
//!
//! - Applying an event is in memory: an append adds a memtable batch; a delete or update
//!   tombstones the live version of each row id (there is at most one: an update tombstones the
//!   old version and writes its replacement under the same row id).
//! - A flush (by rows, bytes or age) freezes the memtable, writes it as a segment through
//!   object_store in the background, then installs it and writes a manifest whose checkpoint is
//!   the offset the frozen memtable reached. Writes are never blocked by it.
//! - Compaction merges small segments and drops tombstoned rows, in the background too.
//! - On start, the newest valid manifest is loaded and the log is replayed from its checkpoint.
//!   Replaying an event whose effect is already in the manifest is harmless: a re-applied
//!   tombstone finds no live version, and appends after the checkpoint are not in any segment.
//!
//! Readers get an immutable [`TableSnapshot`]; [`TableScan`] exposes one to DataFusion.

pub mod cached;
pub mod dates;
pub mod decimal;
pub mod digest;
pub mod docs;
pub mod filtered;
pub mod geo;
mod index;
pub mod ip;
mod maintenance;
mod manifest;
mod merge;
mod provider;
pub mod rows;
pub mod search;
mod segment;
pub mod series;
mod stored;
pub mod text;
pub mod vector;

#[cfg(test)]
mod tests;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use arrow::array::{Array, RecordBatch};
use arrow_schema::SchemaRef;
use parking_lot::{Mutex, RwLock};
use roaring::RoaringTreemap;
use strata_log::{Envelope, PartitionId, envelope::Body};

use self::rows::{id_set, row_ids};
pub use self::{
    index::{IndexSpec, SearchedAt, SegmentIndex, VectorSpec},
    provider::{
        KeepExec, RowsWithin, TableScan, scan_schema, strings_as_declared,
        strings_as_declared_schema,
    },
    segment::{
        DEFAULT_PAGE_BYTES, MIN_PAGE_BYTES, Segment, SegmentFile, TableStore, segment_properties,
    },
};
use crate::{
    catalog::TableDef,
    error::{Error, Result},
    projection::{Checkpoint, Projection},
};

/// When to flush and compact.
#[derive(Clone, Debug)]
pub struct TableOptions {
    /// Flush once the memtable holds this many rows...
    pub flush_rows: usize,
    /// ...or this many bytes...
    pub flush_bytes: usize,
    /// ...or its oldest row is this old (checked by [`TableHandle::maintain`], which should be
    /// called at least every [`TableOptions::maintenance_every`]).
    pub flush_age: Duration,
    /// Merge the memtable's batches into one once it holds this many.
    pub memtable_batches: usize,
    /// A dataset nobody searches indexes its memtable in the background, this many rows at
    /// least (whole batches, up to four times as many) at a time; a flush copies the index of
    /// a batch of at least this many rows into its segment's (see [`merge`]). 0: neither.
    pub index_rows: usize,
    /// Compact once this many segments are small...
    pub compact_min_segments: usize,
    /// ...where small means fewer rows than this.
    pub small_segment_rows: u64,
    /// About how large a segment's Parquet pages are: a search reads a page per column
    /// for each row it returns (see [`segment_properties`]).
    pub page_bytes: usize,
    /// How vector indexes are built and searched.
    pub vectors: vector::VectorOptions,
}

impl TableOptions {
    /// How often [`TableHandle::maintain`] should run for a row to wait about `flush_age`
    /// before a flush takes it, not a whole period more: a quarter of the age, between 50 ms
    /// and a second.
    pub fn maintenance_every(&self) -> Duration {
        (self.flush_age / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
    }
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            flush_rows: 256 * 1024,
            flush_bytes: 64 << 20,
            flush_age: Duration::from_secs(10),
            memtable_batches: 64,
            index_rows: 8192,
            compact_min_segments: 8,
            small_segment_rows: 1 << 20,
            page_bytes: segment::DEFAULT_PAGE_BYTES,
            vectors: vector::VectorOptions::default(),
        }
    }
}

/// How many flushes' worth of rows a table holds in memory before writers wait for room (see
/// [`TableHandle::wait_for_room`]).
pub const BACKLOG_FLUSHES: usize = 4;

/// Recent rows not yet in a segment: one batch in the table schema, with its bitmaps.
#[derive(Clone, Debug)]
pub struct MemBatch {
    pub batch: RecordBatch,
    pub ids: Arc<RoaringTreemap>,
    pub deleted: Arc<RoaringTreemap>,
    pub vectors: Arc<RoaringTreemap>,
    /// The batch's searchable tail of the full-text and exact-match indexes: built as the batch
    /// is applied, except a dataset's while nobody searches it (see
    /// [`IndexSpec::tails_at_apply`]): then when a lookup first needs it.
    pub text: Arc<Mutex<Option<Arc<text::TextTail>>>>,
    /// The batch's document index (a dataset's): built as the batch is applied while the
    /// dataset is searched, else when a search first needs it (see [`SearchedAt`]).
    pub docs: Arc<Mutex<Option<docs::DocsIndex>>>,
    /// The batch's series (a metrics dataset's), grouped when a query first needs them.
    pub series: Arc<Mutex<Option<Arc<series::SeriesSet>>>>,
    /// What the batch holds in memory, its rows and the indexes built with it: what a table's
    /// `flush_bytes` counts.
    pub memory_bytes: usize,
}

impl MemBatch {
    fn new(
        batch: RecordBatch,
        vector_column: Option<usize>,
        index: Option<&IndexSpec>,
    ) -> Result<MemBatch> {
        let text = match index
            .filter(|i| i.tails_at_apply())
            .and_then(|i| i.text.as_ref())
        {
            Some(schema) => Some(Arc::new(text::TextTail::build(schema, &batch)?)),
            None => None,
        };
        let id_column = row_ids(&batch)?.values();
        let ids = id_set(id_column);
        let mut vectors = RoaringTreemap::new();
        if let Some(vector) = vector_column.map(|i| batch.column(i)) {
            for (i, id) in id_column.iter().enumerate() {
                if vector.is_valid(i) {
                    vectors.insert(*id);
                }
            }
        }
        // A dataset's document index is built as its rows are applied while the dataset is
        // searched: built on a search's first use, every search under ingest would queue behind
        // the build of each new batch (issue 21). A dataset nobody searched lately takes its
        // rows in without it (see [`SearchedAt`]).
        let docs = match index
            .filter(|i| i.index_at_apply())
            .and_then(|i| i.docs.as_ref())
        {
            Some(schema) => Some(schema.build_in_ram(&batch)?),
            None => None,
        };
        Ok(MemBatch {
            batch,
            ids: Arc::new(ids),
            deleted: Arc::new(RoaringTreemap::new()),
            vectors: Arc::new(vectors),
            text: Arc::new(Mutex::new(text)),
            docs: Arc::new(Mutex::new(docs)),
            series: Arc::default(),
            memory_bytes: 0,
        }
        .measured())
    }

    /// The batch with its `memory_bytes` counted (again, once an index was built).
    pub(crate) fn measured(mut self) -> MemBatch {
        let docs = self.docs.lock().as_ref().map_or(0, |d| d.memory_bytes);
        let text = self.text.lock().as_ref().map_or(0, |t| t.memory_bytes());
        self.memory_bytes = batch_bytes(&self.batch) + text + docs;
        self
    }

    /// The batch's series, grouped on first use; `None` when the table keeps none.
    pub fn series_set(&self, spec: Option<&IndexSpec>) -> Result<Option<Arc<series::SeriesSet>>> {
        if !spec.is_some_and(|s| s.series) {
            return Ok(None);
        }
        let mut built = self.series.lock();
        if built.is_none() {
            *built = Some(Arc::new(series::SeriesSet::build(&self.batch)?));
        }
        Ok(built.clone())
    }

    /// The batch's document index, built on first use; `None` when the table has none.
    /// The batch's text tail, built now if it was not: `None` for a table without full-text
    /// or exact-match columns.
    pub fn text_tail(&self, spec: Option<&IndexSpec>) -> Result<Option<Arc<text::TextTail>>> {
        let Some(schema) = spec.and_then(|s| s.text.as_ref()) else {
            return Ok(None);
        };
        let mut built = self.text.lock();
        if built.is_none() {
            *built = Some(Arc::new(text::TextTail::build(schema, &self.batch)?));
        }
        Ok(built.clone())
    }

    pub fn docs_index(&self, spec: Option<&IndexSpec>) -> Result<Option<docs::DocsIndex>> {
        let Some(schema) = spec.and_then(|s| s.docs.as_ref()) else {
            return Ok(None);
        };
        let mut built = self.docs.lock();
        if built.is_none() {
            *built = Some(schema.build_in_ram(&self.batch)?);
        }
        Ok(built.clone())
    }

    /// The rows deleted from batches `now` since they were `then` (the same batches, taken
    /// earlier, in the same order): the tombstones a background job carries over to what it
    /// made of them.
    pub(crate) fn deleted_since(now: &[MemBatch], then: &[MemBatch]) -> RoaringTreemap {
        let mut later = RoaringTreemap::new();
        for (now, then) in now.iter().zip(then) {
            later |= &*now.deleted - &*then.deleted;
        }
        later
    }

    /// The batch without its deleted rows.
    pub fn live(&self) -> Result<RecordBatch> {
        if self.deleted.is_empty() {
            return Ok(self.batch.clone());
        }
        let mask: arrow::array::BooleanArray = row_ids(&self.batch)?
            .values()
            .iter()
            .map(|id| Some(!self.deleted.contains(*id)))
            .collect();
        arrow::compute::filter_record_batch(&self.batch, &mask).map_err(rows::arrow_error)
    }
}

/// A table as of a point in its partition: what queries and the leader read.
#[derive(Clone, Debug)]
pub struct TableSnapshot {
    pub table: Arc<TableDef>,
    /// `_row_id` first, then the table's columns.
    pub schema: SchemaRef,
    pub store: TableStore,
    pub segments: Vec<Segment>,
    /// Rows not yet in a segment (including those being flushed), oldest first.
    pub memtable: Vec<MemBatch>,
    pub next_row_id: u64,
    pub live_rows: u64,
    pub live_vectors: u64,
    /// Everything before this offset of the table's partition is reflected.
    pub applied: Checkpoint,
    /// What the table indexes (`None`: nothing).
    pub index: Option<Arc<IndexSpec>>,
    /// The rows within each record filter read from this snapshot lately.
    pub(crate) kept: cached::KeptWithin,
}

impl TableSnapshot {
    /// Whether a row with this id exists (and is not deleted).
    pub fn is_live(&self, id: u64) -> bool {
        let live = |ids: &RoaringTreemap, deleted: &RoaringTreemap| {
            ids.contains(id) && !deleted.contains(id)
        };
        self.memtable.iter().any(|m| live(&m.ids, &m.deleted))
            || self.segments.iter().any(|s| live(&s.ids, &s.deleted))
    }
}

struct Flushing {
    batches: Vec<MemBatch>,
    checkpoint: Checkpoint,
}

struct State {
    /// What has been applied, in memory.
    applied: Checkpoint,
    /// What the newest installed flush reflects: the checkpoint of the next manifest.
    flushed: Checkpoint,
    next_row_id: u64,
    memtable: Vec<MemBatch>,
    memtable_rows: usize,
    memtable_bytes: usize,
    memtable_since: Option<Instant>,
    flushing: Option<Flushing>,
    /// A background merge of the memtable's batches is running (see [`merge`]).
    merging: bool,
    /// The background indexing job running, if one is (see [`merge::Job`]).
    job: Option<Arc<merge::Job>>,
    segments: Vec<Segment>,
    next_segment: u64,
    compacting: bool,
    live_rows: u64,
    live_vectors: u64,
}

pub(crate) struct Shared {
    table: Arc<TableDef>,
    schema: SchemaRef,
    data_schema: SchemaRef,
    vector_column: Option<usize>,
    store: TableStore,
    index: Option<Arc<IndexSpec>>,
    options: TableOptions,
    state: Mutex<State>,
    snapshot: RwLock<Arc<TableSnapshot>>,
    /// Serializes manifest writes; holds the sequence number of the next one.
    manifests: tokio::sync::Mutex<u64>,
    /// Held shared by every flush and compaction; taken exclusively (and set) by `close`, so
    /// that no job of a closed projection writes after a new one has opened the same files.
    jobs: tokio::sync::RwLock<bool>,
    runtime: tokio::runtime::Handle,
}

/// The projection of one table's partition. Moved into its [`crate::Projector`].
pub struct TableProjection {
    partition: PartitionId,
    shared: Arc<Shared>,
    durable: Checkpoint,
}

/// A handle on a running table projection: its latest snapshot, and maintenance.
#[derive(Clone)]
pub struct TableHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TableHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableHandle")
            .field("table", &self.shared.table.name)
            .finish_non_exhaustive()
    }
}

impl TableProjection {
    /// Loads a table's newest manifest from its store (or starts empty at the table's start
    /// offset) and removes segment files no manifest refers to (left by an interrupted flush).
    pub async fn open(
        table: Arc<TableDef>,
        partition: PartitionId,
        store: TableStore,
        options: TableOptions,
    ) -> Result<(TableProjection, TableHandle)> {
        let schema = rows::table_schema(&table);
        let data_schema = rows::data_schema(&table);
        let vector_column = table
            .vector_column
            .as_ref()
            .and_then(|name| schema.index_of(name).ok());
        let index = IndexSpec::of(&table, store.index_dir.clone(), options.vectors).map(Arc::new);
        let (manifest, next_manifest) = maintenance::load_manifest(&store, &table.id).await?;
        let start = Checkpoint {
            next_offset: table.start_offset,
            epoch: 0,
        };
        let mut state = State {
            applied: start,
            flushed: start,
            next_row_id: 0,
            memtable: Vec::new(),
            memtable_rows: 0,
            memtable_bytes: 0,
            memtable_since: None,
            flushing: None,
            merging: false,
            job: None,
            segments: Vec::new(),
            next_segment: 1,
            compacting: false,
            live_rows: 0,
            live_vectors: 0,
        };
        if let Some(manifest) = &manifest {
            state.applied = manifest.checkpoint;
            state.flushed = manifest.checkpoint;
            state.next_row_id = manifest.next_row_id;
            state.next_segment = manifest.next_segment;
            for entry in &manifest.segments {
                let mut segment = maintenance::segment_from_entry(&store, entry)?;
                if let Some(spec) = &index {
                    segment.index = Some(maintenance::open_index(&store, spec, &segment).await?);
                }
                state.live_rows += segment.live_rows();
                state.live_vectors += (&*segment.vectors - &*segment.deleted).len();
                state.segments.push(segment);
            }
        }
        maintenance::remove_orphans(&store, manifest.as_ref()).await?;
        if let Some(spec) = &index {
            let keep: Vec<u64> = state.segments.iter().map(|s| s.seq).collect();
            let spec = spec.clone();
            tokio::task::spawn_blocking(move || spec.remove_others(&keep))
                .await
                .map_err(|e| Error::Index(e.to_string()))??;
        }
        let durable = state.applied;
        let shared = Arc::new(Shared {
            snapshot: RwLock::new(Arc::new(TableSnapshot {
                table: table.clone(),
                schema: schema.clone(),
                store: store.clone(),
                segments: state.segments.clone(),
                memtable: Vec::new(),
                next_row_id: state.next_row_id,
                live_rows: state.live_rows,
                live_vectors: state.live_vectors,
                applied: state.applied,
                index: index.clone(),
                kept: Default::default(),
            })),
            table,
            schema,
            data_schema,
            vector_column,
            store,
            index,
            options,
            state: Mutex::new(state),
            manifests: tokio::sync::Mutex::new(next_manifest),
            jobs: tokio::sync::RwLock::new(false),
            runtime: tokio::runtime::Handle::current(),
        });
        let handle = TableHandle {
            shared: shared.clone(),
        };
        Ok((
            TableProjection {
                partition,
                shared,
                durable,
            },
            handle,
        ))
    }
}

impl Projection for TableProjection {
    type Snapshot = Arc<TableSnapshot>;

    fn partition(&self) -> &PartitionId {
        &self.partition
    }

    fn checkpoint(&self) -> Checkpoint {
        self.durable
    }

    fn apply(&mut self, events: &[Envelope], checkpoint: Checkpoint) -> Result<()> {
        let shared = &self.shared;
        let mut state = shared.state.lock();
        for event in events {
            match &event.body {
                Some(Body::RowsAppended(appended)) if appended.table_id == shared.table.id => {
                    if !appended.tombstoned_row_ids.is_empty() {
                        tombstone(
                            &mut state,
                            appended.tombstoned_row_ids.iter().copied().collect(),
                        );
                    }
                    let ids = appended.first_row_id..appended.first_row_id + appended.row_count;
                    shared.append(&mut state, &appended.arrow_ipc, ids.collect())?;
                }
                Some(Body::RowsDeleted(deleted)) if deleted.table_id == shared.table.id => {
                    tombstone(&mut state, deleted.row_ids.iter().copied().collect());
                }
                Some(Body::RowsUpdated(updated)) if updated.table_id == shared.table.id => {
                    tombstone(&mut state, updated.row_ids.iter().copied().collect());
                    shared.append(&mut state, &updated.arrow_ipc, updated.row_ids.clone())?;
                }
                _ => {}
            }
        }
        state.applied = checkpoint;
        if merge::in_background(shared) {
            merge::start(shared, &mut state);
        } else if state.memtable.len() > shared.options.memtable_batches {
            merge_memtable(&mut state)?;
        }
        let flush = state.flushing.is_none()
            && (state.memtable_rows >= shared.options.flush_rows
                || state.memtable_bytes >= shared.options.flush_bytes);
        shared.publish(&state);
        drop(state);
        if flush {
            self.shared.spawn_flush();
        }
        Ok(())
    }

    fn snapshot(&self) -> Arc<TableSnapshot> {
        self.shared.snapshot.read().clone()
    }
}

impl Shared {
    /// Decodes rows of an event and adds them to the memtable under `ids`.
    fn append(&self, state: &mut State, ipc: &[u8], ids: Vec<u64>) -> Result<()> {
        let decoded = rows::decode_ipc(ipc)?;
        // Never drop what rows carry: a column the definition lacks means the definition this
        // projection opened with is older than the rows (the engine reopens it with the new one).
        if let Some(unknown) = decoded
            .schema()
            .fields()
            .iter()
            .find(|f| self.data_schema.field_with_name(f.name()).is_err())
        {
            return Err(Error::Corrupt {
                key: format!("rows of table {}", self.table.name),
                reason: format!(
                    "they carry column {:?}, which the table's definition lacks: the definition is older than the rows",
                    unknown.name()
                ),
            });
        }
        // Rows written before the table's columns grew read in its current schema.
        let batch = rows::conform(&self.data_schema, &decoded).map_err(|error| Error::Corrupt {
            key: format!("rows of table {}", self.table.name),
            reason: error.to_string(),
        })?;
        if batch.num_rows() != ids.len() {
            return Err(Error::Corrupt {
                key: format!("rows of table {}", self.table.name),
                reason: format!("{} rows for {} row ids", batch.num_rows(), ids.len()),
            });
        }
        if let Some(&last) = ids.iter().max() {
            state.next_row_id = state.next_row_id.max(last + 1);
        }
        let batch = rows::with_row_ids(&self.schema, &batch, ids)?;
        let mem = MemBatch::new(batch, self.vector_column, self.index.as_deref())?;
        state.live_rows += mem.ids.len();
        state.live_vectors += mem.vectors.len();
        state.memtable_rows += mem.batch.num_rows();
        state.memtable_bytes += mem.memory_bytes;
        state.memtable_since.get_or_insert_with(Instant::now);
        state.memtable.push(mem);
        Ok(())
    }

    /// Makes the state visible to readers.
    fn publish(&self, state: &State) {
        let mut memtable: Vec<MemBatch> = state
            .flushing
            .iter()
            .flat_map(|f| f.batches.iter().cloned())
            .collect();
        memtable.extend(state.memtable.iter().cloned());
        *self.snapshot.write() = Arc::new(TableSnapshot {
            table: self.table.clone(),
            schema: self.schema.clone(),
            store: self.store.clone(),
            segments: state.segments.clone(),
            memtable,
            next_row_id: state.next_row_id,
            live_rows: state.live_rows,
            live_vectors: state.live_vectors,
            applied: state.applied,
            index: self.index.clone(),
            kept: Default::default(),
        });
    }

    fn spawn_flush(self: &Arc<Self>) {
        let shared = self.clone();
        self.runtime.spawn(async move {
            if let Err(error) = maintenance::flush(&shared).await {
                tracing::error!(table = %shared.table.name, %error, "flush failed; will retry");
            }
        });
    }
}

/// Tombstones the live version of each row id. Returns nothing: counts are kept in the state.
fn tombstone(state: &mut State, mut ids: RoaringTreemap) {
    let State {
        memtable,
        flushing,
        segments,
        live_rows,
        live_vectors,
        ..
    } = state;
    let memtable = memtable
        .iter_mut()
        .rev()
        .map(|m| (&m.ids, &mut m.deleted, &m.vectors));
    let frozen = flushing
        .iter_mut()
        .flat_map(|f| f.batches.iter_mut().rev())
        .map(|m| (&m.ids, &mut m.deleted, &m.vectors));
    let stored = segments
        .iter_mut()
        .rev()
        .map(|s| (&s.ids, &mut s.deleted, &s.vectors));
    for (holds, deleted, vectors) in memtable.chain(frozen).chain(stored) {
        if ids.is_empty() {
            break;
        }
        let hits = (&ids & &**holds) - &**deleted;
        if hits.is_empty() {
            continue;
        }
        *live_rows -= hits.len();
        *live_vectors -= (&hits & &**vectors).len();
        *Arc::make_mut(deleted) |= &hits;
        ids -= &hits;
    }
}

/// Replaces the memtable's batches by one holding their live rows (many small appends would
/// otherwise make every snapshot long).
fn merge_memtable(state: &mut State) -> Result<()> {
    if state.memtable.is_empty() {
        return Ok(());
    }
    let merged = merge::concat(&state.memtable)?;
    state.memtable_rows = merged.batch.num_rows();
    state.memtable_bytes = merged.memory_bytes;
    state.memtable = vec![merged];
    Ok(())
}

impl TableHandle {
    pub fn snapshot(&self) -> Arc<TableSnapshot> {
        self.shared.snapshot.read().clone()
    }

    /// Flushes the memtable if its oldest row is older than the flush age, and compacts if
    /// there are enough small segments. Call it periodically.
    pub async fn maintain(&self) -> Result<()> {
        let due = {
            let state = self.shared.state.lock();
            state.flushing.is_none() && maintenance::due(&state, &self.shared.options)
        };
        if due {
            maintenance::flush(&self.shared).await?;
        }
        maintenance::compact(&self.shared).await
    }

    /// Waits until the rows not yet in a segment (the memtable's and a running flush's) are
    /// fewer than [`BACKLOG_FLUSHES`] flushes' worth, by rows and by bytes, or `max` has passed:
    /// whether there is room. Writers call it before they write, so that a table taking rows in
    /// faster than its flushes write them holds the writers back rather than its memory growing
    /// without bound.
    pub async fn wait_for_room(&self, max: Duration) -> bool {
        let deadline = Instant::now() + max;
        loop {
            if self.has_room() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn has_room(&self) -> bool {
        let options = &self.shared.options;
        let state = self.shared.state.lock();
        let frozen = state.flushing.iter().flat_map(|f| &f.batches);
        let (rows, bytes) = frozen
            .fold((state.memtable_rows, state.memtable_bytes), |(r, b), m| {
                (r + m.batch.num_rows(), b + m.memory_bytes)
            });
        rows < options.flush_rows.saturating_mul(BACKLOG_FLUSHES)
            && bytes < options.flush_bytes.saturating_mul(BACKLOG_FLUSHES)
    }

    /// Flushes whatever the memtable holds now, and waits for it (tests, shutdown).
    pub async fn flush(&self) -> Result<()> {
        maintenance::flush(&self.shared).await
    }

    /// Compacts now if there is anything to compact, and waits for it.
    pub async fn compact(&self) -> Result<()> {
        maintenance::compact(&self.shared).await
    }

    /// Waits for running flushes and compactions and refuses later ones. Call before the
    /// projection is dropped and its table opened again (hibernation, restart).
    pub async fn close(&self) {
        *self.shared.jobs.write().await = true;
    }
}

/// The value of a vector column at `row`, if the table has one (for counting vectors of a batch
/// before it is appended).
pub fn count_vectors(batch: &RecordBatch, vector_column: Option<&str>) -> u64 {
    let Some(column) = vector_column.and_then(|name| batch.column_by_name(name)) else {
        return 0;
    };
    (column.len() - column.null_count()) as u64
}

/// Row ids of a batch in the table schema, as a vector (for callers outside this module).
pub fn batch_row_ids(batch: &RecordBatch) -> Result<Vec<u64>> {
    Ok(row_ids(batch)?.values().to_vec())
}

/// The bytes a batch's rows take. Not `get_array_memory_size`: the columns of a batch decoded
/// from Arrow IPC are slices of one buffer, and that counts the whole buffer once per column,
/// which made the memtable look several times larger than it is and flush early by size.
pub(crate) fn batch_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| {
            c.to_data()
                .get_slice_memory_size()
                .unwrap_or_else(|_| c.get_array_memory_size())
        })
        .sum()
}
