//! A PostgreSQL source read in place and imported, against PostgreSQL's own client on the same
//! rows in the same run (issue 25, point 8).
//!
//! `cargo bench -p strata --bench connections -- [--rows 1000000] [--queries 50]`
//!
//! Needs the machine's PostgreSQL on 127.0.0.1:5432 (user postgres, trust) and `psql`. It makes
//! a database of its own with a table `events` of `--rows` rows (id, host, status, bytes, at),
//! starts a release `strata serve` with a connection to it, then measures:
//!
//! - SQL in place: a selective filter (`status = 503 AND host = 'host-7'`, about 0.1% of the
//!   rows; no index, so PostgreSQL scans the table either way) as POST /sql with
//!   `connection_id`, one client, sequentially: p50 and p99. The baseline is `psql -Atc` running
//!   the same statement (a process, a connection and the query, as a user at a shell runs it)
//!   and the same statement over one kept psql session (`\timing`-free: the time around a
//!   round trip of a kept connection), so that both a cold and a warm client are shown.
//! - Import: PUT /import/postgresql of the whole table into a dataset, until the job is
//!   `succeeded` (every batch acknowledged by the log), in records per second, and until a
//!   Query DSL `term` over every record is answered next; the baseline is
//!   `COPY events TO STDOUT` through psql into /dev/null.
//!
//! Prints markdown tables for docs/benchmarks.md.

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
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use clap::Parser;
use platform::Platform;
use serde_json::{Value, json};
use server::Server;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    #[arg(long, default_value_t = 50)]
    queries: usize,
    /// Where the server's data goes (default: under /var/tmp, removed after).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// Ignored: cargo bench passes it.
    #[arg(long, hide = true)]
    bench_flag: bool,
}

const WARM_UP: usize = 5;
const FILTER: &str = "SELECT id, host, bytes FROM events WHERE status = 503 AND host = 'host-7'";

fn psql(database: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-h", "127.0.0.1", "-U", "postgres", "-d", database])
        .args(["-v", "ON_ERROR_STOP=1", "-Atc", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// p50 and p99 of `times`, in milliseconds.
fn percentiles(times: &mut [f64]) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

/// Times `run` `queries` times after a warm-up: p50 and p99 ms.
async fn timed<F: std::future::Future<Output = usize>>(
    queries: usize,
    mut run: impl FnMut() -> F,
) -> (f64, f64, usize) {
    let mut times = Vec::with_capacity(queries);
    let mut rows = 0;
    for i in 0..queries + WARM_UP {
        let started = Instant::now();
        rows = run().await;
        if i >= WARM_UP {
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let (p50, p99) = percentiles(&mut times);
    (p50, p99, rows)
}

fn main() {
    let args = Args::parse_from(std::env::args().filter(|a| a != "--bench"));
    let dir = args.dir.clone();
    server::in_scratch("connections", dir.as_deref(), |scratch| async move {
        run(&scratch, &args).await;
    });
}

async fn run(dir: &Path, args: &Args) {
    let database = format!("strata_bench_{}", std::process::id());
    psql("postgres", &format!("CREATE DATABASE {database}"));
    psql(
        &database,
        &format!(
            "CREATE TABLE events (id bigint, host text, status int, bytes bigint, \
             at timestamptz);
             INSERT INTO events SELECT n, 'host-' || (n % 10), \
             CASE WHEN n % 1000 = 7 THEN 503 ELSE 200 END, n % 65536, \
             '2026-11-01T00:00:00Z'::timestamptz + n * interval '10 ms' \
             FROM generate_series(1, {}) AS n;",
            args.rows
        ),
    );
    // Apart: VACUUM cannot run in the transaction psql makes of several statements.
    psql(&database, "VACUUM ANALYZE events");
    let server = Server::start(dir, &[]);
    let root = Platform::of(&server, dir);
    let connection = json!({"name": "pg", "config": {"host": "127.0.0.1", "port": 5432,
        "username": "postgres", "database": database}});
    root.send(
        "POST",
        "/source/postgresql",
        "application/json",
        connection.to_string().into_bytes(),
    )
    .await;

    // SQL in place against psql, one statement after another.
    let body = json!({"query": FILTER}).to_string().into_bytes();
    let in_place = timed(args.queries, || {
        let body = body.clone();
        let root = &root;
        async move {
            let answer = root
                .send("POST", "/sql?connection_id=pg", "application/json", body)
                .await;
            answer["rows"].as_array().map_or(0, Vec::len)
        }
    })
    .await;
    let cold = timed(args.queries, || {
        let database = database.clone();
        async move { psql(&database, FILTER).lines().count() }
    })
    .await;
    let mut session = Command::new("psql")
        .args(["-h", "127.0.0.1", "-U", "postgres", "-d", &database, "-At"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = session.stdin.take().unwrap();
    let mut output = BufReader::new(session.stdout.take().unwrap());
    let warm = timed(args.queries, || {
        // The statement, then a marker row: the answer is read up to the marker.
        writeln!(input, "{FILTER};\nSELECT 'end-of-answer';").unwrap();
        input.flush().unwrap();
        let mut rows = 0;
        let mut line = String::new();
        loop {
            line.clear();
            output.read_line(&mut line).unwrap();
            if line.trim() == "end-of-answer" {
                break;
            }
            rows += 1;
        }
        async move { rows }
    })
    .await;
    drop(input);
    let _ = session.wait();
    assert_eq!(in_place.2, cold.2, "SQL in place and psql disagree");

    // Import of the whole table against COPY TO STDOUT.
    let started = Instant::now();
    let copied = Command::new("psql")
        .args(["-h", "127.0.0.1", "-U", "postgres", "-d", &database])
        .args(["-c", "COPY events TO STDOUT"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(copied.success());
    let copy_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let job = root
        .send(
            "PUT",
            "/import/postgresql",
            "application/json",
            json!({"connection_id": "pg", "source": {"table": "events"}, "dataset": "events"})
                .to_string()
                .into_bytes(),
        )
        .await;
    let id = job["job_id"].as_str().unwrap().to_owned();
    let done = loop {
        let listed = root
            .send("GET", "/import/jobs", "application/json", Vec::new())
            .await;
        let job = listed["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job_id"] == id.as_str())
            .cloned()
            .unwrap_or(Value::Null);
        if matches!(job["state"].as_str(), Some("succeeded" | "failed")) {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let import_seconds = started.elapsed().as_secs_f64();
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["records_written"], args.rows, "{done}");
    // Then searched: a Query DSL `term` reads every record's document index (built by the
    // flushes, and by this first search for the rows they have not reached yet).
    let term = json!({"query": {"term": {"host": "host-7"}}, "size": 0, "track_total_hits": true});
    let found = root
        .send(
            "POST",
            "/events/_search",
            "application/json",
            term.to_string().into_bytes(),
        )
        .await;
    let searched_seconds = started.elapsed().as_secs_f64();
    assert_eq!(found["hits"]["total"]["value"], args.rows / 10, "{found}");
    psql(
        "postgres",
        &format!("DROP DATABASE {database} WITH (FORCE)"),
    );
    drop(server);

    println!(
        "\n| SQL in place, {} rows, {} matching | p50 ms | p99 ms | p50 ratio to psql -c |",
        args.rows, in_place.2
    );
    println!("|---|---|---|---|");
    for (what, (p50, p99, _)) in [
        ("psql -Atc (process, connection, query)", cold),
        ("psql, one kept session", warm),
        ("strata POST /sql with connection_id", in_place),
    ] {
        println!("| {what} | {p50:.2} | {p99:.2} | {:.2} |", p50 / cold.0);
    }
    let rate = |seconds: f64| args.rows as f64 / seconds;
    println!(
        "\n| copy of {} rows | seconds | rows/s | ratio to COPY |",
        args.rows
    );
    println!("|---|---|---|---|");
    println!(
        "| psql COPY events TO STDOUT > /dev/null | {copy_seconds:.2} | {:.0} | 1.00 |",
        rate(copy_seconds)
    );
    println!(
        "| strata import job (PUT to succeeded) | {import_seconds:.2} | {:.0} | {:.2} |",
        rate(import_seconds),
        rate(import_seconds) / rate(copy_seconds)
    );
    println!(
        "| strata import job, then its first search (PUT to a `term` answered) | {searched_seconds:.2} | {:.0} | {:.2} |",
        rate(searched_seconds),
        rate(searched_seconds) / rate(copy_seconds)
    );
    println!(
        "\nimport job: {} bytes read, {} bytes written, rate {} records/s by its own clock",
        done["bytes_read"], done["bytes_written"], done["rate"]
    );
}
