//! Plan ceilings on stored rows and vectors, over HTTP against the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Answer, Client, Server, account_with_key, admin};
use serde_json::{Value, json};

fn table(name: &str) -> Value {
    json!({"name": name, "schema": [
        {"name": "title", "type": "utf8"},
        {"name": "emb", "type": "vector<float32,2>"}],
        "vector_column": "emb"})
}

async fn append(
    client: &Client,
    database: &str,
    table: &str,
    rows: usize,
    with_vectors: usize,
) -> Answer {
    let data: Vec<Value> = (0..rows)
        .map(|i| match i < with_vectors {
            true => json!({"title": format!("r{i}"), "emb": [1, 0]}),
            false => json!({"title": format!("r{i}")}),
        })
        .collect();
    let body = json!({ "data": data }).to_string();
    client
        .try_send_json(
            reqwest::Method::POST,
            &format!("/v1/append/{database}?table={table}"),
            &body,
        )
        .await
        .unwrap()
}

fn assert_limit(answer: &Answer, limit: &str, used: u64, requested: u64, max: u64, raises: bool) {
    assert_eq!(answer.status, 403, "{answer:?}");
    assert_eq!(answer.code(), "limit_reached");
    assert_eq!(answer.body["limit"], limit, "{answer:?}");
    assert_eq!(answer.body["used"], used, "{answer:?}");
    assert_eq!(answer.body["requested"], requested);
    assert_eq!(answer.body["max"], max);
    assert_eq!(answer.body["payment_method_raises"], raises);
    assert_eq!(answer.retry_after, None, "a quota refusal is not transient");
}

#[tokio::test]
async fn appends_past_the_plan_are_refused_until_rows_are_deleted_or_the_plan_is_raised() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let args = [
        "--set",
        "plans.free.max_rows=10",
        "--set",
        "plans.free.max_vectors=3",
        "--set",
        "plans.paid.max_rows=15",
        "--set",
        "plans.paid.max_vectors=3",
    ];
    let mut server = Server::start(dir.path(), &args);
    let client = server.client(&key);
    client.create_database("a").await;
    client.create_database("b").await;
    assert_eq!(client.create_table("a", &table("t")).await.status, 200);
    assert_eq!(client.create_table("b", &table("u")).await.status, 200);

    // Usage is per account, across databases and tables.
    assert_eq!(append(&client, "a", "t", 6, 2).await.status, 200);
    assert_eq!(append(&client, "b", "u", 2, 0).await.status, 200);
    let before = client.counter("strata_log_appended_events_total").await;
    let refused = append(&client, "b", "u", 3, 0).await;
    assert_limit(&refused, "rows", 8, 3, 10, true);
    // Not transient: the same request fails identically, and appends nothing.
    assert_eq!(append(&client, "b", "u", 3, 0).await.body, refused.body);
    assert_eq!(
        client.counter("strata_log_appended_events_total").await,
        before
    );
    // Vectors have their own ceiling.
    assert_limit(
        &append(&client, "a", "t", 2, 2).await,
        "vectors",
        2,
        2,
        3,
        false,
    );
    // Up to the ceiling exactly is fine.
    assert_eq!(append(&client, "a", "t", 2, 1).await.status, 200);
    assert_limit(
        &append(&client, "a", "t", 1, 0).await,
        "rows",
        10,
        1,
        10,
        true,
    );

    // Appending no rows needs no room.
    assert_eq!(append(&client, "a", "t", 0, 0).await.status, 200);

    // Reads and deletes are never refused; deleted rows free their quota.
    let read = client
        .try_send_json(
            reqwest::Method::POST,
            "/v1/query_sql/a",
            r#"{"sql":"SELECT count(*) AS n FROM t"}"#,
        )
        .await
        .unwrap();
    assert_eq!(read.body["data"][0]["n"], 8);
    let deleted = client
        .post_empty("/v1/delete/a?table=t&predicate=_row_id%20%3C%203")
        .await;
    assert_eq!(deleted.body["n_tombstoned"], 3);
    assert_eq!(append(&client, "a", "t", 3, 0).await.status, 200);
    assert_limit(
        &append(&client, "a", "t", 1, 0).await,
        "rows",
        10,
        1,
        10,
        true,
    );

    // The usage is recomputed after a restart.
    server.stop();
    let mut server = Server::start(dir.path(), &args);
    let client = server.client(&key);
    assert_limit(
        &append(&client, "a", "t", 1, 0).await,
        "rows",
        10,
        1,
        10,
        true,
    );

    // A payment method moves the account to the paid plan (through the running server).
    admin(dir.path(), &["accounts", "set-payment-method", "acme"]);
    assert_eq!(append(&client, "a", "t", 5, 0).await.status, 200);
    assert_limit(
        &append(&client, "a", "t", 1, 0).await,
        "rows",
        15,
        1,
        15,
        false,
    );

    // Dropping a table, or deleting a database, frees its rows.
    let dropped = client.post("/v1/drop_table/b", r#"{"name":"u"}"#).await;
    assert_eq!(dropped.status, 200);
    assert_eq!(append(&client, "a", "t", 2, 0).await.status, 200);
    assert_eq!(client.delete("/v1/databases/a").await.status, 204);
    client.create_database("c").await;
    assert_eq!(client.create_table("c", &table("t")).await.status, 200);
    assert_eq!(append(&client, "c", "t", 15, 3).await.status, 200);
    server.stop();
}

#[tokio::test]
async fn concurrent_appends_never_pass_the_ceiling_together() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let server = Server::start(dir.path(), &["--set", "plans.free.max_rows=20"]);
    let client = server.client(&key);
    client.create_database("db").await;
    for i in 0..4 {
        assert_eq!(
            client
                .create_table("db", &table(&format!("t{i}")))
                .await
                .status,
            200
        );
    }
    // Four tables, so the appends do not wait for each other: 4 x 3 x 3 rows = 36 > 20.
    let mut tasks = Vec::new();
    for i in 0..4 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for _ in 0..3 {
                statuses.push(append(&client, "db", &format!("t{i}"), 3, 0).await.status);
            }
            statuses
        }));
    }
    let mut accepted = 0;
    for task in tasks {
        for status in task.await.unwrap() {
            assert!(status == 200 || status == 403, "{status}");
            accepted += u64::from(status == 200);
        }
    }
    assert!(accepted * 3 <= 20);
    let mut stored = 0;
    for i in 0..4 {
        let sql = json!({"sql": format!("SELECT count(*) AS n FROM t{i}")}).to_string();
        let read = client
            .try_send_json(reqwest::Method::POST, "/v1/query_sql/db", &sql)
            .await
            .unwrap();
        stored += read.body["data"][0]["n"].as_u64().unwrap();
    }
    assert_eq!(stored, accepted * 3);
    assert!(
        stored > 12,
        "the ceiling should have been nearly reached: {stored}"
    );
}
