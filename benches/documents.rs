//! Platform-API document benchmarks over a seeded, generated http-logs-like corpus
//! (benches/logs.rs), each next to a baseline in the same run.
//!
//! `cargo bench -p strata --bench documents -- bulk [--docs 1000000] [--queries 200]`
//!   NDJSON bulk ingestion (`POST /logs/_bulk`, 1000 records a request, SigV4-signed) through
//!   a release `strata serve`, with 1 and with 8 concurrent clients, each into a new server:
//!   until the last request is acknowledged, and until every record is in a segment file. Baseline: the same NDJSON lines parsed and indexed with tantivy directly, into
//!   the document schema strata uses (`DocsSchema`), by an `IndexWriter` with tantivy's
//!   default threads and a 256 MiB budget, committed.
//!
//!   Then query latency (p50, p99; one client, sequentially) over the 8-client server's
//!   records, for `match`, `term`, `range` + `terms` aggregation and `date_histogram`, against
//!   the same query run with tantivy directly over the baseline's index (TopDocs + Count, or
//!   tantivy's own aggregations). Both sides' answers are checked to agree.
//!
//! `cargo bench -p strata --bench documents -- governed [--docs 1000000] [--runs 200]`
//!   Query DSL and SQL latency (p50, p99; one client, sequentially, the two readers
//!   alternating) for a user whose role has a Fields block (a field denied, one masked) and a
//!   record Filter, against the root user on the same records in the same run.
//!
//! Prints markdown tables for docs/benchmarks.md.

// A benchmark program: failing loudly is its error handling, and `Server`'s Drop kills and
// waits for the server it spawns.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::zombie_processes
)]

#[allow(dead_code)]
mod generator;
mod logs;
mod platform;
#[allow(dead_code)]
mod server;

use std::{
    collections::BTreeMap,
    ops::Bound,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use clap::{Parser, Subcommand};
use platform::{Platform, bulk_bodies};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::{Value, json};
use server::Server;
use strata_projections::table::docs::DocsSchema;
use tantivy::{
    DateTime, Index, Searcher, TantivyDocument, Term,
    aggregation::{
        AggContextParams, AggregationCollector, AggregationLimitsGuard, agg_req::Aggregations,
    },
    collector::{Count, TopDocs},
    query::{AllQuery, Query, RangeQuery, TermQuery},
    schema::{IndexRecordOption, OwnedValue},
};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    bench: Bench,
    /// Where the servers' data and the baseline's index go (default: under /var/tmp).
    #[arg(long, global = true)]
    dir: Option<PathBuf>,
    /// A setting for every server the bench starts (`KEY=VALUE`, as `strata serve --set`),
    /// for example `tables.segment_page_bytes=4096`. Repeatable.
    #[arg(long = "set", global = true)]
    settings: Vec<String>,
    /// Ignored: cargo bench passes it.
    #[arg(long, hide = true, global = true)]
    bench_flag: bool,
}

#[derive(Subcommand)]
enum Bench {
    Bulk {
        #[arg(long, default_value_t = 1_000_000)]
        docs: usize,
        #[arg(long, default_value_t = 200)]
        queries: usize,
    },
    Governed {
        #[arg(long, default_value_t = 1_000_000)]
        docs: usize,
        #[arg(long, default_value_t = 200)]
        runs: usize,
    },
}

const SEED: u64 = 1998;

/// The `--set` arguments every server of this run starts with.
static SETTINGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
const WARM_UP: usize = 20;

fn main() {
    let args = Args::parse_from(std::env::args().filter(|a| a != "--bench"));
    let dir = args.dir.clone();
    let mut settings = vec!["--set".to_owned(), "tables.flush_age_ms=500".to_owned()];
    for setting in &args.settings {
        settings.extend(["--set".to_owned(), setting.clone()]);
    }
    SETTINGS.set(settings).unwrap();
    server::in_scratch("bench", dir.as_deref(), |scratch| async move {
        match args.bench {
            Bench::Bulk { docs, queries } => bulk(&scratch, docs, queries).await,
            Bench::Governed { docs, runs } => governed(&scratch, docs, runs).await,
        }
    });
}

/// Loads `bodies` into a new server in `dir` with `clients` concurrent clients; returns the
/// server, its client, the time until acknowledged and until settled in segments, and the
/// server's CPU time until settled.
async fn load(
    dir: &Path,
    bodies: &Arc<Vec<Vec<u8>>>,
    docs: usize,
    clients: usize,
) -> (Server, Platform, Duration, Duration, Duration) {
    std::fs::create_dir_all(dir).unwrap();
    let settings: Vec<&str> = SETTINGS
        .get()
        .map(|s| s.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let server = Server::start(dir, &settings);
    let platform = Platform::of(&server, dir);
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_at_start = server.cpu();
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (platform, bodies, next) = (platform.clone(), bodies.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(body) = bodies.get(i) else { break };
                    platform.bulk(body.clone()).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let acknowledged = started.elapsed();
    server::wait_for_segment_rows(&dir.join("tables"), docs).await;
    let in_segments = started.elapsed();
    let cpu = server.cpu() - cpu_at_start;
    // Compaction may go on: let it end before the queries.
    server::settle(&dir.join("tables"), docs).await;
    (server, platform, acknowledged, in_segments, cpu)
}

/// A record as the document index holds it: strings that are dates as dates (strata's date
/// detection), numbers as numbers, every string also in `all`.
fn tantivy_document(schema: &DocsSchema, line: &str, row: u64) -> TantivyDocument {
    let Value::Object(record) = serde_json::from_str(line).unwrap() else {
        panic!("a record is an object")
    };
    let mut object = BTreeMap::new();
    let mut document = TantivyDocument::new();
    document.add_u64(schema.row_id, row);
    for (name, value) in record {
        let value = match value {
            Value::String(text) => match chrono::DateTime::parse_from_rfc3339(&text) {
                Ok(at) => OwnedValue::Date(DateTime::from_timestamp_millis(at.timestamp_millis())),
                Err(_) => {
                    document.add_text(schema.all, &text);
                    OwnedValue::Str(text)
                }
            },
            Value::Number(n) => match n.as_i64() {
                Some(i) => OwnedValue::I64(i),
                None => OwnedValue::F64(n.as_f64().unwrap()),
            },
            Value::Bool(b) => OwnedValue::Bool(b),
            other => OwnedValue::Str(other.to_string()),
        };
        object.insert(name, value);
    }
    document.add_object(schema.text, object.clone());
    document.add_object(schema.keyword, object);
    document
}

/// The baseline: the NDJSON lines parsed and indexed by tantivy directly; returns the index and
/// how long parsing, indexing and the commit took.
/// The baseline's index, its time, and the CPU time it took (this process's: nothing else
/// runs in it meanwhile).
fn tantivy_baseline(dir: &Path, records: &[String]) -> (Index, Duration, Duration) {
    std::fs::create_dir_all(dir).unwrap();
    let schema = DocsSchema::new();
    let cpu = server::cpu_of("self");
    let started = Instant::now();
    let index = Index::create_in_dir(dir, schema.schema.clone()).unwrap();
    let mut writer: tantivy::IndexWriter = index.writer(256 << 20).unwrap();
    for (row, line) in records.iter().enumerate() {
        writer
            .add_document(tantivy_document(&schema, line, row as u64))
            .unwrap();
    }
    writer.commit().unwrap();
    writer.wait_merging_threads().unwrap();
    (index, started.elapsed(), server::cpu_of("self") - cpu)
}

fn throughput_row(what: &str, docs: usize, took: Duration, baseline: Option<Duration>) {
    let ratio = baseline.map_or("1.00 (baseline)".to_owned(), |b| {
        format!("{:.2}", b.as_secs_f64() / took.as_secs_f64())
    });
    println!(
        "| {what} | {docs} | {:.2} | {:.0} | {ratio} |",
        took.as_secs_f64(),
        docs as f64 / took.as_secs_f64()
    );
}

/// One query of each kind: the Query DSL body, and the same question put to tantivy directly
/// (a query, and aggregations or none). `seed` picks the values.
struct Case {
    body: Value,
    query: Box<dyn Query>,
    aggs: Option<Value>,
}

fn keyword_term(schema: &DocsSchema, path: &str) -> Term {
    Term::from_field_json_path(schema.keyword, path, true)
}

fn cases(kind: &str, count: usize) -> Vec<Case> {
    let schema = DocsSchema::new();
    let mut rng = StdRng::seed_from_u64(7);
    let words = logs::query_words();
    let statuses = logs::statuses();
    (0..count)
        .map(|_| match kind {
            "match" => {
                let word = words[rng.random_range(0..words.len())];
                let mut term = Term::from_field_json_path(schema.text, "request", true);
                term.append_type_and_str(word);
                Case {
                    body: json!({"query": {"match": {"request": word}}, "track_total_hits": true}),
                    query: Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)),
                    aggs: None,
                }
            }
            "term" => {
                let status = statuses[rng.random_range(0..statuses.len())];
                let mut term = keyword_term(&schema, "status");
                term.append_type_and_fast_value(i64::from(status));
                Case {
                    body: json!({"query": {"term": {"status": status}}, "track_total_hits": true}),
                    query: Box::new(TermQuery::new(term, IndexRecordOption::Basic)),
                    aggs: None,
                }
            }
            "range_terms" => {
                let hour = rng.random_range(0..23);
                let from = logs::START_MS + hour * 3_600_000;
                let to = from + 3_600_000;
                let bound = |ms: i64| {
                    let mut term = keyword_term(&schema, "@timestamp");
                    term.append_type_and_fast_value(DateTime::from_timestamp_millis(ms));
                    term
                };
                Case {
                    body: json!({
                        "size": 0,
                        "track_total_hits": true,
                        "query": {"range": {"@timestamp": {"gte": from, "lt": to}}},
                        "aggs": {"statuses": {"terms": {"field": "status"}}},
                    }),
                    query: Box::new(RangeQuery::new(
                        Bound::Included(bound(from)),
                        Bound::Excluded(bound(to)),
                    )),
                    aggs: Some(json!({"statuses": {"terms": {"field": "kw.status"}}})),
                }
            }
            "date_histogram" => Case {
                body: json!({
                    "size": 0,
                    "track_total_hits": true,
                    "aggs": {"hours": {"date_histogram": {"field": "@timestamp", "fixed_interval": "1h"}}},
                }),
                query: Box::new(AllQuery),
                aggs: Some(json!({"hours": {"date_histogram": {
                    "field": "kw.@timestamp", "fixed_interval": "1h"}}})),
            },
            other => panic!("unknown query kind {other}"),
        })
        .collect()
}

/// Runs a case with tantivy directly: the count, and the aggregation result as JSON.
fn run_tantivy(searcher: &Searcher, case: &Case) -> (usize, Value) {
    match &case.aggs {
        None => {
            let (top, count) = searcher
                .search(
                    &case.query,
                    &(TopDocs::with_limit(10).order_by_score(), Count),
                )
                .unwrap();
            std::hint::black_box(top);
            (count, Value::Null)
        }
        Some(aggs) => {
            let aggs: Aggregations = serde_json::from_value(aggs.clone()).unwrap();
            let context = AggContextParams::new(
                AggregationLimitsGuard::default(),
                tantivy::tokenizer::TokenizerManager::default(),
            );
            let collector = AggregationCollector::from_aggs(aggs, context);
            let (count, result) = searcher.search(&case.query, &(Count, collector)).unwrap();
            (count, serde_json::to_value(result).unwrap())
        }
    }
}

/// The bucket counts of an aggregation answer (strata's or tantivy's), keyed by bucket key.
fn bucket_counts(answer: &Value) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    if let Some(aggs) = answer.as_object() {
        for agg in aggs.values() {
            for bucket in agg["buckets"].as_array().into_iter().flatten() {
                let key = match &bucket["key"] {
                    Value::Number(n) => format!("{}", n.as_f64().unwrap()),
                    other => other.to_string(),
                };
                let count = bucket["doc_count"].as_u64().unwrap();
                if count > 0 {
                    out.insert(key, count);
                }
            }
        }
    }
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn bulk(dir: &Path, docs: usize, queries: usize) {
    let generated = Instant::now();
    let records = logs::records(SEED, docs);
    let bytes: usize = records.iter().map(|r| r.len()).sum();
    eprintln!(
        "{docs} records, {:.0} bytes each on average, generated in {:.1}s",
        bytes as f64 / docs as f64,
        generated.elapsed().as_secs_f64()
    );
    let bodies = Arc::new(bulk_bodies(&records));
    let (index, baseline, baseline_cpu) = tantivy_baseline(&dir.join("tantivy"), &records);
    let reader = index.reader().unwrap();
    let searcher = reader.searcher();
    eprintln!("baseline indexed in {:.1}s", baseline.as_secs_f64());
    let served = serve_baseline(Arc::new(Served {
        searcher: searcher.clone(),
        records,
        cases: KINDS
            .into_iter()
            .map(|kind| (kind, cases(kind, queries + WARM_UP)))
            .collect(),
    }))
    .await;

    let (one, _, one_acked, one_settled, one_cpu) = load(&dir.join("one"), &bodies, docs, 1).await;
    drop(one);
    let (server, platform, eight_acked, eight_settled, eight_cpu) =
        load(&dir.join("eight"), &bodies, docs, 8).await;

    println!("| what | records | seconds | records/s | ratio to baseline |");
    println!("|---|---|---|---|---|");
    throughput_row(
        "tantivy directly: parse, index, commit",
        docs,
        baseline,
        None,
    );
    for (what, took) in [
        ("strata bulk, 1 client, until acknowledged", one_acked),
        (
            "strata bulk, 1 client, until every record is in a segment",
            one_settled,
        ),
        ("strata bulk, 8 clients, until acknowledged", eight_acked),
        (
            "strata bulk, 8 clients, until every record is in a segment",
            eight_settled,
        ),
    ] {
        throughput_row(what, docs, took, Some(baseline));
    }
    println!();
    println!("| what | CPU seconds | ratio to baseline (baseline ÷ strata) |");
    println!("|---|---|---|");
    println!(
        "| tantivy directly: parse, index, commit | {:.2} | 1.00 (baseline) |",
        baseline_cpu.as_secs_f64()
    );
    for (what, cpu) in [
        (
            "strata, 1 client, until every record is in a segment",
            one_cpu,
        ),
        (
            "strata, 8 clients, until every record is in a segment",
            eight_cpu,
        ),
    ] {
        println!(
            "| {what} | {:.2} | {:.2} |",
            cpu.as_secs_f64(),
            baseline_cpu.as_secs_f64() / cpu.as_secs_f64()
        );
    }

    println!();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "| query | tantivy p50 ms | tantivy p99 ms | tantivy served p50 ms | p99 ms | strata p50 ms | strata p99 ms | p50 ratio (tantivy / strata) | strata p50 ÷ served p50 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    // What every request pays before any search: HTTP on loopback, signing and checking the
    // signature, the caller's grant, a JSON answer; and HTTP alone, to the served baseline.
    let http = reqwest::Client::new();
    let mut floor = Vec::with_capacity(queries);
    let mut bare = Vec::with_capacity(queries);
    for i in 0..queries + WARM_UP {
        let started = Instant::now();
        let answer = http.get(format!("{served}/")).send().await.unwrap();
        assert!(answer.status().is_success());
        answer.bytes().await.unwrap();
        let bare_took = started.elapsed();
        let started = Instant::now();
        let answer = platform
            .send("GET", "/_cluster/health", "application/json", Vec::new())
            .await;
        let took = started.elapsed();
        assert_eq!(answer["status"], "green", "{answer}");
        if i >= WARM_UP {
            floor.push(took);
            bare.push(bare_took);
        }
    }
    floor.sort();
    bare.sort();
    println!(
        "| no search: GET / of the served baseline, a signed GET /_cluster/health of strata | | | {:.2} | {:.2} | {:.2} | {:.2} | | {:.2} |",
        ms(percentile(&bare, 0.5)),
        ms(percentile(&bare, 0.99)),
        ms(percentile(&floor, 0.5)),
        ms(percentile(&floor, 0.99)),
        percentile(&floor, 0.5).as_secs_f64() / percentile(&bare, 0.5).as_secs_f64(),
    );
    for kind in KINDS {
        let cases = cases(kind, queries + WARM_UP);
        let mut raw = Vec::with_capacity(queries);
        let mut over_http = Vec::with_capacity(queries);
        let mut ours = Vec::with_capacity(queries);
        for (i, case) in cases.iter().enumerate() {
            let started = Instant::now();
            let (count, aggs) = run_tantivy(&searcher, case);
            let raw_took = started.elapsed();
            let started = Instant::now();
            let response = http
                .get(format!("{served}/{kind}/{i}"))
                .send()
                .await
                .unwrap();
            assert!(response.status().is_success());
            let baseline: Value = response.json().await.unwrap();
            let served_took = started.elapsed();
            assert_eq!(baseline["total"].as_u64(), Some(count as u64));
            let started = Instant::now();
            let answer = platform.search(&case.body).await;
            let our_took = started.elapsed();
            assert_eq!(
                answer["hits"]["total"]["value"].as_u64(),
                Some(count as u64),
                "{kind}: strata and tantivy disagree on {}",
                case.body
            );
            if case.aggs.is_some() {
                assert_eq!(
                    bucket_counts(&answer["aggregations"]),
                    bucket_counts(&aggs),
                    "{kind}: the buckets disagree on {}",
                    case.body
                );
            }
            if i >= WARM_UP {
                raw.push(raw_took);
                over_http.push(served_took);
                ours.push(our_took);
            }
        }
        raw.sort();
        over_http.sort();
        ours.sort();
        println!(
            "| {kind} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            ms(percentile(&raw, 0.5)),
            ms(percentile(&raw, 0.99)),
            ms(percentile(&over_http, 0.5)),
            ms(percentile(&over_http, 0.99)),
            ms(percentile(&ours, 0.5)),
            ms(percentile(&ours, 0.99)),
            percentile(&raw, 0.5).as_secs_f64() / percentile(&ours, 0.5).as_secs_f64(),
            percentile(&ours, 0.5).as_secs_f64() / percentile(&over_http, 0.5).as_secs_f64(),
        );
    }
    drop(server);
}

/// The kinds of query timed.
const KINDS: [&str; 4] = ["match", "term", "range_terms", "date_histogram"];

/// The baseline's searches served over loopback HTTP with the least a search server does:
/// tantivy's search of the baseline's index, each hit's record taken from memory (so reading
/// it costs nothing), a JSON answer, no authentication. What any HTTP service of these records
/// pays at the least, against which strata's search over HTTP is compared like for like.
struct Served {
    searcher: Searcher,
    /// The records, by row id.
    records: Vec<String>,
    /// The cases of each kind, as `cases` makes them (the same as the strata side's).
    cases: BTreeMap<&'static str, Vec<Case>>,
}

/// Serves `served` on a loopback port: `GET /{kind}/{i}` runs the `i`th case of `kind`, and
/// `GET /` answers `{}`. Returns its base URL.
async fn serve_baseline(served: Arc<Served>) -> String {
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "{}" }))
        .route("/{kind}/{i}", axum::routing::get(served_search))
        .with_state(served);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

async fn served_search(
    axum::extract::State(served): axum::extract::State<Arc<Served>>,
    axum::extract::Path((kind, i)): axum::extract::Path<(String, usize)>,
) -> ([(&'static str, &'static str); 1], String) {
    use std::fmt::Write;
    let case = &served.cases[kind.as_str()][i];
    let body = match &case.aggs {
        None => {
            let (top, count) = served
                .searcher
                .search(
                    &case.query,
                    &(TopDocs::with_limit(10).order_by_score(), Count),
                )
                .unwrap();
            let mut body = format!("{{\"total\":{count},\"hits\":[");
            for (n, (score, address)) in top.iter().enumerate() {
                let row = served
                    .searcher
                    .segment_reader(address.segment_ord)
                    .fast_fields()
                    .u64(strata_projections::table::docs::ROW_ID_FIELD)
                    .unwrap()
                    .first(address.doc_id)
                    .unwrap();
                if n > 0 {
                    body.push(',');
                }
                write!(
                    body,
                    "{{\"_score\":{score},\"_source\":{}}}",
                    served.records[row as usize]
                )
                .unwrap();
            }
            body.push_str("]}");
            body
        }
        Some(_) => {
            let (count, aggs) = run_tantivy(&served.searcher, case);
            json!({"total": count, "aggregations": aggs}).to_string()
        }
    };
    ([("content-type", "application/json")], body)
}

/// The role of the governed reader: every record of three of the four hosts, the client IP
/// hidden, the user agent redacted.
const ANALYST_ROLE: &str = r#"
Version: 2025-01-01
Permissions:
  - ResourceType: record
    Actions: [read]
    Resources: [logs]
    Fields:
      Deny: [clientip]
      Mask: {agent: redact}
    Filter:
      terms: {host: [www1.france98.example, www2.france98.example, www3.france98.example]}
  - ResourceType: metadata
    Actions: [read]
    Resources: [logs]
"#;

async fn governed(dir: &Path, docs: usize, runs: usize) {
    let records = logs::records(SEED, docs);
    let bodies = Arc::new(bulk_bodies(&records));
    let (server, root, _, _, _) = load(&dir.join("governed"), &bodies, docs, 4).await;
    root.send(
        "PUT",
        "/role/analyst",
        "application/yaml",
        ANALYST_ROLE.as_bytes().to_vec(),
    )
    .await;
    let user = root
        .send(
            "PUT",
            "/user/analyst",
            "application/json",
            json!({"Version": "2025-01-01", "Password": "bench-password-1", "Roles": ["analyst"]})
                .to_string()
                .into_bytes(),
        )
        .await;
    let analyst = Platform::with_keys(
        &server,
        user["access_key"].as_str().unwrap(),
        user["secret_key"].as_str().unwrap(),
    );

    let sql = |query: &str| json!({"query": query});
    let mut kinds: Vec<(String, Vec<(&str, Value)>)> =
        ["match", "term", "range_terms", "date_histogram"]
            .into_iter()
            .map(|kind| {
                let bodies = cases(kind, runs + WARM_UP)
                    .into_iter()
                    .map(|case| ("/logs/_search", case.body))
                    .collect();
                (format!("Query DSL {kind}"), bodies)
            })
            .collect();
    for (name, query) in [
        (
            "SQL GROUP BY status",
            "SELECT status, count(*) FROM logs GROUP BY status ORDER BY status",
        ),
        (
            "SQL WHERE status = 404, 10 rows",
            "SELECT \"@timestamp\", request, agent FROM logs WHERE status = 404 LIMIT 10",
        ),
    ] {
        kinds.push((name.to_owned(), vec![("/sql", sql(query)); runs + WARM_UP]));
    }

    println!(
        "| query | root p50 ms | root p99 ms | governed user p50 ms | governed user p99 ms | p50 ratio (user / root) |"
    );
    println!("|---|---|---|---|---|---|");
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (name, requests) in kinds {
        let mut times = [Vec::with_capacity(runs), Vec::with_capacity(runs)];
        for (i, (path, body)) in requests.iter().enumerate() {
            // Alternating which reader goes first.
            let order = match i % 2 {
                0 => [0, 1],
                _ => [1, 0],
            };
            for who in order {
                let client = [&root, &analyst][who];
                let started = Instant::now();
                let answer = client
                    .send(
                        "POST",
                        path,
                        "application/json",
                        body.to_string().into_bytes(),
                    )
                    .await;
                let took = started.elapsed();
                std::hint::black_box(answer);
                if i >= WARM_UP {
                    times[who].push(took);
                }
            }
        }
        for list in &mut times {
            list.sort();
        }
        let [root_times, user_times] = &times;
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            ms(percentile(root_times, 0.5)),
            ms(percentile(root_times, 0.99)),
            ms(percentile(user_times, 0.5)),
            ms(percentile(user_times, 0.99)),
            percentile(user_times, 0.5).as_secs_f64() / percentile(root_times, 0.5).as_secs_f64()
        );
    }
    // The governed reader sees fewer records, without the hidden field, the masked one masked.
    let everything = json!({"query": {"match_all": {}}, "track_total_hits": true, "size": 1});
    let seen_by_root = root.search(&everything).await;
    let seen = analyst.search(&everything).await;
    let (all, some) = (
        seen_by_root["hits"]["total"]["value"].as_u64().unwrap(),
        seen["hits"]["total"]["value"].as_u64().unwrap(),
    );
    assert!(some < all && some > all / 2, "{some} of {all}");
    let source = &seen["hits"]["hits"][0]["_source"];
    assert!(source.get("clientip").is_none(), "{source}");
    assert!(
        source["agent"].as_str().unwrap().chars().all(|c| c == '*'),
        "{source}"
    );
    eprintln!("the governed user sees {some} of {all} records");
    drop(server);
}
