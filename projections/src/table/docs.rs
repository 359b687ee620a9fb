//! The document index of a dataset: what the Query DSL searches and aggregates.
//!
//! One tantivy index per segment (built with the segment, like its other indexes) and one per
//! memtable batch (built in memory as the batch is applied while the dataset is searched, else
//! by the first search that reads the batch: see [`super::SearchedAt`]). Every index has the same
//! schema, whatever the dataset's columns, so a query compiles once for all of them:
//!
//! - `_row_id`: the row id (fast), to map hits back to rows and skip deleted ones;
//! - `text`: a JSON field holding every string column (but `_id`, a keyword only), analyzed
//!   by tantivy's `default` analyzer (split on non-alphanumerics, lowercased), with positions
//!   for phrases: `match`, `match_phrase`, `query_string`. Numbers, booleans, dates and points
//!   are matched in `kw` (indexes built before 2026-12 hold them here too);
//! - `kw`: a JSON field holding every column untokenized, and fast: strings as keywords
//!   (`term`, `terms`, `prefix`, `wildcard`, `terms` aggregations), numbers, booleans and dates
//!   as typed values (`range`, sorts, metric and histogram aggregations);
//! - `all`: every string of the record (but `_id`), analyzed, for a `query_string` that names
//!   no field;
//! - `ip`: a JSON field holding the dataset's IP fields (declared `ip`) again, each address as 32
//!   hex digits (see [`super::ip`]), untokenized: ranges and CIDR blocks of addresses.
//!
//! A column's path in `text` and `kw` is its name (`user.name` is path `user` > `name`). The
//! columns are read as they were written: a segment from before a column changed type keeps its
//! values under the old type, and queries look for both (see the Query DSL).

use std::{collections::BTreeMap, io::Write, path::Path, sync::Arc};

use arrow::array::RecordBatch;
use roaring::RoaringTreemap;
use tantivy::{
    BitSet, DateTime, Index, IndexBuilder, IndexMeta, IndexReader, IndexSettings, IndexWriter,
    Searcher, SegmentReader, TantivyDocument,
    columnar::Column,
    directory::{
        Directory, ManagedDirectory, MmapDirectory, OwnedBytes, RamDirectory, TerminatingWrite,
    },
    fastfield::{AliveBitSet, write_alive_bitset},
    index::SegmentComponent,
    indexer::merge_filtered_segments,
    schema::{
        FAST, Field, IndexRecordOption, JsonObjectOptions, OwnedValue, Schema, TextFieldIndexing,
        TextOptions,
    },
};

use super::{
    cached::CachedFilter,
    rows::ROW_ID,
    rows::row_ids,
    text::{index_error, open_reader},
};
use crate::error::Result;

mod row;

pub const ROW_ID_FIELD: &str = "_row_id";
pub const TEXT_FIELD: &str = "text";
pub const KEYWORD_FIELD: &str = "kw";
pub const ALL_FIELD: &str = "all";
pub const IP_FIELD: &str = "ip";

/// The path a query reads for a field its reader may not search (hidden from it, or masked):
/// no document has it, so the field acts as one that is not mapped.
pub const UNMAPPED_PATH: &str = "\u{2}unmapped";

/// The fields of a document index, and what of a dataset's fields goes where.
#[derive(Clone, Debug)]
pub struct DocsSchema {
    pub schema: Schema,
    pub row_id: Field,
    pub text: Field,
    pub keyword: Field,
    pub all: Field,
    pub ip: Field,
    /// The dataset's IP fields, whose addresses `ip` holds too.
    ips: Arc<std::collections::BTreeSet<String>>,
    /// The dataset's `half_float` and `float` fields: their values are indexed (so sorted,
    /// aggregated and matched) at the precision of their type, as Elasticsearch keeps their doc
    /// values; `_source` keeps what was written.
    rounded: Arc<BTreeMap<String, Rounding>>,
    /// The dataset's range fields (`date_range`, `long_range`, ...), by path, with their type:
    /// each is kept as the columns of its bounds, `<path>.gte`, `.gt`, `.lte` and `.lt`.
    ranges: Arc<BTreeMap<String, String>>,
    /// The dataset's fields that read another's values (aliases, multi-fields), and whose.
    aliases: Arc<BTreeMap<String, String>>,
    /// Fields the reader may not search, their sub-fields with them (see [`Self::restricted`]).
    unsearchable: Arc<std::collections::BTreeSet<String>>,
    /// With unsearchable fields: the fields a query that names none searches, instead of
    /// `all` (which holds every string of a record, theirs too).
    catch_all: Option<Arc<Vec<String>>>,
    /// The dataset's keyword-only fields (its `_id`): in `kw` alone, neither analyzed in `text`
    /// nor in `all`, as Elasticsearch indexes `_id` as a keyword only. A match-family query on
    /// one is a term query on the whole value (see [`Self::is_keyword_only`]).
    keyword_only: Arc<std::collections::BTreeSet<String>>,
}

/// The precision a declared field's numbers are indexed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// `half_float`: 16 bits.
    Half,
    /// `float`: 32 bits.
    Single,
}

impl Rounding {
    /// `value` at this precision (the nearest value the type holds).
    pub fn round(self, value: f64) -> f64 {
        match self {
            Rounding::Half => {
                // Arrow's half-precision float (the `half` crate's f16).
                type F16 =
                    <arrow::datatypes::Float16Type as arrow::datatypes::ArrowPrimitiveType>::Native;
                F16::from_f64(value).to_f64()
            }
            Rounding::Single => f64::from(value as f32),
        }
    }
}

impl DocsSchema {
    /// A fingerprint of what a query compiled with this schema reads of the dataset (its IP
    /// fields, field aliases, and the fields its reader may not search): a query compiles
    /// alike with two schemas of one fingerprint.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::hash::DefaultHasher::new();
        (
            &self.ips,
            &self.ranges,
            &self.rounded,
            &self.aliases,
            &self.unsearchable,
            &self.catch_all,
            &self.keyword_only,
        )
            .hash(&mut hasher);
        hasher.finish()
    }

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
        // Untokenized and fast: keywords, typed values, and IP addresses' sortable forms.
        let raw = JsonObjectOptions::default()
            .set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer("raw")
                    .set_index_option(IndexRecordOption::Basic),
            )
            .set_fast("raw")
            .set_expand_dots_enabled();
        let keyword = builder.add_json_field(KEYWORD_FIELD, raw.clone());
        let all = builder.add_text_field(
            ALL_FIELD,
            TextOptions::default().set_indexing_options(analyzed),
        );
        let ip = builder.add_json_field(IP_FIELD, raw);
        DocsSchema {
            schema: builder.build(),
            row_id,
            text,
            keyword,
            all,
            ip,
            ips: Arc::default(),
            ranges: Arc::default(),
            rounded: Arc::default(),
            aliases: Arc::default(),
            unsearchable: Arc::default(),
            catch_all: None,
            keyword_only: Arc::default(),
        }
    }

    /// This schema for a reader who may not search `unsearchable` (fields hidden from it or
    /// masked, and their sub-fields): a query on one of them reads [`UNMAPPED_PATH`] and
    /// matches nothing, and a query that names no field searches `strings` (the string fields
    /// it may search) rather than `all`. Sorts and aggregations resolve fields through
    /// [`Self::path`] too.
    pub fn restricted(
        &self,
        unsearchable: std::collections::BTreeSet<String>,
        strings: Vec<String>,
    ) -> DocsSchema {
        if unsearchable.is_empty() {
            return self.clone();
        }
        DocsSchema {
            unsearchable: Arc::new(unsearchable),
            catch_all: Some(Arc::new(strings)),
            ..self.clone()
        }
    }

    /// The fields a query that names none searches instead of `all`, when some are
    /// unsearchable (see [`Self::restricted`]).
    pub fn catch_all(&self) -> Option<&[String]> {
        self.catch_all.as_deref().map(Vec::as_slice)
    }

    /// Whether the reader may not search `path` (a field's own path).
    fn is_unsearchable(&self, path: &str) -> bool {
        if self.unsearchable.is_empty() {
            return false;
        }
        let mut prefix = path;
        loop {
            if self.unsearchable.contains(prefix) {
                return true;
            }
            match prefix.rfind('.') {
                Some(at) => prefix = &prefix[..at],
                None => return false,
            }
        }
    }

    /// The path field `field` has in the index: `f.keyword` is `f`, and an alias or a
    /// multi-field is the field whose values it reads; [`UNMAPPED_PATH`] for a field the reader
    /// may not search.
    pub fn path<'a>(&'a self, field: &'a str) -> &'a str {
        let field = field.strip_suffix(".keyword").unwrap_or(field);
        let path = self.aliases.get(field).map_or(field, String::as_str);
        match self.is_unsearchable(field) || self.is_unsearchable(path) {
            true => UNMAPPED_PATH,
            false => path,
        }
    }

    /// How the numbers of the field at `path` are rounded when indexed (a `half_float` or
    /// `float` field), if they are: a query's value is rounded alike to match them.
    pub fn rounding(&self, path: &str) -> Option<Rounding> {
        self.rounded.get(path).copied()
    }

    /// Whether the field at `path` is a keyword only (a dataset's `_id`): its values are in
    /// `kw`, not in `text` or `all`.
    pub fn is_keyword_only(&self, path: &str) -> bool {
        self.keyword_only.contains(path)
    }

    /// The type of the range field at `path` (`date_range`, `long_range`, ...), if it is one.
    pub fn range_type(&self, path: &str) -> Option<&str> {
        self.ranges.get(path).map(String::as_str)
    }

    /// The document index schema of dataset `table`: its IP fields (declared `ip`) go to `ip`
    /// too, and its exact-match columns that are not full-text ones (its `_id`) to `kw` alone.
    pub fn of(table: &crate::catalog::TableDef) -> DocsSchema {
        let keyword_only = table
            .exact_columns
            .iter()
            .filter(|c| !table.fts_columns.contains(c))
            .cloned()
            .collect();
        let ips = table
            .declared
            .iter()
            .filter(|(_, field)| field.es_type == "ip")
            .map(|(name, _)| name.clone())
            .collect();
        let ranges = table
            .declared
            .iter()
            .filter(|(_, field)| field.es_type.ends_with("_range"))
            .map(|(name, field)| (name.clone(), field.es_type.clone()))
            .collect();
        let rounded = table
            .declared
            .iter()
            .filter_map(|(name, field)| match field.es_type.as_str() {
                "half_float" => Some((name.clone(), Rounding::Half)),
                "float" => Some((name.clone(), Rounding::Single)),
                _ => None,
            })
            .collect();
        DocsSchema {
            ips: Arc::new(ips),
            ranges: Arc::new(ranges),
            rounded: Arc::new(rounded),
            aliases: Arc::new(table.field_aliases()),
            keyword_only: Arc::new(keyword_only),
            ..DocsSchema::new()
        }
    }

    /// The fields of `batch` (rows in the table schema) that the document index holds, and
    /// how: read in place by [`Self::documents`].
    fn fields<'a>(&self, batch: &'a RecordBatch) -> Vec<row::Field<'a>> {
        let schema = batch.schema_ref();
        let mut fields = Vec::new();
        for (field, column) in schema.fields().iter().zip(batch.columns()) {
            if field.name() == ROW_ID {
                continue;
            }
            // Vectors and binaries are not searchable by the Query DSL (knn reads vectors).
            let Some(col) = row::Col::of(column) else {
                continue;
            };
            let name = field.name().as_str();
            fields.push(row::Field {
                name,
                col,
                is_ip: self.ips.contains(name),
                keyword_only: self.keyword_only.contains(name),
                rounding: self.rounded.get(name).copied(),
            });
        }
        fields
    }

    /// One tantivy document per row of `fields` (of a batch whose row ids are `ids`), made as
    /// they are taken, so that indexing threads work while the next ones are made. Each value
    /// is copied once, from the batch into the document.
    fn documents<'a>(
        &'a self,
        ids: &'a arrow::array::UInt64Array,
        fields: &'a [row::Field<'a>],
    ) -> impl Iterator<Item = TantivyDocument> + 'a {
        let any_ip = fields.iter().any(|f| f.is_ip);
        (0..ids.len()).map(move |row| {
            let mut document = TantivyDocument::new();
            document.add_u64(self.row_id, ids.value(row));
            // Every string of the record (but keyword-only fields') in `all`.
            for (_, value) in row::Fields::of(fields, row, row::Kind::Text) {
                match value {
                    row::RowValue::Str(text) => document.add_text(self.all, text),
                    row::RowValue::Items(items) => {
                        for item in items {
                            if let row::RowValue::Str(text) = item {
                                document.add_text(self.all, text);
                            }
                        }
                    }
                    _ => {}
                }
            }
            if any_ip {
                let addresses: BTreeMap<String, OwnedValue> = fields
                    .iter()
                    .filter(|f| f.is_ip && !f.keyword_only && !f.col.is_null(row))
                    .filter_map(|f| {
                        let value = f.col.value(row)?.owned();
                        Some((f.name.to_owned(), sortable_addresses(&value)?))
                    })
                    .collect();
                if !addresses.is_empty() {
                    document.add_object(self.ip, addresses);
                }
            }
            let text = row::Fields::of(fields, row, row::Kind::Text);
            document.add_field_value(self.text, row::RowValue::Object(text));
            let keywords = row::Fields::of(fields, row, row::Kind::Keyword);
            document.add_field_value(self.keyword, row::RowValue::Object(keywords));
            document
        })
    }

    /// Indexes `batch` into `index` with `threads` indexing threads (each with a 64 MiB
    /// budget).
    fn write(&self, index: &Index, batch: &RecordBatch, threads: usize) -> Result<()> {
        let mut writer: IndexWriter = index
            .writer_with_num_threads(threads, threads * (64 << 20))
            .map_err(index_error)?;
        let (ids, fields) = (row_ids(batch)?, self.fields(batch));
        for document in self.documents(ids, &fields) {
            writer.add_document(document).map_err(index_error)?;
        }
        writer.commit().map_err(index_error)?;
        writer.wait_merging_threads().map_err(index_error)?;
        Ok(())
    }

    /// Builds the document index of a segment's rows in `dir`, on every core (up to four):
    /// a flush is a background job, and until it is done a segment's records are searched
    /// from the memtable.
    pub(crate) fn build_in_dir(&self, dir: &Path, batch: &RecordBatch) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(index_error)?;
        let cores = cores();
        // Below a few thousand records a second thread costs more than it saves.
        if batch.num_rows() < 10_000 || cores == 1 {
            let directory = MmapDirectory::open(dir).map_err(index_error)?;
            self.write_one_segment(directory, batch)?;
            return Ok(());
        }
        let index = Index::create_in_dir(dir, self.schema.clone()).map_err(index_error)?;
        self.write(&index, batch, cores.clamp(1, 4))
    }

    /// The document index of a memtable batch, in memory, on this thread (batches are small;
    /// it is built as the batch is applied).
    pub(crate) fn build_in_ram(&self, batch: &RecordBatch) -> Result<DocsIndex> {
        let directory = RamDirectory::create();
        let index = self.write_one_segment(directory.clone(), batch)?;
        let mut built = DocsIndex::of(index)?;
        built.memory_bytes = directory.total_mem_usage();
        Ok(built)
    }

    /// Indexes the rows of `batch` as the one segment of a new index in `directory`, on this
    /// thread, without an index writer's threads: document `i` is row `i`. The writer's
    /// budget only sizes its first term table (it does not flush), so it follows the batch's
    /// size: a table sized for 64 MiB is zeroed and walked again for every small batch.
    fn write_one_segment(
        &self,
        directory: impl Into<Box<dyn Directory>>,
        batch: &RecordBatch,
    ) -> Result<Index> {
        let budget = (batch.num_rows() * (4 << 10)).clamp(1 << 20, 64 << 20);
        let mut writer = IndexBuilder::new()
            .schema(self.schema.clone())
            .single_segment_index_writer(directory, budget)
            .map_err(index_error)?;
        let (ids, fields) = (row_ids(batch)?, self.fields(batch));
        for document in self.documents(ids, &fields) {
            writer.add_document(document).map_err(index_error)?;
        }
        writer.finalize().map_err(index_error)
    }

    /// Merges the document indexes of `parts` (each one batch's or segment's, with the row
    /// ids deleted from it) into one index of a single tantivy segment in `directory`, the
    /// documents of deleted rows left out: a flush or a merge of rows whose indexes are built
    /// already merges them, as Lucene merges segments, instead of indexing every row again.
    /// The merged index holds the documents of the parts in their order.
    pub(crate) fn merged(
        &self,
        directory: impl Into<Box<dyn Directory>>,
        parts: &[(&DocsIndex, &RoaringTreemap)],
    ) -> Result<Index> {
        let mut segments = Vec::new();
        let mut alive = Vec::new();
        for (index, deleted) in parts {
            let stored = index.index.searchable_segments().map_err(index_error)?;
            for (reader, row_ids) in index.searcher.segment_readers().iter().zip(&*index.row_ids) {
                let segment = stored
                    .iter()
                    .find(|s| s.id() == reader.segment_id())
                    .ok_or_else(|| index_error("a searched segment the index does not hold"))?;
                segments.push(segment.clone());
                alive.push(alive_docs(reader, row_ids, deleted)?);
            }
        }
        let settings = IndexSettings::default();
        merge_filtered_segments(&segments, settings, alive, directory).map_err(index_error)
    }

    /// [`Self::merged`] into a new index in memory (a merged memtable batch's).
    pub(crate) fn merged_in_ram(
        &self,
        parts: &[(&DocsIndex, &RoaringTreemap)],
    ) -> Result<DocsIndex> {
        let directory = RamDirectory::create();
        let index = self.merged(directory.clone(), parts)?;
        let mut built = DocsIndex::of(index)?;
        built.memory_bytes = directory.total_mem_usage();
        Ok(built)
    }

    /// Writes a segment's document index into `dir` from `parts` (built indexes of some of its
    /// rows, each with the row ids deleted from it) and `rest` (the segment's other rows): the
    /// tantivy segments of `parts` are copied as they are, file by file, each with an alive
    /// bitset when rows of it are deleted, and `rest` is indexed as one more.
    ///
    /// A flush of rows indexed in the background takes their indexes so: a merge would read
    /// and write every posting again, at about the cost of indexing the rows anew. The
    /// segment's index then has several tantivy segments, as a Lucene index has between
    /// merges; compaction merges them into one.
    pub(crate) fn assembled_in_dir(
        &self,
        dir: &Path,
        parts: &[(&DocsIndex, &RoaringTreemap)],
        rest: &RecordBatch,
        pending: Option<&super::index::Pending<'_>>,
    ) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(index_error)?;
        let indexed = match rest.num_rows() {
            0 => None,
            // As in `build_in_dir`: below a few thousand records, on this thread.
            n if n < 10_000 || cores() == 1 => Some(self.build_in_ram(rest)?),
            _ => {
                let index = Index::create_in_ram(self.schema.clone());
                self.write(&index, rest, cores().clamp(1, 4))?;
                Some(DocsIndex::of(index)?)
            }
        };
        // Then the part being built elsewhere meanwhile.
        let pending = pending.map(|wait| wait()).transpose()?;
        let none = RoaringTreemap::new();
        let target = MmapDirectory::open(dir).map_err(index_error)?;
        let mut segments = Vec::new();
        let sources = (parts.iter().copied())
            .chain(indexed.iter().map(|i| (i, &none)))
            .chain(pending.iter().map(|(i, deleted)| (i, &**deleted)));
        for (index, deleted) in sources {
            let metas = index
                .index
                .searchable_segment_metas()
                .map_err(index_error)?;
            let source = index.index.directory();
            for (reader, row_ids) in index.searcher.segment_readers().iter().zip(&*index.row_ids) {
                let meta = metas
                    .iter()
                    .find(|m| m.id() == reader.segment_id())
                    .ok_or_else(|| index_error("a searched segment the index does not hold"))?;
                let alive = alive_bitset(reader, row_ids, deleted)?;
                if alive
                    .as_ref()
                    .is_some_and(|(_, gone)| *gone == reader.max_doc())
                {
                    continue;
                }
                for component in SEGMENT_FILES {
                    let path = meta.relative_path(component);
                    // A segment has no file of a component it holds nothing of.
                    if !source.exists(&path).map_err(index_error)? {
                        continue;
                    }
                    // As stored, with tantivy's footer (which reading a file drops).
                    let bytes = source.atomic_read(&path).map_err(index_error)?;
                    write_file(&target, &path, &bytes)?;
                }
                let meta = match alive {
                    Some((bitset, gone)) => {
                        let meta = meta.clone().with_delete_meta(gone, 0);
                        // Written through tantivy's own directory, which adds the footer.
                        let managed = ManagedDirectory::wrap(Box::new(target.clone()))
                            .map_err(index_error)?;
                        write_file(
                            &managed,
                            &meta.relative_path(SegmentComponent::Delete),
                            &bitset,
                        )?;
                        meta
                    }
                    None => meta.clone(),
                };
                segments.push(meta);
            }
        }
        let mut meta = IndexMeta::with_schema(self.schema.clone());
        meta.segments = segments;
        let mut json = serde_json::to_vec_pretty(&meta).map_err(index_error)?;
        json.push(b'\n');
        target.sync_directory().map_err(index_error)?;
        target
            .atomic_write(Path::new("meta.json"), &json)
            .map_err(index_error)
    }

    /// [`Self::merged`] into a new index in `dir` (a segment's).
    pub(crate) fn merged_in_dir(
        &self,
        dir: &Path,
        parts: &[(&DocsIndex, &RoaringTreemap)],
    ) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(index_error)?;
        let directory = MmapDirectory::open(dir).map_err(index_error)?;
        self.merged(directory, parts)?;
        Ok(())
    }
}

/// The documents of a tantivy segment that a merge keeps: those whose row is not in
/// `deleted` (and that tantivy itself has not deleted); `None` when that is every one.
fn alive_docs(
    reader: &SegmentReader,
    row_ids: &Column<u64>,
    deleted: &RoaringTreemap,
) -> Result<Option<AliveBitSet>> {
    Ok(alive_bitset(reader, row_ids, deleted)?.map(|(bytes, _)| AliveBitSet::open(bytes)))
}

/// The alive bitset (in tantivy's file format) of a tantivy segment without the documents
/// of the rows in `deleted` (nor those tantivy itself deleted), and how many documents are
/// gone; `None` when none is.
fn alive_bitset(
    reader: &SegmentReader,
    row_ids: &Column<u64>,
    deleted: &RoaringTreemap,
) -> Result<Option<(OwnedBytes, u32)>> {
    if deleted.is_empty() && reader.alive_bitset().is_none() {
        return Ok(None);
    }
    let max = reader.max_doc();
    let mut alive = BitSet::with_max_value_and_full(max);
    let mut gone = 0;
    for doc in 0..max {
        if reader.is_deleted(doc) || row_ids.first(doc).is_some_and(|id| deleted.contains(id)) {
            alive.remove(doc);
            gone += 1;
        }
    }
    if gone == 0 {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    write_alive_bitset(&alive, &mut bytes).map_err(index_error)?;
    Ok(Some((OwnedBytes::new(bytes), gone)))
}

/// The machine's cores.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The files of a tantivy segment that [`DocsSchema::assembled_in_dir`] copies (its alive
/// bitset is written anew).
const SEGMENT_FILES: [SegmentComponent; 6] = [
    SegmentComponent::Postings,
    SegmentComponent::Positions,
    SegmentComponent::Terms,
    SegmentComponent::Store,
    SegmentComponent::FastFields,
    SegmentComponent::FieldNorms,
];

/// Writes `bytes` as the file `path` of `dir`, synced.
fn write_file(dir: &dyn Directory, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = dir.open_write(path).map_err(index_error)?;
    file.write_all(bytes).map_err(index_error)?;
    file.terminate().map_err(index_error)
}

/// The sortable form of an IP field's address, or addresses (see [`super::ip`]).
fn sortable_addresses(value: &OwnedValue) -> Option<OwnedValue> {
    match value {
        OwnedValue::Str(text) => {
            super::ip::number(text).map(|n| OwnedValue::Str(super::ip::sortable(n)))
        }
        OwnedValue::Array(items) => {
            let items: Vec<OwnedValue> = items.iter().filter_map(sortable_addresses).collect();
            (!items.is_empty()).then_some(OwnedValue::Array(items))
        }
        _ => None,
    }
}

/// Whether a struct's fields are a geo point's (`ColumnType::GeoPoint`).
fn is_geo_point(fields: &arrow::datatypes::Fields) -> bool {
    fields.len() == 2 && fields[0].name() == "lat" && fields[1].name() == "lon"
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
    /// The bytes of an index held in memory (a memtable batch's); 0 for one on disk.
    pub memory_bytes: usize,
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
    /// The row id of the document at `address`.
    pub fn row_id(&self, address: tantivy::DocAddress) -> Result<u64> {
        self.row_ids
            .get(address.segment_ord as usize)
            .and_then(|c| c.first(address.doc_id))
            .ok_or_else(|| index_error("a document without a row id"))
    }

    /// Opens a segment's document index; one of another schema (an older format) is an error,
    /// and the segment's index is rebuilt.
    pub(crate) fn open(dir: &Path) -> Result<DocsIndex> {
        let index = Index::open_in_dir(dir).map_err(index_error)?;
        if index.schema() != DocsSchema::new().schema {
            return Err(index_error(format!(
                "the document index in {} has an older schema",
                dir.display()
            )));
        }
        DocsIndex::of(index)
    }

    fn of(index: Index) -> Result<DocsIndex> {
        let (reader, searcher, row_ids) = open_reader(&index)?;
        Ok(DocsIndex {
            index,
            searcher,
            row_ids: Arc::new(row_ids),
            memory_bytes: 0,
            reader,
        })
    }
}

impl super::TableSnapshot {
    /// Calls `run` with every document index of the snapshot (each segment's, then each
    /// memtable batch's) and the row ids deleted from it.
    pub fn each_docs_index(
        &self,
        run: &mut impl FnMut(&DocsIndex, Arc<roaring::RoaringTreemap>) -> Result<()>,
    ) -> Result<()> {
        // From now on, new rows are indexed as they are applied (see `SearchedAt`).
        if let Some(spec) = &self.index {
            spec.searched.mark();
        }
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
        Ok(())
    }
}

/// The best hits of a document query over a snapshot, and how many live rows match.
#[derive(Clone, Debug, Default)]
pub struct DocsHits {
    /// Best first; equal scores in row-id order.
    pub hits: Vec<super::search::Hit>,
    pub total: u64,
    /// The deadline passed before every index was searched: the hits and the total are of
    /// those searched before it (Elasticsearch's partial results on a `timeout`).
    pub timed_out: bool,
}

/// When a search stops taking up more document indexes: checked before each segment's index
/// and each memtable batch's; one that is begun is searched to its end.
#[derive(Clone, Copy, Debug, Default)]
pub struct Deadline(pub Option<std::time::Instant>);

impl Deadline {
    pub fn passed(&self) -> bool {
        self.0.is_some_and(|at| std::time::Instant::now() >= at)
    }
}

impl super::TableSnapshot {
    /// Runs `query` over every segment's document index and every memtable batch's (built on
    /// first use), skipping deleted rows: the `top` best hits by score, and the count of all.
    /// Past `deadline`, the indexes not yet searched are left out and `timed_out` is set.
    pub fn search_documents(
        &self,
        query: &dyn tantivy::query::Query,
        top: usize,
        deadline: Deadline,
    ) -> Result<DocsHits> {
        use tantivy::collector::{Count, TopDocs};
        let mut out = DocsHits::default();
        let mut run = |index: &DocsIndex, deleted: Arc<roaring::RoaringTreemap>| -> Result<()> {
            if deadline.passed() {
                out.timed_out = true;
                return Ok(());
            }
            if top == 0 {
                // Counted alone, tantivy counts without visiting every match where it can (a
                // term's document frequency, every document) when nothing is deleted: a
                // `size: 0` search with aggregations no longer reads its matches twice.
                out.total += search_live(index, query, deleted, Count)? as u64;
                return Ok(());
            }
            let best = TopDocs::with_limit(top).order_by_score();
            let (best, count) = search_live(index, query, deleted, (best, Count))?;
            out.total += count as u64;
            for (score, address) in best {
                let row_id = index.row_id(address)?;
                out.hits.push(super::search::Hit { row_id, score });
            }
            Ok(())
        };
        self.each_docs_index(&mut run)?;
        out.hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.row_id.cmp(&b.row_id))
        });
        out.hits.truncate(top);
        Ok(out)
    }
}

/// `collector` run over the documents of `index` that `query` matches, less those whose rows are
/// in `deleted`. The row id of every match is read only when some row is deleted: most
/// indexes have none, and that read was most of the work of a search that counts its matches
/// (issue 28, point 4).
pub fn search_live<C: tantivy::collector::Collector>(
    index: &DocsIndex,
    query: &dyn tantivy::query::Query,
    deleted: Arc<roaring::RoaringTreemap>,
    collector: C,
) -> Result<C::Fruit> {
    if deleted.is_empty() {
        return index
            .searcher
            .search(query, &collector)
            .map_err(index_error);
    }
    let live = tantivy::collector::FilterCollector::new(
        ROW_ID_FIELD.to_owned(),
        move |id: u64| !deleted.contains(id),
        collector,
    );
    index.searcher.search(query, &live).map_err(index_error)
}

/// What a sorted search sorts by.
#[derive(Clone, Debug, PartialEq)]
pub enum SortBy {
    /// Relevance.
    Score,
    /// The order records were written in (row id).
    Doc,
    /// A field's value: numbers, dates (as Unix milliseconds) and booleans (0, 1) by value,
    /// strings after them, by bytes.
    Field(String),
}

/// One sort criterion.
#[derive(Clone, Debug, PartialEq)]
pub struct SortSpec {
    pub by: SortBy,
    pub descending: bool,
    /// Records without a value come first (`missing: _first`); by default, last.
    pub missing_first: bool,
    /// Which of a field's several values sorts a record; by default the least ascending, the
    /// greatest descending.
    pub mode: Option<SortMode>,
}

/// How a field with several values sorts (Elasticsearch's sort `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortMode {
    Min,
    Max,
    Sum,
    Avg,
    Median,
}

impl SortMode {
    pub fn parse(text: &str) -> Option<SortMode> {
        Some(match text {
            "min" => SortMode::Min,
            "max" => SortMode::Max,
            "sum" => SortMode::Sum,
            "avg" => SortMode::Avg,
            "median" => SortMode::Median,
            _ => return None,
        })
    }

    /// The sort value of a record's long values (`None`: it has none). Whole numbers stay
    /// whole, as Elasticsearch computes them for a long field: the sum wraps around, the
    /// average and the median of two are rounded.
    fn of_longs(self, mut values: Vec<i64>) -> Option<SortValue> {
        if values.is_empty() {
            return None;
        }
        let n = values.len();
        let sum = || values.iter().fold(0i64, |a, b| a.wrapping_add(*b));
        Some(SortValue::Int(match self {
            SortMode::Min => *values.iter().min()?,
            SortMode::Max => *values.iter().max()?,
            SortMode::Sum => sum(),
            SortMode::Avg => (sum() as f64 / n as f64).round() as i64,
            SortMode::Median => {
                values.sort_unstable();
                match n % 2 {
                    1 => values[n / 2],
                    _ => ((values[n / 2 - 1] as f64 + values[n / 2] as f64) / 2.0).round() as i64,
                }
            }
        }))
    }

    /// The sort value of a record's numbers (`None`: it has none). Sums add the values in
    /// ascending order, as Elasticsearch reads a field's sorted doc values.
    fn of_numbers(self, mut values: Vec<f64>) -> Option<SortValue> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable_by(f64::total_cmp);
        let n = values.len();
        let sum = || values.iter().sum::<f64>();
        Some(SortValue::Number(match self {
            SortMode::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
            SortMode::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            SortMode::Sum => sum(),
            SortMode::Avg => sum() / n as f64,
            SortMode::Median => match n % 2 {
                1 => values[n / 2],
                _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
            },
        }))
    }
}

/// A sort value of a hit.
#[derive(Clone, Debug, PartialEq)]
pub enum SortValue {
    /// A long field's value, exact.
    Int(i64),
    Number(f64),
    Text(String),
}

impl SortValue {
    fn cmp(&self, other: &SortValue) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (self, other) {
            (SortValue::Int(a), SortValue::Int(b)) => a.cmp(b),
            (SortValue::Int(a), SortValue::Number(b)) => (*a as f64).total_cmp(b),
            (SortValue::Number(a), SortValue::Int(b)) => a.total_cmp(&(*b as f64)),
            (SortValue::Number(a), SortValue::Number(b)) => a.total_cmp(b),
            (SortValue::Text(a), SortValue::Text(b)) => a.cmp(b),
            (SortValue::Int(_) | SortValue::Number(_), SortValue::Text(_)) => Ordering::Less,
            (SortValue::Text(_), SortValue::Int(_) | SortValue::Number(_)) => Ordering::Greater,
        }
    }
}

/// A hit of a sorted search, with its sort values (one per criterion; `None`: missing).
#[derive(Clone, Debug)]
pub struct SortedHit {
    pub row_id: u64,
    pub score: f32,
    pub keys: Vec<Option<SortValue>>,
}

/// Orders two hits' keys by `sort`.
pub fn compare_keys(
    sort: &[SortSpec],
    a: &[Option<SortValue>],
    b: &[Option<SortValue>],
) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    for (spec, (a, b)) in sort.iter().zip(a.iter().zip(b)) {
        let order = match (a, b) {
            (None, None) => Ordering::Equal,
            // Missing values go last (or first), whatever the direction.
            (None, Some(_)) => match spec.missing_first {
                true => return Ordering::Less,
                false => return Ordering::Greater,
            },
            (Some(_), None) => match spec.missing_first {
                true => return Ordering::Greater,
                false => return Ordering::Less,
            },
            (Some(a), Some(b)) => a.cmp(b),
        };
        let order = if spec.descending {
            order.reverse()
        } else {
            order
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// Whether a column holds nanosecond dates (one or several).
fn is_nanos(column: &crate::schema::ColumnType) -> bool {
    use crate::schema::{ColumnType, TimestampUnit};
    match column {
        ColumnType::List(item) => is_nanos(item),
        ColumnType::Timestamp { unit, .. } => *unit == TimestampUnit::Nanoseconds,
        _ => false,
    }
}

/// The typed fast columns of one field in one tantivy segment.
struct FieldColumns {
    /// A `date_nanos` field: its dates sort by nanoseconds, as Elasticsearch sorts them.
    nanos: bool,
    i64: Option<Column<i64>>,
    f64: Option<Column<f64>>,
    date: Option<Column<DateTime>>,
    bool: Option<Column<bool>>,
    str: Option<tantivy::columnar::StrColumn>,
}

impl FieldColumns {
    fn open(reader: &tantivy::SegmentReader, path: &str, nanos: bool) -> Result<FieldColumns> {
        let fast = reader.fast_fields();
        let name = format!("{KEYWORD_FIELD}.{path}");
        Ok(FieldColumns {
            nanos,
            i64: fast.column_opt::<i64>(&name).map_err(index_error)?,
            f64: fast.column_opt::<f64>(&name).map_err(index_error)?,
            date: fast.column_opt::<DateTime>(&name).map_err(index_error)?,
            bool: fast.column_opt::<bool>(&name).map_err(index_error)?,
            str: fast.str(&name).map_err(index_error)?,
        })
    }

    /// The sort value of document `doc`: of its values (it may have several), the one `mode`
    /// picks (strings: the least, or the greatest with `Max`).
    fn value(&self, doc: tantivy::DocId, mode: SortMode) -> Option<SortValue> {
        if let Some(v) = self
            .i64
            .as_ref()
            .and_then(|c| mode.of_longs(c.values_for_doc(doc).collect()))
        {
            return Some(v);
        }
        if let Some(v) = self
            .f64
            .as_ref()
            .and_then(|c| mode.of_numbers(c.values_for_doc(doc).collect()))
        {
            return Some(v);
        }
        if let Some(v) = self.date.as_ref().and_then(|c| {
            let stamps = c.values_for_doc(doc).map(|d| match self.nanos {
                true => d.into_timestamp_nanos(),
                false => d.into_timestamp_millis(),
            });
            mode.of_longs(stamps.collect())
        }) {
            return Some(match v {
                // Nanoseconds stay whole: a double would round them.
                SortValue::Int(ns) if self.nanos => SortValue::Int(ns),
                SortValue::Int(ms) => SortValue::Number(ms as f64),
                other => other,
            });
        }
        if let Some(v) = self.bool.as_ref().and_then(|c| {
            let values = c.values_for_doc(doc).map(|b| if b { 1.0 } else { 0.0 });
            mode.of_numbers(values.collect())
        }) {
            return Some(v);
        }
        let column = self.str.as_ref()?;
        let ords = column.ords().values_for_doc(doc);
        let ord = match mode {
            SortMode::Max => ords.max()?,
            _ => ords.min()?,
        };
        let mut text = String::new();
        column.ord_to_str(ord, &mut text).ok()?;
        Some(SortValue::Text(text))
    }
}

impl super::TableSnapshot {
    /// Runs `query` and sorts every live match by `sort` (then by row id): the first `top`
    /// hits after `after` (the sort values of the last hit of the previous page), and the
    /// count of all matches. With `terminate_after` N, only the first N matches in write
    /// order count (Elasticsearch stops collecting after N per shard). Past `deadline`, as
    /// [`Self::search_documents`]: the last value is whether it passed.
    pub fn search_sorted(
        &self,
        query: &dyn tantivy::query::Query,
        sort: &[SortSpec],
        after: Option<&[Option<SortValue>]>,
        top: usize,
        terminate_after: Option<usize>,
        deadline: Deadline,
    ) -> Result<(Vec<SortedHit>, u64, bool)> {
        use tantivy::collector::{Count, TopDocs};
        let mut all: Vec<SortedHit> = Vec::new();
        let mut total = 0u64;
        let mut timed_out = false;
        let mut run = |index: &DocsIndex, deleted: Arc<roaring::RoaringTreemap>| -> Result<()> {
            if deadline.passed() {
                timed_out = true;
                return Ok(());
            }
            let matches = search_live(index, query, deleted.clone(), Count)?;
            total += matches as u64;
            if matches == 0 {
                return Ok(());
            }
            let every = TopDocs::with_limit(matches).order_by_score();
            let found = search_live(index, query, deleted, every)?;
            let mut columns: Vec<Option<Vec<Option<FieldColumns>>>> =
                (0..index.searcher.segment_readers().len())
                    .map(|_| None)
                    .collect();
            for (score, address) in found {
                let segment = address.segment_ord as usize;
                let row_id = index.row_id(address)?;
                if columns[segment].is_none() {
                    let reader = index.searcher.segment_reader(address.segment_ord);
                    let opened = sort
                        .iter()
                        .map(|spec| match &spec.by {
                            SortBy::Field(path) => {
                                let nanos = self
                                    .table
                                    .column(path)
                                    .is_some_and(|c| is_nanos(&c.data_type));
                                FieldColumns::open(reader, path, nanos).map(Some)
                            }
                            _ => Ok(None),
                        })
                        .collect::<Result<Vec<_>>>()?;
                    columns[segment] = Some(opened);
                }
                let fields = columns[segment].as_ref().map_or(&[][..], |c| &c[..]);
                let keys = sort
                    .iter()
                    .zip(fields)
                    .map(|(spec, column)| match &spec.by {
                        SortBy::Score => Some(SortValue::Number(score as f64)),
                        SortBy::Doc => Some(SortValue::Number(row_id as f64)),
                        SortBy::Field(_) => {
                            let mode = spec.mode.unwrap_or(match spec.descending {
                                true => SortMode::Max,
                                false => SortMode::Min,
                            });
                            column.as_ref().and_then(|c| c.value(address.doc_id, mode))
                        }
                    })
                    .collect();
                all.push(SortedHit {
                    row_id,
                    score,
                    keys,
                });
            }
            Ok(())
        };
        self.each_docs_index(&mut run)?;
        if let Some(limit) = terminate_after {
            all.sort_by_key(|hit| hit.row_id);
            all.truncate(limit);
            total = total.min(limit as u64);
        }
        if let Some(after) = after {
            all.retain(|hit| compare_keys(sort, &hit.keys, after) == std::cmp::Ordering::Greater);
        }
        all.sort_by(|a, b| {
            compare_keys(sort, &a.keys, &b.keys).then_with(|| a.row_id.cmp(&b.row_id))
        });
        all.truncate(top);
        Ok((all, total, timed_out))
    }
}

impl super::TableSnapshot {
    /// The score `query` gives each of `rows` it matches (a page's hits, for their
    /// `matched_queries`).
    pub fn scores_among(
        &self,
        query: &dyn tantivy::query::Query,
        rows: &std::collections::HashSet<u64>,
    ) -> Result<std::collections::HashMap<u64, f32>> {
        use tantivy::collector::{FilterCollector, TopDocs};
        let mut out = std::collections::HashMap::new();
        if rows.is_empty() {
            return Ok(out);
        }
        self.each_docs_index(
            &mut |index: &DocsIndex, deleted: Arc<roaring::RoaringTreemap>| {
                let wanted = rows.clone();
                let collector = FilterCollector::new(
                    ROW_ID_FIELD.to_owned(),
                    move |id: u64| wanted.contains(&id) && !deleted.contains(id),
                    TopDocs::with_limit(rows.len()).order_by_score(),
                );
                for (score, address) in index
                    .searcher
                    .search(query, &collector)
                    .map_err(index_error)?
                {
                    let row_id = index.row_id(address)?;
                    out.insert(row_id, score);
                }
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// The live rows record filter `filter` matches, in every segment and the memtable, from
    /// its matches kept per segment (see [`super::cached`]).
    pub fn filtered_rows(&self, filter: &CachedFilter) -> Result<roaring::RoaringTreemap> {
        let mut out = roaring::RoaringTreemap::new();
        self.each_docs_index(
            &mut |index: &DocsIndex, deleted: Arc<roaring::RoaringTreemap>| {
                let mut rows = roaring::RoaringTreemap::new();
                for found in filter.segments(&index.searcher).map_err(index_error)? {
                    rows |= &found.rows;
                }
                rows -= deleted.as_ref();
                out |= rows;
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// The live rows record filter `filter` matches, as a scan reads them: found once per
    /// snapshot and filter (see [`super::cached::KeptWithin`]).
    pub fn kept_within(&self, filter: &CachedFilter) -> Result<Arc<super::RowsWithin>> {
        self.kept.get_or_find(filter.key(), || {
            let rows = self.filtered_rows(filter)?;
            Ok(super::RowsWithin::new(self, Arc::new(rows)))
        })
    }

    /// The live rows `query` matches, in every segment and the memtable.
    pub fn matching_rows(
        &self,
        query: &dyn tantivy::query::Query,
    ) -> Result<roaring::RoaringTreemap> {
        use tantivy::collector::DocSetCollector;
        let mut out = roaring::RoaringTreemap::new();
        self.each_docs_index(
            &mut |index: &DocsIndex, deleted: Arc<roaring::RoaringTreemap>| {
                for address in search_live(index, query, deleted, DocSetCollector)? {
                    let row_id = index.row_id(address)?;
                    out.insert(row_id);
                }
                Ok(())
            },
        )?;
        Ok(out)
    }
}

/// `rows` rows with row ids from 100: `n` counts up from 0, `s` is "even" or "odd" by it.
#[cfg(test)]
pub(crate) fn counted(rows: u64) -> RecordBatch {
    use arrow::{
        array::{Int64Array, StringArray, UInt64Array},
        datatypes::{DataType, Field, Schema},
    };
    let schema = Schema::new(vec![
        Field::new(ROW_ID, DataType::UInt64, false),
        Field::new("n", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(UInt64Array::from_iter_values(100..100 + rows)),
            Arc::new(Int64Array::from_iter_values((0..rows).map(|i| i as i64))),
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| if i % 2 == 0 { "even" } else { "odd" }),
            )),
        ],
    )
    .expect("a batch of its own schema")
}

#[cfg(test)]
mod tests {
    use tantivy::{
        Document,
        collector::{Count, DocSetCollector},
    };

    use super::*;

    /// A row's document holds each kind of column as the Query DSL reads it: strings in
    /// `all`, `text` and `kw`; numbers, booleans, dates and points in `kw` alone (`float`
    /// fields rounded, decimals as numbers); a list's non-null values; a keyword-only field
    /// in `kw` alone; an IP field's address in `ip` too; nulls nowhere.
    #[test]
    fn a_rows_document_holds_each_column_where_queries_read_it() {
        use arrow::{
            array::{
                ArrayRef, BooleanArray, Decimal128Array, Float64Array, Int64Array, ListArray,
                StringArray, StructArray, TimestampMillisecondArray, TimestampNanosecondArray,
                UInt64Array,
            },
            datatypes::{DataType, Field, Fields, Int64Type, Schema},
        };
        let point_fields = Fields::from(vec![
            Field::new("lat", DataType::Float64, true),
            Field::new("lon", DataType::Float64, true),
        ]);
        let point = StructArray::new(
            point_fields.clone(),
            vec![
                Arc::new(Float64Array::from(vec![48.5, 0.0])) as ArrayRef,
                Arc::new(Float64Array::from(vec![2.25, 0.0])),
            ],
            Some(vec![true, false].into()),
        );
        let tags = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), None, Some(3)]),
            Some(vec![None]),
        ]);
        let words = {
            let values = StringArray::from(vec![Some("a"), None, Some("b")]);
            let offsets = arrow::buffer::OffsetBuffer::new(vec![0, 3, 3].into());
            let field = Arc::new(Field::new("item", DataType::Utf8, true));
            ListArray::new(field, offsets, Arc::new(values), None)
        };
        let columns: Vec<(&str, ArrayRef)> = vec![
            (ROW_ID, Arc::new(UInt64Array::from(vec![7, 8]))),
            ("_id", Arc::new(StringArray::from(vec!["id-7", "id-8"]))),
            (
                "s",
                Arc::new(StringArray::from(vec![Some("Hello world"), None])),
            ),
            ("n", Arc::new(Int64Array::from(vec![Some(-3), Some(4)]))),
            ("f", Arc::new(Float64Array::from(vec![Some(1.1), None]))),
            (
                "d",
                Arc::new(
                    Decimal128Array::from(vec![Some(12_345), None])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ),
            ("b", Arc::new(BooleanArray::from(vec![Some(true), None]))),
            (
                "t",
                Arc::new(TimestampMillisecondArray::from(vec![
                    Some(1_700_000_000_123),
                    None,
                ])),
            ),
            (
                "tn",
                Arc::new(TimestampNanosecondArray::from(vec![
                    Some(1_700_000_000_123_456_789),
                    None,
                ])),
            ),
            ("p", Arc::new(point)),
            ("nums", Arc::new(tags)),
            ("words", Arc::new(words)),
            (
                "addr",
                Arc::new(StringArray::from(vec![Some("10.0.0.1"), None])),
            ),
        ];
        let schema = Schema::new(
            columns
                .iter()
                .map(|(name, column)| Field::new(*name, column.data_type().clone(), true))
                .collect::<Vec<_>>(),
        );
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            columns.into_iter().map(|(_, c)| c).collect(),
        )
        .unwrap();
        let docs = DocsSchema {
            ips: Arc::new(["addr".to_owned()].into()),
            rounded: Arc::new([("f".to_owned(), Rounding::Single)].into()),
            keyword_only: Arc::new(["_id".to_owned()].into()),
            ..DocsSchema::new()
        };
        let (ids, fields) = (row_ids(&batch).unwrap(), docs.fields(&batch));
        let made: Vec<serde_json::Value> = docs
            .documents(ids, &fields)
            .map(|d| serde_json::to_value(d.to_named_doc(&docs.schema)).unwrap())
            .collect();

        let object = |entries: Vec<(&str, OwnedValue)>| {
            OwnedValue::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect(),
            )
        };
        let str = |s: &str| OwnedValue::Str(s.to_owned());
        let mut first = TantivyDocument::new();
        first.add_u64(docs.row_id, 7);
        for text in ["Hello world", "a", "b", "10.0.0.1"] {
            first.add_text(docs.all, text);
        }
        let sortable = super::super::ip::sortable(super::super::ip::number("10.0.0.1").unwrap());
        first.add_field_value(docs.ip, &object(vec![("addr", OwnedValue::Str(sortable))]));
        first.add_field_value(
            docs.text,
            &object(vec![
                ("s", str("Hello world")),
                ("words", OwnedValue::Array(vec![str("a"), str("b")])),
                ("addr", str("10.0.0.1")),
            ]),
        );
        first.add_field_value(
            docs.keyword,
            &object(vec![
                ("_id", str("id-7")),
                ("s", str("Hello world")),
                ("n", OwnedValue::I64(-3)),
                ("f", OwnedValue::F64(f64::from(1.1f32))),
                ("d", OwnedValue::F64(123.45)),
                ("b", OwnedValue::Bool(true)),
                (
                    "t",
                    OwnedValue::Date(DateTime::from_timestamp_millis(1_700_000_000_123)),
                ),
                (
                    "tn",
                    OwnedValue::Date(DateTime::from_timestamp_nanos(1_700_000_000_123_456_789)),
                ),
                (
                    "p",
                    object(vec![
                        ("lat", OwnedValue::F64(48.5)),
                        ("lon", OwnedValue::F64(2.25)),
                    ]),
                ),
                (
                    "nums",
                    OwnedValue::Array(vec![OwnedValue::I64(1), OwnedValue::I64(3)]),
                ),
                ("words", OwnedValue::Array(vec![str("a"), str("b")])),
                ("addr", str("10.0.0.1")),
            ]),
        );
        let mut second = TantivyDocument::new();
        second.add_u64(docs.row_id, 8);
        second.add_field_value(docs.text, &object(vec![]));
        second.add_field_value(
            docs.keyword,
            &object(vec![("_id", str("id-8")), ("n", OwnedValue::I64(4))]),
        );
        let expected: Vec<serde_json::Value> = [first, second]
            .iter()
            .map(|d| serde_json::to_value(d.to_named_doc(&docs.schema)).unwrap())
            .collect();
        assert_eq!(made, expected);
    }

    #[test]
    fn an_index_of_an_older_schema_is_not_opened_so_that_it_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let mut older = tantivy::schema::Schema::builder();
        older.add_u64_field(ROW_ID_FIELD, FAST);
        Index::create_in_dir(dir.path(), older.build()).unwrap();
        let error = DocsIndex::open(dir.path()).unwrap_err().to_string();
        assert!(error.contains("older schema"), "{error}");
    }

    /// `text` holds strings alone, and `all` and `text` leave keyword-only fields out: `kw`
    /// holds every value.
    #[test]
    fn text_holds_strings_and_keyword_only_fields_are_in_kw_alone() {
        let batch = counted(10);
        let count = |docs: &DocsSchema, term: tantivy::Term| {
            let index = docs.build_in_ram(&batch).unwrap();
            let query = tantivy::query::TermQuery::new(term, IndexRecordOption::Basic);
            index.searcher.search(&query, &Count).unwrap()
        };
        let json =
            |field: Field, path: &str| tantivy::Term::from_field_json_path(field, path, true);
        let string = |field: Field, path: &str, value: &str| {
            let mut term = json(field, path);
            term.append_type_and_str(value);
            term
        };
        let number = |field: Field| {
            let mut term = json(field, "n");
            term.append_type_and_fast_value(4_i64);
            term
        };
        let plain = DocsSchema::new();
        assert_eq!(count(&plain, string(plain.text, "s", "even")), 5);
        assert_eq!(
            count(&plain, tantivy::Term::from_field_text(plain.all, "even")),
            5
        );
        assert_eq!(count(&plain, number(plain.keyword)), 1);
        assert_eq!(count(&plain, number(plain.text)), 0);

        let keyword_only = DocsSchema {
            keyword_only: Arc::new(["s".to_owned()].into()),
            ..DocsSchema::new()
        };
        assert_eq!(
            count(&keyword_only, string(keyword_only.keyword, "s", "even")),
            5
        );
        assert_eq!(
            count(&keyword_only, string(keyword_only.text, "s", "even")),
            0
        );
        let all = tantivy::Term::from_field_text(keyword_only.all, "even");
        assert_eq!(count(&keyword_only, all), 0);
        assert!(keyword_only.is_keyword_only("s") && !plain.is_keyword_only("s"));
        assert_ne!(keyword_only.fingerprint(), plain.fingerprint());
    }

    #[test]
    fn a_large_segment_is_indexed_whole_on_several_threads() {
        let rows = 12_000_u64;
        let batch = counted(rows);
        let dir = tempfile::tempdir().unwrap();
        let docs = DocsSchema::new();
        docs.build_in_dir(dir.path(), &batch).unwrap();
        let index = DocsIndex::open(dir.path()).unwrap();
        let all = index
            .searcher
            .search(&tantivy::query::AllQuery, &Count)
            .unwrap();
        assert_eq!(all as u64, rows);
        // Every even row, by its own row id, whichever thread indexed it.
        let mut term = tantivy::Term::from_field_json_path(docs.keyword, "s", true);
        term.append_type_and_str("even");
        let even: Box<dyn tantivy::query::Query> = Box::new(tantivy::query::TermQuery::new(
            term,
            tantivy::schema::IndexRecordOption::Basic,
        ));
        let found = index
            .searcher
            .search(even.as_ref(), &DocSetCollector)
            .unwrap();
        let mut ids: Vec<u64> = found
            .iter()
            .map(|address| {
                index.row_ids[address.segment_ord as usize]
                    .first(address.doc_id)
                    .unwrap()
            })
            .collect();
        ids.sort_unstable();
        let expected: Vec<u64> = (100..100 + rows).step_by(2).collect();
        assert_eq!(ids, expected);
    }

    /// The row ids an index finds for `s: even`, sorted, and the BM25 score of each hit of
    /// `text.s: even` by row id.
    fn evens(docs: &DocsSchema, index: &DocsIndex) -> (Vec<u64>, Vec<(u64, u32)>) {
        let mut term = tantivy::Term::from_field_json_path(docs.keyword, "s", true);
        term.append_type_and_str("even");
        let query = tantivy::query::TermQuery::new(term, IndexRecordOption::Basic);
        let found = index.searcher.search(&query, &DocSetCollector).unwrap();
        let mut ids: Vec<u64> = found.iter().map(|a| index.row_id(*a).unwrap()).collect();
        ids.sort_unstable();
        let mut term = tantivy::Term::from_field_json_path(docs.text, "s", true);
        term.append_type_and_str("even");
        let query = tantivy::query::TermQuery::new(term, IndexRecordOption::WithFreqs);
        let top = tantivy::collector::TopDocs::with_limit(100_000).order_by_score();
        let mut scores: Vec<(u64, u32)> = index
            .searcher
            .search(&query, &top)
            .unwrap()
            .into_iter()
            .map(|(score, a)| (index.row_id(a).unwrap(), score.to_bits()))
            .collect();
        scores.sort_unstable();
        (ids, scores)
    }

    #[test]
    fn merged_indexes_find_and_score_what_one_built_from_the_live_rows_does() {
        let docs = DocsSchema::new();
        let rows = counted(30_000);
        // A segment's index on several threads (several tantivy segments), then two batches'.
        let dir = tempfile::tempdir().unwrap();
        docs.build_in_dir(dir.path(), &rows.slice(0, 20_000))
            .unwrap();
        let segment = DocsIndex::open(dir.path()).unwrap();
        let first = docs.build_in_ram(&rows.slice(20_000, 6_000)).unwrap();
        let second = docs.build_in_ram(&rows.slice(26_000, 4_000)).unwrap();
        // Row ids are 100 + position; some rows of each part are deleted.
        let deleted = |ids: &[u64]| ids.iter().copied().collect::<RoaringTreemap>();
        let (gone_a, gone_b, gone_c) = (
            deleted(&[100, 101, 5_000]),
            deleted(&[20_100]),
            deleted(&[26_100, 26_102, 30_098]),
        );
        let parts = [(&segment, &gone_a), (&first, &gone_b), (&second, &gone_c)];
        let in_ram = docs.merged_in_ram(&parts).unwrap();
        let out = tempfile::tempdir().unwrap();
        docs.merged_in_dir(out.path(), &parts).unwrap();
        let in_dir = DocsIndex::open(out.path()).unwrap();
        // The same live rows indexed from scratch.
        let gone = &(&gone_a | &gone_b) | &gone_c;
        let live: arrow::array::BooleanArray = (100..30_100u64)
            .map(|id| Some(!gone.contains(id)))
            .collect();
        let live = arrow::compute::filter_record_batch(&rows, &live).unwrap();
        let rebuilt = docs.build_in_ram(&live).unwrap();
        let expected = evens(&docs, &rebuilt);
        assert_eq!(expected.0.len(), 15_000 - 6);
        for merged in [&in_ram, &in_dir] {
            assert_eq!(merged.searcher.num_docs(), 30_000 - 7);
            assert_eq!(merged.searcher.segment_readers().len(), 1);
            assert_eq!(evens(&docs, merged), expected);
        }
        // A part with nothing deleted is taken whole.
        let whole = docs
            .merged_in_ram(&[(&first, &RoaringTreemap::new())])
            .unwrap();
        assert_eq!(whole.searcher.num_docs(), 6_000);
    }
}
