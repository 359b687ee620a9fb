//! Merging the memtable of a table with a document index, and indexing it, in the background.
//!
//! A memtable is many small batches (one per write); past `memtable_batches` of them they are
//! merged, so that a snapshot stays short. A data-plane table merges in place as it applies
//! (its text tails merge incrementally). A dataset's document index cannot merge so: a merged
//! batch would need its tantivy index built again over every row in it, and built on first use
//! that is the first search's wait, seconds long under ingest, repeated at every merge, with
//! every other search of the table queued behind it.
//!
//! So a dataset merges here instead, off the apply path and at a low priority:
//! - the batches to merge are the newest ones whose rows add up to at least each older one
//!   taken (size tiers, as an LSM tree's: every row is merged again only a few times before its
//!   flush, not at every merge);
//! - their live rows are concatenated into a new batch and their document indexes merged
//!   into its (tantivy's segment merge: postings copied, no row analyzed again), while
//!   searches go on using the batches as they are (each with the index built as it was
//!   applied);
//! - the new batch replaces them only if they are still the memtable's (a flush may have taken
//!   them meanwhile: then the work is dropped), with the rows deleted during the merge marked
//!   deleted in it. Readers see it at the next write or the next maintenance tick, when the
//!   table's published snapshot is refreshed, as after a flush.
//!
//! A dataset nobody searches lately (a bulk load's) indexes its batches here too, as it does
//! not index them as they are applied: the oldest batches not indexed, once they hold
//! `index_rows` rows (see [`super::TableOptions`]), are merged into one and its rows indexed,
//! a job at a time. Indexed batches are not merged again; the flush copies their indexes into
//! its segment's, and takes a running job's result with the job's batches (see [`Job`]).

use std::sync::Arc;

use roaring::RoaringTreemap;

use parking_lot::{Condvar, Mutex};

use super::{MemBatch, Shared, State, maintenance, rows};
use crate::error::{Error, Result};

/// Whether `shared`'s memtable merges here rather than in place.
pub(super) fn in_background(shared: &Shared) -> bool {
    shared.index.as_ref().is_some_and(|i| i.docs.is_some())
}

/// A background indexing job: the batches it indexes and, once it ends, the batch it built.
/// A flush that takes the batches while the job runs takes the job's result with them (see
/// [`maintenance`]): it indexes its other rows meanwhile, rather than wait for the job before
/// it takes the memtable, or drop the job's work and index its rows again.
pub(super) struct Job {
    /// The batches, as they were when the job took them.
    pub(super) parts: Vec<MemBatch>,
    built: Mutex<Option<std::result::Result<MemBatch, String>>>,
    ended: Condvar,
}

impl Job {
    /// Waits for the job to end: the live rows of its batches as one batch, indexed.
    pub(super) fn wait(&self) -> Result<MemBatch> {
        let mut built = self.built.lock();
        loop {
            match &*built {
                Some(Ok(batch)) => return Ok(batch.clone()),
                Some(Err(error)) => return Err(Error::Index(error.clone())),
                None => self.ended.wait(&mut built),
            }
        }
    }

    fn end(&self, built: std::result::Result<MemBatch, String>) {
        *self.built.lock() = Some(built);
        self.ended.notify_all();
    }
}

/// Starts a background merge, or indexing, if the memtable calls for one and none is running.
pub(super) fn start(shared: &Arc<Shared>, state: &mut State) {
    if state.merging {
        return;
    }
    let indexing = indexing(shared);
    let (parts, index) = match indexing
        .then(|| to_index(&state.memtable, shared.options.index_rows))
        .flatten()
    {
        Some(parts) => (parts, true),
        None if state.memtable.len() <= shared.options.memtable_batches => return,
        None => {
            // While indexing, built batches stay as they are: the newest unbuilt ones merge.
            let from = if indexing {
                unbuilt(&state.memtable)
            } else {
                0
            };
            (tier(&state.memtable[from..]), false)
        }
    };
    if parts.len() < 2 && !index {
        return;
    }
    state.merging = true;
    let job = index.then(|| {
        Arc::new(Job {
            parts: parts.clone(),
            built: Mutex::new(None),
            ended: Condvar::new(),
        })
    });
    state.job = job.clone();
    let shared = shared.clone();
    shared.runtime.clone().spawn(async move {
        let merged = tokio::task::spawn_blocking({
            let (shared, job) = (shared.clone(), job.clone());
            move || {
                let built = maintenance::low_priority(|| build(&shared, &parts, index));
                // Ended here, on the job's own thread: a flush waiting for it does not
                // depend on this task being polled again.
                if let Some(job) = &job {
                    job.end(match &built {
                        Ok(batch) => Ok(batch.clone()),
                        Err(error) => Err(error.to_string()),
                    });
                }
                built.map(|m| (parts, m))
            }
        })
        .await;
        let mut state = shared.state.lock();
        state.merging = false;
        state.job = None;
        match merged {
            Ok(Ok((parts, merged))) => {
                install(&shared, &mut state, &parts, merged);
                // Batches that came meanwhile may make up the next merge.
                start(&shared, &mut state);
            }
            Ok(Err(error)) => {
                tracing::warn!(table = %shared.table.name, %error, "memtable merge failed; the batches stay as they are");
            }
            Err(error) => {
                tracing::warn!(table = %shared.table.name, %error, "memtable merge stopped; the batches stay as they are");
            }
        }
    });
}

/// Whether the memtable's rows are indexed in the background, a run of batches at a time: a
/// dataset's that nobody searched lately (else each batch is indexed as it is applied; see
/// [`super::SearchedAt`]).
///
/// Its flush then finds most of its rows indexed already and copies their indexes into the
/// segment's (see [`super::docs::DocsSchema::assembled_in_dir`]), where it would index them
/// all at once. The indexing starts with the first rows a bulk load sends, on the core its
/// requests leave idle, at a low priority.
fn indexing(shared: &Shared) -> bool {
    shared.options.index_rows > 0
        && shared
            .index
            .as_ref()
            .is_some_and(|i| i.docs.is_some() && !i.index_at_apply())
}

/// Where the batches after the newest built one begin.
fn unbuilt(memtable: &[MemBatch]) -> usize {
    memtable
        .iter()
        .rposition(|b| b.docs.lock().is_some())
        .map_or(0, |i| i + 1)
}

/// The oldest batches not indexed after the newest that is, to index as one: at least `least`
/// rows (whole batches, up to about four times as many: a flush waits for a running job
/// before it takes the memtable), else none yet.
fn to_index(memtable: &[MemBatch], least: usize) -> Option<Vec<MemBatch>> {
    let from = unbuilt(memtable);
    let mut rows = 0;
    let mut to = from;
    while to < memtable.len() && rows < least * 4 {
        rows += memtable[to].batch.num_rows();
        to += 1;
    }
    (rows >= least).then(|| memtable[from..to].to_vec())
}

/// The newest batches to merge: taken from the newest back while each older one holds no more
/// rows than those taken so far.
fn tier(memtable: &[MemBatch]) -> Vec<MemBatch> {
    let mut rows = 0;
    let mut first = memtable.len();
    for (i, batch) in memtable.iter().enumerate().rev() {
        let n = batch.batch.num_rows();
        if first < memtable.len() && n > rows {
            break;
        }
        rows += n;
        first = i;
    }
    memtable[first..].to_vec()
}

/// The live rows of `parts` as one batch, its text tail and its document index built: the
/// parts' own indexes merged when every one is built, else its rows indexed (when `index`, or
/// the dataset is searched).
fn build(shared: &Shared, parts: &[MemBatch], index: bool) -> Result<MemBatch> {
    let batch = concat(parts)?;
    let built: Option<Vec<_>> = parts
        .iter()
        .map(|p| Some((p.docs.lock().clone()?, p.deleted.clone())))
        .collect();
    let schema = shared.index.as_ref().and_then(|i| i.docs.as_ref());
    match (schema, built) {
        (Some(schema), Some(built)) => {
            let parts: Vec<_> = built.iter().map(|(d, deleted)| (d, &**deleted)).collect();
            *batch.docs.lock() = Some(schema.merged_in_ram(&parts)?);
        }
        // Built here, so that no search waits for it, while the dataset is searched; else
        // left to the first search or the flush (see `SearchedAt`).
        _ if index || shared.index.as_ref().is_some_and(|i| i.index_at_apply()) => {
            batch.docs_index(shared.index.as_deref())?;
        }
        _ => {}
    }
    if shared.index.as_ref().is_some_and(|i| i.tails_at_apply()) {
        batch.text_tail(shared.index.as_deref())?;
    }
    Ok(batch.measured())
}

/// The live rows of `parts` as one batch, with their text tails merged.
pub(super) fn concat(parts: &[MemBatch]) -> Result<MemBatch> {
    let Some(first) = parts.first() else {
        return Err(crate::error::Error::Index("nothing to merge".to_owned()));
    };
    let live: Vec<_> = parts.iter().map(MemBatch::live).collect::<Result<_>>()?;
    let merged =
        arrow::compute::concat_batches(&first.batch.schema(), &live).map_err(rows::arrow_error)?;
    // The parts' tails merged when every one is built; else built when needed.
    let tails: Option<Vec<_>> = parts
        .iter()
        .map(|m| Some((m.text.lock().clone()?, m.deleted.clone())))
        .collect();
    let text = tails.map(|tails| {
        Arc::new(super::text::TextTail::merge(
            tails
                .iter()
                .map(|(tail, deleted)| (tail.as_ref(), deleted.as_ref())),
        ))
    });
    let mut ids = RoaringTreemap::new();
    let mut vectors = RoaringTreemap::new();
    for part in parts {
        ids |= &*part.ids - &*part.deleted;
        vectors |= &*part.vectors - &*part.deleted;
    }
    Ok(MemBatch {
        batch: merged,
        ids: Arc::new(ids),
        deleted: Arc::new(RoaringTreemap::new()),
        vectors: Arc::new(vectors),
        text: Arc::new(parking_lot::Mutex::new(text)),
        docs: Arc::default(),
        series: Arc::default(),
        memory_bytes: 0,
    }
    .measured())
}

/// Puts `merged` in the place of `parts`, if they are still in the memtable.
fn install(shared: &Shared, state: &mut State, parts: &[MemBatch], mut merged: MemBatch) {
    let same = |a: &MemBatch, b: &MemBatch| Arc::ptr_eq(&a.ids, &b.ids);
    let Some(at) = state
        .memtable
        .windows(parts.len())
        .position(|w| w.iter().zip(parts).all(|(a, b)| same(a, b)))
    else {
        return; // flushed meanwhile
    };
    // Rows deleted while the merge ran are in the merged batch: delete them there.
    let later = MemBatch::deleted_since(&state.memtable[at..at + parts.len()], parts);
    merged.deleted = Arc::new(later & &*merged.ids);
    let replaced: Vec<MemBatch> = state
        .memtable
        .splice(at..at + parts.len(), [merged.clone()])
        .collect();
    state.memtable_rows = state.memtable_rows + merged.batch.num_rows()
        - replaced.iter().map(|m| m.batch.num_rows()).sum::<usize>();
    state.memtable_bytes = (state.memtable_bytes + merged.memory_bytes)
        .saturating_sub(replaced.iter().map(|m| m.memory_bytes).sum());
    shared.publish(state);
}
