//! KafkaLog append throughput and latency, against rdkafka producing the same bytes to the same
//! broker directly, and against FileLog, in one run.
//!
//! For each record size (200 B, 4 KiB) and writer count (1, 16), `writers` tasks each append
//! one record at a time and wait for it (closed loop):
//! - `raw rdkafka`: a FutureProducer with the settings KafkaLog uses (idempotent, acks=all, one
//!   record per batch, linger 0), sending the same encoded envelope with the same key to a topic
//!   of its own and awaiting each delivery. This is the baseline of the ratio column.
//! - `raw rdkafka, default batching`: the same without `batch.num.messages=1`, for context (what
//!   the broker could take if it handled multi-record batches; KafkaLog can't use it on tansu).
//! - `KafkaLog`: `append` of one event, which also serializes appends per partition and
//!   publishes the watermark.
//! - `FileLog`: the embedded log on this machine's disk (fsync per group commit).
//!
//! Runs alternate, `--pairs` times per configuration; the table gives the median of each figure
//! and the median of the per-pair ratios to the raw producer.
//!
//! ```sh
//! port=19092; scripts/kafka-broker start $port /tmp/tansu.log
//! cargo bench -p strata-log --bench kafka_append -- --brokers 127.0.0.1:$port
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::{path::PathBuf, sync::Arc, time::Duration};

use clap::Parser;
use common::{Figure, append_loop, closed_loop, event_of_size, file_log, median, median_of, row};
use prost::Message;
use rdkafka::{
    ClientConfig,
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    producer::{FutureProducer, FutureRecord},
};
use strata_log::{CommitLog, KafkaLog, KafkaOptions, PartitionId};

#[derive(Parser)]
struct Args {
    /// The broker (host:port) [env: STRATA_TEST_KAFKA]
    #[arg(long, env = "STRATA_TEST_KAFKA")]
    brokers: String,
    /// Seconds each measurement runs.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Alternating runs per configuration.
    #[arg(long, default_value_t = 3)]
    pairs: usize,
    /// Where FileLog writes (default: a directory under /var/tmp, removed afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long, hide = true)]
    bench: bool,
}

/// A name no earlier run used.
fn unique(what: &str) -> String {
    format!(
        "bench-{what}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// `writers` tasks producing `payload` to a fresh topic with `producer`, one record at a time.
async fn raw(
    brokers: &str,
    batched: bool,
    payload: Vec<u8>,
    writers: usize,
    run: Duration,
) -> Figure {
    let topic = unique("raw");
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .unwrap();
    let new = NewTopic::new(&topic, 1, TopicReplication::Fixed(1));
    admin
        .create_topics([&new], &AdminOptions::new())
        .await
        .unwrap();
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "0");
    if !batched {
        config.set("batch.num.messages", "1");
    }
    let producer: FutureProducer = config.create().unwrap();
    let payload = Arc::new(payload);
    let key = Arc::new(PartitionId::table("bench", "db", "t").to_string());
    // A first record, as the other runs warm up with one.
    send_one(&producer, &topic, &key, &payload).await;
    let figure = closed_loop(writers, run, |_| {
        let (producer, topic, payload, key) = (
            producer.clone(),
            topic.clone(),
            payload.clone(),
            key.clone(),
        );
        move || {
            let (producer, topic, payload, key) = (
                producer.clone(),
                topic.clone(),
                payload.clone(),
                key.clone(),
            );
            async move { send_one(&producer, &topic, &key, &payload).await }
        }
    })
    .await;
    admin
        .delete_topics(&[&topic], &AdminOptions::new())
        .await
        .unwrap();
    figure
}

/// Produces one record and waits for its delivery.
async fn send_one(producer: &FutureProducer, topic: &str, key: &str, payload: &[u8]) {
    let record = FutureRecord::to(topic)
        .partition(0)
        .key(key.as_bytes())
        .payload(payload);
    producer
        .send(record, Duration::from_secs(30))
        .await
        .unwrap();
}

async fn kafka_log(brokers: &str, size: usize, writers: usize, run: Duration) -> Figure {
    let log: Arc<dyn CommitLog> = Arc::new(
        KafkaLog::connect(KafkaOptions::new(brokers, unique("log")))
            .await
            .unwrap(),
    );
    let partition = PartitionId::table("bench", "db", "t");
    let event = event_of_size(size);
    log.append(&partition, vec![event.clone()]).await.unwrap();
    let figure = append_loop(log.clone(), &partition, &event, writers, run).await;
    log.delete_partition(&partition).await.unwrap();
    figure
}

fn main() {
    let args = Args::parse();
    let run = Duration::from_secs_f64(args.seconds);
    let scratch = args.dir.clone().unwrap_or_else(|| {
        let dir = PathBuf::from("/var/tmp").join(unique("dir"));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| what | record | writers | records/s | MiB/s | p50 µs | p99 µs | ratio to raw rdkafka (median of {} pairs) |",
        args.pairs
    );
    println!("|---|---|---|---|---|---|---|---|");
    for size in [200usize, 4 << 10] {
        let payload = event_of_size(size).encode_to_vec();
        for writers in [1usize, 16] {
            let (mut raws, mut batched, mut logs, mut files) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let (mut batched_ratios, mut log_ratios, mut file_ratios) =
                (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..args.pairs.max(1) {
                runtime.block_on(async {
                    let base = raw(&args.brokers, false, payload.clone(), writers, run).await;
                    let with_batches =
                        raw(&args.brokers, true, payload.clone(), writers, run).await;
                    let log = kafka_log(&args.brokers, size, writers, run).await;
                    let file = file_log(&scratch.join(unique("filelog")), size, writers, run).await;
                    batched_ratios.push(with_batches.per_second() / base.per_second());
                    log_ratios.push(log.per_second() / base.per_second());
                    file_ratios.push(file.per_second() / base.per_second());
                    raws.push(base);
                    batched.push(with_batches);
                    logs.push(log);
                    files.push(file);
                });
            }
            row("raw rdkafka", size, writers, &median(raws), None);
            row(
                "raw rdkafka, default batching",
                size,
                writers,
                &median(batched),
                Some(median_of(batched_ratios)),
            );
            row(
                "KafkaLog append",
                size,
                writers,
                &median(logs),
                Some(median_of(log_ratios)),
            );
            row(
                "FileLog append",
                size,
                writers,
                &median(files),
                Some(median_of(file_ratios)),
            );
        }
    }
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
}
