//! Prometheus' query API over HTTP (/promql/* and /api/v1/*), over samples written by remote
//! write and the text format: instant and range queries from the memtable and from segments,
//! the listings, one dataset or all, form-encoded POSTs as Grafana sends them, and errors in
//! Prometheus' format.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Answer, Server, Signed, root_user};
use serde_json::{Value, json};

/// 2023-11-14T22:13:20Z, a round time to write samples at.
const T0: i64 = 1_700_000_000;

fn start(extra: &[&str]) -> (tempfile::TempDir, Server, Signed) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), extra);
    let platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    (dir, server, platform)
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

async fn remote_write(
    platform: &Signed,
    path: &str,
    series: &[strata::remote_write::SeriesSamples],
) {
    let body = strata::remote_write::encode(series);
    let extra = [("content-type", "application/x-protobuf")];
    let headers = platform.sign("POST", path, &extra, &body, chrono::Utc::now());
    let answer = platform.send_raw("POST", path, &headers, body).await;
    assert_eq!(answer.status, 204, "{answer:?}");
}

/// `http_requests_total` of two instances, a sample every 15 s for 10 minutes, counting up by
/// 1 (instance a) and 2 (instance b) a second; and a gauge.
async fn load(platform: &Signed, path: &str) {
    let counter = |instance: &str, rate: f64| {
        (
            labels(&[
                ("__name__", "http_requests_total"),
                ("job", "api"),
                ("instance", instance),
            ]),
            (0..=40)
                .map(|i| ((T0 + i * 15) * 1000, rate * (i * 15) as f64))
                .collect::<Vec<_>>(),
        )
    };
    let gauge = (
        labels(&[("__name__", "temperature"), ("room", "lab")]),
        vec![(T0 * 1000, 20.5), ((T0 + 60) * 1000, 21.0)],
    );
    remote_write(
        platform,
        path,
        &[counter("a", 1.0), counter("b", 2.0), gauge],
    )
    .await;
}

async fn get(platform: &Signed, path: &str) -> Answer {
    platform.send("GET", path, None).await
}

fn query_path(prefix: &str, query: &str, rest: &str) -> String {
    let encoded: String = url_encode(query);
    format!("{prefix}/query?query={encoded}{rest}")
}

fn url_encode(text: &str) -> String {
    serde_urlencoded::to_string([("q", text)]).unwrap()[2..].to_owned()
}

#[tokio::test]
async fn instant_and_range_queries_answer_in_prometheus_format() {
    let (_dir, _server, platform) = start(&[]);
    load(&platform, "/api/v1/write").await;
    let at = format!("&time={}", T0 + 600);
    for prefix in ["/promql", "/api/v1"] {
        let answer = get(
            &platform,
            &query_path(prefix, "sum by (job) (rate(http_requests_total[5m]))", &at),
        )
        .await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(answer.body["status"], "success");
        assert_eq!(answer.body["data"]["resultType"], "vector");
        // 1 + 2 per second, extrapolated over the window as Prometheus does: 3 up to rounding.
        let result = &answer.body["data"]["result"];
        assert_eq!(result.as_array().map(Vec::len), Some(1), "{answer:?}");
        assert_eq!(result[0]["metric"], json!({"job": "api"}));
        assert_eq!(result[0]["value"][0], json!(T0 + 600));
        let rate: f64 = result[0]["value"][1].as_str().unwrap().parse().unwrap();
        assert!((rate - 3.0).abs() < 1e-9, "{answer:?}");
    }
    // A selector answers the last sample within 5 minutes, with its labels; none after that.
    let at = format!("&time={}", T0 + 300);
    let answer = get(&platform, &query_path("/api/v1", "temperature", &at)).await;
    assert_eq!(
        answer.body["data"]["result"],
        json!([{"metric": {"__name__": "temperature", "room": "lab"}, "value": [T0 + 300, "21"]}])
    );
    let at = format!("&time={}", T0 + 361);
    let answer = get(&platform, &query_path("/api/v1", "temperature", &at)).await;
    assert_eq!(answer.body["data"]["result"], json!([]), "{answer:?}");
    // Scalars and strings.
    let answer = get(&platform, &query_path("/api/v1", "1 + 1", "&time=1.5")).await;
    assert_eq!(
        answer.body["data"],
        json!({"resultType": "scalar", "result": [1.5, "2"]})
    );
    // A range query: a matrix, one point per step.
    let range = format!(
        "/api/v1/query_range?query={}&start={}&end={}&step=60",
        url_encode("http_requests_total{instance=\"b\"}"),
        T0,
        T0 + 180
    );
    let answer = get(&platform, &range).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body["data"],
        json!({"resultType": "matrix", "result": [{
            "metric": {"__name__": "http_requests_total", "instance": "b", "job": "api"},
            "values": [[T0, "0"], [T0 + 60, "120"], [T0 + 120, "240"], [T0 + 180, "360"]]
        }]})
    );
    // Grafana POSTs form bodies.
    let body = format!(
        "query={}&start={}&end={}&step=300",
        url_encode("count(http_requests_total)"),
        T0,
        T0 + 600
    );
    let answer = platform
        .send_text(
            "POST",
            "/api/v1/query_range",
            "application/x-www-form-urlencoded",
            &body,
        )
        .await;
    assert_eq!(
        answer.body["data"]["result"],
        json!([{"metric": {}, "values": [[T0, "2"], [T0 + 300, "2"], [T0 + 600, "2"]]}])
    );
}

#[tokio::test]
async fn samples_in_segments_and_the_memtable_read_as_one_series() {
    let (_dir, _server, platform) = start(&["--set", "tables.flush_rows=20"]);
    // Written in two requests: the first is flushed into segments, the second may not be.
    load(&platform, "/api/v1/write?index=node").await;
    let late = (
        labels(&[("__name__", "temperature"), ("room", "lab")]),
        vec![((T0 + 120) * 1000, 22.0)],
    );
    remote_write(&platform, "/api/v1/write?index=node", &[late]).await;
    let range = format!(
        "/node/promql?query={}&start={}&end={}&step=60",
        url_encode("temperature"),
        T0,
        T0 + 180
    );
    let answer = get(&platform, &range).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body["data"]["result"][0]["values"],
        json!([
            [T0, "20.5"],
            [T0 + 60, "21"],
            [T0 + 120, "22"],
            [T0 + 180, "22"]
        ])
    );
    let answer = get(
        &platform,
        &format!(
            "/node/promql?query={}&time={}",
            url_encode("increase(http_requests_total{instance=\"a\"}[10m])"),
            T0 + 600
        ),
    )
    .await;
    assert_eq!(
        answer.body["data"]["result"][0]["value"][1], "600",
        "{answer:?}"
    );
    // Written again, and out of order, in a later request: the sample at T0 + 60 is replaced,
    // the one at T0 + 30 falls between the others.
    let again = (
        labels(&[("__name__", "temperature"), ("room", "lab")]),
        vec![((T0 + 60) * 1000, 25.0), ((T0 + 30) * 1000, 30.0)],
    );
    remote_write(&platform, "/api/v1/write?index=node", &[again]).await;
    let range = format!(
        "/node/promql?query={}&start={}&end={}&step=30",
        url_encode("temperature"),
        T0,
        T0 + 120
    );
    let answer = get(&platform, &range).await;
    assert_eq!(
        answer.body["data"]["result"][0]["values"],
        json!([
            [T0, "20.5"],
            [T0 + 30, "30"],
            [T0 + 60, "25"],
            [T0 + 90, "25"],
            [T0 + 120, "22"]
        ]),
        "{answer:?}"
    );
}

#[tokio::test]
async fn listings_cover_the_matching_series() {
    let (_dir, _server, platform) = start(&[]);
    load(&platform, "/api/v1/write").await;
    remote_write(
        &platform,
        "/api/v1/write?index=other",
        &[(
            labels(&[("__name__", "up"), ("job", "db")]),
            vec![(T0 * 1000, 1.0)],
        )],
    )
    .await;
    let answer = get(&platform, "/api/v1/labels").await;
    assert_eq!(
        answer.body["data"],
        json!(["__name__", "instance", "job", "room"])
    );
    let answer = get(&platform, "/promql/label/__name__/values").await;
    assert_eq!(
        answer.body["data"],
        json!(["http_requests_total", "temperature", "up"])
    );
    // `index` names one dataset.
    let answer = get(&platform, "/promql/label/__name__/values?index=other").await;
    assert_eq!(answer.body["data"], json!(["up"]));
    let answer = get(
        &platform,
        &format!("/api/v1/series?match[]={}", url_encode("{job=\"api\"}")),
    )
    .await;
    assert_eq!(
        answer.body["data"],
        json!([
            {"__name__": "http_requests_total", "instance": "a", "job": "api"},
            {"__name__": "http_requests_total", "instance": "b", "job": "api"},
        ])
    );
    let answer = get(&platform, "/api/v1/series").await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.body["error"], "no match[] parameter provided");
    let answer = get(&platform, "/api/v1/label/job/values?limit=1").await;
    assert_eq!(answer.body["data"], json!(["api"]));
    assert_eq!(
        answer.body["warnings"],
        json!(["results truncated due to limit"])
    );
    let answer = get(&platform, "/api/v1/status/buildinfo").await;
    assert_eq!(answer.body["data"]["application"], "strata");

    // /promql serves the same API as /api/v1, path for path.
    let range = format!(
        "/query_range?query={}&start={}&end={}&step=60",
        url_encode("sum(http_requests_total)"),
        T0,
        T0 + 180
    );
    let series = format!("/series?match[]={}", url_encode("up"));
    for path in [
        "/labels",
        "/label/job/values",
        series.as_str(),
        range.as_str(),
        "/status/buildinfo",
    ] {
        let (ours, theirs) = (
            get(&platform, &format!("/promql{path}")).await,
            get(&platform, &format!("/api/v1{path}")).await,
        );
        assert_eq!(ours.status, 200, "{path}: {ours:?}");
        assert_eq!(ours.body["status"], "success", "{path}: {ours:?}");
        assert_eq!(ours.body, theirs.body, "{path}");
    }
    let posted = platform
        .send_text(
            "POST",
            "/promql/labels",
            "application/x-www-form-urlencoded",
            "match[]=up",
        )
        .await;
    assert_eq!(
        posted.body["data"],
        json!(["__name__", "job"]),
        "{posted:?}"
    );
}

/// A staleness marker (the NaN Prometheus writes when a series goes away) ends the series at
/// once: a selector finds no sample after it, where the 5-minute lookback would otherwise.
#[tokio::test]
async fn a_staleness_marker_ends_a_series() {
    let (_dir, _server, platform) = start(&[]);
    let stale = f64::from_bits(0x7ff0_0000_0000_0002);
    remote_write(
        &platform,
        "/api/v1/write",
        &[
            (
                labels(&[("__name__", "up"), ("job", "gone")]),
                vec![(T0 * 1000, 1.0), ((T0 + 15) * 1000, stale)],
            ),
            (
                labels(&[("__name__", "up"), ("job", "here")]),
                vec![(T0 * 1000, 1.0), ((T0 + 15) * 1000, 1.0)],
            ),
        ],
    )
    .await;
    let jobs = |answer: &Answer| -> Vec<String> {
        answer.body["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["metric"]["job"].as_str().unwrap().to_owned())
            .collect()
    };
    let at = |t: i64| format!("&time={t}");
    let before = get(&platform, &query_path("/api/v1", "up", &at(T0 + 10))).await;
    assert_eq!(jobs(&before), ["gone", "here"], "{before:?}");
    let after = get(&platform, &query_path("/api/v1", "up", &at(T0 + 60))).await;
    assert_eq!(jobs(&after), ["here"], "{after:?}");
    // Range functions skip the marker: the window holds the one real sample.
    let counted = get(
        &platform,
        &query_path(
            "/api/v1",
            "count_over_time(up{job=\"gone\"}[1m])",
            &at(T0 + 30),
        ),
    )
    .await;
    assert_eq!(
        counted.body["data"]["result"][0]["value"][1], "1",
        "{counted:?}"
    );
}

#[tokio::test]
async fn errors_are_in_prometheus_format() {
    let (_dir, _server, platform) = start(&[]);
    load(&platform, "/api/v1/write").await;
    let bad = |answer: &Answer, status: u16, kind: &str| {
        assert_eq!(answer.status, status, "{answer:?}");
        assert_eq!(answer.body["status"], "error", "{answer:?}");
        assert_eq!(answer.body["errorType"], kind, "{answer:?}");
        answer.body["error"].as_str().unwrap().to_owned()
    };
    let answer = get(&platform, &query_path("/api/v1", "sum(", "")).await;
    let message = bad(&answer, 400, "bad_data");
    assert!(message.contains("parse error"), "{message}");
    let answer = get(&platform, "/api/v1/query").await;
    bad(&answer, 400, "bad_data");
    let answer = get(&platform, &query_path("/api/v1", "up", "&time=yesterday")).await;
    let message = bad(&answer, 400, "bad_data");
    assert_eq!(
        message,
        "invalid parameter \"time\": cannot parse \"yesterday\" to a valid timestamp"
    );
    let range = format!(
        "/api/v1/query_range?query=up&start={}&end={}&step=0",
        T0,
        T0 + 60
    );
    bad(&get(&platform, &range).await, 400, "bad_data");
    let range = format!(
        "/api/v1/query_range?query=up&start={}&end={}&step=1",
        T0,
        T0 + 100_000
    );
    let message = bad(&get(&platform, &range).await, 400, "bad_data");
    assert!(
        message.starts_with("exceeded maximum resolution"),
        "{message}"
    );
    // An evaluation error: 422 execution.
    let answer = get(
        &platform,
        &query_path(
            "/api/v1",
            "http_requests_total + on() http_requests_total",
            &format!("&time={}", T0 + 60),
        ),
    )
    .await;
    bad(&answer, 422, "execution");
    // A dataset that does not exist, or that holds records.
    let answer = get(&platform, &query_path("/api/v1", "up", "&index=nope")).await;
    bad(&answer, 404, "not_found");
    let records = platform
        .send_ndjson(
            "POST",
            "/logs/_bulk",
            &[json!({"index": {}}), json!({"a": 1})],
        )
        .await;
    assert_eq!(records.body["errors"], false);
    let answer = get(&platform, "/logs/promql?query=up").await;
    let message = bad(&answer, 400, "bad_data");
    assert!(message.contains("holds records"), "{message}");
    let _: Value = answer.body;
}
