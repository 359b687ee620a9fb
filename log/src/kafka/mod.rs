//! `KafkaLog`: the commit log on a Kafka-protocol broker, for clusters.
//!
//! - One topic with one partition per strata partition: `<topic_prefix>.<encoded name>` (see
//!   [`topic_name`]), created through the admin API on first append with the configured
//!   replication factor. Every record's key is the strata partition's full name, so consumers of
//!   the topics never need to decode topic names; the value is the protobuf `Envelope` (offset
//!   and partition left empty: the Kafka offset is the strata offset).
//! - Appends use an idempotent producer with `acks=all`: an append is answered once every
//!   in-sync replica has its events. Within one process an append queues its records without
//!   another append's in between (appends still pipeline: none waits for another's delivery),
//!   so a batch gets consecutive offsets; if another process's records land between them (two
//!   nodes writing one partition, which only a takeover race does), the append fails.
//! - Reads fetch from the partition's offset with a consumer that is assigned, never
//!   subscribed: no consumer group state. A partition keeps its consumer between reads (a
//!   projection following it reads on from where it stopped); the least recently used are
//!   closed past `readers` of them. Readers see only records below the high watermark, that
//!   is, replicated to every in-sync replica.
//! - Single-writer fencing is the readers' rule (`crate::fence`), so it needs nothing from the
//!   broker: no transactions, which some Kafka-protocol brokers lack.
//! - Waiting for new events: this process's appends wake waiters at once; other processes' are
//!   seen by polling the watermark, every `poll_interval` at first, less often while nothing
//!   arrives (up to `max_poll_interval`).

mod names;

use std::{
    collections::{HashMap, HashSet},
    ops::Range,
    sync::Arc,
    time::Duration,
};

use async_trait::async_trait;
use futures::StreamExt;
use parking_lot::Mutex;
use prost::Message as _;
use rdkafka::{
    ClientConfig, Message, Offset, TopicPartitionList,
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{BaseConsumer, Consumer, StreamConsumer},
    error::{KafkaError, RDKafkaErrorCode},
    producer::{FutureProducer, FutureRecord},
};

pub use self::names::topic_name;
use crate::{
    CommitLog, Envelope, PartitionId,
    error::{Error, Result},
    watermarks::Watermarks,
};

/// Where the log lives and how it is written.
#[derive(Clone, Debug)]
pub struct KafkaOptions {
    /// `host:port[,host:port...]`
    pub brokers: String,
    /// Every topic of this log starts with `<topic_prefix>.`; several logs can share a broker.
    pub topic_prefix: String,
    /// Replicas of each topic (at most the number of brokers).
    pub replication_factor: i32,
    /// The largest event, in bytes (producer `message.max.bytes`, topic `max.message.bytes`).
    pub max_event_bytes: usize,
    /// How often a waiter first polls the broker for other processes' appends; the interval
    /// doubles while nothing arrives, up to `max_poll_interval`.
    pub poll_interval: Duration,
    pub max_poll_interval: Duration,
    /// Consumers kept for reads, one per partition read recently (each is a librdkafka client
    /// with threads of its own); past this many, the least recently used idle one is closed.
    pub readers: usize,
    /// How long a request to the broker may take before it fails.
    pub timeout: Duration,
}

impl KafkaOptions {
    pub fn new(brokers: impl Into<String>, topic_prefix: impl Into<String>) -> KafkaOptions {
        KafkaOptions {
            brokers: brokers.into(),
            topic_prefix: topic_prefix.into(),
            replication_factor: 1,
            max_event_bytes: 64 << 20,
            poll_interval: Duration::from_millis(50),
            max_poll_interval: Duration::from_secs(1),
            readers: 32,
            timeout: Duration::from_secs(30),
        }
    }
}

/// The Kafka-backed [`CommitLog`]. Cheap to clone.
#[derive(Clone)]
pub struct KafkaLog {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for KafkaLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaLog")
            .field("brokers", &self.inner.options.brokers)
            .field("topic_prefix", &self.inner.options.topic_prefix)
            .finish_non_exhaustive()
    }
}

struct Inner {
    options: KafkaOptions,
    producer: FutureProducer,
    admin: AdminClient<DefaultClientContext>,
    /// Metadata and watermark requests (blocking calls, made on blocking threads).
    metadata: Arc<BaseConsumer>,
    /// Topics known to exist.
    topics: Mutex<HashSet<String>>,
    /// Held while an append queues its records, so that a batch's offsets are consecutive.
    appending: Mutex<HashMap<PartitionId, Arc<Mutex<()>>>>,
    /// A reader per partition read recently, least recently used first.
    readers: Mutex<Vec<(PartitionId, Arc<tokio::sync::Mutex<Reader>>)>>,
    watermarks: Arc<Watermarks>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.watermarks.close();
    }
}

/// A consumer assigned to one partition's topic, and the offset its next message will have
/// (reassigning costs a round of fetches, so a partition keeps its consumer).
struct Reader {
    consumer: StreamConsumer,
    next: Option<u64>,
}

impl KafkaLog {
    /// Connects to the brokers (it checks that they answer).
    pub async fn connect(options: KafkaOptions) -> Result<KafkaLog> {
        let max_bytes = options.max_event_bytes.to_string();
        let producer: FutureProducer = client_config(&options)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "0")
            // One record per record batch: some Kafka-protocol brokers (tansu 0.6) report the
            // high watermark and serve fetches by batch base offset, which is only right when
            // every batch holds one record.
            .set("batch.num.messages", "1")
            .set("message.max.bytes", &max_bytes)
            .set(
                "message.timeout.ms",
                options.timeout.as_millis().to_string(),
            )
            .create()
            .map_err(kafka("creating the producer"))?;
        let admin: AdminClient<DefaultClientContext> = client_config(&options)
            .create()
            .map_err(kafka("creating the admin client"))?;
        let metadata: BaseConsumer = consumer_config(&options)
            .create()
            .map_err(kafka("creating the metadata client"))?;
        let log = KafkaLog {
            inner: Arc::new(Inner {
                options,
                producer,
                admin,
                metadata: Arc::new(metadata),
                topics: Mutex::new(HashSet::new()),
                appending: Mutex::new(HashMap::new()),
                readers: Mutex::new(Vec::new()),
                watermarks: Arc::new(Watermarks::default()),
            }),
        };
        log.partitions().await?;
        Ok(log)
    }

    pub fn options(&self) -> &KafkaOptions {
        &self.inner.options
    }

    fn topic(&self, partition: &PartitionId) -> String {
        topic_name(&self.inner.options.topic_prefix, partition)
    }

    /// Creates the topic of `partition` unless it is known to exist.
    async fn ensure_topic(&self, partition: &PartitionId) -> Result<String> {
        let topic = self.topic(partition);
        if self.inner.topics.lock().contains(&topic) {
            return Ok(topic);
        }
        let replication = self.inner.options.replication_factor;
        let max_bytes = self.inner.options.max_event_bytes.to_string();
        let new = NewTopic::new(&topic, 1, TopicReplication::Fixed(replication))
            .set("max.message.bytes", &max_bytes);
        let options = AdminOptions::new().operation_timeout(Some(self.inner.options.timeout));
        let results = self
            .inner
            .admin
            .create_topics([&new], &options)
            .await
            .map_err(kafka("creating a topic"))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => {
                    return Err(Error::Backend(format!("creating topic {name}: {code}")));
                }
            }
        }
        // The topic may take a moment to reach every broker's metadata.
        let deadline = tokio::time::Instant::now() + self.inner.options.timeout;
        while !self.topic_exists(&topic).await? {
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Backend(format!(
                    "topic {topic} was created but does not appear in the metadata"
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.inner.topics.lock().insert(topic.clone());
        Ok(topic)
    }

    async fn topic_exists(&self, topic: &str) -> Result<bool> {
        Ok(self.topic_names().await?.contains(topic))
    }

    /// Every topic of the broker with this log's prefix.
    async fn topic_names(&self) -> Result<HashSet<String>> {
        let metadata = self.inner.metadata.clone();
        let timeout = self.inner.options.timeout;
        let prefix = format!("{}.", self.inner.options.topic_prefix);
        blocking(move || {
            let found = metadata
                .fetch_metadata(None, timeout)
                .map_err(kafka("reading the broker's metadata"))?;
            Ok(found
                .topics()
                .iter()
                .filter(|t| t.error().is_none() && t.name().starts_with(&prefix))
                .map(|t| t.name().to_owned())
                .collect())
        })
        .await
    }

    /// The high watermark of `topic` on the broker (0 for a topic that does not exist).
    async fn fetch_end(&self, topic: String) -> Result<u64> {
        let metadata = self.inner.metadata.clone();
        let timeout = self.inner.options.timeout;
        blocking(move || {
            let unknown = |error: &KafkaError| {
                matches!(
                    error,
                    KafkaError::MetadataFetch(
                        RDKafkaErrorCode::UnknownTopicOrPartition
                            | RDKafkaErrorCode::UnknownPartition
                    )
                )
            };
            match metadata.fetch_watermarks(&topic, 0, timeout) {
                Ok((_, high)) => Ok(u64::try_from(high).unwrap_or(0)),
                Err(error) if unknown(&error) => {
                    // The client's metadata cache may predate the topic: another node created it
                    // since. Ask the broker about it (this does not create it), and try again.
                    let known = metadata
                        .fetch_metadata(Some(&topic), timeout)
                        .map_err(kafka("reading a topic's metadata"))?
                        .topics()
                        .iter()
                        .any(|t| t.name() == topic && t.error().is_none());
                    if !known {
                        return Ok(0);
                    }
                    match metadata.fetch_watermarks(&topic, 0, timeout) {
                        Ok((_, high)) => Ok(u64::try_from(high).unwrap_or(0)),
                        Err(error) if unknown(&error) => Ok(0),
                        Err(error) => Err(kafka("reading a watermark")(error)),
                    }
                }
                Err(error) => Err(kafka("reading a watermark")(error)),
            }
        })
        .await
    }

    /// The reader of `partition`, made if there is none; the least recently used idle reader
    /// of another partition is closed when there are too many.
    fn reader(&self, partition: &PartitionId) -> Result<Arc<tokio::sync::Mutex<Reader>>> {
        let mut readers = self.inner.readers.lock();
        if let Some(at) = readers.iter().position(|(p, _)| p == partition) {
            let entry = readers.remove(at);
            let reader = entry.1.clone();
            readers.push(entry);
            return Ok(reader);
        }
        if readers.len() >= self.inner.options.readers.max(1)
            && let Some(idle) = readers.iter().position(|(_, r)| r.try_lock().is_ok())
        {
            readers.remove(idle);
        }
        let consumer: StreamConsumer = consumer_config(&self.inner.options)
            .create()
            .map_err(kafka("creating a consumer"))?;
        let reader = Arc::new(tokio::sync::Mutex::new(Reader {
            consumer,
            next: None,
        }));
        readers.push((partition.clone(), reader.clone()));
        Ok(reader)
    }

    /// Reads `wanted` events of `partition` from `from`, which the broker has.
    async fn read_with(
        &self,
        reader: &mut Reader,
        partition: &PartitionId,
        from: u64,
        wanted: usize,
    ) -> Result<Vec<Envelope>> {
        if reader.next != Some(from) {
            reader.next = None;
            let mut assignment = TopicPartitionList::new();
            assignment
                .add_partition_offset(&self.topic(partition), 0, Offset::Offset(from as i64))
                .map_err(kafka("assigning a partition"))?;
            reader
                .consumer
                .assign(&assignment)
                .map_err(kafka("assigning a partition"))?;
        }
        let mut out = Vec::with_capacity(wanted);
        let timeout = self.inner.options.timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        while out.len() < wanted {
            let expected = from + out.len() as u64;
            let message = match tokio::time::timeout_at(deadline, reader.consumer.recv()).await {
                Ok(Ok(message)) => message,
                Ok(Err(error)) if recovers_by_itself(&error) => {
                    // librdkafka reconnects and fetches again from the consumer's position; the
                    // read waits for it until its deadline, as for a slow broker.
                    tracing::warn!(%partition, offset = expected, %error, "kafka: reading: waiting for the consumer to recover");
                    continue;
                }
                Ok(Err(error)) => return Err(kafka("reading")(error)),
                Err(_) => {
                    return Err(Error::Backend(format!(
                        "reading {partition} from offset {expected}: no event within {timeout:?}"
                    )));
                }
            };
            let offset = u64::try_from(message.offset()).unwrap_or(0);
            if offset != expected {
                return Err(Error::Backend(format!(
                    "reading {partition}: expected offset {expected}, the broker sent {offset}"
                )));
            }
            out.push(Envelope::decode_stored(
                message.payload().unwrap_or_default(),
                partition,
                offset,
            )?);
        }
        reader.next = Some(from + out.len() as u64);
        Ok(out)
    }
}

#[async_trait]
impl CommitLog for KafkaLog {
    async fn append(&self, partition: &PartitionId, events: Vec<Envelope>) -> Result<Range<u64>> {
        if events.is_empty() {
            let end = self.high_water_mark(partition).await?;
            return Ok(end..end);
        }
        let records: Vec<Vec<u8>> = events
            .iter()
            .map(|event| {
                let mut event = event.clone();
                event.offset = 0;
                event.partition.clear();
                event.encode_to_vec()
            })
            .collect();
        if let Some(big) = records
            .iter()
            .find(|r| r.len() > self.inner.options.max_event_bytes)
        {
            return Err(Error::BatchTooLarge {
                bytes: big.len(),
                max: self.inner.options.max_event_bytes,
            });
        }
        let topic = self.ensure_topic(partition).await?;
        let key = partition.as_str().as_bytes();
        // Queued together, in order, under the partition's lock; the idempotent producer keeps
        // that order on the broker, so the records get consecutive offsets. Deliveries are
        // awaited without the lock: appends to a partition pipeline.
        let deliveries = {
            let lock = self
                .inner
                .appending
                .lock()
                .entry(partition.clone())
                .or_default()
                .clone();
            let _queue_in_order = lock.lock();
            let mut deliveries = Vec::with_capacity(records.len());
            for (payload, event) in records.iter().zip(&events) {
                let record = FutureRecord::to(&topic)
                    .partition(0)
                    .key(key)
                    .payload(payload)
                    .timestamp(event.timestamp_micros / 1000);
                let delivery = self
                    .inner
                    .producer
                    .send_result(record)
                    .map_err(|(error, _)| kafka("queueing an event")(error))?;
                deliveries.push(delivery);
            }
            deliveries
        };
        let mut offsets = Vec::with_capacity(deliveries.len());
        for delivery in futures::future::join_all(deliveries).await {
            match delivery {
                Ok(Ok(delivery)) => offsets.push(u64::try_from(delivery.offset).unwrap_or(0)),
                Ok(Err((error, _))) => return Err(kafka("appending")(error)),
                Err(_) => return Err(Error::Closed),
            }
        }
        let first = offsets[0];
        let range = first..first + offsets.len() as u64;
        if offsets.iter().copied().ne(range.clone()) {
            return Err(Error::Backend(format!(
                "another producer wrote to {partition} between the events of one append (offsets {offsets:?})"
            )));
        }
        self.inner.watermarks.raise(partition, range.end);
        Ok(range)
    }

    async fn read(
        &self,
        partition: &PartitionId,
        from: u64,
        max_events: usize,
    ) -> Result<Vec<Envelope>> {
        let end = self.high_water_mark(partition).await?;
        let wanted = crate::commit_log::events_to_read(partition, from, max_events, end)?;
        if wanted == 0 {
            return Ok(Vec::new());
        }
        let reader = self.reader(partition)?;
        let mut reader = reader.lock().await;
        let read = self.read_with(&mut reader, partition, from, wanted).await;
        if read.is_err() {
            // Its position is unknown.
            reader.next = None;
        }
        read
    }

    async fn high_water_mark(&self, partition: &PartitionId) -> Result<u64> {
        let end = self.fetch_end(self.topic(partition)).await?;
        self.inner.watermarks.raise(partition, end);
        Ok(end)
    }

    async fn wait_for(&self, partition: &PartitionId, offset: u64) -> Result<()> {
        let mut interval = self.inner.options.poll_interval;
        loop {
            let poll = tokio::time::sleep(interval);
            tokio::select! {
                reached = self.inner.watermarks.wait_for(partition, offset) => return reached,
                () = poll => {
                    // Publishes what other processes appended; the wait above then sees it.
                    self.high_water_mark(partition).await?;
                    interval = (interval * 2).min(self.inner.options.max_poll_interval);
                }
            }
        }
    }

    async fn partitions(&self) -> Result<Vec<PartitionId>> {
        let topics = self.topic_names().await?;
        let mut ids = Vec::with_capacity(topics.len());
        for topic in topics {
            match names::partition_of(&self.inner.options.topic_prefix, &topic) {
                Some(id) => ids.push(id),
                // A long name, shortened with a hash: the key of any record holds it.
                None => {
                    if let Some(id) = self.name_from_a_record(&topic).await? {
                        ids.push(id);
                    }
                }
            }
        }
        ids.sort();
        Ok(ids)
    }

    async fn delete_partition(&self, partition: &PartitionId) -> Result<()> {
        let topic = self.topic(partition);
        // No consumer of ours may be assigned to a topic being deleted: librdkafka 2.12 crashes
        // updating its metadata cache when the broker drops a topic a consumer fetches from.
        let reader = {
            let mut readers = self.inner.readers.lock();
            let at = readers.iter().position(|(p, _)| p == partition);
            at.map(|at| readers.remove(at).1)
        };
        if let Some(reader) = reader {
            reader
                .lock()
                .await
                .consumer
                .unassign()
                .map_err(kafka("unassigning a partition"))?;
        }
        let options = AdminOptions::new().operation_timeout(Some(self.inner.options.timeout));
        let results = self
            .inner
            .admin
            .delete_topics(&[&topic], &options)
            .await
            .map_err(kafka("deleting a topic"))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
                Err((name, code)) => {
                    return Err(Error::Backend(format!("deleting topic {name}: {code}")));
                }
            }
        }
        // Deletion completes in the background on the brokers: wait until it has.
        let deadline = tokio::time::Instant::now() + self.inner.options.timeout;
        while self.topic_exists(&topic).await? {
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Backend(format!(
                    "topic {topic} is still listed after its deletion"
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.inner.topics.lock().remove(&topic);
        self.inner.watermarks.publish(partition, 0);
        Ok(())
    }
}

impl KafkaLog {
    /// The partition name in the key of the first record of `topic`, if it has one.
    async fn name_from_a_record(&self, topic: &str) -> Result<Option<PartitionId>> {
        let consumer: StreamConsumer = consumer_config(&self.inner.options)
            .create()
            .map_err(kafka("creating a consumer"))?;
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(topic, 0, Offset::Beginning)
            .map_err(kafka("assigning a partition"))?;
        consumer
            .assign(&assignment)
            .map_err(kafka("assigning a partition"))?;
        if self.fetch_end(topic.to_owned()).await? == 0 {
            return Ok(None);
        }
        let mut stream = consumer.stream();
        match tokio::time::timeout(self.inner.options.timeout, stream.next()).await {
            Ok(Some(Ok(message))) => Ok(message
                .key()
                .and_then(|key| std::str::from_utf8(key).ok())
                .and_then(|name| PartitionId::new(name).ok())),
            Ok(Some(Err(error))) => Err(kafka("reading a partition name")(error)),
            Ok(None) | Err(_) => Ok(None),
        }
    }
}

fn client_config(options: &KafkaOptions) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &options.brokers)
        .set("client.id", format!("strata-{}", options.topic_prefix))
        .set("socket.timeout.ms", options.timeout.as_millis().to_string())
        .set("log_level", "3");
    config
}

fn consumer_config(options: &KafkaOptions) -> ClientConfig {
    let mut config = client_config(options);
    config
        // Assigned, never subscribed: the group is never joined and no offset is committed.
        .set(
            "group.id",
            format!("strata-{}-readers", options.topic_prefix),
        )
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("auto.offset.reset", "error")
        .set("fetch.wait.max.ms", "10")
        .set(
            "fetch.message.max.bytes",
            options.max_event_bytes.to_string(),
        )
        .set(
            "receive.message.max.bytes",
            (options.max_event_bytes + (1 << 20)).to_string(),
        );
    config
}

/// Whether a consumer error is one librdkafka recovers from by itself (a lost connection, a
/// broker that is down or slow, a leader being elected): its documentation calls consumer errors
/// informational, except those that need the application, such as an offset out of range, a
/// topic that is gone or a failed authorization.
fn recovers_by_itself(error: &KafkaError) -> bool {
    matches!(
        error,
        KafkaError::MessageConsumption(
            RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::Resolve
                | RDKafkaErrorCode::OperationTimedOut
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::NetworkException
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::NotLeaderForPartition
                | RDKafkaErrorCode::BrokerNotAvailable
                | RDKafkaErrorCode::ReplicaNotAvailable
        )
    )
}

fn kafka(doing: &'static str) -> impl Fn(KafkaError) -> Error {
    move |error| Error::Backend(format!("kafka: {doing}: {error}"))
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| Error::Closed)?
}

#[cfg(test)]
mod tests;
