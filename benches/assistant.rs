//! What planning adds to answering a question (issue 26, point 7): the question set's
//! questions (tests/assistant/questions.json, those with an expected query), each answered as a
//! thread's question is (schema from the cache, plan, SQL or PromQL run with the asker's rights,
//! answer worded), against running its expected query directly through the same runner, in
//! the same run, interleaved.
//!
//! `cargo bench -p strata --bench assistant -- [--rounds 20]`
//!
//! The datasets are seeded over HTTP into a release `strata serve` (tests/assistant/seed.rs),
//! which is then stopped; the engine is opened in this process on its data directory, so that
//! what is timed is the answering itself, without HTTP or the thread's two log writes. Prints a
//! markdown table for docs/benchmarks.md: p50 and p99 of both, and of the difference per
//! question (answer minus expected query, paired).

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
#[path = "../tests/assistant/seed.rs"]
mod seed;
#[allow(dead_code)]
mod server;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use clap::Parser;
use platform::Platform;
use serde_json::{Value, json};
use server::Server;
use strata::{
    assistant::Assistant,
    config::Config,
    engine::{Engine, Grant, PlatformPrincipal},
    metrics::Metrics,
    queries,
};

#[derive(Parser)]
struct Args {
    /// Times each question is answered (and its expected query run).
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Ignored: cargo bench passes it.
    #[arg(long, hide = true)]
    bench: bool,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// The expected query of a case, as the runner takes it.
fn expected(case: &Value) -> Option<Value> {
    if let Some(statement) = case["sql"].as_str() {
        return Some(json!({"type": "sql", "statement": statement}));
    }
    case["promql"]
        .as_str()
        .map(|expr| json!({"type": "promql", "query": expr, "index": "telemetry"}))
}

fn main() {
    let args = Args::parse();
    server::in_scratch("assistant", None, |dir| async move {
        {
            let server = Server::start(&dir, &[]);
            let platform = Platform::of(&server, &dir);
            let (lines, metrics) = seed::lines();
            let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let answer = platform
                .send("POST", "/_bulk", "application/x-ndjson", body.into_bytes())
                .await;
            assert_eq!(answer["errors"], json!(false), "{answer}");
            platform
                .send(
                    "POST",
                    "/telemetry/metrics",
                    "text/plain",
                    metrics.into_bytes(),
                )
                .await;
        }
        let config = Config {
            data_dir: dir.clone(),
            ..Config::default()
        };
        let engine: Arc<Engine> = Engine::open(Arc::new(config), Arc::new(Metrics::new()))
            .await
            .unwrap();
        let assistant = Assistant::new(engine.clone()).unwrap();
        let root = PlatformPrincipal {
            account: "bench".to_owned(),
            user: "root".to_owned(),
            access_key: String::new(),
            root: true,
            grant: Arc::new(Grant::everything()),
        };
        let cases: Vec<Value> =
            serde_json::from_str(include_str!("../tests/assistant/questions.json")).unwrap();
        // Standalone questions with an expected query (a follow-up needs its thread's plan),
        // over the seeded datasets (the PostgreSQL table of the test is not made here).
        let cases: Vec<(&str, &str, Value)> = cases
            .iter()
            .filter(|c| c["follows"] != true && c.get("connection").is_none())
            .filter_map(|c| {
                Some((
                    c["dataset"].as_str()?,
                    c["question"].as_str()?,
                    expected(c)?,
                ))
            })
            .collect();
        let quiet = |_: &str| {};
        // Warm the schema cache and the query paths once.
        for (dataset, question, query) in &cases {
            assistant
                .answer_question(&root, dataset, question, None, &quiet)
                .await
                .unwrap();
            queries::run(&engine, &root, query).await.unwrap();
        }
        let (mut answered, mut direct, mut added) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..args.rounds {
            for (dataset, question, query) in &cases {
                let started = Instant::now();
                let answer = assistant
                    .answer_question(&root, dataset, question, None, &quiet)
                    .await
                    .unwrap();
                let a = started.elapsed();
                assert!(answer.get("query").is_some(), "{question}: {answer}");
                let started = Instant::now();
                queries::run(&engine, &root, query).await.unwrap();
                let d = started.elapsed();
                answered.push(a);
                direct.push(d);
                added.push(a.saturating_sub(d));
            }
        }
        for list in [&mut answered, &mut direct, &mut added] {
            list.sort();
        }
        println!(
            "{} questions x {} rounds, in process (no HTTP, no thread writes)\n",
            cases.len(),
            args.rounds
        );
        println!("| | p50 ms | p99 ms |");
        println!("|---|---|---|");
        for (what, list) in [
            ("expected query run directly (baseline)", &direct),
            (
                "question answered (schema cached, plan, run, words)",
                &answered,
            ),
            ("added by answering (paired difference)", &added),
        ] {
            println!(
                "| {what} | {} | {} |",
                ms(percentile(list, 0.5)),
                ms(percentile(list, 0.99))
            );
        }
        println!(
            "\nratio of p50s: {:.2}",
            percentile(&answered, 0.5).as_secs_f64() / percentile(&direct, 0.5).as_secs_f64()
        );
    });
}
