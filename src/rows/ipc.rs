//! An Arrow IPC stream from a client, read as untrusted bytes.
//!
//! arrow's stream reader trusts the lengths a stream states: it allocates a message's stated
//! body size before reading it (a one-byte change asks for terabytes and aborts the process),
//! and asserts, rather than reports, on some inconsistent buffers. So a body is walked here
//! first, with nothing allocated from what it states: every message's metadata and body must
//! fit in the bytes received, its metadata must verify as a flatbuffer, every buffer of a
//! record batch must lie within its body, node lengths and null counts must be sane, and the
//! row count must be within what the caller can take. Only then does arrow decode it, inside
//! [`crate::panics::catch`], with the full validation of every array; what arrow still refuses
//! (or asserts on) is a 400 naming the problem.

use std::io::Cursor;

use arrow::{
    array::RecordBatch,
    ipc::{MessageHeader, reader::StreamReader, root_as_message},
};
use arrow_schema::DataType;

use crate::error::{Error, Result};

/// Marks the start of a message's metadata length since Arrow 0.15.
const CONTINUATION: u32 = 0xFFFF_FFFF;

/// The one record batch of an Arrow IPC stream body, of at most `max_rows` rows.
pub fn read_one_batch(bytes: &[u8], max_rows: usize) -> Result<RecordBatch> {
    let batches = walk(bytes, max_rows)?;
    if batches != 1 {
        return Err(Error::BadRequest(format!(
            "an Arrow IPC body must hold exactly one record batch; this one holds {batches}"
        )));
    }
    let decoded = crate::panics::catch(|| -> std::result::Result<_, String> {
        let reader = StreamReader::try_new(Cursor::new(bytes), None)
            .map_err(|e| format!("the body is not an Arrow IPC stream: {}", clean(&e)))?;
        for field in reader.schema().fields() {
            supported(field.name(), field.data_type(), true)?;
        }
        let mut batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| format!("the body is not a valid Arrow IPC stream: {}", clean(&e)))?;
        let batch = batches
            .pop()
            .ok_or_else(|| "the Arrow IPC body holds no record batch".to_owned())?;
        for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
            column.to_data().validate_full().map_err(|e| {
                format!(
                    "column {:?} is not a valid Arrow array: {}",
                    field.name(),
                    clean(&e)
                )
            })?;
        }
        Ok(batch)
    });
    match decoded {
        Ok(Ok(batch)) => Ok(batch),
        Ok(Err(message)) => Err(Error::BadRequest(message)),
        Err(panic) => Err(Error::BadRequest(format!(
            "the body is not a valid Arrow IPC stream: {panic}"
        ))),
    }
}

/// Checks the framing of every message against the bytes received; returns how many record
/// batches the stream holds.
fn walk(bytes: &[u8], max_rows: usize) -> Result<usize> {
    let bad = |message: String| Err(Error::BadRequest(message));
    let mut at = 0usize;
    let mut batches = 0usize;
    let mut index = 0usize;
    while at < bytes.len() {
        let Some(word) = read_u32(bytes, at) else {
            return bad(format!(
                "the body is not an Arrow IPC stream: message {index} is cut short at byte {at}"
            ));
        };
        at += 4;
        let stated = if word == CONTINUATION {
            let Some(length) = read_u32(bytes, at) else {
                return bad(format!(
                    "the body is not an Arrow IPC stream: message {index} is cut short at byte {at}"
                ));
            };
            at += 4;
            length as i32
        } else {
            word as i32
        };
        if stated == 0 {
            break; // the end-of-stream marker
        }
        let remaining = bytes.len() - at;
        let metadata_length = match usize::try_from(stated) {
            Ok(length) if length <= remaining => length,
            _ => {
                return bad(format!(
                    "the body is not an Arrow IPC stream: message {index} states {stated} bytes \
                     of metadata, but {remaining} bytes remain"
                ));
            }
        };
        let message = root_as_message(&bytes[at..at + metadata_length]).map_err(|e| {
            Error::BadRequest(format!(
                "the body is not an Arrow IPC stream: message {index} has invalid metadata: {e}"
            ))
        })?;
        at += metadata_length;
        let remaining = bytes.len() - at;
        let body_length = match usize::try_from(message.bodyLength()) {
            Ok(length) if length <= remaining => length,
            _ => {
                return bad(format!(
                    "the body is not a valid Arrow IPC stream: message {index} states a body of \
                     {} bytes, but {remaining} bytes remain",
                    message.bodyLength()
                ));
            }
        };
        match message.header_type() {
            MessageHeader::Schema if index == 0 => {}
            MessageHeader::Schema => {
                return bad("an Arrow IPC body holds one schema, first".to_owned());
            }
            MessageHeader::RecordBatch if index > 0 => {
                let Some(batch) = message.header_as_record_batch() else {
                    return bad(format!("message {index} of the Arrow IPC body is empty"));
                };
                check_batch(&batch, body_length, max_rows)
                    .map_err(|e| Error::BadRequest(format!("record batch {batches}: {e}")))?;
                batches += 1;
            }
            MessageHeader::DictionaryBatch => {
                return bad("dictionary-encoded columns are not taken in a row body".to_owned());
            }
            other => {
                return bad(format!(
                    "message {index} of the Arrow IPC body is a {}, where a schema and then \
                     record batches are expected",
                    other.variant_name().unwrap_or("message of an unknown kind")
                ));
            }
        }
        at += body_length;
        index += 1;
    }
    if index == 0 {
        return bad("the body is not an Arrow IPC stream: it holds no schema".to_owned());
    }
    Ok(batches)
}

/// A record batch's rows, nodes and buffers against its body and the row limit.
fn check_batch(
    batch: &arrow::ipc::RecordBatch<'_>,
    body_length: usize,
    max_rows: usize,
) -> std::result::Result<(), String> {
    if batch.compression().is_some() {
        return Err("compressed Arrow IPC bodies are not taken; send it uncompressed".to_owned());
    }
    let rows = batch.length();
    if usize::try_from(rows).map_or(true, |rows| rows > max_rows) {
        return Err(format!(
            "it states {rows} rows; one request takes at most {max_rows} rows into this table"
        ));
    }
    for (i, node) in batch.nodes().iter().flatten().enumerate() {
        if node.length() < 0 || node.null_count() < 0 || node.null_count() > node.length() {
            return Err(format!(
                "array {i} states {} values of which {} are null",
                node.length(),
                node.null_count()
            ));
        }
    }
    for (i, buffer) in batch.buffers().iter().flatten().enumerate() {
        let end = buffer.offset().checked_add(buffer.length());
        let inside = buffer.offset() >= 0
            && buffer.length() >= 0
            && end.and_then(|end| usize::try_from(end).ok()) <= Some(body_length);
        if !inside {
            return Err(format!(
                "buffer {i} lies at bytes {}..+{}, outside its body of {body_length} bytes",
                buffer.offset(),
                buffer.length()
            ));
        }
    }
    Ok(())
}

/// Whether a column of type `data_type` may come in a row body: the types a table column can
/// take values from. `Null` only as a whole column: nested, it would state any number of
/// values without a byte to carry them.
fn supported(column: &str, data_type: &DataType, top: bool) -> std::result::Result<(), String> {
    use DataType::*;
    let refused = |what: &str| {
        Err(format!(
            "column {column:?} is of type {data_type}: {what} is not taken in a row body"
        ))
    };
    match data_type {
        Null if top => Ok(()),
        Null => refused("a nested null type"),
        List(item) | LargeList(item) | FixedSizeList(item, _) => {
            supported(column, item.data_type(), false)
        }
        Boolean | Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView
        | FixedSizeBinary(_) | Timestamp(..) | Date32 | Date64 | Time32(_) | Time64(_)
        | Duration(_) | Decimal32(..) | Decimal64(..) | Decimal128(..) | Decimal256(..) => Ok(()),
        t if t.is_numeric() => Ok(()),
        _ => refused("this type"),
    }
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let word = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(word.try_into().ok()?))
}

/// arrow's messages start with the error's kind, which says nothing to a client.
fn clean(error: &dyn std::fmt::Display) -> String {
    let message = error.to_string();
    for prefix in [
        "Parser error: ",
        "Invalid argument error: ",
        "Io error: ",
        "Schema error: ",
        "Compute error: ",
    ] {
        if let Some(rest) = message.strip_prefix(prefix) {
            return rest.to_owned();
        }
    }
    message
}
