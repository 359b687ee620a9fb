//! Flush, compaction and manifests of the segment store. Both jobs run in the background: they
//! freeze what they work on under the state lock, do their I/O without it, and install the
//! result under the lock again, carrying over tombstones that arrived meanwhile.

use std::sync::Arc;

use arrow::{array::RecordBatch, compute};
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::{ObjectStoreExt, path::Path};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use roaring::RoaringTreemap;
use thread_priority::{ThreadPriority, ThreadPriorityValue, set_current_thread_priority};

use super::{
    Flushing, MemBatch, Shared, State, TableOptions,
    docs::DocsIndex,
    index::{DocsParts, IndexSpec, SegmentIndex},
    manifest::{Manifest, SegmentEntry, bitmap_from_text, bitmap_to_text},
    merge,
    rows::row_ids,
    rows::{ROW_ID, arrow_error},
    segment::{self, Segment, TableStore},
};
use crate::error::{Error, Result};

const MANIFESTS: &str = "manifests";
const SEGMENTS: &str = "segments";

fn manifest_name(seq: u64) -> String {
    format!("{MANIFESTS}/{seq:012}.manifest")
}

fn segment_name(seq: u64) -> String {
    format!("{SEGMENTS}/{seq:012}.parquet")
}

/// The newest valid manifest of the table (older ones are fallbacks), and the sequence number
/// the next manifest gets.
pub(super) async fn load_manifest(
    store: &TableStore,
    table_id: &str,
) -> Result<(Option<Manifest>, u64)> {
    let dir = store.path(MANIFESTS);
    let mut listed: Vec<_> = store.store.list(Some(&dir)).try_collect().await?;
    listed.sort_by(|a, b| b.location.cmp(&a.location));
    let next = listed
        .first()
        .and_then(|o| {
            o.location
                .filename()?
                .split('.')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .map_or(1, |seq| seq + 1);
    for object in listed {
        let bytes = store.store.get(&object.location).await?.bytes().await?;
        match Manifest::decode(&bytes) {
            Ok(manifest) if manifest.table_id == table_id => {
                if segments_exist(store, &manifest).await? {
                    return Ok((Some(manifest), next));
                }
                tracing::warn!(manifest = %object.location, "a manifest names a missing segment; trying an older one");
            }
            Ok(_) => {
                tracing::warn!(manifest = %object.location, "a manifest of another table; ignored")
            }
            Err(error) => {
                tracing::warn!(manifest = %object.location, %error, "unreadable manifest; trying an older one")
            }
        }
    }
    Ok((None, next))
}

async fn segments_exist(store: &TableStore, manifest: &Manifest) -> Result<bool> {
    for entry in &manifest.segments {
        match store.store.head(&store.path(&entry.file)).await {
            Ok(_) => {}
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(error) => return Err(error.into()),
        }
    }
    Ok(true)
}

pub(super) fn segment_from_entry(store: &TableStore, entry: &SegmentEntry) -> Result<Segment> {
    Ok(Segment {
        seq: entry.seq,
        file: store.segment_file(store.path(&entry.file), entry.bytes),
        rows: entry.rows,
        ids: Arc::new(bitmap_from_text(&entry.ids)?),
        deleted: Arc::new(bitmap_from_text(&entry.deleted)?),
        vectors: Arc::new(bitmap_from_text(&entry.vectors)?),
        index: None,
    })
}

/// Opens a stored segment's indexes, rebuilding them from the segment when they are missing.
pub(super) async fn open_index(
    store: &TableStore,
    spec: &Arc<IndexSpec>,
    segment: &Segment,
) -> Result<Arc<SegmentIndex>> {
    let (opener, seq) = (spec.clone(), segment.seq);
    let opened = tokio::task::spawn_blocking(move || opener.open(seq))
        .await
        .map_err(|e| Error::Index(e.to_string()))??;
    if let Some(index) = opened {
        return Ok(Arc::new(index));
    }
    tracing::info!(segment = %segment.file.path, "building the indexes of a segment");
    let bytes = store.store.get(&segment.file.path).await?.bytes().await?;
    let builder = spec.clone();
    // Deleted rows are indexed too: queries filter them out, as for any segment.
    let index = tokio::task::spawn_blocking(move || {
        let batches = read_parquet(bytes)?;
        let schema = batches
            .first()
            .map(RecordBatch::schema)
            .ok_or_else(|| Error::Index(format!("segment {seq} is empty")))?;
        let rows = compute::concat_batches(&schema, &batches).map_err(arrow_error)?;
        builder.build(seq, &rows, None)
    })
    .await
    .map_err(|e| Error::Index(e.to_string()))??;
    Ok(Arc::new(index))
}

/// Deletes segment files the manifest does not name (a flush or compaction cut short).
pub(super) async fn remove_orphans(store: &TableStore, manifest: Option<&Manifest>) -> Result<()> {
    let named: std::collections::HashSet<Path> = manifest
        .iter()
        .flat_map(|m| m.segments.iter().map(|e| store.path(&e.file)))
        .collect();
    let dir = store.path(SEGMENTS);
    let listed: Vec<_> = store.store.list(Some(&dir)).try_collect().await?;
    for object in listed {
        if !named.contains(&object.location) {
            tracing::info!(path = %object.location, "removing an orphaned segment");
            match store.store.delete(&object.location).await {
                // A retired segment's own deletion may get there first.
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(())
}

/// Writes the memtable as a segment and installs it, then compacts.
pub(super) async fn flush(shared: &Arc<Shared>) -> Result<()> {
    // Rows that arrived during a flush may already make up another one, or be due by age:
    // flushed now, not a maintenance period later. Compactions run between such flushes, so
    // that a table written faster than its flush age does not pile up small segments.
    loop {
        {
            let jobs = shared.jobs.read().await;
            if *jobs {
                return Ok(());
            }
            flush_frozen(shared).await?;
        }
        compact(shared).await?;
        let state = shared.state.lock();
        if state.flushing.is_some() || !due(&state, &shared.options) {
            return Ok(());
        }
    }
}

/// Whether the memtable is due a flush: full, by rows or bytes, or its oldest row older than
/// the flush age.
pub(super) fn due(state: &State, options: &TableOptions) -> bool {
    state.memtable_rows >= options.flush_rows
        || state.memtable_bytes >= options.flush_bytes
        || state
            .memtable_since
            .is_some_and(|since| since.elapsed() >= options.flush_age)
}

/// Takes the memtable as the next flush's: its batches, the checkpoint it reflects and the
/// number of the segment it becomes.
fn freeze(state: &mut State) -> (Vec<MemBatch>, super::Checkpoint, u64) {
    let batches = std::mem::take(&mut state.memtable);
    state.memtable_rows = 0;
    state.memtable_bytes = 0;
    state.memtable_since = None;
    let seq = state.next_segment;
    state.next_segment += 1;
    let checkpoint = state.applied;
    state.flushing = Some(Flushing {
        batches: batches.clone(),
        checkpoint,
    });
    (batches, checkpoint, seq)
}

async fn flush_frozen(shared: &Arc<Shared>) -> Result<()> {
    let ((frozen, checkpoint, seq), job) = {
        let mut state = shared.state.lock();
        if state.flushing.is_some() || state.memtable.is_empty() {
            return Ok(());
        }
        // The background indexing job running now indexes some of the batches taken: the
        // segment takes its result (see `merge::Job`).
        let job = state.job.clone();
        (freeze(&mut state), job)
    };
    let written = match write_segment(shared, seq, frozen.clone(), job).await {
        Ok(written) => written,
        Err(error) => {
            // Put the rows back in front of what arrived meanwhile; the next flush retries.
            let mut state = shared.state.lock();
            if let Some(flushing) = state.flushing.take() {
                let mut batches = flushing.batches;
                batches.append(&mut state.memtable);
                state.memtable_rows = batches.iter().map(|b| b.batch.num_rows()).sum();
                state.memtable_bytes = batches.iter().map(|b| b.memory_bytes).sum();
                state.memtable = batches;
                state.memtable_since = Some(std::time::Instant::now());
            }
            return Err(error);
        }
    };
    {
        let mut state = shared.state.lock();
        let Some(flushing) = state.flushing.take() else {
            return Err(Error::Corrupt {
                key: shared.table.name.clone(),
                reason: "a flush finished that was not in progress".to_owned(),
            });
        };
        if let Some(mut segment) = written {
            // Tombstones that reached the frozen batches while the file was being written.
            let later = MemBatch::deleted_since(&flushing.batches, &frozen);
            segment.deleted = Arc::new(later & &*segment.ids);
            state.segments.push(segment);
        }
        state.flushed = state.flushed.max_by_offset(flushing.checkpoint);
        shared.publish(&state);
    }
    write_manifest(shared).await?;
    tracing::debug!(table = %shared.table.name, next_offset = checkpoint.next_offset, "flushed");
    Ok(())
}

/// A segment file's bytes, the row ids it holds, and its indexes.
struct Encoded {
    bytes: Vec<u8>,
    ids: RoaringTreemap,
    rows: u64,
    index: Option<SegmentIndex>,
}

/// Runs CPU-bound work (Arrow, Parquet) off the async runtime.
async fn blocking<T: Send + 'static>(
    shared: &Shared,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Stopped {
            partition: shared.table.name.clone(),
            cause: e.to_string(),
        })?
}

/// Writes the live rows of `batches` as segment `seq`, sorted by row id. `None` when no row is
/// live (nothing to write).
async fn write_segment(
    shared: &Arc<Shared>,
    seq: u64,
    batches: Vec<MemBatch>,
    job: Option<Arc<merge::Job>>,
) -> Result<Option<Segment>> {
    let schema = shared.schema.clone();
    let index = shared.index.clone();
    let page_bytes = shared.options.page_bytes;
    let vectors = batches.iter().fold(RoaringTreemap::new(), |acc, b| {
        acc | (&*b.vectors - &*b.deleted)
    });
    // The batches' document indexes: the big ones' copied into the segment's (the rest of
    // the rows indexed), or, when every one is built and none is big, merged.
    let built: Vec<Option<DocsIndex>> = batches.iter().map(|b| b.docs.lock().clone()).collect();
    let same = |a: &MemBatch, b: &MemBatch| Arc::ptr_eq(&a.ids, &b.ids);
    // The running job's batches, when they are among these (they are unless an earlier flush
    // took them): indexed by the job, whose result the segment takes.
    let adopted: Option<(Arc<merge::Job>, Vec<MemBatch>)> = job.and_then(|job| {
        let taken: Option<Vec<MemBatch>> = (job.parts.iter())
            .map(|part| batches.iter().find(|b| same(b, part)).cloned())
            .collect();
        Some((job, taken?))
    });
    let mut copied = Vec::new();
    let mut rest = Vec::new();
    for (i, (batch, docs)) in batches.iter().zip(&built).enumerate() {
        if adopted
            .as_ref()
            .is_some_and(|(_, taken)| taken.iter().any(|t| same(t, batch)))
        {
            continue;
        }
        match docs {
            Some(docs)
                // A smaller batch's rows are indexed again with the rest: a merge of its
                // index would cost about as much.
                if copied.len() < COPIED_PARTS
                    && shared.options.index_rows > 0
                    && docs.searcher.num_docs() >= shared.options.index_rows as u64 =>
            {
                copied.push((docs.clone(), batch.deleted.clone()));
            }
            _ => rest.push(i),
        }
    }
    let all: Option<Vec<BuiltDocs>> = if copied.is_empty() && adopted.is_none() {
        batches
            .iter()
            .zip(built)
            .map(|(b, docs)| Some((docs?, b.deleted.clone())))
            .collect()
    } else {
        None
    };
    let encoded = blocking(shared, move || {
        let live: Vec<RecordBatch> = batches.iter().map(MemBatch::live).collect::<Result<_>>()?;
        let docs = match (all, adopted) {
            (Some(all), _) => Built::All(all),
            (None, None) if copied.is_empty() => Built::None,
            (None, adopted) => Built::Some(
                copied,
                rest.iter().map(|&i| live[i].clone()).collect(),
                adopted.map(|(job, taken)| Adopted { job, taken }),
            ),
        };
        let index = index.as_deref().map(|i| (i, seq, docs));
        sorted_parquet(&schema, &live, index, page_bytes)
    })
    .await?;
    match encoded {
        Some(encoded) => install_file(shared, seq, encoded, vectors).await.map(Some),
        None => Ok(None),
    }
}

/// Stores an encoded segment as segment `seq`.
async fn install_file(
    shared: &Arc<Shared>,
    seq: u64,
    encoded: Encoded,
    vectors: RoaringTreemap,
) -> Result<Segment> {
    let path = shared.store.path(&segment_name(seq));
    let size = encoded.bytes.len() as u64;
    segment::put(&shared.store.store, &path, encoded.bytes).await?;
    Ok(Segment {
        seq,
        file: shared.store.segment_file(path, size),
        rows: encoded.rows,
        vectors: Arc::new(vectors & &encoded.ids),
        ids: Arc::new(encoded.ids),
        deleted: Arc::new(RoaringTreemap::new()),
        index: encoded.index.map(Arc::new),
    })
}

/// Runs `work` on a thread of its own at a lower CPU priority (nice about 10, which the threads
/// it starts inherit, tantivy's indexing threads among them): segment flushes and merges yield
/// the cores to requests and queries, as a database's background compaction does, and still
/// get a share when the machine is busy. Where the priority cannot be set, it runs as it is.
pub(super) fn low_priority<T: Send>(work: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("strata-segment".to_owned())
            .spawn_scoped(scope, || {
                if let Ok(low) = ThreadPriorityValue::try_from(24u8) {
                    // Only a hint: the work is the same either way.
                    let _ = set_current_thread_priority(ThreadPriority::Crossplatform(low));
                }
                work()
            })
            .map_err(|e| Error::Arrow(format!("cannot start a segment thread: {e}")))?;
        thread
            .join()
            .map_err(|_| Error::Arrow("a segment thread panicked".to_owned()))?
    })
}

/// Concatenates `live`, sorts by `_row_id`, encodes Parquet and builds the indexes of segment
/// `seq` when the table has some, at a low priority, in Parquet pages of about `page_bytes`.
/// `None` for no rows.
fn sorted_parquet(
    schema: &arrow_schema::SchemaRef,
    live: &[RecordBatch],
    index: Option<SegmentIndexing<'_>>,
    page_bytes: usize,
) -> Result<Option<Encoded>> {
    low_priority(|| encode_segment(schema, live, index, page_bytes))
}

/// A document index built already over some of a new segment's rows (a memtable batch's or
/// an older segment's), with the row ids deleted from it since.
pub(super) type BuiltDocs = (DocsIndex, Arc<RoaringTreemap>);

/// The document indexes built already over a new segment's rows.
enum Built {
    /// None: the rows are indexed.
    None,
    /// Of every row (older segments', or small memtable batches'): merged.
    All(Vec<BuiltDocs>),
    /// Of the rows of some memtable batches (the big ones): copied as they are, and the
    /// live rows of the other batches, these, indexed; and the batches of a running
    /// background indexing job, whose result is taken once it ends.
    Some(Vec<BuiltDocs>, Vec<RecordBatch>, Option<Adopted>),
}

/// A running background indexing job whose batches a flush took.
struct Adopted {
    job: Arc<merge::Job>,
    /// The job's batches as the flush took them (rows deleted since the job took them).
    taken: Vec<MemBatch>,
}

impl Adopted {
    /// Waits for the job: its index, with the rows deleted from its batches between the job's
    /// start and the flush's (those deleted before are not in it; those deleted after are
    /// the segment's tombstones).
    fn wait(&self) -> Result<BuiltDocs> {
        let built = self.job.wait()?;
        let docs = built.docs.lock().clone().ok_or_else(|| {
            Error::Index("a background indexing job ended without an index".to_owned())
        })?;
        let deleted = MemBatch::deleted_since(&self.taken, &self.job.parts);
        Ok((docs, Arc::new(deleted)))
    }
}

/// `parts` as [`DocsParts`] takes them.
fn refs(parts: &[BuiltDocs]) -> Vec<(&DocsIndex, &RoaringTreemap)> {
    parts.iter().map(|(i, deleted)| (i, &**deleted)).collect()
}

/// Most memtable batches' indexes copied into one segment's: each is a tantivy segment that
/// every query of the segment reads, until a compaction merges them.
const COPIED_PARTS: usize = 12;

/// What a new segment's indexes are made of: the table's index spec, the segment's number,
/// and the document indexes built already over its rows.
type SegmentIndexing<'a> = (&'a IndexSpec, u64, Built);

fn encode_segment(
    schema: &arrow_schema::SchemaRef,
    live: &[RecordBatch],
    index: Option<SegmentIndexing<'_>>,
    page_bytes: usize,
) -> Result<Option<Encoded>> {
    let all = compute::concat_batches(schema, live).map_err(arrow_error)?;
    if all.num_rows() == 0 {
        return Ok(None);
    }
    // Rows arrive in row id order unless updates moved some: sorted only when they need it.
    let sorted = if row_ids(&all)?.values().is_sorted() {
        all
    } else {
        let order = compute::sort_to_indices(
            all.column_by_name(ROW_ID)
                .ok_or_else(|| Error::Arrow(format!("no {ROW_ID} column")))?,
            None,
            None,
        )
        .map_err(arrow_error)?;
        compute::take_record_batch(&all, &order).map_err(arrow_error)?
    };
    let ids = super::rows::id_set(row_ids(&sorted)?.values());
    let rows = sorted.num_rows() as u64;
    // The Parquet file is encoded on a thread of its own while the indexes are built.
    let (bytes, index) = std::thread::scope(|scope| {
        let parquet = scope.spawn(|| {
            let started = std::time::Instant::now();
            let bytes = segment::encode_parquet(std::slice::from_ref(&sorted), page_bytes);
            tracing::debug!(
                rows,
                parquet_us = started.elapsed().as_micros(),
                "segment file encoded"
            );
            bytes
        });
        let index = match index {
            Some((spec, seq, docs)) => {
                let (parts, rest, adopted) = match &docs {
                    Built::None => (Vec::new(), None, None),
                    Built::All(parts) => (refs(parts), None, None),
                    Built::Some(parts, rest, adopted) => (
                        refs(parts),
                        Some(compute::concat_batches(schema, rest).map_err(arrow_error)?),
                        adopted.as_ref(),
                    ),
                };
                let pending = adopted.map(|a| move || a.wait());
                let docs = match (&docs, &rest) {
                    (Built::All(_), _) => Some(DocsParts::Merged(&parts)),
                    (Built::Some(..), Some(rest)) => Some(DocsParts::Copied(
                        &parts,
                        rest,
                        pending
                            .as_ref()
                            .map(|p| p as &(dyn Fn() -> Result<BuiltDocs> + Sync)),
                    )),
                    _ => None,
                };
                spec.build(seq, &sorted, docs).map(Some)
            }
            None => Ok(None),
        };
        let bytes = parquet
            .join()
            .map_err(|_| Error::Arrow("the Parquet encoding thread panicked".to_owned()))?;
        Ok::<_, Error>((bytes?, index?))
    })?;
    Ok(Some(Encoded {
        bytes,
        ids,
        rows,
        index,
    }))
}

/// Merges tiers of small segments (and drops their tombstoned rows) while one is full: a
/// merged segment may fill the tier above.
pub(super) async fn compact(shared: &Arc<Shared>) -> Result<()> {
    while compact_once(shared).await? {}
    Ok(())
}

/// Merges the smallest full tier of small segments, if any; whether it did.
async fn compact_once(shared: &Arc<Shared>) -> Result<bool> {
    let jobs = shared.jobs.read().await;
    if *jobs {
        return Ok(false);
    }
    let (inputs, seq) = {
        let mut state = shared.state.lock();
        if state.compacting {
            return Ok(false);
        }
        let inputs = tier_to_merge(
            &state.segments,
            shared.options.small_segment_rows,
            shared.options.compact_min_segments.max(2),
        );
        if inputs.is_empty() {
            return Ok(false);
        }
        state.compacting = true;
        let seq = state.next_segment;
        state.next_segment += 1;
        (inputs, seq)
    };
    let result = merge(shared, seq, &inputs).await;
    {
        let mut state = shared.state.lock();
        state.compacting = false;
        install_compaction(&mut state, &inputs, result?);
        shared.publish(&state);
    }
    write_manifest(shared).await?;
    drop(jobs);
    tracing::debug!(table = %shared.table.name, segments = inputs.len(), "compacted");
    Ok(true)
}

/// Segments of a tier hold at most this many times the live rows of the tier's smallest...
const TIER_RATIO: u64 = 4;
/// ...counting segments smaller than this as this big, so that tiny ones share the lowest tier.
const TIER_FLOOR: u64 = 4096;

/// The segments the next compaction merges: the smallest tier of small segments (fewer live
/// rows than `small_rows`) that has at least `min_segments` of them, or none.
///
/// Size-tiered, as in an LSM tree: segments merge with segments of about their size, so a row
/// is rewritten once per tier it climbs (a logarithmic number of times), not at every
/// compaction. Merging everything small at once would rewrite the biggest small segment each
/// time, and rebuild its vector graph, the costliest index there is.
fn tier_to_merge(segments: &[Segment], small_rows: u64, min_segments: usize) -> Vec<Segment> {
    let mut small: Vec<&Segment> = segments
        .iter()
        .filter(|s| s.live_rows() < small_rows)
        .collect();
    small.sort_by_key(|s| (s.live_rows(), s.seq));
    let mut tier: Vec<&Segment> = Vec::new();
    for segment in small {
        let bound = tier
            .first()
            .map(|first| first.live_rows().max(TIER_FLOOR) * TIER_RATIO);
        if bound.is_some_and(|bound| segment.live_rows() > bound) {
            if tier.len() >= min_segments {
                break;
            }
            tier.clear();
        }
        tier.push(segment);
    }
    if tier.len() < min_segments {
        return Vec::new();
    }
    tier.into_iter().cloned().collect()
}

/// Writes the live rows of `inputs` as one segment `seq`.
async fn merge(shared: &Arc<Shared>, seq: u64, inputs: &[Segment]) -> Result<Option<Segment>> {
    let mut parts = Vec::new();
    for segment in inputs {
        let file = shared.store.store.get(&segment.file.path).await?;
        parts.push((file.bytes().await?, segment.deleted.clone()));
    }
    // The segments' document indexes, when every one is open, are merged into the new one's.
    let docs: Option<Vec<BuiltDocs>> = inputs
        .iter()
        .map(|s| Some((s.index.as_ref()?.docs.clone()?, s.deleted.clone())))
        .collect();
    let vectors = inputs.iter().fold(RoaringTreemap::new(), |acc, s| {
        acc | (&*s.vectors - &*s.deleted)
    });
    let schema = shared.schema.clone();
    let index = shared.index.clone();
    let page_bytes = shared.options.page_bytes;
    let encoded = blocking(shared, move || {
        let mut live = Vec::new();
        for (bytes, deleted) in parts {
            for batch in read_parquet(bytes)? {
                let mask: arrow::array::BooleanArray = row_ids(&batch)?
                    .values()
                    .iter()
                    .map(|id| Some(!deleted.contains(*id)))
                    .collect();
                let batch = compute::filter_record_batch(&batch, &mask).map_err(arrow_error)?;
                // In the table's current schema, with its field definitions (Parquet does not
                // keep all of them, and the segment may predate columns the table has now).
                live.push(super::rows::conform(&schema, &batch)?);
            }
        }
        let docs = docs.map_or(Built::None, Built::All);
        sorted_parquet(
            &schema,
            &live,
            index.as_deref().map(|i| (i, seq, docs)),
            page_bytes,
        )
    })
    .await?;
    match encoded {
        Some(encoded) => install_file(shared, seq, encoded, vectors).await.map(Some),
        None => Ok(None),
    }
}

fn install_compaction(state: &mut State, inputs: &[Segment], merged: Option<Segment>) {
    let mut later = RoaringTreemap::new();
    for input in inputs {
        if let Some(now) = state.segments.iter().find(|s| s.seq == input.seq) {
            later |= &*now.deleted - &*input.deleted;
            now.file.retire();
            if let Some(index) = &now.index {
                index.retire();
            }
        }
    }
    state
        .segments
        .retain(|s| !inputs.iter().any(|input| input.seq == s.seq));
    if let Some(mut merged) = merged {
        merged.deleted = Arc::new(later & &*merged.ids);
        state.segments.push(merged);
        state.segments.sort_by_key(|s| s.seq);
    }
}

pub(super) fn read_parquet(bytes: Bytes) -> Result<Vec<RecordBatch>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?.build()?;
    reader.collect::<Result<Vec<_>, _>>().map_err(arrow_error)
}

/// Writes a manifest of the current state and drops manifests older than the previous one.
async fn write_manifest(shared: &Arc<Shared>) -> Result<()> {
    let mut next = shared.manifests.lock().await;
    let manifest = {
        let state = shared.state.lock();
        Manifest {
            table_id: shared.table.id.clone(),
            checkpoint: state.flushed,
            next_row_id: state.next_row_id,
            next_segment: state.next_segment,
            segments: state
                .segments
                .iter()
                .map(|s| {
                    Ok(SegmentEntry {
                        seq: s.seq,
                        file: segment_name(s.seq),
                        bytes: s.file.bytes,
                        rows: s.rows,
                        ids: bitmap_to_text(&s.ids)?,
                        deleted: bitmap_to_text(&s.deleted)?,
                        vectors: bitmap_to_text(&s.vectors)?,
                    })
                })
                .collect::<Result<_>>()?,
        }
    };
    let seq = *next;
    segment::put(
        &shared.store.store,
        &shared.store.path(&manifest_name(seq)),
        manifest.encode()?,
    )
    .await?;
    *next += 1;
    if seq > 2 {
        match shared
            .store
            .store
            .delete(&shared.store.path(&manifest_name(seq - 2)))
            .await
        {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(error) => tracing::warn!(%error, "could not delete an old manifest"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(seq: u64, rows: u64, deleted: u64) -> Segment {
        let store = TableStore {
            store: Arc::new(object_store::memory::InMemory::new()),
            url: datafusion::execution::object_store::ObjectStoreUrl::parse("strata://t").unwrap(),
            prefix: Path::default(),
            index_dir: std::path::PathBuf::new(),
            local: None,
        };
        Segment {
            seq,
            file: store.segment_file(Path::from(format!("s{seq}")), 0),
            rows,
            ids: Arc::new((0..rows).collect()),
            deleted: Arc::new((0..deleted).collect()),
            vectors: Arc::new(RoaringTreemap::new()),
            index: None,
        }
    }

    fn seqs(segments: &[Segment]) -> Vec<u64> {
        segments.iter().map(|s| s.seq).collect()
    }

    #[test]
    fn segments_merge_with_segments_of_about_their_size() {
        // Three flush-sized segments and a merged one: the merged one waits for its peers.
        let segments = [
            segment(1, 200_000, 0),
            segment(2, 30_000, 0),
            segment(3, 30_000, 0),
            segment(4, 25_000, 0),
        ];
        assert_eq!(seqs(&tier_to_merge(&segments, 1 << 20, 3)), vec![4, 2, 3]);
        assert!(tier_to_merge(&segments, 1 << 20, 4).is_empty());
        // Tiny segments share the lowest tier, whatever their ratio.
        let tiny = [segment(1, 1, 0), segment(2, 3000, 0), segment(3, 40, 0)];
        assert_eq!(seqs(&tier_to_merge(&tiny, 1 << 20, 3)), vec![1, 3, 2]);
        // Deleted rows do not count: a shrunken segment joins the tier of its live rows.
        let shrunk = [
            segment(1, 200_000, 190_000),
            segment(2, 10_000, 0),
            segment(3, 12_000, 0),
        ];
        assert_eq!(seqs(&tier_to_merge(&shrunk, 1 << 20, 3)), vec![1, 2, 3]);
        // Segments that are not small never merge.
        assert!(tier_to_merge(&segments, 26_000, 2).is_empty());
        assert_eq!(seqs(&tier_to_merge(&segments, 30_001, 2)), vec![4, 2, 3]);
        // The smallest tier that is full goes first; a full bigger tier waits for the next run.
        let two_tiers = [
            segment(1, 100_000, 0),
            segment(2, 100_000, 0),
            segment(3, 8_000, 0),
            segment(4, 9_000, 0),
        ];
        assert_eq!(seqs(&tier_to_merge(&two_tiers, 1 << 20, 2)), vec![3, 4]);
    }
}
