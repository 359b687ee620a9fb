//! Platform SQL over HTTP: the request forms (JSON or text body, GET with `query`, the
//! per-dataset path), the answer's shape and column types, `start_time`/`end_time` bounds on
//! `@timestamp`, CSV answers, and refusals that name what is wrong. The dialect itself is
//! tested by the sqllogictest files under tests/sql/.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Server, Signed, root_user};
use serde_json::{Value, json};

fn start() -> (tempfile::TempDir, Server, Signed) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    (dir, server, platform)
}

async fn sql(platform: &Signed, path: &str, query: &str) -> common::Answer {
    platform
        .send("POST", path, Some(&json!({ "query": query })))
        .await
}

#[tokio::test]
async fn answers_have_typed_columns_rows_and_a_size() {
    let (_dir, _server, platform) = start();
    let lines = [
        json!({"index": {"_id": "a"}}),
        json!({"@timestamp": "2026-11-01T00:00:00Z", "host": "web-1", "bytes": 120, "load": 0.5, "ok": true}),
        json!({"index": {"_id": "b"}}),
        json!({"@timestamp": "2026-11-02T00:00:00Z", "host": "web-2", "bytes": 300, "load": 1.5, "ok": false}),
        json!({"index": {"_id": "c"}}),
        json!({"@timestamp": "2026-11-03T00:00:00Z", "host": "web-1", "bytes": 80, "load": 0.25, "ok": true, "tags": ["x", "y"]}),
    ];
    let written = platform.send_ndjson("POST", "/logs/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");

    let answer = sql(
        &platform,
        "/sql",
        "SELECT _id, \"@timestamp\", host, bytes, load, ok, tags FROM logs ORDER BY _id",
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body["columns"],
        json!([
            {"name": "_id", "type": "string"},
            {"name": "@timestamp", "type": "date"},
            {"name": "host", "type": "string"},
            {"name": "bytes", "type": "long"},
            {"name": "load", "type": "double"},
            {"name": "ok", "type": "boolean"},
            {"name": "tags", "type": "array"},
        ])
    );
    assert_eq!(answer.body["size"], 3);
    assert_eq!(
        answer.body["rows"][2],
        json!([
            "c",
            "2026-11-03T00:00:00.000Z",
            "web-1",
            80,
            0.25,
            true,
            ["x", "y"]
        ])
    );

    // The same statement as text, by GET with `query`, and on the dataset's path.
    let text = platform
        .send_text(
            "POST",
            "/sql",
            "text/plain",
            "SELECT COUNT(*) AS n FROM logs",
        )
        .await;
    assert_eq!(text.body["rows"], json!([[3]]), "{text:?}");
    let get = platform
        .send(
            "GET",
            "/sql?query=SELECT%20COUNT(*)%20AS%20n%20FROM%20logs",
            None,
        )
        .await;
    assert_eq!(get.body["rows"], json!([[3]]), "{get:?}");
    let on_dataset = sql(
        &platform,
        "/logs/sql",
        "SELECT MAX(bytes) AS most FROM logs",
    )
    .await;
    assert_eq!(on_dataset.body["rows"], json!([[300]]), "{on_dataset:?}");

    // `start_time` and `end_time` bound `@timestamp`, both included.
    let bounded = sql(
        &platform,
        "/sql?start_time=2026-11-02T00%3A00%3A00Z&end_time=2026-11-03T00%3A00%3A00Z",
        "SELECT _id FROM logs ORDER BY _id",
    )
    .await;
    assert_eq!(bounded.body["rows"], json!([["b"], ["c"]]), "{bounded:?}");
    let from = sql(
        &platform,
        "/sql?start_time=2026-11-03T00%3A00%3A00Z",
        "SELECT COUNT(*) FROM logs",
    )
    .await;
    assert_eq!(from.body["rows"], json!([[1]]), "{from:?}");

    // CSV, with a header line.
    let csv = sql(
        &platform,
        "/sql?response_type=csv",
        "SELECT host, bytes FROM logs ORDER BY bytes",
    )
    .await;
    assert_eq!(csv.status, 200);
    assert_eq!(
        csv.body,
        Value::String("host,bytes\nweb-1,80\nweb-1,120\nweb-2,300\n".to_owned())
    );

    // An INSERT answers how many rows it wrote.
    let inserted = sql(
        &platform,
        "/sql",
        "INSERT INTO logs (host, bytes) VALUES ('web-3', 1), ('web-4', 2)",
    )
    .await;
    assert_eq!(inserted.body, json!({"rows_affected": 2}), "{inserted:?}");
}

#[tokio::test]
async fn bad_requests_are_400s_that_name_what_is_wrong() {
    let (_dir, _server, platform) = start();
    for (path, body, needle) in [
        ("/sql", json!({"query": "SELECT 1 +"}), "Expected"),
        ("/sql", json!({"query": "DROP TABLE logs"}), "only a query"),
        ("/sql", json!({"sql": "SELECT 1"}), "{\"query\""),
        ("/sql", json!({"query": ""}), "empty"),
        (
            "/sql?start_time=yesterday",
            json!({"query": "SELECT 1"}),
            "RFC 3339",
        ),
        (
            "/sql?response_type=xml",
            json!({"query": "SELECT 1"}),
            "json (the default) or csv",
        ),
        (
            "/sql?colour=red",
            json!({"query": "SELECT 1"}),
            "unknown query parameter [colour]",
        ),
    ] {
        let answer = platform.send("POST", path, Some(&body)).await;
        assert_eq!(answer.status, 400, "{path} {body}: {answer:?}");
        let message = answer.body["message"].as_str().unwrap();
        assert!(message.starts_with("sql: "), "{message}");
        assert!(message.contains(needle), "{needle} in {message}");
    }
}
