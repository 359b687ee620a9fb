//! The data-plane control endpoints over HTTP, against the real binary: every status code the
//! specification's error table gives databases and tables, and the ones users expect besides.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use common::{Answer, Client, Server, account_with_key, admin, docs_table, eventually};
use serde_json::{Value, json};

fn start(extra: &[&str]) -> (tempfile::TempDir, Server, String) {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let server = Server::start(dir.path(), extra);
    (dir, server, key)
}

fn assert_error(answer: &Answer, status: u16, code: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert_eq!(answer.code(), code, "{answer:?}");
    let message = answer.body["message"].as_str().unwrap_or("");
    assert!(!message.is_empty(), "an error needs a message: {answer:?}");
}

#[tokio::test]
async fn health_answers_on_both_listeners_and_unknown_paths_are_refused() {
    let (_dir, server, key) = start(&[]);
    let client = server.client(&key);
    let health = server.anonymous().get("/health").await;
    assert_eq!(
        (health.status, health.body["status"].as_str()),
        (200, Some("ok"))
    );
    let platform = reqwest::get(format!("{}/health", server.platform_url))
        .await
        .unwrap();
    assert_eq!(platform.status(), 200);

    let missing = client.post("/v1/no_such_operation/db", "{}").await;
    assert_error(&missing, 404, "not_found");
    let wrong_method = client.get("/v1/create_table/db").await;
    assert_error(&wrong_method, 405, "method_not_allowed");
    let not_utf8 = client.post_empty("/v1/list_tables/%FF").await;
    assert_error(&not_utf8, 400, "bad_request");
    let platform_method = Client::answer(
        reqwest::Client::new()
            .delete(format!("{}/health", server.platform_url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(platform_method.status, 405);
    assert_eq!(platform_method.body["status"], "error");
    let on_platform = Client::answer(
        reqwest::get(format!("{}/no/such/thing", server.platform_url))
            .await
            .unwrap(),
    )
    .await;
    // Unsigned: refused before routing (tests/http_platform.rs has the signed 404).
    assert_eq!(on_platform.status, 401);
    assert_eq!(on_platform.body["status"], "error");
}

#[tokio::test]
async fn every_operation_needs_a_valid_key() {
    let (_dir, server, key) = start(&[]);
    server.client(&key).create_database("db").await;
    let table = docs_table("t").to_string();
    let operations: Vec<(reqwest::Method, &str, Option<&str>)> = vec![
        (reqwest::Method::GET, "/v1/databases", None),
        (
            reqwest::Method::POST,
            "/v1/databases",
            Some(r#"{"name":"x"}"#),
        ),
        (reqwest::Method::DELETE, "/v1/databases/db", None),
        (reqwest::Method::POST, "/v1/create_table/db", Some(&table)),
        (
            reqwest::Method::POST,
            "/v1/drop_table/db",
            Some(r#"{"name":"t"}"#),
        ),
        (reqwest::Method::POST, "/v1/list_tables/db", None),
        (
            reqwest::Method::POST,
            "/v1/schema/db",
            Some(r#"{"name":"t"}"#),
        ),
        (
            reqwest::Method::POST,
            "/v1/append/db?table=t",
            Some(r#"{"data":[]}"#),
        ),
        (
            reqwest::Method::POST,
            "/v1/update/db?table=t&predicate=true",
            Some(r#"{"data":[]}"#),
        ),
        (
            reqwest::Method::POST,
            "/v1/delete/db?table=t&predicate=true",
            None,
        ),
        (
            reqwest::Method::POST,
            "/v1/query_sql/db",
            Some(r#"{"sql":"select 1"}"#),
        ),
        // Operations this version does not serve yet still check the key first.
        (reqwest::Method::POST, "/v1/bm25_search/db", Some("{}")),
        (reqwest::Method::POST, "/v1/count/db", Some("{}")),
    ];
    let forged = format!("sk_{}_{}", &key[3..19], "0".repeat(64));
    let unknown = format!("sk_{}_{}", "f".repeat(16), "0".repeat(64));
    for bad_key in [
        None,
        Some("nonsense"),
        Some(forged.as_str()),
        Some(unknown.as_str()),
    ] {
        let client = Client {
            key: bad_key.map(str::to_owned),
            ..server.anonymous()
        };
        for (method, path, body) in &operations {
            let answer = client.send(method.clone(), path, *body).await;
            assert_error(&answer, 401, "unauthorized");
        }
    }
    // A malformed body still gets 401 first: the key is checked before anything else.
    let answer = server.anonymous().post("/v1/create_table/db", "{").await;
    assert_error(&answer, 401, "unauthorized");
    // The key works as a bearer token and as x-api-key, and the database survived.
    let by_header = reqwest::Client::new()
        .get(format!("{}/v1/databases", server.data_url))
        .header("x-api-key", &key)
        .send()
        .await
        .unwrap();
    let listed = Client::answer(by_header).await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.body["databases"][0]["name"], "db");
    // An Authorization header of another scheme (a proxy's, say) does not hide x-api-key.
    let beside_basic = reqwest::Client::new()
        .get(format!("{}/v1/databases", server.data_url))
        .header("authorization", "Basic dXNlcjpwYXNz")
        .header("x-api-key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(beside_basic.status(), 200);
}

#[tokio::test]
async fn databases_are_created_listed_and_deleted() {
    let (_dir, server, key) = start(&[]);
    let client = server.client(&key);
    let created = client.create_database("shop").await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(created.body, json!({"name": "shop", "state": "active"}));

    let again = client.create_database("shop").await;
    assert_error(&again, 409, "database_exists");
    assert_eq!(again.retry_after, None);

    client.create_table("shop", &docs_table("docs")).await;
    let listed = client.get("/v1/databases").await;
    assert_eq!(listed.status, 200);
    let shop = &listed.body["databases"][0];
    assert_eq!(shop["name"], "shop");
    assert_eq!(shop["state"], "active");
    assert_eq!(shop["tables"], 1);
    assert_eq!(shop["storage"], Value::Null);
    assert!(shop["created_at"].as_str().unwrap().ends_with('Z'));

    let deleted = client.delete("/v1/databases/shop").await;
    assert_eq!((deleted.status, &deleted.body), (204, &Value::Null));
    // Idempotent: again, and for a name that never existed.
    assert_eq!(client.delete("/v1/databases/shop").await.status, 204);
    assert_eq!(client.delete("/v1/databases/never").await.status, 204);
    // The database is refused at once, and its name is free once the purge ends.
    assert_error(&client.list_tables("shop").await, 404, "database_not_found");
    let during = client.create_database("shop").await;
    match during.status {
        // The purge had already ended.
        201 => {}
        409 => {
            assert_error(&during, 409, "database_exists");
            let message = during.body["message"].as_str().unwrap();
            assert!(message.contains("being deleted"), "{message}");
            assert!(
                eventually(10, || async {
                    client.create_database("shop").await.status == 201
                })
                .await,
                "the name was not freed by the purge"
            );
        }
        other => panic!("unexpected {other}: {during:?}"),
    }
    // The new incarnation starts empty.
    let tables = client.list_tables("shop").await;
    assert_eq!((tables.status, tables.body), (200, json!([])));
}

#[tokio::test]
async fn a_key_addresses_only_the_databases_its_pattern_covers() {
    let (dir, server, key) = start(&[]);
    let admin_client = server.client(&key);
    let prod_only = account_with_key(dir.path(), "acme", Some("prod-*"));
    let client = server.client(&prod_only);

    assert_error(&client.create_database("dev-1").await, 403, "forbidden");
    assert_eq!(client.create_database("prod-1").await.status, 201);
    assert_eq!(admin_client.create_database("dev-2").await.status, 201);

    let listed = client.get("/v1/databases").await;
    let names: Vec<&str> = listed.body["databases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["prod-1"]);

    assert_error(&client.list_tables("dev-2").await, 403, "forbidden");
    assert_error(
        &client.create_table("dev-2", &docs_table("t")).await,
        403,
        "forbidden",
    );
    assert_error(
        &client.delete("/v1/databases/dev-2").await,
        403,
        "forbidden",
    );
    assert_eq!(admin_client.list_tables("dev-2").await.status, 200);

    // Another account's databases are not this account's: a name in use there is free here.
    let other = account_with_key(dir.path(), "other", None);
    let other = server.client(&other);
    assert_eq!(other.create_database("dev-2").await.status, 201);
    assert_eq!(
        other.get("/v1/databases").await.body["databases"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn the_plan_limits_databases_until_a_payment_method_is_added() {
    let (dir, server, key) = start(&[
        "--set",
        "plans.free.max_databases=2",
        "--set",
        "plans.paid.max_databases=3",
    ]);
    let client = server.client(&key);
    assert_eq!(client.create_database("a").await.status, 201);
    assert_eq!(client.create_database("b").await.status, 201);
    let refused = client.create_database("c").await;
    assert_error(&refused, 403, "limit_reached");
    assert_eq!(refused.body["limit"], "databases");
    assert_eq!(refused.body["used"], 2);
    assert_eq!(refused.body["requested"], 1);
    assert_eq!(refused.body["max"], 2);
    assert_eq!(refused.body["payment_method_raises"], true);
    // Not transient: the same request fails identically.
    assert_eq!(client.create_database("c").await.body, refused.body);

    // Through the running server's admin socket.
    admin(dir.path(), &["accounts", "set-payment-method", "acme"]);
    assert_eq!(client.create_database("c").await.status, 201);
    let refused = client.create_database("d").await;
    assert_error(&refused, 403, "limit_reached");
    assert_eq!(refused.body["max"], 3);
    assert_eq!(refused.body["payment_method_raises"], false);

    // Deleting a database frees its place.
    assert_eq!(client.delete("/v1/databases/a").await.status, 204);
    assert_eq!(client.create_database("d").await.status, 201);
}

#[tokio::test]
async fn tables_are_created_described_listed_and_dropped() {
    let (_dir, server, key) = start(&[]);
    let client = server.client(&key);
    client.create_database("db").await;

    let created = client.create_table("db", &docs_table("docs")).await;
    assert_eq!(created.status, 200, "{created:?}");
    assert_eq!(created.body["name"], "docs");
    let first_id = created.body["table_id"].as_str().unwrap().to_owned();
    let expected_schema = json!([
        {"name": "title", "type": "utf8", "nullable": false, "fts": true, "exact": false},
        {"name": "body", "type": "utf8", "nullable": true, "fts": true, "exact": false},
        {"name": "year", "type": "int32", "nullable": true, "fts": false, "exact": true},
        {"name": "published", "type": "timestamp[ms,UTC]", "nullable": true, "fts": false, "exact": false},
        {"name": "tags", "type": "list<utf8>", "nullable": true, "fts": false, "exact": false},
        {"name": "embedding", "type": "vector<float32,4>", "nullable": true, "fts": false, "exact": false,
         "vector": {"dim": 4, "metric": "l2"}}
    ]);
    assert_eq!(created.body["schema"], expected_schema);
    let schema = client.schema("db", "docs").await;
    assert_eq!((schema.status, &schema.body), (200, &expected_schema));

    let plain = json!({"name": "plain", "schema": [{"name": "n", "type": "int64"}]});
    assert_eq!(client.create_table("db", &plain).await.status, 200);
    let listed = client.list_tables("db").await;
    assert_eq!(
        (listed.status, listed.body),
        (200, json!(["docs", "plain"]))
    );

    let exists = client.create_table("db", &docs_table("docs")).await;
    assert_error(&exists, 409, "table_exists");
    assert_eq!(
        exists.retry_after, None,
        "a name in use is terminal, not transient"
    );

    let dropped = client.post("/v1/drop_table/db", r#"{"name":"docs"}"#).await;
    assert_eq!(
        (dropped.status, dropped.body),
        (200, json!({"name": "docs", "dropped": true}))
    );
    assert_error(&client.schema("db", "docs").await, 404, "table_not_found");
    assert_error(
        &client.post("/v1/drop_table/db", r#"{"name":"docs"}"#).await,
        404,
        "table_not_found",
    );
    assert_eq!(client.list_tables("db").await.body, json!(["plain"]));

    // The name can be used again, by a new incarnation.
    let again = client.create_table("db", &docs_table("docs")).await;
    assert_eq!(again.status, 200);
    assert_ne!(again.body["table_id"].as_str().unwrap(), first_id);

    let table = docs_table("t").to_string();
    for (path, body) in [
        ("/v1/list_tables/nope", ""),
        ("/v1/schema/nope", r#"{"name":"t"}"#),
        ("/v1/create_table/nope", table.as_str()),
        ("/v1/drop_table/nope", r#"{"name":"t"}"#),
    ] {
        let answer = client.post(path, body).await;
        assert_error(&answer, 404, "database_not_found");
    }
}

/// Malformed JSON, unknown fields, unknown column types, bad names: each is a 400 with the error
/// body, and nothing reaches the log.
#[tokio::test]
async fn bad_input_is_refused_with_400_and_appends_nothing() {
    let (_dir, server, key) = start(&[]);
    let client = server.client(&key);
    client.create_database("db").await;
    client.create_table("db", &docs_table("docs")).await;
    let before = client.counter("strata_log_appended_events_total").await;
    assert!(before > 0.0);

    let long = "x".repeat(129);
    let col = |name: &str, ty: &str| json!({"name": name, "type": ty});
    let table = |name: &str, schema: Value| json!({"name": name, "schema": schema}).to_string();
    let cases: Vec<(&str, String, &str)> = vec![
        ("/v1/create_table/db", "{".into(), "bad_request"),
        ("/v1/create_table/db", "".into(), "bad_request"),
        ("/v1/create_table/db", "[1,2]".into(), "bad_request"),
        ("/v1/create_table/db", r#"{"name":"t","schema":[{"name":"a","type":"utf8"}],"colour":"red"}"#.into(), "bad_request"),
        ("/v1/create_table/db", r#"{"name":"t","schema":[{"name":"a","type":"utf8","size":3}]}"#.into(), "bad_request"),
        ("/v1/create_table/db", r#"{"schema":[{"name":"a","type":"utf8"}]}"#.into(), "bad_request"),
        ("/v1/create_table/db", table("t", json!([col("a", "string")])), "bad_request"),
        ("/v1/create_table/db", table("t", json!([col("a", "vector<float32,0>")])), "bad_request"),
        ("/v1/create_table/db", table("t", json!([col("a", "timestamp[s]")])), "bad_request"),
        ("/v1/create_table/db", table("t", json!([])), "bad_request"),
        ("/v1/create_table/db", table("t", json!([col("a", "utf8"), col("a", "int8")])), "bad_request"),
        ("/v1/create_table/db", table("t", json!([col("_row_id", "uint64")])), "bad_request"),
        ("/v1/create_table/db", table("t", json!([col(&long, "utf8")])), "bad_request"),
        ("/v1/create_table/db", table(&long, json!([col("a", "utf8")])), "invalid_name"),
        ("/v1/create_table/db", table("has space", json!([col("a", "utf8")])), "invalid_name"),
        ("/v1/create_table/db", table("_hidden", json!([col("a", "utf8")])), "invalid_name"),
        ("/v1/create_table/db", table("", json!([col("a", "utf8")])), "invalid_name"),
        ("/v1/create_table/db", json!({"name": "t", "schema": [col("a", "int64")], "fts_columns": ["a"]}).to_string(), "bad_request"),
        ("/v1/create_table/db", json!({"name": "t", "schema": [col("a", "utf8")], "fts_columns": ["b"]}).to_string(), "bad_request"),
        ("/v1/create_table/db", json!({"name": "t", "schema": [col("a", "utf8")], "vector_column": "a"}).to_string(), "bad_request"),
        ("/v1/create_table/db", json!({"name": "t", "schema": [col("v", "vector<float32,2>")], "vector_column": "v", "vector_metric": "hamming"}).to_string(), "bad_request"),
        ("/v1/drop_table/db", "{}".into(), "bad_request"),
        ("/v1/drop_table/db", r#"{"name":"docs","force":true}"#.into(), "bad_request"),
        ("/v1/drop_table/db", json!({"name": long}).to_string(), "invalid_name"),
        ("/v1/schema/db", "not json".into(), "bad_request"),
        ("/v1/schema/db", r#"{"name":"docs","extra":1}"#.into(), "bad_request"),
        ("/v1/schema/db", r#"{"name":"no/such"}"#.into(), "invalid_name"),
        ("/v1/databases", "{".into(), "bad_request"),
        ("/v1/databases", r#"{"name":"x","region":"eu"}"#.into(), "bad_request"),
        ("/v1/databases", json!({"name": long}).to_string(), "invalid_name"),
        ("/v1/databases", r#"{"name":"a.b"}"#.into(), "invalid_name"),
    ];
    for (path, body, code) in &cases {
        let answer = client.post(path, body).await;
        assert_eq!(answer.status, 400, "{path} {body}: {answer:?}");
        assert_eq!(answer.code(), *code, "{path} {body}: {answer:?}");
        assert!(!answer.body["message"].as_str().unwrap().is_empty());
    }
    // The messages name the offending input.
    let answer = client
        .post(
            "/v1/create_table/db",
            &table("t", json!([col("price", "money")])),
        )
        .await;
    let message = answer.body["message"].as_str().unwrap();
    assert!(
        message.contains("price") && message.contains("money"),
        "{message}"
    );
    let answer = client
        .post(
            "/v1/create_table/db",
            r#"{"name":"t","schema":[{"name":"a","type":"utf8"}],"colour":"red"}"#,
        )
        .await;
    assert!(answer.body["message"].as_str().unwrap().contains("colour"));

    let answer = client.delete(&format!("/v1/databases/{long}")).await;
    assert_error(&answer, 400, "invalid_name");

    assert_eq!(
        client.counter("strata_log_appended_events_total").await,
        before
    );
    assert_eq!(client.list_tables("db").await.body, json!(["docs"]));
    let databases = client.get("/v1/databases").await;
    assert_eq!(databases.body["databases"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let (_dir, server, key) = start(&["--set", "server.max_body_bytes=1024"]);
    let client = server.client(&key);
    client.create_database("db").await;
    let big = json!({"name": "t", "schema": [{"name": "a".repeat(2000), "type": "utf8"}]});
    let answer = client.create_table("db", &big).await;
    assert_error(&answer, 413, "payload_too_large");
}

/// One catalog change at a time per database: concurrent changes get 200 or 409 with
/// Retry-After, and the tables that exist are exactly the acknowledged ones.
#[tokio::test]
async fn concurrent_catalog_changes_are_refused_with_409_and_retry_after() {
    // Each change keeps the catalog busy a while, so that concurrent requests meet it.
    let (_dir, server, key) = start(&["--set", "debug.hold_write_permit_ms=300"]);
    let client = server.client(&key);
    client.create_database("db").await;
    client.create_database("other").await;

    let mut tasks = Vec::new();
    for i in 0..8 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("t{i}");
            (
                name.clone(),
                client.create_table("db", &docs_table(&name)).await,
            )
        }));
    }
    // A catalog change in another database is not in the way.
    let elsewhere = client.create_table("other", &docs_table("t")).await;
    assert_eq!(elsewhere.status, 200);

    let mut acknowledged = BTreeSet::new();
    let mut refused = 0;
    for task in tasks {
        let (name, answer) = task.await.unwrap();
        match answer.status {
            200 => {
                acknowledged.insert(name);
            }
            409 => {
                assert_eq!(answer.code(), "busy", "{answer:?}");
                assert_eq!(answer.retry_after.as_deref(), Some("1"), "{answer:?}");
                refused += 1;
            }
            other => panic!("unexpected status {other}: {answer:?}"),
        }
    }
    assert!(refused > 0, "no request met a catalog change in flight");
    assert!(!acknowledged.is_empty());
    let listed: BTreeSet<String> =
        serde_json::from_value(client.list_tables("db").await.body).unwrap();
    assert_eq!(listed, acknowledged);

    // drop_table meets a change in flight the same way; reissuing after Retry-After succeeds.
    let slow = {
        let client = client.clone();
        tokio::spawn(async move { client.create_table("db", &docs_table("slow")).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let victim = acknowledged.iter().next().unwrap().clone();
    let body = json!({"name": victim}).to_string();
    let busy = client.post("/v1/drop_table/db", &body).await;
    assert_error(&busy, 409, "busy");
    assert_eq!(busy.retry_after.as_deref(), Some("1"));

    // delete_database while a catalog change is in flight: 412, nothing deleted.
    assert_eq!(slow.await.unwrap().status, 200);
    let slow2 = {
        let client = client.clone();
        tokio::spawn(async move { client.create_table("db", &docs_table("slow2")).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let conflict = client.delete("/v1/databases/db").await;
    assert_error(&conflict, 412, "concurrent_change");
    assert_eq!(slow2.await.unwrap().status, 200);
    assert_eq!(client.list_tables("db").await.status, 200);

    // Reissued after the change in flight is done, the same drop succeeds.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(client.post("/v1/drop_table/db", &body).await.status, 200);
}

#[tokio::test]
async fn an_orderly_restart_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let mut server = Server::start(dir.path(), &[]);
    let client = server.client(&key);
    client.create_database("db").await;
    client.create_table("db", &docs_table("docs")).await;
    let schema = client.schema("db", "docs").await.body;
    assert!(server.stop(), "the server should exit cleanly on SIGTERM");
    assert!(!dir.path().join("server.json").exists());

    let server = Server::start(dir.path(), &[]);
    let client = server.client(&key);
    assert_eq!(client.list_tables("db").await.body, json!(["docs"]));
    assert_eq!(client.schema("db", "docs").await.body, schema);
    assert_eq!(
        client.create_table("db", &docs_table("more")).await.status,
        200
    );
}

#[tokio::test]
async fn request_ids_are_echoed_or_made() {
    let (_dir, server, key) = start(&[]);
    let response = reqwest::Client::new()
        .get(format!("{}/v1/databases", server.data_url))
        .bearer_auth(&key)
        .header("x-request-id", "trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "trace-42");
    let made = server.client(&key).get("/v1/databases").await;
    assert_eq!(made.request_id.unwrap().len(), 36);
}

#[tokio::test]
async fn storage_bindings_need_an_enterprise_account() {
    let (_dir, server, key) = start(&[]);
    let body = r#"{"name":"bound","storage":{"url":"file:///tmp/bound"}}"#;
    let refused = server.client(&key).post("/v1/databases", body).await;
    assert_error(&refused, 403, "forbidden");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("enterprise")
    );
    assert_eq!(
        server.client(&key).get("/v1/databases").await.body["databases"],
        json!([])
    );
}
