//! The console's weight and speed (issue 27, point 6), in Debian's Chromium driven by
//! playwright-core (benches/console/measure.mjs; the modules scripts/test installs):
//! - its first load over loopback, every asset, in a fresh browser context each round: bytes on
//!   the wire (compressed) and in all, and the milliseconds until the sign-in form is drawn,
//!   against a plain page with no script drawn in the same browser (the browser's floor);
//! - a query result of 10,000 rows shown in the Query page's table (from Ctrl+Enter to the
//!   table drawn), against a plain page of the same origin that fetches the same rows from the
//!   same endpoint and draws all of them as an HTML table; and the fetch alone.
//!
//! `cargo bench -p strata --bench console -- [--rounds 10]`
//!
//! Prints a markdown table for docs/benchmarks.md.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::zombie_processes
)]

#[allow(dead_code)]
mod generator;
#[allow(dead_code)]
mod platform;
#[allow(dead_code)]
mod server;

use clap::Parser;
use platform::Platform;
use serde_json::Value;
use server::Server;

#[derive(Parser)]
struct Args {
    /// Rounds of each measurement.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Rows of the query result.
    #[arg(long, default_value_t = 10_000)]
    rows: usize,
    /// Where playwright-core is (scripts/test installs it there).
    #[arg(long, env = "STRATA_TEST_NODE_MODULES")]
    node_modules: Option<String>,
    /// Ignored: cargo bench passes it.
    #[arg(long, hide = true)]
    bench: bool,
}

const PASSWORD: &str = "bench-horse-battery";

fn main() {
    let args = Args::parse();
    let modules = args.node_modules.clone().unwrap_or_else(|| {
        format!(
            "{}/.cache/strata/node/node_modules",
            std::env::var("HOME").unwrap()
        )
    });
    server::in_scratch("console", None, |dir| async move {
        let server = Server::start(&dir, &[]);
        let root = Platform::of(&server, &dir);
        // The rows: six columns of the kinds logs have.
        let levels = ["info", "warn", "error"];
        let records: Vec<String> = (0..args.rows)
            .map(|i| {
                serde_json::json!({
                    "@timestamp": format!("2026-11-01T{:02}:{:02}:{:02}Z", i / 3600 % 24, i / 60 % 60, i % 60),
                    "host": format!("host-{}", i % 37),
                    "level": levels[i % 3],
                    "status": 200 + (i % 5) * 100,
                    "bytes": i * 17 % 100_000,
                    "message": format!("request {i} served from cache shard {}", i % 11),
                })
                .to_string()
            })
            .collect();
        for body in platform::bulk_bodies(&records) {
            root.bulk(body).await;
        }
        // Until every record is in a segment the query reads.
        let count =
            serde_json::json!({"query": format!("SELECT COUNT(*) FROM {}", platform::DATASET)});
        loop {
            let answer = root
                .send(
                    "POST",
                    "/sql",
                    "application/json",
                    count.to_string().into_bytes(),
                )
                .await;
            if answer["rows"][0][0].as_u64() == Some(args.rows as u64) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        root.send(
            "PATCH",
            "/user/root",
            "application/yaml",
            format!("Version: 2025-01-01\nPassword: {PASSWORD}\n").into_bytes(),
        )
        .await;
        let out = std::process::Command::new("node")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/benches/console/measure.mjs"
            ))
            .env("STRATA_URL", &server.platform_url)
            .env("STRATA_ROOT_PASSWORD", PASSWORD)
            .env("STRATA_TEST_NODE_MODULES", &modules)
            .env("STRATA_ROUNDS", args.rounds.to_string())
            .env(
                "STRATA_QUERY",
                format!("SELECT * FROM {} LIMIT {}", platform::DATASET, args.rows),
            )
            .env("STRATA_ROWS", args.rows.to_string())
            .output()
            .expect("node runs");
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let figures: Value = serde_json::from_slice(&out.stdout).unwrap();
        report(&figures, args.rounds, args.rows);
    });
}

fn report(figures: &Value, rounds: usize, rows: usize) {
    let ms = |v: &Value| v.as_f64().unwrap();
    let load = &figures["load"];
    let kb = |key: &str| load[key].as_f64().unwrap() / 1024.0;
    println!("| what ({rounds} rounds, p50) | the console | the baseline | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| first load: bytes on the wire, all {} responses | {:.1} KB | target 300 KB | {:.2} of the target |",
        load["responses"],
        kb("wire_bytes"),
        kb("wire_bytes") / 300.0
    );
    println!(
        "| first load: bytes once inflated | {:.1} KB | | {:.2} compressed |",
        kb("body_bytes"),
        kb("wire_bytes") / kb("body_bytes")
    );
    println!(
        "| first load: ms to the sign-in form drawn | {:.1} ms | {:.1} ms (a plain page, no script) | {:.2} |",
        ms(&load["console_ms"]),
        ms(&load["plain_ms"]),
        ms(&load["console_ms"]) / ms(&load["plain_ms"])
    );
    let render = &figures["render"];
    println!(
        "| {rows} rows: Ctrl+Enter to the table drawn | {:.1} ms | {:.1} ms (fetch, all rows as an HTML table) | {:.2} |",
        ms(&render["console_ms"]),
        ms(&render["plain_ms"]),
        ms(&render["console_ms"]) / ms(&render["plain_ms"])
    );
    println!(
        "| {rows} rows: the fetch alone (POST /sql, JSON parsed) | {:.1} ms | | {:.2} of the baseline |",
        ms(&render["fetch_ms"]),
        ms(&render["fetch_ms"]) / ms(&render["plain_ms"])
    );
    println!(
        "| {rows} rows: sorted by a column in the console's table | {:.1} ms | | {:.2} of the baseline |",
        ms(&render["sort_ms"]),
        ms(&render["sort_ms"]) / ms(&render["plain_ms"])
    );
}
