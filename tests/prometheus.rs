//! Prometheus itself against strata, as users run it: a real Prometheus (Debian's
//! `prometheus`, which scripts/test installs) scrapes strata's own /metrics every second and
//! remote-writes every sample to the platform API. Then the same PromQL questions go to both,
//! about the same samples, and the answers must agree: Prometheus computes from its TSDB,
//! strata from its datasets.
//!
//! Debian builds Prometheus without the AWS SDK, so its `sigv4` block signs nothing; the
//! remote write goes through a signing relay, as deployments put aws-sigv4-proxy in front of
//! such a receiver: the relay passes Prometheus' request on, bytes and headers as they are,
//! adding a SigV4 signature for the service `aps` (the name Prometheus' own signer uses).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};

use common::{Server, Signed, eventually, root_user};
use serde_json::Value;

/// A Prometheus server, killed when dropped.
struct Prometheus {
    child: Child,
    base: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A SigV4 signing relay on loopback: every POST it receives goes on to strata's remote-write
/// path, signed as `platform` signs, with the service `aps`; strata's status comes back.
async fn start_relay(platform: &Signed, path: &str) -> String {
    use axum::{body::Bytes, http::HeaderMap, http::StatusCode, routing::post};
    let mut signer = platform.clone();
    signer.service = "aps".to_owned();
    let path = path.to_owned();
    let relay = move |headers: HeaderMap, body: Bytes| {
        let (signer, path) = (signer.clone(), path.clone());
        async move {
            let passed: Vec<(String, String)> = [
                "content-type",
                "content-encoding",
                "x-prometheus-remote-write-version",
            ]
            .iter()
            .filter_map(|name| {
                let value = headers.get(*name)?.to_str().ok()?;
                Some((name.to_string(), value.to_owned()))
            })
            .collect();
            let extra: Vec<(&str, &str)> = passed
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            let signed = signer.sign("POST", &path, &extra, &body, chrono::Utc::now());
            let answer = signer.send_raw("POST", &path, &signed, body.to_vec()).await;
            StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY)
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = axum::Router::new().route("/write", post(relay));
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/write")
}

/// Starts Prometheus in `dir`: it scrapes `target` (host:port) and remote-writes to
/// `write_url`.
fn start_prometheus(dir: &std::path::Path, target: &str, write_url: &str) -> Prometheus {
    let port = common::free_port();
    let config = dir.join("prometheus.yml");
    // One shard, so that samples reach strata in the order Prometheus scraped them.
    std::fs::write(
        &config,
        format!(
            r#"global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: strata
    static_configs:
      - targets: ["{target}"]
remote_write:
  - url: "{write_url}"
    queue_config:
      min_shards: 1
      max_shards: 1
      batch_send_deadline: 200ms
"#
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("prometheus is not installed: run the tests with scripts/test, which installs it");
    Prometheus {
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

fn encode(text: &str) -> String {
    serde_urlencoded::to_string([("q", text)]).unwrap()[2..].to_owned()
}

/// The `data` of a successful answer.
fn data(answer: &Value, what: &str) -> Value {
    assert_eq!(answer["status"], "success", "{what}: {answer}");
    answer["data"].clone()
}

/// A query result as metric → values, the values as numbers.
fn by_metric(result: &Value) -> BTreeMap<String, Vec<(f64, f64)>> {
    let points = |values: &Value| -> Vec<(f64, f64)> {
        values
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p[0].as_f64().unwrap(),
                    p[1].as_str().unwrap().parse().unwrap(),
                )
            })
            .collect()
    };
    result["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|series| {
            let values = match series.get("values") {
                Some(values) => points(values),
                None => points(&Value::Array(vec![series["value"].clone()])),
            };
            (series["metric"].to_string(), values)
        })
        .collect()
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn assert_agree(query: &str, reference: &Value, answer: &Value) {
    let (expected, actual) = (by_metric(reference), by_metric(answer));
    assert!(!expected.is_empty(), "{query}: Prometheus found nothing");
    assert_eq!(
        expected.keys().collect::<Vec<_>>(),
        actual.keys().collect::<Vec<_>>(),
        "{query}: the series differ"
    );
    for (metric, points) in &expected {
        let ours = &actual[metric];
        assert_eq!(
            points.len(),
            ours.len(),
            "{query} {metric}: {points:?} against {ours:?}"
        );
        for (p, q) in points.iter().zip(ours) {
            assert!(
                p.0 == q.0 && same(p.1, q.1),
                "{query} {metric}: {points:?} against {ours:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_remote_writes_to_strata_and_both_answer_alike() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = root_user(dir.path(), "acme");
    let platform = Signed::new(&server, &root);
    let target = server.data_url.trim_start_matches("http://").to_owned();
    let relay = start_relay(&platform, "/api/v1/write?index=scraped").await;
    let prometheus = start_prometheus(dir.path(), &target, &relay);
    let http = reqwest::Client::new();
    let ask_prometheus = |path: String| {
        let http = http.clone();
        let url = format!("{}{path}", prometheus.base);
        async move {
            http.get(url)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let ask_strata = |path: String| {
        let platform = platform.clone();
        async move { platform.send("GET", &path, None).await.body }
    };

    // Wait for 16 scrapes to reach strata; then the time of the last one. The questions are
    // about the last 10 seconds, when every series had been scraped a few times: Prometheus
    // 2.42 extrapolates the rate of a series that starts inside the window otherwise than
    // Prometheus 3 does.
    let count = "/api/v1/query?query=".to_owned() + &encode("count_over_time(up[1h])");
    let written = eventually(60, || {
        let answer = ask_strata(count.clone());
        async move {
            answer.await["data"]["result"][0]["value"][1]
                .as_str()
                .is_some_and(|n| n.parse::<f64>().unwrap() >= 16.0)
        }
    })
    .await;
    assert!(
        written,
        "no scrapes reached strata; Prometheus' log:\n{}",
        std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
    );
    let newest = "/api/v1/query?query=".to_owned() + &encode("max(timestamp(up))");
    let answer = ask_strata(newest).await;
    let last_scrape: f64 = answer["data"]["result"][0]["value"][1]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    // Questions about the time before the last scrape strata has, when both hold the same
    // samples (the scrape before it is complete in strata, the scrapes after it do not count).
    // Debian's Prometheus is 2.42: its range windows still include a sample exactly at their
    // start, which Prometheus 3 (and strata) leave out, so the questions fall between scrapes,
    // where both versions read the same samples.
    let at = last_scrape - 1.5;
    let start = at - 8.0;
    let instant = [
        "up",
        "sum by (job) (scrape_samples_scraped)",
        "count({job=\"strata\"})",
        "sum(strata_http_requests_total)",
        "rate(strata_http_requests_total[5s])",
        "histogram_quantile(0.9, sum by (le) (rate(strata_http_request_duration_seconds_bucket[5s])))",
        "count_over_time(scrape_duration_seconds[1m])",
        "label_replace(up, \"port\", \"$1\", \"instance\", \".*:(.*)\")",
        "holt_winters(scrape_duration_seconds[8s], 0.5, 0.5)",
    ];
    for query in instant {
        let path = format!("/api/v1/query?query={}&time={at}", encode(query));
        let reference = data(&ask_prometheus(path.clone()).await, query);
        let answer = data(&ask_strata(path).await, query);
        assert_eq!(reference["resultType"], answer["resultType"], "{query}");
        assert_agree(query, &reference, &answer);
    }
    for query in [
        "up",
        "sum(rate(strata_http_requests_total[3s]))",
        "scrape_series_added",
    ] {
        let path = format!(
            "/api/v1/query_range?query={}&start={start}&end={at}&step=1",
            encode(query)
        );
        let reference = data(&ask_prometheus(path.clone()).await, query);
        let answer = data(&ask_strata(path).await, query);
        assert_agree(query, &reference, &answer);
    }
    // The same series and label values.
    let path = format!(
        "/api/v1/series?match[]={}&start={start}&end={at}",
        encode("{job=\"strata\"}")
    );
    let (reference, answer) = (
        data(&ask_prometheus(path.clone()).await, "series"),
        data(&ask_strata(path).await, "series"),
    );
    assert_eq!(reference, answer);
    let path = format!("/api/v1/label/__name__/values?start={start}&end={at}");
    let (reference, answer) = (
        data(&ask_prometheus(path.clone()).await, "names"),
        data(&ask_strata(path).await, "names"),
    );
    assert_eq!(reference, answer);
    drop(prometheus);
}
