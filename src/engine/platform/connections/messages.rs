//! Sources read as messages by a cursor, as import jobs read them: Kafka topics (by offset),
//! NATS JetStream streams (by sequence), AMQP queues (consumed, then acknowledged), MQTT topic
//! filters (a persistent session, acknowledged) and Redis key sets (by SCAN cursor).
//!
//! A job opens a [`Reader`] at the cursor its last recorded batch left, and loops: read a
//! [`Batch`], write its records to the dataset, record the batch's cursor, then
//! [`Reader::acknowledge`] (a queue's broker drops what was acknowledged). A stop anywhere in
//! between reads again what was not recorded or not acknowledged: each record carries an `_id`
//! that is the same on every read of it, so a record read twice replaces itself in the dataset.
//! docs/adr/0008-broker-and-cache-connector-crates.md says how each family makes its ids.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::Result;

/// What a read got.
#[derive(Debug, Default)]
pub struct Batch {
    /// The records as the source's tables show them: the record's place under names that
    /// begin with `_` (`_timestamp` in milliseconds since the epoch, `_sequence`, `_subject`,
    /// ...), its payload as `value` (text; [`super::kafka::with_fields`] makes JSON objects'
    /// fields columns), and `_id`, the record's id in a dataset.
    pub rows: Vec<Value>,
    /// Where the next read starts, as the job keeps it.
    pub cursor: Value,
    /// Whether the source had nothing more when this read ended (a job that does not follow
    /// ends here).
    pub at_end: bool,
}

/// A source whose datasets import jobs read as messages.
#[async_trait]
pub trait Messages: Send + Sync {
    /// The prefix the record's place takes in a dataset: `_offset` becomes `<prefix>.offset`
    /// (no dataset field may begin with `_`).
    fn prefix(&self) -> &'static str;

    /// A reader of dataset `name` for import job `job`, from `cursor` (null: the start).
    /// `Error::DatasetNotFound` when the source has no such dataset.
    async fn reader(&self, name: &str, job: &str, cursor: &Value) -> Result<Box<dyn Reader + '_>>;
}

/// One job's reading of one dataset.
#[async_trait]
pub trait Reader: Send {
    /// The next records, at most `max`, waiting at most `wait` for the first.
    async fn next(&mut self, max: usize, wait: Duration) -> Result<Batch>;

    /// The records of the last batch are written and its cursor recorded: a source that takes
    /// acknowledgements gets them now.
    async fn acknowledge(&mut self) -> Result<()> {
        Ok(())
    }

    /// The job is over: the source's end reached (and the job does not follow), or the job
    /// cancelled or removed. A source that keeps state for the job (an MQTT session) drops it.
    /// Never called when the job's node stops: the job is taken up again from its cursor.
    async fn end(&mut self) -> Result<()> {
        Ok(())
    }
}

/// An id for a record that names itself nowhere: a hash of what makes it (its topic or
/// queue, its headers, its payload), so the same message read again gets the same id.
pub fn content_id(parts: &[&[u8]]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hex::encode(&hash.finalize()[..16])
}

/// The `id` a JSON payload gives itself (`id` or `_id`, a string or a number), if it does.
pub fn payload_id(payload: &[u8]) -> Option<String> {
    let fields: Map<String, Value> = serde_json::from_slice(payload).ok()?;
    ["_id", "id"]
        .iter()
        .find_map(|name| match fields.get(*name)? {
            Value::String(text) if !text.is_empty() => Some(text.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
}

/// The name a column of a message source's record takes in a dataset: `_timestamp` is its
/// `@timestamp`, `_id` stays, another `_name` is `<prefix>.name`.
pub fn dataset_name(prefix: &str, column: &str) -> Option<String> {
    match column {
        "_id" => None,
        "_timestamp" => Some("@timestamp".to_owned()),
        _ => column
            .strip_prefix('_')
            .map(|rest| format!("{prefix}.{rest}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ids_are_stable_and_tell_parts_apart() {
        assert_eq!(content_id(&[b"q", b"body"]), content_id(&[b"q", b"body"]));
        assert_ne!(content_id(&[b"q", b"body"]), content_id(&[b"qb", b"ody"]));
        assert_eq!(content_id(&[b"x"]).len(), 32);
    }

    #[test]
    fn payloads_name_themselves_by_id() {
        assert_eq!(payload_id(br#"{"id": 7, "n": 1}"#).as_deref(), Some("7"));
        assert_eq!(payload_id(br#"{"_id": "a-1"}"#).as_deref(), Some("a-1"));
        assert_eq!(payload_id(br#"{"n": 1}"#), None);
        assert_eq!(payload_id(b"plain"), None);
    }

    #[test]
    fn record_columns_are_renamed_for_datasets() {
        assert_eq!(dataset_name("nats", "_sequence").unwrap(), "nats.sequence");
        assert_eq!(dataset_name("kafka", "_timestamp").unwrap(), "@timestamp");
        assert_eq!(dataset_name("kafka", "_id"), None);
        assert_eq!(dataset_name("kafka", "page"), None);
    }
}
