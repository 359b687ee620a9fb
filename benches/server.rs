//! A release `strata serve` on loopback for the benchmarks, with an account and its key.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::generator;

/// Runs `bench` in a runtime with a scratch directory: `dir` if given (kept after), else one
/// under /var/tmp named after `name`, removed after.
pub fn in_scratch<F: std::future::Future<Output = ()>>(
    name: &str,
    dir: Option<&Path>,
    bench: impl FnOnce(PathBuf) -> F,
) {
    let scratch = dir.map(Path::to_owned).unwrap_or_else(|| {
        PathBuf::from("/var/tmp").join(format!("strata-{name}-{}", std::process::id()))
    });
    std::fs::create_dir_all(&scratch).unwrap();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(bench(scratch.clone()));
    if dir.is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
}

/// Runs an admin command of the strata binary on the data directory `dir`; its output.
#[allow(dead_code)]
pub fn admin(dir: &Path, args: &[&str]) -> String {
    admin_with(dir, args, &[])
}

/// [`admin`] with environment variables (a log backend, say).
pub fn admin_with(dir: &Path, args: &[&str], env: &[(&str, String)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A release server on loopback in `dir`, with an account and key.
pub struct Server {
    child: Child,
    /// The data plane's base URL.
    pub url: String,
    /// The platform API's base URL (the document benchmarks' only).
    #[allow(dead_code)]
    pub platform_url: String,
    pub key: String,
}

impl Server {
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        Server::start_with(dir, extra, &[])
    }

    /// [`Server::start`] with environment variables for the server and its admin commands:
    /// `STRATA_LOG_BACKEND=kafka` and its brokers, say, which every command on `dir` needs.
    pub fn start_with(dir: &Path, extra: &[&str], env: &[(&str, String)]) -> Server {
        let run = |args: &[&str]| admin_with(dir, args, env);
        run(&["accounts", "create", "bench"]);
        run(&["accounts", "set-payment-method", "bench"]);
        let key = run(&["keys", "create", "--account", "bench"])
            .trim()
            .to_owned();
        Server::resume_with(dir, key, extra, env)
    }

    /// Starts a server again on a directory `start` prepared, with the same key.
    #[allow(dead_code)]
    pub fn resume(dir: &Path, key: String, extra: &[&str]) -> Server {
        Server::resume_with(dir, key, extra, &[])
    }

    fn resume_with(dir: &Path, key: String, extra: &[&str], env: &[(&str, String)]) -> Server {
        // Another build of the server (one with `--features system-allocator`, say).
        let bin = std::env::var("STRATA_BENCH_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_strata").to_owned());
        let mut command = Command::new(bin);
        // Another allocator for the server alone, to compare side by side (docs/benchmarks.md).
        if let Ok(preload) = std::env::var("STRATA_BENCH_PRELOAD") {
            command.env("LD_PRELOAD", preload);
        }
        let child = command
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args([
                "serve",
                "--data-addr",
                "127.0.0.1:0",
                "--platform-addr",
                "127.0.0.1:0",
            ])
            .arg("--data-dir")
            .arg(dir)
            .args(["--set", "plans.paid.max_rows=1000000000"])
            .args(extra)
            .env(
                "RUST_LOG",
                std::env::var("STRATA_BENCH_LOG").unwrap_or_else(|_| "warn".to_owned()),
            )
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("server.log")).unwrap())
            .spawn()
            .unwrap();
        let info = dir.join("server.json");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some((data, platform)) = std::fs::read(&info)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .filter(|v| v["pid"].as_u64() == Some(u64::from(child.id())))
                .and_then(|v| {
                    Some((
                        v["data_addr"].as_str()?.to_owned(),
                        v["platform_addr"].as_str()?.to_owned(),
                    ))
                })
            {
                return Server {
                    child,
                    url: format!("http://{data}"),
                    platform_url: format!("http://{platform}"),
                    key,
                };
            }
            assert!(Instant::now() < deadline, "the server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's process id.
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The CPU time the server has used so far, user and system.
    #[allow(dead_code)]
    pub fn cpu(&self) -> Duration {
        cpu_of(&self.child.id().to_string())
    }

    /// The server's resident memory, from /proc (the contention benchmark's only).
    #[allow(dead_code)]
    pub fn rss_bytes(&self) -> u64 {
        self.status_bytes("VmRSS")
    }

    /// The server's resident memory in two parts: anonymous (its heap, what the allocator
    /// holds) and file-backed (index files it maps, which the kernel reclaims under pressure).
    #[allow(dead_code)]
    pub fn rss_parts(&self) -> (u64, u64) {
        (self.status_bytes("RssAnon"), self.status_bytes("RssFile"))
    }

    /// A `kB` line of /proc/PID/status, in bytes.
    fn status_bytes(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    }

    pub async fn post(&self, http: &reqwest::Client, path: &str, body: &Value) -> Value {
        let response = http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.key)
            .header("accept", "application/json")
            .json(body)
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.text().await.unwrap()
        );
        response.json().await.unwrap_or(Value::Null)
    }

    /// Appends one Arrow IPC stream to `table` of database `bench`.
    pub async fn append_ipc(&self, http: &reqwest::Client, table: &str, ipc: Vec<u8>) {
        let response = http
            .post(format!("{}/v1/append/bench?table={table}", self.url))
            .bearer_auth(&self.key)
            .header("content-type", "application/vnd.apache.arrow.stream")
            .body(ipc)
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{}",
            response.text().await.unwrap()
        );
        response.bytes().await.unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the table's segments hold all `rows` (the manifest is written after each flush
/// and compaction) and no more compaction happens; returns the live segment files.
/// The CPU time, user and system, that process `pid` (a number, or `self`) has used so far,
/// from /proc/PID/stat, whose times are in clock ticks: 100 a second on Linux (USER_HZ).
#[allow(dead_code)]
pub fn cpu_of(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name, in parentheses, may hold spaces: the fields are counted after it.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

pub async fn settle(tables: &Path, rows: usize) -> Vec<PathBuf> {
    let deadline = Instant::now() + Duration::from_secs(3600);
    let mut last = Vec::new();
    let mut stable_since = Instant::now();
    loop {
        let files = generator::segment_files(tables);
        let stored: usize = files.iter().map(|f| generator::parquet_rows(f)).sum();
        if files != last {
            last = files;
            stable_since = Instant::now();
        } else if stored == rows && stable_since.elapsed() > Duration::from_secs(3) {
            return last;
        }
        assert!(
            Instant::now() < deadline,
            "segments did not settle: {stored} of {rows} rows"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until the Parquet segment files under `tables` hold `rows` rows.
pub async fn wait_for_segment_rows(tables: &Path, rows: usize) {
    while generator::segment_files(tables)
        .iter()
        .map(|f| generator::parquet_rows(f))
        .sum::<usize>()
        < rows
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One row of a throughput table: what, rows, seconds, rows/s and the ratio to the baseline
/// (`None` for the baseline itself).
pub fn throughput_row(what: &str, rows: usize, elapsed: Duration, ratio: Option<f64>) {
    let ratio = ratio.map_or("1.00 (baseline)".to_owned(), |r| format!("{r:.2}"));
    println!(
        "| {what} | {rows} | {:.2} | {:.0} | {ratio} |",
        elapsed.as_secs_f64(),
        rows as f64 / elapsed.as_secs_f64()
    );
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
}

/// Appends `ipc` to `table`, one stream at a time, and returns how long it took until the last
/// append was acknowledged and until every row was in a segment under `tables`.
pub async fn timed_appends(
    server: &Server,
    http: &reqwest::Client,
    table: &str,
    ipc: Vec<Vec<u8>>,
    tables: &Path,
    rows: usize,
) -> (Duration, Duration) {
    let started = Instant::now();
    for body in ipc {
        server.append_ipc(http, table, body).await;
    }
    let acknowledged = started.elapsed();
    wait_for_segment_rows(tables, rows).await;
    (acknowledged, started.elapsed())
}

/// The table of an append benchmark: the baseline, then strata until acknowledged and until
/// `stored` (what "in a segment" means for that benchmark).
pub fn append_table(
    baseline_what: &str,
    stored: &str,
    rows: usize,
    baseline: Duration,
    (acknowledged, in_segments): (Duration, Duration),
) {
    println!("| what | rows | seconds | rows/s | ratio to baseline |");
    println!("|---|---|---|---|---|");
    throughput_row(baseline_what, rows, baseline, None);
    for (what, took) in [
        (
            "strata append, until the last append is acknowledged (durable in the log)".to_owned(),
            acknowledged,
        ),
        (format!("strata append, until {stored}"), in_segments),
    ] {
        throughput_row(
            &what,
            rows,
            took,
            Some(baseline.as_secs_f64() / took.as_secs_f64()),
        );
    }
}
