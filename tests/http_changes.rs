//! Change streams over HTTP: `GET /v1/changes/{database}` as server-sent events, read with a
//! plain SSE parser over the real server, resumed by Last-Event-ID and from_offset, across a
//! restart, and checked against `strata-replay dump`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::{path::Path, time::Duration};

use common::{Client, Server, account_with_key};
use futures::StreamExt;
use serde_json::{Value, json};

/// One server-sent event.
#[derive(Debug, Clone)]
struct Sse {
    id: Option<String>,
    event: Option<String>,
    data: Value,
}

/// A server-sent event stream, parsed as the EventSource specification says (comments and
/// keep-alives skipped).
struct Events {
    body: futures::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buffer: String,
}

impl Events {
    async fn open(client: &Client, path: &str, last_event_id: Option<&str>) -> Events {
        let response = Events::request(client, path, last_event_id).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Events {
            body: response
                .bytes_stream()
                .map(|c| c.map(|b| b.to_vec()))
                .boxed(),
            buffer: String::new(),
        }
    }

    async fn request(
        client: &Client,
        path: &str,
        last_event_id: Option<&str>,
    ) -> reqwest::Response {
        let mut request = client
            .http
            .get(format!("{}{path}", client.base))
            .bearer_auth(client.key.as_deref().unwrap_or(""));
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        request.send().await.unwrap()
    }

    /// The next event; `None` when the server closes the stream. Panics after 20 s of silence.
    async fn next(&mut self) -> Option<Sse> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, None, Vec::new());
                for line in block.lines() {
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    match field {
                        "id" => id = Some(value.to_owned()),
                        "event" => event = Some(value.to_owned()),
                        "data" => data.push(value.to_owned()),
                        _ => {}
                    }
                }
                if data.is_empty() {
                    continue;
                }
                let data = serde_json::from_str(&data.join("\n")).unwrap();
                return Some(Sse { id, event, data });
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.body.next())
                .await
                .expect("an event within 20 s");
            match chunk {
                Some(Ok(bytes)) => self.buffer.push_str(std::str::from_utf8(&bytes).unwrap()),
                Some(Err(_)) | None => return None,
            }
        }
    }

    async fn take(&mut self, n: usize) -> Vec<Sse> {
        let mut events = Vec::new();
        while events.len() < n {
            events.push(self.next().await.expect("the stream ended early"));
        }
        events
    }
}

fn small_table(name: &str) -> Value {
    json!({
        "name": name,
        "schema": [
            {"name": "title", "type": "utf8", "nullable": false},
            {"name": "n", "type": "int64"}
        ],
        "fts_columns": ["title"]
    })
}

async fn append(client: &Client, database: &str, table: &str, rows: Value) {
    let answer = client
        .send(
            reqwest::Method::POST,
            &format!("/v1/append/{database}?table={table}"),
            Some(&json!({ "data": rows }).to_string()),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
}

async fn setup(server: &Server, key: &str, tables: &[&str]) -> Client {
    let client = server.client(key);
    assert_eq!(client.create_database("shop").await.status, 201);
    for table in tables {
        let answer = client.create_table("shop", &small_table(table)).await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    client
}

#[tokio::test]
async fn a_table_stream_carries_every_write_and_resumes_without_gap_or_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let server = Server::start(dir.path(), &[]);
    let client = setup(&server, &key, &["orders"]).await;
    append(
        &client,
        "shop",
        "orders",
        json!([{"title": "a", "n": 1}, {"title": "b", "n": 2}]),
    )
    .await;
    let answer = client
        .send(
            reqwest::Method::POST,
            "/v1/update/shop?table=orders&predicate=n%20%3D%201",
            Some(&json!({"data": [{"title": "a2", "n": 10}]}).to_string()),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let answer = client
        .send(
            reqwest::Method::POST,
            "/v1/delete/shop?table=orders&predicate=n%20%3D%202",
            None,
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");

    let mut stream = Events::open(&client, "/v1/changes/shop?table=orders", None).await;
    let events = stream.take(3).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.data["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["rows_appended", "rows_updated", "rows_deleted"]);
    for event in &events {
        assert_eq!(event.data["table"], "orders");
        assert_eq!(event.data["partition"], "acme/shop/orders");
        assert_eq!(
            event.id.as_deref(),
            Some(&*event.data["offset"].to_string())
        );
        assert!(
            event.data["principal"]
                .as_str()
                .unwrap()
                .starts_with("key:")
        );
    }
    assert_eq!(
        events[0].data["body"]["rows"],
        json!([{"_row_id": 0, "title": "a", "n": 1}, {"_row_id": 1, "title": "b", "n": 2}])
    );
    assert_eq!(
        events[1].data["body"]["rows"],
        json!([{"_row_id": 0, "title": "a2", "n": 10}])
    );
    assert_eq!(events[2].data["body"]["row_ids"], json!([1]));

    // The stream follows the tail.
    append(&client, "shop", "orders", json!([{"title": "c", "n": 3}])).await;
    let live = stream.next().await.unwrap();
    assert_eq!(live.data["body"]["rows"][0]["title"], "c");
    drop(stream);

    // Resuming after the second event gives the third, then the live one: no gap, no duplicate.
    let after_second = events[1].id.clone().unwrap();
    let mut resumed = Events::open(
        &client,
        "/v1/changes/shop?table=orders&from_offset=0",
        Some(&after_second),
    )
    .await;
    let again = resumed.take(2).await;
    assert_eq!(
        again[0].data, events[2].data,
        "Last-Event-ID wins over from_offset"
    );
    assert_eq!(again[1].data, live.data);
    let third_offset = events[2].data["offset"].as_u64().unwrap();
    let mut from = Events::open(
        &client,
        &format!("/v1/changes/shop?table=orders&from_offset={third_offset}"),
        None,
    )
    .await;
    assert_eq!(from.next().await.unwrap().data, events[2].data);
}

#[tokio::test]
async fn a_database_stream_follows_tables_created_after_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let server = Server::start(dir.path(), &[]);
    let client = setup(&server, &key, &["orders"]).await;
    append(&client, "shop", "orders", json!([{"title": "a", "n": 1}])).await;

    let mut stream = Events::open(&client, "/v1/changes/shop", None).await;
    let first = stream.take(2).await;
    let kinds: Vec<(&str, &Value)> = first
        .iter()
        .map(|e| (e.data["kind"].as_str().unwrap(), &e.data["table"]))
        .collect();
    assert!(
        kinds.contains(&("table_created", &Value::Null)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("rows_appended", &json!("orders"))),
        "{kinds:?}"
    );

    // A table created while the stream runs: its creation, then its rows.
    assert_eq!(
        client
            .create_table("shop", &small_table("items"))
            .await
            .status,
        200
    );
    append(&client, "shop", "items", json!([{"title": "x", "n": 7}])).await;
    let later = stream.take(2).await;
    assert_eq!(later[0].data["kind"], "table_created");
    assert_eq!(later[0].data["body"]["name"], "items");
    assert_eq!(later[1].data["table"], "items");
    assert_eq!(later[1].data["body"]["rows"][0]["n"], 7);
    drop(stream);

    // The id of the last event names every partition's position: resuming from it gives only
    // what came after.
    let cursor = later[1].id.clone().unwrap();
    assert!(
        cursor.contains("_catalog:") && cursor.contains("items:"),
        "{cursor}"
    );
    append(&client, "shop", "orders", json!([{"title": "b", "n": 2}])).await;
    let mut resumed = Events::open(&client, "/v1/changes/shop", Some(&cursor)).await;
    let next = resumed.next().await.unwrap();
    assert_eq!(next.data["table"], "orders");
    assert_eq!(next.data["body"]["rows"][0]["title"], "b");
}

#[tokio::test]
async fn bad_stream_requests_are_refused_in_the_error_shape() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let other = account_with_key(dir.path(), "acme", Some("logs-*"));
    let server = Server::start(dir.path(), &[]);
    let client = setup(&server, &key, &["orders"]).await;
    for (client, path, last_event_id, status, code) in [
        (
            &client,
            "/v1/changes/shop?from_offset=3",
            None,
            400,
            "bad_request",
        ),
        (
            &client,
            "/v1/changes/shop?table=nope",
            None,
            404,
            "table_not_found",
        ),
        (
            &client,
            "/v1/changes/shop?table=orders&from_offset=99",
            None,
            400,
            "bad_request",
        ),
        (
            &client,
            "/v1/changes/shop?table=orders",
            Some("x"),
            400,
            "bad_request",
        ),
        (
            &client,
            "/v1/changes/shop",
            Some("orders"),
            400,
            "bad_request",
        ),
        (
            &client,
            "/v1/changes/shop?tabel=orders",
            None,
            400,
            "bad_request",
        ),
        (&client, "/v1/changes/nope", None, 404, "database_not_found"),
        (
            &server.client(&other),
            "/v1/changes/shop",
            None,
            403,
            "forbidden",
        ),
        (
            &server.anonymous(),
            "/v1/changes/shop",
            None,
            401,
            "unauthorized",
        ),
    ] {
        let response = Events::request(client, path, last_event_id).await;
        assert_eq!(response.status(), status, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], code, "{path}: {body}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
}

/// `strata-replay dump` of one partition, without leader-epoch markers (streams leave them
/// out: they change nothing).
fn dump(dir: &Path, partition: &str) -> Vec<Value> {
    let output = common::replay(dir, &["dump", "--partition", partition]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["kind"] != "leader_epoch")
        .collect()
}

/// Appends row number `i` to shop.orders.
async fn append_numbered(client: &Client, i: i64) {
    let row = json!([{"title": format!("r{i}"), "n": i}]);
    append(client, "shop", "orders", row).await;
}

#[tokio::test]
async fn a_stream_consumed_across_a_restart_equals_the_dump() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let mut server = Server::start(dir.path(), &[]);
    let client = setup(&server, &key, &["orders"]).await;
    let mut received = Vec::new();
    let mut stream = Events::open(&client, "/v1/changes/shop?table=orders", None).await;
    for i in 0..3 {
        append_numbered(&client, i).await;
        received.push(stream.next().await.unwrap());
    }
    // An orderly shutdown ends the stream instead of waiting for it.
    assert!(server.stop());
    assert!(stream.next().await.is_none());

    let server = Server::start(dir.path(), &[]);
    let client = server.client(&key);
    for i in 3..6 {
        append_numbered(&client, i).await;
    }
    let last = received.last().unwrap().id.clone().unwrap();
    let mut stream = Events::open(&client, "/v1/changes/shop?table=orders", Some(&last)).await;
    received.extend(stream.take(3).await);
    drop(stream);
    drop(server);

    let dumped = dump(dir.path(), "acme/shop/orders");
    let streamed: Vec<Value> = received.iter().map(|e| e.data.clone()).collect();
    assert_eq!(streamed, dumped);
    assert!(received.iter().all(|e| e.event.is_none()));
}

/// The bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            match entry.file_type().unwrap().is_dir() {
                true => bytes_under(&entry.path()),
                false => entry.metadata().unwrap().len(),
            }
        })
        .sum()
}

#[tokio::test]
async fn a_large_append_is_logged_compressed_and_reads_back_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let mut server = Server::start(dir.path(), &[]);
    let client = setup(&server, &key, &["orders"]).await;
    // The data directory's FileLog, unless the run is on Kafka (STRATA_TEST_LOG=kafka).
    let file_log = common::log_env(dir.path())
        .is_empty()
        .then(|| dir.path().join("log"));
    let log_before = file_log.as_deref().map_or(0, bytes_under);
    // About 450 KB of text, in one request: a batch that is logged with its buffers compressed.
    let rows: Vec<Value> = (0..6000)
        .map(|i| json!({"title": format!("order {i:05} for a customer of the north region, paid by card"), "n": i}))
        .collect();
    let text: usize = rows
        .iter()
        .map(|r| r["title"].as_str().unwrap().len())
        .sum();
    append(&client, "shop", "orders", json!(rows)).await;
    if let Some(log) = &file_log {
        let logged = bytes_under(log) - log_before;
        assert!(
            (logged as usize) < text / 2,
            "{logged} bytes logged for {text} bytes of titles: the record is not compressed"
        );
    }

    // The change stream decodes it...
    let mut stream = Events::open(&client, "/v1/changes/shop?table=orders", None).await;
    let event = stream.next().await.unwrap();
    drop(stream);
    let streamed = event.data["body"]["rows"].as_array().unwrap();
    assert_eq!(streamed.len(), rows.len());
    for (i, (got, sent)) in streamed.iter().zip(&rows).enumerate() {
        assert_eq!(got["_row_id"], i);
        assert_eq!((&got["title"], &got["n"]), (&sent["title"], &sent["n"]));
    }
    // ...and so do the projections after a restart, which read the rows from the log again.
    assert!(server.stop());
    let server = Server::start(dir.path(), &[]);
    let client = server.client(&key);
    let answer = client
        .post_json(
            "/v1/query_sql/shop",
            &json!({"sql": "SELECT count(*) AS c, sum(n) AS s FROM orders"}),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body["data"][0],
        json!({"c": 6000, "s": 5999 * 6000 / 2})
    );
    drop(server);
    let dumped = dump(dir.path(), "acme/shop/orders");
    let appended = dumped
        .iter()
        .find(|e| e["kind"] == "rows_appended")
        .unwrap();
    assert_eq!(appended["body"]["rows"], event.data["body"]["rows"]);
    common::verify_passes(common::replay(dir.path(), &["verify"]));
}
