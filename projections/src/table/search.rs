//! Searches over a table snapshot: BM25, token match, exact match, count and vector k-NN, each
//! over every segment's index and the memtable's tail, skipping deleted rows; and the rows of a
//! result, read back from the segment store by row id.
//!
//! A row id is live in at most one place (a segment or a memtable batch), so a hit counts only
//! where its row is live: an updated row's old version, still in an older segment's index, is
//! deleted there.

use std::{collections::HashMap, sync::Arc};

use arrow::{
    array::{ArrayRef, RecordBatch, UInt32Array, UInt64Array},
    compute,
};
use arrow_schema::SchemaRef;
use bytes::Bytes;
use futures::TryStreamExt;
use futures::{FutureExt, future::BoxFuture};
use object_store::{ObjectStore, ObjectStoreExt, path::Path};
use parquet::{
    arrow::{
        ParquetRecordBatchStreamBuilder, ProjectionMask,
        arrow_reader::{
            ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
            RowSelector,
        },
        async_reader::AsyncFileReader,
    },
    errors::ParquetError,
    file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader},
};
use roaring::RoaringTreemap;
use tantivy::{
    DocAddress, Searcher, Term,
    collector::{Count, DocSetCollector, FilterCollector, TopDocs},
    fieldnorm::FieldNormReader,
    query::{Bm25Weight, BooleanQuery, Occur, Query, TermQuery},
    schema::{Field, IndexRecordOption},
};

use super::{
    MemBatch, Segment, TableSnapshot,
    docs::DocsIndex,
    rows::row_ids,
    rows::{ROW_ID, arrow_error},
    text::{
        CombinedStats, Memoized, ROW_ID_FIELD, SegmentText, TextSchema, TextTail, analyzer,
        index_error, tokens,
    },
    vector::{distance, nearest, vectors_of},
};
use crate::error::{Error, Result};

/// A row id and its score (BM25: higher is better; vectors: the distance, lower is better).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub row_id: u64,
    pub score: f32,
}

/// Row ids a search may return besides being live (a request's filter); `None`: all.
pub type Allowed = Option<Arc<RoaringTreemap>>;

fn allows(allowed: &Allowed, id: u64) -> bool {
    allowed.as_ref().is_none_or(|a| a.contains(id))
}

/// The analyzed, de-duplicated terms of a query text, in order of first appearance.
pub fn query_terms(text: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    tokens(&mut analyzer(), text)
        .into_iter()
        .filter(|t| seen.insert(t.clone()))
        .collect()
}

impl TableSnapshot {
    fn text_schema(&self) -> Result<&TextSchema> {
        self.index
            .as_deref()
            .and_then(|i| i.text.as_ref())
            .ok_or_else(|| Error::Index(format!("table {} has no text index", self.table.name)))
    }

    /// Segments with their text index.
    fn text_segments(&self) -> Result<Vec<(&Segment, &SegmentText)>> {
        self.segments
            .iter()
            .map(|s| {
                let text = s.index.as_ref().and_then(|i| i.text.as_ref());
                let text = text
                    .ok_or_else(|| Error::Index(format!("segment {} has no text index", s.seq)))?;
                Ok((s, text))
            })
            .collect()
    }

    /// The memtable's batches with their text tails (built now where they were not).
    fn tails(&self) -> Result<Vec<(&MemBatch, Arc<TextTail>)>> {
        let spec = self.index.as_deref();
        let mut tails = Vec::with_capacity(self.memtable.len());
        for batch in &self.memtable {
            if let Some(tail) = batch.text_tail(spec)? {
                tails.push((batch, tail));
            }
        }
        Ok(tails)
    }

    fn fields(&self, columns: &[String]) -> Result<Vec<(usize, Field)>> {
        let schema = self.text_schema()?;
        columns
            .iter()
            .map(|c| {
                schema
                    .text
                    .iter()
                    .position(|(name, _)| name == c)
                    .map(|i| (i, schema.text[i].1))
                    .ok_or_else(|| Error::Index(format!("column {c} is not full-text indexed")))
            })
            .collect()
    }

    /// The `top` best rows for a full-text query over `columns` by BM25 (the sum over
    /// columns and query terms), best first; equal scores in row-id order.
    pub fn bm25(
        &self,
        query: &str,
        columns: &[String],
        allowed: &Allowed,
        top: usize,
    ) -> Result<Vec<Hit>> {
        let fields = self.fields(columns)?;
        let terms = query_terms(query);
        if terms.is_empty() || top == 0 {
            return Ok(Vec::new());
        }
        let segments = self.text_segments()?;
        let tails = self.tails()?;
        let stats = Memoized::new(CombinedStats {
            schema: self.text_schema()?,
            searchers: segments.iter().map(|(_, s)| &s.searcher).collect(),
            tails: tails.iter().map(|(_, t)| t.as_ref()).collect(),
        });
        let pairs: Vec<(usize, Term)> = fields
            .iter()
            .flat_map(|(i, field)| terms.iter().map(|t| (*i, Term::from_field_text(*field, t))))
            .collect();
        let query = any_of(pairs.iter().map(|(_, t)| t.clone()));
        let mut hits = Vec::new();
        for (segment, text) in &segments {
            let searcher = &text.searcher;
            let top_docs = TopDocs::with_limit(top).order_by_score();
            // Every row of the segment counts: tantivy can skip blocks that cannot reach the
            // top (block-max WAND). A filter on row ids makes it score every match instead.
            let found = if segment.deleted.is_empty() && allowed.is_none() {
                searcher.search_with_statistics_provider(&query, &top_docs, &stats)
            } else {
                let keep = keep_in(segment, allowed);
                let collector = FilterCollector::new(
                    ROW_ID_FIELD.to_owned(),
                    move |id: u64| keep(id),
                    top_docs,
                );
                searcher.search_with_statistics_provider(&query, &collector, &stats)
            }
            .map_err(index_error)?;
            let ids = row_id_reader(text);
            for (score, address) in found {
                hits.push(Hit {
                    row_id: ids(address)?,
                    score,
                });
            }
        }
        // The tail: the same formula, with the same statistics.
        let mut tail_scores: HashMap<u64, f32> = HashMap::new();
        for (i, term) in &pairs {
            let weight =
                Bm25Weight::for_terms(&stats, std::slice::from_ref(term)).map_err(index_error)?;
            let value = term.value();
            let Some(text) = value.as_str() else {
                continue;
            };
            for (mem, tail) in &tails {
                let field = &tail.text[*i];
                for (id, tf) in field.postings.get(text).into_iter().flatten() {
                    if mem.deleted.contains(*id) || !allows(allowed, *id) {
                        continue;
                    }
                    let length = field.lengths.get(id).copied().unwrap_or(0);
                    let norm = FieldNormReader::fieldnorm_to_id(length);
                    *tail_scores.entry(*id).or_default() += weight.score(norm, *tf);
                }
            }
        }
        hits.extend(
            tail_scores
                .into_iter()
                .map(|(row_id, score)| Hit { row_id, score }),
        );
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.row_id.cmp(&b.row_id)));
        hits.truncate(top);
        Ok(hits)
    }

    /// How many live rows match a full-text query over `columns` (any of its terms): the
    /// number of rows [`TableSnapshot::bm25`] can page through.
    pub fn count_matches(&self, query: &str, columns: &[String]) -> Result<u64> {
        Ok(self
            .matching_ids(&self.fields(columns)?, &query_terms(query), false, &None)?
            .len())
    }

    /// Row ids of live rows holding any (or all) of `tokens` in `column`, ascending.
    pub fn token_match(
        &self,
        column: &str,
        tokens: &[String],
        all: bool,
        allowed: &Allowed,
    ) -> Result<RoaringTreemap> {
        let fields = self.fields(std::slice::from_ref(&column.to_owned()))?;
        self.matching_ids(&fields, tokens, all, allowed)
    }

    fn matching_ids(
        &self,
        fields: &[(usize, Field)],
        terms: &[String],
        all: bool,
        allowed: &Allowed,
    ) -> Result<RoaringTreemap> {
        let mut out = RoaringTreemap::new();
        if terms.is_empty() {
            return Ok(out);
        }
        for (segment, text) in self.text_segments()? {
            // Per column: any or all of the terms; across columns: any.
            let query = BooleanQuery::new(
                fields
                    .iter()
                    .map(|(_, field)| {
                        let terms = terms.iter().map(|t| Term::from_field_text(*field, t));
                        let q: Box<dyn Query> = if all {
                            Box::new(all_of(terms))
                        } else {
                            Box::new(any_of(terms))
                        };
                        (Occur::Should, q)
                    })
                    .collect(),
            );
            out |= segment_ids(text, &query, segment, allowed)?;
        }
        for (mem, tail) in self.tails()? {
            for (i, _) in fields {
                let field = &tail.text[*i];
                let mut found: Option<RoaringTreemap> = None;
                for term in terms {
                    let ids: RoaringTreemap = field
                        .postings
                        .get(term)
                        .into_iter()
                        .flatten()
                        .map(|(id, _)| *id)
                        .collect();
                    found = Some(match found {
                        None => ids,
                        Some(acc) if all => acc & ids,
                        Some(acc) => acc | ids,
                    });
                }
                let mut found = found.unwrap_or_default() - &*mem.deleted;
                if let Some(allowed) = allowed {
                    found &= &**allowed;
                }
                out |= found;
            }
        }
        Ok(out)
    }

    /// Row ids of live rows whose exact-match `column` equals `value` (as
    /// [`super::text::exact_values`] renders it), ascending.
    pub fn exact_match(
        &self,
        column: &str,
        value: &str,
        allowed: &Allowed,
    ) -> Result<RoaringTreemap> {
        let schema = self.text_schema()?;
        let (i, field) = schema
            .exact
            .iter()
            .enumerate()
            .find(|(_, (name, _))| name == column)
            .map(|(i, (_, f))| (i, *f))
            .ok_or_else(|| Error::Index(format!("column {column} is not exact-match indexed")))?;
        let mut out = RoaringTreemap::new();
        let query = TermQuery::new(
            Term::from_field_text(field, value),
            IndexRecordOption::Basic,
        );
        let keyword = self.index.as_deref().and_then(|spec| {
            let docs = spec.docs.as_ref()?;
            let mut term = Term::from_field_json_path(docs.keyword, column, true);
            term.append_type_and_str(value);
            Some(TermQuery::new(term, IndexRecordOption::Basic))
        });
        for segment in &self.segments {
            let index = segment.index.as_ref();
            out |= match (
                index.and_then(|i| i.text.as_ref()),
                index.and_then(|i| i.docs.as_ref()),
                &keyword,
            ) {
                (Some(text), ..) => segment_ids(text, &query, segment, allowed)?,
                // A dataset's segment: the value is a keyword of its document index.
                (None, Some(docs), Some(keyword)) => docs_ids(docs, keyword, segment, allowed)?,
                _ => {
                    return Err(Error::Index(format!(
                        "segment {} has no index of column {column}",
                        segment.seq
                    )));
                }
            };
        }
        for (mem, tail) in self.tails()? {
            for id in tail.exact[i].get(value).into_iter().flatten() {
                if !mem.deleted.contains(*id) && allows(allowed, *id) {
                    out.insert(*id);
                }
            }
        }
        Ok(out)
    }

    /// The `k` nearest live rows to `query` by the table's vector metric: hits whose score is
    /// the distance, nearest first; equal distances in row-id order.
    pub fn knn(&self, query: &[f32], k: usize, allowed: &Allowed) -> Result<Vec<Hit>> {
        let spec = self
            .index
            .as_deref()
            .and_then(|i| Some((i.vector.as_ref()?, i.options)))
            .ok_or_else(|| Error::Index(format!("table {} has no vector index", self.table.name)));
        let (spec, options) = spec?;
        let mut hits: Vec<(u64, f32)> = Vec::new();
        if k == 0 {
            return Ok(Vec::new());
        }
        for segment in &self.segments {
            let Some(vectors) = segment.index.as_ref().and_then(|i| i.vectors.as_ref()) else {
                return Err(Error::Index(format!(
                    "segment {} has no vector index",
                    segment.seq
                )));
            };
            let deleted = segment.deleted.len();
            if allowed.is_none() && deleted <= k as u64 {
                // No filter and few rows deleted: the graph searched without a filter (see
                // `SegmentVectors::search`) for as many more as were deleted, dropped after.
                let mut found =
                    vectors.search(query, k + deleted as usize, options.ef_search, None);
                found.retain(|(id, _)| !segment.deleted.contains(*id));
                found.truncate(k);
                hits.extend(found);
            } else {
                let keep = keep_in(segment, allowed);
                hits.extend(vectors.search(query, k, options.ef_search, Some(&keep)));
            }
        }
        for mem in &self.memtable {
            let (ids, data, dim) = vectors_of(&mem.batch, &spec.column)?;
            for (id, v) in ids.iter().zip(data.chunks_exact(dim.max(1))) {
                if !mem.deleted.contains(*id) && allows(allowed, *id) {
                    hits.push((*id, distance(spec.metric, query, v)));
                }
            }
        }
        nearest(&mut hits, k);
        Ok(hits
            .into_iter()
            .map(|(row_id, score)| Hit { row_id, score })
            .collect())
    }

    /// The live rows with these ids, in this order, with `_row_id` and `columns` (all the
    /// table's columns when `None`). Ids that are not live are skipped.
    pub async fn rows_by_id(&self, ids: &[u64], columns: Option<&[String]>) -> Result<RecordBatch> {
        let mut names: Vec<String> = vec![ROW_ID.to_owned()];
        match columns {
            Some(columns) => names.extend(columns.iter().filter(|c| *c != ROW_ID).cloned()),
            None => names.extend(
                self.schema
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .filter(|n| n != ROW_ID),
            ),
        }
        let indices: Vec<usize> = names
            .iter()
            .map(|n| self.schema.index_of(n).map_err(arrow_error))
            .collect::<Result<_>>()?;
        let schema = Arc::new(self.schema.project(&indices).map_err(arrow_error)?);
        let wanted: RoaringTreemap = ids.iter().copied().collect();
        let mut parts: Vec<RecordBatch> = Vec::new();
        for mem in &self.memtable {
            let hits = (&wanted & &*mem.ids) - &*mem.deleted;
            if hits.is_empty() {
                continue;
            }
            let positions: UInt32Array = row_ids(&mem.batch)?
                .values()
                .iter()
                .enumerate()
                .filter(|(_, id)| hits.contains(**id))
                .map(|(i, _)| i as u32)
                .collect();
            let batch = mem.batch.project(&indices).map_err(arrow_error)?;
            parts.push(compute::take_record_batch(&batch, &positions).map_err(arrow_error)?);
        }
        // Segments are read concurrently: each waits on its own page reads.
        let reads = self.segments.iter().filter_map(|segment| {
            let hits = (&wanted & &*segment.ids) - &*segment.deleted;
            (!hits.is_empty()).then(|| read_segment_rows(self, segment, hits, &schema))
        });
        parts.extend(futures::future::try_join_all(reads).await?);
        let all = compute::concat_batches(&schema, &parts).map_err(arrow_error)?;
        let position: HashMap<u64, u32> = row_ids(&all)?
            .values()
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, i as u32))
            .collect();
        let order: UInt32Array = ids
            .iter()
            .filter_map(|id| position.get(id).copied())
            .collect();
        compute::take_record_batch(&all, &order).map_err(arrow_error)
    }
}

/// Whether a hit in `segment` counts: its row is live there and the filter allows it.
fn keep_in(
    segment: &Segment,
    allowed: &Allowed,
) -> impl Fn(u64) -> bool + Clone + Send + Sync + 'static {
    let deleted = segment.deleted.clone();
    let allowed = allowed.clone();
    move |id: u64| !deleted.contains(id) && allows(&allowed, id)
}

fn any_of(terms: impl Iterator<Item = Term>) -> BooleanQuery {
    BooleanQuery::new(
        terms
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs));
                (Occur::Should, q)
            })
            .collect(),
    )
}

fn all_of(terms: impl Iterator<Item = Term>) -> BooleanQuery {
    BooleanQuery::new(
        terms
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(t, IndexRecordOption::Basic));
                (Occur::Must, q)
            })
            .collect(),
    )
}

/// Live, allowed row ids of a segment matching `query` in its text index.
fn segment_ids(
    text: &SegmentText,
    query: &dyn Query,
    segment: &Segment,
    allowed: &Allowed,
) -> Result<RoaringTreemap> {
    matching_ids(&text.searcher, query, segment, allowed, row_id_reader(text))
}

/// Live, allowed row ids of a segment matching `query` in its document index.
fn docs_ids(
    docs: &DocsIndex,
    query: &dyn Query,
    segment: &Segment,
    allowed: &Allowed,
) -> Result<RoaringTreemap> {
    matching_ids(&docs.searcher, query, segment, allowed, |address| {
        docs.row_id(address)
    })
}

/// Live, allowed row ids of `segment` whose documents in one of its indexes (`searcher`, with
/// its `_row_id` fast field, read by `row_id`) match `query`.
fn matching_ids(
    searcher: &Searcher,
    query: &dyn Query,
    segment: &Segment,
    allowed: &Allowed,
    row_id: impl Fn(DocAddress) -> Result<u64>,
) -> Result<RoaringTreemap> {
    let keep = keep_in(segment, allowed);
    let collector = FilterCollector::new(
        ROW_ID_FIELD.to_owned(),
        move |id: u64| keep(id),
        DocSetCollector,
    );
    let found = searcher.search(query, &collector).map_err(index_error)?;
    found.into_iter().map(row_id).collect()
}

/// How many documents of a segment match (for tests of the index itself).
pub fn count_in(searcher: &Searcher, query: &dyn Query) -> Result<usize> {
    searcher.search(query, &Count).map_err(index_error)
}

/// Reads the row id of a document of a segment's text index.
fn row_id_reader(text: &SegmentText) -> impl Fn(DocAddress) -> Result<u64> + '_ {
    move |address: DocAddress| {
        text.row_ids
            .get(address.segment_ord as usize)
            .and_then(|c| c.first(address.doc_id))
            .ok_or_else(|| Error::Index(format!("document {address:?} has no row id")))
    }
}

/// The rows of `segment` with ids `hits` (all in it), in row-id order, in `schema` (`_row_id`
/// first, then the columns asked for). The segment holds exactly `segment.ids`, in order, so
/// the hits' positions are their ranks. Read from the rows the segment stores whole when it
/// has them (see [`super::stored`]), else from its Parquet file; there the row ids are not
/// read.
async fn read_segment_rows(
    snapshot: &TableSnapshot,
    segment: &Segment,
    hits: RoaringTreemap,
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    if let Some(stored) = segment.index.as_ref().and_then(|i| i.rows.as_ref()) {
        let positions: Vec<u64> = hits.iter().map(|id| segment.ids.rank(id) - 1).collect();
        let rows = stored.read(&positions, schema)?;
        // The stored rows carry their ids: a check that positions and ids agree.
        if row_ids(&rows)?.values().iter().copied().ne(hits.iter()) {
            return Err(Error::Index(format!(
                "segment {}'s stored rows are not the rows of its ids",
                segment.seq
            )));
        }
        return Ok(rows);
    }
    // With the offset index, only the pages that hold the wanted rows are read.
    let options = ArrowReaderOptions::new().with_offset_index_policy(PageIndexPolicy::Optional);
    let mapped = segment.file.mapped()?;
    let mut reader = SegmentReader {
        store: snapshot.store.store.clone(),
        path: segment.file.path.clone(),
        size: segment.file.bytes,
    };
    let metadata = match (segment.file.reader_metadata.get(), &mapped) {
        (Some(metadata), _) => metadata.clone(),
        // The footer a scan of the mapped file decodes serves here too: decoded once.
        (None, Some(bytes)) => {
            ArrowReaderMetadata::try_new(segment.file.scan_metadata(bytes)?, options)?
        }
        (None, None) => ArrowReaderMetadata::load_async(&mut reader, options).await?,
    };
    let metadata = segment
        .file
        .reader_metadata
        .get_or_init(|| metadata)
        .clone();
    let names: Vec<&str> = schema
        .fields()
        .iter()
        .skip(1)
        .map(|f| f.name().as_str())
        .collect();
    // A segment written before a column existed does not have it: it reads as nulls.
    let roots: Vec<usize> = names
        .iter()
        .filter_map(|n| metadata.schema().index_of(n).ok())
        .collect();
    let mut selectors = Vec::new();
    let mut next = 0u64;
    for id in &hits {
        let position = segment.ids.rank(id) - 1;
        if position > next {
            selectors.push(RowSelector::skip((position - next) as usize));
        }
        selectors.push(RowSelector::select(1));
        next = position + 1;
    }
    let mut columns: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from_iter_values(hits.iter()))];
    if !roots.is_empty() {
        let mask = ProjectionMask::roots(metadata.parquet_schema(), roots.iter().copied());
        let selection = RowSelection::from(selectors);
        // A mapped file is read in place, on this thread: its pages are memory.
        let batches: Vec<RecordBatch> = match mapped {
            Some(bytes) => ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, metadata)
                .with_projection(mask)
                .with_row_selection(selection)
                .build()?
                .collect::<std::result::Result<_, _>>()
                .map_err(arrow_error)?,
            None => {
                ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
                    .with_projection(mask)
                    .with_row_selection(selection)
                    .build()?
                    .try_collect()
                    .await?
            }
        };
        let read = batches
            .first()
            .map(RecordBatch::schema)
            .ok_or_else(|| Error::Index(format!("segment {} returned no rows", segment.seq)))?;
        let all = compute::concat_batches(&read, &batches).map_err(arrow_error)?;
        if all.num_rows() as u64 != hits.len() {
            return Err(Error::Index(format!(
                "segment {} returned {} of {} rows",
                segment.seq,
                all.num_rows(),
                hits.len()
            )));
        }
        // Columns come back in file order, in the types they were written with; put them in
        // the order and types asked for.
        let read = super::rows::conform(
            &Arc::new(
                schema
                    .project(&(1..schema.fields().len()).collect::<Vec<_>>())
                    .map_err(arrow_error)?,
            ),
            &all,
        )?;
        columns.extend(read.columns().iter().cloned());
    } else {
        for field in schema.fields().iter().skip(1) {
            columns.push(arrow::array::new_null_array(
                field.data_type(),
                hits.len() as usize,
            ));
        }
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(arrow_error)
}

/// Reads ranges of a segment file through its object store.
struct SegmentReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
}

fn parquet_error(error: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(error))
}

impl AsyncFileReader for SegmentReader {
    fn get_bytes(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(parquet_error)
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(parquet_error)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let metadata = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}
