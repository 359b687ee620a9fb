//! A segment's rows stored whole, one after another, for reads by position: the rows of a
//! search's hits.
//!
//! The Parquet segment keeps each column apart, which is what scans and aggregations want; but
//! a search reads ten rows scattered over the segment, and Parquet then decompresses a page of
//! every column for every hit. Here each row is one record of a block-compressed store (the
//! design of Lucene's and tantivy's stored fields): a hit decompresses one block, and hits in
//! one block share it. The store is tantivy's own document store (`tantivy::store`: LZ4 blocks
//! with a skip index from document number to block, and an LRU of decompressed blocks),
//! written next to the segment's indexes, in its index directory (see [`super::index`]).
//!
//! A record is the row in Arrow's row format (`arrow::row`, which every type of a table's
//! schema has) followed by the CRC32C of those bytes: a damaged block is an error on read,
//! never a row made of the wrong bytes. The schema the rows were written with is kept beside
//! them (`rows.schema`, an Arrow IPC stream with no batches): a column added to the table
//! since is not in it, and reads as nulls, as it does from the segment.
//!
//! Segments written before this store existed have none; their rows are read from Parquet.

use std::{fs::File, io::Write, path::Path};

use arrow::{
    array::{ArrayRef, RecordBatch},
    row::{RowConverter, SortField},
};
use arrow_schema::SchemaRef;
use tantivy::{
    Directory,
    directory::MmapDirectory,
    store::{Compressor, StoreReader, StoreWriter},
};

use super::{
    rows::{arrow_error, conform},
    text::index_error,
};
use crate::error::{Error, Result};

const STORE_FILE: &str = "rows.store";
const SCHEMA_FILE: &str = "rows.schema";

/// Uncompressed bytes per block: a hit decompresses one block of about this size. Ten hits
/// of a selective query fall in as many blocks; at 16 KiB, decompressing them was 18% of a
/// `term` search's instructions (docs/benchmarks.md).
const BLOCK_BYTES: usize = 4 << 10;

/// Decompressed blocks kept per segment (an LRU), for hits that fall in a block read lately:
/// a search's hits of equal score are neighbours in row-id order, often in one block. At most
/// 64 KiB a segment, and only once its rows are read.
const CACHED_BLOCKS: usize = 16;

/// Rows converted to the row format at a time while writing, to bound the memory it takes.
const WRITE_CHUNK: usize = 4096;

/// A segment's stored rows, open for reading.
pub struct RowStore {
    schema: SchemaRef,
    converter: RowConverter,
    reader: StoreReader,
}

impl std::fmt::Debug for RowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowStore")
            .field("schema", &self.schema)
            .finish()
    }
}

/// The row format's fields of `schema`'s columns, in order.
fn sort_fields(schema: &SchemaRef) -> Vec<SortField> {
    schema
        .fields()
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect()
}

fn converter_of(schema: &SchemaRef) -> Result<RowConverter> {
    RowConverter::new(sort_fields(schema)).map_err(arrow_error)
}

/// Whether the row format holds every column of `schema` (it holds every type a table has).
fn supported(schema: &SchemaRef) -> bool {
    RowConverter::supports_fields(&sort_fields(schema))
}

fn store_error(error: impl std::fmt::Display) -> Error {
    Error::Index(format!("stored rows: {error}"))
}

/// Runs a read of tantivy's store, which trusts the offsets in the file and panics on a
/// damaged one: the panic becomes an error (the records' checksums catch the rest).
fn unbroken<T>(read: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read))
        .map_err(|_| store_error("the file is damaged"))
}

impl RowStore {
    /// Writes `rows` (a segment's, in its order) into the index directory `dir`. Writes
    /// nothing when the row format cannot hold a column of theirs.
    pub(crate) fn write(dir: &Path, rows: &RecordBatch) -> Result<()> {
        let schema = rows.schema();
        if !supported(&schema) {
            return Ok(());
        }
        let converter = converter_of(&schema)?;
        let directory = MmapDirectory::open(dir).map_err(index_error)?;
        let out = directory
            .open_write(Path::new(STORE_FILE))
            .map_err(index_error)?;
        let mut writer =
            StoreWriter::new(out, Compressor::Lz4, BLOCK_BYTES, false).map_err(store_error)?;
        let mut record = Vec::new();
        let mut start = 0;
        while start < rows.num_rows() {
            let chunk = rows.slice(start, WRITE_CHUNK.min(rows.num_rows() - start));
            let converted = converter
                .convert_columns(chunk.columns())
                .map_err(arrow_error)?;
            for row in converted.iter() {
                record.clear();
                record.extend_from_slice(row.as_ref());
                record.extend_from_slice(&crc32c::crc32c(row.as_ref()).to_le_bytes());
                writer.store_bytes(&record).map_err(store_error)?;
            }
            start += chunk.num_rows();
        }
        // Closing flushes and syncs the file.
        writer.close().map_err(store_error)?;
        let mut file = File::create(dir.join(SCHEMA_FILE)).map_err(index_error)?;
        let mut ipc =
            arrow::ipc::writer::StreamWriter::try_new(&mut file, &schema).map_err(arrow_error)?;
        ipc.finish().map_err(arrow_error)?;
        drop(ipc);
        file.flush().map_err(index_error)?;
        file.sync_all().map_err(index_error)?;
        Ok(())
    }

    /// Opens the stored rows in the index directory `dir`; `None` when the segment has none
    /// (written before they were, or of a type the row format does not hold).
    pub(crate) fn open(dir: &Path) -> Result<Option<RowStore>> {
        let schema_file = match File::open(dir.join(SCHEMA_FILE)) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(index_error(error)),
        };
        let schema = arrow::ipc::reader::StreamReader::try_new(schema_file, None)
            .map_err(arrow_error)?
            .schema();
        let directory = MmapDirectory::open(dir).map_err(index_error)?;
        let file = directory
            .open_read(Path::new(STORE_FILE))
            .map_err(index_error)?;
        let reader = unbroken(|| StoreReader::open(file, CACHED_BLOCKS))?.map_err(store_error)?;
        Ok(Some(RowStore {
            converter: converter_of(&schema)?,
            schema,
            reader,
        }))
    }

    /// The rows at `positions` (in the segment's order), in this order, with the columns of
    /// `schema` in its order and types (a column the rows were written without reads as
    /// nulls).
    pub(crate) fn read(&self, positions: &[u64], schema: &SchemaRef) -> Result<RecordBatch> {
        let mut records = Vec::with_capacity(positions.len());
        for &position in positions {
            let doc = u32::try_from(position)
                .map_err(|_| store_error(format!("no row at position {position}")))?;
            let record = unbroken(|| self.reader.get_document_bytes(doc))?.map_err(store_error)?;
            let bytes = record.as_slice();
            let Some(split) = bytes.len().checked_sub(4) else {
                return Err(store_error(format!("row {position} is truncated")));
            };
            let (row, crc) = bytes.split_at(split);
            if crc32c::crc32c(row).to_le_bytes() != crc {
                return Err(store_error(format!(
                    "row {position} does not match its checksum"
                )));
            }
            records.push(record);
        }
        let parser = self.converter.parser();
        let columns: Vec<ArrayRef> = if records.is_empty() {
            self.schema
                .fields()
                .iter()
                .map(|f| arrow::array::new_empty_array(f.data_type()))
                .collect()
        } else {
            let rows = records
                .iter()
                .map(|r| parser.parse(&r.as_slice()[..r.len() - 4]));
            self.converter.convert_rows(rows).map_err(arrow_error)?
        };
        let stored = RecordBatch::try_new(self.schema.clone(), columns).map_err(arrow_error)?;
        conform(schema, &stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, BooleanArray, Float64Array, ListArray, StringArray, UInt64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use std::sync::Arc;

    fn batch(rows: usize) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("_row_id", DataType::UInt64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("score", DataType::Float64, true),
            Field::new("ok", DataType::Boolean, true),
            Field::new(
                "tags",
                DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true))),
                true,
            ),
        ]));
        let names: StringArray = (0..rows)
            .map(|i| (i % 7 != 3).then(|| format!("row {i} {}", "x".repeat(i % 50))))
            .collect();
        let scores: Float64Array = (0..rows)
            .map(|i| (i % 5 != 0).then_some(i as f64 * 0.5 - 3.0))
            .collect();
        let oks: BooleanArray = (0..rows)
            .map(|i| (i % 3 != 0).then_some(i % 2 == 0))
            .collect();
        let tags =
            ListArray::from_iter_primitive::<Int64Type, _, _>((0..rows).map(|i| {
                (i % 4 != 0).then(|| (0..i % 3).map(|j| Some(j as i64)).collect::<Vec<_>>())
            }));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(UInt64Array::from_iter_values(
                    (0..rows as u64).map(|i| i * 3),
                )),
                Arc::new(names),
                Arc::new(scores),
                Arc::new(oks),
                Arc::new(tags),
            ],
        )
        .unwrap()
    }

    #[test]
    fn rows_read_back_by_position_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let rows = batch(10_000);
        RowStore::write(dir.path(), &rows).unwrap();
        let store = RowStore::open(dir.path())
            .unwrap()
            .expect("a store was written");
        let positions = [9_999u64, 0, 4_321, 17, 18, 17, 5_000];
        let read = store.read(&positions, &rows.schema()).unwrap();
        let indices =
            arrow::array::UInt32Array::from_iter_values(positions.iter().map(|p| *p as u32));
        let expected = arrow::compute::take_record_batch(&rows, &indices).unwrap();
        assert_eq!(read, expected);
        assert_eq!(store.read(&[], &rows.schema()).unwrap().num_rows(), 0);
        assert!(store.read(&[10_000], &rows.schema()).is_err());
    }

    #[test]
    fn columns_come_back_as_asked_and_new_ones_as_nulls() {
        let dir = tempfile::tempdir().unwrap();
        let rows = batch(100);
        RowStore::write(dir.path(), &rows).unwrap();
        let store = RowStore::open(dir.path()).unwrap().unwrap();
        let asked = Arc::new(Schema::new(vec![
            Field::new("added", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]));
        let read = store.read(&[2, 3], &asked).unwrap();
        assert_eq!(read.column(0).null_count(), 2);
        let names = read
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(names.value(0), "row 2 xx");
        assert!(names.is_null(1));
    }

    #[test]
    fn a_damaged_store_is_an_error_not_a_wrong_row() {
        let dir = tempfile::tempdir().unwrap();
        let rows = batch(2_000);
        RowStore::write(dir.path(), &rows).unwrap();
        let path = dir.path().join(STORE_FILE);
        let clean = std::fs::read(&path).unwrap();
        // Flip bytes through the file: every read either gives the row written or fails;
        // none gives another row, and none panics.
        let mut failed = 0;
        for at in (0..clean.len()).step_by(97) {
            let mut damaged = clean.clone();
            damaged[at] ^= 0x5a;
            std::fs::write(&path, &damaged).unwrap();
            let Ok(Some(store)) = RowStore::open(dir.path()) else {
                failed += 1;
                continue;
            };
            for position in [0u64, 700, 1_999] {
                match store.read(&[position], &rows.schema()) {
                    Ok(read) => assert_eq!(read, rows.slice(position as usize, 1)),
                    Err(_) => failed += 1,
                }
            }
        }
        assert!(failed > 0, "no flip was noticed");
    }

    #[test]
    fn a_directory_without_stored_rows_has_none() {
        let dir = tempfile::tempdir().unwrap();
        assert!(RowStore::open(dir.path()).unwrap().is_none());
    }
}
