//! Metrics text and remote write, SQL upserts, deletes by query.

use super::*;

/// A writer of metrics text to `crash-metrics`: each request ten samples of the series of
/// `writer="<name>"`, each at a time of its own, the key it is found by.
async fn metrics_text(platform: Signed, name: String, start_ms: i64, books: Books) {
    let headers = [("content-type", "text/plain; version=0.0.4")];
    for n in 0i64.. {
        let mut body = String::from("# TYPE crash_total counter\n");
        let mut effects = Effects::new();
        for i in 0..10 {
            let (at, v) = (start_ms + n * 10 + i, n * 10 + i);
            body.push_str(&format!("crash_total{{writer=\"{name}\"}} {v} {at}\n"));
            effects.push((format!("{name}@{at}"), Some(v)));
        }
        let sent = try_signed(
            &platform,
            "POST",
            "/crash-metrics/metrics",
            &headers,
            body.into_bytes(),
        )
        .await;
        if book(&books, "metrics text", effects, sent, |a| {
            a.body["indexed"] == 10
        })
        .is_none()
        {
            return;
        }
    }
}

/// A Prometheus remote-write writer to `crash-metrics`, keyed as [`metrics_text`]'s.
async fn remote_write(platform: Signed, name: String, start_ms: i64, books: Books) {
    let headers = [
        ("content-type", "application/x-protobuf"),
        ("content-encoding", "snappy"),
        ("x-prometheus-remote-write-version", "0.1.0"),
    ];
    let labels = vec![
        ("__name__".to_owned(), "crash_total".to_owned()),
        ("writer".to_owned(), name.clone()),
    ];
    for n in 0i64.. {
        let samples: Vec<(i64, f64)> = (0..10)
            .map(|i| (start_ms + n * 10 + i, (n * 10 + i) as f64))
            .collect();
        let effects = samples
            .iter()
            .map(|(at, v)| (format!("{name}@{at}"), Some(*v as i64)))
            .collect();
        let body = strata::remote_write::encode(&[(labels.clone(), samples)]);
        let path = "/api/v1/write?index=crash-metrics";
        let sent = try_signed(&platform, "POST", path, &headers, body).await;
        if book(&books, "remote write", effects, sent, |a| a.status == 204).is_none() {
            return;
        }
    }
}

/// A SQL writer of `upserts`: each statement inserts three records and, in the same statement,
/// sets `v` of one of the statement before (`ON CONFLICT (_id) DO UPDATE`).
async fn upserts(platform: Signed, name: String, books: Books) {
    let id = |n: i64, i: i64| format!("s-{name}n{n}-{i}");
    for n in 0i64.. {
        let mut effects: Effects = (0..3).map(|i| (id(n, i), Some(n * 10 + i))).collect();
        if n > 0 {
            effects.push((id(n - 1, 0), Some(REPLACED + n)));
        }
        let values: Vec<String> = effects
            .iter()
            .map(|(id, v)| format!("('{id}', {})", v.unwrap()))
            .collect();
        let statement = format!(
            "INSERT INTO upserts (_id, v) VALUES {} ON CONFLICT (_id) DO UPDATE SET v = EXCLUDED.v",
            values.join(", ")
        );
        let rows = effects.len();
        let sent = try_json(&platform, "POST", "/sql", &json!({ "query": statement })).await;
        if book(&books, "sql upsert", effects, sent, |a| {
            a.body["rows_affected"] == rows
        })
        .is_none()
        {
            return;
        }
    }
}

/// A writer of `purged`: at each step n, a bulk of six records of `batch` n, then a delete by
/// query of batch n - 1.
async fn deletes_by_query(platform: Signed, name: String, books: Books) {
    let batch = |n: i64| format!("{name}n{n}");
    let ids = |n: i64| {
        let name = &name;
        (0..6).map(move |i| (format!("q-{name}n{n}-{i}"), n * 10 + i))
    };
    for n in 0i64.. {
        let lines: Vec<Value> = ids(n)
            .flat_map(|(id, v)| {
                [
                    json!({"index": {"_id": id}}),
                    json!({"batch": batch(n), "v": v}),
                ]
            })
            .collect();
        let effects = ids(n).map(|(id, v)| (id, Some(v))).collect();
        let sent = try_bulk(&platform, "purged", &lines).await;
        if book(&books, "bulk to purge", effects, sent, bulk_ok).is_none() {
            return;
        }
        if n == 0 {
            continue;
        }
        let query = json!({"query": {"term": {"batch": batch(n - 1)}}});
        let sent = try_json(&platform, "POST", "/purged/_delete_by_query", &query).await;
        let effects = ids(n - 1).map(|(id, _)| (id, None)).collect();
        if book(&books, "delete by query", effects, sent, |a| {
            a.body["deleted"] == 6
        })
        .is_none()
        {
            return;
        }
    }
}

/// Every sample of `crash-metrics` (as `<writer>@<ms>`) and every record of `upserts` and
/// `purged`.
async fn samples_and_records(platform: &Signed) -> Found {
    let mut found = Found::new();
    for query in [
        "SELECT concat(writer, '@', CAST(\"@timestamp\" AS BIGINT)), value FROM \"crash-metrics\"",
        "SELECT _id, v FROM upserts",
        "SELECT _id, v FROM purged",
    ] {
        tally_sql(&mut found, platform, query).await;
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_sql_upserts_and_deletes_by_query_survive_kill_9() {
    let (_dir, mut server, root) = start(&ARGS);
    let platform = Signed::new(&server, &root);
    dataset(&platform, "upserts", json!({"v": {"type": "long"}})).await;
    let properties = json!({"batch": {"type": "keyword"}, "v": {"type": "long"}});
    dataset(&platform, "purged", properties).await;
    let made = platform.send("PUT", "/crash-metrics", None).await;
    assert_eq!(made.status, 200, "{made:?}");
    let start_ms = chrono::Utc::now().timestamp_millis() - 3_600_000;
    let books = Books::default();
    for round in 0..ROUNDS {
        let platform = Signed::new(&server, &root);
        let mut writers = Vec::new();
        for c in 0..2 {
            let name = format!("r{round}c{c}");
            let writer = metrics_text(platform.clone(), name.clone(), start_ms, books.clone());
            writers.push(tokio::spawn(writer));
            writers.push(tokio::spawn(upserts(
                platform.clone(),
                name.clone(),
                books.clone(),
            )));
            let writer = deletes_by_query(platform.clone(), name, books.clone());
            writers.push(tokio::spawn(writer));
        }
        let name = format!("r{round}w");
        let writer = remote_write(platform.clone(), name, start_ms, books.clone());
        writers.push(tokio::spawn(writer));
        tokio::time::sleep(WRITING).await;
        crash(&mut server, &ARGS, writers).await;
        let found = samples_and_records(&Signed::new(&server, &root)).await;
        books.lock().unwrap().check(&found);
    }
    let kinds = [
        "metrics text",
        "remote write",
        "sql upsert",
        "bulk to purge",
        "delete by query",
    ];
    books.lock().unwrap().made_progress(&kinds, 3);
}
