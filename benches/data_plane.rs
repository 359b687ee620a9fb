//! Data-plane benchmarks, each next to a baseline doing the same work without strata, in the
//! same run. Rows come from a seeded generator (benches/generator.rs), so runs are comparable.
//!
//! `cargo bench -p strata --bench data_plane -- append [--batches 100]`
//!   Append throughput: 10k-row Arrow IPC batches of 8 columns POSTed to a release `strata serve`
//!   (durable in the log before each answer, flushed to Parquet segments in the background),
//!   against writing the same batches straight to Parquet files (same writer settings as the
//!   segments, each file synced).
//!
//! `cargo bench -p strata --bench data_plane -- groupby [--rows 10000000] [--runs 5]`
//!   A GROUP BY with aggregates over N rows through query_sql, against DataFusion reading the
//!   same Parquet segment files directly in this process.
//!
//! Both print a markdown table for docs/benchmarks.md.

// A benchmark program: failing loudly is its error handling, and `Server`'s Drop kills and
// waits for the server it spawns.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::zombie_processes
)]

mod generator;
mod server;

use std::{
    io::Write,
    path::{Path, PathBuf},
    time::Instant,
};

use server::Server;

use clap::{Parser, Subcommand};
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    bench: Bench,
    /// Where the server's data and the baseline's files go (default: under /var/tmp).
    #[arg(long, global = true)]
    dir: Option<PathBuf>,
    /// Ignored: cargo bench passes it.
    #[arg(long, hide = true, global = true)]
    bench_flag: bool,
}

#[derive(Subcommand)]
enum Bench {
    Append {
        #[arg(long, default_value_t = 100)]
        batches: usize,
    },
    Groupby {
        #[arg(long, default_value_t = 10_000_000)]
        rows: usize,
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
}

const BATCH_ROWS: usize = 10_000;
const QUERY: &str = "SELECT category, count(*) AS n, sum(amount) AS total, avg(quantity) AS mean_quantity \
     FROM sales GROUP BY category ORDER BY category";

fn main() {
    let args = Args::parse_from(std::env::args().filter(|a| a != "--bench"));
    let dir = args.dir.clone();
    server::in_scratch("bench", dir.as_deref(), |scratch| async move {
        match args.bench {
            Bench::Append { batches } => append(&scratch, batches).await,
            Bench::Groupby { rows, runs } => groupby(&scratch, rows, runs).await,
        }
    });
}

/// Database `bench` with table `sales`.
async fn setup(server: &Server, http: &reqwest::Client) {
    server
        .post(http, "/v1/databases", &json!({"name": "bench"}))
        .await;
    server
        .post(
            http,
            "/v1/create_table/bench",
            &generator::table_request("sales"),
        )
        .await;
}

async fn append(scratch: &Path, batches: usize) {
    let data = generator::Generator::new(42);
    let ipc: Vec<Vec<u8>> = (0..batches)
        .map(|i| generator::ipc(&data.batch(i, BATCH_ROWS)))
        .collect();
    let rows = batches * BATCH_ROWS;

    // Baseline: the same batches, straight to Parquet files, each synced.
    let files = scratch.join("parquet");
    std::fs::create_dir_all(&files).unwrap();
    let decoded: Vec<_> = (0..batches).map(|i| data.batch(i, BATCH_ROWS)).collect();
    let started = Instant::now();
    for (i, batch) in decoded.iter().enumerate() {
        let bytes = generator::parquet(batch);
        let path = files.join(format!("{i}.parquet"));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&bytes).unwrap();
        file.sync_data().unwrap();
    }
    let baseline = started.elapsed();

    // strata: one client, one table, each append durable before the next; the memtable is
    // flushed to Parquet in the background every 100k rows (10 appends).
    let server_dir = scratch.join("server");
    let server = Server::start(&server_dir, &["--set", "tables.flush_rows=100000"]);
    let http = reqwest::Client::new();
    setup(&server, &http).await;
    let times = server::timed_appends(
        &server,
        &http,
        "sales",
        ipc,
        &server_dir.join("tables"),
        rows,
    )
    .await;
    server::append_table(
        "Parquet files written and synced directly",
        "every row is in a Parquet segment",
        rows,
        baseline,
        times,
    );
}

async fn groupby(scratch: &Path, rows: usize, runs: usize) {
    let data = generator::Generator::new(7);
    let server_dir = scratch.join("server");
    // Flush soon and compact small segments, so the rows settle into a few large segments.
    let server = Server::start(
        &server_dir,
        &[
            "--set",
            "tables.flush_age_ms=200",
            "--set",
            "tables.flush_rows=1000000",
        ],
    );
    let http = reqwest::Client::new();
    setup(&server, &http).await;
    let load_batch = 100_000;
    let loading = Instant::now();
    for i in 0..rows.div_ceil(load_batch) {
        let n = load_batch.min(rows - i * load_batch);
        server
            .append_ipc(&http, "sales", generator::ipc(&data.batch(i, n)))
            .await;
    }
    eprintln!(
        "loaded {rows} rows in {:.1}s",
        loading.elapsed().as_secs_f64()
    );
    // Wait until every row is in a segment and compaction is done.
    let segments = server::settle(&server_dir.join("tables"), rows).await;
    eprintln!("{} segment files", segments.len());

    let baseline = SessionContext::new();
    baseline
        .register_parquet(
            "sales",
            segments[0].parent().unwrap().to_str().unwrap(),
            ParquetReadOptions::default(),
        )
        .await
        .unwrap();
    let mut times_baseline = Vec::new();
    let mut times_strata = Vec::new();
    let mut answers = (Value::Null, Value::Null);
    for _ in 0..runs {
        let started = Instant::now();
        let batches = baseline.sql(QUERY).await.unwrap().collect().await.unwrap();
        times_baseline.push(started.elapsed());
        answers.0 = json!(batches.iter().map(|b| b.num_rows()).sum::<usize>());

        let started = Instant::now();
        let result = server
            .post(&http, "/v1/query_sql/bench", &json!({"sql": QUERY}))
            .await;
        times_strata.push(started.elapsed());
        answers.1 = json!(result["data"].as_array().map_or(0, Vec::len));
    }
    assert_eq!(answers.0, answers.1, "both sides must find the same groups");
    times_baseline.sort();
    times_strata.sort();
    let (b, s) = (times_baseline[runs / 2], times_strata[runs / 2]);
    println!("| what | rows | median ms of {runs} | ratio to baseline |");
    println!("|---|---|---|---|");
    println!(
        "| DataFusion over the segment files directly | {rows} | {:.1} | 1.00 (baseline) |",
        b.as_secs_f64() * 1e3
    );
    println!(
        "| strata query_sql (HTTP, JSON answer) | {rows} | {:.1} | {:.2} |",
        s.as_secs_f64() * 1e3,
        s.as_secs_f64() / b.as_secs_f64()
    );
}
