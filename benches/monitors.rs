//! The monitor scheduler under load: many monitors with one-minute periods over a large
//! dataset, in a release `strata serve`.
//!
//! `cargo bench -p strata --bench monitors -- [--docs 1000000] [--monitors 1000] [--queries 200]
//!  [--minutes 3]`
//!
//! Loads the seeded http-logs-like corpus (benches/logs.rs) into the dataset `logs`, then
//! measures Query DSL `term` latency (p50, p99; one client, sequentially) with no monitor.
//! Then it creates the monitors, spread over one minute as users create them over time (a
//! period's phase is its creation time), each a Query DSL `term` query on a status (size 0)
//! with a count condition; one in ten fires and alerts a webhook receiver on loopback. While
//! they run for `--minutes`, it measures the same queries again, and at the end reads every
//! monitor's recorded runs (GET /monitor/{id}/runs): the scheduler's lateness is each run's
//! actual start minus its planned start. `--aligned` puts every monitor on the cron
//! `0 * * * * *` instead, all due at the same second. Prints markdown tables for
//! docs/benchmarks.md.

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
#[allow(dead_code)]
mod logs;
#[allow(dead_code)]
mod platform;
#[allow(dead_code)]
mod server;

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use clap::Parser;
use platform::{Platform, bulk_bodies};
use serde_json::json;
use server::Server;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 1_000_000)]
    docs: usize,
    #[arg(long, default_value_t = 1000)]
    monitors: usize,
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// How long the monitors run while the queries are measured again.
    #[arg(long, default_value_t = 3)]
    minutes: u64,
    /// Every monitor on the cron `0 * * * * *` (all due at the same second, the worst case)
    /// instead of periods spread over the minute.
    #[arg(long)]
    aligned: bool,
    /// Where the server's data goes (default: under /var/tmp, removed after).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// Ignored: cargo bench passes it.
    #[arg(long, hide = true)]
    bench_flag: bool,
}

const SEED: u64 = 1998;
const WARM_UP: usize = 20;

fn main() {
    let args = Args::parse_from(std::env::args().filter(|a| a != "--bench"));
    let dir = args.dir.clone();
    server::in_scratch("monitors", dir.as_deref(), |scratch| async move {
        run(&scratch, &args).await;
    });
}

/// A loopback webhook receiver that counts what it is sent; its URL.
async fn receiver(count: Arc<AtomicU64>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let count = count.clone();
            async move {
                count.fetch_add(1, Ordering::Relaxed);
                "ok"
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// p50 and p99 of `times`, in milliseconds.
fn percentiles(times: &mut [f64]) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

/// `queries` `term` searches, one after another, after a warm-up: p50 and p99 ms.
async fn term_latency(client: &Platform, queries: usize) -> (f64, f64) {
    let statuses = logs::statuses();
    let mut times = Vec::with_capacity(queries);
    for i in 0..queries + WARM_UP {
        let body = json!({"query": {"term": {"status": statuses[i % statuses.len()]}}});
        let started = Instant::now();
        std::hint::black_box(client.search(&body).await);
        if i >= WARM_UP {
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    percentiles(&mut times)
}

async fn run(dir: &Path, args: &Args) {
    let records = logs::records(SEED, args.docs);
    let bodies = Arc::new(bulk_bodies(&records));
    drop(records);
    let server = Server::start(dir, &["--set", "tables.flush_age_ms=500"]);
    let root = Platform::of(&server, dir);
    let next = Arc::new(AtomicUsize::new(0));
    let loaders: Vec<_> = (0..4)
        .map(|_| {
            let (root, bodies, next) = (root.clone(), bodies.clone(), next.clone());
            tokio::spawn(async move {
                while let Some(body) = bodies.get(next.fetch_add(1, Ordering::Relaxed)) {
                    root.bulk(body.clone()).await;
                }
            })
        })
        .collect();
    for loader in loaders {
        loader.await.unwrap();
    }
    server::wait_for_segment_rows(&dir.join("tables"), args.docs).await;
    server::settle(&dir.join("tables"), args.docs).await;

    let idle = term_latency(&root, args.queries).await;

    let delivered = Arc::new(AtomicU64::new(0));
    let url = receiver(delivered.clone()).await;
    let channel = json!({"channel_id": "hook", "config": {"name": "hook", "channel_type": "webhook", "webhook": {"url": url}}});
    root.send(
        "POST",
        "/alert",
        "application/json",
        channel.to_string().into_bytes(),
    )
    .await;
    let statuses = logs::statuses();
    let spread = Duration::from_secs(60).div_f64(args.monitors as f64);
    let created_at = Instant::now();
    for i in 0..args.monitors {
        let fires = i % 10 == 0;
        let schedule = match args.aligned {
            true => json!({"cron": {"expression": "0 * * * * *"}}),
            false => json!({"period": {"interval": 1, "unit": "MINUTES"}}),
        };
        let monitor = json!({
            "_id": format!("m{i}"),
            "name": format!("status watch {i}"),
            "schedule": schedule,
            "query": {"type": "querydsl", "datasets": ["logs"],
                      "body": {"size": 0, "query": {"term": {"status": statuses[i % statuses.len()]}}}},
            "triggers": [{
                "name": "seen",
                "severity": 3,
                "condition": {"type": "count_greater_than", "threshold": if fires { 0 } else { 1_000_000_000 }},
                "actions": [{"id": "a", "name": "notify", "destination_id": "hook",
                             "subject_template": {"source": "{{monitor.name}}"},
                             "message_template": {"source": "{{ctx.results.0.hits.total.value}} hits"}}],
            }],
        });
        root.send(
            "POST",
            "/monitor",
            "application/json",
            monitor.to_string().into_bytes(),
        )
        .await;
        let due = spread.mul_f64((i + 1) as f64);
        if let Some(wait) = due.checked_sub(created_at.elapsed())
            && !args.aligned
        {
            tokio::time::sleep(wait).await;
        }
    }
    // Every monitor runs once a minute from one minute after its creation: measure while all
    // of them are running.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let measured_from = Instant::now();
    let loaded = term_latency(&root, args.queries).await;
    let left = Duration::from_secs(args.minutes * 60).saturating_sub(measured_from.elapsed());
    tokio::time::sleep(left).await;

    let mut lateness = Vec::new();
    let mut runs = 0usize;
    let mut errors = 0usize;
    for i in 0..args.monitors {
        let answer = root
            .send(
                "GET",
                &format!("/monitor/m{i}/runs"),
                "application/json",
                Vec::new(),
            )
            .await;
        for run in answer["runs"].as_array().into_iter().flatten() {
            let time = |key: &str| {
                chrono::DateTime::parse_from_rfc3339(run[key].as_str().unwrap())
                    .unwrap()
                    .timestamp_micros()
            };
            runs += 1;
            if !run["error"].is_null() {
                errors += 1;
            }
            lateness.push((time("start_time") - time("planned_time")) as f64 / 1000.0);
        }
    }
    let (late50, late99) = percentiles(&mut lateness);
    let late_max = lateness.last().copied().unwrap_or_default();
    let how = match args.aligned {
        true => "on the cron `0 * * * * *` (all due at once)",
        false => "with 1-minute periods created over one minute",
    };
    println!(
        "{} records; {} monitors {how}; {} minutes",
        args.docs, args.monitors, args.minutes
    );
    println!();
    println!(
        "| scheduler lateness (start − planned) | p50 ms | p99 ms | max ms | runs | run errors | alerts delivered |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {} monitors | {late50:.1} | {late99:.1} | {late_max:.1} | {runs} | {errors} | {} |",
        args.monitors,
        delivered.load(Ordering::Relaxed)
    );
    println!();
    println!("| Query DSL `term`, one client | p50 ms | p99 ms | p50 ratio to no monitors |");
    println!("|---|---|---|---|");
    println!("| no monitors | {:.2} | {:.2} | 1.00 |", idle.0, idle.1);
    println!(
        "| {} monitors running | {:.2} | {:.2} | {:.2} |",
        args.monitors,
        loaded.0,
        loaded.1,
        loaded.0 / idle.0
    );
    drop(server);
}
