//! Resident memory over time under the load that first measured it (issue 21): searchers on the
//! data plane, then bulk writers on the platform, then nothing.
//!
//! `cargo bench -p strata --bench memory -- [--rows 100000] [--seconds 60] [--clients 16]
//! [--writers 4] [--idle 30] [--set key=value ...]`
//!
//! A release `strata serve` gets a data-plane table of `--rows` generated documents (two
//! full-text columns, benches/corpus.rs), settled into segments. Then:
//! 1. search: `--clients` clients for `--seconds`, each alternating a `bm25_search` and a SQL
//!    query (a grouping over the whole table, or a `LIKE` filter);
//! 2. ingest: `--writers` clients for `--seconds` sending NDJSON bulk requests of 1000 new
//!    http-logs records (benches/logs.rs) to a platform dataset, as fast as they are answered;
//! 3. idle: `--idle` seconds of no requests.
//!
//! The server's resident memory is sampled every second. Prints, for docs/benchmarks.md, each
//! phase's resident memory at its start, its peak and its end, the requests answered, and the
//! resident memory every 10 s. `STRATA_BENCH_PRELOAD=/path/to/allocator.so` runs the server
//! with another allocator (LD_PRELOAD, on a server built with `--features system-allocator`,
//! given by `STRATA_BENCH_BIN`), to compare allocators side by side.

// A benchmark program: failing loudly is its error handling, and `Server`'s Drop kills and
// waits for the server it spawns.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::zombie_processes
)]

mod corpus;
#[allow(dead_code)]
mod generator;
#[allow(dead_code)]
mod logs;
#[allow(dead_code)]
mod platform;
#[allow(dead_code)]
mod server;

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use clap::Parser;
use corpus::Corpus;
use platform::{PER_REQUEST, Platform, bulk_bodies};
use serde_json::{Value, json};
use server::Server;

#[derive(Parser)]
struct Args {
    /// Documents in the data-plane table before the phases.
    #[arg(long, default_value_t = 100_000)]
    rows: usize,
    /// How long each of the search and ingest phases runs.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Search clients in phase 1.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Bulk writers in phase 2.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// How long the idle phase lasts.
    #[arg(long, default_value_t = 30)]
    idle: u64,
    /// A configuration key of the server, `key=value` (as `strata serve --set`); repeatable.
    #[arg(long = "set")]
    sets: Vec<String>,
    /// Where the server's data goes (default: under /var/tmp, removed after).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Ignored: cargo bench passes it.
    #[arg(long = "bench", hide = true)]
    bench_flag: bool,
}

const SEED: u64 = 21;
const BATCH_ROWS: usize = 1000;
/// A search client takes every `STEP`-th query from its own start.
const STEP: usize = 7;

fn main() {
    let args = Args::parse();
    let dir = args.dir.clone();
    server::in_scratch("memory", dir.as_deref(), |dir| async move {
        run(&dir, &args).await;
    });
}

/// One sample: seconds since the phases began, the phase, resident bytes (anonymous, and
/// file-backed: mapped index files).
type Sample = (u64, &'static str, (u64, u64));

async fn run(dir: &Path, args: &Args) {
    let sets: Vec<&str> = args
        .sets
        .iter()
        .flat_map(|set| ["--set", set.as_str()])
        .collect();
    let started = Server::start(dir, &sets);
    let fresh = started.rss_parts();
    let server = Arc::new(started);
    let http = reqwest::Client::new();
    let platform = Platform::of(&server, dir);
    server
        .post(&http, "/v1/databases", &json!({"name": "bench"}))
        .await;
    let mut table = Corpus::table_request("docs");
    let object = table.as_object_mut().unwrap();
    object.remove("vector_column");
    object.remove("vector_metric");
    object["schema"].as_array_mut().unwrap().pop();
    server.post(&http, "/v1/create_table/bench", &table).await;
    let corpus = Arc::new(Corpus::new(SEED));
    for index in 0..args.rows.div_ceil(BATCH_ROWS) {
        let rows = BATCH_ROWS.min(args.rows - index * BATCH_ROWS);
        let batch = corpus.batch(index, rows);
        let batch = batch.project(&[0, 1, 2]).unwrap();
        server
            .append_ipc(&http, "docs", generator::ipc(&batch))
            .await;
    }
    server::settle(&dir.join("tables"), args.rows).await;
    eprintln!("{} rows loaded and settled", args.rows);
    let records = Arc::new(bulk_bodies(&logs::records(SEED, 200 * PER_REQUEST)));

    let begun = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut summary = Vec::new();
    let searched = run_phase(&server, begun, "search", args.seconds, &mut samples, {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let clients: Vec<_> = (0..args.clients)
            .map(|n| {
                let (server, http, corpus) = (server.clone(), http.clone(), corpus.clone());
                let (stop, done) = (stop.clone(), done.clone());
                tokio::spawn(async move {
                    let mut i = n;
                    while !stop.load(Ordering::Relaxed) {
                        search(&server, &http, &corpus, i).await;
                        done.fetch_add(1, Ordering::Relaxed);
                        i += STEP;
                    }
                })
            })
            .collect();
        (stop, done, clients)
    })
    .await;
    summary.push(("search", searched));
    let ingested = run_phase(&server, begun, "ingest", args.seconds, &mut samples, {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let next = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..args.writers)
            .map(|_| {
                let (platform, records) = (platform.clone(), records.clone());
                let (stop, done, next) = (stop.clone(), done.clone(), next.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        platform.bulk(records[i % records.len()].clone()).await;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        (stop, done, writers)
    })
    .await;
    summary.push(("ingest", ingested));
    let idle = run_phase(&server, begun, "idle", args.idle, &mut samples, {
        (Arc::default(), Arc::default(), Vec::new())
    })
    .await;
    summary.push(("idle", idle));

    let mib = |(anon, file): (u64, u64)| format!("{} + {}", anon >> 20, file >> 20);
    println!(
        "resident memory of a fresh server: {} MiB; after loading {} rows: {} MiB \
         (anonymous + file-backed)\n",
        mib(fresh),
        args.rows,
        samples.first().map_or_else(String::new, |s| mib(s.2))
    );
    println!(
        "| phase | seconds | requests answered | RSS at start MiB | peak MiB | at end MiB | peak anonymous MiB |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (phase, (requests, seconds)) in summary {
        let of: Vec<(u64, u64)> = samples
            .iter()
            .filter(|s| s.1 == phase)
            .map(|s| s.2)
            .collect();
        let total = |(anon, file): &(u64, u64)| (anon + file) >> 20;
        println!(
            "| {phase} | {seconds} | {requests} | {} | {} | {} | {} |",
            mib(of[0]),
            of.iter().map(total).max().unwrap(),
            mib(*of.last().unwrap()),
            of.iter().map(|s| s.0 >> 20).max().unwrap(),
        );
    }
    let series: Vec<String> = samples
        .iter()
        .filter(|s| s.0 % 10 == 0)
        .map(|s| format!("{}s {} {}", s.0, s.1, mib(s.2)))
        .collect();
    println!(
        "\nresident MiB (anonymous + file-backed) every 10 s: {}",
        series.join(", ")
    );
}

type Load = (
    Arc<AtomicBool>,
    Arc<AtomicUsize>,
    Vec<tokio::task::JoinHandle<()>>,
);

/// Runs `load` for `seconds`, sampling the server's resident memory every second; the
/// requests answered and the seconds run.
async fn run_phase(
    server: &Server,
    begun: Instant,
    phase: &'static str,
    seconds: u64,
    samples: &mut Vec<Sample>,
    (stop, done, tasks): Load,
) -> (usize, u64) {
    let ends = Instant::now() + Duration::from_secs(seconds);
    loop {
        samples.push((begun.elapsed().as_secs(), phase, server.rss_parts()));
        if Instant::now() >= ends {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    (done.load(Ordering::Relaxed), seconds)
}

/// The `i`-th request of a search client: a bm25_search, or one of two SQL queries.
async fn search(server: &Server, http: &reqwest::Client, corpus: &Corpus, i: usize) {
    let (words, _) = corpus.query(i);
    let word = words.split(' ').next().unwrap().to_owned();
    let (path, body) = match i % 4 {
        0 | 2 => (
            "/v1/bm25_search/bench",
            json!({"table": "docs", "query": words, "limit": 10}),
        ),
        1 => (
            "/v1/query_sql/bench",
            json!({"sql": "SELECT length(title) % 10 AS bucket, COUNT(*) AS n, AVG(length(body)) AS body FROM docs GROUP BY bucket ORDER BY bucket"}),
        ),
        _ => (
            "/v1/query_sql/bench",
            json!({"sql": format!("SELECT id, title FROM docs WHERE body LIKE '%{word}%' ORDER BY id LIMIT 20")}),
        ),
    };
    let answer: Value = server.post(http, path, &body).await;
    assert!(answer["data"].is_array(), "{answer}");
}
