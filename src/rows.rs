//! Rows in requests and responses: a JSON RowsEnvelope (`{"data": [{...}, ...]}`) or an Arrow IPC
//! stream holding exactly one record batch, validated and coerced against a table's columns;
//! and rows rendered back as an Arrow IPC stream or a JSON envelope.
//!
//! Coercion: columns are matched by name; a column missing from the rows is null if the column
//! is nullable (else refused); a value of another type is accepted only where nothing is lost:
//! any integer into any integer column it fits (checked value by value), integers and narrower
//! floats into float columns, strings into utf8, any binary into binary, timestamps of any unit
//! or zone into timestamp columns (checked), lists into lists of coercible items, and float64
//! lists into vector columns (embeddings are often float64; vectors are stored as float32).
//! In JSON, an integer column takes only integral numbers, a float column numbers, a utf8 column
//! strings, a bool column booleans, a vector column arrays of exactly its dimension; timestamps
//! and dates take RFC 3339 strings or integers. Every refusal names the column and the row.

mod ipc;

use std::{collections::HashSet, sync::Arc};

use arrow::{
    array::{Array, ArrayRef, RecordBatch, new_null_array},
    compute::{CastOptions, cast_with_options},
    ipc::writer::StreamWriter,
    util::display::FormatOptions,
};
use arrow_schema::{DataType, SchemaRef};
use serde_json::Value;

use crate::error::{Error, Result};

/// The most memory the rows of one request may take once decoded into a table's columns,
/// before anything decodes them: a short body can state many rows, each taking the width of
/// every column (a null 384-dimension vector still takes 1,536 bytes).
pub const MAX_DECODED_ROWS_BYTES: usize = 512 << 20;

/// The media type of an Arrow IPC stream.
pub const ARROW_STREAM: &str = "application/vnd.apache.arrow.stream";

/// Rows as a request carried them, before they are checked against a table.
#[derive(Debug)]
pub enum RowsBody {
    Json(Vec<u8>),
    ArrowIpc(Vec<u8>),
}

impl RowsBody {
    /// The rows as one batch in `schema` (a table's columns, without `_row_id`); at most
    /// [`max_rows`] of them.
    pub fn into_batch(self, schema: &SchemaRef) -> Result<RecordBatch> {
        let max_rows = max_rows(schema);
        match self {
            RowsBody::Json(bytes) => from_json(&bytes, schema, max_rows),
            RowsBody::ArrowIpc(bytes) => coerce(ipc::read_one_batch(&bytes, max_rows)?, schema),
        }
    }
}

/// How many rows one request may write into a table of `schema`: as many as fit in
/// [`MAX_DECODED_ROWS_BYTES`] decoded.
pub fn max_rows(schema: &SchemaRef) -> usize {
    let width: usize = schema
        .fields()
        .iter()
        .map(|f| decoded_width(f.data_type()) + 1)
        .sum();
    MAX_DECODED_ROWS_BYTES / width.max(1)
}

/// The bytes one value of `data_type` takes decoded, not counting variable-length data (which
/// the body itself carries).
fn decoded_width(data_type: &DataType) -> usize {
    use DataType::*;
    match data_type {
        Null => 0,
        Boolean => 1,
        Utf8 | Binary | List(_) => 4,
        LargeUtf8 | LargeBinary | LargeList(_) => 8,
        Utf8View | BinaryView => 16,
        FixedSizeBinary(n) => usize::try_from(*n).unwrap_or(0),
        FixedSizeList(item, n) => usize::try_from(*n)
            .unwrap_or(0)
            .saturating_mul(decoded_width(item.data_type())),
        other => other.primitive_width().unwrap_or(8),
    }
}

/// Rows handed to Arrow's JSON decoder at once: a body's rows are checked and decoded as they
/// are parsed, never all held as JSON values (a row of `{"n":1}` takes 8 bytes of a body and
/// hundreds as a `serde_json::Value`: a 64 MiB body of them would take gigabytes).
const JSON_CHUNK_ROWS: usize = 1024;

fn from_json(bytes: &[u8], schema: &SchemaRef, max_rows: usize) -> Result<RecordBatch> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::BadRequest(
            "a JSON request body is required: {\"data\": [rows]}".to_owned(),
        ));
    }
    let decoder = arrow::json::ReaderBuilder::new(schema.clone())
        .with_strict_mode(true)
        .build_decoder()
        .map_err(|e| Error::Internal(e.to_string()))?;
    let mut sink = JsonRows {
        schema,
        columns: schema.fields().iter().map(|f| f.name().as_str()).collect(),
        max_rows,
        decoder,
        pending: Vec::with_capacity(JSON_CHUNK_ROWS),
        seen: 0,
        error: None,
        in_data: false,
    };
    let mut parser = serde_json::Deserializer::from_slice(bytes);
    let parsed = serde::Deserializer::deserialize_any(&mut parser, Envelope(&mut sink))
        .and_then(|()| parser.end());
    if let Some(error) = sink.error.take() {
        return Err(error);
    }
    if let Err(error) = parsed {
        return Err(Error::BadRequest(match error.classify() {
            // A body that is valid JSON of the wrong shape.
            serde_json::error::Category::Data if sink.in_data => {
                "the body needs a field \"data\" holding an array of rows".to_owned()
            }
            serde_json::error::Category::Data => {
                "the body must be an object {\"data\": [rows]}".to_owned()
            }
            _ => format!("invalid request body: {error}"),
        }));
    }
    sink.decode_pending()?;
    let batch = sink
        .decoder
        .flush()
        .map_err(|e| Error::BadRequest(format!("invalid rows: {}", clean(&e.to_string()))))?;
    let batch = batch.unwrap_or_else(|| RecordBatch::new_empty(schema.clone()));
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        check_nulls(field, column)?;
    }
    Ok(batch)
}

/// Where the rows of a JSON body go as they are parsed: checked one by one against the table,
/// then decoded into its columns a chunk at a time.
struct JsonRows<'a> {
    schema: &'a SchemaRef,
    columns: HashSet<&'a str>,
    max_rows: usize,
    decoder: arrow::json::reader::Decoder,
    pending: Vec<Value>,
    seen: usize,
    /// The first refusal; parsing stops at it.
    error: Option<Error>,
    /// Whether the parser is at the `data` field's value.
    in_data: bool,
}

impl JsonRows<'_> {
    /// Stops parsing with `error`.
    fn refuse<E: serde::de::Error>(&mut self, error: Error) -> E {
        self.error = Some(error);
        E::custom("refused")
    }

    fn take(&mut self, row: Value) -> Result<()> {
        let i = self.seen;
        if i == self.max_rows {
            return Err(Error::BadRequest(format!(
                "the body holds more than {} rows; one request takes at most {} rows into this table",
                self.max_rows, self.max_rows
            )));
        }
        self.seen += 1;
        self.check(i, &row)?;
        self.pending.push(row);
        if self.pending.len() == JSON_CHUNK_ROWS {
            self.decode_pending()?;
        }
        Ok(())
    }

    fn decode_pending(&mut self) -> Result<()> {
        self.decoder
            .serialize(&self.pending)
            .map_err(|e| Error::BadRequest(format!("invalid rows: {}", clean(&e.to_string()))))?;
        self.pending.clear();
        Ok(())
    }

    /// Row `i` against the table: an object of its columns, each value of its column's kind.
    fn check(&self, i: usize, row: &Value) -> Result<()> {
        let Value::Object(row) = row else {
            return Err(Error::BadRequest(format!("row {i} is not an object")));
        };
        for field in self.schema.fields() {
            match row.get(field.name()) {
                None | Some(Value::Null) if !field.is_nullable() => {
                    return Err(Error::BadRequest(format!(
                        "column {:?} is not nullable, but row {i} has no value",
                        field.name()
                    )));
                }
                None | Some(Value::Null) => {}
                Some(value) => {
                    if let Err(expected) = json_fits(value, field.data_type()) {
                        return Err(Error::BadRequest(format!(
                            "row {i}: column {:?} takes {expected}, not {}",
                            field.name(),
                            json_kind(value)
                        )));
                    }
                }
            }
        }
        if let Some(unknown) = row.keys().find(|k| !self.columns.contains(k.as_str())) {
            return Err(Error::BadRequest(format!(
                "row {i}: column {unknown:?} is not in the table{}",
                if unknown == "_row_id" {
                    " (_row_id is assigned by the server)"
                } else {
                    ""
                }
            )));
        }
        Ok(())
    }
}

/// The body `{"data": [rows]}`.
struct Envelope<'s, 'a>(&'s mut JsonRows<'a>);

impl<'de> serde::de::Visitor<'de> for Envelope<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object {\"data\": [rows]}")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut data = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key != "data" || data {
                let error = Error::BadRequest(match data && key == "data" {
                    true => "the body holds field \"data\" twice".to_owned(),
                    false => format!("unknown field {key:?} in the body; it holds only \"data\""),
                });
                return Err(self.0.refuse(error));
            }
            self.0.in_data = true;
            map.next_value_seed(RowsOf(&mut *self.0))?;
            self.0.in_data = false;
            data = true;
        }
        if !data {
            let error = Error::BadRequest(
                "the body needs a field \"data\" holding an array of rows".to_owned(),
            );
            return Err(self.0.refuse(error));
        }
        Ok(())
    }
}

/// The `data` array, each row handed to the sink as it is parsed.
struct RowsOf<'s, 'a>(&'s mut JsonRows<'a>);

impl<'de> serde::de::DeserializeSeed<'de> for RowsOf<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for RowsOf<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of rows")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(row) = seq.next_element::<Value>()? {
            if let Err(error) = self.0.take(row) {
                return Err(self.0.refuse(error));
            }
        }
        Ok(())
    }
}

/// Arrow's messages start with the error kind; the kind says nothing to a client.
fn clean(message: &str) -> &str {
    message
        .strip_prefix("Json error: ")
        .or_else(|| message.strip_prefix("Cast error: "))
        .or_else(|| message.strip_prefix("Invalid argument error: "))
        .unwrap_or(message)
}

/// Matches the columns of `batch` to `schema` by name and casts them to its types.
fn coerce(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let given = batch.schema();
    for field in given.fields() {
        if schema.field_with_name(field.name()).is_err() {
            return Err(Error::BadRequest(format!(
                "column {:?} is not in the table{}",
                field.name(),
                if field.name() == "_row_id" {
                    " (_row_id is assigned by the server)"
                } else {
                    ""
                }
            )));
        }
    }
    let strict = CastOptions {
        safe: false,
        format_options: FormatOptions::default(),
    };
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let column = match batch.column_by_name(field.name()) {
            None if field.is_nullable() => new_null_array(field.data_type(), batch.num_rows()),
            None => {
                return Err(Error::BadRequest(format!(
                    "column {:?} is missing and is not nullable",
                    field.name()
                )));
            }
            Some(column) if column.data_type() == field.data_type() => column.clone(),
            Some(column) if !coercible(column.data_type(), field.data_type()) => {
                return Err(Error::BadRequest(format!(
                    "column {:?}: {} cannot be stored as {} without losing information",
                    field.name(),
                    column.data_type(),
                    field.data_type(),
                )));
            }
            Some(column) => cast_with_options(column, field.data_type(), &strict).map_err(|e| {
                Error::BadRequest(format!(
                    "column {:?}: cannot use {} as {}: {}",
                    field.name(),
                    column.data_type(),
                    field.data_type(),
                    clean(&e.to_string())
                ))
            })?,
        };
        check_nulls(field, &column)?;
        columns.push(column);
    }
    RecordBatch::try_new(schema.clone(), columns)
        .map_err(|e| Error::BadRequest(format!("invalid rows: {}", clean(&e.to_string()))))
}

/// Whether Arrow values of `from` can go into a column of `to` without losing information (the
/// cast still checks each value, so an int64 too big for an int32 column is refused).
fn coercible(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let utf8 = |t: &DataType| matches!(t, Utf8 | LargeUtf8 | Utf8View);
    let binary = |t: &DataType| matches!(t, Binary | LargeBinary | BinaryView | FixedSizeBinary(_));
    match (from, to) {
        (a, b) if a == b => true,
        (Null, _) => true,
        (a, b) if a.is_integer() && b.is_integer() => true,
        (a, Float64) => a.is_integer() || matches!(a, Float16 | Float32),
        (a, Float32) => matches!(a, Int8 | Int16 | UInt8 | UInt16 | Float16),
        (a, Utf8) => utf8(a),
        (a, Binary) => binary(a),
        (Timestamp(..), Timestamp(..)) => true,
        (Date64, Date32) => true,
        (List(a) | LargeList(a) | FixedSizeList(a, _), List(b)) => {
            coercible(a.data_type(), b.data_type())
        }
        // Vectors: the cast checks that every list has exactly the column's dimension.
        (List(a) | LargeList(a) | FixedSizeList(a, _), FixedSizeList(b, _)) => {
            coercible(a.data_type(), b.data_type())
                || (a.data_type() == &Float64 && b.data_type() == &Float32)
        }
        _ => false,
    }
}

/// Whether a JSON value fits a column type; the type's description when it does not.
fn json_fits(value: &Value, data_type: &DataType) -> std::result::Result<(), String> {
    use DataType::*;
    let fits = match data_type {
        Boolean => value.is_boolean(),
        t if t.is_integer() => value.is_i64() || value.is_u64(),
        Float16 | Float32 | Float64 => value.is_number(),
        Decimal128(..) | Decimal256(..) => value.is_number() || value.is_string(),
        Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary => value.is_string(),
        Timestamp(..) | Date32 | Date64 => value.is_string() || value.is_i64(),
        FixedSizeList(item, n) => match value {
            Value::Array(items) => {
                if items.len() != *n as usize {
                    return Err(format!(
                        "an array of exactly {n} numbers (got {})",
                        items.len()
                    ));
                }
                return items
                    .iter()
                    .try_for_each(|v| match v {
                        Value::Null => Ok(()),
                        v => json_fits(v, item.data_type()),
                    })
                    .map_err(|_| format!("an array of {n} numbers"));
            }
            _ => false,
        },
        List(item) | LargeList(item) => match value {
            Value::Array(items) => {
                return items
                    .iter()
                    .try_for_each(|v| match v {
                        Value::Null => Ok(()),
                        v => json_fits(v, item.data_type()),
                    })
                    .map_err(|inner| format!("an array of {inner}"));
            }
            _ => false,
        },
        _ => true,
    };
    if fits {
        return Ok(());
    }
    Err(match data_type {
        Boolean => "true or false".to_owned(),
        t if t.is_integer() => "an integer".to_owned(),
        Float16 | Float32 | Float64 => "a number".to_owned(),
        Decimal128(..) | Decimal256(..) => "a number, or a decimal's text".to_owned(),
        Utf8 | LargeUtf8 | Utf8View => "a string".to_owned(),
        Binary | LargeBinary => "a string".to_owned(),
        Timestamp(..) | Date32 | Date64 => "an RFC 3339 string or an integer".to_owned(),
        _ => "an array".to_owned(),
    })
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a fractional number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn check_nulls(field: &arrow_schema::Field, column: &ArrayRef) -> Result<()> {
    if field.is_nullable() || column.null_count() == 0 {
        return Ok(());
    }
    let row = (0..column.len()).find(|&i| column.is_null(i)).unwrap_or(0);
    Err(Error::BadRequest(format!(
        "column {:?} is not nullable, but row {row} has no value",
        field.name()
    )))
}

/// Rows as an Arrow IPC stream (an empty result still carries its schema).
pub fn to_ipc(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let internal = |e: arrow::error::ArrowError| Error::Internal(e.to_string());
    let mut writer = StreamWriter::try_new(&mut out, schema).map_err(internal)?;
    for batch in batches {
        writer.write(batch).map_err(internal)?;
    }
    writer.finish().map_err(internal)?;
    drop(writer);
    Ok(out)
}

/// Rows as the JSON envelope `{"data": [...]}`, nulls written out.
pub fn to_json(batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let mut rows = Vec::new();
    let mut writer = arrow::json::WriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, arrow::json::writer::JsonArray>(&mut rows);
    let refs: Vec<&RecordBatch> = batches.iter().collect();
    writer
        .write_batches(&refs)
        .map_err(|e| Error::Internal(e.to_string()))?;
    writer
        .finish()
        .map_err(|e| Error::Internal(e.to_string()))?;
    drop(writer);
    let mut out = Vec::with_capacity(rows.len() + 10);
    out.extend_from_slice(b"{\"data\":");
    if rows.is_empty() {
        out.extend_from_slice(b"[]");
    } else {
        out.extend_from_slice(&rows);
    }
    out.push(b'}');
    Ok(out)
}

/// An empty batch of `schema` (the rows of an append when there are none).
pub fn empty(schema: &SchemaRef) -> RecordBatch {
    RecordBatch::new_empty(Arc::clone(schema))
}

#[cfg(test)]
mod tests;
