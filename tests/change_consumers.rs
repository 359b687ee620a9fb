//! Downstream consumers as users write them (issue 29), against two strata nodes on one Kafka log
//! whose writing node is killed mid-run: a confluent-kafka consumer group decoding the topics with
//! protoc's classes for events.proto, and stock SSE clients (httpx-sse, sseclient-py) following
//! `GET /v1/changes` across a dropped connection (tests/clients/change_consumer.py).
//!
//! Each must see every acknowledged append, update, delete and bulk record exactly once, in the
//! order it was acknowledged, and none of a deposed leader's void events; the Kafka consumer's
//! copy of each table must equal what the server answers.
//!
//! Runs on Kafka whatever STRATA_TEST_LOG says, and fails, never skips, without a broker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use common::{
    Client, account_with_key,
    cluster::{account_served_by, sees, two_nodes},
    eventually,
};
use serde_json::{Value, json};

/// The `id` of the row a deposed leader writes late: never acknowledged, never seen.
const ZOMBIE_ID: u64 = 999_999_999;

/// Runs tests/clients/change_consumer.py with `args`; its stdout.
fn consumer(args: &[&str]) -> String {
    let python = std::env::var("STRATA_TEST_PYTHON").expect(
        "STRATA_TEST_PYTHON is not set: run the tests with scripts/test, which prepares its venv",
    );
    let output = Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/clients/change_consumer.py"
        ))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "change_consumer.py {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    eprint!("{stdout}");
    stdout
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// What the table writer had acknowledged, in order.
#[derive(Debug, Clone, PartialEq)]
enum Acked {
    Appended { id: u64 },
    Updated { id: u64, note: String },
    Deleted { id: u64 },
}

/// Appends, updates and deletes on `orders` of `database`, one at a time, alternating between
/// the nodes, until told to stop: what was acknowledged, in order.
async fn table_writer(clients: Vec<Client>, database: String, stop: Arc<AtomicBool>) -> Vec<Acked> {
    let mut acked = Vec::new();
    let mut live: Vec<u64> = Vec::new();
    let (mut next_id, mut turn) = (0u64, 0usize);
    while !stop.load(Ordering::Acquire) {
        let client = &clients[turn % clients.len()];
        turn += 1;
        let (path, body, op) = match turn % 6 {
            4 | 5 if live.len() > 3 => {
                let id = live[turn * 7 % live.len()];
                let predicate = format!("id%20%3D%20{id}");
                if turn % 6 == 4 {
                    let note = format!("v{turn}");
                    let row = json!({"data": [{"id": id, "note": note, "n": turn}]});
                    let path = format!("/v1/update/{database}?table=orders&predicate={predicate}");
                    (path, row.to_string(), Acked::Updated { id, note })
                } else {
                    let path = format!("/v1/delete/{database}?table=orders&predicate={predicate}");
                    (path, String::new(), Acked::Deleted { id })
                }
            }
            _ => {
                next_id += 1;
                let row = json!({"data": [{"id": next_id, "note": "v0", "n": turn}]});
                let path = format!("/v1/append/{database}?table=orders");
                (path, row.to_string(), Acked::Appended { id: next_id })
            }
        };
        match client
            .try_send_json(reqwest::Method::POST, &path, &body)
            .await
        {
            Some(answer) if answer.status == 200 => {
                if let Some(matched) = answer.body.get("matched") {
                    assert_eq!(matched, 1, "{op:?}: {answer:?}");
                }
                match &op {
                    Acked::Appended { id } => live.push(*id),
                    Acked::Deleted { id } => live.retain(|l| l != id),
                    Acked::Updated { .. } => {}
                }
                acked.push(op);
            }
            // Refused or unanswered while the cluster changes: not acknowledged. It may still
            // have been applied; the copy is checked against the server's rows for that.
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    acked
}

/// Bulk requests of three records to the dataset `records`, each record with its own `n` and an
/// `_id` that comes back every 30 records (so later requests replace earlier records); the `n`s
/// acknowledged.
async fn bulk_writer(clients: Vec<common::Signed>, stop: Arc<AtomicBool>) -> BTreeSet<u64> {
    let mut acked = BTreeSet::new();
    let (mut next, mut turn) = (0u64, 0usize);
    while !stop.load(Ordering::Acquire) {
        let client = &clients[turn % clients.len()];
        turn += 1;
        let ns: Vec<u64> = (next..next + 3).collect();
        next += 3;
        let lines: Vec<Value> = ns
            .iter()
            .flat_map(|n| {
                [
                    json!({"index": {"_id": format!("r{}", n % 30)}}),
                    json!({"n": n}),
                ]
            })
            .collect();
        match client.try_send_ndjson("/records/_bulk", &lines).await {
            Some(answer) if answer.status == 200 => {
                for (n, item) in ns.iter().zip(answer.body["items"].as_array().unwrap()) {
                    if item["index"]["status"].as_u64().is_some_and(|s| s < 300) {
                        acked.insert(*n);
                    }
                }
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    acked
}

/// The events the Kafka consumer applied to `partition`, in the order it applied them.
fn applied<'a>(state: &'a Value, partition: &str) -> Vec<&'a Value> {
    state["applied"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["partition"] == partition)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kafka_and_sse_consumers_see_every_acknowledged_write_once_across_a_failover() {
    let root = tempfile::tempdir().unwrap();
    let (log_env, [dir_a, _], mut a, b) = two_nodes(root.path()).await;

    // A database whose table a leads, and a dataset of an account a serves.
    let key = account_with_key(&dir_a, "acme", None);
    let (via_a, via_b) = (a.client(&key), b.client(&key));
    let mut database = None;
    for i in 0..16 {
        let name = format!("shop{i}");
        assert_eq!(via_b.create_database(&name).await.status, 201);
        let table = json!({
            "name": "orders",
            "schema": [
                {"name": "id", "type": "int64", "nullable": false},
                {"name": "note", "type": "utf8"},
                {"name": "n", "type": "int64"}
            ]
        });
        let created = via_b.create_table(&name, &table).await;
        assert_eq!(created.status, 200, "{created:?}");
        if created.node.as_deref() == Some("a") {
            database = Some(name);
            break;
        }
    }
    let database = database.expect("none of 16 databases is served by a");
    let (tenant_account, tenant) = account_served_by(&dir_a, &a, "a").await;
    let platform = vec![
        common::Signed::new(&a, &tenant),
        common::Signed::new(&b, &tenant),
    ];

    // Writers through both nodes; a, which leads what they write, is killed meanwhile.
    let stop = Arc::new(AtomicBool::new(false));
    let table_writes = tokio::spawn(table_writer(
        vec![via_a.clone(), via_b.clone()],
        database.clone(),
        stop.clone(),
    ));
    let bulk_writes = tokio::spawn(bulk_writer(platform.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    a.kill9();
    assert!(
        eventually(20, || async { sees(&b, &["b"]).await }).await,
        "b still counts a"
    );
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    stop.store(true, Ordering::Release);
    let mut acked = table_writes.await.unwrap();
    let bulked = bulk_writes.await.unwrap();
    assert!(acked.len() > 20, "{acked:?}");
    assert!(!bulked.is_empty());

    // A deposed leader's late write lands in the table's topic; the leader writes on after it.
    let prefix = log_env
        .iter()
        .find(|(k, _)| *k == "STRATA_LOG_KAFKA_TOPIC_PREFIX")
        .map(|(_, v)| v.clone())
        .unwrap();
    let brokers = std::env::var("STRATA_TEST_KAFKA").unwrap();
    let table_partition = format!("acme/{database}/orders");
    let topic = format!("{prefix}.acme.{database}.orders");
    consumer(&["zombie", &brokers, &topic, &ZOMBIE_ID.to_string()]);
    let last = json!({"data": [{"id": 10_000_000, "note": "last", "n": 0}]});
    let appended = via_b
        .post_json(&format!("/v1/append/{database}?table=orders"), &last)
        .await;
    assert_eq!(appended.status, 200, "{appended:?}");
    acked.push(Acked::Appended { id: 10_000_000 });

    // The Kafka consumer group: a first run stops after 25 records, having committed 20; the
    // second run in the group is redelivered the other 5 and reads on to the end.
    let state_path = root.path().join("consumer.json");
    let state_arg = state_path.to_str().unwrap();
    let topics = format!(r"{prefix}\.(acme\.{database}|{tenant_account}\.default)\..*");
    consumer(&[
        "kafka",
        &brokers,
        &topics,
        "downstream",
        state_arg,
        "--stop-after",
        "25",
    ]);
    consumer(&["kafka", &brokers, &topics, "downstream", state_arg]);
    let state = read_json(&state_path);
    assert_eq!(state["runs"], 2);
    assert_eq!(
        state["duplicates"], 5,
        "the records after the last commit come again"
    );

    // Each partition's events once, in offset order.
    let mut ids = BTreeSet::new();
    let mut last_offset: BTreeMap<String, i64> = BTreeMap::new();
    for event in state["applied"].as_array().unwrap() {
        assert!(
            ids.insert(event["event_id"].as_str().unwrap().to_owned()),
            "twice: {event}"
        );
        let partition = event["partition"].as_str().unwrap().to_owned();
        let offset = event["offset"].as_i64().unwrap();
        let before = last_offset.insert(partition, offset).unwrap_or(-1);
        assert!(
            offset > before,
            "out of order: {event} after offset {before}"
        );
    }
    // The zombie is void, and only it among the table's events.
    let fenced = state["fenced"].as_array().unwrap();
    assert!(
        fenced
            .iter()
            .any(|e| e["partition"] == table_partition.as_str()),
        "the deposed leader's write was not fenced: {fenced:?}"
    );

    // Every acknowledged table write is in the table's events once, in acknowledged order.
    let events = applied(&state, &table_partition);
    let seen: Vec<Acked> = observed(&events);
    let mut cursor = seen.iter();
    for op in &acked {
        assert!(
            cursor.any(|s| s == op),
            "{op:?} was acknowledged but is not in the events after the one before it"
        );
        let times = seen.iter().filter(|s| *s == op).count();
        assert_eq!(times, 1, "{op:?} is in the events {times} times");
    }

    // The consumer's copy of the table is what the server holds; the zombie row is in neither.
    let copy = &state["tables"][&table_partition];
    let answer = via_b
        .post_json(
            &format!("/v1/query_sql/{database}"),
            &json!({"sql": "SELECT _row_id, id, note, n FROM orders"}),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let server: BTreeMap<String, Value> = answer.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| (row["_row_id"].to_string(), row.clone()))
        .collect();
    let copied: BTreeMap<String, Value> = copy
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, row)| (k.clone(), row.clone()))
        .collect();
    assert_eq!(copied, server, "the consumer's copy differs from the table");
    assert!(!copied.values().any(|row| row["id"] == ZOMBIE_ID));

    // Every acknowledged bulk record was appended once; the copy of the dataset is the server's.
    let dataset_partition = format!("{tenant_account}/default/records");
    let mut appended_ns: BTreeMap<u64, usize> = BTreeMap::new();
    for event in applied(&state, &dataset_partition) {
        if event["kind"] == "rows_appended" {
            for row in event["rows"].as_array().unwrap() {
                *appended_ns.entry(row["n"].as_u64().unwrap()).or_default() += 1;
            }
        }
    }
    for n in &bulked {
        assert_eq!(appended_ns.get(n), Some(&1), "bulk record n={n}");
    }
    let answer = platform[1]
        .send_json(
            "POST",
            "/sql",
            Some(&json!({"query": "SELECT _id, n FROM records"})),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let server: BTreeMap<String, u64> = answer.body["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row[0].as_str().unwrap().to_owned(),
                row[1].as_u64().unwrap(),
            )
        })
        .collect();
    let copied: BTreeMap<String, u64> = state["tables"][&dataset_partition]
        .as_object()
        .unwrap()
        .values()
        .map(|row| {
            (
                row["_id"].as_str().unwrap().to_owned(),
                row["n"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        copied, server,
        "the consumer's copy differs from the dataset"
    );

    // The same events over server-sent events, with two stock clients, each dropping its
    // connection halfway and resuming with Last-Event-ID: no gap, no duplicate.
    let kafka_ids = |partition: &str| -> Vec<Value> {
        applied(&state, partition)
            .iter()
            .map(|e| e["event_id"].clone())
            .collect()
    };
    let table_ids = kafka_ids(&table_partition);
    let last_table_offset = last_offset[&table_partition];
    let out = root.path().join("httpx.json");
    consumer(&[
        "sse",
        "httpx-sse",
        &b.data_url,
        &key,
        &format!("/v1/changes/{database}?table=orders"),
        &last_table_offset.to_string(),
        out.to_str().unwrap(),
        "--disconnect-after",
        &(table_ids.len() / 2).to_string(),
    ]);
    let got = read_json(&out);
    assert_eq!(got["connections"], 2);
    let sse_ids: Vec<Value> = got["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_id"].clone())
        .collect();
    assert_eq!(
        sse_ids, table_ids,
        "httpx-sse saw other events than Kafka's"
    );

    let catalog_partition = format!("acme/{database}/_catalog");
    let until = json!({
        "_catalog": last_offset[&catalog_partition],
        "orders": last_table_offset,
    });
    let out = root.path().join("sseclient.json");
    consumer(&[
        "sse",
        "sseclient-py",
        &b.data_url,
        &key,
        &format!("/v1/changes/{database}"),
        &until.to_string(),
        out.to_str().unwrap(),
        "--disconnect-after",
        &(table_ids.len() / 3).to_string(),
    ]);
    let got = read_json(&out);
    assert_eq!(got["connections"], 2);
    for partition in [&catalog_partition, &table_partition] {
        let sse_ids: Vec<Value> = got["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["partition"] == partition.as_str())
            .map(|e| e["event_id"].clone())
            .collect();
        assert_eq!(sse_ids, kafka_ids(partition), "sseclient-py on {partition}");
    }
}

/// The writes the table's applied events carry, as the writer would have acknowledged them.
fn observed(events: &[&Value]) -> Vec<Acked> {
    let mut ids_of_rows: BTreeMap<u64, u64> = BTreeMap::new();
    let mut seen = Vec::new();
    for event in events {
        match event["kind"].as_str().unwrap() {
            "rows_appended" => {
                for row in event["rows"].as_array().unwrap() {
                    let id = row["id"].as_u64().unwrap();
                    ids_of_rows.insert(row["_row_id"].as_u64().unwrap(), id);
                    seen.push(Acked::Appended { id });
                }
            }
            "rows_updated" => {
                for row in event["rows"].as_array().unwrap() {
                    seen.push(Acked::Updated {
                        id: row["id"].as_u64().unwrap(),
                        note: row["note"].as_str().unwrap().to_owned(),
                    });
                }
            }
            "rows_deleted" => {
                for row_id in event["row_ids"].as_array().unwrap() {
                    seen.push(Acked::Deleted {
                        id: ids_of_rows[&row_id.as_u64().unwrap()],
                    });
                }
            }
            _ => {}
        }
    }
    seen
}

/// docs/change-streams.md shows the consumers' code: every Python block it marks as coming from
/// tests/clients/change_consumer.py is in that file, line for line.
#[test]
fn the_documented_consumer_code_is_the_tested_code() {
    const MARK: &str = "# tests/clients/change_consumer.py";
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/change-streams.md"
    ))
    .unwrap();
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/change_consumer.py"
    ))
    .unwrap();
    let script: Vec<&str> = script.lines().collect();
    let mut blocks = 0;
    for block in doc.split("```python\n").skip(1) {
        let block = block.split("```").next().unwrap();
        let Some(code) = block.strip_prefix(MARK) else {
            continue;
        };
        let lines: Vec<&str> = code.trim_start_matches('\n').lines().collect();
        assert!(
            script
                .windows(lines.len())
                .any(|window| window == lines.as_slice()),
            "docs/change-streams.md shows code that tests/clients/change_consumer.py does not have:\n{}",
            lines.join("\n")
        );
        blocks += 1;
    }
    assert!(
        blocks >= 6,
        "only {blocks} marked blocks in docs/change-streams.md"
    );
}
