//! `strata import`: a client of the platform API's import jobs, not a part of the server.
//!
//! It starts a job with a signed `PUT /import/{source_type}`, then follows it by polling
//! `GET /import/jobs` until the job reaches a terminal state, showing a progress bar on a
//! terminal. It loads no configuration and touches no data dir: everything it needs is the
//! platform URL and a SigV4 key pair. Ctrl-C while waiting cancels the job on the server, so an
//! interrupted command leaves no import running behind the user's back.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{ArgGroup, Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// How often the job list is polled: often enough for a live bar, rare enough to cost nothing.
const POLL_EVERY: Duration = Duration::from_millis(250);

/// The exit status after Ctrl-C, as shells report a process ended by SIGINT (128 + 2).
const INTERRUPTED: u8 = 130;

/// `strata import <SOURCE_TYPE>`: the options, parsed by clap in main.rs.
#[derive(Debug, Clone, Args)]
#[command(group(
    ArgGroup::new("source").required(true).args(["table", "query", "topic", "stream", "queue", "key_pattern", "path"])
))]
pub struct ImportOptions {
    /// The kind of source, as in PUT /import/{source_type} (e.g. postgresql, kafka, s3)
    pub source_type: String,
    /// The platform API listener, e.g. http://127.0.0.1:7080
    #[arg(long, env = "STRATA_URL", value_name = "URL")]
    pub url: String,
    /// The SigV4 access key of a platform user
    #[arg(long, env = "STRATA_ACCESS_KEY", value_name = "KEY")]
    pub access_key: String,
    /// The SigV4 secret key of that user
    #[arg(
        long,
        env = "STRATA_SECRET_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub secret_key: String,
    /// The SigV4 region the server is configured with
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
    /// The connection to import from
    #[arg(long, value_name = "ID or NAME")]
    pub connection: String,
    /// The dataset to import into
    #[arg(long, value_name = "NAME")]
    pub dataset: String,
    /// Import a table (or index) of the source
    #[arg(long, value_name = "TABLE")]
    pub table: Option<String>,
    /// Import the result of a query run on the source
    #[arg(long, value_name = "SQL")]
    pub query: Option<String>,
    /// Import a broker's topic (Kafka) or topic filter (MQTT)
    #[arg(long, value_name = "TOPIC")]
    pub topic: Option<String>,
    /// Import a NATS JetStream stream
    #[arg(long, value_name = "STREAM")]
    pub stream: Option<String>,
    /// Import (consume) an AMQP queue
    #[arg(long, value_name = "QUEUE")]
    pub queue: Option<String>,
    /// Import the Redis keys matching a pattern
    #[arg(long, value_name = "PATTERN")]
    pub key_pattern: Option<String>,
    /// Import files matching an object path or glob
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
    /// Add to the dataset, or replace what it holds
    #[arg(long, value_enum, default_value_t = Mode::Append)]
    pub mode: Mode,
    /// Keep importing what the source receives later; the job then runs until cancelled
    #[arg(long)]
    pub follow: bool,
    /// Print the job id and return without waiting for the job
    #[arg(long)]
    pub detach: bool,
    /// Print the final job (or, with --detach, the created one) as JSON
    #[arg(long)]
    pub json: bool,
}

/// What an import does with the rows a dataset already holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    Append,
    Replace,
}

/// Starts the import and, unless detached, follows it to its end: success when the job
/// succeeded, failure when it failed or was cancelled.
pub async fn run(options: ImportOptions) -> anyhow::Result<ExitCode> {
    let platform = Platform::new(&options)?;
    let body = request_body(&options)?;
    let path = format!("/import/{}", segment(&options.source_type));
    let created = platform
        .call(Method::PUT, &path, Some(&body))
        .await
        .with_context(|| format!("starting an import from {:?}", options.source_type))?;
    let job_id = created
        .get("job_id")
        .and_then(Value::as_str)
        .with_context(|| format!("the server answered without a job_id: {created}"))?
        .to_owned();
    if options.detach {
        println!(
            "{}",
            if options.json {
                created.to_string()
            } else {
                job_id
            }
        );
        return Ok(ExitCode::SUCCESS);
    }
    let bar = progress_bar();
    let started = Instant::now();
    let job = tokio::select! {
        job = follow(&platform, &job_id, &bar) => job?,
        signal = tokio::signal::ctrl_c() => {
            signal.context("listening for ctrl-c")?;
            bar.abandon();
            platform
                .call(Method::DELETE, &format!("/import/jobs/{}", segment(&job_id)), None)
                .await
                .with_context(|| format!("cancelling import job {job_id}"))?;
            eprintln!("import job {job_id} was cancelled");
            return Ok(ExitCode::from(INTERRUPTED));
        }
    };
    bar.finish_and_clear();
    Ok(report(&job, &options, started.elapsed()))
}

/// The body of PUT /import/{source_type}: pure, so the flags' mapping is tested without a server.
pub fn request_body(options: &ImportOptions) -> anyhow::Result<Value> {
    let sources = [
        ("table", &options.table),
        ("query", &options.query),
        ("topic", &options.topic),
        ("stream", &options.stream),
        ("queue", &options.queue),
        ("key_pattern", &options.key_pattern),
        ("path", &options.path),
    ];
    let mut given = sources
        .iter()
        .filter_map(|(key, value)| value.as_ref().map(|value| (*key, value)));
    // clap's required group guarantees one; the struct is public, so check rather than trust.
    let (Some((key, value)), None) = (given.next(), given.next()) else {
        bail!(
            "give exactly one of --table, --query, --topic, --stream, --queue, --key-pattern \
             and --path"
        );
    };
    let mode = match options.mode {
        Mode::Append => "append",
        Mode::Replace => "replace",
    };
    Ok(json!({
        "connection_id": options.connection,
        "source": { key: value },
        "dataset": options.dataset,
        "mode": mode,
        "follow": options.follow,
    }))
}

/// Polls the job list until `job_id` ends, keeping the bar up to date; the job's last state.
async fn follow(platform: &Platform, job_id: &str, bar: &ProgressBar) -> anyhow::Result<Value> {
    let mut ticks = tokio::time::interval(POLL_EVERY);
    loop {
        ticks.tick().await;
        let list = platform
            .call(Method::GET, "/import/jobs", None)
            .await
            .context("listing import jobs")?;
        let job = list
            .get("jobs")
            .and_then(Value::as_array)
            .and_then(|jobs| jobs.iter().find(|job| job["job_id"] == job_id))
            .with_context(|| format!("import job {job_id} is no longer listed"))?;
        let state = job["state"].as_str().unwrap_or("unknown");
        bar.set_position(job["records_written"].as_u64().unwrap_or(0));
        bar.set_message(format!("{:.0} records/s, {state}", rate(job)));
        if matches!(state, "succeeded" | "failed" | "cancelled") {
            return Ok(job.clone());
        }
    }
}

/// Prints the outcome of a finished job; the exit status it calls for.
fn report(job: &Value, options: &ImportOptions, waited: Duration) -> ExitCode {
    let state = job["state"].as_str().unwrap_or("unknown");
    if options.json {
        println!("{job}");
    } else if state == "succeeded" {
        println!(
            "imported {} records into {} in {:.1} s ({:.0} records/s)",
            job["records_written"].as_u64().unwrap_or(0),
            options.dataset,
            duration(job).unwrap_or(waited).as_secs_f64(),
            rate(job)
        );
    }
    if state == "succeeded" {
        return ExitCode::SUCCESS;
    }
    let job_id = job["job_id"].as_str().unwrap_or_default();
    match job["error"].as_str() {
        Some(error) => eprintln!("import job {job_id} {state}: {error}"),
        None => eprintln!("import job {job_id} {state}"),
    }
    ExitCode::FAILURE
}

/// The job's own rate: records written per second, as the server measures it.
fn rate(job: &Value) -> f64 {
    job["rate"].as_f64().unwrap_or(0.0)
}

/// How long the job ran by the server's clock, which excludes the time it sat queued.
fn duration(job: &Value) -> Option<Duration> {
    let at = |field: &str| chrono::DateTime::parse_from_rfc3339(job[field].as_str()?).ok();
    (at("finished_at")? - at("started_at")?).to_std().ok()
}

/// A spinner (an import's total is unknown) that indicatif hides when stderr is no terminal.
fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    let template = "{spinner} [{elapsed_precise}] {human_pos} records written, {msg}";
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.set_message("queued");
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// One path segment, percent-encoded: source types and job ids are the user's text.
fn segment(text: &str) -> String {
    utf8_percent_encode(text, NON_ALPHANUMERIC).to_string()
}

/// The platform API at one URL, with the key pair that signs every request.
struct Platform {
    http: reqwest::Client,
    /// `scheme://host[:port]`, as the requests go out.
    origin: String,
    /// `host[:port]` exactly as reqwest writes the Host header (no default port): SigV4 signs it.
    host: String,
    /// The URL's own path, when the platform sits behind a prefix.
    prefix: String,
    keys: (String, String),
    region: String,
}

impl Platform {
    fn new(options: &ImportOptions) -> anyhow::Result<Platform> {
        let url = reqwest::Url::parse(&options.url)
            .with_context(|| format!("--url {:?} is not a URL", options.url))?;
        let host = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => bail!("--url {:?} names no host", options.url),
        };
        Ok(Platform {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()?,
            origin: format!("{}://{host}", url.scheme()),
            host,
            prefix: url.path().trim_end_matches('/').to_owned(),
            keys: (options.access_key.clone(), options.secret_key.clone()),
            region: options.region.clone(),
        })
    }

    /// A signed request; the JSON answer of a 2xx, or an error carrying the server's reason.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let (status, answer) = self.send(method, path, body).await?;
        if status.is_success() {
            return Ok(answer);
        }
        // The platform's errors are `{"status": "error", "message": "<operation>: <reason>"}`.
        let reason = answer["message"]
            .as_str()
            .map_or_else(|| answer.to_string(), str::to_owned);
        bail!("the server answered {status}: {reason}")
    }

    /// Signs and sends one request: its status and body (a JSON string when it is not JSON).
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let path_and_query = format!("{}{path}", self.prefix);
        let bytes = body.map(Value::to_string).unwrap_or_default().into_bytes();
        // The content type is signed, so it goes through the signer rather than beside it.
        let extra: &[(&str, &str)] = match body {
            Some(_) => &[("content-type", "application/json")],
            None => &[],
        };
        let signed = crate::sigv4::sign(
            &crate::sigv4::Outgoing {
                method: method.as_str(),
                host: &self.host,
                path_and_query: &path_and_query,
                headers: extra,
                body: &bytes,
            },
            (&self.keys.0, &self.keys.1),
            (&self.region, "strata"),
            chrono::Utc::now(),
        );
        let url = format!("{}{path_and_query}", self.origin);
        let request = signed.into_iter().fold(
            self.http.request(method.clone(), &url),
            |request, (name, value)| request.header(name, value),
        );
        let response = request
            .body(bytes)
            .send()
            .await
            .with_context(|| format!("{method} {url}"))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .with_context(|| format!("reading the answer to {method} {url}"))?;
        let answer = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, answer))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        options: ImportOptions,
    }

    fn parse(extra: &[&str]) -> Result<ImportOptions, clap::Error> {
        let base = ["strata", "postgresql", "--url", "http://127.0.0.1:7080"];
        let keys = ["--access-key", "a", "--secret-key", "s"];
        let target = ["--connection", "pg", "--dataset", "orders"];
        let args = base.iter().chain(&keys).chain(&target).chain(extra);
        Cli::try_parse_from(args).map(|cli| cli.options)
    }

    #[test]
    fn table_defaults_to_append_without_follow() {
        let options = parse(&["--table", "public.orders"]).unwrap();
        assert_eq!(
            request_body(&options).unwrap(),
            json!({
                "connection_id": "pg",
                "source": {"table": "public.orders"},
                "dataset": "orders",
                "mode": "append",
                "follow": false,
            })
        );
    }

    #[test]
    fn query_with_replace_and_follow() {
        let args = ["--query", "SELECT 1", "--mode", "replace", "--follow"];
        let body = request_body(&parse(&args).unwrap()).unwrap();
        assert_eq!(body["source"], json!({"query": "SELECT 1"}));
        assert_eq!(body["mode"], "replace");
        assert_eq!(body["follow"], true);
    }

    #[test]
    fn exactly_one_source_is_required() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["--table", "t", "--topic", "x"]).is_err());
        let mut options = parse(&["--table", "t"]).unwrap();
        options.path = Some("p".to_owned());
        assert!(request_body(&options).is_err());
    }

    #[test]
    fn streams_queues_and_key_patterns_are_sources() {
        for (flag, key) in [
            ("--stream", "stream"),
            ("--queue", "queue"),
            ("--key-pattern", "key_pattern"),
        ] {
            let body = request_body(&parse(&[flag, "orders"]).unwrap()).unwrap();
            assert_eq!(body["source"], json!({ key: "orders" }), "{flag}");
        }
        assert!(parse(&["--stream", "s", "--queue", "q"]).is_err());
    }

    #[test]
    fn unknown_mode_is_refused() {
        assert!(parse(&["--table", "t", "--mode", "merge"]).is_err());
    }
}
