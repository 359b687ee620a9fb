//! PromQL against Prometheus itself, on the same generated series (issue 8, point 8).
//!
//! `cargo bench -p strata --bench promql -- [--series 10000] [--hours 24] [--runs 10]`
//!
//! The data: `http_requests_total` counters, `--series` of them (labels `job`, 10 values;
//! `instance`, 100; `code`, the rest), one sample every 15 s for `--hours` hours from
//! 2026-01-01T00:00:00Z, counting up by a seeded random 0 to 20 (fractions included) a sample, with a rare reset.
//!
//! - Prometheus (the `prometheus` and `promtool` of the machine; `apt-get install prometheus`)
//!   gets the data as blocks, from an OpenMetrics file through
//!   `promtool tsdb create-blocks-from openmetrics`, and serves it on loopback.
//! - strata (a release `strata serve`) gets it by remote write, one request per 10 minutes of
//!   data (every series, 40 samples each), timed: samples/s until acknowledged. The same
//!   requests go to a fresh Prometheus with its remote-write receiver on, timed the same way:
//!   the ingestion baseline. Then text-format ingestion (`POST /{dataset}/metrics`, one body
//!   per scrape of every series) of the first hour, against the same baseline.
//! - Then each range query of [`QUERIES`] runs `--runs` times on both, alternating, one at a
//!   time; both answers must agree (the same series, values within 1e-6 relative). p50 and p99
//!   latency of each, and strata's p50 as a ratio to Prometheus'.
//!
//! Prints markdown tables for docs/benchmarks.md.

// A benchmark program: failing loudly is its error handling, and the servers' Drop kills and
// waits for the processes it spawns.
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

use std::{
    collections::BTreeMap,
    io::Write,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use clap::Parser;
use platform::Platform;
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::Value;
use server::Server;
use strata::remote_write::SeriesSamples;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 10_000)]
    series: usize,
    #[arg(long, default_value_t = 24)]
    hours: i64,
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// A directory to work in (kept); a temporary one otherwise.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// With a kept `--dir` whose strata already holds the data: only the queries (to measure
    /// a change to the query path without ingesting again).
    #[arg(long)]
    queries_only: bool,
    /// Only the queries whose text contains this (for work on one of them).
    #[arg(long)]
    only: Option<String>,
    /// Accepted for `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

/// 2026-01-01T00:00:00Z, in Unix seconds.
const START: i64 = 1_767_225_600;
const INTERVAL: i64 = 15;
/// Samples of each series in one remote-write request (10 minutes).
const PER_REQUEST: usize = 40;
const DATASET: &str = "bench";

/// The range queries: the expression, how many hours back from the data's end, the step in
/// seconds.
const QUERIES: &[(&str, i64, i64)] = &[
    (
        "rate(http_requests_total{job=\"job-1\",instance=\"instance-1\"}[5m])",
        24,
        60,
    ),
    ("sum by (job) (rate(http_requests_total[5m]))", 1, 15),
    (
        "sum by (code) (increase(http_requests_total{job=\"job-2\"}[1h]))",
        24,
        300,
    ),
    (
        "topk(5, rate(http_requests_total{code=\"code-9\"}[10m]))",
        6,
        60,
    ),
    (
        "avg_over_time(http_requests_total{instance=\"instance-7\"}[15m])",
        12,
        120,
    ),
    ("http_requests_total{job=\"job-3\",code=\"code-0\"}", 3, 15),
    ("sum(rate(http_requests_total[5m]))", 24, 300),
];

fn series_labels(i: usize) -> Vec<(String, String)> {
    vec![
        ("__name__".into(), "http_requests_total".into()),
        ("job".into(), format!("job-{}", i % 10)),
        ("instance".into(), format!("instance-{}", (i / 10) % 100)),
        ("code".into(), format!("code-{}", i / 1000)),
    ]
}

/// The values of series `i`: one per step.
fn series_values(i: usize, steps: usize) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(i as u64);
    let mut value = f64::from(rng.random_range(0..1000u32));
    (0..steps)
        .map(|_| {
            if rng.random_ratio(1, 4000) {
                value = 0.0;
            } else {
                // Fractional steps, so that no two series tie in `topk`: Prometheus and
                // strata may break a tie differently, and both would be right.
                value += rng.random_range(0.0..20.0);
            }
            value
        })
        .collect()
}

fn main() {
    let args = Args::parse();
    let scratch = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("strata-promql-{}", std::process::id()))
    });
    std::fs::create_dir_all(&scratch).unwrap();
    let steps = (args.hours * 3600 / INTERVAL) as usize;
    println!(
        "{} series, {} h at {INTERVAL} s: {} samples",
        args.series,
        args.hours,
        args.series * steps
    );
    let values: Vec<Vec<f64>> = (0..args.series).map(|i| series_values(i, steps)).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(&args, &scratch, &values, steps));
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
}

async fn run(args: &Args, scratch: &Path, values: &[Vec<f64>], steps: usize) {
    // Prometheus, from blocks.
    let blocks = scratch.join("prometheus");
    if !blocks.join("imported").exists() {
        let file = scratch.join("data.om");
        write_openmetrics(&file, values);
        let out = Command::new("promtool")
            .args(["tsdb", "create-blocks-from", "openmetrics", "-q"])
            .arg(&file)
            .arg(&blocks)
            .output()
            .expect("promtool (apt-get install prometheus)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::remove_file(&file).unwrap();
        std::fs::write(blocks.join("imported"), b"").unwrap();
    }
    let prometheus = Prometheus::start(&blocks, 19_090, false);

    let dir = scratch.join("strata");
    let (_strata, platform) = if args.queries_only {
        let strata = Server::resume(&dir, String::new(), &[]);
        let platform = Platform::load(&strata, &dir);
        (strata, platform)
    } else {
        ingest(scratch, values, steps, &dir).await
    };

    // Queries, once the samples are in segments.
    tokio::time::sleep(Duration::from_secs(15)).await;
    // Between samples (7 s before one), and from the third hour on: Debian's Prometheus is
    // 2.42, whose range windows still include a sample exactly at their start and which
    // extrapolates a rate over a series' first samples otherwise than Prometheus 3 (and
    // strata); between samples and past the longest window from the start, both agree.
    let end = START + (steps as i64 - 1) * INTERVAL - 7;
    println!(
        "\n| query | range | step | Prometheus p50 ms | p99 ms | strata p50 ms | p99 ms | ratio (p50) |\n|---|---|---|---|---|---|---|---|"
    );
    for (query, hours, step) in QUERIES {
        if args
            .only
            .as_ref()
            .is_some_and(|only| !query.contains(only.as_str()))
        {
            continue;
        }
        let from = (end - hours * 3600).max(START + 2 * 3600 - 7);
        let hours = (end - from) as f64 / 3600.0;
        let params = format!("query={}&start={from}&end={end}&step={step}", encode(query),);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for run in 0..args.runs {
            let started = Instant::now();
            let reference = prometheus.query_range(&params).await;
            theirs.push(started.elapsed());
            let started = Instant::now();
            let answer = platform
                .send(
                    "POST",
                    &format!("/api/v1/query_range?index={DATASET}"),
                    "application/x-www-form-urlencoded",
                    params.clone().into_bytes(),
                )
                .await;
            ours.push(started.elapsed());
            if run == 0 {
                agree(query, &reference, &answer);
            }
        }
        let (p50, p99) = percentiles(&mut ours);
        let (b50, b99) = percentiles(&mut theirs);
        println!(
            "| `{query}` | {hours:.1}h | {step}s | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
            ms(b50),
            ms(b99),
            ms(p50),
            ms(p99),
            ms(p50) / ms(b50)
        );
    }
}

/// Writes the data into a fresh Prometheus (the baseline) and a fresh strata in `dir` by remote
/// write, and the first hour into strata by the text format, printing the rates; the strata
/// server and a client of it.
async fn ingest(
    scratch: &Path,
    values: &[Vec<f64>],
    steps: usize,
    dir: &Path,
) -> (Server, Platform) {
    // Ingestion: remote write into strata, and into a fresh Prometheus (the baseline).
    let bodies = remote_write_bodies(values, steps);
    let samples = values.len() * steps;
    let fresh_dir = scratch.join("prometheus-ingest");
    let _ = std::fs::remove_dir_all(&fresh_dir);
    let fresh = Prometheus::start(&fresh_dir, 19_091, true);
    let baseline = send_all(&fresh.base, &bodies, None).await;
    drop(fresh);
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let strata = Server::start(dir, &[]);
    let platform = Platform::of(&strata, dir);
    let took = send_all(
        &strata.platform_url,
        &bodies,
        Some((&platform, &format!("/api/v1/write?index={DATASET}"))),
    )
    .await;
    println!(
        "\n| what | samples | seconds | samples/s | ratio to baseline |\n|---|---|---|---|---|"
    );
    let row = |what: &str, n: usize, took: Duration| {
        let rate = n as f64 / took.as_secs_f64();
        let base = samples as f64 / baseline.as_secs_f64();
        println!(
            "| {what} | {n} | {:.2} | {:.0} | {:.2} |",
            took.as_secs_f64(),
            rate,
            rate / base
        );
    };
    row(
        "Prometheus remote-write receiver (baseline)",
        samples,
        baseline,
    );
    row("strata remote write, until acknowledged", samples, took);
    let hour = (3600 / INTERVAL) as usize;
    let text = text_bodies(values, hour.min(steps));
    let started = Instant::now();
    for body in &text {
        platform
            .send(
                "POST",
                "/text/metrics",
                "text/plain",
                body.clone().into_bytes(),
            )
            .await;
    }
    row(
        "strata text format (first hour), until acknowledged",
        values.len() * hour.min(steps),
        started.elapsed(),
    );

    (strata, platform)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentiles(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

fn encode(text: &str) -> String {
    serde_urlencoded::to_string([("q", text)]).unwrap()[2..].to_owned()
}

/// The OpenMetrics text promtool reads: one family, each series' samples in time order.
fn write_openmetrics(file: &Path, values: &[Vec<f64>]) {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(file).unwrap());
    writeln!(out, "# TYPE http_requests counter").unwrap();
    for (i, series) in values.iter().enumerate() {
        let labels = series_labels(i);
        let text: Vec<String> = labels[1..]
            .iter()
            .map(|(n, v)| format!("{n}=\"{v}\""))
            .collect();
        let prefix = format!("http_requests_total{{{}}}", text.join(","));
        for (k, value) in series.iter().enumerate() {
            writeln!(out, "{prefix} {value} {}", START + k as i64 * INTERVAL).unwrap();
        }
    }
    writeln!(out, "# EOF").unwrap();
    out.flush().unwrap();
}

/// Remote-write bodies: every series, [`PER_REQUEST`] samples each, in time order.
fn remote_write_bodies(values: &[Vec<f64>], steps: usize) -> Vec<Vec<u8>> {
    (0..steps)
        .step_by(PER_REQUEST)
        .map(|from| {
            let to = (from + PER_REQUEST).min(steps);
            let series: Vec<SeriesSamples> = values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let samples = (from..to)
                        .map(|k| ((START + k as i64 * INTERVAL) * 1000, v[k]))
                        .collect();
                    (series_labels(i), samples)
                })
                .collect();
            strata::remote_write::encode(&series)
        })
        .collect()
}

/// Text-format bodies: one per scrape of every series, with timestamps, for `steps` steps.
fn text_bodies(values: &[Vec<f64>], steps: usize) -> Vec<String> {
    (0..steps)
        .map(|k| {
            let mut body = String::with_capacity(values.len() * 80);
            for (i, v) in values.iter().enumerate() {
                let labels = series_labels(i);
                body.push_str(&format!(
                    "http_requests_total{{job=\"{}\",instance=\"{}\",code=\"{}\"}} {} {}\n",
                    labels[1].1,
                    labels[2].1,
                    labels[3].1,
                    v[k],
                    (START + k as i64 * INTERVAL) * 1000
                ));
            }
            body
        })
        .collect()
}

/// Sends every body, one at a time, to Prometheus (unsigned) or strata (signed, at `path`);
/// how long it took.
async fn send_all(base: &str, bodies: &[Vec<u8>], strata: Option<(&Platform, &str)>) -> Duration {
    let http = reqwest::Client::new();
    let started = Instant::now();
    for body in bodies {
        match strata {
            Some((platform, path)) => {
                platform
                    .send_raw("POST", path, "application/x-protobuf", body.clone())
                    .await;
            }
            None => {
                let response = http
                    .post(format!("{base}/api/v1/write"))
                    .header("content-type", "application/x-protobuf")
                    .header("content-encoding", "snappy")
                    .header("x-prometheus-remote-write-version", "0.1.0")
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                let status = response.status();
                assert!(
                    status.is_success(),
                    "{status}: {}",
                    response.text().await.unwrap()
                );
            }
        }
    }
    started.elapsed()
}

/// Both answers hold the same series with the same points.
fn agree(query: &str, reference: &Value, answer: &Value) {
    let points = |answer: &Value| -> BTreeMap<String, Vec<(f64, f64)>> {
        answer["data"]["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{query}: no result in {answer}"))
            .iter()
            .map(|series| {
                let values = series["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        (
                            p[0].as_f64().unwrap(),
                            p[1].as_str().unwrap().parse().unwrap(),
                        )
                    })
                    .collect();
                (series["metric"].to_string(), values)
            })
            .collect()
    };
    let (want, got) = (points(reference), points(answer));
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>(),
        "{query}: the series differ"
    );
    for (series, want) in &want {
        let got = &got[series];
        assert_eq!(
            want.len(),
            got.len(),
            "{query} {series}: point counts differ"
        );
        for ((t1, v1), (t2, v2)) in want.iter().zip(got) {
            let close = v1 == v2 || (v1 - v2).abs() <= 1e-6 * (v1.abs() + v2.abs());
            assert!(
                t1 == t2 && close,
                "{query} {series}: ({t1}, {v1}) != ({t2}, {v2})"
            );
        }
    }
}

/// A Prometheus on loopback over a TSDB directory.
struct Prometheus {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Prometheus {
    fn start(tsdb: &Path, port: u16, receiver: bool) -> Prometheus {
        std::fs::create_dir_all(tsdb).unwrap();
        let config = tsdb.join("prometheus.yml");
        std::fs::write(&config, "global:\n  scrape_interval: 1h\n").unwrap();
        let mut command = Command::new("prometheus");
        command
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--storage.tsdb.retention.time=100y")
            .arg("--query.max-samples=200000000")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(tsdb.join("prometheus.log")).unwrap());
        if receiver {
            command.arg("--web.enable-remote-write-receiver");
        }
        let child = command
            .spawn()
            .expect("prometheus (apt-get install prometheus)");
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let ready = std::process::Command::new("curl")
                .args(["-sf", &format!("{base}/-/ready")])
                .output()
                .is_ok_and(|o| o.status.success());
            if ready {
                break;
            }
            assert!(Instant::now() < deadline, "prometheus did not start");
            std::thread::sleep(Duration::from_millis(200));
        }
        Prometheus {
            child,
            base,
            http: reqwest::Client::new(),
        }
    }

    async fn query_range(&self, params: &str) -> Value {
        let response = self
            .http
            .post(format!("{}/api/v1/query_range", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(params.to_owned())
            .send()
            .await
            .unwrap();
        response.json().await.unwrap()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
