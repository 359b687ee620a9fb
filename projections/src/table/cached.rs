//! A record filter's matches, kept per tantivy segment.
//!
//! A reader's record filter (its role's `Filter`, its aliases' filters) is the same query for
//! every read it makes, and a tantivy segment never changes once written: so the documents of
//! a segment that a filter matches are found once, kept, and reused by every later search (as
//! a bitset the search's query is intersected with) and every SQL statement (as the row ids a
//! scan keeps), until the segment is merged away or the cache evicts them (least recently used
//! first, within [`BUDGET`] bytes).
//!
//! An entry is keyed by the segment's id and the filter's [`FilterKey`]: its text and what of
//! the dataset's schema it was compiled with. A filter whose meaning changes with the clock
//! (date math with `now`) must not be cached: [`FilterKey::of`] refuses it.
//!
//! A SQL scan needs more than the matches: which rows of each segment's Parquet file to read
//! ([`RowsWithin`]), found by walking the segments' ids. Those are kept by the snapshot they
//! were found in ([`KeptWithin`]), until the next write replaces it.

use std::{
    collections::VecDeque,
    fmt,
    sync::{Arc, LazyLock},
};

use lru::LruCache;
use parking_lot::Mutex;
use roaring::RoaringTreemap;
use tantivy::{
    BitSet, DocId, DocSet, Score, SegmentReader, TERMINATED, TantivyError,
    columnar::Column,
    index::SegmentId,
    query::{
        AllQuery, BitSetDocSet, ConstScorer, EnableScoring, Explanation, Query, Scorer, Weight,
    },
};

use super::{RowsWithin, docs::ROW_ID_FIELD};

/// The most bytes the kept matches of every filter and segment take together.
pub const BUDGET: usize = 64 << 20;

/// What a filter's matches in a segment are kept under, beside the segment: the filter as it
/// was compiled.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FilterKey(Arc<str>);

impl FilterKey {
    /// The key of filter `text` compiled with schema `schema` (a fingerprint of what the
    /// compilation read of the dataset's schema); `None` when its matches may change with the
    /// clock (`now` in date math), and so must be found again by each read.
    pub fn of(text: &str, schema: u64) -> Option<FilterKey> {
        (!text.contains("now")).then(|| FilterKey(format!("{schema:016x} {text}").into()))
    }
}

/// A snapshot's rows within each filter read from it lately ([`TableSnapshot::kept_within`]):
/// a snapshot lives until the next write, and reads in between share the work.
#[derive(Debug, Default)]
pub struct KeptWithin(Mutex<VecDeque<(FilterKey, Arc<RowsWithin>)>>);

/// How many filters' rows a snapshot keeps (one per role filter read from it, in practice).
const KEPT_PER_SNAPSHOT: usize = 4;

/// The most bytes one filter's rows may take to be kept: half a million runs of a clustered
/// filter's selections, or the ids of millions of rows (a scattered filter's positions take a
/// bit per row of its segments). Larger ones are found by each read.
pub const KEPT_ROWS_BYTES: usize = 8 << 20;

/// A copy of a snapshot keeps nothing: it may be changed.
impl Clone for KeptWithin {
    fn clone(&self) -> Self {
        KeptWithin::default()
    }
}

impl KeptWithin {
    /// The rows kept under `key`, or found now (by `find`) and kept.
    pub(crate) fn get_or_find<E>(
        &self,
        key: &FilterKey,
        find: impl FnOnce() -> Result<RowsWithin, E>,
    ) -> Result<Arc<RowsWithin>, E> {
        if let Some((_, rows)) = self.0.lock().iter().find(|(k, _)| k == key) {
            return Ok(rows.clone());
        }
        let rows = Arc::new(find()?);
        if rows.bytes() > KEPT_ROWS_BYTES {
            return Ok(rows);
        }
        let mut kept = self.0.lock();
        if kept.len() == KEPT_PER_SNAPSHOT {
            kept.pop_front();
        }
        kept.push_back((key.clone(), rows.clone()));
        Ok(rows)
    }
}

/// The documents of one tantivy segment that a filter matches, and their row ids.
#[derive(Debug)]
pub struct Matches {
    pub docs: BitSet,
    pub rows: RoaringTreemap,
}

impl Matches {
    fn bytes(&self) -> usize {
        self.docs.max_value() as usize / 8 + self.rows.serialized_size()
    }
}

/// The kept matches, by segment and filter, and the bytes they take.
struct Cache {
    entries: LruCache<(SegmentId, FilterKey), Arc<Matches>>,
    bytes: usize,
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| {
    Mutex::new(Cache {
        entries: LruCache::unbounded(),
        bytes: 0,
    })
});

/// The matches of `filter` in `reader`'s segment: kept ones, or found now (by `find`) and kept.
fn matches(
    reader: &SegmentReader,
    key: &FilterKey,
    find: impl FnOnce() -> tantivy::Result<Matches>,
) -> tantivy::Result<Arc<Matches>> {
    let id = (reader.segment_id(), key.clone());
    if let Some(found) = CACHE.lock().entries.get(&id) {
        return Ok(found.clone());
    }
    // Found outside the lock: two readers missing at once both find, and one keeps its own.
    let found = Arc::new(find()?);
    CACHE.lock().keep(id, found.clone(), BUDGET);
    Ok(found)
}

impl Cache {
    /// Keeps `found` under `id`, the least recently used entries evicted past `budget` bytes.
    fn keep(&mut self, id: (SegmentId, FilterKey), found: Arc<Matches>, budget: usize) {
        let bytes = found.bytes();
        if let Some(old) = self.entries.put(id, found) {
            self.bytes -= old.bytes();
        }
        self.bytes += bytes;
        while self.bytes > budget {
            match self.entries.pop_lru() {
                Some((_, evicted)) => self.bytes -= evicted.bytes(),
                None => break,
            }
        }
    }
}

/// Every document of `reader`'s segment that `weight` matches, with its row id.
fn find(weight: &dyn Weight, reader: &SegmentReader) -> tantivy::Result<Matches> {
    let row_ids: Column<u64> = reader.fast_fields().u64(ROW_ID_FIELD)?;
    let mut docs = BitSet::with_max_value(reader.max_doc());
    let mut rows = RoaringTreemap::new();
    let mut scorer = weight.scorer(reader, 1.0)?;
    let mut doc = scorer.doc();
    while doc != TERMINATED {
        docs.insert(doc);
        if let Some(row_id) = row_ids.first(doc) {
            rows.insert(row_id);
        }
        doc = scorer.advance();
    }
    Ok(Matches { docs, rows })
}

/// A record filter whose matches are kept per segment: it matches what `inner` matches, each
/// document scored 1.
#[derive(Clone)]
pub struct CachedFilter {
    key: FilterKey,
    inner: Arc<dyn Query>,
}

impl fmt::Debug for CachedFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedFilter")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl CachedFilter {
    /// `inner`, the filter compiled, kept under `key`.
    pub fn new(key: FilterKey, inner: Box<dyn Query>) -> CachedFilter {
        CachedFilter {
            key,
            inner: Arc::from(inner),
        }
    }

    /// What the filter is kept under.
    pub fn key(&self) -> &FilterKey {
        &self.key
    }

    /// `query`'s matches that this filter keeps, scored by `query` (see [`Within`]).
    pub fn restrict(&self, query: Box<dyn Query>) -> Box<dyn Query> {
        // `match_all` matches every document with the score its boost gives, as this filter's
        // scorer does its own: the filter alone, its bitset walked, not every document tried.
        if query.downcast_ref::<AllQuery>().is_some() {
            return Box::new(self.clone());
        }
        Box::new(Within {
            query: Arc::from(query),
            filter: self.clone(),
        })
    }

    fn cached_weight(&self, scoring: &EnableScoring<'_>) -> tantivy::Result<CachedWeight> {
        // A filter's documents are found without their scores.
        let scoring = match scoring.searcher() {
            Some(searcher) => EnableScoring::disabled_from_searcher(searcher),
            None => EnableScoring::disabled_from_schema(scoring.schema()),
        };
        Ok(CachedWeight {
            key: self.key.clone(),
            inner: self.inner.weight(scoring)?,
        })
    }

    /// The matches of the filter in each of `searcher`'s segments, in its segment order.
    pub fn segments(&self, searcher: &tantivy::Searcher) -> tantivy::Result<Vec<Arc<Matches>>> {
        let weight = self
            .inner
            .weight(EnableScoring::disabled_from_searcher(searcher))?;
        searcher
            .segment_readers()
            .iter()
            .map(|reader| matches(reader, &self.key, || find(weight.as_ref(), reader)))
            .collect()
    }
}

impl Query for CachedFilter {
    fn weight(&self, scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(self.cached_weight(&scoring)?))
    }
}

struct CachedWeight {
    key: FilterKey,
    inner: Box<dyn Weight>,
}

impl CachedWeight {
    fn matches(&self, reader: &SegmentReader) -> tantivy::Result<Arc<Matches>> {
        matches(reader, &self.key, || find(self.inner.as_ref(), reader))
    }
}

impl Weight for CachedWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let docs = BitSetDocSet::from(self.matches(reader)?.docs.clone());
        Ok(Box::new(ConstScorer::new(docs, boost)))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let mut scorer = self.scorer(reader, 1.0)?;
        if scorer.seek(doc) != doc {
            return Err(TantivyError::InvalidArgument(format!(
                "document {doc} does not match"
            )));
        }
        Ok(Explanation::new("record filter", scorer.score()))
    }
}

/// The matches of a query that a kept filter keeps, scored by the query. The query leads: each
/// of its matches is looked up in the filter's bitset, so a filter that matches most records
/// costs no more than one that matches few, whatever tantivy would guess of their sizes.
#[derive(Clone, Debug)]
pub struct Within {
    query: Arc<dyn Query>,
    filter: CachedFilter,
}

impl Query for Within {
    fn weight(&self, scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(WithinWeight {
            filter: self.filter.cached_weight(&scoring)?,
            query: self.query.weight(scoring)?,
        }))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a tantivy::Term, bool)) {
        self.query.query_terms(visitor);
    }
}

struct WithinWeight {
    query: Box<dyn Weight>,
    filter: CachedWeight,
}

impl Weight for WithinWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let mut scorer = WithinScorer {
            query: self.query.scorer(reader, boost)?,
            kept: self.filter.matches(reader)?,
        };
        scorer.settle();
        Ok(Box::new(scorer))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        if !self.filter.matches(reader)?.docs.contains(doc) {
            return Err(TantivyError::InvalidArgument(format!(
                "document {doc} is not one the record filter keeps"
            )));
        }
        self.query.explain(reader, doc)
    }
}

struct WithinScorer {
    query: Box<dyn Scorer>,
    kept: Arc<Matches>,
}

impl WithinScorer {
    /// Moves on from the query's document to the first the filter keeps.
    fn settle(&mut self) -> DocId {
        let mut doc = self.query.doc();
        while doc != TERMINATED && !self.kept.docs.contains(doc) {
            doc = self.query.advance();
        }
        doc
    }
}

impl DocSet for WithinScorer {
    fn advance(&mut self) -> DocId {
        self.query.advance();
        self.settle()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        self.query.seek(target);
        self.settle()
    }

    fn doc(&self) -> DocId {
        self.query.doc()
    }

    fn size_hint(&self) -> u32 {
        self.query.size_hint()
    }
}

impl Scorer for WithinScorer {
    fn score(&mut self) -> Score {
        self.query.score()
    }
}

#[cfg(test)]
mod tests;
