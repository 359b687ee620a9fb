//! Metrics ingestion over HTTP: POST /{dataset}/metrics (the text exposition format) and
//! Prometheus remote write at POST /api/v1/write, read back with SQL; refusals that name the
//! line or the series, and apply nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Answer, Server, Signed, root_user};
use serde_json::{Value, json};

fn start() -> (tempfile::TempDir, Server, Signed) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    (dir, server, platform)
}

async fn sql(platform: &Signed, query: &str) -> Vec<Value> {
    let answer = platform
        .send("POST", "/sql", Some(&json!({ "query": query })))
        .await;
    assert_eq!(answer.status, 200, "{query}: {answer:?}");
    answer.body["rows"].as_array().unwrap().clone()
}

async fn post_metrics(platform: &Signed, dataset: &str, body: &str) -> Answer {
    platform
        .send_text(
            "POST",
            &format!("/{dataset}/metrics"),
            "text/plain; version=0.0.4",
            body,
        )
        .await
}

async fn remote_write(platform: &Signed, path: &str, content_type: &str, body: Vec<u8>) -> Answer {
    let extra = [
        ("content-type", content_type),
        ("content-encoding", "snappy"),
        ("x-prometheus-remote-write-version", "0.1.0"),
    ];
    let headers = platform.sign("POST", path, &extra, &body, chrono::Utc::now());
    platform.send_raw("POST", path, &headers, body).await
}

const EXPOSITION: &str = r#"# HELP http_requests_total The total number of HTTP requests.
# TYPE http_requests_total counter
http_requests_total{method="post",code="200"} 1027 1395066363000
http_requests_total{method="post",code="400"}    3 1395066363000

# A comment that is neither HELP nor TYPE.
msdos_file_access_time_seconds{path="C:\\DIR\\FILE.TXT",error="Cannot find file:\n\"FILE.TXT\""} 1.458255915e9 1395066363000
metric_without_timestamp_and_labels 12.47
# TYPE rpc_duration_seconds summary
rpc_duration_seconds{quantile="0.5"} 4773 1395066363000
rpc_duration_seconds_sum 1.7560473e+07 1395066363000
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{le="1"} 133988 1395066363000
http_request_duration_seconds_bucket{le="+Inf"} 144320 1395066363000
weird{value="x"} NaN 1395066363000
inf_metric +Inf 1395066363000
"#;

#[tokio::test]
async fn the_text_format_is_written_as_samples_sql_reads() {
    let (_dir, _server, platform) = start();
    let before = chrono::Utc::now().timestamp_millis();
    let answer = post_metrics(&platform, "node", EXPOSITION).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body, json!({"acknowledged": true, "indexed": 10}));

    let rows = sql(
        &platform,
        "SELECT \"__name__\", method, code, value, \"@timestamp\" FROM node \
         WHERE \"__name__\" = 'http_requests_total' ORDER BY code",
    )
    .await;
    assert_eq!(
        rows,
        [
            json!([
                "http_requests_total",
                "post",
                "200",
                1027.0,
                "2014-03-17T14:26:03.000Z"
            ]),
            json!([
                "http_requests_total",
                "post",
                "400",
                3.0,
                "2014-03-17T14:26:03.000Z"
            ]),
        ]
    );
    // Escapes in label values are read; `le` is canonical (`1` is `1.0`).
    let rows = sql(
        &platform,
        "SELECT path, error FROM node WHERE \"__name__\" = 'msdos_file_access_time_seconds'",
    )
    .await;
    assert_eq!(
        rows,
        [json!([
            "C:\\DIR\\FILE.TXT",
            "Cannot find file:\n\"FILE.TXT\""
        ])]
    );
    let rows = sql(
        &platform,
        "SELECT le, value FROM node WHERE \"__name__\" = 'http_request_duration_seconds_bucket' ORDER BY value",
    )
    .await;
    assert_eq!(rows, [json!(["1.0", 133988.0]), json!(["+Inf", 144320.0])]);
    // A sample without a timestamp is at the time it was received.
    let rows = sql(
        &platform,
        "SELECT CAST(\"@timestamp\" AS BIGINT), value FROM node WHERE \"__name__\" = 'metric_without_timestamp_and_labels'",
    )
    .await;
    let at = rows[0][0].as_i64().unwrap();
    assert!(at >= before && at <= chrono::Utc::now().timestamp_millis());
    // A label named like a sample column has a column of its own; NaN and Inf are kept.
    let rows = sql(
        &platform,
        "SELECT \"label:value\", isnan(value) FROM node WHERE \"__name__\" = 'weird'",
    )
    .await;
    assert_eq!(rows, [json!(["x", true])]);
    let rows = sql(
        &platform,
        "SELECT value > 1e308 FROM node WHERE \"__name__\" = 'inf_metric'",
    )
    .await;
    assert_eq!(rows, [json!([true])]);
    // Each series has one id, the same in every write.
    let rows = sql(
        &platform,
        "SELECT COUNT(DISTINCT _series), COUNT(*) FROM node",
    )
    .await;
    assert_eq!(rows, [json!([10, 10])]);
    let again = post_metrics(
        &platform,
        "node",
        "http_requests_total{code=\"200\",method=\"post\"} 1030 1395066423000\n",
    )
    .await;
    assert_eq!(again.body["indexed"], 1, "{again:?}");
    let rows = sql(
        &platform,
        "SELECT COUNT(DISTINCT _series), COUNT(*) FROM node WHERE code = '200'",
    )
    .await;
    assert_eq!(rows, [json!([1, 2])]);
}

#[tokio::test]
async fn a_malformed_line_refuses_the_whole_body_naming_it() {
    let (_dir, _server, platform) = start();
    let body = "ok_metric 1\nok_metric{a=\"b\"} 2\nbroken{a=\"b\" 3\n";
    let answer = post_metrics(&platform, "refused", body).await;
    assert_eq!(answer.status, 400, "{answer:?}");
    let message = answer.body["message"].as_str().unwrap();
    assert!(message.starts_with("metrics: line 3: "), "{message}");
    // Nothing was applied: the dataset was not even made.
    let missing = platform.send("GET", "/refused", None).await;
    assert_eq!(missing.status, 404, "{missing:?}");

    assert_eq!(post_metrics(&platform, "m", "up 1\n").await.status, 200);
    let answer = post_metrics(&platform, "m", "up 2\nup{job=\"x\"} nope\n").await;
    assert_eq!(answer.status, 400);
    assert!(
        answer.body["message"].as_str().unwrap().contains("line 2"),
        "{answer:?}"
    );
    let rows = sql(&platform, "SELECT COUNT(*) FROM m").await;
    assert_eq!(rows, [json!([1])]);
}

#[tokio::test]
async fn metrics_datasets_take_only_samples_and_are_not_searched_as_documents() {
    let (_dir, _server, platform) = start();
    assert_eq!(
        post_metrics(&platform, "cpu", "load1 0.5\n").await.status,
        200
    );
    let bulk = platform
        .send_ndjson(
            "POST",
            "/cpu/_bulk",
            &[json!({"index": {}}), json!({"message": "hello"})],
        )
        .await;
    assert_eq!(bulk.body["errors"], true, "{bulk:?}");
    let reason = bulk.body["items"][0]["index"]["error"]["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("holds metrics"), "{reason}");
    let search = platform
        .send(
            "POST",
            "/cpu/_search",
            Some(&json!({"query": {"match_all": {}}})),
        )
        .await;
    assert_eq!(search.status, 400, "{search:?}");

    // And a dataset of records takes no samples.
    let records = platform
        .send_ndjson(
            "POST",
            "/logs/_bulk",
            &[json!({"index": {}}), json!({"a": 1})],
        )
        .await;
    assert_eq!(records.body["errors"], false);
    let answer = post_metrics(&platform, "logs", "up 1\n").await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(
        answer.body["message"]
            .as_str()
            .unwrap()
            .contains("holds records"),
        "{answer:?}"
    );
    // A wildcard search passes over metrics datasets.
    let all = platform
        .send(
            "POST",
            "/*/_search",
            Some(&json!({"query": {"match_all": {}}})),
        )
        .await;
    assert_eq!(all.status, 200, "{all:?}");
    assert_eq!(all.body["hits"]["total"]["value"], 1);
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn remote_write_writes_its_dataset_and_refuses_what_it_cannot_read() {
    let (_dir, _server, platform) = start();
    let body = strata::remote_write::encode(&[
        (
            labels(&[("__name__", "up"), ("job", "node"), ("instance", "a:9100")]),
            vec![(1_700_000_000_000, 1.0), (1_700_000_015_000, 0.0)],
        ),
        (
            labels(&[("__name__", "up"), ("job", "node"), ("instance", "b:9100")]),
            vec![(1_700_000_000_000, 1.0)],
        ),
    ]);
    let answer = remote_write(
        &platform,
        "/api/v1/write",
        "application/x-protobuf",
        body.clone(),
    )
    .await;
    assert_eq!(answer.status, 204, "{answer:?}");
    let rows = sql(
        &platform,
        "SELECT instance, CAST(\"@timestamp\" AS BIGINT), value FROM prometheus ORDER BY instance, 2",
    )
    .await;
    assert_eq!(
        rows,
        [
            json!(["a:9100", 1_700_000_000_000i64, 1.0]),
            json!(["a:9100", 1_700_000_015_000i64, 0.0]),
            json!(["b:9100", 1_700_000_000_000i64, 1.0]),
        ]
    );
    // `index` names the dataset.
    let answer = remote_write(
        &platform,
        "/api/v1/write?index=node-metrics",
        "application/x-protobuf",
        body.clone(),
    )
    .await;
    assert_eq!(answer.status, 204, "{answer:?}");
    assert_eq!(
        sql(&platform, "SELECT COUNT(*) FROM \"node-metrics\"").await,
        [json!([3])]
    );

    // Remote write 2.0 is declined with 415, so that Prometheus falls back to 1.0.
    let answer = remote_write(
        &platform,
        "/api/v1/write",
        "application/x-protobuf;proto=io.prometheus.write.v2.Request",
        body,
    )
    .await;
    assert_eq!(answer.status, 415, "{answer:?}");
    // Not snappy; a series with a label twice: 400, nothing written.
    let answer = remote_write(
        &platform,
        "/api/v1/write",
        "application/x-protobuf",
        b"plain".to_vec(),
    )
    .await;
    assert_eq!(answer.status, 400, "{answer:?}");
    let twice = strata::remote_write::encode(&[
        (labels(&[("__name__", "ok")]), vec![(1, 1.0)]),
        (
            labels(&[("__name__", "bad"), ("a", "1"), ("a", "2")]),
            vec![(1, 1.0)],
        ),
    ]);
    let answer = remote_write(&platform, "/api/v1/write", "application/x-protobuf", twice).await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(
        answer.body["message"]
            .as_str()
            .unwrap()
            .contains("series 1 has label \"a\" twice"),
        "{answer:?}"
    );
    assert_eq!(
        sql(&platform, "SELECT COUNT(*) FROM prometheus").await,
        [json!([3])]
    );
}

#[tokio::test]
async fn remote_write_signed_as_prometheus_signs_is_accepted() {
    let (_dir, _server, platform) = start();
    let body = strata::remote_write::encode(&[(
        labels(&[("__name__", "up")]),
        vec![(1_700_000_000_000, 1.0)],
    )]);
    // Prometheus' sigv4 signs as the service "aps", whatever the receiver is.
    let mut prometheus = platform.clone();
    prometheus.service = "aps".to_owned();
    let answer = remote_write(
        &prometheus,
        "/api/v1/write",
        "application/x-protobuf",
        body.clone(),
    )
    .await;
    assert_eq!(answer.status, 204, "{answer:?}");
    // Any other service but the configured one is still refused.
    let mut other = platform.clone();
    other.service = "s3".to_owned();
    let answer = remote_write(&other, "/api/v1/write", "application/x-protobuf", body).await;
    assert_eq!(answer.status, 401, "{answer:?}");
}

#[tokio::test]
async fn remote_write_takes_bodies_up_to_the_configured_limit() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "server.max_body_bytes=16777216"]);
    let platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    // 400,000 samples whose values do not compress: a body of about 5 MiB, more than a web
    // framework's usual default of 2 MiB, as a Prometheus with a large max_samples_per_send
    // sends them.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let series: Vec<_> = (0..4)
        .map(|s| {
            let samples = (0..100_000)
                .map(|i| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (1_700_000_000_000 + i * 15_000, (state >> 11) as f64)
                })
                .collect();
            (
                labels(&[("__name__", "big"), ("shard", &s.to_string())]),
                samples,
            )
        })
        .collect();
    let body = strata::remote_write::encode(&series);
    assert!(body.len() > 4 << 20, "{}", body.len());
    let answer = remote_write(&platform, "/api/v1/write", "application/x-protobuf", body).await;
    assert_eq!(answer.status, 204, "{answer:?}");
    assert_eq!(
        sql(&platform, "SELECT COUNT(*) FROM prometheus").await,
        [json!([400_000])]
    );
}

/// A dataset made empty by `PUT /{name}` takes samples as its first write (and is then a
/// metrics dataset, after a restart too); one that holds records, or whose mapping declares
/// fields, keeps its kind. Create-then-ingest works for either kind.
#[tokio::test]
async fn an_empty_dataset_takes_samples_as_its_first_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let credentials = root_user(dir.path(), "acme");
    let platform = Signed::new(&server, &credentials);
    for name in ["web", "logs", "declared"] {
        let body = match name {
            "declared" => Some(json!({"mappings": {"properties": {"status": {"type": "long"}}}})),
            _ => None,
        };
        let made = platform
            .send("PUT", &format!("/{name}"), body.as_ref())
            .await;
        assert_eq!(made.status, 200, "{made:?}");
    }
    let first = post_metrics(&platform, "web", "http_requests_total{code=\"200\"} 10\n").await;
    assert_eq!(first.status, 200, "{first:?}");
    let bulk = platform
        .send_ndjson(
            "POST",
            "/web/_bulk",
            &[json!({"index": {}}), json!({"a": 1})],
        )
        .await;
    let reason = bulk.body["items"][0]["index"]["error"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("holds metrics"), "{bulk:?}");

    // Records first: the dataset holds records from then on.
    let records = platform
        .send_ndjson(
            "POST",
            "/logs/_bulk",
            &[json!({"index": {}}), json!({"a": 1})],
        )
        .await;
    assert_eq!(records.body["errors"], false, "{records:?}");
    let refused = post_metrics(&platform, "logs", "up 1\n").await;
    assert_eq!(refused.status, 400, "{refused:?}");
    // A mapping makes a dataset of records before any write.
    let refused = post_metrics(&platform, "declared", "up 1\n").await;
    assert_eq!(refused.status, 400, "{refused:?}");

    // The change of kind is in the log: a restart reads `web` as metrics.
    assert!(server.stop());
    let server = Server::start(dir.path(), &[]);
    let platform = Signed::new(&server, &credentials);
    let answer = platform
        .send("GET", "/web/promql?query=sum(http_requests_total)", None)
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body["data"]["result"][0]["value"][1], "10",
        "{answer:?}"
    );
    let rows = sql(&platform, "SELECT COUNT(*) FROM logs").await;
    assert_eq!(rows, [json!([1])]);
}
