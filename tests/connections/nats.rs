//! NATS JetStream connections over HTTP: streams of the machine's NATS server (127.0.0.1:4222,
//! JetStream on; each test makes streams of its own with async-nats and deletes them) and of a
//! private `nats-server` (user and password; killed to show a server that is gone).

use super::*;

use async_nats::jetstream::{self, Context, stream::Config as StreamConfig};

/// The machine's NATS server.
const NATS_URL: &str = "nats://127.0.0.1:4222";

/// A JetStream context on the server at `url` (with `user` and `password` if given).
async fn jetstream_at(url: &str, credentials: Option<(&str, &str)>) -> Context {
    let options = match credentials {
        Some((user, password)) => {
            async_nats::ConnectOptions::with_user_and_password(user.to_owned(), password.to_owned())
        }
        None => async_nats::ConnectOptions::new(),
    };
    let client = options.connect(url).await.unwrap();
    jetstream::new(client)
}

/// A new stream named after `prefix` taking the subjects `<name>.>`: its name.
async fn nats_stream(js: &Context, prefix: &str) -> String {
    let name = unique(prefix);
    js.create_stream(StreamConfig {
        name: name.clone(),
        subjects: vec![format!("{name}.>")],
        // Left behind by a failed run, its messages go within the day.
        max_age: Duration::from_secs(24 * 3600),
        ..StreamConfig::default()
    })
    .await
    .unwrap();
    name
}

/// Publishes `payloads` to stream `name` under `<name>.<subject>` and waits for the acks.
async fn publish(js: &Context, name: &str, subject: &str, payloads: Vec<String>) {
    let mut acks = Vec::new();
    for payload in payloads {
        let ack = js
            .publish(format!("{name}.{subject}"), payload.into())
            .await
            .unwrap();
        acks.push(ack);
        if acks.len() >= 500 {
            for ack in acks.drain(..) {
                ack.await.unwrap();
            }
        }
    }
    for ack in acks {
        ack.await.unwrap();
    }
}

/// The orders `from..=to`: JSON objects, `customer` ann for even numbers, bob for odd ones.
fn orders(range: std::ops::RangeInclusive<u64>) -> Vec<String> {
    range
        .map(|n| {
            json!({"n": n, "customer": if n % 2 == 0 { "ann" } else { "bob" }, "total": n * 10})
                .to_string()
        })
        .collect()
}

/// The consumers stream `name` has now.
async fn consumers(js: &Context, name: &str) -> usize {
    let mut stream = js.get_stream(name).await.unwrap();
    stream.info().await.unwrap().state.consumer_count
}

/// A private `nats-server` with JetStream on a free port, its store in a directory of its own,
/// started with `auth` (`--user U --pass P`, `--auth TOKEN`); killed on drop.
struct PrivateNats {
    url: String,
    child: Option<std::process::Child>,
    _store: tempfile::TempDir,
}

impl PrivateNats {
    fn start(auth: &[&str]) -> PrivateNats {
        let store = tempfile::tempdir().unwrap();
        let port = common::free_port();
        let child = Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store.path())
            .args(auth)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nats-server runs");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "nats-server did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        PrivateNats {
            url: format!("nats://127.0.0.1:{port}"),
            child: Some(child),
            _store: store,
        }
    }

    /// SIGKILL, and wait for it to be gone.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test]
async fn a_nats_stream_is_connected_tested_and_read_in_place() {
    let js = jetstream_at(NATS_URL, None).await;
    let stream = nats_stream(&js, "orders").await;
    publish(&js, &stream, "eu", orders(1..=2)).await;
    publish(&js, &stream, "us", orders(3..=4)).await;
    let empty = nats_stream(&js, "empty").await;

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));

    // The catalogue has the family's type, streamed.
    let listed = root.send("GET", "/sources", None).await;
    for source_type in ["nats"] {
        let found = listed
            .body
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == source_type)
            .cloned()
            .unwrap_or(Value::Null);
        assert_eq!(found["family"], "nats", "{found}");
        for capability in ["sql", "import", "stream"] {
            assert!(
                found["capabilities"]
                    .as_array()
                    .unwrap()
                    .contains(&json!(capability)),
                "{found}"
            );
        }
    }

    // Created and tested; the stream is a dataset (also through a URL naming two servers).
    let id = connect(&root, "nats", "events", json!({"url": NATS_URL})).await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert_eq!(tested.body["status"], "active", "{tested:?}");
    assert!(
        tested.body["datasets_available"].as_u64().unwrap() >= 2,
        "{tested:?}"
    );
    let cloud = connect(
        &root,
        "nats",
        "cluster",
        json!({"url": format!("{NATS_URL},nats://127.0.0.1:4222")}),
    )
    .await;
    let tested = root
        .send("POST", &format!("/source/{cloud}/test"), None)
        .await;
    assert_eq!(tested.body["status"], "active", "{tested:?}");
    let on = format!("/sql?connection_id={id}");
    let tables = sql(&root, &on, "SHOW TABLES").await;
    assert!(rows(&tables).contains(&json!([stream])), "{tables:?}");

    // SQL in place: the payloads' fields are columns beside the message's place.
    let answer = sql(
        &root,
        &on,
        &format!(
            "SELECT _sequence, _subject, n, total FROM \"{stream}\" \
             WHERE customer = 'ann' ORDER BY n"
        ),
    )
    .await;
    assert_eq!(
        rows(&answer),
        vec![
            json!([2, format!("{stream}.eu"), 2, 20]),
            json!([4, format!("{stream}.us"), 4, 40]),
        ]
    );
    let timed = sql(
        &root,
        &on,
        &format!(
            "SELECT count(*), min(_sequence), max(_sequence) FROM \"{stream}\" \
             WHERE _timestamp > 1600000000000"
        ),
    )
    .await;
    assert_eq!(rows(&timed), vec![json!([4, 1, 4])]);
    // An empty stream is a table of no rows, with the columns of every stream.
    let none = sql(
        &root,
        &on,
        &format!("SELECT count(*), max(_sequence) FROM \"{empty}\" WHERE value <> ''"),
    )
    .await;
    assert_eq!(rows(&none), vec![json!([0, null])]);
    let missing = sql(&root, &on, "SELECT * FROM \"no_such_stream_here\"").await;
    assert_ne!(missing.status, 200, "{missing:?}");

    // max_records: the newest messages.
    let newest = connect(
        &root,
        "nats",
        "newest",
        json!({"url": NATS_URL, "max_records": 3}),
    )
    .await;
    let counted = sql(
        &root,
        &format!("/sql?connection_id={newest}"),
        &format!("SELECT count(*), min(n), max(n) FROM \"{stream}\""),
    )
    .await;
    assert_eq!(rows(&counted), vec![json!([3, 2, 4])]);

    // Reads leave no consumer behind, and nothing acknowledged (the stream keeps its messages).
    assert_eq!(consumers(&js, &stream).await, 0);
    let mut info = js.get_stream(&stream).await.unwrap();
    assert_eq!(info.info().await.unwrap().state.messages, 4);

    js.delete_stream(&stream).await.unwrap();
    js.delete_stream(&empty).await.unwrap();
}

#[tokio::test]
async fn a_nats_stream_is_imported_resumed_after_a_kill_and_followed_until_cancelled() {
    const MESSAGES: u64 = 3000;
    let js = jetstream_at(NATS_URL, None).await;
    let stream = nats_stream(&js, "clicks").await;
    publish(&js, &stream, "web", orders(1..=MESSAGES)).await;

    let dir = tempfile::tempdir().unwrap();
    let flags = ["--set", "imports.batch_rows=100"];
    let mut server = Server::start(dir.path(), &flags);
    let credentials = root_user(dir.path(), "acme");
    let root = Signed::new(&server, &credentials);
    let id = connect(&root, "nats", "events", json!({"url": NATS_URL})).await;

    // Once, to the stream's end; strata killed midway, then started again: it goes on from
    // its cursor and no message is written twice.
    let once = import(
        &root,
        "nats",
        json!({"connection_id": id, "source": {"stream": stream}, "dataset": "clicks"}),
    )
    .await;
    killed_midway(&root, &mut server, &once, MESSAGES).await;
    let server = Server::start(dir.path(), &flags);
    let root = Signed::new(&server, &credentials);
    let done = job_when(&root, &once, finished).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["source"], json!({"stream": stream}), "{done}");
    assert_eq!(done["records_written"], MESSAGES, "{done}");
    let counted = sql(
        &root,
        "/sql",
        "SELECT count(*), count(DISTINCT n), sum(n), count(DISTINCT \"nats.sequence\") \
         FROM clicks",
    )
    .await;
    assert_eq!(
        rows(&counted),
        vec![json!([
            MESSAGES,
            MESSAGES,
            MESSAGES * (MESSAGES + 1) / 2,
            MESSAGES
        ])]
    );
    // The message's place and time under names a dataset takes, its fields beside them.
    let placed = sql(
        &root,
        "/sql",
        "SELECT \"nats.sequence\", \"nats.subject\", customer, total FROM clicks WHERE n = 4",
    )
    .await;
    assert_eq!(
        rows(&placed),
        vec![json!([4, format!("{stream}.web"), "ann", 40])]
    );
    let timed = sql(
        &root,
        "/sql",
        "SELECT count(*) FROM clicks WHERE \"@timestamp\" > '2020-01-01'",
    )
    .await;
    assert_eq!(rows(&timed), vec![json!([MESSAGES])]);

    // Followed: messages published later arrive, until the job is cancelled.
    let follow = import(
        &root,
        "nats",
        json!({"connection_id": id, "source": {"table": stream}, "dataset": "live",
               "follow": true}),
    )
    .await;
    job_when(&root, &follow, |job| job["records_written"] == MESSAGES).await;
    publish(&js, &stream, "app", orders(MESSAGES + 1..=MESSAGES + 3)).await;
    let caught_up = job_when(&root, &follow, |job| job["records_written"] == MESSAGES + 3).await;
    assert_eq!(caught_up["state"], "running", "{caught_up}");
    let cancelled = root
        .send("DELETE", &format!("/import/jobs/{follow}"), None)
        .await;
    assert_eq!(cancelled.body["result"], "cancelled", "{cancelled:?}");
    let stopped = job_when(&root, &follow, finished).await;
    assert_eq!(stopped["state"], "cancelled", "{stopped}");
    // The runner tells a cancelled job's task to stop at its next look (imports.tick_ms): a
    // message arriving before that may still be written.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    publish(&js, &stream, "app", orders(MESSAGES + 4..=MESSAGES + 4)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let live = sql(
        &root,
        "/sql",
        "SELECT count(*), count(DISTINCT \"nats.sequence\"), max(n) FROM live",
    )
    .await;
    assert_eq!(
        rows(&live),
        vec![json!([MESSAGES + 3, MESSAGES + 3, MESSAGES + 3])]
    );
    let subjects = sql(
        &root,
        "/sql",
        "SELECT \"nats.subject\", count(*) FROM live GROUP BY 1 ORDER BY 1",
    )
    .await;
    assert_eq!(
        rows(&subjects),
        vec![
            json!([format!("{stream}.app"), 3]),
            json!([format!("{stream}.web"), MESSAGES]),
        ]
    );

    js.delete_stream(&stream).await.unwrap();
}

#[tokio::test]
async fn a_nats_server_refuses_a_wrong_password_and_one_that_is_gone_fails_reads() {
    let mut nats = PrivateNats::start(&["--user", "strata", "--pass", "nats-Pa55word"]);
    let js = jetstream_at(&nats.url, Some(("strata", "nats-Pa55word"))).await;
    let stream = nats_stream(&js, "meter").await;
    publish(&js, &stream, "kwh", orders(1..=5)).await;

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));

    // A wrong password: 401, the connection in error.
    let wrong = connect(
        &root,
        "nats",
        "wrong",
        json!({"url": nats.url, "username": "strata", "password": "not-it"}),
    )
    .await;
    let refused = root
        .send("POST", &format!("/source/{wrong}/test"), None)
        .await;
    assert_eq!(refused.status, 401, "{refused:?}");
    assert!(
        message(&refused).contains("refused the credentials"),
        "{refused:?}"
    );
    let got = root.send("GET", &format!("/source/{wrong}"), None).await;
    assert_eq!(got.body["status"], "error", "{got:?}");

    // A token, right and wrong (another server, that takes tokens).
    let tokened = PrivateNats::start(&["--auth", "nats-T0ken"]);
    for (token, status) in [("nats-T0ken", 200), ("not-the-token", 401)] {
        let id = connect(
            &root,
            "nats",
            &format!("token-{status}"),
            json!({"url": tokened.url, "token": token}),
        )
        .await;
        let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
        assert_eq!(tested.status, status, "{tested:?}");
    }
    drop(tokened);

    // The right password: read in place.
    let id = connect(
        &root,
        "nats",
        "meter",
        json!({"url": nats.url, "username": "strata", "password": "nats-Pa55word"}),
    )
    .await;
    let tested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert_eq!(tested.body["datasets_available"], 1, "{tested:?}");
    let on = format!("/sql?connection_id={id}");
    let query = format!("SELECT sum(total) FROM \"{stream}\" WHERE n > 3");
    assert_eq!(rows(&sql(&root, &on, &query).await), vec![json!([90])]);

    // The server gone: SQL fails naming the stage, the connection is in error, an import
    // fails and writes nothing.
    nats.kill();
    let failed = sql(&root, &on, &query).await;
    assert_eq!(failed.status, 500, "{failed:?}");
    assert!(
        message(&failed).contains(&format!("read stream {stream}")),
        "{failed:?}"
    );
    let got = root.send("GET", &format!("/source/{id}"), None).await;
    assert_eq!(got.body["status"], "error", "{got:?}");
    let job = import(
        &root,
        "nats",
        json!({"connection_id": id, "source": {"stream": stream}, "dataset": "meter"}),
    )
    .await;
    let done = job_when(&root, &job, finished).await;
    assert_eq!(done["state"], "failed", "{done}");
    assert_eq!(done["records_written"], 0, "{done}");
    assert!(
        done["error"].as_str().unwrap().contains("read stream"),
        "{done}"
    );
    let counted = sql(&root, "/sql", "SELECT count(*) FROM meter").await;
    assert_ne!(counted.status, 200, "{counted:?}");
    let retested = root.send("POST", &format!("/source/{id}/test"), None).await;
    assert_eq!(retested.status, 500, "{retested:?}");
    assert!(message(&retested).contains("connect to"), "{retested:?}");
}

#[tokio::test]
async fn a_nats_stream_that_dropped_messages_or_was_created_again_is_told_so() {
    let js = jetstream_at(NATS_URL, None).await;
    let stream = unique("window");
    // At most five messages: older ones are dropped.
    let config = StreamConfig {
        name: stream.clone(),
        subjects: vec![format!("{stream}.>")],
        max_messages: 5,
        max_age: Duration::from_secs(24 * 3600),
        ..StreamConfig::default()
    };
    js.create_stream(config.clone()).await.unwrap();
    publish(&js, &stream, "m", orders(1..=3)).await;

    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let credentials = root_user(dir.path(), "acme");
    let root = Signed::new(&server, &credentials);
    let id = connect(&root, "nats", "events", json!({"url": NATS_URL})).await;
    let job = import(
        &root,
        "nats",
        json!({"connection_id": id, "source": {"stream": stream}, "dataset": "window",
               "follow": true}),
    )
    .await;
    job_when(&root, &job, |job| job["records_written"] == 3).await;
    server.kill9();

    // While strata is down, ten more: the stream keeps 9 to 13, 4 to 8 are gone unread. The
    // job goes on after them, and says so in the log.
    publish(&js, &stream, "m", orders(4..=13)).await;
    let mut server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &credentials);
    let resumed = job_when(&root, &job, |job| job["records_written"] == 8).await;
    assert_eq!(resumed["state"], "running", "{resumed}");
    let kept = sql(
        &root,
        "/sql",
        "SELECT \"nats.sequence\", n FROM window ORDER BY 1",
    )
    .await;
    let sequences: Vec<Value> = rows(&kept).iter().map(|row| row[0].clone()).collect();
    assert_eq!(
        sequences,
        json!([1, 2, 3, 9, 10, 11, 12, 13])
            .as_array()
            .unwrap()
            .clone()
    );
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(
        log.lines()
            .any(|line| line.contains("skipped") && line.contains(&job) && line.contains("=5")),
        "{log}"
    );
    server.kill9();

    // The stream deleted and made again under its name (its sequences start at 1 again): the
    // job fails rather than take its messages for the old stream's.
    js.delete_stream(&stream).await.unwrap();
    js.create_stream(config).await.unwrap();
    publish(&js, &stream, "m", orders(100..=101)).await;
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &credentials);
    let failed = job_when(&root, &job, finished).await;
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["records_written"], 8, "{failed}");
    assert!(
        failed["error"].as_str().unwrap().contains("created again"),
        "{failed}"
    );
    let counted = sql(&root, "/sql", "SELECT count(*), max(n) FROM window").await;
    assert_eq!(rows(&counted), vec![json!([8, 13])]);

    js.delete_stream(&stream).await.unwrap();
}
