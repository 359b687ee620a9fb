//! Sources that speak the Kafka protocol (Kafka, Redpanda, ...): a dataset is a topic, read in
//! place as a table of its records from the beginning of each partition to its end when the
//! read starts, and those that follow without a pause (at most `max_records`, default 100 000,
//! the oldest first).
//!
//! Columns: `_partition`, `_offset`, `_timestamp` (milliseconds since the epoch), `_key` (text),
//! and the record's value: its fields when every value is a JSON object, else `value` (text).
//! A read touches no consumer group: partitions are assigned, offsets never committed.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use async_trait::async_trait;
use datafusion::{catalog::TableProvider, execution::SessionState};
use rdkafka::{
    ClientConfig, Message, Offset, TopicPartitionList,
    consumer::{BaseConsumer, Consumer},
};
use serde_json::{Map, Value, json};

use super::{
    config::text,
    messages::{Batch, Messages, Reader},
    source::{Source, failure_text},
};
use crate::error::{Error, Result};

/// How long a request to the brokers may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Records a read takes at most, unless the config says otherwise.
const MAX_RECORDS: u64 = 100_000;

/// An opened Kafka-protocol source.
pub struct Kafka {
    config: ClientConfig,
    max_records: u64,
}

/// A failure of the brokers at `stage`.
fn failed(stage: &str) -> impl Fn(rdkafka::error::KafkaError) -> Error + '_ {
    move |error| failure_text(stage, &error.to_string())
}

impl Kafka {
    /// Opens the source: one metadata request proves the brokers answer.
    pub async fn open(config: &Map<String, Value>) -> Result<Kafka> {
        let brokers = text(config, "url")
            .map(|url| url.trim_start_matches("kafka://").to_owned())
            .unwrap_or_else(|| {
                format!(
                    "{}:{}",
                    text(config, "host").unwrap_or_default(),
                    config.get("port").and_then(Value::as_u64).unwrap_or(9092)
                )
            });
        let mut client = ClientConfig::new();
        client
            .set("bootstrap.servers", &brokers)
            .set("client.id", "strata-connection")
            .set("group.id", "strata-connection-reader")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            .set("socket.timeout.ms", TIMEOUT.as_millis().to_string())
            .set("log_level", "3");
        let ssl = config.get("ssl").and_then(Value::as_bool).unwrap_or(false);
        match (text(config, "username"), ssl) {
            (Some(user), _) => {
                client
                    .set(
                        "security.protocol",
                        if ssl { "sasl_ssl" } else { "sasl_plaintext" },
                    )
                    .set(
                        "sasl.mechanism",
                        text(config, "sasl_mechanism").unwrap_or("SCRAM-SHA-256"),
                    )
                    .set("sasl.username", user)
                    .set(
                        "sasl.password",
                        text(config, "password").unwrap_or_default(),
                    );
            }
            (None, true) => {
                client.set("security.protocol", "ssl");
            }
            (None, false) => {}
        }
        let kafka = Kafka {
            config: client,
            max_records: config
                .get("max_records")
                .and_then(Value::as_u64)
                .unwrap_or(MAX_RECORDS),
        };
        kafka.topics().await?;
        Ok(kafka)
    }

    /// The topics of the cluster, with their partitions' count.
    async fn topics(&self) -> Result<Vec<(String, i32)>> {
        let config = self.config.clone();
        blocking(move || {
            let stage = "read the cluster's metadata";
            let consumer: BaseConsumer = config.create().map_err(failed(stage))?;
            let metadata = consumer
                .fetch_metadata(None, TIMEOUT)
                .map_err(failed(stage))?;
            Ok(metadata
                .topics()
                .iter()
                .map(|t| (t.name().to_owned(), t.partitions().len() as i32))
                .collect())
        })
        .await
    }

    /// The records of `topic` (`partitions` of them) as JSON rows, oldest first.
    fn read(config: &ClientConfig, topic: &str, partitions: i32, max: u64) -> Result<Vec<Value>> {
        let stage = format!("read topic {topic}");
        let consumer: BaseConsumer = config.create().map_err(failed(&stage))?;
        let mut assignment = TopicPartitionList::new();
        let mut pending = Vec::new();
        for partition in 0..partitions {
            let (low, high) = consumer
                .fetch_watermarks(topic, partition, TIMEOUT)
                .map_err(failed(&stage))?;
            if high > low {
                assignment
                    .add_partition_offset(topic, partition, Offset::Offset(low))
                    .map_err(failed(&stage))?;
                pending.push((partition, high));
            }
        }
        let mut rows = Vec::new();
        if pending.is_empty() {
            return Ok(rows);
        }
        consumer.assign(&assignment).map_err(failed(&stage))?;
        let deadline = std::time::Instant::now() + TIMEOUT * 6;
        // Until every partition's end is reached, then while records keep coming (some brokers
        // count a batch of records as one offset in their watermarks: the rest of the batch
        // follows at once).
        while (rows.len() as u64) < max {
            if std::time::Instant::now() > deadline {
                return Err(Error::SourceFailed(format!(
                    "{stage}: the brokers did not send the records within {} s",
                    (TIMEOUT * 6).as_secs()
                )));
            }
            let wait = match pending.is_empty() {
                true => Duration::from_millis(100),
                false => Duration::from_millis(200),
            };
            let Some(message) = consumer.poll(wait) else {
                match pending.is_empty() {
                    true => break,
                    false => continue,
                }
            };
            let message = message.map_err(failed(&stage))?;
            let (partition, offset) = (message.partition(), message.offset());
            pending.retain(|(p, high)| !(*p == partition && offset + 1 >= *high));
            let value = message
                .payload()
                .map(|bytes| String::from_utf8_lossy(bytes).into_owned());
            rows.push(json!({
                "_partition": partition,
                "_offset": offset,
                "_timestamp": message.timestamp().to_millis(),
                "_key": message.key().map(|k| String::from_utf8_lossy(k).into_owned()),
                "value": value,
            }));
        }
        Ok(rows)
    }
}

/// What an import's read of a topic got: its records (as [`Kafka::read`] shapes them, values'
/// fields not yet columns), and whether it started at the end of every partition (their high
/// watermarks when it started).
pub struct TopicRead {
    pub rows: Vec<Value>,
    pub from_end: bool,
}

impl Kafka {
    /// Records of `topic` from the offsets `next` (a partition it does not name: from its
    /// start), at most `max`, waiting at most `wait` for the first and 100 ms for each more.
    pub async fn read_from(
        &self,
        topic: &str,
        next: &BTreeMap<i32, i64>,
        max: usize,
        wait: Duration,
    ) -> Result<TopicRead> {
        let Some((topic, partitions)) = self.topics().await?.into_iter().find(|(t, _)| t == topic)
        else {
            return Err(Error::DatasetNotFound(topic.to_owned()));
        };
        let (config, next) = (self.config.clone(), next.clone());
        blocking(move || {
            let stage = format!("read topic {topic}");
            let consumer: BaseConsumer = config.create().map_err(failed(&stage))?;
            let mut assignment = TopicPartitionList::new();
            let mut from_end = true;
            for partition in 0..partitions {
                let (low, high) = consumer
                    .fetch_watermarks(&topic, partition, TIMEOUT)
                    .map_err(failed(&stage))?;
                let from = next.get(&partition).copied().unwrap_or(low).max(low);
                assignment
                    .add_partition_offset(&topic, partition, Offset::Offset(from))
                    .map_err(failed(&stage))?;
                from_end &= from >= high;
            }
            consumer.assign(&assignment).map_err(failed(&stage))?;
            let mut rows = Vec::new();
            let started = std::time::Instant::now();
            while rows.len() < max {
                let patience = match rows.is_empty() {
                    true => wait.saturating_sub(started.elapsed()),
                    false => Duration::from_millis(100),
                };
                if patience.is_zero() {
                    break;
                }
                let Some(message) = consumer.poll(patience) else {
                    break;
                };
                let message = message.map_err(failed(&stage))?;
                rows.push(json!({
                    "_partition": message.partition(),
                    "_offset": message.offset(),
                    "_timestamp": message.timestamp().to_millis(),
                    "_key": message.key().map(|k| String::from_utf8_lossy(k).into_owned()),
                    "value": message
                        .payload()
                        .map(|bytes| String::from_utf8_lossy(bytes).into_owned()),
                }));
            }
            Ok(TopicRead { rows, from_end })
        })
        .await
    }
}

/// An import's reading of a topic: from each partition's next offset (the cursor
/// `{"offsets": {"<partition>": <next offset>}}`; a partition it does not name from its start).
/// Record ids are `<job>-<partition>-<offset>`.
struct TopicReader<'a> {
    kafka: &'a Kafka,
    topic: String,
    job: String,
    offsets: BTreeMap<i32, i64>,
}

#[async_trait]
impl Messages for Kafka {
    fn prefix(&self) -> &'static str {
        "kafka"
    }

    async fn reader(&self, name: &str, job: &str, cursor: &Value) -> Result<Box<dyn Reader + '_>> {
        if !self.topics().await?.iter().any(|(topic, _)| topic == name) {
            return Err(Error::DatasetNotFound(name.to_owned()));
        }
        let offsets = cursor["offsets"]
            .as_object()
            .map(|offsets| {
                offsets
                    .iter()
                    .filter_map(|(p, o)| Some((p.parse().ok()?, o.as_i64()?)))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Box::new(TopicReader {
            kafka: self,
            topic: name.to_owned(),
            job: job.to_owned(),
            offsets,
        }))
    }
}

#[async_trait]
impl Reader for TopicReader<'_> {
    async fn next(&mut self, max: usize, wait: Duration) -> Result<Batch> {
        let read = self
            .kafka
            .read_from(&self.topic, &self.offsets, max, wait)
            .await?;
        let mut rows = read.rows;
        for row in &mut rows {
            let (Some(partition), Some(offset)) =
                (row["_partition"].as_i64(), row["_offset"].as_i64())
            else {
                continue;
            };
            let next = self.offsets.entry(partition as i32).or_insert(0);
            *next = (*next).max(offset + 1);
            row["_id"] = json!(format!("{}-{partition}-{offset}", self.job));
        }
        let offsets: Map<String, Value> = self
            .offsets
            .iter()
            .map(|(p, o)| (p.to_string(), json!(o)))
            .collect();
        Ok(Batch {
            at_end: rows.is_empty() && read.from_end,
            rows,
            cursor: json!({"offsets": offsets}),
        })
    }
}

/// Runs blocking work of the Kafka client off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Internal(format!("a Kafka read stopped: {e}")))?
}

/// The rows with their values' fields as columns when every value is a JSON object.
pub fn with_fields(mut rows: Vec<Value>) -> Vec<Value> {
    let objects = rows.iter().all(|row| {
        row["value"]
            .as_str()
            .is_some_and(|text| serde_json::from_str::<Map<String, Value>>(text).is_ok())
    });
    if !objects || rows.is_empty() {
        return rows;
    }
    for row in &mut rows {
        let fields: Map<String, Value> = row["value"]
            .as_str()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        if let Some(row) = row.as_object_mut() {
            row.remove("value");
            for (name, value) in fields {
                if !name.starts_with('_') {
                    row.insert(name, value);
                }
            }
        }
    }
    rows
}

#[async_trait]
impl Source for Kafka {
    async fn datasets(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .topics()
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| !name.starts_with("__"))
            .collect();
        names.sort();
        Ok(names)
    }

    fn messages(&self) -> Option<&dyn Messages> {
        Some(self)
    }

    async fn table(&self, _state: &SessionState, name: &str) -> Result<Arc<dyn TableProvider>> {
        let Some((topic, partitions)) = self.topics().await?.into_iter().find(|(t, _)| t == name)
        else {
            return Err(Error::DatasetNotFound(name.to_owned()));
        };
        let (config, max) = (self.config.clone(), self.max_records);
        let rows = blocking(move || Kafka::read(&config, &topic, partitions, max)).await?;
        super::http_json::table_of(name, &with_fields(rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_values_become_columns_and_others_stay_text() {
        let rows = vec![
            json!({"_offset": 0, "value": "{\"n\": 1, \"_offset\": 9}"}),
            json!({"_offset": 1, "value": "{\"n\": 2, \"m\": \"x\"}"}),
        ];
        let shaped = with_fields(rows);
        assert_eq!(shaped[0]["n"], 1);
        assert_eq!(shaped[0]["_offset"], 0);
        assert!(shaped[1].get("value").is_none());
        let mixed = vec![json!({"value": "{\"n\": 1}"}), json!({"value": "plain"})];
        assert_eq!(with_fields(mixed.clone()), mixed);
    }
}
