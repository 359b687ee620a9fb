//! Search under ingest: platform `_search` latency with and without concurrent NDJSON bulk
//! writers, in one run, over the same server and dataset.
//!
//! `cargo bench -p strata --bench contention -- [--docs 200000] [--seconds 30] [--searchers 16]
//! [--writers 4]`
//!
//! A release `strata serve` is loaded with `--docs` generated http-logs records (benches/logs.rs)
//! and left to settle into segments. Then, for `--seconds` each:
//! 1. quiet: `--searchers` clients search in a loop (a `match` on the request line and a `term`
//!    on the status, alternately, with `track_total_hits`); this is the baseline;
//! 2. under ingest: the same searchers while `--writers` clients send bulk requests of 1000 new
//!    records each, as fast as they are answered.
//!
//! Prints, for docs/benchmarks.md, search p50, p99 and the largest latency of each phase, the
//! searches answered, the records ingested in phase 2, and phase 2's p99 as a ratio to phase 1's;
//! and the server's resident memory (sampled every 250 ms): after the load, at its peak in each
//! phase, and idle 30 s after the last phase. `STRATA_BENCH_PRELOAD=/path/to/allocator.so` runs
//! the server with another allocator (LD_PRELOAD), to compare allocators side by side.

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
use platform::{PER_REQUEST, Platform, bulk_bodies};
use serde_json::json;
use server::Server;

#[derive(Parser)]
struct Args {
    /// Records loaded before the phases.
    #[arg(long, default_value_t = 200_000)]
    docs: usize,
    /// How long each phase runs.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    #[arg(long, default_value_t = 16)]
    searchers: usize,
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Where the server's data goes (default: under /var/tmp, removed after).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Ignored: cargo bench passes it.
    #[arg(long = "bench", hide = true)]
    bench_flag: bool,
}

const SEED: u64 = 2026;

fn main() {
    let args = Args::parse();
    let dir = args.dir.clone();
    server::in_scratch("contention", dir.as_deref(), |dir| async move {
        run(&dir, &args).await;
    });
}

async fn run(dir: &Path, args: &Args) {
    // The preload and the records the writers send in phase 2 (over and over: each is indexed
    // as a new record), generated up front.
    let written = 100 * PER_REQUEST;
    let records = logs::records(SEED, args.docs + written);
    let (preload, later) = records.split_at(args.docs);
    let server = Server::start(dir, &[]);
    let platform = Platform::of(&server, dir);
    let bodies = bulk_bodies(preload);
    for body in bodies {
        platform.bulk(body).await;
    }
    server::settle(&dir.join("tables"), args.docs).await;
    let loaded = server.rss_bytes();
    eprintln!("{} records loaded and settled", args.docs);

    let quiet = phase(&server, &platform, args, None).await;
    let writes = Arc::new(bulk_bodies(later));
    let busy = phase(&server, &platform, args, Some(writes)).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let idle = server.rss_bytes();

    println!(
        "| phase | searches | p50 ms | p99 ms | max ms | records ingested | p99 ratio | peak RSS MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, result) in [("quiet", &quiet), ("under ingest", &busy)] {
        println!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} | {} | {:.2} | {} |",
            result.latencies.len(),
            ms(percentile(&result.latencies, 0.50)),
            ms(percentile(&result.latencies, 0.99)),
            ms(*result.latencies.last().unwrap()),
            result.ingested,
            ms(percentile(&result.latencies, 0.99)) / ms(percentile(&quiet.latencies, 0.99)),
            result.peak_rss >> 20,
        );
    }
    println!(
        "\nresident memory: {} MiB after the load, {} MiB idle 30 s after the last phase",
        loaded >> 20,
        idle >> 20
    );
}

struct Phase {
    /// Sorted.
    latencies: Vec<Duration>,
    ingested: usize,
    peak_rss: u64,
}

/// Searchers for `args.seconds`, with writers sending `writes` meanwhile when given.
async fn phase(
    server: &Server,
    platform: &Platform,
    args: &Args,
    writes: Option<Arc<Vec<Vec<u8>>>>,
) -> Phase {
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = writes
        .into_iter()
        .flat_map(|bodies| (0..args.writers).map(move |_| (bodies.clone(), platform.clone())))
        .map(|(bodies, platform)| {
            let (stop, next) = (stop.clone(), next.clone());
            tokio::spawn(async move {
                let mut sent = 0;
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    platform.bulk(bodies[i % bodies.len()].clone()).await;
                    sent += PER_REQUEST;
                }
                sent
            })
        })
        .collect();
    let searchers: Vec<_> = (0..args.searchers)
        .map(|n| {
            let (platform, stop) = (platform.clone(), stop.clone());
            tokio::spawn(async move {
                let words = logs::query_words();
                let statuses = logs::statuses();
                let mut latencies = Vec::new();
                let mut i = n;
                while !stop.load(Ordering::Relaxed) {
                    let body = if i % 2 == 0 {
                        json!({"query": {"match": {"request": words[i % words.len()]}}, "track_total_hits": true})
                    } else {
                        json!({"query": {"term": {"status": statuses[i % statuses.len()]}}, "track_total_hits": true})
                    };
                    let started = Instant::now();
                    let answer = platform.search(&body).await;
                    latencies.push(started.elapsed());
                    assert!(answer["hits"]["total"]["value"].is_u64(), "{answer}");
                    i += 1;
                }
                latencies
            })
        })
        .collect();
    let mut peak_rss = 0;
    let ends = Instant::now() + Duration::from_secs(args.seconds);
    while Instant::now() < ends {
        peak_rss = peak_rss.max(server.rss_bytes());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for searcher in searchers {
        latencies.extend(searcher.await.unwrap());
    }
    let mut ingested = 0;
    for writer in writers {
        ingested += writer.await.unwrap();
    }
    latencies.sort_unstable();
    Phase {
        latencies,
        ingested,
        peak_rss,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
