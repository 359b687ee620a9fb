//! Bring-your-own-bucket storage bindings over HTTP: a database bound to a `file://` directory
//! and to a real S3-compatible server on loopback (started by scripts/test; its address is in
//! STRATA_TEST_S3_ENDPOINT).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use common::{Answer, Client, Server, account_with_key, admin};
use serde_json::{Value, json};

fn s3_endpoint() -> String {
    std::env::var("STRATA_TEST_S3_ENDPOINT").expect(
        "STRATA_TEST_S3_ENDPOINT is not set: run the tests with scripts/test, which starts an S3-compatible server",
    )
}

fn enterprise(dir: &Path) -> String {
    admin(dir, &["accounts", "create", "big", "--enterprise"]);
    account_with_key(dir, "big", None)
}

fn assert_error(answer: &Answer, status: u16, code: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert_eq!(answer.code(), code, "{answer:?}");
}

async fn listed(client: &Client, name: &str) -> Value {
    client.get("/v1/databases").await.body["databases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

async fn use_table(client: &Client, database: &str) {
    let table = json!({"name": "t", "schema": [{"name": "x", "type": "int64"}]});
    assert_eq!(client.create_table(database, &table).await.status, 200);
    let rows = json!({"data": [{"x": 1}, {"x": 2}, {"x": 3}]}).to_string();
    let answer = client
        .try_send_json(
            reqwest::Method::POST,
            &format!("/v1/append/{database}?table=t"),
            &rows,
        )
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
}

async fn sum(client: &Client, database: &str) -> i64 {
    let answer = client
        .try_send_json(
            reqwest::Method::POST,
            &format!("/v1/query_sql/{database}"),
            r#"{"sql": "SELECT sum(x) AS s FROM t"}"#,
        )
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["data"][0]["s"].as_i64().unwrap()
}

fn files_under(dir: &Path) -> usize {
    walk(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .count()
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flat_map(|e| {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

#[tokio::test]
async fn a_file_binding_waits_for_verification_then_keeps_the_segments() {
    let dir = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let key = enterprise(dir.path());
    let args = ["--set", "tables.flush_rows=2"];
    let mut server = Server::start(dir.path(), &args);
    let client = server.client(&key);
    let url = format!("file://{}/shop", bucket.path().display());
    let created = client
        .post(
            "/v1/databases",
            &json!({"name": "shop", "storage": {"url": url}}).to_string(),
        )
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(
        created.body,
        json!({"name": "shop", "state": "pending_verification"})
    );
    assert_eq!(
        listed(&client, "shop").await["storage"],
        json!({"url": url, "verified": false})
    );
    // No workers until the binding is verified.
    let waiting = client.list_tables("shop").await;
    assert_error(&waiting, 503, "pending_verification");
    assert_eq!(
        waiting.retry_after, None,
        "retrying does not help: verifying does"
    );
    assert!(
        waiting.body["message"]
            .as_str()
            .unwrap()
            .contains("storage/verify")
    );

    let verified = client.post_empty("/v1/databases/shop/storage/verify").await;
    assert_eq!(verified.status, 204, "{verified:?}");
    assert_eq!(listed(&client, "shop").await["storage"]["verified"], true);
    // Verifying again re-runs the probe and still passes.
    assert_eq!(
        client
            .post_empty("/v1/databases/shop/storage/verify")
            .await
            .status,
        204
    );

    use_table(&client, "shop").await;
    assert_eq!(sum(&client, "shop").await, 6);
    let flushed = common::eventually(10, || async { files_under(bucket.path()) > 0 }).await;
    assert!(flushed, "no segment reached the bound directory");
    assert_eq!(
        files_under(&dir.path().join("tables")),
        0,
        "segments went to the data directory"
    );

    server.stop();
    let server = Server::start(dir.path(), &args);
    assert_eq!(sum(&server.client(&key), "shop").await, 6);
}

#[tokio::test]
async fn an_s3_binding_verifies_against_a_real_server_and_stores_segments_there() {
    let endpoint = s3_endpoint();
    let bucket = format!("strata-test-{}", std::process::id());
    let http = reqwest::Client::new();
    let made = http
        .put(format!("{endpoint}/{bucket}"))
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success(), "cannot create bucket: {made:?}");

    let dir = tempfile::tempdir().unwrap();
    let key = enterprise(dir.path());
    let server = Server::start(dir.path(), &["--set", "tables.flush_rows=2"]);
    let client = server.client(&key);
    let storage = |url: String| {
        json!({"url": url, "endpoint": endpoint, "region": "us-east-1",
               "access_key_id": "testing", "secret_access_key": "sEcReT-0f-the-lake-bucket"})
    };
    let body = json!({"name": "lake", "storage": storage(format!("s3://{bucket}/lake"))});
    assert_eq!(
        client.post("/v1/databases", &body.to_string()).await.status,
        201
    );
    assert_eq!(
        client
            .post_empty("/v1/databases/lake/storage/verify")
            .await
            .status,
        204
    );
    use_table(&client, "lake").await;
    assert_eq!(sum(&client, "lake").await, 6);

    let list = format!("{endpoint}/{bucket}?list-type=2&prefix=lake/");
    let stored = common::eventually(10, || async {
        let text = http.get(&list).send().await.unwrap().text().await.unwrap();
        text.contains(".parquet")
    })
    .await;
    assert!(stored, "no segment reached the bucket");
    // The secret is in the log only sealed: not in its bytes, not in a dump.
    let dump = common::replay(dir.path(), &["dump", "--kind", "database_created"]);
    let dumped = String::from_utf8_lossy(&dump.stdout);
    assert!(dumped.contains("\"secret_access_key\":\"***\""), "{dumped}");
    assert!(!dumped.contains("sEcReT-0f-the-lake-bucket"));
    let mut log = Vec::new();
    for entry in walkdir(&dir.path().join("log")) {
        log.extend(std::fs::read(entry).unwrap());
    }
    assert!(!log.windows(25).any(|w| w == b"sEcReT-0f-the-lake-bucket"));
    // A restart unseals it to reach the bucket again.
    drop(server);
    let server = Server::start(dir.path(), &["--set", "tables.flush_rows=2"]);
    let client = server.client(&key);
    assert_eq!(sum(&client, "lake").await, 6);

    // A binding to a bucket that does not exist fails at the first stage, and says so.
    let body = json!({"name": "nowhere", "storage": storage("s3://no-such-bucket-here/x".into())});
    assert_eq!(
        client.post("/v1/databases", &body.to_string()).await.status,
        201
    );
    let failed = client
        .post_empty("/v1/databases/nowhere/storage/verify")
        .await;
    assert_error(&failed, 400, "bad_request");
    assert!(
        failed.body["message"]
            .as_str()
            .unwrap()
            .contains("failed at put"),
        "{failed:?}"
    );
    assert_eq!(
        listed(&client, "nowhere").await["state"],
        "pending_verification"
    );
}

#[tokio::test]
async fn verification_answers_404_400_410_and_403_as_the_specification_says() {
    let dir = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let key = enterprise(dir.path());
    let server = Server::start(dir.path(), &["--set", "debug.purge_delay_ms=3000"]);
    let client = server.client(&key);

    assert_error(
        &client.post_empty("/v1/databases/nope/storage/verify").await,
        404,
        "database_not_found",
    );
    client.create_database("plain").await;
    let unbound = client
        .post_empty("/v1/databases/plain/storage/verify")
        .await;
    assert_error(&unbound, 400, "bad_request");
    assert!(
        unbound.body["message"]
            .as_str()
            .unwrap()
            .contains("no storage binding")
    );

    let url = format!("file://{}/gone", bucket.path().display());
    let body = json!({"name": "gone", "storage": {"url": url}});
    assert_eq!(
        client.post("/v1/databases", &body.to_string()).await.status,
        201
    );
    assert_eq!(client.delete("/v1/databases/gone").await.status, 204);
    assert_error(
        &client.post_empty("/v1/databases/gone/storage/verify").await,
        410,
        "gone",
    );

    let narrow = account_with_key(dir.path(), "big", Some("plain*"));
    let narrow = server.client(&narrow);
    assert_error(
        &narrow.post_empty("/v1/databases/gone/storage/verify").await,
        403,
        "forbidden",
    );

    for url in [
        "ftp://host/x",
        "s3:///no-bucket",
        "not a url",
        "file://relative/x",
    ] {
        let body = json!({"name": "bad", "storage": {"url": url}});
        assert_error(
            &client.post("/v1/databases", &body.to_string()).await,
            400,
            "bad_request",
        );
    }
    let body = json!({"name": "bad", "storage": {"url": "file:///tmp/x", "colour": "red"}});
    assert_error(
        &client.post("/v1/databases", &body.to_string()).await,
        400,
        "bad_request",
    );
    let lone = json!({"name": "bad", "storage": {"url": "s3://b/x", "access_key_id": "k"}});
    let answer = client.post("/v1/databases", &lone.to_string()).await;
    assert_error(&answer, 400, "bad_request");
    assert!(answer.body["message"].as_str().unwrap().contains("both"));
    // A refused creation leaves nothing behind, not even a directory.
    let never = bucket.path().join("never");
    let url = format!("file://{}", never.display());
    let taken = json!({"name": "plain", "storage": {"url": url}});
    let answer = client.post("/v1/databases", &taken.to_string()).await;
    assert_error(&answer, 409, "database_exists");
    assert!(!never.exists());
    assert_eq!(listed(&client, "bad").await, Value::Null);
}

/// Every file under `dir` (none when it does not exist: a Kafka log has no files here).
fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walkdir(&path));
        } else {
            files.push(path);
        }
    }
    files
}
