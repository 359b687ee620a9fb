//! Arrow helpers for table rows: the table's schema (with `_row_id` first), and the Arrow IPC
//! encoding events carry rows in.

use std::{io::Cursor, sync::Arc};

use arrow::{
    array::{ArrayRef, RecordBatch, UInt64Array},
    ipc::{
        reader::StreamReader,
        writer::{IpcWriteOptions, StreamWriter},
    },
};
// Named for its `lz4` feature, which the compressed records need (see the workspace manifest).
use arrow_ipc::CompressionType;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use roaring::RoaringTreemap;

use crate::{
    catalog::TableDef,
    error::{Error, Result},
};

/// The hidden, stable id of every row; the first column of every table as queries see it.
pub const ROW_ID: &str = "_row_id";

/// The table's columns as events carry them: no `_row_id`.
pub fn data_schema(table: &TableDef) -> SchemaRef {
    Arc::new(Schema::new(
        table
            .columns
            .iter()
            .map(|c| Field::new(&c.name, c.data_type.to_arrow(), c.nullable))
            .collect::<Vec<_>>(),
    ))
}

/// The table's columns as stored and queried: `_row_id` (uint64, not null) first.
pub fn table_schema(table: &TableDef) -> SchemaRef {
    let mut fields = vec![Arc::new(Field::new(ROW_ID, DataType::UInt64, false))];
    fields.extend(data_schema(table).fields().iter().cloned());
    Arc::new(Schema::new(fields))
}

/// Whether a column stored as `from` reads as `to` after its type changed: to text, from
/// int64 to float64, from one value to a list of them, or a list's items so.
pub fn widens_to(from: &DataType, to: &DataType) -> bool {
    match (from, to) {
        (from, to) if from == to => true,
        (_, DataType::Utf8 | DataType::Utf8View) => true,
        (DataType::Int64, DataType::Float64) => true,
        (DataType::List(from), DataType::List(to)) => widens_to(from.data_type(), to.data_type()),
        (from, DataType::List(to)) => widens_to(from, to.data_type()),
        _ => false,
    }
}

/// `batch` in `schema`, matching columns by name: what a table's rows written under an older
/// schema of the table read as now. A column the batch lacks is null (it must be nullable); a
/// column whose type widened ([`widens_to`]) is cast to it; any other difference is
/// corruption.
pub fn conform(schema: &SchemaRef, batch: &RecordBatch) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let column = match batch.column_by_name(field.name()) {
            Some(column) if column.data_type() == field.data_type() => column.clone(),
            Some(column) if widens_to(column.data_type(), field.data_type()) => {
                arrow::compute::cast(column, field.data_type()).map_err(arrow_error)?
            }
            Some(column) => {
                return Err(Error::Corrupt {
                    key: format!("column {}", field.name()),
                    reason: format!(
                        "stored as {}, which does not convert to {}",
                        column.data_type(),
                        field.data_type()
                    ),
                });
            }
            None if field.is_nullable() => arrow::array::new_null_array(field.data_type(), rows),
            None => {
                return Err(Error::Corrupt {
                    key: format!("column {}", field.name()),
                    reason: "missing from stored rows, and not nullable".to_owned(),
                });
            }
        };
        columns.push(column);
    }
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(arrow_error)
}

/// Batches from this size in memory up are written with their buffers LZ4-compressed.
///
/// A large batch (a remote-write request's samples, a bulk request's records) is written to the
/// log, read back by the projections, and fetched by every consumer of the log: compressed, it
/// is about a third of the bytes for those copies (label and text columns repeat), for a
/// compression pass over it. A small batch (a data-plane append of a few rows) gains little
/// and stays as it was. Arrow readers decompress IPC bodies on their own (Arrow's
/// `LZ4_FRAME` body compression, which pyarrow and every Arrow library since 2.0 read).
pub const COMPRESS_FROM_BYTES: usize = 256 << 10;

/// Encodes one batch as an Arrow IPC stream: with its buffers LZ4-compressed from
/// [`COMPRESS_FROM_BYTES`] up.
pub fn encode_ipc(batch: &RecordBatch) -> Result<Vec<u8>> {
    // The rows' own bytes: a batch sliced from a larger one (or decoded from IPC) shares its
    // buffers, which `get_array_memory_size` would count whole.
    let size = super::batch_bytes(batch);
    let options = if size >= COMPRESS_FROM_BYTES {
        IpcWriteOptions::default()
            .try_with_compression(Some(CompressionType::LZ4_FRAME))
            .map_err(arrow_error)?
    } else {
        IpcWriteOptions::default()
    };
    // About the stream's size, so that a large batch is not copied as the buffer grows.
    let mut out = Vec::with_capacity(size + 4096);
    let mut writer = StreamWriter::try_new_with_options(&mut out, &batch.schema(), options)
        .map_err(arrow_error)?;
    writer.write(batch).map_err(arrow_error)?;
    writer.finish().map_err(arrow_error)?;
    drop(writer);
    Ok(out)
}

/// Decodes the one batch of an Arrow IPC stream written by [`encode_ipc`].
pub fn decode_ipc(bytes: &[u8]) -> Result<RecordBatch> {
    let reader = StreamReader::try_new(Cursor::new(bytes), None).map_err(arrow_error)?;
    let mut batches = reader.collect::<Result<Vec<_>, _>>().map_err(arrow_error)?;
    match batches.len() {
        1 => Ok(batches.remove(0)),
        n => Err(Error::Corrupt {
            key: "rows".to_owned(),
            reason: format!("an event holds {n} record batches, expected 1"),
        }),
    }
}

/// `batch` (in the data schema) with its row ids prepended, in the table schema.
pub fn with_row_ids(
    schema: &SchemaRef,
    batch: &RecordBatch,
    row_ids: Vec<u64>,
) -> Result<RecordBatch> {
    let mut columns: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(row_ids))];
    columns.extend(batch.columns().iter().cloned());
    RecordBatch::try_new(schema.clone(), columns).map_err(arrow_error)
}

pub(crate) fn arrow_error(error: arrow::error::ArrowError) -> Error {
    Error::Arrow(error.to_string())
}

/// A set of row ids: ids in ascending order (an append's, a sorted segment's) go in a container
/// at a time, others one by one.
pub(crate) fn id_set(ids: &[u64]) -> RoaringTreemap {
    RoaringTreemap::from_sorted_iter(ids.iter().copied())
        .unwrap_or_else(|_| ids.iter().copied().collect())
}

/// The row ids of a batch in the table schema.
pub(crate) fn row_ids(batch: &RecordBatch) -> Result<&UInt64Array> {
    batch
        .column_by_name(ROW_ID)
        .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
        .ok_or_else(|| {
            arrow_error(arrow::error::ArrowError::SchemaError(format!(
                "no {ROW_ID} column"
            )))
        })
}

#[cfg(test)]
mod tests {
    use arrow::array::{Float64Array, StringArray};

    use super::*;

    fn samples(rows: usize) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("job", DataType::Utf8, true),
            Field::new("value", DataType::Float64, false),
        ]));
        let jobs = (0..rows).map(|i| Some(format!("node-exporter-{}", i % 7)));
        let values = (0..rows).map(|i| (i % 100) as f64);
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(jobs.collect::<StringArray>()),
                Arc::new(values.collect::<Float64Array>()),
            ],
        )
        .unwrap()
    }

    #[test]
    fn a_large_batch_is_written_compressed_and_reads_back_as_it_was() {
        let batch = samples(50_000);
        assert!(batch.get_array_memory_size() >= COMPRESS_FROM_BYTES);
        let ipc = encode_ipc(&batch).unwrap();
        assert!(
            ipc.len() * 3 < batch.get_array_memory_size(),
            "{} bytes of IPC for {} bytes of rows",
            ipc.len(),
            batch.get_array_memory_size()
        );
        assert_eq!(decode_ipc(&ipc).unwrap(), batch);
    }

    #[test]
    fn a_small_batch_is_written_as_it_is() {
        let batch = samples(100);
        assert!(batch.get_array_memory_size() < COMPRESS_FROM_BYTES);
        let ipc = encode_ipc(&batch).unwrap();
        // Every value is in the stream as it is: 100 floats and 100 strings of 15 bytes.
        assert!(ipc.len() > 100 * (8 + 15), "{} bytes", ipc.len());
        assert_eq!(decode_ipc(&ipc).unwrap(), batch);
    }

    #[test]
    fn a_small_slice_of_a_large_batch_is_written_as_a_small_batch_is() {
        // The slice shares the large batch's buffers: sized by them, it would be compressed.
        let large = samples(50_000);
        let slice = large.slice(0, 100);
        assert!(slice.get_array_memory_size() >= COMPRESS_FROM_BYTES);
        let ipc = encode_ipc(&slice).unwrap();
        assert_eq!(ipc, encode_ipc(&samples(100)).unwrap());
        assert_eq!(decode_ipc(&ipc).unwrap(), slice);
    }
}
