//! The datasets of the assistant's question set: `logs` and `sales` as bulk lines, the metrics
//! of `telemetry` as Prometheus text, and `orders`, a PostgreSQL table that the question set
//! reaches through a connection (`shop:orders`). Times are relative to now, so that windows
//! ("in the last hour") have records; shared by tests/assistant_questions.rs and
//! benches/assistant.rs.

use serde_json::{Value, json};

/// The bulk lines of `logs` and `sales`, and the text of the `telemetry` samples.
pub fn lines() -> (Vec<Value>, String) {
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

/// The statements that make the PostgreSQL table `orders` (in a database of the caller's).
pub fn orders_sql() -> String {
    let now = chrono::Utc::now();
    let customers = ["ann", "bob", "cid", "dee", "eve"];
    let statuses = ["paid", "paid", "pending", "refunded"];
    let countries = ["france", "germany", "spain"];
    let mut rows = Vec::new();
    for i in 0..90i64 {
        let placed = (now - chrono::TimeDelta::hours(i * 5)).to_rfc3339();
        let items = 1 + (i * 5) % 7;
        let revenue = items as f64 * [12.5, 30.0, 7.25][(i % 3) as usize];
        rows.push(format!(
            "({i}, '{placed}', '{}', '{}', '{}', {items}, {revenue})",
            customers[((i / 2) % 5) as usize],
            statuses[(i % 4) as usize],
            countries[((i / 3) % 3) as usize],
        ));
    }
    format!(
        "CREATE TABLE orders (id integer PRIMARY KEY, placed_at timestamptz NOT NULL, \
         customer text, status text, country text, items integer, revenue double precision);
         INSERT INTO orders VALUES {};",
        rows.join(", ")
    )
}
