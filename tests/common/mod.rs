//! The test harness: the real `strata` binary, started on loopback in a temporary data
//! directory, and a small HTTP client.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use serde_json::Value;

pub mod cluster;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_strata")
}

/// The commit log the servers and tools of these tests use, as environment variables for
/// them: the data directory's FileLog, or, with STRATA_TEST_LOG=kafka, the broker in
/// STRATA_TEST_KAFKA (scripts/test starts one; see [`kafka_env`]).
pub fn log_env(dir: &Path) -> Vec<(&'static str, String)> {
    match std::env::var("STRATA_TEST_LOG").as_deref() {
        Ok("kafka") => kafka_env(dir),
        Ok("file") | Err(_) => Vec::new(),
        Ok(other) => panic!("STRATA_TEST_LOG={other:?}: use file or kafka"),
    }
}

/// A Kafka-backed log for `dir`, whatever STRATA_TEST_LOG says: topics of a prefix derived from
/// the data directory, so that every command on one directory shares one log and no two
/// directories do.
pub fn kafka_env(dir: &Path) -> Vec<(&'static str, String)> {
    let brokers = std::env::var("STRATA_TEST_KAFKA").unwrap_or_else(|_| {
        panic!("STRATA_TEST_KAFKA is not set: run the tests with scripts/test, which starts a Kafka-protocol broker")
    });
    std::fs::create_dir_all(dir).unwrap();
    let dir = std::fs::canonicalize(dir).unwrap();
    let hash = dir
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    vec![
        ("STRATA_LOG_BACKEND", "kafka".to_owned()),
        ("STRATA_LOG_KAFKA_BROKERS", brokers),
        ("STRATA_LOG_KAFKA_TOPIC_PREFIX", format!("test-{hash:016x}")),
    ]
}

/// Runs `strata <args> --data-dir <dir>` to completion.
pub fn strata(dir: &Path, args: &[&str]) -> Output {
    std::fs::create_dir_all(dir).unwrap();
    Command::new(bin())
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .envs(log_env(dir))
        .env_remove("RUST_LOG")
        .output()
        .expect("run strata")
}

/// Runs `strata-replay <args> --data-dir <dir>` to completion, on the log `dir`'s servers use.
pub fn replay(dir: &Path, args: &[&str]) -> Output {
    let path = Path::new(bin()).with_file_name("strata-replay");
    assert!(
        path.exists(),
        "{} is missing: run the tests with --workspace",
        path.display()
    );
    Command::new(path)
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .envs(log_env(dir))
        .output()
        .expect("run strata-replay")
}

/// Asserts that a `strata-replay verify` run (from [`replay`] or [`Tmpfs::replay`]) succeeded
/// and found no table that differs from what its log says; returns what it printed.
pub fn verify_passes(output: Output) -> String {
    let said = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{said}");
    assert!(said.contains(" 0 mismatched"), "{said}");
    said
}

/// Runs an admin command that must succeed and returns its stdout.
pub fn admin(dir: &Path, args: &[&str]) -> String {
    let output = strata(dir, args);
    assert!(
        output.status.success(),
        "strata {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Creates an account and a key for it (with an optional database pattern); returns the key.
pub fn account_with_key(dir: &Path, account: &str, pattern: Option<&str>) -> String {
    let existing = strata(dir, &["accounts", "create", account]);
    assert!(
        existing.status.success() || String::from_utf8_lossy(&existing.stderr).contains("exists"),
        "{}",
        String::from_utf8_lossy(&existing.stderr)
    );
    let mut args = vec!["keys", "create", "--account", account, "--json"];
    if let Some(pattern) = pattern {
        args.extend(["--databases", pattern]);
    }
    let out: Value = serde_json::from_str(&admin(dir, &args)).unwrap();
    out["key"].as_str().unwrap().to_owned()
}

static STARTS: AtomicUsize = AtomicUsize::new(0);

/// A running `strata serve`.
pub struct Server {
    pub dir: PathBuf,
    pub data_url: String,
    pub platform_url: String,
    pub log: PathBuf,
    child: Option<Child>,
}

impl Server {
    /// Starts a server on `dir` (ports chosen by the OS) and waits until it answers.
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        Self::start_with(dir, extra, &log_env(dir))
    }

    /// As [`Server::start`], with these environment variables.
    pub fn start_with(dir: &Path, extra: &[&str], env: &[(&'static str, String)]) -> Server {
        let mut command = Command::new(bin());
        command.envs(env.iter().map(|(k, v)| (k, v)));
        Self::launch(dir, command, &dir.join("server.json"), extra)
    }

    /// Starts a server on a directory of `tmpfs` (its own mount namespace), with the file log.
    pub fn start_on(tmpfs: &Tmpfs, dir: &Path, extra: &[&str]) -> Server {
        let info = tmpfs.outside(&dir.join("server.json"));
        Self::launch(dir, tmpfs.command(bin()), &info, extra)
    }

    /// Runs `command serve ...` on `dir` and waits for the server's info file at `info_path`.
    fn launch(dir: &Path, mut command: Command, info_path: &Path, extra: &[&str]) -> Server {
        std::fs::create_dir_all(dir).unwrap();
        let n = STARTS.fetch_add(1, Ordering::SeqCst);
        let log = dir.join(format!("serve-{n}.log"));
        let mut child = command
            .args([
                "serve",
                "--data-addr",
                "127.0.0.1:0",
                "--platform-addr",
                "127.0.0.1:0",
            ])
            .arg("--data-dir")
            .arg(dir)
            .args(extra)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .expect("spawn strata serve");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "strata serve exited with {status}: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if let Some(info) = std::fs::read(info_path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
                .filter(|info| info["pid"].as_u64() == Some(u64::from(child.id())))
            {
                let scheme = match info["tls"].as_bool() {
                    Some(true) => "https",
                    _ => "http",
                };
                return Server {
                    dir: dir.to_owned(),
                    data_url: format!("{scheme}://{}", info["data_addr"].as_str().unwrap()),
                    platform_url: format!("{scheme}://{}", info["platform_addr"].as_str().unwrap()),
                    log,
                    child: Some(child),
                };
            }
            assert!(
                Instant::now() < deadline,
                "strata serve did not start in time"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGKILL: no chance to flush or clean up.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// SIGTERM and wait: an orderly shutdown. Returns whether it exited successfully.
    pub fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        child.wait().unwrap().success()
    }

    pub fn client(&self, key: &str) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: self.data_url.clone(),
            key: Some(key.to_owned()),
        }
    }

    pub fn anonymous(&self) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: self.data_url.clone(),
            key: None,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
        // A failing test shows what its server said (the data directory goes with the test).
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            eprintln!(
                "--- last lines of {}:\n{}",
                self.log.display(),
                tail.join("\n")
            );
        }
    }
}

/// A tmpfs of a fixed size mounted on a directory in a mount namespace of its own, which a
/// holder process keeps alive: a disk that fills up, for the processes started through
/// [`Tmpfs::command`]; the test reaches its files through the holder's `/proc/<pid>/root`.
/// Dropping it kills the holder, and the tmpfs goes with the namespace: nothing stays mounted.
pub struct Tmpfs {
    holder: Child,
    pub dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as mount's `size=` option takes it) on `dir`. None where this
    /// process may not make a mount namespace (it is not root); CI runs as root, so there it
    /// panics instead.
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        use std::io::BufRead;
        std::fs::create_dir_all(dir).unwrap();
        let dir = std::fs::canonicalize(dir).unwrap();
        let mut holder = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount -t tmpfs -o "size=$1" strata-test "$2" && echo mounted && exec sleep 3600"#)
            .args(["sh", size])
            .arg(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn unshare");
        let mut line = String::new();
        std::io::BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        if line.trim() != "mounted" {
            let output = holder.wait_with_output().unwrap();
            let why = String::from_utf8_lossy(&output.stderr).into_owned();
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root and must be able to mount a tmpfs: {why}"
            );
            eprintln!("skipped: cannot mount a tmpfs in a mount namespace here: {why}");
            return None;
        }
        Some(Tmpfs { holder, dir })
    }

    /// `program`, to be run inside the tmpfs's mount namespace (nsenter execs it: the child's
    /// pid is the program's).
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new("nsenter");
        command
            .args(["--target", &self.holder.id().to_string(), "--mount", "--"])
            .arg(program);
        command
    }

    /// Where a path as the namespace sees it is, for this process.
    pub fn outside(&self, path: &Path) -> PathBuf {
        let relative = path.strip_prefix("/").unwrap_or(path);
        Path::new(&format!("/proc/{}/root", self.holder.id())).join(relative)
    }

    /// Runs `strata <args> --data-dir <dir>` inside the namespace; it must succeed. Returns its
    /// stdout.
    pub fn strata(&self, dir: &Path, args: &[&str]) -> String {
        let output = self
            .command(bin())
            .args(args)
            .arg("--data-dir")
            .arg(dir)
            .env_remove("RUST_LOG")
            .output()
            .expect("run strata");
        assert!(
            output.status.success(),
            "strata {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Runs `strata-replay <args> --data-dir <dir>` inside the namespace, to completion.
    pub fn replay(&self, dir: &Path, args: &[&str]) -> Output {
        let path = Path::new(bin()).with_file_name("strata-replay");
        self.command(path.to_str().unwrap())
            .args(args)
            .arg("--data-dir")
            .arg(dir)
            .output()
            .expect("run strata-replay")
    }

    /// Fills the tmpfs with a file until no byte more fits; returns the file (outside path).
    pub fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.outside(&self.dir.join("filler"));
        let mut file = File::create(&path).unwrap();
        let chunk = vec![0x5a_u8; 64 * 1024];
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(error) if error.kind() == std::io::ErrorKind::StorageFull => break,
                Err(error) => panic!("filling the tmpfs: {error}"),
            }
        }
        // Smaller writes take what a 64 KiB one could not.
        for size in [4096, 1] {
            while matches!(file.write(&chunk[..size]), Ok(n) if n > 0) {}
        }
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// An HTTP response reduced to what tests look at.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub retry_after: Option<String>,
    pub request_id: Option<String>,
    /// The node that served the request (`x-strata-node`).
    pub node: Option<String>,
    pub headers: reqwest::header::HeaderMap,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub key: Option<String>,
}

impl Client {
    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<&str>) -> Answer {
        self.try_send(method, path, body).await.expect("request")
    }

    /// Like `send`, but a connection failure (a killed server) is `None`.
    pub async fn try_send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&str>,
    ) -> Option<Answer> {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_owned());
        }
        let response = request.send().await.ok()?;
        Self::try_answer(response).await
    }

    /// POSTs a JSON body asking for a JSON answer.
    pub async fn post_json(&self, path: &str, body: &Value) -> Answer {
        self.try_send_json(reqwest::Method::POST, path, &body.to_string())
            .await
            .expect("the server answers")
    }

    /// A JSON request asking for a JSON answer; `None` when the server is gone.
    pub async fn try_send_json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &str,
    ) -> Option<Answer> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body.to_owned());
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        Self::try_answer(request.send().await.ok()?).await
    }

    pub async fn answer(response: reqwest::Response) -> Answer {
        Self::try_answer(response).await.expect("response body")
    }

    async fn try_answer(response: reqwest::Response) -> Option<Answer> {
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        let retry_after = header("retry-after");
        let request_id = header("x-request-id");
        let node = header("x-strata-node");
        let headers = response.headers().clone();
        let text = response.text().await.ok()?;
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Some(Answer {
            status,
            body,
            retry_after,
            request_id,
            node,
            headers,
        })
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &str) -> Answer {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn post_empty(&self, path: &str) -> Answer {
        self.send(reqwest::Method::POST, path, None).await
    }

    pub async fn delete(&self, path: &str) -> Answer {
        self.send(reqwest::Method::DELETE, path, None).await
    }

    pub async fn create_database(&self, name: &str) -> Answer {
        self.post(
            "/v1/databases",
            &serde_json::json!({ "name": name }).to_string(),
        )
        .await
    }

    pub async fn create_table(&self, database: &str, table: &Value) -> Answer {
        self.post(&format!("/v1/create_table/{database}"), &table.to_string())
            .await
    }

    pub async fn list_tables(&self, database: &str) -> Answer {
        self.post_empty(&format!("/v1/list_tables/{database}"))
            .await
    }

    pub async fn schema(&self, database: &str, table: &str) -> Answer {
        self.post(
            &format!("/v1/schema/{database}"),
            &serde_json::json!({ "name": table }).to_string(),
        )
        .await
    }

    /// The sum of a counter over its labels, from GET /metrics.
    pub async fn counter(&self, name: &str) -> f64 {
        let text = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|line| line.starts_with(name) && !line.starts_with('#'))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// A table definition with every kind of column.
pub fn docs_table(name: &str) -> Value {
    serde_json::json!({
        "name": name,
        "schema": [
            {"name": "title", "type": "utf8", "nullable": false},
            {"name": "body", "type": "utf8"},
            {"name": "year", "type": "int32"},
            {"name": "published", "type": "timestamp[ms,UTC]"},
            {"name": "tags", "type": "list<utf8>"},
            {"name": "embedding", "type": "vector<float32,4>"}
        ],
        "fts_columns": ["title", "body"],
        "exact_columns": ["year"],
        "vector_column": "embedding",
        "vector_metric": "l2"
    })
}

/// Polls `check` until it returns true, for up to `seconds`.
pub async fn eventually<F, Fut>(seconds: u64, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The `_id`s of a search answer's hits, sorted; the answer must be a 200.
pub fn hit_ids(answer: &Answer) -> Vec<String> {
    assert_eq!(answer.status, 200, "{answer:?}");
    let mut ids: Vec<String> = answer.body["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// Creates platform user `name` holding `roles`, as the root user `root`; its signed client.
pub async fn user(root: &Signed, server: &Server, name: &str, roles: &[&str]) -> Signed {
    let roles = serde_json::to_string(roles).unwrap();
    let created = yaml(
        root,
        "PUT",
        &format!("/user/{name}"),
        &format!("Version: 2025-01-01\nPassword: correct-horse-battery\nRoles: {roles}\n"),
    )
    .await;
    assert_eq!(created.status, 200, "{created:?}");
    Signed::new(
        server,
        &Credentials {
            access_key: created.body["access_key"].as_str().unwrap().to_owned(),
            secret_key: created.body["secret_key"].as_str().unwrap().to_owned(),
        },
    )
}

/// A platform user's SigV4 credentials.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
}

/// A self-signed certificate for `localhost` and 127.0.0.1 written to `<dir>/<name>.pem` and
/// `<dir>/<name>.key`: the paths, and the certificate's PEM text (what a client trusts).
pub fn self_signed(dir: &Path, name: &str) -> (PathBuf, PathBuf, String) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let pem = certified.cert.pem();
    std::fs::write(&cert, &pem).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (cert, key, pem)
}

/// The `--set` flags that serve TLS with `cert` and `key`.
pub fn tls_flags(cert: &Path, key: &Path) -> Vec<String> {
    vec![
        "--set".to_owned(),
        format!("server.tls.cert_file={}", cert.display()),
        "--set".to_owned(),
        format!("server.tls.key_file={}", key.display()),
    ]
}

/// Creates `account` (if needed) and its root user; returns the root user's credentials.
pub fn root_user(dir: &Path, account: &str) -> Credentials {
    let existing = strata(dir, &["accounts", "create", account]);
    assert!(
        existing.status.success() || String::from_utf8_lossy(&existing.stderr).contains("exists"),
        "{}",
        String::from_utf8_lossy(&existing.stderr)
    );
    let out: Value = serde_json::from_str(&admin(
        dir,
        &["users", "create-root", "--account", account, "--json"],
    ))
    .unwrap();
    Credentials {
        access_key: out["access_key"].as_str().unwrap().to_owned(),
        secret_key: out["secret_key"].as_str().unwrap().to_owned(),
    }
}

/// A client of the platform API that signs its requests with SigV4 (strata's own signing
/// code; tests/clients/ signs with botocore).
#[derive(Clone)]
pub struct Signed {
    pub http: reqwest::Client,
    pub base: String,
    pub credentials: Credentials,
    pub region: String,
    pub service: String,
}

impl Signed {
    pub fn new(server: &Server, credentials: &Credentials) -> Signed {
        Signed {
            http: reqwest::Client::new(),
            base: server.platform_url.clone(),
            credentials: credentials.clone(),
            region: "us-east-1".to_owned(),
            service: "strata".to_owned(),
        }
    }

    /// The headers that sign `method path?query` with `body` and `extra` headers at `at`.
    pub fn sign(
        &self,
        method: &str,
        path_and_query: &str,
        extra: &[(&str, &str)],
        body: &[u8],
        at: chrono::DateTime<chrono::Utc>,
    ) -> Vec<(String, String)> {
        let host = self
            .base
            .trim_start_matches("https://")
            .trim_start_matches("http://");
        strata::sigv4::sign(
            &strata::sigv4::Outgoing {
                method,
                host,
                path_and_query,
                headers: extra,
                body,
            },
            (&self.credentials.access_key, &self.credentials.secret_key),
            (&self.region, &self.service),
            at,
        )
    }

    /// Sends `headers` (signed ones, or not) with `body`.
    pub async fn send_raw(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Answer {
        self.try_send_raw(method, path_and_query, headers, body)
            .await
            .expect("the server answers")
    }

    /// As [`Signed::send_raw`]; `None` when the server is gone.
    pub async fn try_send_raw(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Option<Answer> {
        let mut request = self.http.request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}{path_and_query}", self.base),
        );
        for (name, value) in headers {
            request = request.header(name, value);
        }
        Client::try_answer(request.body(body).send().await.ok()?).await
    }

    /// A signed NDJSON request; `None` when the server is gone.
    pub async fn try_send_ndjson(&self, path_and_query: &str, lines: &[Value]) -> Option<Answer> {
        let body: String = lines.iter().map(|line| format!("{line}\n")).collect();
        let extra = [("content-type", "application/x-ndjson")];
        let body = body.into_bytes();
        let headers = self.sign("POST", path_and_query, &extra, &body, chrono::Utc::now());
        self.try_send_raw("POST", path_and_query, &headers, body)
            .await
    }

    /// A signed request whose body is `body` as given, of `content_type`.
    pub async fn send_text(
        &self,
        method: &str,
        path_and_query: &str,
        content_type: &str,
        body: &str,
    ) -> Answer {
        let body = body.as_bytes().to_vec();
        let extra = [("content-type", content_type)];
        let headers = self.sign(method, path_and_query, &extra, &body, chrono::Utc::now());
        self.send_raw(method, path_and_query, &headers, body).await
    }

    /// A signed NDJSON request: one line per value, each ended by a newline.
    pub async fn send_ndjson(&self, method: &str, path_and_query: &str, lines: &[Value]) -> Answer {
        let body: String = lines.iter().map(|line| format!("{line}\n")).collect();
        self.send_text(method, path_and_query, "application/x-ndjson", &body)
            .await
    }

    /// A signed request with a JSON body (or none) that asks for a JSON answer (the YAML
    /// endpoints answer YAML otherwise).
    pub async fn send_json(&self, method: &str, path: &str, body: Option<&Value>) -> Answer {
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let extra = [
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ];
        let headers = self.sign(method, path, &extra, &body, chrono::Utc::now());
        self.send_raw(method, path, &headers, body).await
    }

    /// A signed request with a JSON body (or none).
    pub async fn send(&self, method: &str, path_and_query: &str, body: Option<&Value>) -> Answer {
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let extra: &[(&str, &str)] = match body.is_empty() {
            true => &[],
            false => &[("content-type", "application/json")],
        };
        let headers = self.sign(method, path_and_query, extra, &body, chrono::Utc::now());
        self.send_raw(method, path_and_query, &headers, body).await
    }
}

/// A free port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A signed request with a YAML body, a JSON answer asked for.
pub async fn yaml(client: &Signed, method: &str, path: &str, body: &str) -> Answer {
    let bytes = body.as_bytes().to_vec();
    let extra = [
        ("content-type", "application/yaml"),
        ("accept", "application/json"),
    ];
    let headers = client.sign(method, path, &extra, &bytes, chrono::Utc::now());
    client.send_raw(method, path, &headers, bytes).await
}

/// Creates database shop with table docs; returns a client of `key`.
pub async fn shop_with_docs(server: &Server, key: &str) -> Client {
    let client = server.client(key);
    assert_eq!(client.create_database("shop").await.status, 201);
    assert_eq!(
        client
            .create_table("shop", &docs_table("docs"))
            .await
            .status,
        200
    );
    client
}

/// Runs `sql` with psql as the `postgres` user on the local PostgreSQL (loopback, trust).
pub fn psql(database: &str, sql: &str) {
    let out = Command::new("psql")
        .args(["-h", "127.0.0.1", "-U", "postgres", "-d", database])
        .args(["-v", "ON_ERROR_STOP=1", "-qAtc", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A PostgreSQL database of a test's own on the local server, made by `setup` and dropped
/// when the test ends.
pub struct PgDatabase {
    pub name: String,
}

impl PgDatabase {
    /// `strata_<prefix>_<pid>`, made anew, then `setup` run in it.
    pub fn new(prefix: &str, setup: &str) -> PgDatabase {
        let name = format!("strata_{prefix}_{}", std::process::id());
        psql("postgres", &format!("DROP DATABASE IF EXISTS {name}"));
        psql("postgres", &format!("CREATE DATABASE {name}"));
        psql(&name, setup);
        PgDatabase { name }
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-c"])
            .arg(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .output();
    }
}
