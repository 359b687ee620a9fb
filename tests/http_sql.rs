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
    // On a dataset's path, an INSERT writes that dataset and no other.
    let upsert = "INSERT INTO logs (_id, host) VALUES ('a', 'web-9') ON CONFLICT (_id) DO UPDATE SET host = EXCLUDED.host";
    let on_path = sql(&platform, "/logs/sql", upsert).await;
    assert_eq!(on_path.body, json!({"rows_affected": 1}), "{on_path:?}");
    let elsewhere = sql(
        &platform,
        "/metrics-x/sql",
        "INSERT INTO logs (host) VALUES ('web-5')",
    )
    .await;
    assert_eq!(elsewhere.status, 400, "{elsewhere:?}");
    let message = elsewhere.body["message"].as_str().unwrap();
    assert!(
        message.contains("this path writes dataset [metrics-x]"),
        "{message}"
    );
    let count = sql(&platform, "/sql", "SELECT COUNT(*) FROM logs").await;
    assert_eq!(count.body["rows"], json!([[5]]), "{count:?}");
    let reserved = sql(&platform, "/_x/sql", "SELECT 1").await;
    assert_eq!(reserved.status, 400, "{reserved:?}");
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

#[tokio::test]
async fn knn_search_keeps_to_the_time_bounds_and_shows_only_the_datasets_columns() {
    let (_dir, _server, platform) = start();
    let mappings = json!({"mappings": {"properties": {"v": {"type": "knn_vector", "dimension": 2, "space_type": "l2"}}}});
    let created = platform.send("PUT", "/points", Some(&mappings)).await;
    assert_eq!(created.status, 200, "{created:?}");
    let lines = [
        json!({"index": {"_id": "old"}}),
        json!({"@timestamp": "2026-11-01T00:00:00Z", "v": [1.0, 0.0]}),
        json!({"index": {"_id": "mid"}}),
        json!({"@timestamp": "2026-11-02T00:00:00Z", "v": [0.9, 0.1]}),
        json!({"index": {"_id": "new"}}),
        json!({"@timestamp": "2026-11-03T00:00:00Z", "v": [0.0, 1.0]}),
    ];
    let written = platform.send_ndjson("POST", "/points/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");

    let nearest = "SELECT _id FROM KNN_SEARCH('points', 'v', [1.0, 0.0], 2) ORDER BY _score DESC";
    for (params, expected) in [
        ("", json!([["old"], ["mid"]])),
        // The nearest two of those from the 2nd on, not the nearest two filtered afterwards.
        (
            "?start_time=2026-11-02T00%3A00%3A00Z",
            json!([["mid"], ["new"]]),
        ),
        ("?end_time=2026-11-01T12%3A00%3A00Z", json!([["old"]])),
    ] {
        let answer = sql(&platform, &format!("/sql{params}"), nearest).await;
        assert_eq!(answer.status, 200, "{params}: {answer:?}");
        assert_eq!(answer.body["rows"], expected, "{params}: {answer:?}");
    }

    // Its columns are the dataset's and `_score`; the hidden row id is not one of them.
    let all = sql(
        &platform,
        "/sql",
        "SELECT * FROM KNN_SEARCH('points', 'v', [0.0, 1.0], 1)",
    )
    .await;
    assert_eq!(all.status, 200, "{all:?}");
    let names: Vec<&str> = all.body["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["_id", "@timestamp", "v", "_score"], "{all:?}");
    assert_eq!(all.body["rows"][0][0], "new", "{all:?}");
}
