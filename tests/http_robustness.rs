//! One request never takes the server down: the reproducers of ../shared/repro (deep
//! expressions that overflowed the stack, Arrow IPC bodies that aborted or panicked the
//! process) and deliberate panics, each sent to the real binary, which must answer with the
//! documented error and go on serving: /health and an ordinary request after each.
//!
//! The limits are tested at the limit as well as past it: a query at the limit runs on the
//! debug build, whose stack frames are the largest, so the stack is known to be enough.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Answer, Client, Server, Signed, log_env, root_user};
use serde_json::{Value, json};

const ARROW: &str = "application/vnd.apache.arrow.stream";
const LIMIT: usize = 1000;

fn repro(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/repro/arrow")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The table of ../shared/repro/README.md, in database `lab`.
async fn arrow_table(client: &Client) {
    assert_eq!(client.create_database("lab").await.status, 201);
    let table = json!({
        "name": "arrowt",
        "schema": [
            {"name": "title", "type": "utf8"},
            {"name": "n", "type": "int64"},
            {"name": "v", "type": "vector<float32,4>"}
        ],
        "fts_columns": ["title"],
        "vector_column": "v"
    });
    assert_eq!(client.create_table("lab", &table).await.status, 200);
}

async fn post_arrow(client: &Client, bytes: Vec<u8>) -> Option<Answer> {
    let response = client
        .http
        .post(format!("{}/v1/append/lab?table=arrowt", client.base))
        .bearer_auth(client.key.as_deref().unwrap())
        .header("content-type", ARROW)
        .header("accept", "application/json")
        .body(bytes)
        .send()
        .await
        .ok()?;
    Some(Client::answer(response).await)
}

async fn count(client: &Client) -> u64 {
    let answer = client
        .post_json(
            "/v1/query_sql/lab",
            &json!({"sql": "SELECT COUNT(*) AS c FROM arrowt"}),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["data"][0]["c"].as_u64().unwrap()
}

/// The server still answers: /health on both listeners, and an ordinary query.
async fn still_serving(server: &Server, client: &Client) {
    for base in [&server.data_url, &server.platform_url] {
        let health = reqwest::get(format!("{base}/health")).await;
        assert!(
            health.is_ok_and(|r| r.status() == 200),
            "{base}/health does not answer"
        );
    }
    let answer = client
        .post_json("/v1/query_sql/lab", &json!({"sql": "SELECT 1 + 1 AS two"}))
        .await;
    assert_eq!(answer.body["data"], json!([{"two": 2}]), "{answer:?}");
}

#[tokio::test]
async fn hostile_arrow_bodies_are_refused_and_nothing_is_appended() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = server.client(&common::account_with_key(dir.path(), "acme", None));
    arrow_table(&client).await;

    let valid = post_arrow(&client, repro("valid.arrows")).await.unwrap();
    assert_eq!(valid.status, 200, "{valid:?}");
    assert_eq!(count(&client).await, 100);

    let mut stated = vec![0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F];
    stated.extend([0u8; 64]);
    let cases = [
        ("alloc-abort.arrows", repro("alloc-abort.arrows")),
        ("panic-0.arrows", repro("panic-0.arrows")),
        ("panic-1.arrows", repro("panic-1.arrows")),
        ("panic-2.arrows", repro("panic-2.arrows")),
        ("panic-3.arrows", repro("panic-3.arrows")),
        (
            "panic-drops-connection.arrows",
            repro("panic-drops-connection.arrows"),
        ),
        ("2 GiB stated in 72 bytes", stated),
    ];
    for (name, bytes) in cases {
        let answer = post_arrow(&client, bytes)
            .await
            .unwrap_or_else(|| panic!("{name}: no answer"));
        assert_eq!(answer.status, 400, "{name}: {answer:?}");
        assert_eq!(answer.code(), "bad_request", "{name}: {answer:?}");
        let message = answer.body["message"].as_str().unwrap();
        assert!(!message.is_empty(), "{name}");
        still_serving(&server, &client).await;
    }
    // Four of the 72-byte bodies at once: each refused, none allocating what it states.
    let mut concurrent = Vec::new();
    for _ in 0..4 {
        let client = client.clone();
        let mut body = vec![0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F];
        body.extend([0u8; 64]);
        concurrent.push(tokio::spawn(async move { post_arrow(&client, body).await }));
    }
    for answer in concurrent {
        assert_eq!(answer.await.unwrap().unwrap().status, 400);
    }
    // Nothing of the refused bodies was appended.
    assert_eq!(count(&client).await, 100);
}

fn nested(open: &str, inner: &str, close: &str, levels: usize) -> String {
    format!("{}{inner}{}", open.repeat(levels), close.repeat(levels))
}

fn chain(term: &str, op: &str, terms: usize) -> String {
    vec![term; terms].join(op)
}

async fn promql(platform: &Signed, prefix: &str, query: &str) -> Answer {
    let body = serde_urlencoded::to_string([("query", query), ("time", "1700000000")]).unwrap();
    platform
        .send_text(
            "POST",
            &format!("{prefix}/query"),
            "application/x-www-form-urlencoded",
            &body,
        )
        .await
}

#[tokio::test]
async fn deep_promql_is_refused_at_the_limit_and_runs_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    let client = server.client(&common::account_with_key(dir.path(), "acme", None));
    arrow_table(&client).await;

    let refused = [
        nested("(", "1", ")", LIMIT),
        nested("sum(", "up", ")", LIMIT),
        format!("{}1", "-".repeat(LIMIT)),
        chain("1", " + ", LIMIT + 1),
        chain("up", " or ", LIMIT + 1),
        nested("2 ^ (", "1", ")", LIMIT),
        format!("up[{}]", nested("(", "5m", ")", LIMIT)),
        // Past the bound over tokens: refused before it is parsed.
        chain("1", "+", 100_000),
        nested("(", "1", ")", 100_000),
    ];
    for prefix in ["/api/v1", "/promql"] {
        for query in &refused {
            let answer = promql(&platform, prefix, query).await;
            assert_eq!(answer.status, 400, "{}: {answer:?}", &query[..40]);
            assert_eq!(answer.body["errorType"], "bad_data", "{answer:?}");
            let error = answer.body["error"].as_str().unwrap();
            assert!(
                error.contains("nests deeper than 1000 levels"),
                "{}: {error}",
                &query[..40]
            );
        }
        still_serving(&server, &client).await;
    }
    // At the limit, parsed and evaluated on the server's stacks.
    let allowed = [
        (nested("(", "1", ")", LIMIT - 1), json!("1")),
        (chain("1", " + ", LIMIT), json!(LIMIT.to_string())),
        // -(-(...(1)...)): two levels a sign, an even number of signs.
        (
            format!(
                "{}1{}",
                "-(".repeat(LIMIT / 2 - 2),
                ")".repeat(LIMIT / 2 - 2)
            ),
            json!("1"),
        ),
    ];
    for (query, value) in allowed {
        let answer = promql(&platform, "/api/v1", &query).await;
        assert_eq!(answer.status, 200, "{}: {answer:?}", &query[..40]);
        assert_eq!(answer.body["data"]["result"][1], value, "{answer:?}");
    }
    let aggregations = nested("sum(", "up", ")", LIMIT - 1);
    let answer = promql(&platform, "/api/v1", &aggregations).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["data"]["result"], json!([]));
    still_serving(&server, &client).await;
}

#[tokio::test]
async fn deep_sql_is_refused_at_the_limit_and_runs_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    let client = server.client(&common::account_with_key(dir.path(), "acme", None));
    arrow_table(&client).await;
    let rows: Vec<Value> = (0..20)
        .map(|n| json!({"title": format!("book {n}"), "n": n}))
        .collect();
    let appended = client
        .post_json("/v1/append/lab?table=arrowt", &json!({"data": rows}))
        .await;
    assert_eq!(appended.status, 200, "{appended:?}");
    let ors = |terms: usize| {
        (0..terms)
            .map(|i| format!("n = {i}"))
            .collect::<Vec<_>>()
            .join(" OR ")
    };
    let data_sql = |sql: String| {
        let client = client.clone();
        async move {
            client
                .post_json("/v1/query_sql/lab", &json!({"sql": sql}))
                .await
        }
    };

    let refused = [
        format!("SELECT {} AS x", chain("1", " + ", 2 * LIMIT)),
        format!("SELECT title FROM arrowt WHERE {}", ors(2 * LIMIT)),
        format!("SELECT {} AS x", chain("1", "+", 200_000)),
    ];
    for sql in &refused {
        let answer = data_sql(sql.clone()).await;
        assert_eq!(answer.status, 400, "{answer:?}");
        assert_eq!(answer.code(), "bad_request");
        let message = answer.body["message"].as_str().unwrap();
        assert!(
            message.contains("nests deeper than 1000 levels"),
            "{message}"
        );
        let platform_answer = platform
            .send("POST", "/sql", Some(&json!({ "query": sql })))
            .await;
        assert_eq!(platform_answer.status, 400, "{platform_answer:?}");
        let message = platform_answer.body["message"].as_str().unwrap();
        assert!(
            message.contains("nests deeper than 1000 levels"),
            "{message}"
        );
        still_serving(&server, &client).await;
    }
    // A search filter, an update and a delete predicate: every predicate is checked.
    let filter = ors(2 * LIMIT);
    let delete = format!(
        "/v1/delete/lab?{}",
        serde_urlencoded::to_string([("table", "arrowt"), ("predicate", filter.as_str())]).unwrap()
    );
    for (path, body) in [
        (
            "/v1/bm25_search/lab",
            json!({"table": "arrowt", "query": "book", "filter": filter}),
        ),
        (delete.as_str(), json!({})),
    ] {
        let answer = client.post_json(path, &body).await;
        assert_eq!(answer.status, 400, "{path}: {answer:?}");
        let message = answer.body["message"].as_str().unwrap();
        assert!(
            message.contains("nests deeper than 1000 levels"),
            "{message}"
        );
    }
    assert_eq!(count(&client).await, 20, "a refused delete deletes nothing");

    // Below the limit, planned, optimized and run on the server's stacks.
    let sum = data_sql(format!("SELECT {} AS x", chain("1", " + ", LIMIT - 2))).await;
    assert_eq!(sum.body["data"], json!([{"x": LIMIT - 2}]), "{sum:?}");
    let matched = data_sql(format!(
        "SELECT COUNT(*) AS c FROM arrowt WHERE {}",
        ors(LIMIT / 2 - 5)
    ))
    .await;
    assert_eq!(matched.body["data"], json!([{"c": 20}]), "{matched:?}");
    let filtered = client
        .post_json(
            "/v1/bm25_search/lab",
            &json!({"table": "arrowt", "query": "book", "filter": ors(LIMIT / 2 - 5), "limit": 50}),
        )
        .await;
    assert_eq!(filtered.status, 200, "{filtered:?}");
    assert_eq!(filtered.body["data"].as_array().unwrap().len(), 20);
    let platform_sum = platform
        .send(
            "POST",
            "/sql",
            Some(&json!({ "query": format!("SELECT {} AS x", chain("1", " + ", LIMIT - 2)) })),
        )
        .await;
    assert_eq!(platform_sum.status, 200, "{platform_sum:?}");
    assert_eq!(platform_sum.body["rows"], json!([[LIMIT - 2]]));
    // Long IN lists are flat, whatever their length: clients generate them.
    let list = (0..5000)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let within = data_sql(format!(
        "SELECT COUNT(*) AS c FROM arrowt WHERE n IN ({list})"
    ))
    .await;
    assert_eq!(within.body["data"], json!([{"c": 20}]), "{within:?}");
    still_serving(&server, &client).await;
}

#[tokio::test]
async fn a_panic_is_a_500_in_the_documented_body_and_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = log_env(dir.path());
    env.push(("STRATA_TEST_FAILPOINTS", "1".to_owned()));
    let server = Server::start_with(dir.path(), &[], &env);
    let client = server.client(&common::account_with_key(dir.path(), "acme", None));
    arrow_table(&client).await;

    let http = reqwest::Client::new();
    for kind in ["handler", "blocking"] {
        for (base, listener) in [
            (&server.data_url, "data"),
            (&server.platform_url, "platform"),
        ] {
            let request_id = format!("panic-{kind}-{listener}");
            let response = http
                .get(format!("{base}/health"))
                .header("x-strata-test-panic", kind)
                .header("x-request-id", &request_id)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{kind} on {listener}: no answer: {e}"));
            let answer = Client::answer(response).await;
            assert_eq!(answer.status, 500, "{kind} on {listener}: {answer:?}");
            assert_eq!(answer.request_id.as_deref(), Some(request_id.as_str()));
            if listener == "data" {
                assert_eq!(answer.code(), "internal", "{answer:?}");
            } else {
                assert_eq!(answer.body["status"], "error", "{answer:?}");
                let message = answer.body["message"].as_str().unwrap();
                assert!(message.starts_with("request: "), "{message}");
            }
            still_serving(&server, &client).await;
        }
    }
    // The panics were logged, each with the id of its request.
    let log = std::fs::read_to_string(&server.log).unwrap();
    for listener in ["data", "platform"] {
        let id = format!("panic-handler-{listener}");
        assert!(
            log.lines()
                .any(|line| line.contains(&id) && line.contains("fail point: a panic in a handler")),
            "no log line of the panic of {id}:\n{log}"
        );
    }
}

#[tokio::test]
async fn sql_memory_is_bounded_by_the_nodes_pool() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "server.query_memory_bytes=4096"]);
    let client = server.client(&common::account_with_key(dir.path(), "acme", None));
    arrow_table(&client).await;
    let rows: Vec<Value> = (0..20_000)
        .map(|n| json!({"title": format!("t{n}"), "n": n}))
        .collect();
    let appended = client
        .post_json("/v1/append/lab?table=arrowt", &json!({"data": rows}))
        .await;
    assert_eq!(appended.status, 200, "{appended:?}");
    // A grouping over 20,000 keys needs far more than 4 KiB: refused, not grown without bound.
    let grouped = client
        .post_json(
            "/v1/query_sql/lab",
            &json!({"sql": "SELECT title, COUNT(*) AS c FROM arrowt GROUP BY title ORDER BY c DESC LIMIT 3"}),
        )
        .await;
    assert_eq!(grouped.status, 503, "{grouped:?}");
    assert_eq!(grouped.code(), "unavailable");
    let message = grouped.body["message"].as_str().unwrap();
    assert!(
        message.contains("more resources than are free"),
        "{message}"
    );
    // What fits still runs.
    let answer = client
        .post_json("/v1/query_sql/lab", &json!({"sql": "SELECT 1 + 1 AS two"}))
        .await;
    assert_eq!(answer.body["data"], json!([{"two": 2}]), "{answer:?}");
}

/// Request bodies in flight are bounded node-wide. While one request holds the whole budget (it
/// announced a body of the largest size and is still sending it), a request with a body is
/// refused with 503 and Retry-After on either listener, before its body is read and with
/// nothing appended; a request without a body still runs; once the first ends, bodies are taken
/// again.
#[tokio::test]
async fn request_bodies_in_flight_are_bounded_node_wide() {
    use tokio::io::AsyncWriteExt;

    let dir = tempfile::tempdir().unwrap();
    let mib = (1 << 20).to_string();
    let server = Server::start(
        dir.path(),
        &[
            "--set",
            &format!("server.max_body_bytes={mib}"),
            "--set",
            &format!("server.max_in_flight_body_bytes={mib}"),
        ],
    );
    let key = common::account_with_key(dir.path(), "acme", None);
    let client = server.client(&key);
    arrow_table(&client).await;
    let platform = Signed::new(&server, &root_user(dir.path(), "acme"));
    let one_row = json!({"data": [{"title": "a", "n": 1}]});

    let address = server.data_url.trim_start_matches("http://");
    let head = format!(
        "POST /v1/append/lab?table=arrowt HTTP/1.1\r\nhost: {address}\r\n\
         authorization: Bearer {key}\r\ncontent-type: application/json\r\n\
         content-length: {mib}\r\n\r\n{{\"data\": ["
    );
    let stall = || async {
        let mut stalled = tokio::net::TcpStream::connect(address).await.unwrap();
        stalled.write_all(head.as_bytes()).await.unwrap();
        stalled
    };
    let mut stalled = stall().await;

    // The stalled request takes the whole budget as its head arrives. Should it arrive while a
    // probe holds a share, it is refused itself (its connection gets the 503): stall another.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let probe = json!({"sql": "SELECT 1 AS one"});
    loop {
        let answer = client.post_json("/v1/query_sql/lab", &probe).await;
        if answer.status == 503 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a body was taken past the budget: {answer:?}"
        );
        let mut answered = [0u8; 1];
        if matches!(stalled.try_read(&mut answered), Ok(n) if n > 0) {
            stalled = stall().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let refused = client
        .post_json("/v1/append/lab?table=arrowt", &one_row)
        .await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.code(), "unavailable");
    assert!(refused.retry_after.is_some(), "{refused:?}");
    let message = refused.body["message"].as_str().unwrap();
    assert!(
        message.contains("server.max_in_flight_body_bytes"),
        "{message}"
    );
    let bulk = platform
        .send_ndjson(
            "POST",
            "/_bulk",
            &[json!({"index": {"_index": "logs"}}), json!({"msg": "x"})],
        )
        .await;
    assert_eq!(bulk.status, 503, "{bulk:?}");
    assert!(bulk.retry_after.is_some(), "{bulk:?}");
    // Requests without a body are not refused.
    assert_eq!(client.get("/v1/databases").await.status, 200);
    assert_eq!(
        platform
            .send("GET", "/_cat/indices?format=json", None)
            .await
            .status,
        200
    );
    // The stalled request ends (its client gives up): its share comes back.
    drop(stalled);
    let taken = common::eventually(10, || {
        let client = client.clone();
        let one_row = one_row.clone();
        async move {
            client
                .post_json("/v1/append/lab?table=arrowt", &one_row)
                .await
                .status
                == 200
        }
    })
    .await;
    assert!(taken, "the budget did not come back");
    assert_eq!(count(&client).await, 1, "a refused body appended rows");
    still_serving(&server, &client).await;
}
