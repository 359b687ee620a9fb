//! Full-text and exact-match indexing of a table: one immutable tantivy index per segment, and
//! a small in-memory inverted index per memtable batch (the searchable tail).
//!
//! Text analysis is tantivy's `default` analyzer: split on every character that is not
//! alphanumeric, drop tokens longer than 40 bytes, lowercase; no stemming and no stop words.
//! Exact-match columns are indexed as one untokenized term per value, the value as Arrow
//! displays it (so a query value is coerced to the column's type and displayed the same way).
//!
//! BM25 statistics (documents, tokens per field, document frequencies) are summed over every
//! segment index and every memtable batch, so a row's score does not depend on where it sits.
//! As in Lucene, a deleted row still counts in them until compaction rewrites its segment.

use std::{
    cell::{Cell, RefCell},
    collections::HashMap,
    path::Path,
};

use smallvec::{SmallVec, smallvec};

use arrow::{
    array::{Array, AsArray, RecordBatch},
    util::display::{ArrayFormatter, FormatOptions},
};
use tantivy::{
    Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term,
    columnar::Column,
    query::Bm25StatisticsProvider,
    schema::{
        FAST, Field, INDEXED, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
    },
    tokenizer::{LowerCaser, RemoveLongFilter, SimpleTokenizer, TextAnalyzer, TokenStream},
};

use super::rows::row_ids;
use crate::{
    catalog::TableDef,
    error::{Error, Result},
};

/// The tantivy field of the row id (a fast field, and indexed so that it can be looked up).
pub const ROW_ID_FIELD: &str = "_row_id";

pub(crate) fn index_error(error: impl std::fmt::Display) -> Error {
    Error::Index(error.to_string())
}

/// The analyzer of full-text columns (documented in docs/api.md).
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .build()
}

/// The tokens of `text` as the full-text analyzer produces them.
pub fn tokens(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

/// The tantivy schema of a table's index: the same for every segment of the table, so field
/// ids agree across segments.
#[derive(Clone, Debug)]
pub struct TextSchema {
    pub schema: Schema,
    pub row_id: Field,
    /// Full-text columns and their fields, in the table definition's order.
    pub text: Vec<(String, Field)>,
    /// Exact-match columns and their fields.
    pub exact: Vec<(String, Field)>,
}

impl TextSchema {
    /// `None` when the table has neither full-text nor exact-match columns.
    pub fn of(table: &TableDef) -> Option<TextSchema> {
        if table.fts_columns.is_empty() && table.exact_columns.is_empty() {
            return None;
        }
        let mut builder = Schema::builder();
        let row_id = builder.add_u64_field(ROW_ID_FIELD, FAST | INDEXED);
        let text_options = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("default")
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        let text = table
            .fts_columns
            .iter()
            .map(|c| {
                (
                    c.clone(),
                    builder.add_text_field(&format!("text.{c}"), text_options.clone()),
                )
            })
            .collect();
        let exact = table
            .exact_columns
            .iter()
            .map(|c| {
                (
                    c.clone(),
                    builder.add_text_field(&format!("exact.{c}"), STRING),
                )
            })
            .collect();
        Some(TextSchema {
            schema: builder.build(),
            row_id,
            text,
            exact,
        })
    }

    pub fn text_field(&self, column: &str) -> Option<Field> {
        self.text.iter().find(|(c, _)| c == column).map(|(_, f)| *f)
    }

    pub fn exact_field(&self, column: &str) -> Option<Field> {
        self.exact
            .iter()
            .find(|(c, _)| c == column)
            .map(|(_, f)| *f)
    }
}

/// The values of a column as exact-match terms (`None` for nulls).
pub fn exact_values(column: &dyn Array) -> Result<Vec<Option<String>>> {
    let mut values = vec![None; column.len()];
    for_each_exact_value(column, |row, value| values[row] = Some(value.to_owned()))?;
    Ok(values)
}

/// Calls `f` with the row and exact-match term of every non-null value of `column`: strings as
/// they are, other types as Arrow displays them (formatted into one reused buffer).
pub fn for_each_exact_value(column: &dyn Array, mut f: impl FnMut(usize, &str)) -> Result<()> {
    if let Some(strings) = column.as_string_opt::<i32>() {
        strings.iter().enumerate().for_each(|(row, v)| {
            if let Some(v) = v {
                f(row, v)
            }
        });
    } else if let Some(strings) = column.as_string_opt::<i64>() {
        strings.iter().enumerate().for_each(|(row, v)| {
            if let Some(v) = v {
                f(row, v)
            }
        });
    } else if let Some(strings) = column.as_string_view_opt() {
        strings.iter().enumerate().for_each(|(row, v)| {
            if let Some(v) = v {
                f(row, v)
            }
        });
    } else {
        use std::fmt::Write;
        let options = FormatOptions::default();
        let formatter = ArrayFormatter::try_new(column, &options).map_err(index_error)?;
        let mut buffer = String::new();
        for row in (0..column.len()).filter(|row| column.is_valid(*row)) {
            buffer.clear();
            write!(buffer, "{}", formatter.value(row)).map_err(index_error)?;
            f(row, &buffer);
        }
    }
    Ok(())
}

/// Writes the index of one segment's rows (in the table schema) into `dir`.
pub(crate) fn build_segment_index(
    dir: &Path,
    schema: &TextSchema,
    batch: &RecordBatch,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(index_error)?;
    let index = Index::create_in_dir(dir, schema.schema.clone()).map_err(index_error)?;
    let mut writer: IndexWriter = index
        .writer_with_num_threads(1, 64 << 20)
        .map_err(index_error)?;
    let ids = row_ids(batch)?;
    let text: Vec<_> = schema
        .text
        .iter()
        .map(|(name, field)| Ok((*field, string_column(batch, name)?)))
        .collect::<Result<_>>()?;
    let exact: Vec<_> = schema
        .exact
        .iter()
        .map(|(name, field)| {
            let column = batch
                .column_by_name(name)
                .ok_or_else(|| index_error(format!("no column {name}")))?;
            Ok((*field, exact_values(column)?))
        })
        .collect::<Result<_>>()?;
    for (row, id) in ids.values().iter().enumerate() {
        let mut doc = TantivyDocument::new();
        doc.add_u64(schema.row_id, *id);
        for (field, column) in &text {
            if column.is_valid(row) {
                doc.add_text(*field, column.value(row));
            }
        }
        for (field, values) in &exact {
            if let Some(value) = &values[row] {
                doc.add_text(*field, value);
            }
        }
        writer.add_document(doc).map_err(index_error)?;
    }
    writer.commit().map_err(index_error)?;
    writer.wait_merging_threads().map_err(index_error)?;
    Ok(())
}

fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a arrow::array::StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| index_error(format!("full-text column {name} is not utf8")))
}

/// The opened index of one segment.
pub struct SegmentText {
    #[allow(dead_code)]
    reader: IndexReader,
    pub searcher: Searcher,
    /// The row-id fast field of each tantivy segment, in `searcher`'s segment order: opened
    /// once, as every search maps its hits to row ids.
    pub(crate) row_ids: Vec<Column<u64>>,
}

impl std::fmt::Debug for SegmentText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentText")
            .field("docs", &self.searcher.num_docs())
            .finish()
    }
}

impl SegmentText {
    pub(crate) fn open(dir: &Path) -> Result<SegmentText> {
        let index = Index::open_in_dir(dir).map_err(index_error)?;
        let (reader, searcher, row_ids) = open_reader(&index)?;
        Ok(SegmentText {
            reader,
            searcher,
            row_ids,
        })
    }
}

/// A reader of an immutable index, its searcher, and the row-id column (`_row_id`, fast) of each
/// of its tantivy segments, in the searcher's order.
pub(crate) fn open_reader(index: &Index) -> Result<(IndexReader, Searcher, Vec<Column<u64>>)> {
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(index_error)?;
    let searcher = reader.searcher();
    let row_ids = searcher
        .segment_readers()
        .iter()
        .map(|r| r.fast_fields().u64(ROW_ID_FIELD).map_err(index_error))
        .collect::<Result<_>>()?;
    Ok((reader, searcher, row_ids))
}

/// A memtable batch's searchable tail: an inverted index of its full-text columns and a map of
/// its exact-match values, keyed by row id.
#[derive(Debug, Default)]
pub struct TextTail {
    /// Rows of the batch (deleted ones included, as in a segment index).
    pub docs: u64,
    /// Per full-text column, in [`TextSchema::text`] order.
    pub text: Vec<FieldTail>,
    /// Per exact-match column, in [`TextSchema::exact`] order: value → row ids.
    pub exact: Vec<ExactMap>,
}

/// An exact-match column's values → the row ids holding them. Most values of an id-like column
/// are held by one row, kept inline (no allocation per row).
pub type ExactMap = HashMap<String, SmallVec<[u64; 1]>>;

/// How many values to make room for in a batch's exact-match map before filling it: every
/// non-null value when the first ones are all distinct (an id-like column, whose map would
/// otherwise grow and rehash some twenty times for a million rows), none otherwise.
fn exact_capacity(column: &dyn Array) -> Result<usize> {
    const PROBE: usize = 64;
    let values = column.len() - column.null_count();
    let mut seen = std::collections::HashSet::with_capacity(PROBE);
    let mut distinct = true;
    let mut probed = 0;
    for_each_exact_value(&column.slice(0, column.len().min(PROBE * 2)), |_, value| {
        if probed < PROBE {
            probed += 1;
            distinct &= seen.insert(value.to_owned());
        }
    })?;
    Ok(if distinct { values } else { 0 })
}

#[derive(Debug, Default)]
pub struct FieldTail {
    pub tokens: u64,
    /// Term → (row id, term frequency).
    pub postings: HashMap<String, Vec<(u64, u32)>>,
    /// Row id → number of tokens.
    pub lengths: HashMap<u64, u32>,
}

impl TextTail {
    pub(crate) fn build(schema: &TextSchema, batch: &RecordBatch) -> Result<TextTail> {
        let ids = row_ids(batch)?;
        let mut analyzer = analyzer();
        let mut tail = TextTail {
            docs: batch.num_rows() as u64,
            ..TextTail::default()
        };
        for (name, _) in &schema.text {
            let column = string_column(batch, name)?;
            let mut field = FieldTail::default();
            for (row, id) in ids.values().iter().enumerate() {
                if !column.is_valid(row) {
                    continue;
                }
                let tokens = tokens(&mut analyzer, column.value(row));
                if tokens.is_empty() {
                    continue;
                }
                field.tokens += tokens.len() as u64;
                field.lengths.insert(*id, tokens.len() as u32);
                let mut counts: HashMap<String, u32> = HashMap::new();
                for token in tokens {
                    *counts.entry(token).or_default() += 1;
                }
                for (term, tf) in counts {
                    field.postings.entry(term).or_default().push((*id, tf));
                }
            }
            tail.text.push(field);
        }
        for (name, _) in &schema.exact {
            let column = batch
                .column_by_name(name)
                .ok_or_else(|| index_error(format!("no column {name}")))?;
            let mut values = ExactMap::with_capacity(exact_capacity(column)?);
            for_each_exact_value(column, |row, value| {
                let id = ids.value(row);
                match values.get_mut(value) {
                    Some(ids) => ids.push(id),
                    None => {
                        values.insert(value.to_owned(), smallvec![id]);
                    }
                }
            })?;
            // A column whose first values were all distinct but whose later ones repeat keeps
            // no more table than it fills.
            if values.len() < values.capacity() / 4 {
                values.shrink_to_fit();
            }
            tail.exact.push(values);
        }
        Ok(tail)
    }

    /// The memory the tail holds, near enough: its maps' tables and what their entries own.
    pub(crate) fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        // A hash table holds one control byte per bucket beside the entry.
        fn table<K, V>(map: &HashMap<K, V>) -> usize {
            map.capacity() * (size_of::<(K, V)>() + 1)
        }
        let text: usize = self
            .text
            .iter()
            .map(|field| {
                table(&field.postings)
                    + table(&field.lengths)
                    + field
                        .postings
                        .iter()
                        .map(|(term, postings)| {
                            term.capacity() + postings.capacity() * size_of::<(u64, u32)>()
                        })
                        .sum::<usize>()
            })
            .sum();
        let exact: usize = self
            .exact
            .iter()
            .map(|values| {
                table(values)
                    + values
                        .iter()
                        .map(|(value, ids)| {
                            // ids inline in the entry own nothing beyond it
                            value.capacity()
                                + if ids.spilled() {
                                    ids.capacity() * size_of::<u64>()
                                } else {
                                    0
                                }
                        })
                        .sum::<usize>()
            })
            .sum();
        text + exact
    }

    /// The tails of several batches as one, without the rows in `deleted`.
    pub(crate) fn merge<'a>(
        parts: impl Iterator<Item = (&'a TextTail, &'a roaring::RoaringTreemap)>,
    ) -> TextTail {
        let mut merged = TextTail::default();
        for (part, deleted) in parts {
            merged.docs += part.docs - deleted.len().min(part.docs);
            if merged.text.is_empty() {
                merged.text = part.text.iter().map(|_| FieldTail::default()).collect();
                merged.exact = part.exact.iter().map(|_| ExactMap::new()).collect();
            }
            for (into, from) in merged.text.iter_mut().zip(&part.text) {
                for (id, len) in &from.lengths {
                    if !deleted.contains(*id) {
                        into.lengths.insert(*id, *len);
                        into.tokens += u64::from(*len);
                    }
                }
                for (term, postings) in &from.postings {
                    let live = postings.iter().filter(|(id, _)| !deleted.contains(*id));
                    into.postings.entry(term.clone()).or_default().extend(live);
                }
            }
            for (into, from) in merged.exact.iter_mut().zip(&part.exact) {
                for (value, ids) in from {
                    let live = ids.iter().copied().filter(|id| !deleted.contains(*id));
                    into.entry(value.clone()).or_default().extend(live);
                }
            }
        }
        merged
    }
}

/// BM25 statistics summed over segment searchers and memtable tails.
pub(crate) struct CombinedStats<'a> {
    pub schema: &'a TextSchema,
    pub searchers: Vec<&'a Searcher>,
    pub tails: Vec<&'a TextTail>,
}

impl CombinedStats<'_> {
    fn column_of(&self, field: Field) -> Option<usize> {
        self.schema.text.iter().position(|(_, f)| *f == field)
    }
}

impl Bm25StatisticsProvider for CombinedStats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let mut total = 0;
        for searcher in &self.searchers {
            total += Bm25StatisticsProvider::total_num_tokens(*searcher, field)?;
        }
        if let Some(i) = self.column_of(field) {
            total += self.tails.iter().map(|t| t.text[i].tokens).sum::<u64>();
        }
        Ok(total)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        let mut total = 0;
        for searcher in &self.searchers {
            total += Bm25StatisticsProvider::total_num_docs(*searcher)?;
        }
        Ok(total + self.tails.iter().map(|t| t.docs).sum::<u64>())
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let mut total = 0;
        for searcher in &self.searchers {
            total += searcher.doc_freq(term)?;
        }
        if let (Some(i), Some(text)) = (self.column_of(term.field()), term.value().as_str()) {
            total += self
                .tails
                .iter()
                .map(|t| t.text[i].postings.get(text).map_or(0, |p| p.len() as u64))
                .sum::<u64>();
        }
        Ok(total)
    }
}

/// Statistics looked up once per query. Each segment's search asks for every query term's
/// statistics, and each answer sums over every segment: without this, a query costs a number
/// of term-dictionary lookups that grows with the square of the segments.
pub(crate) struct Memoized<P> {
    inner: P,
    docs: Cell<Option<u64>>,
    tokens: RefCell<HashMap<Field, u64>>,
    freqs: RefCell<HashMap<Term, u64>>,
}

impl<P: Bm25StatisticsProvider> Memoized<P> {
    pub(crate) fn new(inner: P) -> Memoized<P> {
        Memoized {
            inner,
            docs: Cell::new(None),
            tokens: RefCell::default(),
            freqs: RefCell::default(),
        }
    }
}

impl<P: Bm25StatisticsProvider> Bm25StatisticsProvider for Memoized<P> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        if let Some(n) = self.tokens.borrow().get(&field) {
            return Ok(*n);
        }
        let n = self.inner.total_num_tokens(field)?;
        self.tokens.borrow_mut().insert(field, n);
        Ok(n)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        if let Some(n) = self.docs.get() {
            return Ok(n);
        }
        let n = self.inner.total_num_docs()?;
        self.docs.set(Some(n));
        Ok(n)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        if let Some(n) = self.freqs.borrow().get(term) {
            return Ok(*n);
        }
        let n = self.inner.doc_freq(term)?;
        self.freqs.borrow_mut().insert(term.clone(), n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray, UInt64Array};
    use arrow_schema::{DataType, Field as ArrowField, Schema as ArrowSchema};

    use super::*;
    use crate::{
        catalog::{ColumnDef, TableDef},
        schema::ColumnType,
        table::rows::ROW_ID,
    };

    fn table() -> TableDef {
        let column = |name: &str, data_type| ColumnDef {
            name: name.into(),
            data_type,
            nullable: true,
        };
        TableDef {
            name: "t".into(),
            id: "t1".into(),
            columns: vec![
                column("id", ColumnType::Utf8),
                column("host", ColumnType::Utf8),
                column("n", ColumnType::Int64),
            ],
            exact_columns: vec!["id".into(), "host".into(), "n".into()],
            ..Default::default()
        }
    }

    /// `rows` rows with row ids from 100: a distinct id (null every 7th), a host of three, and
    /// a number of five (null every 11th).
    fn batch(rows: u64) -> RecordBatch {
        let schema = ArrowSchema::new(vec![
            ArrowField::new(ROW_ID, DataType::UInt64, false),
            ArrowField::new("id", DataType::Utf8, true),
            ArrowField::new("host", DataType::Utf8, true),
            ArrowField::new("n", DataType::Int64, true),
        ]);
        let id: StringArray = (0..rows)
            .map(|i| (i % 7 != 3).then(|| format!("doc-{i}")))
            .collect();
        let host: StringArray = (0..rows).map(|i| Some(format!("h{}", i % 3))).collect();
        let n: Int64Array = (0..rows)
            .map(|i| (i % 11 != 5).then(|| i as i64 % 5 - 2))
            .collect();
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(UInt64Array::from_iter_values(100..100 + rows)),
                Arc::new(id),
                Arc::new(host),
                Arc::new(n),
            ],
        )
        .unwrap()
    }

    /// What a batch's exact-match map must hold: every non-null value, as `exact_values`
    /// renders it, with the ids of the rows holding it in row order.
    fn expected(batch: &RecordBatch, column: &str) -> HashMap<String, Vec<u64>> {
        let ids = row_ids(batch).unwrap();
        let mut out: HashMap<String, Vec<u64>> = HashMap::new();
        let values = exact_values(batch.column_by_name(column).unwrap().as_ref()).unwrap();
        for (row, value) in values.into_iter().enumerate() {
            if let Some(value) = value {
                out.entry(value).or_default().push(ids.value(row));
            }
        }
        out
    }

    #[test]
    fn a_tail_maps_every_exact_value_to_the_rows_holding_it() {
        let schema = TextSchema::of(&table()).unwrap();
        let batch = batch(1000);
        let tail = TextTail::build(&schema, &batch).unwrap();
        for (i, (column, _)) in schema.exact.iter().enumerate() {
            let got: HashMap<String, Vec<u64>> = tail.exact[i]
                .iter()
                .map(|(value, ids)| (value.clone(), ids.to_vec()))
                .collect();
            assert_eq!(got, expected(&batch, column), "column {column}");
        }
        // Numbers are terms as Arrow displays them, nulls none.
        assert_eq!(tail.exact[2].get("-2").unwrap().first(), Some(&100));
        assert_eq!(
            tail.exact[0].len(),
            (0..1000).filter(|i| i % 7 != 3).count()
        );
        assert!(!tail.exact[0].contains_key("doc-3"));
    }

    #[test]
    fn a_tail_reserves_room_only_for_a_column_of_distinct_values() {
        let schema = TextSchema::of(&table()).unwrap();
        let tail = TextTail::build(&schema, &batch(10_000)).unwrap();
        let [id, host, n] = &tail.exact[..] else {
            panic!("three exact columns")
        };
        assert!(id.capacity() >= id.len() && id.capacity() < 4 * id.len());
        // Three hosts and five numbers keep small tables, and their memory says so.
        assert!(host.capacity() < 64, "{}", host.capacity());
        assert!(n.capacity() < 64, "{}", n.capacity());
        assert!(tail.memory_bytes() < 10_000 * 100);
    }
}
