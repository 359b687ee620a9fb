//! The assistant's question set (tests/assistant/questions.json): questions over seeded datasets
//! (logs, sales, telemetry: metrics) and a PostgreSQL table reached through a connection
//! (`shop:orders`, queried in place; the test makes its own database), each with the query whose result is the right answer, written by
//! hand and run directly. Every question is asked in a thread over HTTP (a follow-up in the
//! thread of the question before it), and its answer's result compared with the expected
//! query's. An answer whose result differs is a wrong number stated; a refusal or an error is
//! no answer. Prints the accuracy; the target is 90% answered right and no wrong number.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "assistant/seed.rs"]
mod seed;

use common::{Server, Signed, root_user};
use serde_json::{Value, json};

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

/// The rows of the expected statement: over the account's datasets, or in place over
/// `connection`'s.
async fn expected_sql(root: &Signed, statement: &str, connection: Option<&str>) -> Value {
    let path = match connection {
        Some(connection) => format!("/sql?connection_id={connection}"),
        None => "/sql".to_owned(),
    };
    let answer = root
        .send("POST", &path, Some(&json!({"query": statement})))
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
    if content["query"].get("connection") != case.get("connection") {
        return Outcome::Wrong(format!(
            "{} ran over connection {}, not {}",
            content["query"]["text"], content["query"]["connection"], case["connection"]
        ));
    }
    if let Some(statement) = case["sql"].as_str() {
        let want = expected_sql(root, statement, case["connection"].as_str()).await;
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
    let (lines, metrics) = seed::lines();
    let written = root.send_ndjson("POST", "/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let samples = root
        .send_text("POST", "/telemetry/metrics", "text/plain", &metrics)
        .await;
    assert_eq!(samples.status, 200, "{samples:?}");
    let pg = common::PgDatabase::new("questions", &seed::orders_sql());
    let connected = root
        .send(
            "POST",
            "/source/postgresql",
            Some(
                &json!({"connector_id": "postgresql", "name": "shop", "config": {
                    "host": "127.0.0.1", "port": 5432, "username": "postgres",
                    "database": pg.name,
                }}),
            ),
        )
        .await;
    assert_eq!(connected.status, 201, "{connected:?}");
    // A thread about the connection's table shows the table's fields as the caller sees them.
    let thread = root
        .send(
            "POST",
            "/assistant/threads",
            Some(&json!({"name": "orders", "index_name": "shop:orders"})),
        )
        .await;
    assert_eq!(thread.status, 201, "{thread:?}");
    let got = root
        .send(
            "GET",
            &format!("/assistant/threads/{}", thread.body["id"].as_str().unwrap()),
            None,
        )
        .await;
    let schema: Value = serde_json::from_str(got.body["schema"].as_str().unwrap()).unwrap();
    assert!(
        schema
            .as_array()
            .unwrap()
            .contains(&json!({"name": "placed_at", "type": "date"}))
            && schema
                .as_array()
                .unwrap()
                .contains(&json!({"name": "customer", "type": "keyword"})),
        "{schema}"
    );

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
