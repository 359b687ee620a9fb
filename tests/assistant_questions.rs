//! The assistant's question set (tests/assistant/questions.json): questions over seeded datasets
//! (logs, sales, telemetry: metrics), each with the query whose result is the right answer, written by
//! hand and run directly. Every question is asked in a thread over HTTP (a follow-up in the
//! thread of the question before it), and its answer's result compared with the expected
//! query's. An answer whose result differs is a wrong number stated; a refusal or an error is
//! no answer. Prints the accuracy; the target is 90% answered right and no wrong number.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Server, Signed, root_user};
use serde_json::{Value, json};

fn seed_lines() -> (Vec<Value>, String) {
    let now = chrono::Utc::now();
    let mut lines = Vec::new();
    let hosts = ["a", "b", "c", "web-1"];
    let services = ["api", "db", "web"];
    let users = ["alice", "bob", "carol"];
    for i in 0..200i64 {
        let level = match i % 7 {
            0 => "error",
            1 | 2 => "warn",
            _ => "info",
        };
        let (status, message) = match level {
            "error" if i % 2 == 0 => (500, "disk full on /var"),
            "error" => (503, "connection timeout talking to db"),
            "warn" => (404, "cache miss"),
            _ => (200, "request served"),
        };
        lines.push(json!({"index": {"_index": "logs", "_id": format!("l{i}")}}));
        lines.push(json!({
            "@timestamp": (now - chrono::TimeDelta::minutes(i * 17)).to_rfc3339(),
            "host": hosts[(i % 4) as usize],
            "level": level,
            "service": services[(i % 3) as usize],
            "user": users[((i / 3) % 3) as usize],
            "status": status,
            "latency_ms": 20 + (i * 37) % 480,
            "message": message,
        }));
    }
    let regions = ["north", "south", "east", "west"];
    let products = [
        ("widget", "tools", 9.5),
        ("gadget", "toys", 24.0),
        ("gizmo", "tools", 3.25),
        ("doohickey", "toys", 55.0),
    ];
    let customers = ["acme corp", "globex", "initech", "umbrella", "hooli"];
    for j in 0..120i64 {
        let (product, category, price) = products[((j / 2) % 4) as usize];
        let quantity = 1 + (j * 7) % 9;
        let channel = ["online", "store"][((j / 4) % 2) as usize];
        lines.push(json!({"index": {"_index": "sales", "_id": format!("s{j}")}}));
        lines.push(json!({
            "@timestamp": (now - chrono::TimeDelta::hours(j * 6)).to_rfc3339(),
            "region": regions[(j % 4) as usize],
            "product": product,
            "category": category,
            "customer": customers[(j % 5) as usize],
            "channel": channel,
            "quantity": quantity,
            "price": price,
            "amount": quantity as f64 * price,
        }));
    }
    // Metrics: three samples of each series, the newest a minute old.
    let mut text = String::new();
    for (k, ago) in [10i64, 4, 1].iter().enumerate() {
        let at = (now - chrono::TimeDelta::minutes(*ago)).timestamp_millis();
        let k = k as i64 + 1;
        for (job, instance, method, base) in [
            ("api", "a:9090", "get", 100),
            ("api", "a:9090", "post", 40),
            ("web", "b:9090", "get", 300),
            ("web", "b:9090", "post", 10),
        ] {
            text.push_str(&format!(
                "http_requests_total{{job=\"{job}\",instance=\"{instance}\",method=\"{method}\"}} {} {at}\n",
                base * k * k
            ));
        }
        for (instance, cpu) in [("a:9090", 0.25), ("b:9090", 0.75)] {
            text.push_str(&format!(
                "cpu_usage{{instance=\"{instance}\"}} {} {at}\n",
                cpu + k as f64 / 100.0
            ));
        }
        for (job, instance, bytes) in [("api", "a:9090", 1000), ("web", "b:9090", 4000)] {
            text.push_str(&format!(
                "memory_bytes{{job=\"{job}\",instance=\"{instance}\"}} {} {at}\n",
                bytes * k
            ));
        }
    }
    (lines, text)
}

/// Whether two result cells are the same answer (numbers to a relative `tolerance`).
fn same_cell(a: &Value, b: &Value, tolerance: f64) -> bool {
    let number = |v: &Value| match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse::<f64>().ok(),
        _ => None,
    };
    match (a, b) {
        (Value::String(x), Value::String(y)) if x == y => true,
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => (x - y).abs() <= tolerance * x.abs().max(y.abs()).max(1e-12),
            _ => a == b,
        },
    }
}

fn same_rows(got: &[Value], want: &[Value], ordered: bool) -> bool {
    let mut got: Vec<Value> = got.to_vec();
    let mut want: Vec<Value> = want.to_vec();
    if !ordered {
        got.sort_by_key(|r| r.to_string());
        want.sort_by_key(|r| r.to_string());
    }
    got.len() == want.len()
        && got.iter().zip(&want).all(|(g, w)| {
            let (g, w) = (g.as_array().unwrap(), w.as_array().unwrap());
            g.len() == w.len() && g.iter().zip(w).all(|(a, b)| same_cell(a, b, 1e-9))
        })
}

/// A PromQL answer's series as (labels, value) pairs, sorted.
fn series(data: &Value) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = data["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| (s["metric"].to_string(), s["value"][1].clone()))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Right,
    Refused(String),
    Wrong(String),
}

async fn expected_sql(root: &Signed, statement: &str) -> Value {
    let answer = root
        .send("POST", "/sql", Some(&json!({"query": statement})))
        .await;
    assert_eq!(
        answer.status, 200,
        "the expected query {statement}: {answer:?}"
    );
    answer.body["rows"].clone()
}

async fn judge(root: &Signed, case: &Value, content: &Value) -> Outcome {
    let refused = content.get("query").is_none();
    if case["refuse"] == true {
        return match refused {
            true => Outcome::Right,
            false => Outcome::Wrong(format!("answered {}", content["query"]["text"])),
        };
    }
    if refused {
        return Outcome::Refused(content["text"].as_str().unwrap_or_default().to_owned());
    }
    if let Some(statement) = case["sql"].as_str() {
        let want = expected_sql(root, statement).await;
        let got = &content["result"]["rows"];
        let ordered = case["ordered"] == true;
        return match same_rows(
            got.as_array().unwrap_or(&Vec::new()),
            want.as_array().unwrap(),
            ordered,
        ) {
            true => Outcome::Right,
            false => Outcome::Wrong(format!(
                "{} gave {got}, expected {want} ({statement})",
                content["query"]["text"]
            )),
        };
    }
    let expr = case["promql"].as_str().unwrap();
    let path = format!(
        "/promql/query?query={}&index=telemetry",
        strata::sigv4::encode(expr)
    );
    let want = root.send("GET", &path, None).await;
    assert_eq!(want.status, 200, "the expected query {expr}: {want:?}");
    let (got, want) = (series(&content["result"]), series(&want.body));
    let same = got.len() == want.len()
        && got
            .iter()
            .zip(&want)
            .all(|(g, w)| g.0 == w.0 && same_cell(&g.1, &w.1, 1e-3));
    match same && !want.is_empty() {
        true => Outcome::Right,
        false => Outcome::Wrong(format!(
            "{} gave {got:?}, expected {want:?} ({expr})",
            content["query"]["text"]
        )),
    }
}

/// The answer to the newest question of a thread holding `asked` questions.
async fn answer_to(root: &Signed, thread: &str, asked: usize) -> Value {
    let path = format!("/assistant/threads/{thread}/messages");
    for _ in 0..400 {
        let messages = root.send("GET", &path, None).await.body;
        let messages = messages.as_array().cloned().unwrap_or_default();
        if messages.len() >= asked * 2 {
            return messages.last().unwrap()["content"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("no answer in thread {thread}");
}

#[tokio::test]
async fn the_question_set_is_answered_right_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = Signed::new(&server, &root_user(dir.path(), "acme"));
    let (lines, metrics) = seed_lines();
    let written = root.send_ndjson("POST", "/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let samples = root
        .send_text("POST", "/telemetry/metrics", "text/plain", &metrics)
        .await;
    assert_eq!(samples.status, 200, "{samples:?}");

    let cases: Vec<Value> = serde_json::from_str(include_str!("assistant/questions.json")).unwrap();
    let mut thread = String::new();
    let mut asked = 0;
    let (mut right, mut refused, mut wrong) = (Vec::new(), Vec::new(), Vec::new());
    for case in &cases {
        let question = case["question"].as_str().unwrap();
        if case["follows"] != true {
            let created = root
                .send(
                    "POST",
                    "/assistant/threads",
                    Some(&json!({"name": question, "index_name": case["dataset"]})),
                )
                .await;
            assert_eq!(created.status, 201, "{created:?}");
            thread = created.body["id"].as_str().unwrap().to_owned();
            asked = 0;
        }
        let message =
            json!({"thread_id": thread, "role": "user", "content": {"user_query": question}});
        let posted = root
            .send("POST", "/assistant/message", Some(&message))
            .await;
        assert_eq!(posted.status, 200, "{posted:?}");
        asked += 1;
        let content = answer_to(&root, &thread, asked).await;
        match judge(&root, case, &content).await {
            Outcome::Right => right.push(question),
            Outcome::Refused(why) => refused.push(format!("{question}: {why}")),
            Outcome::Wrong(why) => wrong.push(format!("{question}: {why}")),
        }
    }
    let total = cases.len();
    println!(
        "question set: {} right, {} refused, {} wrong of {total}: accuracy {:.1}%",
        right.len(),
        refused.len(),
        wrong.len(),
        100.0 * right.len() as f64 / total as f64
    );
    for line in &refused {
        println!("refused: {line}");
    }
    for line in &wrong {
        println!("WRONG: {line}");
    }
    assert!(wrong.is_empty(), "wrong numbers stated: {wrong:#?}");
    assert!(
        right.len() * 10 >= total * 9,
        "{} of {total} right, under 90%",
        right.len()
    );
}
