//! Crash safety of the catalog, against the real binary: kill -9 the server while several
//! clients create databases and tables, restart it, and every acknowledged database and table is
//! there, complete; nothing is half-applied.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Server, account_with_key, docs_table};
use serde_json::{Value, json};

const CLIENTS: usize = 6;
const ROUNDS: usize = 3;

/// What the clients were told succeeded: database -> acknowledged tables.
type Acknowledged = Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>;

async fn write_until_the_server_dies(client: common::Client, prefix: String, acked: Acknowledged) {
    for i in 0.. {
        let database = format!("{prefix}-{i}");
        let body = json!({ "name": database }).to_string();
        let Some(answer) = client
            .try_send(reqwest::Method::POST, "/v1/databases", Some(&body))
            .await
        else {
            return;
        };
        assert_eq!(answer.status, 201, "{answer:?}");
        acked
            .lock()
            .unwrap()
            .insert(database.clone(), BTreeSet::new());
        for table in ["a", "b"] {
            let body = docs_table(table).to_string();
            let path = format!("/v1/create_table/{database}");
            let Some(answer) = client
                .try_send(reqwest::Method::POST, &path, Some(&body))
                .await
            else {
                return;
            };
            assert_eq!(answer.status, 200, "{answer:?}");
            acked
                .lock()
                .unwrap()
                .get_mut(&database)
                .unwrap()
                .insert(table.to_owned());
        }
    }
}

/// The schema a table created with `docs_table` must have, as the server reports it.
async fn expected_schema(client: &common::Client) -> Value {
    client.create_database("reference").await;
    let created = client.create_table("reference", &docs_table("x")).await;
    created.body["schema"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_databases_and_tables_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let args = ["--set", "plans.free.max_databases=100000"];
    let acked: Acknowledged = Arc::default();
    let schema = {
        let server = Server::start(dir.path(), &args);
        expected_schema(&server.client(&key)).await
    };

    for round in 0..ROUNDS {
        let mut server = Server::start(dir.path(), &args);
        let writers: Vec<_> = (0..CLIENTS)
            .map(|c| {
                tokio::spawn(write_until_the_server_dies(
                    server.client(&key),
                    format!("r{round}c{c}"),
                    acked.clone(),
                ))
            })
            .collect();
        // Let the writers get going, then pull the plug mid-flight.
        tokio::time::sleep(Duration::from_millis(400 + 300 * round as u64)).await;
        server.kill9();
        for writer in writers {
            writer.await.unwrap();
        }

        let server = Server::start(dir.path(), &args);
        let client = server.client(&key);
        let listed = client.get("/v1/databases").await;
        let present: BTreeSet<String> = listed.body["databases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_owned())
            .collect();
        let acked_now = acked.lock().unwrap().clone();
        let acked_tables: usize = acked_now.values().map(BTreeSet::len).sum();
        assert!(
            acked_now.len() > round,
            "round {round}: the writers made no progress"
        );
        for (database, tables) in &acked_now {
            assert!(
                present.contains(database),
                "acknowledged database {database} was lost"
            );
            let listed = client.list_tables(database).await;
            assert_eq!(listed.status, 200, "{listed:?}");
            let listed: BTreeSet<String> = serde_json::from_value(listed.body).unwrap();
            assert!(
                tables.is_subset(&listed),
                "acknowledged tables {tables:?} of {database}, found {listed:?}"
            );
        }
        // Nothing half-applied: every database that exists, acknowledged or not, is usable, and
        // every table that exists has its whole schema.
        for database in &present {
            let listed = client.list_tables(database).await;
            assert_eq!(listed.status, 200, "{database}: {listed:?}");
            for table in listed.body.as_array().unwrap() {
                let table = table.as_str().unwrap();
                let described = client.schema(database, table).await;
                assert_eq!(described.status, 200);
                assert_eq!(described.body, schema, "{database}.{table} is incomplete");
            }
        }
        // And the restarted server takes writes again.
        let fresh = format!("after-{round}");
        assert_eq!(client.create_database(&fresh).await.status, 201);
        assert_eq!(
            client.create_table(&fresh, &docs_table("t")).await.status,
            200
        );
        eprintln!(
            "round {round}: {} databases and {acked_tables} tables acknowledged so far, all present",
            acked_now.len()
        );
    }
}

/// Appends from several clients (to shared and separate tables) while the server is killed:
/// after a restart every acknowledged row is there with the row id it was given, and every
/// request is all or nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_rows_survive_kill_9_and_no_request_is_half_applied() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let args = [
        "--set",
        "tables.flush_rows=50",
        "--set",
        "server.write_wait_ms=200",
    ];
    let table = |name: &str| {
        json!({"name": name, "schema": [
            {"name": "request", "type": "utf8", "nullable": false},
            {"name": "i", "type": "int64", "nullable": false}]})
    };
    // request id -> row ids acknowledged for it
    let acked: Arc<Mutex<BTreeMap<String, Vec<u64>>>> = Arc::default();
    for round in 0..2 {
        let mut server = Server::start(dir.path(), &args);
        let client = server.client(&key);
        if round == 0 {
            assert_eq!(client.create_database("db").await.status, 201);
            for name in ["shared", "t0", "t1", "t2"] {
                assert_eq!(client.create_table("db", &table(name)).await.status, 200);
            }
        }
        let writers: Vec<_> = (0..4)
            .map(|c| {
                let client = server.client(&key);
                let acked = acked.clone();
                let target = if c == 3 {
                    "shared".to_owned()
                } else {
                    format!("t{c}")
                };
                tokio::spawn(async move {
                    for n in 0.. {
                        let request = format!("r{round}c{c}n{n}");
                        let rows: Vec<Value> = (0..5)
                            .map(|i| json!({"request": request, "i": i}))
                            .collect();
                        let body = json!({ "data": rows }).to_string();
                        let path = format!("/v1/append/db?table={target}");
                        let Some(answer) = client
                            .try_send_json(reqwest::Method::POST, &path, &body)
                            .await
                        else {
                            return;
                        };
                        if answer.status == 409 {
                            continue;
                        }
                        assert_eq!(answer.status, 200, "{answer:?}");
                        let ids = answer.body["data"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|r| r["_row_id"].as_u64().unwrap())
                            .collect();
                        acked
                            .lock()
                            .unwrap()
                            .insert(format!("{target}/{request}"), ids);
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(700)).await;
        server.kill9();
        for writer in writers {
            writer.await.unwrap();
        }
    }
    let server = Server::start(dir.path(), &args);
    let client = server.client(&key);
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 10,
        "the writers made little progress: {}",
        acked.len()
    );
    for target in ["shared", "t0", "t1", "t2"] {
        let body = json!({"sql": format!("SELECT _row_id, request, i FROM {target}")}).to_string();
        let answer = client
            .try_send_json(reqwest::Method::POST, "/v1/query_sql/db", &body)
            .await
            .unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
        let mut stored: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for row in answer.body["data"].as_array().unwrap() {
            stored
                .entry(format!("{target}/{}", row["request"].as_str().unwrap()))
                .or_default()
                .push(row["_row_id"].as_u64().unwrap());
        }
        for ids in stored.values_mut() {
            ids.sort_unstable();
            assert_eq!(ids.len(), 5, "a request was half applied: {ids:?}");
        }
        for (request, ids) in acked
            .iter()
            .filter(|(r, _)| r.starts_with(&format!("{target}/")))
        {
            assert_eq!(
                stored.get(request),
                Some(ids),
                "acknowledged {request} lost or changed"
            );
        }
    }
}
