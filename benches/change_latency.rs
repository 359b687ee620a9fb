//! How soon a downstream consumer sees a write (issue 29, point 5): end-to-end latency from an
//! append to its receipt by a Kafka consumer of the table's topic and by a change-stream client
//! (`GET /v1/changes`, server-sent events), against a raw rdkafka producer and consumer on the
//! same broker in the same run.
//!
//! One release server on a Kafka-backed log. Each sample is one append of one row, sent alone
//! (closed loop): the next is sent once both consumers have the previous one.
//! - `raw producer → consumer` (the baseline): a FutureProducer with KafkaLog's settings
//!   (idempotent, acks=all, linger 0, one record per batch) sends a record of the size of
//!   strata's record for one such row to a topic of its own, and awaits its delivery; a consumer
//!   assigned to the topic (the consumer settings strata's log reader uses: `fetch.wait.max.ms`
//!   10) receives it. Its send → receipt time is the baseline of the ratio columns.
//! - `strata append → Kafka consumer`: `POST /v1/append` to the receipt, by a consumer with the
//!   same settings assigned to the table's topic, of the record that carries the row.
//! - `strata append → SSE`: the same append to the receipt of its event by a client of
//!   `GET /v1/changes/bench?table=events`.
//! - `strata append → acknowledged`, and `acknowledged → ...`: the append's own answer, and how
//!   long after it the consumers had the event (negative: before the answer arrived).
//!
//! Runs alternate (`--pairs`); each figure is the median over pairs, and each ratio the median of
//! the per-pair ratios to the raw path's figure.
//!
//! ```sh
//! port=19092; scripts/kafka-broker start $port /tmp/tansu.log
//! cargo bench -p strata --bench change_latency -- --brokers 127.0.0.1:$port
//! ```

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::zombie_processes
)]

#[allow(dead_code)]
mod generator;
#[allow(dead_code)]
mod server;

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use clap::Parser;
use futures::StreamExt;
use prost::Message as _;
use rdkafka::{
    ClientConfig, Message, Offset, TopicPartitionList,
    admin::{AdminClient, AdminOptions, NewTopic, TopicReplication},
    client::DefaultClientContext,
    consumer::{Consumer, StreamConsumer},
    producer::{FutureProducer, FutureRecord},
};
use serde_json::{Value, json};
use server::Server;
use strata_log::{Envelope, PartitionId, envelope::Body};
use tokio::sync::{mpsc, oneshot};

#[derive(Parser)]
struct Args {
    /// The broker (host:port) [env: STRATA_TEST_KAFKA]
    #[arg(long, env = "STRATA_TEST_KAFKA")]
    brokers: String,
    /// Appends (and raw records) per run.
    #[arg(long, default_value_t = 400)]
    samples: usize,
    /// Alternating runs of each path.
    #[arg(long, default_value_t = 3)]
    pairs: usize,
    /// The server's data directory (default: one under /var/tmp, removed afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long, hide = true)]
    bench: bool,
}

/// A name no earlier run used.
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("bench-{what}-{}-{nanos}", std::process::id())
}

/// A consumer with the settings strata's own log reader uses, assigned to `topic` from its
/// current end (read off the broker, so that nothing appended after this call is missed).
fn consumer_at_end(brokers: &str, topic: &str) -> StreamConsumer {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", unique("reader"))
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "10")
        .create()
        .unwrap();
    let (_, end) = consumer
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Offset(end))
        .unwrap();
    consumer.assign(&assignment).unwrap();
    consumer
}

/// Latencies of one run, in microseconds, signed.
#[derive(Default)]
struct Run {
    acked: Vec<i64>,
    kafka: Vec<i64>,
    sse: Vec<i64>,
    kafka_after_ack: Vec<i64>,
    sse_after_ack: Vec<i64>,
}

fn quantile(values: &[i64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let at = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[at] as f64
}

fn micros(from: Instant, to: Instant) -> i64 {
    if to >= from {
        to.duration_since(from).as_micros() as i64
    } else {
        -(from.duration_since(to).as_micros() as i64)
    }
}

/// What a consumer task reports: the first row id of an append event, when it arrived.
type Receipts = mpsc::UnboundedReceiver<(u64, Instant)>;

/// Follows the table's topic, reporting each append's first row id as it arrives; the size of
/// the first record it sees goes to `size`.
fn follow_topic(brokers: &str, topic: &str, size: oneshot::Sender<usize>) -> Receipts {
    let consumer = consumer_at_end(brokers, topic);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = consumer.stream();
        let mut size = Some(size);
        while let Some(Ok(message)) = stream.next().await {
            let at = Instant::now();
            let payload = message.payload().unwrap_or_default();
            if let Some(size) = size.take() {
                let _ = size.send(payload.len());
            }
            if let Ok(Envelope {
                body: Some(Body::RowsAppended(rows)),
                ..
            }) = Envelope::decode(payload)
                && tx.send((rows.first_row_id, at)).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// Follows `GET /v1/changes/bench?table=events` from the partition's start, reporting each
/// append's first row id as its event arrives.
async fn follow_sse(server: &Server) -> Receipts {
    let response = reqwest::Client::new()
        .get(format!("{}/v1/changes/bench?table=events", server.url))
        .bearer_auth(&server.key)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut body = response.bytes_stream();
        let mut buffer = Vec::new();
        while let Some(Ok(chunk)) = body.next().await {
            let at = Instant::now();
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = buffer.drain(..end + 2).collect();
                let block = String::from_utf8_lossy(&block);
                let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue;
                };
                let event: Value = serde_json::from_str(data).unwrap();
                if event["kind"] == "rows_appended" {
                    let first = event["body"]["first_row_id"].as_u64().unwrap();
                    if tx.send((first, at)).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// Waits for the receipt of `row_id`, skipping earlier ones.
async fn receipt(receipts: &mut Receipts, row_id: u64, what: &str) -> Instant {
    loop {
        let (first, at) = tokio::time::timeout(Duration::from_secs(30), receipts.recv())
            .await
            .unwrap_or_else(|_| panic!("{what}: no receipt of row {row_id} within 30 s"))
            .unwrap_or_else(|| panic!("{what}: the consumer stopped"));
        if first == row_id {
            return at;
        }
        assert!(first < row_id, "row {row_id} was skipped (got {first})");
    }
}

/// One run of `samples` appends through strata.
async fn strata_run(
    server: &Server,
    http: &reqwest::Client,
    kafka: &mut Receipts,
    sse: &mut Receipts,
    samples: usize,
) -> Run {
    let mut run = Run::default();
    for seq in 0..samples {
        let sent = Instant::now();
        let answer = server
            .post(
                http,
                "/v1/append/bench?table=events",
                &json!({"data": [{"seq": seq, "note": "a change a consumer waits for"}]}),
            )
            .await;
        let acked = Instant::now();
        let row_id = answer["data"][0]["_row_id"].as_u64().unwrap();
        let (in_kafka, in_sse) = (
            receipt(kafka, row_id, "Kafka consumer").await,
            receipt(sse, row_id, "SSE client").await,
        );
        run.acked.push(micros(sent, acked));
        run.kafka.push(micros(sent, in_kafka));
        run.sse.push(micros(sent, in_sse));
        run.kafka_after_ack.push(micros(acked, in_kafka));
        run.sse_after_ack.push(micros(acked, in_sse));
    }
    run
}

/// One run of `samples` records of `size` bytes through a raw producer and consumer.
async fn raw_run(brokers: &str, size: usize, samples: usize) -> Run {
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
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "0")
        .set("batch.num.messages", "1")
        .create()
        .unwrap();
    let payload = vec![b'x'; size];
    let send = |key: &'static [u8]| {
        producer.send(
            FutureRecord::to(&topic)
                .partition(0)
                .key(key)
                .payload(&payload),
            Duration::from_secs(30),
        )
    };
    // The topic exists and has a record before the consumer is assigned to its end.
    send(b"warm").await.unwrap();
    let consumer = consumer_at_end(brokers, &topic);
    let mut stream = consumer.stream();
    let mut run = Run::default();
    for _ in 0..samples {
        let sent = Instant::now();
        let offset = send(b"bench/bench/events").await.unwrap().offset;
        let acked = Instant::now();
        let received = loop {
            let message = tokio::time::timeout(Duration::from_secs(30), stream.next())
                .await
                .expect("no receipt within 30 s")
                .unwrap()
                .unwrap();
            if message.offset() == offset {
                break Instant::now();
            }
        };
        run.acked.push(micros(sent, acked));
        run.kafka.push(micros(sent, received));
        run.kafka_after_ack.push(micros(acked, received));
    }
    // The topic is left on the broker: librdkafka 2.x crashed in a metadata refresh
    // (`rd_kafka_metadata_cache_find`) after tansu deleted a topic these clients had known.
    run
}

/// Picks one figure's samples out of a pair of runs (raw, strata).
type Pick = dyn Fn(&(Run, Run)) -> &Vec<i64>;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let args = Args::parse();
    server::in_scratch("change-latency", args.dir.as_deref(), |dir| async move {
        let prefix = unique("log");
        let server = Server::start_with(
            &dir,
            &[],
            &[
                ("STRATA_LOG_BACKEND", "kafka".to_owned()),
                ("STRATA_LOG_KAFKA_BROKERS", args.brokers.clone()),
                ("STRATA_LOG_KAFKA_TOPIC_PREFIX", prefix.clone()),
            ],
        );
        let http = reqwest::Client::new();
        server
            .post(&http, "/v1/databases", &json!({"name": "bench"}))
            .await;
        let table = json!({"name": "events", "schema": [
            {"name": "seq", "type": "int64", "nullable": false},
            {"name": "note", "type": "utf8"}
        ]});
        server.post(&http, "/v1/create_table/bench", &table).await;
        // The table's topic holds an event before a consumer reads its end.
        server
            .post(
                &http,
                "/v1/append/bench?table=events",
                &json!({"data": [{"seq": -1}]}),
            )
            .await;
        let topic =
            strata_log::topic_name(&prefix, &PartitionId::table("bench", "bench", "events"));
        let (size_tx, size_rx) = oneshot::channel();
        let mut kafka = follow_topic(&args.brokers, &topic, size_tx);
        let mut sse = follow_sse(&server).await;
        // A first append, received by both, sizes the raw path's records.
        strata_run(&server, &http, &mut kafka, &mut sse, 20).await;
        let size = size_rx.await.unwrap();

        let mut pairs: Vec<(Run, Run)> = Vec::new();
        for _ in 0..args.pairs.max(1) {
            let raw = raw_run(&args.brokers, size, args.samples).await;
            let strata = strata_run(&server, &http, &mut kafka, &mut sse, args.samples).await;
            pairs.push((raw, strata));
        }

        println!(
            "{} samples a run, {} pairs, records of {size} bytes; figures are medians over pairs",
            args.samples, args.pairs
        );
        println!("| path | p50 ms | p99 ms | p50 ratio to raw | p99 ratio to raw |");
        println!("|---|---|---|---|---|");
        let figure =
            |pick: &Pick, q: f64| median(pairs.iter().map(|p| quantile(pick(p), q)).collect());
        let ratio = |pick: &Pick, q: f64| {
            median(
                pairs
                    .iter()
                    .map(|p| quantile(pick(p), q) / quantile(&p.0.kafka, q))
                    .collect(),
            )
        };
        let rows: [(&str, &Pick, bool); 8] = [
            ("raw producer → consumer (baseline)", &|p| &p.0.kafka, true),
            ("raw producer → delivered", &|p| &p.0.acked, true),
            ("raw delivered → consumer", &|p| &p.0.kafka_after_ack, false),
            ("strata append → Kafka consumer", &|p| &p.1.kafka, true),
            ("strata append → SSE client", &|p| &p.1.sse, true),
            ("strata append → acknowledged", &|p| &p.1.acked, true),
            (
                "strata acknowledged → Kafka consumer",
                &|p| &p.1.kafka_after_ack,
                false,
            ),
            (
                "strata acknowledged → SSE client",
                &|p| &p.1.sse_after_ack,
                false,
            ),
        ];
        for (name, pick, ratios) in rows {
            let (p50, p99) = (figure(pick, 0.5), figure(pick, 0.99));
            let (r50, r99) = if ratios {
                (
                    format!("{:.2}", ratio(pick, 0.5)),
                    format!("{:.2}", ratio(pick, 0.99)),
                )
            } else {
                ("".to_owned(), "".to_owned())
            };
            println!(
                "| {name} | {:.2} | {:.2} | {r50} | {r99} |",
                p50 / 1000.0,
                p99 / 1000.0
            );
        }
    });
}
