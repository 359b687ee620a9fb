//! Row writes and SQL over HTTP, against the real binary: append (JSON and Arrow IPC), update,
//! delete, one write at a time per table, query_sql, and the 400s, 404s and 409s of each.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::{collections::BTreeSet, io::Cursor, sync::Arc};

use arrow::{
    array::{Float64Array, Int32Array, RecordBatch, StringArray},
    ipc::{reader::StreamReader, writer::StreamWriter},
};
use arrow_schema::{DataType, Field, Schema};
use common::{Answer, Client, Server, account_with_key};
use serde_json::{Value, json};

const ARROW: &str = "application/vnd.apache.arrow.stream";

fn start(extra: &[&str]) -> (tempfile::TempDir, Server, String) {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let server = Server::start(dir.path(), extra);
    (dir, server, key)
}

fn assert_error(answer: &Answer, status: u16, code: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert_eq!(answer.code(), code, "{answer:?}");
}

fn items() -> Value {
    json!({
        "name": "items",
        "schema": [
            {"name": "title", "type": "utf8", "nullable": false},
            {"name": "price", "type": "float64"},
            {"name": "qty", "type": "int32"},
            {"name": "emb", "type": "vector<float32,2>"}
        ],
        "fts_columns": ["title"],
        "vector_column": "emb"
    })
}

async fn setup(client: &Client) {
    assert_eq!(client.create_database("shop").await.status, 201);
    assert_eq!(client.create_table("shop", &items()).await.status, 200);
}

async fn append(client: &Client, rows: Value) -> Answer {
    client
        .post_json("/v1/append/shop?table=items", &json!({ "data": rows }))
        .await
}

async fn sql(client: &Client, query: &str) -> Vec<Value> {
    let answer = client
        .post_json("/v1/query_sql/shop", &json!({ "sql": query }))
        .await;
    assert_eq!(answer.status, 200, "{query}: {answer:?}");
    answer.body["data"].as_array().unwrap().clone()
}

fn arrow_stream(batches: &[RecordBatch], schema: &Arc<Schema>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut writer = StreamWriter::try_new(&mut out, schema).unwrap();
    for batch in batches {
        writer.write(batch).unwrap();
    }
    writer.finish().unwrap();
    drop(writer);
    out
}

async fn post_arrow(client: &Client, path: &str, bytes: Vec<u8>) -> reqwest::Response {
    client
        .http
        .post(format!("{}{path}", client.base))
        .bearer_auth(client.key.as_deref().unwrap())
        .header("content-type", ARROW)
        .body(bytes)
        .send()
        .await
        .unwrap()
}

fn read_arrow(bytes: &[u8]) -> Vec<RecordBatch> {
    StreamReader::try_new(Cursor::new(bytes), None)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

#[tokio::test]
async fn appended_rows_come_back_with_their_row_ids() {
    let (_dir, server, key) = start(&[]);
    let client = server.client(&key);
    setup(&client).await;

    let answer = append(
        &client,
        json!([
            {"title": "apple", "price": 1.5, "qty": 3, "emb": [1, 0]},
            {"title": "pear"}
        ]),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body["data"],
        json!([
            {"_row_id": 0, "title": "apple", "price": 1.5, "qty": 3, "emb": [1.0, 0.0]},
            {"_row_id": 1, "title": "pear", "price": null, "qty": null, "emb": null}
        ])
    );

    // An Arrow IPC body, with a column of a narrower type and one column left out; the answer
    // is Arrow IPC by default.
    let schema = Arc::new(Schema::new(vec![
        Field::new("title", DataType::Utf8, false),
        Field::new("qty", DataType::Int32, true),
        Field::new("price", DataType::Float64, true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec!["fig", "kiwi"])),
            Arc::new(Int32Array::from(vec![Some(1), None])),
            Arc::new(Float64Array::from(vec![3.0, 0.5])),
        ],
    )
    .unwrap();
    let response = post_arrow(
        &client,
        "/v1/append/shop?table=items",
        arrow_stream(&[batch], &schema),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], ARROW);
    let back = read_arrow(&response.bytes().await.unwrap());
    assert_eq!(back.len(), 1);
    let ids = back[0]
        .column_by_name("_row_id")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow::array::UInt64Array>()
        .unwrap();
    assert_eq!(ids.values(), &[2, 3]);

    // Reads see every acknowledged write.
    let rows = sql(&client, "SELECT _row_id, title FROM items ORDER BY _row_id").await;
    let titles: Vec<&str> = rows.iter().map(|r| r["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["apple", "pear", "fig", "kiwi"]);
}

#[tokio::test]
async fn bad_appends_are_refused_naming_the_column_and_apply_nothing() {
    let (_dir, server, key) = start(&[]);
    let client = server.client(&key);
    setup(&client).await;
    append(&client, json!([{"title": "seed"}])).await;
    let before = client.counter("strata_log_appended_events_total").await;

    for (rows, needle) in [
        (json!([{"title": "a", "colour": "red"}]), "colour"),
        (json!([{"title": "a", "price": "cheap"}]), "price"),
        (json!([{"price": 1}]), "title"),
        (json!([{"title": "a", "emb": [1, 2, 3]}]), "emb"),
        (json!([{"title": "a", "_row_id": 7}]), "_row_id"),
        (json!([{"title": "ok"}, {"title": null}]), "title"),
        (json!([{"title": "a", "qty": 1.5}]), "qty"),
        (json!([{"title": "a", "qty": "3"}]), "qty"),
    ] {
        let answer = append(&client, rows.clone()).await;
        assert_error(&answer, 400, "bad_request");
        let message = answer.body["message"].as_str().unwrap();
        assert!(message.contains(needle), "{rows}: {message}");
    }
    for body in [
        json!({"rows": []}),
        json!([1, 2]),
        json!({"data": [], "extra": 1}),
    ] {
        let answer = client.post_json("/v1/append/shop?table=items", &body).await;
        assert_error(&answer, 400, "bad_request");
    }
    // Arrow bodies: not Arrow, no batch, two batches.
    let schema = Arc::new(Schema::new(vec![Field::new(
        "title",
        DataType::Utf8,
        false,
    )]));
    let one =
        RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(vec!["x"]))]).unwrap();
    for (bytes, needle) in [
        (b"definitely not arrow".to_vec(), "not an Arrow IPC stream"),
        (arrow_stream(&[], &schema), "holds 0"),
        (arrow_stream(&[one.clone(), one], &schema), "holds 2"),
    ] {
        let answer =
            Client::answer(post_arrow(&client, "/v1/append/shop?table=items", bytes).await).await;
        assert_error(&answer, 400, "bad_request");
        assert!(
            answer.body["message"].as_str().unwrap().contains(needle),
            "{answer:?}"
        );
    }
    // Missing or unknown parameters.
    for path in ["/v1/append/shop", "/v1/append/shop?table=items&extra=1"] {
        let answer = client.post_json(path, &json!({"data": []})).await;
        assert_error(&answer, 400, "bad_request");
    }
    assert_eq!(
        client.counter("strata_log_appended_events_total").await,
        before
    );
    assert_eq!(
        sql(&client, "SELECT count(*) AS n FROM items").await,
        vec![json!({"n": 1})]
    );

    // A malformed table name is a 400, as for the catalog operations.
    let answer = client
        .post_json("/v1/append/shop?table=no%20such", &json!({"data": []}))
        .await;
    assert_error(&answer, 400, "invalid_name");
    // Append never creates a table; nor a database.
    let answer = client
        .post_json(
            "/v1/append/shop?table=nope",
            &json!({"data": [{"title": "a"}]}),
        )
        .await;
    assert_error(&answer, 404, "table_not_found");
    let answer = client
        .post_json(
            "/v1/append/nope?table=items",
            &json!({"data": [{"title": "a"}]}),
        )
        .await;
    assert_error(&answer, 404, "database_not_found");
    assert_eq!(client.list_tables("shop").await.body, json!(["items"]));
}

#[tokio::test]
async fn update_and_delete_resolve_predicates_to_row_ids() {
    let (_dir, server, key) = start(&[]);
    let client = server.client(&key);
    setup(&client).await;
    append(
        &client,
        json!([
            {"title": "a", "price": 1.0, "emb": [1, 1]},
            {"title": "b", "price": 2.0},
            {"title": "c", "price": 3.0, "emb": [0, 1]},
            {"title": "d", "price": 4.0}
        ]),
    )
    .await;

    // Update: replacement rows 1:1, in row-id order; the row ids stay.
    let answer = client
        .post_json(
            "/v1/update/shop?table=items&predicate=price%20%3E%201.5%20AND%20price%20%3C%203.5",
            &json!({"data": [{"title": "B", "price": 20.0}, {"title": "C", "price": 30.0}]}),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body,
        json!({"matched": 2, "n_tombstoned": 2, "n_not_found": 0})
    );
    let rows = sql(
        &client,
        "SELECT _row_id, title, price FROM items ORDER BY _row_id",
    )
    .await;
    assert_eq!(
        rows,
        vec![
            json!({"_row_id": 0, "title": "a", "price": 1.0}),
            json!({"_row_id": 1, "title": "B", "price": 20.0}),
            json!({"_row_id": 2, "title": "C", "price": 30.0}),
            json!({"_row_id": 3, "title": "d", "price": 4.0}),
        ]
    );

    // A count mismatch is a 400 and applies nothing.
    let before = client.counter("strata_log_appended_events_total").await;
    let answer = client
        .post_json(
            "/v1/update/shop?table=items&predicate=price%20%3E%203",
            &json!({"data": [{"title": "only one"}]}),
        )
        .await;
    assert_error(&answer, 400, "bad_request");
    assert!(
        answer.body["message"]
            .as_str()
            .unwrap()
            .contains("matched 3 rows")
    );
    assert_eq!(
        client.counter("strata_log_appended_events_total").await,
        before
    );

    // Delete, with row ids named explicitly: one exists, one does not.
    let answer = client
        .post_empty("/v1/delete/shop?table=items&predicate=_row_id%20IN%20(0,%2042)")
        .await;
    assert_eq!(
        answer.body,
        json!({"matched": 1, "n_tombstoned": 1, "n_not_found": 1})
    );
    // Deleting again matches nothing, and the row is now not found.
    let answer = client
        .post_empty("/v1/delete/shop?table=items&predicate=_row_id%20%3D%200")
        .await;
    assert_eq!(
        answer.body,
        json!({"matched": 0, "n_tombstoned": 0, "n_not_found": 1})
    );
    let rows = sql(&client, "SELECT _row_id FROM items ORDER BY _row_id").await;
    assert_eq!(
        rows,
        vec![
            json!({"_row_id": 1}),
            json!({"_row_id": 2}),
            json!({"_row_id": 3})
        ]
    );

    // Bad predicates are 400s that say why; nothing is applied.
    for predicate in [
        "",
        "price >",
        "nope = 1",
        "price + 1",
        "1; DROP TABLE items",
        "title = (SELECT 1)",
    ] {
        let path = format!(
            "/v1/delete/shop?table=items&predicate={}",
            percent(predicate)
        );
        let answer = client.post_empty(&path).await;
        assert_error(&answer, 400, "bad_request");
    }
    let answer = client.post_empty("/v1/delete/shop?table=items").await;
    assert_error(&answer, 400, "bad_request");
    assert!(
        answer.body["message"]
            .as_str()
            .unwrap()
            .contains("predicate")
    );
    assert_error(
        &client
            .post_empty("/v1/delete/shop?table=gone&predicate=true")
            .await,
        404,
        "table_not_found",
    );
    assert_eq!(
        sql(&client, "SELECT count(*) AS n FROM items").await,
        vec![json!({"n": 3})]
    );
}

fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn query_sql_reads_across_tables_and_refuses_anything_but_a_query() {
    let (_dir, server, key) = start(&[]);
    let client = server.client(&key);
    setup(&client).await;
    let orders = json!({"name": "orders", "schema": [
        {"name": "item", "type": "int64"}, {"name": "n", "type": "int32"}]});
    assert_eq!(client.create_table("shop", &orders).await.status, 200);
    append(
        &client,
        json!([{"title": "a", "price": 2.0}, {"title": "b", "price": 5.0}]),
    )
    .await;
    client
        .post_json(
            "/v1/append/shop?table=orders",
            &json!({"data": [{"item": 0, "n": 3}, {"item": 1, "n": 1}, {"item": 0, "n": 2}]}),
        )
        .await;
    let rows = sql(
        &client,
        "SELECT i.title, sum(o.n * i.price) AS spent FROM orders o JOIN items i ON o.item = i._row_id \
         GROUP BY i.title ORDER BY i.title",
    )
    .await;
    assert_eq!(
        rows,
        vec![
            json!({"title": "a", "spent": 10.0}),
            json!({"title": "b", "spent": 5.0})
        ]
    );

    // Arrow IPC by default, with the result's schema even when empty.
    let response = client
        .http
        .post(format!("{}/v1/query_sql/shop", client.base))
        .bearer_auth(&key)
        .json(&json!({"sql": "SELECT title FROM items WHERE price > 100"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], ARROW);
    let reader = StreamReader::try_new(Cursor::new(response.bytes().await.unwrap()), None).unwrap();
    assert_eq!(reader.schema().field(0).name(), "title");

    for (query, needle) in [
        ("CREATE TABLE t (a INT)", "only a query"),
        ("DROP TABLE items", "only a query"),
        ("INSERT INTO items (title) VALUES ('x')", "only a query"),
        ("DELETE FROM items", "only a query"),
        ("COPY items TO '/tmp/out.parquet'", "only a query"),
        ("SELECT 1; SELECT 2", ""),
        ("SELEC title FROM items", ""),
        ("SELECT nope FROM items", "nope"),
        ("SELECT * FROM missing", "missing"),
        ("", "empty"),
    ] {
        let answer = client
            .post_json("/v1/query_sql/shop", &json!({"sql": query}))
            .await;
        assert_error(&answer, 400, "bad_request");
        assert!(
            answer.body["message"].as_str().unwrap().contains(needle),
            "{query}: {answer:?}"
        );
    }
    for body in [
        json!({}),
        json!({"sql": "SELECT 1", "limit": 3}),
        json!({"query": "SELECT 1"}),
    ] {
        let answer = client.post_json("/v1/query_sql/shop", &body).await;
        assert_error(&answer, 400, "bad_request");
    }
    assert_eq!(
        sql(&client, "SELECT count(*) AS n FROM items").await,
        vec![json!({"n": 2})]
    );
}

/// Concurrent writes to one table: only 200 and 409 (with Retry-After) come back, and the rows
/// stored are exactly the acknowledged ones.
#[tokio::test]
async fn one_write_at_a_time_per_table() {
    let (_dir, server, key) = start(&["--set", "debug.hold_write_permit_ms=200"]);
    let client = server.client(&key);
    setup(&client).await;
    let mut tasks = Vec::new();
    for i in 0..10 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let title = format!("w{i}");
            (
                title.clone(),
                append(&client, json!([{"title": title}])).await,
            )
        }));
    }
    let mut acknowledged = BTreeSet::new();
    let mut refused = 0;
    for task in tasks {
        let (title, answer) = task.await.unwrap();
        match answer.status {
            200 => {
                acknowledged.insert(title);
            }
            409 => {
                assert_eq!(answer.code(), "busy", "{answer:?}");
                assert_eq!(answer.retry_after.as_deref(), Some("1"));
                refused += 1;
            }
            other => panic!("unexpected {other}: {answer:?}"),
        }
    }
    assert!(refused > 0, "no write met another in flight");
    let stored: BTreeSet<String> = sql(&client, "SELECT title FROM items")
        .await
        .into_iter()
        .map(|r| r["title"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(stored, acknowledged);

    // A delete meeting a write in flight is refused the same way.
    let slow = {
        let client = client.clone();
        tokio::spawn(async move { append(&client, json!([{"title": "slow"}])).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(80)).await;
    let busy = client
        .post_empty("/v1/delete/shop?table=items&predicate=true")
        .await;
    assert_error(&busy, 409, "busy");
    assert_eq!(busy.retry_after.as_deref(), Some("1"));
    assert_eq!(slow.await.unwrap().status, 200);
}

/// Rows survive restarts, whether they were flushed into segments or still in the memtable;
/// compaction does not change what queries see.
#[tokio::test]
async fn rows_survive_restarts_through_flushes_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let args = [
        "--set",
        "tables.flush_rows=7",
        "--set",
        "tables.compact_min_segments=3",
    ];
    let mut server = Server::start(dir.path(), &args);
    let client = server.client(&key);
    setup(&client).await;
    for batch in 0..12 {
        let rows: Vec<Value> = (0..5)
            .map(|i| json!({"title": format!("r{batch}-{i}"), "qty": batch * 10 + i}))
            .collect();
        assert_eq!(append(&client, Value::Array(rows)).await.status, 200);
        if batch % 3 == 2 {
            let predicate = percent(&format!("qty % 2 = 0 AND qty < {}", batch * 10));
            client
                .post_empty(&format!(
                    "/v1/delete/shop?table=items&predicate={predicate}"
                ))
                .await;
        }
    }
    let expected = sql(
        &client,
        "SELECT _row_id, title, qty FROM items ORDER BY _row_id",
    )
    .await;
    assert!(
        expected.len() > 20 && expected.len() < 60,
        "{}",
        expected.len()
    );
    // Give the background flushes and compactions a moment, then stop the hard way.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let segments = std::fs::read_dir(dir.path().join("tables"))
        .unwrap()
        .flat_map(|db| std::fs::read_dir(db.unwrap().path()).unwrap())
        .flat_map(|table| std::fs::read_dir(table.unwrap().path().join("segments")).unwrap())
        .count();
    assert!(segments >= 1, "no segment was flushed");
    server.kill9();

    let server = Server::start(dir.path(), &args);
    let client = server.client(&key);
    let after = sql(
        &client,
        "SELECT _row_id, title, qty FROM items ORDER BY _row_id",
    )
    .await;
    assert_eq!(after, expected);
    // New rows continue the row ids.
    let answer = append(&client, json!([{"title": "after"}])).await;
    assert_eq!(answer.body["data"][0]["_row_id"], 60);
}

/// The segment files a compaction replaced are deleted once no read needs them, without
/// waiting for another write to the table.
#[tokio::test]
async fn a_quiet_table_lets_go_of_the_segments_a_compaction_replaced() {
    let (dir, server, key) = start(&[
        "--set",
        "tables.flush_rows=2",
        "--set",
        "tables.compact_min_segments=3",
    ]);
    let client = server.client(&key);
    setup(&client).await;
    let segment_files = || {
        std::fs::read_dir(dir.path().join("tables"))
            .unwrap()
            .flat_map(|db| std::fs::read_dir(db.unwrap().path()).unwrap())
            .flat_map(|table| {
                std::fs::read_dir(table.unwrap().path().join("segments"))
                    .into_iter()
                    .flatten()
            })
            .count()
    };
    for batch in 0..3 {
        let rows: Vec<Value> = (0..2)
            .map(|i| json!({"title": format!("r{batch}-{i}"), "qty": batch * 10 + i}))
            .collect();
        assert_eq!(append(&client, Value::Array(rows)).await.status, 200);
        // One segment per append: a flush still running when the next append lands would
        // take both appends' rows.
        if batch < 2 {
            assert!(
                common::eventually(20, || async { segment_files() == batch as usize + 1 }).await,
                "{} segment files after {} appends",
                segment_files(),
                batch + 1
            );
        }
    }
    // Three flushed segments, merged into one; the table then gets no more writes.
    assert!(
        common::eventually(20, || async { segment_files() == 1 }).await,
        "{} segment files are left",
        segment_files()
    );
    let rows = sql(&client, "SELECT title FROM items ORDER BY _row_id").await;
    assert_eq!(rows.len(), 6);
    assert_eq!(rows[5]["title"], "r2-1");
}

#[tokio::test]
async fn a_decimal_column_keeps_exact_values_and_refuses_what_does_not_fit() {
    let (_dir, server, key) = start(&[]);
    let client = server.client(&key);
    assert_eq!(client.create_database("shop").await.status, 201);
    let ledger = json!({
        "name": "ledger",
        "schema": [
            {"name": "what", "type": "utf8"},
            {"name": "amount", "type": "decimal( 12 , 2 )"}
        ]
    });
    let created = client.create_table("shop", &ledger).await;
    assert_eq!(created.status, 200, "{created:?}");
    let schema = client.schema("shop", "ledger").await;
    let amount = schema
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "amount")
        .cloned()
        .unwrap();
    assert_eq!(amount["type"], "decimal(12,2)");
    let rows = json!({"data": [
        {"what": "a", "amount": 0.1},
        {"what": "b", "amount": "0.2"},
        {"what": "c", "amount": 1000000000.01}
    ]});
    let appended = client
        .post_json("/v1/append/shop?table=ledger", &rows)
        .await;
    assert_eq!(appended.status, 200, "{appended:?}");
    // 0.1 + 0.2 is 0.3 exactly, not 0.30000000000000004.
    let total = sql(
        &client,
        "SELECT CAST(sum(amount) AS VARCHAR) AS total FROM ledger WHERE what <> 'c'",
    )
    .await;
    assert_eq!(total, [json!({"total": "0.30"})]);
    let big = sql(
        &client,
        "SELECT CAST(amount AS VARCHAR) AS a FROM ledger WHERE what = 'c'",
    )
    .await;
    assert_eq!(big, [json!({"a": "1000000000.01"})]);
    for bad in [json!(true), json!("twelve"), json!(12345678901.5)] {
        let refused = client
            .post_json(
                "/v1/append/shop?table=ledger",
                &json!({"data": [{"what": "x", "amount": bad}]}),
            )
            .await;
        assert_error(&refused, 400, "bad_request");
    }
    let count = sql(&client, "SELECT count(*) AS n FROM ledger").await;
    assert_eq!(count, [json!({"n": 3})]);
}
