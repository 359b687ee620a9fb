//! Arrow helpers for table rows: the table's schema (with `_row_id` first), and the Arrow IPC
//! encoding events carry rows in.

use std::{io::Cursor, sync::Arc};

use arrow::{
    array::{ArrayRef, RecordBatch, UInt64Array},
    ipc::{reader::StreamReader, writer::StreamWriter},
};
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

/// Encodes one batch as an Arrow IPC stream.
pub fn encode_ipc(batch: &RecordBatch) -> Result<Vec<u8>> {
    // About the stream's size, so that a large batch is not copied as the buffer grows.
    let mut out = Vec::with_capacity(batch.get_array_memory_size() + 4096);
    let mut writer = StreamWriter::try_new(&mut out, &batch.schema()).map_err(arrow_error)?;
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
