//! The mixed load of the soak (benches/soak.rs, run by hand) and of its short form in the tests
//! (tests/soak.rs): clients on loopback, each a bounded loop of one request at a time over both
//! listeners, mixing data-plane appends, updates, deletes and searches, SQL on both planes,
//! NDJSON bulk, Query DSL, msearch, metrics and PromQL, role changes and monitor runs.
//!
//! Every answer is sorted: a success; a refusal the server marks as transient (409, 429 or 503,
//! which a client retries after a pause); any other 4xx (an error of the load or of the
//! server); a 5xx. The server process's resident memory and open files are sampled as it runs.

use std::{
    collections::VecDeque,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use serde_json::{Value, json};

/// Where the load goes, and as whom.
#[derive(Clone)]
pub struct Target {
    /// The data plane's base URL and an account key of it.
    pub data_url: String,
    pub key: String,
    /// The platform API's base URL and the keys of a root user of the same account.
    pub platform_url: String,
    pub access_key: String,
    pub secret_key: String,
    /// The server's process, for its resident memory and open files.
    pub pid: u32,
}

/// The kinds of request, in the order reports list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Append,
    Update,
    Delete,
    Bm25,
    Hybrid,
    DataSql,
    Bulk,
    QueryDsl,
    Msearch,
    Sql,
    Metrics,
    PromQl,
    Governance,
    MonitorRun,
}

pub const OPS: [Op; 14] = [
    Op::Append,
    Op::Update,
    Op::Delete,
    Op::Bm25,
    Op::Hybrid,
    Op::DataSql,
    Op::Bulk,
    Op::QueryDsl,
    Op::Msearch,
    Op::Sql,
    Op::Metrics,
    Op::PromQl,
    Op::Governance,
    Op::MonitorRun,
];

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Append => "data plane append",
            Op::Update => "data plane update",
            Op::Delete => "data plane delete",
            Op::Bm25 => "data plane bm25_search",
            Op::Hybrid => "data plane hybrid_search",
            Op::DataSql => "data plane query_sql",
            Op::Bulk => "bulk (100 records)",
            Op::QueryDsl => "Query DSL search + aggregation",
            Op::Msearch => "msearch (2 searches)",
            Op::Sql => "platform SQL",
            Op::Metrics => "metrics text (10 samples)",
            Op::PromQl => "PromQL query_range",
            Op::Governance => "role create + delete",
            Op::MonitorRun => "monitor execute",
        }
    }
}

/// One client's cycle of requests: the mix's weights, spread out.
const CYCLE: [Op; 24] = [
    Op::Append,
    Op::Bm25,
    Op::QueryDsl,
    Op::Update,
    Op::Bulk,
    Op::DataSql,
    Op::PromQl,
    Op::Append,
    Op::Sql,
    Op::Hybrid,
    Op::QueryDsl,
    Op::Delete,
    Op::Msearch,
    Op::Bm25,
    Op::Metrics,
    Op::Append,
    Op::Update,
    Op::QueryDsl,
    Op::Bulk,
    Op::Sql,
    Op::Governance,
    Op::DataSql,
    Op::PromQl,
    Op::MonitorRun,
];

/// How an answer is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    /// 409, 429 or 503: the server asks to come back later.
    Busy,
    /// Another 4xx.
    Error,
    /// A 5xx, or no answer.
    ServerError,
}

/// What one kind of request did over the run.
#[derive(Clone, Debug, Default)]
pub struct OpStats {
    /// Latencies of the answered requests, in microseconds, by sampling window.
    pub windows: Vec<Vec<u32>>,
    pub ok: u64,
    pub busy: u64,
    pub errors: u64,
    pub server_errors: u64,
    /// The first few unexpected answers, for the report.
    pub examples: Vec<String>,
}

impl OpStats {
    pub fn requests(&self) -> u64 {
        self.ok + self.busy + self.errors + self.server_errors
    }

    /// The `q`-quantile latency in milliseconds over `windows` (all when `None`).
    pub fn quantile_ms(&self, q: f64, window: Option<usize>) -> f64 {
        let mut all: Vec<u32> = match window {
            Some(w) => self.windows.get(w).cloned().unwrap_or_default(),
            None => self.windows.concat(),
        };
        if all.is_empty() {
            return 0.0;
        }
        all.sort_unstable();
        let index = ((all.len() - 1) as f64 * q).round() as usize;
        f64::from(all[index]) / 1000.0
    }
}

/// One sample of the server process.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub seconds: u64,
    pub rss_bytes: u64,
    pub open_files: usize,
}

/// What a run measured.
pub struct Report {
    pub seconds: f64,
    pub clients: usize,
    pub window_seconds: u64,
    pub ops: Vec<(Op, OpStats)>,
    pub samples: Vec<Sample>,
}

impl Report {
    pub fn server_errors(&self) -> u64 {
        self.ops.iter().map(|(_, s)| s.server_errors).sum()
    }

    pub fn errors(&self) -> u64 {
        self.ops.iter().map(|(_, s)| s.errors).sum()
    }

    /// The unexpected answers' examples, each with its kind of request.
    pub fn examples(&self) -> Vec<String> {
        self.ops
            .iter()
            .flat_map(|(op, s)| {
                s.examples
                    .iter()
                    .map(move |e| format!("{}: {e}", op.name()))
            })
            .collect()
    }

    /// Resident memory growth over the last `seconds` of the run: the last sample over the
    /// first sample of that span, less one (0.05 is 5% more).
    pub fn rss_growth(&self, seconds: u64) -> f64 {
        let Some(last) = self.samples.last() else {
            return 0.0;
        };
        let since = last.seconds.saturating_sub(seconds);
        let first = self
            .samples
            .iter()
            .find(|s| s.seconds >= since)
            .unwrap_or(last);
        last.rss_bytes as f64 / first.rss_bytes.max(1) as f64 - 1.0
    }

    /// The kind of request whose p99 moved most between the second window (the first after
    /// warm-up) and the last, and the last's p99 over the second's (1.0 is no change).
    pub fn p99_drift(&self) -> Option<(Op, f64)> {
        self.ops
            .iter()
            .filter(|(_, stats)| stats.windows.len() >= 3)
            .map(|(op, stats)| {
                let last = stats.windows.len() - 1;
                let ratio = stats.quantile_ms(0.99, Some(last))
                    / stats.quantile_ms(0.99, Some(1)).max(0.001);
                (*op, ratio)
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The report as markdown tables, for docs/benchmarks.md.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "{} clients for {:.0} s.\n\n| request | requests | per second | p50 ms | p99 ms | busy (409/429/503) | other 4xx | 5xx |\n|---|---|---|---|---|---|---|---|\n",
            self.clients, self.seconds
        ));
        for (op, stats) in &self.ops {
            out.push_str(&format!(
                "| {} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {} |\n",
                op.name(),
                stats.requests(),
                stats.requests() as f64 / self.seconds,
                stats.quantile_ms(0.5, None),
                stats.quantile_ms(0.99, None),
                stats.busy,
                stats.errors,
                stats.server_errors
            ));
        }
        let windows = self
            .ops
            .iter()
            .map(|(_, s)| s.windows.len())
            .max()
            .unwrap_or(0);
        out.push_str(&format!(
            "\np99 ms per {} s window:\n\n| request |",
            self.window_seconds
        ));
        for w in 0..windows {
            out.push_str(&format!(" {} |", (w as u64 + 1) * self.window_seconds));
        }
        out.push_str(&format!("\n|---|{}\n", "---|".repeat(windows)));
        for (op, stats) in &self.ops {
            out.push_str(&format!("| {} |", op.name()));
            for w in 0..windows {
                match stats.windows.get(w).is_some_and(|l| !l.is_empty()) {
                    true => out.push_str(&format!(" {:.1} |", stats.quantile_ms(0.99, Some(w)))),
                    false => out.push_str(" - |"),
                }
            }
            out.push('\n');
        }
        out.push_str("\n| seconds | resident MiB | open files |\n|---|---|---|\n");
        let every = (self.samples.len() / 30).max(1);
        for (i, sample) in self.samples.iter().enumerate() {
            if i % every == 0 || i + 1 == self.samples.len() {
                out.push_str(&format!(
                    "| {} | {} | {} |\n",
                    sample.seconds,
                    sample.rss_bytes >> 20,
                    sample.open_files
                ));
            }
        }
        out
    }
}

/// The database, table, datasets and monitor the load works on; made once per server.
pub async fn prepare(target: &Target) {
    let client = Client::new(target);
    let made = client
        .data("POST", "/v1/databases", Some(json!({"name": "soak"})))
        .await;
    assert!(made.0 < 300, "create database: {made:?}");
    let table = json!({
        "name": "docs",
        "schema": [
            {"name": "k", "type": "int64", "nullable": false},
            {"name": "title", "type": "utf8", "nullable": false},
            {"name": "body", "type": "utf8"},
            {"name": "n", "type": "int64"},
            {"name": "embedding", "type": "vector<float32,4>"}
        ],
        "fts_columns": ["title", "body"],
        "exact_columns": ["k"],
        "vector_column": "embedding",
        "vector_metric": "l2"
    });
    let made = client
        .data("POST", "/v1/create_table/soak", Some(table))
        .await;
    assert!(made.0 < 300, "create table: {made:?}");
    // The platform's datasets get their first records, and the monitor its query.
    let now_ms = chrono::Utc::now().timestamp_millis();
    let first = client.bulk_body(0, now_ms);
    let made = client
        .platform("POST", "/soak-logs/_bulk", "application/x-ndjson", first)
        .await;
    assert!(made.0 < 300, "bulk: {made:?}");
    let made = client
        .platform(
            "POST",
            "/soak-metrics/metrics",
            "text/plain; version=0.0.4",
            client.metrics_body(0, now_ms).into_bytes(),
        )
        .await;
    assert!(made.0 < 300, "metrics: {made:?}");
    let monitor = json!({
        "_id": "soak",
        "name": "soak errors",
        "enabled": false,
        "schedule": {"cron": {"expression": "0 0 * * * *", "timezone": "UTC"}},
        "query": {"type": "querydsl", "datasets": ["soak-logs"],
                  "body": {"query": {"term": {"level": "error"}}, "size": 1}},
        "triggers": [{
            "name": "any error",
            "severity": 1,
            "condition": {"type": "count_greater_than", "threshold": 0},
            "actions": [],
        }],
    });
    let made = client
        .platform(
            "POST",
            "/monitor",
            "application/json",
            monitor.to_string().into_bytes(),
        )
        .await;
    assert!(made.0 < 300, "monitor: {made:?}");
}

/// Runs `clients` clients for `duration` against a server [`prepare`] made ready, sampling
/// the server every second; latencies are kept by windows of `window` seconds.
pub async fn run(target: &Target, clients: usize, duration: Duration, window: u64) -> Report {
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    // Requests still in flight at the end count in the last window.
    let last_window = duration.as_secs().div_ceil(window).saturating_sub(1);
    let stats: Arc<Mutex<Vec<OpStats>>> = Arc::new(Mutex::new(vec![OpStats::default(); OPS.len()]));
    let tasks: Vec<_> = (0..clients)
        .map(|n| {
            let (target, stop, stats) = (target.clone(), stop.clone(), stats.clone());
            tokio::spawn(async move {
                let mut client = Client::new(&target);
                client.id = n;
                let mut i = n * 5;
                while !stop.load(Ordering::Relaxed) {
                    let op = CYCLE[i % CYCLE.len()];
                    let begun = Instant::now();
                    let (status, body) = client.request(op, i).await;
                    let micros = u32::try_from(begun.elapsed().as_micros()).unwrap_or(u32::MAX);
                    let outcome = match status {
                        // A bulk or msearch answers 200 with its items' failures inside.
                        200..=299 if item_failed(op, &body) => Outcome::Error,
                        200..=299 => Outcome::Ok,
                        409 | 429 | 503 => Outcome::Busy,
                        400..=499 => Outcome::Error,
                        _ => Outcome::ServerError,
                    };
                    let w = (started.elapsed().as_secs() / window).min(last_window) as usize;
                    {
                        let mut all = stats.lock();
                        let entry = &mut all[op as usize];
                        if entry.windows.len() <= w {
                            entry.windows.resize(w + 1, Vec::new());
                        }
                        entry.windows[w].push(micros);
                        match outcome {
                            Outcome::Ok => entry.ok += 1,
                            Outcome::Busy => entry.busy += 1,
                            Outcome::Error => entry.errors += 1,
                            Outcome::ServerError => entry.server_errors += 1,
                        }
                        if matches!(outcome, Outcome::Error | Outcome::ServerError)
                            && entry.examples.len() < 3
                        {
                            entry.examples.push(format!(
                                "{status} {}",
                                body.chars().take(300).collect::<String>()
                            ));
                        }
                    }
                    match outcome {
                        Outcome::Busy => tokio::time::sleep(Duration::from_millis(50)).await,
                        _ => client.advance(op, status),
                    }
                    i += 1;
                }
            })
        })
        .collect();
    let mut samples = Vec::new();
    let ends = started + duration;
    loop {
        samples.push(sample(target.pid, started.elapsed().as_secs()));
        if Instant::now() >= ends {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("a load client panicked");
    }
    let seconds = started.elapsed().as_secs_f64();
    let stats = stats.lock().clone();
    Report {
        seconds,
        clients,
        window_seconds: window,
        ops: OPS.iter().copied().zip(stats).collect(),
        samples,
    }
}

/// Whether a successful answer of `op` reports a failed item: a bulk's `errors`, an msearch
/// response's `error`.
fn item_failed(op: Op, body: &str) -> bool {
    match op {
        Op::Bulk => body.contains("\"errors\":true"),
        Op::Msearch => serde_json::from_str::<Value>(body).is_ok_and(|answer| {
            answer["responses"]
                .as_array()
                .is_some_and(|responses| responses.iter().any(|r| r.get("error").is_some()))
        }),
        _ => false,
    }
}

/// The server process's resident memory and open files now.
fn sample(pid: u32, seconds: u64) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_bytes = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024);
    let open_files = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
    Sample {
        seconds,
        rss_bytes,
        open_files,
    }
}

/// One load client: its HTTP connections, and the data-plane keys it wrote and may update or
/// delete (only its own, so that an update matches exactly one row).
struct Client {
    http: reqwest::Client,
    target: Target,
    id: usize,
    /// Keys of this client's live rows, oldest first.
    live: VecDeque<i64>,
    next_key: i64,
    /// Bulk requests this client sent: where its next records' `_id`s start.
    bulks: usize,
}

/// Rows a client keeps live: each delete removes every older one, so that the table stays
/// this size however long the load runs.
const LIVE_ROWS: usize = 20;

/// The `_id`s a client's bulk records cycle through: past the first 250 requests, each record
/// replaces one, so that the dataset stays at `BULK_IDS` records per client (200,000 for 8)
/// and a long run measures a steady state, not a dataset that grows with the run.
const BULK_IDS: usize = 25_000;

const WORDS: [&str; 16] = [
    "disk", "latency", "timeout", "kernel", "cache", "replica", "shard", "index", "query",
    "socket", "memory", "thread", "write", "search", "leader", "segment",
];

impl Client {
    fn new(target: &Target) -> Client {
        Client {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("an HTTP client"),
            target: target.clone(),
            id: 0,
            live: VecDeque::new(),
            next_key: 0,
            bulks: 0,
        }
    }

    fn words(i: usize, n: usize) -> String {
        (0..n)
            .map(|j| WORDS[(i * 7 + j * 3) % WORDS.len()])
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn row(&self, key: i64, i: usize) -> Value {
        let f = (i % 100) as f32 / 100.0;
        json!({
            "k": key,
            "title": Self::words(i, 3),
            "body": Self::words(i + 1, 12),
            "n": i,
            "embedding": [f, 1.0 - f, f / 2.0, 0.5],
        })
    }

    /// The next key this client appends.
    fn key(&self) -> i64 {
        (self.id as i64) * 1_000_000_000 + self.next_key
    }

    /// After an answered request: an acknowledged append makes its key live, a delete ends
    /// all but the newest [`LIVE_ROWS`].
    fn advance(&mut self, op: Op, status: u16) {
        if !(200..300).contains(&status) {
            return;
        }
        match op {
            Op::Append => {
                self.live.push_back(self.key());
                self.next_key += 1;
            }
            Op::Delete => {
                let ended = self.live.len().saturating_sub(LIVE_ROWS);
                self.live.drain(..ended);
            }
            _ => {}
        }
    }

    /// The `i`-th request's 100 records, the `bulks`-th bulk of this client: `_id`s of their
    /// own, cycling through [`BULK_IDS`].
    fn bulk_body(&self, i: usize, at_ms: i64) -> Vec<u8> {
        let mut body = String::new();
        for j in 0..100 {
            let level = ["info", "info", "warn", "error"][(i + j) % 4];
            let id = (self.bulks * 100 + j) % BULK_IDS;
            body.push_str(&format!("{{\"index\":{{\"_id\":\"{}-{id}\"}}}}\n", self.id));
            body.push_str(
                &json!({
                    "@timestamp": at_ms + j as i64,
                    "level": level,
                    "service": format!("svc-{}", (i + j) % 8),
                    "message": Self::words(i + j, 8),
                    "bytes": (i * 31 + j * 17) % 5000,
                })
                .to_string(),
            );
            body.push('\n');
        }
        body.into_bytes()
    }

    fn metrics_body(&self, i: usize, at_ms: i64) -> String {
        let mut body = String::from("# TYPE soak_requests_total counter\n");
        for j in 0..10 {
            body.push_str(&format!(
                "soak_requests_total{{client=\"{}\",route=\"r{j}\"}} {} {at_ms}\n",
                self.id,
                i * 10 + j
            ));
        }
        body
    }

    /// Sends the `i`-th request of the cycle, of kind `op`: its status and body (status 0
    /// when no answer came).
    async fn request(&mut self, op: Op, i: usize) -> (u16, String) {
        let now_ms = chrono::Utc::now().timestamp_millis();
        match op {
            Op::Append => {
                let row = self.row(self.key(), i);
                self.data(
                    "POST",
                    "/v1/append/soak?table=docs",
                    Some(json!({"data": [row]})),
                )
                .await
            }
            Op::Update => match self.live.back().copied() {
                Some(key) => {
                    let row = self.row(key, i + 1);
                    let path = format!("/v1/update/soak?table=docs&predicate=k%20%3D%20{key}");
                    self.data("POST", &path, Some(json!({"data": [row]}))).await
                }
                None => self.search_data(i).await,
            },
            Op::Delete => match self.live.len().checked_sub(LIVE_ROWS + 1) {
                // The oldest keys up to the newest that is not kept: this client's only, as
                // its keys start at its id times 10^9.
                Some(last) => {
                    let (from, to) = (self.live[0], self.live[last]);
                    let path = format!(
                        "/v1/delete/soak?table=docs&predicate=k%20BETWEEN%20{from}%20AND%20{to}"
                    );
                    self.data("POST", &path, None).await
                }
                None => self.search_data(i).await,
            },
            Op::Bm25 => self.search_data(i).await,
            Op::Hybrid => {
                let f = (i % 100) as f32 / 100.0;
                let body = json!({"table": "docs", "query": Self::words(i, 2),
                                  "vector": [f, 1.0 - f, 0.25, 0.5], "limit": 10});
                self.data("POST", "/v1/hybrid_search/soak", Some(body))
                    .await
            }
            Op::DataSql => {
                let sql = match i % 2 {
                    0 => "SELECT n % 10 AS bucket, COUNT(*) AS c FROM docs GROUP BY bucket ORDER BY bucket".to_owned(),
                    _ => format!("SELECT k, title FROM docs WHERE body LIKE '%{}%' ORDER BY k LIMIT 20", WORDS[i % WORDS.len()]),
                };
                self.data("POST", "/v1/query_sql/soak", Some(json!({ "sql": sql })))
                    .await
            }
            Op::Bulk => {
                let body = self.bulk_body(i, now_ms);
                self.bulks += 1;
                self.platform("POST", "/soak-logs/_bulk", "application/x-ndjson", body)
                    .await
            }
            Op::QueryDsl => {
                let body = json!({
                    "query": {"bool": {"must": {"match": {"message": Self::words(i, 2)}},
                                       "filter": {"range": {"@timestamp": {"gte": "now-1h"}}}}},
                    "size": 10,
                    "aggs": {"per_minute": {"date_histogram": {"field": "@timestamp", "fixed_interval": "1m"}},
                             "levels": {"terms": {"field": "level"}}},
                });
                self.platform_json("POST", "/soak-logs/_search", &body)
                    .await
            }
            Op::Msearch => {
                let body = format!(
                    "{{\"index\":\"soak-logs\"}}\n{}\n{{\"index\":\"soak-logs\"}}\n{}\n",
                    json!({"query": {"term": {"level": "error"}}, "size": 5}),
                    json!({"query": {"match": {"message": WORDS[i % WORDS.len()]}}, "size": 5}),
                );
                self.platform(
                    "POST",
                    "/_msearch",
                    "application/x-ndjson",
                    body.into_bytes(),
                )
                .await
            }
            Op::Sql => {
                let query = match i % 2 {
                    0 => {
                        "SELECT level, COUNT(*) AS n, AVG(bytes) AS bytes FROM \"soak-logs\" GROUP BY level ORDER BY level"
                    }
                    _ => {
                        "SELECT service, MAX(bytes) AS most FROM \"soak-logs\" WHERE level = 'error' GROUP BY service ORDER BY most DESC LIMIT 5"
                    }
                };
                self.platform_json("POST", "/sql", &json!({ "query": query }))
                    .await
            }
            Op::Metrics => {
                let body = self.metrics_body(i, now_ms);
                self.platform(
                    "POST",
                    "/soak-metrics/metrics",
                    "text/plain; version=0.0.4",
                    body.into_bytes(),
                )
                .await
            }
            Op::PromQl => {
                let (end, start) = (now_ms / 1000, now_ms / 1000 - 600);
                let path = format!(
                    "/api/v1/query_range?query=sum%20by%20(route)%20(rate(soak_requests_total%5B1m%5D))&start={start}&end={end}&step=15"
                );
                self.platform("GET", &path, "", Vec::new()).await
            }
            Op::Governance => {
                let name = format!("soak-{}-{i}", self.id);
                let role = "Version: 2025-01-01\nPermissions:\n  - ResourceType: record\n    Actions: [read]\n    Resources: [\"soak-logs\"]\n";
                let made = self
                    .platform(
                        "PUT",
                        &format!("/role/{name}"),
                        "application/yaml",
                        role.as_bytes().to_vec(),
                    )
                    .await;
                if !(200..300).contains(&made.0) {
                    return made;
                }
                self.platform("DELETE", &format!("/role/{name}"), "", Vec::new())
                    .await
            }
            Op::MonitorRun => {
                self.platform("POST", "/monitor/soak/execute?dryrun=true", "", Vec::new())
                    .await
            }
        }
    }

    async fn search_data(&self, i: usize) -> (u16, String) {
        let body = json!({"table": "docs", "query": Self::words(i, 2), "limit": 10});
        self.data("POST", "/v1/bm25_search/soak", Some(body)).await
    }

    /// A data-plane request with the account's key, asking for JSON.
    async fn data(&self, method: &str, path: &str, body: Option<Value>) -> (u16, String) {
        let mut request = self
            .http
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).expect("a method"),
                format!("{}{path}", self.target.data_url),
            )
            .bearer_auth(&self.target.key)
            .header("accept", "application/json");
        if let Some(body) = body {
            request = request.json(&body);
        }
        Self::answer(request.send().await).await
    }

    async fn platform_json(&self, method: &str, path: &str, body: &Value) -> (u16, String) {
        self.platform(
            method,
            path,
            "application/json",
            body.to_string().into_bytes(),
        )
        .await
    }

    /// A platform request signed with the root user's keys.
    async fn platform(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (u16, String) {
        let extra: Vec<(&str, &str)> = match content_type.is_empty() {
            true => Vec::new(),
            false => vec![("content-type", content_type)],
        };
        let headers = strata::sigv4::sign(
            &strata::sigv4::Outgoing {
                method,
                host: self.target.platform_url.trim_start_matches("http://"),
                path_and_query: path,
                headers: &extra,
                body: &body,
            },
            (&self.target.access_key, &self.target.secret_key),
            ("us-east-1", "strata"),
            chrono::Utc::now(),
        );
        let mut request = self.http.request(
            reqwest::Method::from_bytes(method.as_bytes()).expect("a method"),
            format!("{}{path}", self.target.platform_url),
        );
        for (name, value) in headers {
            request = request.header(name, value);
        }
        Self::answer(request.body(body).send().await).await
    }

    async fn answer(sent: reqwest::Result<reqwest::Response>) -> (u16, String) {
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.text().await.unwrap_or_default())
            }
            Err(error) => (0, format!("no answer: {error}")),
        }
    }
}
