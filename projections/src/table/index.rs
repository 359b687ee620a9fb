//! The indexes of a segment: its tantivy index and its vector index, built when the segment is
//! written (by a flush or a compaction) and immutable afterwards, like the segment.
//!
//! They live in a local directory per table, `<seq>/` per segment, even when the segments are in
//! a bucket: they can always be rebuilt from their segment, and are when missing (a new node, a
//! lost directory, a table from before indexes). A directory is built under a temporary name and
//! renamed into place when complete; the manifest that names the segment is written after it,
//! so a directory no manifest names is left over from an interrupted job and is removed.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use arrow::array::RecordBatch;
use roaring::RoaringTreemap;

use super::{
    docs::{DocsIndex, DocsSchema},
    series::SeriesSet,
    stored::RowStore,
    text::{SegmentText, TextSchema, build_segment_index, index_error},
    vector::{SegmentVectors, VectorOptions},
};
use crate::{
    catalog::{TableDef, VectorMetric},
    error::Result,
    schema::ColumnType,
};

/// What a table indexes, and where.
#[derive(Clone, Debug)]
pub struct IndexSpec {
    pub dir: PathBuf,
    pub text: Option<TextSchema>,
    /// Whether each segment gets a text index of its own (see [`IndexSpec::segment_text`]).
    segment_text: bool,
    pub vector: Option<VectorSpec>,
    /// A dataset's document index (the Query DSL's).
    pub docs: Option<DocsSchema>,
    /// A metrics dataset's series index (PromQL's).
    pub series: bool,
    pub options: VectorOptions,
    /// When the table's document indexes were last searched (shared by the spec's clones).
    pub searched: Arc<SearchedAt>,
}

/// When a dataset's document indexes were last searched: whether a new batch's index is built
/// as the batch is applied, before its write is acknowledged.
///
/// Built at apply, a search under ingest never waits for an index (issue 21), but every write
/// waits for its own, and indexing every field of every record bounds how fast records are
/// taken in (an import, a bulk load nobody searches yet). So a batch is indexed at apply only
/// while the table has been searched within [`SearchedAt::LATELY`]; otherwise its index is
/// built by the first search that needs it (which marks the table searched, so that the
/// batches after it are indexed at apply again), or by the flush that writes it to a segment,
/// on the segment thread.
#[derive(Debug, Default)]
pub struct SearchedAt {
    /// Milliseconds since [`SearchedAt::origin`], plus one; 0: never.
    at: AtomicU64,
}

impl SearchedAt {
    /// How long after a search new batches are still indexed as they are applied.
    pub const LATELY: Duration = Duration::from_secs(600);

    fn origin() -> Instant {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        *ORIGIN.get_or_init(Instant::now)
    }

    /// Notes a search now.
    pub fn mark(&self) {
        let now = Self::origin().elapsed().as_millis() as u64 + 1;
        self.at.fetch_max(now, Ordering::Relaxed);
    }

    /// Whether the table was searched within [`Self::LATELY`].
    pub fn lately(&self) -> bool {
        match self.at.load(Ordering::Relaxed) {
            0 => false,
            at => {
                let now = Self::origin().elapsed().as_millis() as u64 + 1;
                now.saturating_sub(at) <= Self::LATELY.as_millis() as u64
            }
        }
    }
}

#[derive(Clone, Debug)]
pub struct VectorSpec {
    pub column: String,
    pub dim: usize,
    pub metric: VectorMetric,
}

const TEXT_DIR: &str = "text";
const VECTOR_DIR: &str = "vectors";
const DOCS_DIR: &str = "docs";
const SERIES_FILE: &str = "series";

impl IndexSpec {
    /// `None` when the table indexes nothing.
    pub fn of(table: &TableDef, dir: PathBuf, options: VectorOptions) -> Option<IndexSpec> {
        let text = TextSchema::of(table);
        let vector = table.vector_column.as_ref().and_then(|column| {
            Some(VectorSpec {
                column: column.clone(),
                dim: table.vector_dim()?,
                metric: table.vector_metric.unwrap_or(VectorMetric::Cosine),
            })
        });
        // A metrics dataset's samples are read by series, not searched as documents.
        let docs = (table.dataset && !table.metrics).then(|| DocsSchema::of(table));
        let series = table.metrics;
        if text.is_none() && vector.is_none() && docs.is_none() && !series {
            return None;
        }
        // A dataset's string columns are keywords of its document index, which answers exact
        // matches on them: without full-text columns, its segments need no text index.
        let keywords = |t: &TextSchema| {
            t.exact.iter().all(|(name, _)| {
                table
                    .columns
                    .iter()
                    .any(|c| &c.name == name && c.data_type == ColumnType::Utf8)
            })
        };
        let segment_text = text
            .as_ref()
            .is_some_and(|t| docs.is_none() || !t.text.is_empty() || !keywords(t));
        Some(IndexSpec {
            dir,
            text,
            segment_text,
            vector,
            docs,
            series,
            options,
            searched: Arc::default(),
        })
    }

    /// The text schema of the table's segment indexes; `None` when its segments have no text
    /// index. A dataset without full-text columns keeps none: its exact-match column (`_id`)
    /// is a keyword of its document index, where [`crate::table::TableSnapshot::exact_match`]
    /// looks it up, so a second index of the same values would be built on every flush for
    /// nothing. (Its memtable batches keep their exact-match maps: see [`MemBatch`].)
    ///
    /// [`MemBatch`]: super::MemBatch
    pub fn segment_text(&self) -> Option<&TextSchema> {
        self.text.as_ref().filter(|_| self.segment_text)
    }

    /// Whether a new batch's document index is built as it is applied (see [`SearchedAt`]).
    pub fn index_at_apply(&self) -> bool {
        self.docs.is_some() && self.searched.lately()
    }

    /// Whether a batch's text tail is built as it is applied: always for a data-plane table
    /// (its searches under ingest never wait for one); for a dataset, whose only tail is its
    /// `_id` map, while it is searched (else a lookup by `_id` builds what it needs).
    pub fn tails_at_apply(&self) -> bool {
        self.docs.is_none() || self.searched.lately()
    }

    /// Whether searches return the table's rows (by text, vector or document query), so that
    /// its segments store their rows whole for them (see [`super::stored`]). A metrics
    /// dataset's samples are read by series.
    fn searched_for_rows(&self) -> bool {
        self.text.is_some() || self.vector.is_some() || self.docs.is_some()
    }

    fn segment_dir(&self, seq: u64) -> PathBuf {
        self.dir.join(format!("{seq:012}"))
    }

    /// Builds the indexes of segment `seq` from its rows (in the table schema, sorted). With
    /// `docs`, the document indexes built already over those rows are taken into the
    /// segment's rather than their rows indexed again.
    pub(crate) fn build(
        &self,
        seq: u64,
        rows: &RecordBatch,
        docs: Option<DocsParts<'_>>,
    ) -> Result<SegmentIndex> {
        let dir = self.segment_dir(seq);
        let building = self.dir.join(format!("{seq:012}.building"));
        if building.exists() {
            std::fs::remove_dir_all(&building).map_err(index_error)?;
        }
        std::fs::create_dir_all(&building).map_err(index_error)?;
        let vectors = match self.build_in(&building, rows, docs) {
            Ok(vectors) => vectors,
            Err(error) => {
                // A failed build (a full disk, say) leaves nothing behind to take up room.
                if let Err(removing) = std::fs::remove_dir_all(&building) {
                    tracing::warn!(dir = %building.display(), %removing, "cannot remove a failed index build");
                }
                return Err(error);
            }
        };
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(index_error)?;
        }
        std::fs::rename(&building, &dir).map_err(index_error)?;
        sync_dir(&self.dir)?;
        self.open_in(dir, vectors)
    }

    /// Writes the indexes of `rows` into the directory `building`; returns the vectors' index.
    fn build_in(
        &self,
        building: &Path,
        rows: &RecordBatch,
        docs: Option<DocsParts<'_>>,
    ) -> Result<Option<SegmentVectors>> {
        let started = std::time::Instant::now();
        if let Some(text) = self.segment_text() {
            build_segment_index(&building.join(TEXT_DIR), text, rows)?;
        }
        let text_us = started.elapsed().as_micros();
        match (&self.docs, docs) {
            (Some(schema), Some(DocsParts::Merged(parts))) => {
                schema.merged_in_dir(&building.join(DOCS_DIR), parts)?
            }
            (Some(schema), Some(DocsParts::Copied(parts, rest, pending))) => {
                schema.assembled_in_dir(&building.join(DOCS_DIR), parts, rest, pending)?
            }
            (Some(schema), None) => schema.build_in_dir(&building.join(DOCS_DIR), rows)?,
            (None, _) => {}
        }
        let docs_us = started.elapsed().as_micros() - text_us;
        if self.series {
            SeriesSet::build(rows)?.write(&building.join(SERIES_FILE))?;
        }
        if self.searched_for_rows() {
            RowStore::write(building, rows)?;
        }
        let rows_us = started.elapsed().as_micros() - text_us - docs_us;
        let vectors = self
            .vector
            .as_ref()
            .map(|v| {
                SegmentVectors::build(
                    &building.join(VECTOR_DIR),
                    v.metric,
                    &v.column,
                    rows,
                    &self.options,
                )
            })
            .transpose()?;
        tracing::debug!(
            rows = rows.num_rows(),
            docs = docs.map_or("indexed", DocsParts::how),
            text_us,
            docs_us,
            rows_us,
            vectors_us = started.elapsed().as_micros() - text_us - docs_us - rows_us,
            "segment indexes built"
        );
        Ok(vectors)
    }

    /// The indexes in segment directory `dir`: its text, document and series indexes opened,
    /// with its `vectors`.
    fn open_in(&self, dir: PathBuf, vectors: Option<SegmentVectors>) -> Result<SegmentIndex> {
        let text = match self.segment_text() {
            Some(_) => Some(SegmentText::open(&dir.join(TEXT_DIR))?),
            None => None,
        };
        let docs = match &self.docs {
            Some(_) => Some(DocsIndex::open(&dir.join(DOCS_DIR))?),
            None => None,
        };
        let series = match self.series {
            true => Some(SeriesSet::open(&dir.join(SERIES_FILE))?),
            false => None,
        };
        let rows = match self.searched_for_rows() {
            true => RowStore::open(&dir)?,
            false => None,
        };
        Ok(SegmentIndex::new(dir, text, vectors, docs, series, rows))
    }

    /// Opens the indexes of segment `seq`; `None` when they are not there (to be rebuilt).
    pub(crate) fn open(&self, seq: u64) -> Result<Option<SegmentIndex>> {
        let dir = self.segment_dir(seq);
        if !dir.is_dir() {
            return Ok(None);
        }
        let opened = (|| {
            let vectors = match &self.vector {
                Some(v) => Some(SegmentVectors::open(
                    &dir.join(VECTOR_DIR),
                    v.metric,
                    v.dim,
                )?),
                None => None,
            };
            self.open_in(dir.clone(), vectors)
        })();
        match opened {
            Ok(index) => Ok(Some(index)),
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "unreadable segment index; rebuilding it");
                Ok(None)
            }
        }
    }

    /// Removes index directories of segments other than `keep`.
    pub(crate) fn remove_others(&self, keep: &[u64]) -> Result<()> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(index_error(error)),
        };
        for entry in entries {
            let entry = entry.map_err(index_error)?;
            let name = entry.file_name();
            let seq = name.to_str().and_then(|n| n.parse::<u64>().ok());
            if !seq.is_some_and(|seq| keep.contains(&seq)) {
                tracing::info!(path = %entry.path().display(), "removing an orphaned segment index");
                match std::fs::remove_dir_all(entry.path()) {
                    // A retired index's own removal may get there first.
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                        return Err(index_error(error));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(index_error)
}

/// Document indexes built already over the rows of a new segment (see [`IndexSpec::build`]),
/// each with the row ids deleted from it.
#[derive(Clone, Copy)]
pub(crate) enum DocsParts<'a> {
    /// Of every row: merged into one (a compaction's, or a flush of small batches').
    Merged(&'a [(&'a DocsIndex, &'a RoaringTreemap)]),
    /// Of some rows: copied as they are, and the other rows, these, indexed (a flush's; see
    /// [`DocsSchema::assembled_in_dir`]); and one more part, given once the other rows are
    /// indexed (a running background job's).
    Copied(
        &'a [(&'a DocsIndex, &'a RoaringTreemap)],
        &'a RecordBatch,
        Option<&'a Pending<'a>>,
    ),
}

/// A part of a segment's document index that another thread is building: waits for it.
pub(crate) type Pending<'a> = dyn Fn() -> Result<super::maintenance::BuiltDocs> + Sync + 'a;

impl DocsParts<'_> {
    /// How the segment's document index is made, for its log line.
    fn how(self) -> &'static str {
        match self {
            DocsParts::Merged(_) => "merged",
            DocsParts::Copied(_, _, None) => "copied",
            DocsParts::Copied(_, _, Some(_)) => "copied, with a running job's",
        }
    }
}

/// A segment's opened indexes. Once retired with its segment, its directory is removed when the
/// last snapshot that can read it goes away.
pub struct SegmentIndex {
    dir: PathBuf,
    pub text: Option<SegmentText>,
    pub vectors: Option<SegmentVectors>,
    pub docs: Option<DocsIndex>,
    pub series: Option<SeriesSet>,
    /// The segment's rows stored whole, read by searches' hits; `None` for a segment written
    /// before they were stored (its hits are read from the Parquet file).
    pub rows: Option<RowStore>,
    retired: AtomicBool,
}

impl std::fmt::Debug for SegmentIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentIndex")
            .field("dir", &self.dir)
            .field("text", &self.text)
            .field("vectors", &self.vectors)
            .field("docs", &self.docs)
            .field("series", &self.series)
            .field("rows", &self.rows)
            .finish()
    }
}

impl SegmentIndex {
    fn new(
        dir: PathBuf,
        text: Option<SegmentText>,
        vectors: Option<SegmentVectors>,
        docs: Option<DocsIndex>,
        series: Option<SeriesSet>,
        rows: Option<RowStore>,
    ) -> SegmentIndex {
        SegmentIndex {
            dir,
            text,
            vectors,
            docs,
            series,
            rows,
            retired: AtomicBool::new(false),
        }
    }

    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }
}

impl Drop for SegmentIndex {
    fn drop(&mut self) {
        if self.retired.load(Ordering::Acquire)
            && let Err(error) = std::fs::remove_dir_all(&self.dir)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.dir.display(), %error, "could not remove a retired segment index");
        }
    }
}
