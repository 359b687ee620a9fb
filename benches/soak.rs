//! A soak under mixed load (issue 28): `--clients` clients drive a release `strata serve` for
//! `--seconds`, mixing data-plane appends, updates, deletes and searches, bulk ingest, Query
//! DSL, msearch, SQL on both planes, metrics and PromQL, role changes and monitor runs
//! (benches/mixed_load.rs, shared with the short form in tests/soak.rs).
//!
//! `cargo bench -p strata --bench soak -- [--seconds 1800] [--clients 8] [--window 300]
//! [--set key=value ...] [--dir DIR]`
//!
//! Prints, for docs/benchmarks.md: per kind of request, the requests, throughput, p50 and p99,
//! transient refusals, other 4xx and 5xx; p99 per window; the server's resident memory and
//! open files over time; and the verdict against the targets: no 5xx, resident memory growing
//! less than 10% over the last 20 minutes (of a run of 30), p99 stable.

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
mod mixed_load;
#[allow(dead_code)]
mod platform;
#[allow(dead_code)]
mod server;

use std::{path::PathBuf, time::Duration};

use clap::Parser;
use serde_json::Value;

#[derive(Parser)]
struct Args {
    /// How long the load runs.
    #[arg(long, default_value_t = 1800)]
    seconds: u64,
    /// Concurrent clients, each one request at a time.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// The window of the p99-over-time table, in seconds.
    #[arg(long, default_value_t = 300)]
    window: u64,
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

fn main() {
    let args = Args::parse();
    let dir = args.dir.clone();
    server::in_scratch("soak", dir.as_deref(), |dir| async move {
        let sets: Vec<&str> = args
            .sets
            .iter()
            .flat_map(|set| ["--set", set.as_str()])
            .collect();
        let server = server::Server::start(&dir, &sets);
        platform::Platform::of(&server, &dir);
        let user: Value =
            serde_json::from_slice(&std::fs::read(dir.join("root-user.json")).unwrap()).unwrap();
        let target = mixed_load::Target {
            data_url: server.url.clone(),
            key: server.key.clone(),
            platform_url: server.platform_url.clone(),
            access_key: user["access_key"].as_str().unwrap().to_owned(),
            secret_key: user["secret_key"].as_str().unwrap().to_owned(),
            pid: server.pid(),
        };
        mixed_load::prepare(&target).await;
        let report = mixed_load::run(
            &target,
            args.clients,
            Duration::from_secs(args.seconds),
            args.window,
        )
        .await;
        println!("{}", report.markdown());
        let tail = 1200.min(args.seconds * 2 / 3);
        println!(
            "5xx: {}; other 4xx: {}; resident memory over the last {tail} s: {:+.1}%",
            report.server_errors(),
            report.errors(),
            report.rss_growth(tail) * 100.0
        );
        if let Some((op, ratio)) = report.p99_drift() {
            println!(
                "p99 drift, the last window over the second: at most {ratio:.2} ({})",
                op.name()
            );
        }
        for example in report.examples() {
            println!("unexpected: {example}");
        }
    });
}
