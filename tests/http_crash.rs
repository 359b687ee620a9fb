//! Crash accounting across the API (issue 28, point 3), against the real binary: clients write
//! through every write path while the server is killed under them (kill -9) and restarted. Each
//! client books what it was told: after the restart every acknowledged write is there exactly
//! once, with what it replaced or deleted gone; a request that got no answer landed whole or not
//! at all; and `strata-replay verify`, run on what the dead server left, finds the log and the
//! projections in agreement. scripts/test runs this file on the file log and again on a
//! Kafka-protocol broker.
//!
//! The paths: data-plane append, update and delete; NDJSON bulk with explicit and generated ids,
//! single records; metrics text and remote write, SQL upserts, deletes by query; roles, users and
//! monitors; an import from the local PostgreSQL, killed twice mid-import.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Answer, Client, Credentials, Server, Signed, account_with_key, root_user};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

const ROUNDS: usize = 2;
/// How long the writers write before the server is killed under them.
const WRITING: Duration = Duration::from_millis(1500);
/// Small memtables, so that segments are flushed while the writers write.
const ARGS: [&str; 4] = [
    "--set",
    "tables.flush_rows=100",
    "--set",
    "server.write_wait_ms=1000",
];
/// The value a write gives to a key it replaces (`REPLACED + n` for the writer's n-th step):
/// never a value a key was created with.
const REPLACED: i64 = 1_000_000;

/// A write's effects: each key it touches (a row's, a record's, a role's ...) and the value the
/// key holds after it, None when it is gone.
type Effects = Vec<(String, Option<i64>)>;

/// What keys hold after a restart: every value of each (two values: a write applied twice).
type Found = BTreeMap<String, Vec<i64>>;

/// What the clients of one test were told.
#[derive(Default)]
struct Ledger {
    /// The value each key must hold, by the acknowledged writes.
    expected: BTreeMap<String, Option<i64>>,
    /// The writes that got no answer (the server died under them), by kind.
    unanswered: Vec<(&'static str, Effects)>,
    /// Acknowledged writes, by kind.
    acked: BTreeMap<&'static str, usize>,
}

type Books = Arc<Mutex<Ledger>>;

impl Ledger {
    /// Checks what a restarted server holds. An unanswered write must have landed whole or not
    /// at all; it is settled by what landed of it.
    fn check(&mut self, found: &Found) {
        for (key, values) in found {
            assert_eq!(values.len(), 1, "{key} is there more than once: {values:?}");
        }
        let holds = |key: &str| found.get(key).map(|values| values[0]);
        for (kind, effects) in std::mem::take(&mut self.unanswered) {
            let landed = effects.iter().all(|(key, value)| holds(key) == *value);
            let not_at_all = effects
                .iter()
                .all(|(key, _)| holds(key) == self.expected.get(key).copied().flatten());
            let held: Vec<_> = effects.iter().map(|(key, _)| holds(key)).collect();
            assert!(
                landed || not_at_all,
                "an unanswered {kind} was half applied: {effects:?}, found {held:?}"
            );
            if landed {
                self.expected.extend(effects);
            }
        }
        for (key, value) in &self.expected {
            assert_eq!(
                holds(key),
                *value,
                "acknowledged writes left {key} at {value:?}"
            );
        }
        for key in found.keys() {
            assert!(
                self.expected.contains_key(key),
                "{key} is there, yet no write the clients sent made it"
            );
        }
        eprintln!("all there of the writes acknowledged: {:?}", self.acked);
    }

    /// Each kind of write was acknowledged at least `least` times.
    fn made_progress(&self, kinds: &[&str], least: usize) {
        for kind in kinds {
            let acked = self.acked.get(kind).copied().unwrap_or(0);
            assert!(
                acked >= least,
                "{acked} {kind} acknowledged: {:?}",
                self.acked
            );
        }
    }
}

/// Books a write of `kind` by its answer: acknowledged (`ok` must hold of the answer), its
/// `effects` hold, and the answer is returned; unanswered, or refused as transient (409, 429,
/// 503: a loaded machine, a restart still activating), it may or may not have landed, and None
/// says the writer stops.
fn book(
    books: &Books,
    kind: &'static str,
    effects: Effects,
    answer: Option<Answer>,
    ok: impl FnOnce(&Answer) -> bool,
) -> Option<Answer> {
    let answer = answer.filter(|answer| ![409, 429, 503].contains(&answer.status));
    let Some(answer) = answer else {
        books.lock().unwrap().unanswered.push((kind, effects));
        return None;
    };
    assert!(ok(&answer), "{kind} of {effects:?}: {answer:?}");
    let mut ledger = books.lock().unwrap();
    *ledger.acked.entry(kind).or_default() += 1;
    ledger.expected.extend(effects);
    Some(answer)
}

fn success(answer: &Answer) -> bool {
    (200..300).contains(&answer.status)
}

/// A bulk answer with no failed item.
fn bulk_ok(answer: &Answer) -> bool {
    answer.status == 200 && answer.body["errors"] == false
}

/// Kills the server under `writers` (kill -9), waits for each to stop at its first unanswered
/// request, checks that the log and the projections the dead server left agree, and starts the
/// server again.
async fn crash(server: &mut Server, args: &[&str], writers: Vec<JoinHandle<()>>) {
    server.kill9();
    for writer in writers {
        writer.await.unwrap();
    }
    verify(&server.dir);
    *server = Server::start(&server.dir, args);
}

/// `strata-replay verify`, with no server running.
fn verify(dir: &Path) {
    let output = common::replay(dir, &["verify"]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{said}");
    assert!(said.contains(" 0 mismatched"), "{said}");
}

const JSON: [(&str, &str); 2] = [
    ("content-type", "application/json"),
    ("accept", "application/json"),
];

/// A signed platform request that may meet a dead server: its answer, None when none came.
async fn try_signed(
    platform: &Signed,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Option<Answer> {
    let signed = platform.sign(method, path, headers, &body, chrono::Utc::now());
    platform.try_send_raw(method, path, &signed, body).await
}

async fn try_json(platform: &Signed, method: &str, path: &str, body: &Value) -> Option<Answer> {
    let body = match body {
        Value::Null => Vec::new(),
        body => body.to_string().into_bytes(),
    };
    try_signed(platform, method, path, &JSON, body).await
}

async fn try_bulk(platform: &Signed, dataset: &str, lines: &[Value]) -> Option<Answer> {
    platform
        .try_send_ndjson(&format!("/{dataset}/_bulk"), lines)
        .await
}

/// Adds rows of `[key, value]` to `found`.
fn tally(found: &mut Found, rows: &[Value]) {
    for row in rows {
        let key = row[0].as_str().unwrap().to_owned();
        let value = row[1].as_f64().unwrap() as i64;
        found.entry(key).or_default().push(value);
    }
}

/// Adds the rows of a platform SQL query of `[key, value]` to `found`.
async fn tally_sql(found: &mut Found, platform: &Signed, query: &str) {
    let answer = platform
        .send_json("POST", "/sql", Some(&json!({ "query": query })))
        .await;
    assert_eq!(answer.status, 200, "{query}: {answer:?}");
    tally(found, answer.body["rows"].as_array().unwrap());
}

/// A server on a new data directory, and the root user of its account `acme`.
fn start(args: &[&str]) -> (tempfile::TempDir, Server, Credentials) {
    let dir = tempfile::tempdir().unwrap();
    let root = root_user(dir.path(), "acme");
    let server = Server::start(dir.path(), args);
    (dir, server, root)
}

/// Creates dataset `name` with these fields declared.
async fn dataset(platform: &Signed, name: &str, properties: Value) {
    let body = json!({"mappings": {"properties": properties}});
    let made = platform
        .send_json("PUT", &format!("/{name}"), Some(&body))
        .await;
    assert_eq!(made.status, 200, "{made:?}");
}

/// A data-plane writer on `table` of database `db` (columns `k`, `v`): at each step n, appends
/// three rows, then updates a row of the step before and deletes another of it.
async fn data_plane(client: Client, table: String, name: String, books: Books) {
    let key = |n: i64, i: i64| format!("p-{name}n{n}-{i}");
    let path = |op: &str, key: Option<&str>| match key {
        Some(key) => format!("/v1/{op}/db?table={table}&predicate=k%20%3D%20%27{key}%27"),
        None => format!("/v1/{op}/db?table={table}"),
    };
    for n in 0i64.. {
        let effects: Effects = (0..3).map(|i| (key(n, i), Some(n * 10 + i))).collect();
        let rows: Vec<Value> = effects
            .iter()
            .map(|(k, v)| json!({"k": k, "v": v}))
            .collect();
        let body = json!({ "data": rows }).to_string();
        let sent = client
            .try_send_json(Method::POST, &path("append", None), &body)
            .await;
        if book(&books, "append", effects, sent, |a| a.status == 200).is_none() {
            return;
        }
        if n == 0 {
            continue;
        }
        let (updated, deleted) = (key(n - 1, 0), key(n - 1, 1));
        let body = json!({"data": [{"k": updated, "v": REPLACED + n}]}).to_string();
        let sent = client
            .try_send_json(Method::POST, &path("update", Some(&updated)), &body)
            .await;
        let effects = vec![(updated, Some(REPLACED + n))];
        if book(&books, "update", effects, sent, |a| a.body["matched"] == 1).is_none() {
            return;
        }
        let sent = client
            .try_send_json(Method::POST, &path("delete", Some(&deleted)), "")
            .await;
        if book(&books, "delete", vec![(deleted, None)], sent, |a| {
            a.body["n_tombstoned"] == 1
        })
        .is_none()
        {
            return;
        }
    }
}

/// An NDJSON bulk writer on `dataset` with explicit ids: each request indexes eight new records
/// (`v`), replaces one of the request before and deletes another of it.
async fn bulk_with_ids(platform: Signed, dataset: &'static str, name: String, books: Books) {
    let id = |n: i64, i: i64| format!("x-{name}n{n}-{i}");
    for n in 0i64.. {
        let mut effects: Effects = (0..8).map(|i| (id(n, i), Some(n * 10 + i))).collect();
        if n > 0 {
            effects.push((id(n - 1, 0), Some(REPLACED + n)));
            effects.push((id(n - 1, 1), None));
        }
        let lines: Vec<Value> = effects
            .iter()
            .flat_map(|(id, v)| match v {
                Some(v) => vec![json!({"index": {"_id": id}}), json!({ "v": v })],
                None => vec![json!({"delete": {"_id": id}})],
            })
            .collect();
        let sent = try_bulk(&platform, dataset, &lines).await;
        if book(&books, "bulk with ids", effects, sent, bulk_ok).is_none() {
            return;
        }
    }
}

/// An NDJSON bulk writer on `records` with generated ids: each record has a unique `mark`, the
/// key it is found by.
async fn bulk_without_ids(platform: Signed, name: String, books: Books) {
    for n in 0i64.. {
        let effects: Effects = (0..8)
            .map(|i| (format!("a-{name}n{n}-{i}"), Some(n * 10 + i)))
            .collect();
        let lines: Vec<Value> = effects
            .iter()
            .flat_map(|(mark, v)| [json!({"index": {}}), json!({"mark": mark, "v": v})])
            .collect();
        let sent = try_bulk(&platform, "records", &lines).await;
        if book(&books, "bulk without ids", effects, sent, bulk_ok).is_none() {
            return;
        }
    }
}

/// A writer of single records of `records`: at each step n, puts a new record, replaces the one
/// of the step before and deletes the one of the step before that.
async fn documents(platform: Signed, name: String, books: Books) {
    let path = |n: i64| format!("/records/_doc/d-{name}n{n}");
    for n in 0i64.. {
        let mut steps = vec![("PUT", n, Some(n), 201)];
        if n > 0 {
            steps.push(("PUT", n - 1, Some(REPLACED + n), 200));
        }
        if n > 1 {
            steps.push(("DELETE", n - 2, None, 200));
        }
        for (method, of, value, status) in steps {
            let path = path(of);
            let body = value.map_or(Value::Null, |v| json!({ "v": v }));
            let sent = try_json(&platform, method, &path, &body).await;
            let effects = vec![(format!("d-{name}n{of}"), value)];
            if book(&books, "document", effects, sent, |a| a.status == status).is_none() {
                return;
            }
        }
    }
}

/// Every key of the data-plane tables and of dataset `records`.
async fn rows_and_records(server: &Server, key: &str, root: &Credentials) -> Found {
    let mut found = Found::new();
    let client = server.client(key);
    for c in 0..3 {
        let query = json!({"sql": format!("SELECT k, v FROM t{c}")});
        let answer = client.post_json("/v1/query_sql/db", &query).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let rows: Vec<Value> = answer.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| json!([row["k"], row["v"]]))
            .collect();
        tally(&mut found, &rows);
    }
    let query = "SELECT coalesce(mark, _id), v FROM records";
    tally_sql(&mut found, &Signed::new(server, root), query).await;
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn data_plane_writes_bulk_and_single_records_survive_kill_9() {
    let (dir, mut server, root) = start(&ARGS);
    let key = account_with_key(dir.path(), "acme", None);
    let client = server.client(&key);
    assert_eq!(client.create_database("db").await.status, 201);
    for c in 0..3 {
        let table = json!({"name": format!("t{c}"), "schema": [
            {"name": "k", "type": "utf8", "nullable": false},
            {"name": "v", "type": "int64", "nullable": false}]});
        assert_eq!(client.create_table("db", &table).await.status, 200);
    }
    let properties = json!({"mark": {"type": "keyword"}, "v": {"type": "long"}});
    dataset(&Signed::new(&server, &root), "records", properties).await;
    let books = Books::default();
    for round in 0..ROUNDS {
        let platform = Signed::new(&server, &root);
        let mut writers = Vec::new();
        for c in 0..3 {
            let (table, name) = (format!("t{c}"), format!("r{round}c{c}"));
            let writer = data_plane(server.client(&key), table, name, books.clone());
            writers.push(tokio::spawn(writer));
        }
        for c in 0..2 {
            let name = format!("r{round}c{c}");
            let writer = bulk_with_ids(platform.clone(), "records", name.clone(), books.clone());
            writers.push(tokio::spawn(writer));
            writers.push(tokio::spawn(documents(
                platform.clone(),
                name,
                books.clone(),
            )));
        }
        let writer = bulk_without_ids(platform.clone(), format!("r{round}"), books.clone());
        writers.push(tokio::spawn(writer));
        tokio::time::sleep(WRITING).await;
        crash(&mut server, &ARGS, writers).await;
        let found = rows_and_records(&server, &key, &root).await;
        books.lock().unwrap().check(&found);
    }
    let kinds = [
        "append",
        "update",
        "delete",
        "bulk with ids",
        "bulk without ids",
        "document",
    ];
    books.lock().unwrap().made_progress(&kinds, 3);
}

/// A writer of metrics text to `crash-metrics`: each request ten samples of the series of
/// `writer="<name>"`, each at a time of its own, the key it is found by.
async fn metrics_text(platform: Signed, name: String, start_ms: i64, books: Books) {
    let headers = [("content-type", "text/plain; version=0.0.4")];
    for n in 0i64.. {
        let mut body = String::from("# TYPE crash_total counter\n");
        let mut effects = Effects::new();
        for i in 0..10 {
            let (at, v) = (start_ms + n * 10 + i, n * 10 + i);
            body.push_str(&format!("crash_total{{writer=\"{name}\"}} {v} {at}\n"));
            effects.push((format!("{name}@{at}"), Some(v)));
        }
        let sent = try_signed(
            &platform,
            "POST",
            "/crash-metrics/metrics",
            &headers,
            body.into_bytes(),
        )
        .await;
        if book(&books, "metrics text", effects, sent, |a| {
            a.body["indexed"] == 10
        })
        .is_none()
        {
            return;
        }
    }
}

/// A Prometheus remote-write writer to `crash-metrics`, keyed as [`metrics_text`]'s.
async fn remote_write(platform: Signed, name: String, start_ms: i64, books: Books) {
    let headers = [
        ("content-type", "application/x-protobuf"),
        ("content-encoding", "snappy"),
        ("x-prometheus-remote-write-version", "0.1.0"),
    ];
    let labels = vec![
        ("__name__".to_owned(), "crash_total".to_owned()),
        ("writer".to_owned(), name.clone()),
    ];
    for n in 0i64.. {
        let samples: Vec<(i64, f64)> = (0..10)
            .map(|i| (start_ms + n * 10 + i, (n * 10 + i) as f64))
            .collect();
        let effects = samples
            .iter()
            .map(|(at, v)| (format!("{name}@{at}"), Some(*v as i64)))
            .collect();
        let body = strata::remote_write::encode(&[(labels.clone(), samples)]);
        let path = "/api/v1/write?index=crash-metrics";
        let sent = try_signed(&platform, "POST", path, &headers, body).await;
        if book(&books, "remote write", effects, sent, |a| a.status == 204).is_none() {
            return;
        }
    }
}

/// A SQL writer of `upserts`: each statement inserts three records and, in the same statement,
/// sets `v` of one of the statement before (`ON CONFLICT (_id) DO UPDATE`).
async fn upserts(platform: Signed, name: String, books: Books) {
    let id = |n: i64, i: i64| format!("s-{name}n{n}-{i}");
    for n in 0i64.. {
        let mut effects: Effects = (0..3).map(|i| (id(n, i), Some(n * 10 + i))).collect();
        if n > 0 {
            effects.push((id(n - 1, 0), Some(REPLACED + n)));
        }
        let values: Vec<String> = effects
            .iter()
            .map(|(id, v)| format!("('{id}', {})", v.unwrap()))
            .collect();
        let statement = format!(
            "INSERT INTO upserts (_id, v) VALUES {} ON CONFLICT (_id) DO UPDATE SET v = EXCLUDED.v",
            values.join(", ")
        );
        let rows = effects.len();
        let sent = try_json(&platform, "POST", "/sql", &json!({ "query": statement })).await;
        if book(&books, "sql upsert", effects, sent, |a| {
            a.body["rows_affected"] == rows
        })
        .is_none()
        {
            return;
        }
    }
}

/// A writer of `purged`: at each step n, a bulk of six records of `batch` n, then a delete by
/// query of batch n - 1.
async fn deletes_by_query(platform: Signed, name: String, books: Books) {
    let batch = |n: i64| format!("{name}n{n}");
    let ids = |n: i64| {
        let name = &name;
        (0..6).map(move |i| (format!("q-{name}n{n}-{i}"), n * 10 + i))
    };
    for n in 0i64.. {
        let lines: Vec<Value> = ids(n)
            .flat_map(|(id, v)| {
                [
                    json!({"index": {"_id": id}}),
                    json!({"batch": batch(n), "v": v}),
                ]
            })
            .collect();
        let effects = ids(n).map(|(id, v)| (id, Some(v))).collect();
        let sent = try_bulk(&platform, "purged", &lines).await;
        if book(&books, "bulk to purge", effects, sent, bulk_ok).is_none() {
            return;
        }
        if n == 0 {
            continue;
        }
        let query = json!({"query": {"term": {"batch": batch(n - 1)}}});
        let sent = try_json(&platform, "POST", "/purged/_delete_by_query", &query).await;
        let effects = ids(n - 1).map(|(id, _)| (id, None)).collect();
        if book(&books, "delete by query", effects, sent, |a| {
            a.body["deleted"] == 6
        })
        .is_none()
        {
            return;
        }
    }
}

/// Every sample of `crash-metrics` (as `<writer>@<ms>`) and every record of `upserts` and
/// `purged`.
async fn samples_and_records(platform: &Signed) -> Found {
    let mut found = Found::new();
    for query in [
        "SELECT concat(writer, '@', CAST(\"@timestamp\" AS BIGINT)), value FROM \"crash-metrics\"",
        "SELECT _id, v FROM upserts",
        "SELECT _id, v FROM purged",
    ] {
        tally_sql(&mut found, platform, query).await;
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_sql_upserts_and_deletes_by_query_survive_kill_9() {
    let (_dir, mut server, root) = start(&ARGS);
    let platform = Signed::new(&server, &root);
    dataset(&platform, "upserts", json!({"v": {"type": "long"}})).await;
    let properties = json!({"batch": {"type": "keyword"}, "v": {"type": "long"}});
    dataset(&platform, "purged", properties).await;
    let made = platform.send("PUT", "/crash-metrics", None).await;
    assert_eq!(made.status, 200, "{made:?}");
    let start_ms = chrono::Utc::now().timestamp_millis() - 3_600_000;
    let books = Books::default();
    for round in 0..ROUNDS {
        let platform = Signed::new(&server, &root);
        let mut writers = Vec::new();
        for c in 0..2 {
            let name = format!("r{round}c{c}");
            let writer = metrics_text(platform.clone(), name.clone(), start_ms, books.clone());
            writers.push(tokio::spawn(writer));
            writers.push(tokio::spawn(upserts(
                platform.clone(),
                name.clone(),
                books.clone(),
            )));
            let writer = deletes_by_query(platform.clone(), name, books.clone());
            writers.push(tokio::spawn(writer));
        }
        let name = format!("r{round}w");
        let writer = remote_write(platform.clone(), name, start_ms, books.clone());
        writers.push(tokio::spawn(writer));
        tokio::time::sleep(WRITING).await;
        crash(&mut server, &ARGS, writers).await;
        let found = samples_and_records(&Signed::new(&server, &root)).await;
        books.lock().unwrap().check(&found);
    }
    let kinds = [
        "metrics text",
        "remote write",
        "sql upsert",
        "bulk to purge",
        "delete by query",
    ];
    books.lock().unwrap().made_progress(&kinds, 3);
}

/// A writer of governance and alerting documents of one kind (`role`, `user` or `monitor`): at
/// each step n, creates `<kind>-<name>n<n>`, replaces (a monitor: patches) the one of the step
/// before and deletes the one of the step before that. Each document holds the number it is
/// found by; users' keys go to `keys`.
async fn governance(
    platform: Signed,
    kind: &'static str,
    name: String,
    books: Books,
    keys: Arc<Mutex<BTreeMap<String, Credentials>>>,
) {
    let id = |n: i64| format!("{kind}-{name}n{n}");
    let document = |n: i64, v: i64, create: bool| match (kind, create) {
        ("role", _) => json!({"Version": "2025-01-01", "Permissions": [
            {"ResourceType": "record", "Actions": ["read"], "Resources": [format!("ds-{v}")]}]}),
        ("user", true) => json!({"Version": "2025-01-01",
            "Password": "correct-horse-battery", "Roles": [format!("r{v}")]}),
        ("user", false) => json!({"Version": "2025-01-01", "Roles": [format!("r{v}")]}),
        (_, true) => json!({"_id": id(n), "name": format!("v{v}"), "enabled": false,
            "schedule": {"cron": {"expression": "0 0 * * * *", "timezone": "UTC"}},
            "query": {"type": "querydsl", "datasets": ["watched"],
                      "body": {"query": {"match_all": {}}, "size": 1}},
            "triggers": [{"name": "any", "severity": 1, "actions": [],
                          "condition": {"type": "count_greater_than", "threshold": 0}}]}),
        (_, false) => json!({ "name": format!("v{v}") }),
    };
    let path = |n: i64| format!("/{kind}/{}", id(n));
    let (create, replace) = match kind {
        "monitor" => ("POST", "PATCH"),
        _ => ("PUT", "PUT"),
    };
    for n in 0i64.. {
        let made = try_json(
            &platform,
            create,
            &if kind == "monitor" {
                "/monitor".to_owned()
            } else {
                path(n)
            },
            &document(n, n, true),
        )
        .await;
        let Some(made) = book(&books, kind, vec![(id(n), Some(n))], made, success) else {
            return;
        };
        if kind == "user" {
            let key = |name: &str| made.body[name].as_str().unwrap().to_owned();
            let credentials = Credentials {
                access_key: key("access_key"),
                secret_key: key("secret_key"),
            };
            keys.lock().unwrap().insert(id(n), credentials);
        }
        let mut changes = Vec::new();
        if n > 0 {
            let body = document(n - 1, REPLACED + n, false);
            changes.push((replace, n - 1, body, Some(REPLACED + n)));
        }
        if n > 1 {
            changes.push(("DELETE", n - 2, Value::Null, None));
        }
        for (method, of, body, value) in changes {
            let sent = try_json(&platform, method, &path(of), &body).await;
            if book(&books, kind, vec![(id(of), value)], sent, success).is_none() {
                return;
            }
        }
    }
}

/// The number in a document's text (`ds-12`, `r12`, `v12`): 12.
fn number(text: &Value) -> Value {
    let digits = text
        .as_str()
        .unwrap()
        .trim_start_matches(|c: char| !c.is_ascii_digit());
    json!(digits.parse::<i64>().unwrap())
}

/// Every role, user and monitor the writers of this test made.
async fn documents_found(root: &Signed) -> Found {
    let list = move |path: &'static str| async move {
        let answer = root.send_json("GET", path, None).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        answer.body
    };
    let mut rows = Vec::new();
    for role in list("/roles").await.as_array().unwrap() {
        rows.push(json!([
            role["role"],
            number(&role["Permissions"][0]["Resources"][0])
        ]));
    }
    for user in list("/users").await.as_array().unwrap() {
        if user["username"] != "root" {
            rows.push(json!([user["username"], number(&user["Roles"][0])]));
        }
    }
    for monitor in list("/monitors").await["monitors"].as_array().unwrap() {
        rows.push(json!([monitor["_id"], number(&monitor["monitor"]["name"])]));
    }
    let mut found = Found::new();
    tally(&mut found, &rows);
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn roles_users_and_monitors_survive_kill_9() {
    let (_dir, mut server, root) = start(&ARGS);
    dataset(&Signed::new(&server, &root), "watched", json!({})).await;
    let books = Books::default();
    let keys: Arc<Mutex<BTreeMap<String, Credentials>>> = Arc::default();
    for round in 0..ROUNDS {
        let platform = Signed::new(&server, &root);
        let mut writers = Vec::new();
        for kind in ["role", "user", "monitor"] {
            for c in 0..2 {
                let name = format!("r{round}c{c}");
                let writer = governance(platform.clone(), kind, name, books.clone(), keys.clone());
                writers.push(tokio::spawn(writer));
            }
        }
        tokio::time::sleep(WRITING).await;
        crash(&mut server, &ARGS, writers).await;
        let found = documents_found(&Signed::new(&server, &root)).await;
        books.lock().unwrap().check(&found);
        let live: Vec<(String, Credentials)> = {
            let keys = keys.lock().unwrap();
            keys.iter()
                .filter(|(user, _)| found.contains_key(*user))
                .map(|(user, keys)| (user.clone(), keys.clone()))
                .collect()
        };
        // The users' keys came back with them: each signs its own requests.
        for (user, credentials) in live {
            let answer = Signed::new(&server, &credentials)
                .send_json("GET", &format!("/user/{user}"), None)
                .await;
            assert_eq!(answer.status, 200, "{user}: {answer:?}");
        }
    }
    books
        .lock()
        .unwrap()
        .made_progress(&["role", "user", "monitor"], 3);
}

/// The import job `id` once `done` holds of it (polled for up to three minutes).
async fn job_when(root: &Signed, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let job = Mutex::new(Value::Null);
    let (job_ref, done) = (&job, &done);
    let reached = common::eventually(180, move || async move {
        let listed = root.send_json("GET", "/import/jobs", None).await;
        assert_eq!(listed.status, 200, "{listed:?}");
        let jobs = listed.body["jobs"].as_array().unwrap();
        let found = jobs.iter().find(|job| job["job_id"] == id);
        *job_ref.lock().unwrap() = found.cloned().unwrap_or_default();
        found.is_some_and(done)
    })
    .await;
    let job = job.into_inner().unwrap();
    assert!(reached, "import {id} is still {job}");
    job
}

fn records_written(job: &Value) -> u64 {
    job["records_written"].as_u64().unwrap_or(0)
}

fn finished(job: &Value) -> bool {
    matches!(
        job["state"].as_str(),
        Some("succeeded" | "failed" | "cancelled")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_import_killed_twice_mid_import_writes_every_row_once() {
    const ROWS: u64 = 6_000;
    let pg = common::PgDatabase::new(
        "crash_import",
        &format!(
            "CREATE TABLE readings (id bigint PRIMARY KEY, host text, value double precision);
             INSERT INTO readings SELECT n, 'host-' || (n % 7), n * 0.5
             FROM generate_series(1, {ROWS}) AS n;"
        ),
    );
    let args = [&ARGS[..], &["--set", "imports.batch_rows=200"][..]].concat();
    let (dir, mut server, root) = start(&args);
    let platform = Signed::new(&server, &root);
    dataset(&platform, "readings", json!({"v": {"type": "long"}})).await;
    let config = json!({"host": "127.0.0.1", "port": 5432, "username": "postgres",
                        "database": pg.name});
    let body = json!({"connector_id": "postgresql", "name": "pg", "config": config});
    let made = platform
        .send_json("POST", "/source/postgresql", Some(&body))
        .await;
    assert_eq!(made.status, 201, "{made:?}");
    let body =
        json!({"connection_id": "pg", "source": {"table": "readings"}, "dataset": "readings"});
    let started = platform
        .send_json("PUT", "/import/postgresql", Some(&body))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    let job = started.body["job_id"].as_str().unwrap().to_owned();
    // Clients write records of their own to the dataset the import writes, all along.
    let books = Books::default();
    let written_by_clients = |platform: Signed| async move {
        let mut found = Found::new();
        let query = "SELECT _id, v FROM readings WHERE id IS NULL";
        tally_sql(&mut found, &platform, query).await;
        found
    };
    for round in 0..ROUNDS {
        let platform = Signed::new(&server, &root);
        let writers: Vec<_> = (0..2)
            .map(|c| {
                let writer = bulk_with_ids(
                    platform.clone(),
                    "readings",
                    format!("r{round}c{c}"),
                    books.clone(),
                );
                tokio::spawn(writer)
            })
            .collect();
        // Killed once the job has written more than it had when the server started.
        let written = records_written(&job_when(&platform, &job, |_| true).await);
        let midway = job_when(&platform, &job, |job| {
            records_written(job) > written || finished(job)
        })
        .await;
        crash(&mut server, &args, writers).await;
        assert_eq!(midway["state"], "running", "{midway}");
        assert!(records_written(&midway) < ROWS, "{midway}");
        let found = written_by_clients(Signed::new(&server, &root)).await;
        books.lock().unwrap().check(&found);
    }
    let platform = Signed::new(&server, &root);
    let done = job_when(&platform, &job, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(records_written(&done), ROWS, "{done}");
    let query = "SELECT count(id), count(DISTINCT id), sum(id), count(DISTINCT _id) \
                 FROM readings WHERE id IS NOT NULL";
    let counted = platform
        .send_json("POST", "/sql", Some(&json!({ "query": query })))
        .await;
    let sum = ROWS * (ROWS + 1) / 2;
    assert_eq!(
        counted.body["rows"],
        json!([[ROWS, ROWS, sum, ROWS]]),
        "{counted:?}"
    );
    let found = written_by_clients(platform).await;
    books.lock().unwrap().check(&found);
    books.lock().unwrap().made_progress(&["bulk with ids"], 3);
    server.kill9();
    verify(dir.path());
}
