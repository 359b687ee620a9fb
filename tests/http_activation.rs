//! Database runtimes over HTTP: activation on first use (503 with Retry-After while it runs),
//! the node's capacity of active databases, and hibernation of idle ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{Client, Server, account_with_key};
use serde_json::{Value, json};

fn table() -> Value {
    json!({"name": "t", "schema": [{"name": "x", "type": "int64"}]})
}

async fn state_of(client: &Client, database: &str) -> String {
    let listed = client.get("/v1/databases").await;
    listed.body["databases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == database)
        .map(|d| d["state"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

async fn append(client: &Client, database: &str, x: i64) -> common::Answer {
    let body = json!({"data": [{"x": x}]}).to_string();
    client
        .try_send_json(
            reqwest::Method::POST,
            &format!("/v1/append/{database}?table=t"),
            &body,
        )
        .await
        .unwrap()
}

async fn count(client: &Client, database: &str) -> u64 {
    let answer = client
        .try_send_json(
            reqwest::Method::POST,
            &format!("/v1/query_sql/{database}"),
            r#"{"sql": "SELECT count(*) AS n FROM t"}"#,
        )
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["data"][0]["n"].as_u64().unwrap()
}

#[tokio::test]
async fn a_database_that_is_activating_answers_503_then_serves() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let mut server = Server::start(dir.path(), &[]);
    let client = server.client(&key);
    client.create_database("db").await;
    assert_eq!(client.create_table("db", &table()).await.status, 200);
    assert_eq!(append(&client, "db", 1).await.status, 200);
    server.stop();

    // After a restart nothing is active; activation takes a while and requests do not wait.
    let server = Server::start(
        dir.path(),
        &[
            "--set",
            "databases.activation_wait_ms=0",
            "--set",
            "debug.activation_delay_ms=600",
        ],
    );
    let client = server.client(&key);
    assert_eq!(state_of(&client, "db").await, "hibernated");
    let first = client.list_tables("db").await;
    assert_eq!(first.status, 503, "{first:?}");
    assert_eq!(first.code(), "unavailable");
    assert_eq!(first.retry_after.as_deref(), Some("1"));
    assert_eq!(state_of(&client, "db").await, "activating");
    // Every table operation answers the same while it activates.
    assert_eq!(append(&client, "db", 2).await.status, 503);
    // Then the identical request succeeds.
    let started = Instant::now();
    loop {
        let answer = client.list_tables("db").await;
        if answer.status == 200 {
            assert_eq!(answer.body, json!(["t"]));
            break;
        }
        assert_eq!(answer.status, 503);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never activated"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(state_of(&client, "db").await, "active");
    assert_eq!(count(&client, "db").await, 1);
}

#[tokio::test]
async fn at_capacity_an_idle_database_makes_room_and_a_busy_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let acme = account_with_key(dir.path(), "acme", None);
    let other = account_with_key(dir.path(), "other", None);
    let server = Server::start(
        dir.path(),
        &[
            "--set",
            "databases.max_active=1",
            "--set",
            "debug.hold_write_permit_ms=800",
        ],
    );
    let (acme, other) = (server.client(&acme), server.client(&other));
    for (client, name) in [(&acme, "a"), (&other, "c")] {
        assert_eq!(client.create_database(name).await.status, 201);
        assert_eq!(client.create_table(name, &table()).await.status, 200);
    }
    // c is active; using a hibernates c, which is idle.
    assert_eq!(state_of(&other, "c").await, "active");
    assert_eq!(count(&acme, "a").await, 0);
    assert_eq!(state_of(&acme, "a").await, "active");
    assert_eq!(state_of(&other, "c").await, "hibernated");

    // While a has a request in flight, c finds no room: 503 with Retry-After.
    let busy = {
        let acme = acme.clone();
        tokio::spawn(async move { append(&acme, "a", 1).await })
    };
    tokio::time::sleep(Duration::from_millis(250)).await;
    let refused = other.list_tables("c").await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("maximum of 1")
    );
    assert_eq!(refused.retry_after.as_deref(), Some("1"));
    assert_eq!(busy.await.unwrap().status, 200);
    // Once a is idle, c gets its place; a's row is kept through its hibernation.
    assert_eq!(count(&other, "c").await, 0);
    assert_eq!(state_of(&acme, "a").await, "hibernated");
    assert_eq!(count(&acme, "a").await, 1);
}

#[tokio::test]
async fn idle_databases_hibernate_and_come_back_with_their_rows() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let server = Server::start(dir.path(), &["--set", "databases.idle_ms=300"]);
    let client = server.client(&key);
    client.create_database("db").await;
    client.create_table("db", &table()).await;
    for x in 0..5 {
        assert_eq!(append(&client, "db", x).await.status, 200);
    }
    let hibernated = common::eventually(10, || async {
        state_of(&client, "db").await == "hibernated"
    })
    .await;
    assert!(hibernated, "the idle database was not hibernated");
    // Its memtable is flushed on the way out.
    let segments = || {
        std::fs::read_dir(dir.path().join("tables"))
            .unwrap()
            .flat_map(|db| std::fs::read_dir(db.unwrap().path()).unwrap())
            .flat_map(|t| {
                std::fs::read_dir(t.unwrap().path().join("segments"))
                    .into_iter()
                    .flatten()
            })
            .count()
    };
    let flushed = common::eventually(10, || async { segments() == 1 }).await;
    assert!(flushed, "the memtable was not flushed at hibernation");
    assert_eq!(count(&client, "db").await, 5);
    assert_eq!(append(&client, "db", 5).await.body["data"][0]["_row_id"], 5);
}
