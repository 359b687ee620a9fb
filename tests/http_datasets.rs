//! Platform datasets over HTTP: create, list, describe, delete, with the platform's name rules
//! and error shape; a dataset is a table of the account's database `default`, so rows written
//! through the data plane show in its counts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Server, Signed, account_with_key, root_user};
use serde_json::{Value, json};

/// One string field of every object of a JSON array.
fn field<'a>(array: &'a Value, name: &str) -> Vec<&'a str> {
    array
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item[name].as_str().unwrap())
        .collect()
}

fn refused(answer: &common::Answer, status: u16, message: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert_eq!(answer.body["status"], "error", "{answer:?}");
    let text = answer.body["message"].as_str().unwrap();
    assert!(text.contains(message), "{text:?} should say {message:?}");
}

#[tokio::test]
async fn datasets_are_created_listed_described_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = root_user(dir.path(), "acme");
    let client = Signed::new(&server, &root);

    // Nothing yet, and listing makes nothing.
    let listed = client.send("GET", "/metadata", None).await;
    assert_eq!((listed.status, listed.body.clone()), (200, json!([])));

    let created = client.send("PUT", "/web-logs.2026", None).await;
    assert_eq!(created.status, 200, "{created:?}");
    assert_eq!(created.body["acknowledged"], true);
    refused(
        &client.send("PUT", "/web-logs.2026", None).await,
        409,
        "create dataset: dataset \"web-logs.2026\" already exists",
    );
    // An Elasticsearch-style configuration with settings is accepted.
    let settings = json!({"settings": {"number_of_shards": 1, "number_of_replicas": 0}});
    assert_eq!(
        client
            .send("PUT", "/metrics-b", Some(&settings))
            .await
            .status,
        200
    );
    refused(
        &client
            .send("PUT", "/other", Some(&json!({"colour": "blue"})))
            .await,
        400,
        "unsupported configuration key \"colour\"",
    );
    refused(
        &client.send("PUT", "/other", Some(&json!([1]))).await,
        400,
        "must be a JSON object",
    );

    // Every value of an info record is a string.
    let listed = client.send("GET", "/metadata", None).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let records = listed.body.as_array().unwrap();
    assert_eq!(field(&listed.body, "index"), ["metrics-b", "web-logs.2026"]);
    let record = &records[1];
    for field in [
        "health",
        "status",
        "index",
        "uuid",
        "pri",
        "rep",
        "docs.count",
        "docs.deleted",
        "store.size",
        "pri.store.size",
    ] {
        assert!(record[field].is_string(), "{field} in {record}");
    }
    assert_eq!(record["status"], "open");
    assert_eq!(record["pri"], "1");
    assert_eq!(record["rep"], "0");
    assert_eq!(record["docs.count"], "0");
    assert_eq!(record["docs.deleted"], "0");
    assert_eq!(record["store.size"], record["pri.store.size"]);

    let one = client.send("GET", "/web-logs.2026/metadata", None).await;
    assert_eq!((one.status, &one.body), (200, record));
    let head = client.send("HEAD", "/web-logs.2026/metadata", None).await;
    assert_eq!((head.status, head.body), (200, Value::Null));
    let head = client.send("HEAD", "/nope/metadata", None).await;
    assert_eq!((head.status, head.body), (404, Value::Null));
    refused(
        &client.send("GET", "/nope/metadata", None).await,
        404,
        "dataset metadata: dataset \"nope\" does not exist",
    );

    let deleted = client.send("DELETE", "/web-logs.2026", None).await;
    assert_eq!(
        (deleted.status, &deleted.body["acknowledged"]),
        (200, &json!(true))
    );
    refused(
        &client.send("DELETE", "/web-logs.2026", None).await,
        404,
        "delete dataset: dataset \"web-logs.2026\" does not exist",
    );
    let listed = client.send("GET", "/metadata", None).await;
    assert_eq!(listed.body.as_array().unwrap().len(), 1);
    // The name is free again.
    assert_eq!(client.send("PUT", "/web-logs.2026", None).await.status, 200);
}

#[tokio::test]
async fn names_follow_the_platform_rules() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let long = "x".repeat(256);
    for (path, reason) in [
        ("/_hidden", "must not start with an underscore or a dot"),
        ("/.hidden", "must not start with an underscore or a dot"),
        ("/a%20b", "' ' is not allowed"),
        ("/caf%C3%A9", "'é' is not allowed"),
        ("/metadata", "reserved"),
        ("/users", "reserved"),
        (&format!("/{long}"), "1 to 255"),
    ] {
        refused(&client.send("PUT", path, None).await, 400, reason);
    }
    // Every word the platform uses as a first path segment, including those it serves
    // itself (`PUT /sql` must not reach another handler, or answer 405).
    for name in [
        "metadata",
        "sql",
        "_sql",
        "promql",
        "assistant",
        "user",
        "users",
        "role",
        "roles",
        "alert",
        "alerts",
        "monitor",
        "monitors",
        "source",
        "sources",
        "import",
        "_msearch",
        "_connector",
        "_search",
        "_cat",
        "_mapping",
        "api",
        "metrics",
        "health",
    ] {
        refused(
            &client.send("PUT", &format!("/{name}"), None).await,
            400,
            "invalid dataset name",
        );
    }
    assert!(
        client
            .send("GET", "/metadata", None)
            .await
            .body
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        client
            .send("PUT", &format!("/{}", &long[1..]), None)
            .await
            .status,
        200
    );
    // Case matters: two datasets.
    assert_eq!(client.send("PUT", "/Logs", None).await.status, 200);
    assert_eq!(client.send("PUT", "/logs", None).await.status, 200);
}

#[tokio::test]
async fn a_dataset_is_a_table_of_the_database_default() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    assert_eq!(client.send("PUT", "/events", None).await.status, 200);

    // The data plane sees it, with its two fields, and writes to it.
    let data = server.client(&account_with_key(dir.path(), "acme", None));
    let schema = data.schema("default", "events").await;
    assert_eq!(schema.status, 200, "{schema:?}");
    assert_eq!(field(&schema.body, "name"), ["_id", "@timestamp"]);
    let rows = json!({"data": [
        {"_id": "a", "@timestamp": "2026-11-23T10:00:00Z"},
        {"_id": "b", "@timestamp": "2026-11-23T10:00:01Z"},
    ]});
    let appended = data
        .post_json("/v1/append/default?table=events", &rows)
        .await;
    assert_eq!(appended.status, 200, "{appended:?}");

    let info = client.send("GET", "/events/metadata", None).await;
    assert_eq!(info.body["docs.count"], "2", "{info:?}");
    let size = info.body["store.size"].as_str().unwrap();
    assert!(size != "0b" && size.ends_with('b'), "{size}");

    // A table of `default` made through the data plane is not a dataset.
    let table = json!({"name": "plain", "schema": [{"name": "x", "type": "int64"}]});
    assert_eq!(data.create_table("default", &table).await.status, 200);
    let listed = client.send("GET", "/metadata", None).await;
    assert_eq!(field(&listed.body, "index"), ["events"]);
    assert_eq!(
        client.send("GET", "/plain/metadata", None).await.status,
        404
    );
}

#[tokio::test]
async fn cat_indices_lists_datasets_as_stock_tools_read_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    for name in ["logs-a", "logs-b", "web"] {
        assert_eq!(
            client.send("PUT", &format!("/{name}"), None).await.status,
            200
        );
    }
    let json = client.send("GET", "/_cat/indices?format=json", None).await;
    assert_eq!(json.status, 200, "{json:?}");
    let listed = client.send("GET", "/metadata", None).await;
    assert_eq!(json.body, listed.body);

    let some = client
        .send("GET", "/_cat/indices/logs-*?format=json", None)
        .await;
    assert_eq!(field(&some.body, "index"), ["logs-a", "logs-b"]);
    let two = client
        .send("GET", "/_cat/indices/web,logs-b?format=json", None)
        .await;
    assert_eq!(two.body.as_array().unwrap().len(), 2);

    // The text table, with a header line when asked.
    let text = client.send("GET", "/_cat/indices?v", None).await;
    assert_eq!(text.status, 200);
    let text = text.body.as_str().unwrap().to_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].starts_with("health status index"), "{text}");
    assert!(lines[1].starts_with("green  open   logs-a"), "{text}");
    let plain = client.send("GET", "/_cat/indices", None).await;
    assert_eq!(plain.body.as_str().unwrap().lines().count(), 3);
    assert_eq!(
        client
            .send("GET", "/_cat/indices?format=yaml", None)
            .await
            .status,
        400
    );
    assert_eq!(
        client
            .send_raw("GET", "/_cat/indices", &[], Vec::new())
            .await
            .status,
        401
    );
}
