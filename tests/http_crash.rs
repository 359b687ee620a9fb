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
//! monitors; an import from the local PostgreSQL, killed twice mid-import. This file holds what
//! they share (the ledger, the crash, signed requests that may meet a dead server); the writers
//! and the tests of each group of paths are in tests/crash/.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "crash/governance.rs"]
mod governance;
#[path = "crash/import.rs"]
mod import;
#[path = "crash/metrics.rs"]
mod metrics;
#[path = "crash/writes.rs"]
mod writes;

use std::{
    collections::BTreeMap,
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
    common::verify_passes(common::replay(&server.dir, &["verify"]));
    *server = Server::start(&server.dir, args);
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
