//! The document index of a dataset: what the Query DSL searches and aggregates.
//!
//! One tantivy index per segment (built with the segment, like its other indexes) and one per
//! memtable batch (built in memory when a query first needs it). Every index has the same
//! schema, whatever the dataset's columns, so a query compiles once for all of them:
//!
//! - `_row_id`: the row id (fast), to map hits back to rows and skip deleted ones;
//! - `text`: a JSON field holding every column, strings analyzed by tantivy's `default`
//!   analyzer (split on non-alphanumerics, lowercased), with positions for phrases: `match`,
//!   `match_phrase`, `query_string`;
//! - `kw`: a JSON field holding every column untokenized, and fast: strings as keywords
//!   (`term`, `terms`, `prefix`, `wildcard`, `terms` aggregations), numbers, booleans and dates
//!   as typed values (`range`, sorts, metric and histogram aggregations);
//! - `all`: every string of the record, analyzed, for a `query_string` that names no field.
//!
//! A column's path in `text` and `kw` is its name (`user.name` is path `user` > `name`). The
//! columns are read as they were written: a segment from before a column changed type keeps its
//! values under the old type, and queries look for both (see the Query DSL).

use std::{collections::BTreeMap, path::Path, sync::Arc};

use arrow::{
    array::{Array, AsArray, RecordBatch},
    datatypes::{DataType, Float64Type, Int64Type, TimeUnit, TimestampMillisecondType},
};
use tantivy::{
    DateTime, Index, IndexReader, IndexWriter, Searcher, TantivyDocument,
    columnar::Column,
    schema::{
        FAST, Field, IndexRecordOption, JsonObjectOptions, OwnedValue, Schema, TextFieldIndexing,
        TextOptions,
    },
};

use super::{
    rows::ROW_ID,
    segment::row_ids,
    text::{index_error, open_reader},
};
use crate::error::Result;

pub const ROW_ID_FIELD: &str = "_row_id";
pub const TEXT_FIELD: &str = "text";
pub const KEYWORD_FIELD: &str = "kw";
pub const ALL_FIELD: &str = "all";

/// The fields of a document index.
#[derive(Clone, Debug)]
pub struct DocsSchema {
    pub schema: Schema,
    pub row_id: Field,
    pub text: Field,
    pub keyword: Field,
    pub all: Field,
}

impl DocsSchema {
    pub fn new() -> DocsSchema {
        let mut builder = Schema::builder();
        let row_id = builder.add_u64_field(ROW_ID_FIELD, FAST);
        let analyzed = TextFieldIndexing::default()
            .set_tokenizer("default")
            .set_index_option(IndexRecordOption::WithFreqsAndPositions);
        let text = builder.add_json_field(
            TEXT_FIELD,
            JsonObjectOptions::default()
                .set_indexing_options(analyzed.clone())
                .set_expand_dots_enabled(),
        );
        let keyword = builder.add_json_field(
            KEYWORD_FIELD,
            JsonObjectOptions::default()
                .set_indexing_options(
                    TextFieldIndexing::default()
                        .set_tokenizer("raw")
                        .set_index_option(IndexRecordOption::Basic),
                )
                .set_fast("raw")
                .set_expand_dots_enabled(),
        );
        let all = builder.add_text_field(
            ALL_FIELD,
            TextOptions::default().set_indexing_options(analyzed),
        );
        DocsSchema {
            schema: builder.build(),
            row_id,
            text,
            keyword,
            all,
        }
    }

    /// One tantivy document per row of `batch` (rows in the table schema, `_row_id` first).
    fn documents(&self, batch: &RecordBatch) -> Result<Vec<TantivyDocument>> {
        let ids = row_ids(batch)?;
        let mut documents: Vec<TantivyDocument> = (0..batch.num_rows())
            .map(|row| {
                let mut document = TantivyDocument::new();
                document.add_u64(self.row_id, ids.value(row));
                document
            })
            .collect();
        let mut objects: Vec<BTreeMap<String, OwnedValue>> =
            vec![BTreeMap::new(); batch.num_rows()];
        let mut strings: Vec<Vec<String>> = vec![Vec::new(); batch.num_rows()];
        let schema = batch.schema();
        for (field, column) in schema.fields().iter().zip(batch.columns()) {
            if field.name() == ROW_ID {
                continue;
            }
            let value: Box<dyn Fn(usize) -> Option<OwnedValue>> = match column.data_type() {
                DataType::Utf8 => {
                    let array = column.as_string::<i32>();
                    Box::new(move |row| Some(OwnedValue::Str(array.value(row).to_owned())))
                }
                DataType::Int64 => {
                    let array = column.as_primitive::<Int64Type>();
                    Box::new(move |row| Some(OwnedValue::I64(array.value(row))))
                }
                DataType::Float64 => {
                    let array = column.as_primitive::<Float64Type>();
                    Box::new(move |row| Some(OwnedValue::F64(array.value(row))))
                }
                DataType::Boolean => {
                    let array = column.as_boolean();
                    Box::new(move |row| Some(OwnedValue::Bool(array.value(row))))
                }
                DataType::Timestamp(TimeUnit::Millisecond, _) => {
                    let array = column.as_primitive::<TimestampMillisecondType>();
                    Box::new(move |row| {
                        Some(OwnedValue::Date(DateTime::from_timestamp_millis(
                            array.value(row),
                        )))
                    })
                }
                // Lists, vectors, binaries: not searchable by the Query DSL (knn reads vectors).
                _ => continue,
            };
            for row in 0..batch.num_rows() {
                if column.is_null(row) {
                    continue;
                }
                if let Some(value) = value(row) {
                    if let OwnedValue::Str(text) = &value {
                        strings[row].push(text.clone());
                    }
                    objects[row].insert(field.name().clone(), value);
                }
            }
        }
        for ((document, object), strings) in documents.iter_mut().zip(objects).zip(strings) {
            document.add_object(self.text, object.clone());
            document.add_object(self.keyword, object);
            for text in strings {
                document.add_text(self.all, text);
            }
        }
        Ok(documents)
    }

    fn write(&self, index: &Index, batch: &RecordBatch) -> Result<()> {
        let mut writer: IndexWriter = index
            .writer_with_num_threads(1, 64 << 20)
            .map_err(index_error)?;
        for document in self.documents(batch)? {
            writer.add_document(document).map_err(index_error)?;
        }
        writer.commit().map_err(index_error)?;
        writer.wait_merging_threads().map_err(index_error)?;
        Ok(())
    }

    /// Builds the document index of a segment's rows in `dir`.
    pub(crate) fn build_in_dir(&self, dir: &Path, batch: &RecordBatch) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(index_error)?;
        let index = Index::create_in_dir(dir, self.schema.clone()).map_err(index_error)?;
        self.write(&index, batch)
    }

    /// The document index of a memtable batch, in memory.
    pub(crate) fn build_in_ram(&self, batch: &RecordBatch) -> Result<DocsIndex> {
        let index = Index::create_in_ram(self.schema.clone());
        self.write(&index, batch)?;
        DocsIndex::of(index)
    }
}

impl Default for DocsSchema {
    fn default() -> Self {
        DocsSchema::new()
    }
}

/// An opened document index.
#[derive(Clone)]
pub struct DocsIndex {
    pub index: Index,
    pub searcher: Searcher,
    /// The row-id column of each tantivy segment, in `searcher`'s segment order.
    pub row_ids: Arc<Vec<Column<u64>>>,
    #[allow(dead_code)]
    reader: IndexReader,
}

impl std::fmt::Debug for DocsIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocsIndex")
            .field("docs", &self.searcher.num_docs())
            .finish()
    }
}

impl DocsIndex {
    pub(crate) fn open(dir: &Path) -> Result<DocsIndex> {
        DocsIndex::of(Index::open_in_dir(dir).map_err(index_error)?)
    }

    fn of(index: Index) -> Result<DocsIndex> {
        let (reader, searcher, row_ids) = open_reader(&index)?;
        Ok(DocsIndex {
            index,
            searcher,
            row_ids: Arc::new(row_ids),
            reader,
        })
    }
}

/// The best hits of a document query over a snapshot, and how many live rows match.
#[derive(Clone, Debug, Default)]
pub struct DocsHits {
    /// Best first; equal scores in row-id order.
    pub hits: Vec<super::search::Hit>,
    pub total: u64,
}

impl super::TableSnapshot {
    /// Runs `query` over every segment's document index and every memtable batch's (built on
    /// first use), skipping deleted rows: the `top` best hits by score, and the count of all.
    pub fn search_documents(
        &self,
        query: &dyn tantivy::query::Query,
        top: usize,
    ) -> Result<DocsHits> {
        use tantivy::collector::{Count, FilterCollector, TopDocs};
        let mut out = DocsHits::default();
        let mut run = |index: &DocsIndex, deleted: Arc<roaring::RoaringTreemap>| -> Result<()> {
            let live = deleted.clone();
            let best = FilterCollector::new(
                ROW_ID_FIELD.to_owned(),
                move |id: u64| !live.contains(id),
                TopDocs::with_limit(top.max(1)).order_by_score(),
            );
            let count = FilterCollector::new(
                ROW_ID_FIELD.to_owned(),
                move |id: u64| !deleted.contains(id),
                Count,
            );
            let (best, count) = index
                .searcher
                .search(query, &(best, count))
                .map_err(index_error)?;
            out.total += count as u64;
            if top == 0 {
                return Ok(());
            }
            for (score, address) in best {
                let row_id = index
                    .row_ids
                    .get(address.segment_ord as usize)
                    .and_then(|c| c.first(address.doc_id))
                    .ok_or_else(|| index_error("a document without a row id"))?;
                out.hits.push(super::search::Hit { row_id, score });
            }
            Ok(())
        };
        for segment in &self.segments {
            let index = segment
                .index
                .as_ref()
                .and_then(|i| i.docs.as_ref())
                .ok_or_else(|| {
                    index_error(format!("segment {} has no document index", segment.seq))
                })?;
            run(index, segment.deleted.clone())?;
        }
        for batch in &self.memtable {
            if let Some(index) = batch.docs_index(self.index.as_deref())? {
                run(&index, batch.deleted.clone())?;
            }
        }
        out.hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.row_id.cmp(&b.row_id))
        });
        out.hits.truncate(top);
        Ok(out)
    }
}
