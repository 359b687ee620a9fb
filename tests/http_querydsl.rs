//! The Query DSL over HTTP: GET|POST /{dataset}/_search, GET /{dataset}/querydsl and
//! /{dataset}/_count, over records written by NDJSON bulk, some in segments (written before a
//! restart) and some in the memtable.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use common::{Server, Signed, root_user};
use serde_json::{Value, json};

/// Twelve http-log records; `_id` is "r<i>".
fn records(now_ms: i64) -> Vec<Value> {
    let rows = [
        (
            "GET",
            "/index.html",
            200,
            5120,
            "served from cache",
            Some("ann"),
        ),
        ("GET", "/img/logo.png", 200, 20480, "served", Some("bob")),
        (
            "POST",
            "/api/login",
            401,
            310,
            "bad password for user",
            Some("cid"),
        ),
        (
            "GET",
            "/api/items",
            500,
            120,
            "disk full while writing the cache",
            None,
        ),
        ("DELETE", "/api/items/7", 204, 0, "deleted", Some("ann")),
        ("GET", "/missing", 404, 230, "not found", None),
        (
            "GET",
            "/api/items",
            200,
            9000,
            "served from cache",
            Some("dee"),
        ),
        (
            "PUT",
            "/api/items/8",
            500,
            150,
            "timeout talking to the disk",
            Some("bob"),
        ),
        ("GET", "/img/banner.png", 304, 0, "not modified", None),
        (
            "GET",
            "/api/search",
            200,
            7000,
            "full text search served",
            Some("ann"),
        ),
        ("POST", "/api/items", 201, 800, "created", Some("eve")),
        ("GET", "/old", 404, 200, "not found", Some("bob")),
    ];
    let mut lines = Vec::new();
    for (i, (method, path, status, bytes, message, user)) in rows.into_iter().enumerate() {
        lines.push(json!({"index": {"_id": format!("r{i}")}}));
        // One record an hour, the newest now.
        let mut record = json!({
            "@timestamp": now_ms - (11 - i as i64) * 3_600_000,
            "method": method,
            "path": path,
            "status": status,
            "bytes": bytes,
            "message": message,
        });
        if let Some(user) = user {
            record["user"] = json!({"name": user});
        }
        lines.push(record);
    }
    lines
}

/// The ids of a search's hits.
async fn ids(client: &Signed, body: Value) -> BTreeSet<String> {
    sorted(client, body)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

/// How many segment document indexes there are under `dir`.
fn docs_dirs(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| {
            let path = entry.path();
            match path.file_name().and_then(|n| n.to_str()) {
                Some("docs") => 1,
                _ if path.is_dir() => docs_dirs(&path),
                _ => 0,
            }
        })
        .sum()
}

/// The files under `dir` whose names end in `.{extension}`, in a `docs` directory (a
/// segment's document index) at any depth, but not in an index being built.
fn docs_files(dir: &std::path::Path, extension: &str) -> usize {
    if dir.extension().is_some_and(|e| e == "building") {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let in_docs = dir.file_name().is_some_and(|n| n == "docs");
    entries
        .flatten()
        .map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                docs_files(&path, extension)
            } else {
                let named = path.extension().is_some_and(|e| e == extension);
                usize::from(in_docs && named)
            }
        })
        .sum()
}

/// Writes `first` to `dataset` through `_bulk` and waits until a segment holds them (the
/// server's `tables.flush_rows` is their count), then writes `second`, which stays in the
/// memtable.
async fn in_a_segment_then_the_memtable(
    client: &Signed,
    dir: &std::path::Path,
    dataset: &str,
    first: &[Value],
    second: &[Value],
) {
    let path = format!("/{dataset}/_bulk");
    let written = client.send_ndjson("POST", &path, first).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let indexes = dir.join("indexes");
    let flushed = || {
        let indexes = indexes.clone();
        async move { docs_dirs(&indexes) == 1 }
    };
    assert!(
        common::eventually(10, flushed).await,
        "no segment was flushed"
    );
    let written = client.send_ndjson("POST", &path, second).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
}

/// A server with the twelve records in dataset `logs`, and a client of its root user.
async fn with_logs() -> (tempfile::TempDir, Server, Signed) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let now = chrono::Utc::now().timestamp_millis();
    let written = client
        .send_ndjson("POST", "/logs/json", &records(now))
        .await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    (dir, server, client)
}

fn set(ids: &[usize]) -> BTreeSet<String> {
    ids.iter().map(|i| format!("r{i}")).collect()
}

#[tokio::test]
async fn the_query_dsl_finds_records_in_segments_and_the_memtable() {
    let dir = tempfile::tempdir().unwrap();
    let flush = ["--set", "tables.flush_rows=7"];
    let server = Server::start(dir.path(), &flush);
    let credentials = root_user(dir.path(), "acme");
    let client = Signed::new(&server, &credentials);
    let now = chrono::Utc::now().timestamp_millis();
    let lines = records(now);
    // Seven records fill the memtable and go to a segment, with its document index; the other
    // five stay in the memtable.
    let written = client.send_ndjson("POST", "/logs/json", &lines[..14]).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let indexes = dir.path().join("indexes");
    let segment_indexed = || {
        let indexes = indexes.clone();
        async move { docs_dirs(&indexes) == 1 }
    };
    assert!(
        common::eventually(10, segment_indexed).await,
        "no segment was flushed"
    );
    let written = client.send_ndjson("POST", "/logs/json", &lines[14..]).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    assert_eq!(docs_dirs(&indexes), 1);

    let all = client.send("GET", "/logs/_search", None).await;
    assert_eq!(all.status, 200, "{all:?}");
    assert_eq!(
        all.body["hits"]["total"],
        json!({"value": 12, "relation": "eq"})
    );
    assert_eq!(all.body["hits"]["hits"].as_array().unwrap().len(), 10);
    assert_eq!(all.body["timed_out"], false);
    let first = &all.body["hits"]["hits"][0];
    assert_eq!(first["_index"], "logs");
    assert!(
        first["_source"]["@timestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );

    let cases: Vec<(Value, Vec<usize>)> = vec![
        (json!({"term": {"method": "POST"}}), vec![2, 10]),
        (
            json!({"term": {"method.keyword": {"value": "DELETE"}}}),
            vec![4],
        ),
        (json!({"term": {"status": 404}}), vec![5, 11]),
        (json!({"term": {"status": "404"}}), vec![5, 11]),
        (json!({"terms": {"status": [401, 500]}}), vec![2, 3, 7]),
        (json!({"range": {"bytes": {"gte": 7000}}}), vec![1, 6, 9]),
        (
            json!({"range": {"status": {"gt": 200, "lt": 400}}}),
            vec![4, 8, 10],
        ),
        (
            json!({"range": {"@timestamp": {"gte": "now-150m"}}}),
            vec![9, 10, 11],
        ),
        (
            json!({"range": {"@timestamp": {"gt": "now-1h-5m", "lt": "now-1h+5m"}}}),
            vec![10],
        ),
        (
            json!({"range": {"@timestamp": {"gte": "now-1h/h", "lte": "now"}}}),
            vec![10, 11],
        ),
        (
            json!({"exists": {"field": "user.name"}}),
            vec![0, 1, 2, 4, 6, 7, 9, 10, 11],
        ),
        (json!({"prefix": {"path": "/img/"}}), vec![1, 8]),
        (
            json!({"wildcard": {"path": {"value": "/api/items*"}}}),
            vec![3, 4, 6, 7, 10],
        ),
        (json!({"wildcard": {"path": "/?ld"}}), vec![11]),
        (json!({"match": {"message": "cache"}}), vec![0, 3, 6]),
        (
            json!({"match": {"message": {"query": "disk cache", "operator": "and"}}}),
            vec![3],
        ),
        (
            json!({"match": {"message": {"query": "disk cache timeout", "minimum_should_match": 2}}}),
            vec![3, 7],
        ),
        (
            json!({"match_phrase": {"message": "from cache"}}),
            vec![0, 6],
        ),
        (json!({"match_phrase": {"message": "cache from"}}), vec![]),
        (
            json!({"query_string": {"query": "status:404 AND method:GET"}}),
            vec![5, 11],
        ),
        (
            json!({"query_string": {"query": "timeout OR password"}}),
            vec![2, 7],
        ),
        (
            json!({"query_string": {"query": "user.name:ann -method:DELETE"}}),
            vec![0, 9],
        ),
        (
            json!({"query_string": {"query": "bytes:[7000 TO 30000]"}}),
            vec![1, 6, 9],
        ),
        (
            json!({"query_string": {"query": "status:>400"}}),
            vec![2, 3, 5, 7, 11],
        ),
        (
            json!({"query_string": {"query": "\"from cache\""}}),
            vec![0, 6],
        ),
        (
            json!({"query_string": {"query": "served", "default_field": "path"}}),
            vec![],
        ),
        (
            json!({"bool": {
                "must": [{"match": {"message": "served"}}],
                "filter": [{"term": {"method": "GET"}}],
                "must_not": [{"term": {"user.name": "bob"}}],
            }}),
            vec![0, 6, 9],
        ),
        (
            json!({"bool": {
                "should": [
                    {"term": {"status": 500}},
                    {"term": {"user.name": "bob"}},
                    {"range": {"bytes": {"lt": 200}}},
                ],
                "minimum_should_match": 2,
            }}),
            vec![3, 7],
        ),
        (
            json!({"bool": {"must_not": {"exists": {"field": "user"}}}}),
            vec![3, 5, 8],
        ),
        (json!({"match_none": {}}), vec![]),
        (
            json!({"constant_score": {"filter": {"term": {"method": "POST"}}}}),
            vec![2, 10],
        ),
        (json!({"ids": {"values": ["r1", "r4"]}}), vec![1, 4]),
        (
            json!({"multi_match": {"query": "cache", "fields": ["message", "path"]}}),
            vec![0, 3, 6],
        ),
        (
            json!({"multi_match": {"query": "items", "fields": ["message", "path^2"], "type": "most_fields"}}),
            vec![3, 4, 6, 7, 10],
        ),
        (
            json!({"multi_match": {"query": "from cache", "fields": ["message"], "type": "phrase"}}),
            vec![0, 6],
        ),
        (json!({"multi_match": {"query": "bob"}}), vec![1, 7, 11]),
    ];
    for (query, expected) in cases {
        let body = json!({"query": query, "size": 100});
        assert_eq!(ids(&client, body).await, set(&expected), "{query}");
    }

    // The same through /querydsl, and counts.
    let body = json!({"query": {"term": {"method": "GET"}}});
    let via = client.send("GET", "/logs/querydsl", Some(&body)).await;
    assert_eq!(via.body["hits"]["total"]["value"], 8, "{via:?}");
    let counted = client.send("POST", "/logs/_count", Some(&body)).await;
    assert_eq!(counted.body["count"], 8, "{counted:?}");
    assert_eq!(
        client.send("GET", "/logs/_count", None).await.body["count"],
        12
    );
}

#[tokio::test]
async fn paging_scores_source_filtering_and_totals() {
    let (_dir, _server, client) = with_logs().await;

    // Relevance: hits come best first, and max_score is the first one's.
    let answer = client
        .send(
            "POST",
            "/logs/_search",
            Some(&json!({"query": {"match": {"message": "disk"}}})),
        )
        .await;
    let hits = answer.body["hits"]["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 2);
    let scores: Vec<f64> = hits.iter().map(|h| h["_score"].as_f64().unwrap()).collect();
    assert!(scores[0] >= scores[1] && scores[1] > 0.0, "{scores:?}");
    assert_eq!(answer.body["hits"]["max_score"].as_f64(), Some(scores[0]));

    // from/size pages through every record once.
    let mut seen = BTreeSet::new();
    for from in [0, 5, 10] {
        let page = ids(&client, json!({"from": from, "size": 5})).await;
        assert!(page.len() == 5 || from == 10, "{page:?}");
        assert!(seen.is_disjoint(&page));
        seen.extend(page);
    }
    assert_eq!(seen.len(), 12);

    // _source in its three forms.
    let source = |filter: Value| {
        let client = client.clone();
        async move {
            let body = json!({"query": {"term": {"_id": "r0"}}, "_source": filter});
            let answer = client.send("POST", "/logs/_search", Some(&body)).await;
            answer.body["hits"]["hits"][0].get("_source").cloned()
        }
    };
    assert_eq!(source(json!(false)).await, None);
    assert_eq!(
        source(json!(["stat*", "user"])).await,
        Some(json!({"status": 200, "user": {"name": "ann"}}))
    );
    assert_eq!(
        source(json!({"includes": ["*"], "excludes": ["message", "@timestamp", "path", "bytes"]}))
            .await,
        Some(json!({"method": "GET", "status": 200, "user": {"name": "ann"}}))
    );

    // terminate_after: only the first matches in write order count.
    let body = json!({"terminate_after": 4, "query": {"term": {"method": "GET"}}});
    let answer = client.send("POST", "/logs/_search", Some(&body)).await;
    assert_eq!(answer.body["terminated_early"], true, "{answer:?}");
    assert_eq!(answer.body["hits"]["total"]["value"], 4);
    let found: BTreeSet<&str> = answer.body["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap())
        .collect();
    assert_eq!(found, BTreeSet::from(["r0", "r1", "r3", "r5"]));

    // track_total_hits.
    let totals = |value: Value| {
        let client = client.clone();
        async move {
            let body = json!({"track_total_hits": value, "size": 0});
            client.send("POST", "/logs/_search", Some(&body)).await.body["hits"]
                .get("total")
                .cloned()
        }
    };
    assert_eq!(
        totals(json!(5)).await,
        Some(json!({"value": 5, "relation": "gte"}))
    );
    assert_eq!(
        totals(json!(true)).await,
        Some(json!({"value": 12, "relation": "eq"}))
    );
    assert_eq!(totals(json!(false)).await, None);

    // timeout: within it a search is whole; past it, no further index is searched and the
    // answer says so, with what was found before (here nothing: 1ns has passed at once).
    let body = json!({"timeout": "1m", "query": {"match_all": {}}});
    let answer = client.send("POST", "/logs/_search", Some(&body)).await;
    assert_eq!(answer.body["timed_out"], false, "{answer:?}");
    assert_eq!(answer.body["hits"]["total"]["value"], 12);
    for (path, body) in [
        ("/logs/_search", Some(json!({"timeout": "1nanos"}))),
        ("/logs/_search?timeout=1nanos", None),
    ] {
        let answer = client.send("POST", path, body.as_ref()).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(answer.body["timed_out"], true, "{answer:?}");
        assert_eq!(answer.body["hits"]["total"]["value"], 0, "{answer:?}");
    }
    for timeout in ["10 parsecs", "-5s", "soon"] {
        let body = json!({"timeout": timeout});
        let answer = client.send("POST", "/logs/_search", Some(&body)).await;
        assert_eq!(answer.status, 400, "{timeout}: {answer:?}");
        let message = answer.body["message"].as_str().unwrap();
        assert!(
            message.contains("failed to parse setting [timeout]"),
            "{message}"
        );
    }

    // A deleted record is found no more.
    let deleted = client
        .send_ndjson("POST", "/logs/json", &[json!({"delete": {"_id": "r5"}})])
        .await;
    assert_eq!(deleted.body["errors"], false, "{deleted:?}");
    assert_eq!(
        ids(&client, json!({"query": {"term": {"status": 404}}})).await,
        set(&[11])
    );
}

#[tokio::test]
async fn bad_searches_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let written = client
        .send_ndjson(
            "POST",
            "/logs/json",
            &[json!({"index": {}}), json!({"a": 1})],
        )
        .await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    for (body, needle) in [
        (
            json!({"query": {"fuzzy_thing": {}}}),
            "unknown query [fuzzy_thing]",
        ),
        (
            json!({"query": {"term": {"a": 1, "b": 2}}}),
            "exactly one field",
        ),
        (
            json!({"from": 9995, "size": 10}),
            "Result window is too large",
        ),
        (
            json!({"size": -1}),
            "[size] parameter cannot be negative, found [-1]",
        ),
        (json!({"profile": "yes"}), "[profile] must be a boolean"),
        (
            json!({"colour": 1}),
            "Unknown key for a search body [colour]",
        ),
        (
            json!({"terminate_after": "x"}),
            "[terminate_after] must be a non-negative integer",
        ),
        (
            json!({"aggs": {"a": {"nope": {}}}}),
            "unknown aggregation type [nope]",
        ),
        (
            json!({"query": {"query_string": {"query": "a:(b"}}}),
            "Failed to parse query",
        ),
    ] {
        let answer = client.send("POST", "/logs/_search", Some(&body)).await;
        assert_eq!(answer.status, 400, "{body}: {answer:?}");
        let message = answer.body["message"].as_str().unwrap();
        assert!(message.starts_with("search: "), "{message}");
        assert!(message.contains(needle), "{body}: {message}");
    }
    let missing = client.send("POST", "/nope/_search", None).await;
    assert_eq!(missing.status, 404, "{missing:?}");
    let not_json = client
        .send_text("POST", "/logs/_search", "application/json", "{")
        .await;
    assert_eq!(not_json.status, 400, "{not_json:?}");
}

#[tokio::test]
async fn msearch_answers_each_search_in_order_and_failures_stay_alone() {
    let (_dir, _server, client) = with_logs().await;

    let searches = [
        json!({"index": "logs"}),
        json!({"query": {"term": {"status": 404}}}),
        json!({"index": "logs", "preference": "_local"}),
        json!({"query": {"fuzzy_thing": {}}}),
        json!({"index": "nowhere"}),
        json!({}),
        json!({}),
        json!({"query": {"match": {"message": "cache"}}, "size": 1}),
    ];
    let answer = client
        .send_ndjson("POST", "/logs/_msearch", &searches)
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let responses = answer.body["responses"].as_array().unwrap();
    assert_eq!(responses.len(), 4);
    assert_eq!(responses[0]["status"], 200);
    assert_eq!(responses[0]["hits"]["total"]["value"], 2);
    assert_eq!(responses[1]["status"], 400);
    assert_eq!(responses[1]["error"]["type"], "parsing_exception");
    assert_eq!(
        responses[1]["error"]["reason"],
        "unknown query [fuzzy_thing]"
    );
    assert_eq!(responses[2]["status"], 404);
    assert_eq!(responses[2]["error"]["type"], "index_not_found_exception");
    // Without an index in its header, a search reads the path's dataset.
    assert_eq!(responses[3]["hits"]["total"]["value"], 3);
    assert_eq!(responses[3]["hits"]["hits"].as_array().unwrap().len(), 1);

    // On /_msearch, a header without an index searches every dataset.
    let answer = client
        .send_ndjson("POST", "/_msearch", &[json!({}), json!({})])
        .await;
    assert_eq!(
        answer.body["responses"][0]["hits"]["total"]["value"], 12,
        "{answer:?}"
    );
    // Lines that do not pair up refuse the request.
    let odd = client
        .send_ndjson("POST", "/_msearch", &[json!({"index": "logs"})])
        .await;
    assert_eq!(odd.status, 400, "{odd:?}");
}

/// The ids and sort values of a search's hits.
async fn sorted(client: &Signed, body: Value) -> Vec<(String, Value)> {
    let answer = client.send("POST", "/logs/_search", Some(&body)).await;
    assert_eq!(answer.status, 200, "{body}: {answer:?}");
    answer.body["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| (hit["_id"].as_str().unwrap().to_owned(), hit["sort"].clone()))
        .collect()
}

#[tokio::test]
async fn sort_in_both_forms_and_search_after_pages() {
    let (_dir, _server, client) = with_logs().await;

    // By a number, descending; the values come with each hit; no scores.
    let body = json!({"sort": [{"bytes": {"order": "desc"}}], "size": 3});
    let answer = client.send("POST", "/logs/_search", Some(&body)).await;
    let hits = answer.body["hits"]["hits"].as_array().unwrap();
    let got: Vec<(&str, &Value)> = hits
        .iter()
        .map(|h| (h["_id"].as_str().unwrap(), &h["sort"]))
        .collect();
    assert_eq!(
        got,
        [
            ("r1", &json!([20480])),
            ("r6", &json!([9000])),
            ("r9", &json!([7000]))
        ]
    );
    assert_eq!(hits[0]["_score"], Value::Null);
    assert_eq!(answer.body["hits"]["max_score"], Value::Null);

    // By a string, in the short form; then by two keys.
    let by_path = sorted(&client, json!({"sort": ["path"], "size": 2})).await;
    assert_eq!(
        by_path,
        [
            ("r3".to_owned(), json!(["/api/items"])),
            ("r6".to_owned(), json!(["/api/items"]))
        ]
    );
    let two = sorted(
        &client,
        json!({"sort": [{"status": "desc"}, {"bytes": "asc"}], "size": 3}),
    )
    .await;
    assert_eq!(
        two.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["r3", "r7", "r11"]
    );
    // Records without the field come last, or first with missing: _first.
    let last = sorted(&client, json!({"sort": [{"user.name": "asc"}], "size": 12})).await;
    assert_eq!(last[0], ("r0".to_owned(), json!(["ann"])));
    assert_eq!(last[11].1, json!([null]));
    let first = sorted(
        &client,
        json!({"sort": [{"user.name": {"order": "desc", "missing": "_first"}}], "size": 1}),
    )
    .await;
    assert_eq!(first[0].1, json!([null]));

    // search_after pages through everything by time, newest first.
    let mut seen = Vec::new();
    let mut after: Option<Value> = None;
    loop {
        let mut body = json!({"sort": [{"@timestamp": "desc"}], "size": 5});
        if let Some(after) = &after {
            body["search_after"] = after.clone();
        }
        let page = sorted(&client, body).await;
        if page.is_empty() {
            break;
        }
        after = Some(page.last().unwrap().1.clone());
        seen.extend(page.into_iter().map(|(id, _)| id));
    }
    let expected: Vec<String> = (0..12).rev().map(|i| format!("r{i}")).collect();
    assert_eq!(seen, expected);

    // By relevance then time: scores are there.
    let body = json!({"query": {"match": {"message": "served"}}, "sort": ["_score", {"@timestamp": "asc"}]});
    let answer = client.send("POST", "/logs/_search", Some(&body)).await;
    let hits = answer.body["hits"]["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 4, "{answer:?}");
    assert!(hits[0]["_score"].as_f64().unwrap() > 0.0);
    assert!(answer.body["hits"]["max_score"].as_f64().is_some());

    let wrong = json!({"sort": ["bytes"], "search_after": [1, 2]});
    let answer = client.send("POST", "/logs/_search", Some(&wrong)).await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(
        answer.body["message"]
            .as_str()
            .unwrap()
            .contains("search_after has 2 value(s) but sort has 1")
    );
}

#[tokio::test]
async fn aggregations_with_sub_aggregations() {
    let (_dir, _server, client) = with_logs().await;
    let body = json!({
        "size": 0,
        "query": {"range": {"@timestamp": {"gte": "now-1d"}}},
        "aggs": {
            "avg_bytes": {"avg": {"field": "bytes"}, "meta": {"unit": "bytes"}},
            "total_bytes": {"sum": {"field": "bytes"}},
            "least": {"min": {"field": "bytes"}},
            "most": {"max": {"field": "bytes"}},
            "methods_seen": {"cardinality": {"field": "method"}},
            "methods": {
                "terms": {"field": "method.keyword"},
                "aggs": {"bytes": {"avg": {"field": "bytes"}}},
            },
            "statuses": {"terms": {"field": "status", "size": 2}},
            "hourly": {"date_histogram": {"field": "@timestamp", "fixed_interval": "1h"}},
            "daily": {"date_histogram": {"field": "@timestamp", "calendar_interval": "day"}},
            "sizes": {"range": {"field": "bytes", "ranges": [{"to": 200}, {"from": 200, "to": 1000}, {"from": 1000}]}},
            "recent": {"range": {"field": "@timestamp", "ranges": [{"from": "now-150m"}]}},
            "errors": {
                "filters": {"filters": {
                    "client": {"range": {"status": {"gte": 400, "lt": 500}}},
                    "server": {"range": {"status": {"gte": 500}}},
                }},
                "aggs": {"largest": {"max": {"field": "bytes"}}},
            },
            "listed": {"filters": {"filters": [{"term": {"method": "GET"}}, {"match": {"message": "cache"}}]}},
            "byte_stats": {"stats": {"field": "bytes"}},
            "status_classes": {"histogram": {"field": "status", "interval": 100}},
            "counted": {"value_count": {"field": "user.name"}},
        },
    });
    let answer = client.send("POST", "/logs/_search", Some(&body)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let aggs = &answer.body["aggregations"];
    assert_eq!(answer.body["hits"]["hits"], json!([]));
    assert_eq!(answer.body["hits"]["total"]["value"], 12);
    assert_eq!(aggs["avg_bytes"]["value"], 3617.5);
    assert_eq!(aggs["avg_bytes"]["meta"], json!({"unit": "bytes"}));
    assert_eq!(aggs["total_bytes"]["value"], 43410.0);
    assert_eq!(aggs["least"]["value"], 0.0);
    assert_eq!(aggs["most"]["value"], 20480.0);
    assert_eq!(aggs["methods_seen"]["value"], 4);
    // Terms: by count, then by key; sub-aggregations in each bucket.
    let methods: Vec<(Value, Value, Value)> = aggs["methods"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["key"].clone(),
                b["doc_count"].clone(),
                b["bytes"]["value"].clone(),
            )
        })
        .collect();
    assert_eq!(
        methods,
        [
            (json!("GET"), json!(8), json!(5268.75)),
            (json!("POST"), json!(2), json!(555.0)),
            (json!("DELETE"), json!(1), json!(0.0)),
            (json!("PUT"), json!(1), json!(150.0)),
        ]
    );
    assert_eq!(
        aggs["statuses"]["buckets"],
        json!([{"key": 200, "doc_count": 4}, {"key": 404, "doc_count": 2}])
    );
    assert_eq!(aggs["statuses"]["sum_other_doc_count"], 6);
    // One record an hour: twelve hourly buckets of one, on hour boundaries.
    let hourly = aggs["hourly"]["buckets"].as_array().unwrap();
    assert_eq!(hourly.len(), 12);
    for bucket in hourly {
        assert_eq!(bucket["doc_count"], 1);
        let key = bucket["key"].as_i64().unwrap();
        assert_eq!(key % 3_600_000, 0);
        let text = bucket["key_as_string"].as_str().unwrap();
        assert!(text.ends_with(":00:00.000Z"), "{text}");
    }
    let daily: i64 = aggs["daily"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["doc_count"].as_i64().unwrap())
        .sum();
    assert_eq!(daily, 12);
    let sizes: Vec<(Value, Value)> = aggs["sizes"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["key"].clone(), b["doc_count"].clone()))
        .collect();
    assert_eq!(
        sizes,
        [
            (json!("*-200.0"), json!(4)),
            (json!("200.0-1000.0"), json!(4)),
            (json!("1000.0-*"), json!(4)),
        ]
    );
    // A range of dates, with date math: only the range asked for, in milliseconds.
    let recent = aggs["recent"]["buckets"].as_array().unwrap();
    assert_eq!(recent.len(), 1, "{recent:?}");
    assert_eq!(recent[0]["doc_count"], 3);
    assert!(recent[0]["from"].is_i64());
    assert!(recent[0]["key"].as_str().unwrap().ends_with("Z-*"));

    let stats = &aggs["byte_stats"];
    assert_eq!(
        (&stats["count"], &stats["min"], &stats["max"], &stats["sum"]),
        (&json!(12), &json!(0.0), &json!(20480.0), &json!(43410.0))
    );
    let classes: Vec<(i64, i64)> = aggs["status_classes"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["key"].as_i64().unwrap(), b["doc_count"].as_i64().unwrap()))
        .collect();
    assert_eq!(classes, [(200, 6), (300, 1), (400, 3), (500, 2)]);
    assert_eq!(aggs["counted"]["value"], 9);

    // Filters: keyed or listed buckets, with sub-aggregations.
    assert_eq!(
        aggs["errors"]["buckets"],
        json!({
            "client": {"doc_count": 3, "largest": {"value": 310.0}},
            "server": {"doc_count": 2, "largest": {"value": 150.0}},
        })
    );
    assert_eq!(
        aggs["listed"]["buckets"],
        json!([{"doc_count": 8}, {"doc_count": 3}])
    );

    // The query scopes them.
    let body = json!({
        "size": 0,
        "query": {"term": {"method": "GET"}},
        "aggs": {"statuses": {"terms": {"field": "status"}}},
    });
    let answer = client.send("POST", "/logs/_search", Some(&body)).await;
    let keys: Vec<i64> = answer.body["aggregations"]["statuses"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["key"].as_i64().unwrap())
        .collect();
    assert_eq!(keys, [200, 404, 304, 500], "{answer:?}");
    let refused = client
        .send(
            "POST",
            "/logs/_search",
            Some(&json!({"aggs": {"m": {"date_histogram": {"field": "@timestamp", "calendar_interval": "2M"}}}})),
        )
        .await;
    assert_eq!(refused.status, 400, "{refused:?}");
}

#[tokio::test]
async fn delete_by_query_in_its_forms() {
    let (_dir, _server, client) = with_logs().await;
    let deleted = |method: &'static str, path: String, body: Option<Value>| {
        let client = client.clone();
        async move {
            let answer = client.send(method, &path, body.as_ref()).await;
            assert_eq!(answer.status, 200, "{path}: {answer:?}");
            answer.body["deleted"].as_u64().unwrap()
        }
    };
    let time = |offset_minutes: i64| {
        let at = chrono::Utc::now() + chrono::Duration::minutes(offset_minutes);
        at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            .replace(':', "%3A")
    };
    // q in field:value form.
    assert_eq!(
        deleted("PATCH", "/logs?q=status%3A404".into(), None).await,
        2
    );
    // A Query DSL body.
    let body = json!({"query": {"term": {"method": "PUT"}}});
    assert_eq!(deleted("PATCH", "/logs".into(), Some(body)).await, 1);
    // A record from tomorrow: a time window without end_time ends now, so it stays.
    let future = chrono::Utc::now().timestamp_millis() + 86_400_000;
    let written = client
        .send_ndjson(
            "POST",
            "/logs/json",
            &[
                json!({"index": {"_id": "r99"}}),
                json!({"@timestamp": future, "method": "GET", "status": 200, "bytes": 5000, "message": "scheduled"}),
            ],
        )
        .await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    // A time window: from start_time to now.
    let path = format!("/logs?start_time={}", time(-150));
    assert_eq!(deleted("PATCH", path, None).await, 2);
    // Criteria combined: q and end_time.
    let path = format!("/logs?q=method%3AGET&end_time={}", time(-630));
    assert_eq!(deleted("PATCH", path, None).await, 1);
    // Elasticsearch's form.
    let body = json!({"query": {"match": {"message": "cache"}}});
    let answer = client
        .send("POST", "/logs/_delete_by_query", Some(&body))
        .await;
    assert_eq!(
        (
            &answer.body["deleted"],
            &answer.body["total"],
            &answer.body["failures"]
        ),
        (&json!(2), &json!(2), &json!([])),
        "{answer:?}"
    );
    assert_eq!(
        ids(&client, json!({"size": 100})).await,
        set(&[1, 2, 4, 8, 99])
    );
    // Every form at once: q, a body query, and the window as body keys. r1 and r99 are both
    // GET with at least 1000 bytes; only r1 (ten hours ago) is in the window.
    let rfc3339 = |offset_minutes: i64| {
        (chrono::Utc::now() + chrono::Duration::minutes(offset_minutes))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    let body = json!({
        "query": {"range": {"bytes": {"gte": 1000}}},
        "start_time": rfc3339(-640),
        "end_time": rfc3339(-560),
    });
    assert_eq!(
        deleted("PATCH", "/logs?q=method%3AGET".into(), Some(body)).await,
        1
    );
    // The body's window wins over the query parameters'.
    let body = json!({"start_time": rfc3339(60), "end_time": rfc3339(2000)});
    let path = format!("/logs?start_time={}&end_time={}", time(-2000), time(0));
    assert_eq!(deleted("PATCH", path, Some(body)).await, 1);
    assert_eq!(ids(&client, json!({"size": 100})).await, set(&[2, 4, 8]));
    // Nothing matched: nothing deleted.
    assert_eq!(
        deleted("PATCH", "/logs?q=status%3A999".into(), None).await,
        0
    );

    for (path, body, status, needle) in [
        ("/logs", None, 400, "needs a criterion"),
        (
            "/logs?start_time=yesterday",
            None,
            400,
            "not an RFC 3339 time",
        ),
        (
            "/logs",
            Some(json!({"colour": 1})),
            400,
            "unknown key [colour]",
        ),
        (
            "/logs",
            Some(json!({"query": {"nope": {}}})),
            400,
            "unknown query [nope]",
        ),
        ("/nowhere?q=a%3Ab", None, 404, "does not exist"),
    ] {
        let answer = client.send("PATCH", path, body.as_ref()).await;
        assert_eq!(answer.status, status, "{path}: {answer:?}");
        let message = answer.body["message"].as_str().unwrap();
        assert!(message.contains(needle), "{path}: {message}");
    }
    assert_eq!(
        client.send("GET", "/logs/_count", None).await.body["count"],
        3
    );
}

#[tokio::test]
async fn a_search_may_span_datasets() {
    let (_dir, _server, client) = with_logs().await;
    let more = [
        json!({"index": {"_id": "b0"}}),
        json!({"method": "GET", "status": 200, "bytes": 1}),
        json!({"index": {"_id": "b1"}}),
        json!({"method": "PATCH", "status": 200, "bytes": 2}),
    ];
    let written = client.send_ndjson("POST", "/logs-b/json", &more).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let body = json!({
        "query": {"term": {"status": 200}},
        "sort": [{"bytes": "asc"}],
        "size": 3,
        "aggs": {"methods": {"terms": {"field": "method"}}},
    });
    for path in [
        "/_search",
        "/_all/_search",
        "/logs*/_search",
        "/logs,logs-b/_search",
    ] {
        let answer = client.send("POST", path, Some(&body)).await;
        assert_eq!(answer.status, 200, "{path}: {answer:?}");
        assert_eq!(answer.body["hits"]["total"]["value"], 6, "{path}");
        let hits: Vec<(&str, &str)> = answer.body["hits"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["_index"].as_str().unwrap(), h["_id"].as_str().unwrap()))
            .collect();
        assert_eq!(
            hits,
            [("logs-b", "b0"), ("logs-b", "b1"), ("logs", "r0")],
            "{path}"
        );
        let methods: Vec<(&str, i64)> = answer.body["aggregations"]["methods"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b["key"].as_str().unwrap(), b["doc_count"].as_i64().unwrap()))
            .collect();
        assert_eq!(methods, [("GET", 5), ("PATCH", 1)], "{path}");
    }
    let missing = client
        .send("POST", "/logs,nowhere/_search", Some(&body))
        .await;
    assert_eq!(missing.status, 404, "{missing:?}");
    let none = client.send("POST", "/zzz*/_search", None).await;
    assert_eq!(none.body["hits"]["total"]["value"], 0, "{none:?}");
}

#[tokio::test]
async fn uri_search_parameters_and_cluster_health() {
    let (_dir, _server, client) = with_logs().await;
    let answer = client
        .send(
            "GET",
            "/logs/_search?q=method%3APOST&size=1&sort=bytes%3Adesc&rest_total_hits_as_int=true&_source=status",
            None,
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["hits"]["total"], 2);
    let hits = answer.body["hits"]["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["_id"], "r10");
    assert_eq!(hits[0]["_source"], json!({"status": 201}));
    // The body wins where both say something.
    let body = json!({"size": 3});
    let answer = client
        .send("POST", "/logs/_search?size=1", Some(&body))
        .await;
    assert_eq!(answer.body["hits"]["hits"].as_array().unwrap().len(), 3);
    let refused = client.send("GET", "/logs/_search?colour=red", None).await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("unrecognized parameter: [colour]")
    );

    let health = client.send("GET", "/_cluster/health", None).await;
    assert_eq!(health.status, 200, "{health:?}");
    assert_eq!(health.body["status"], "green");
    assert_eq!(health.body["active_primary_shards"], 1);
    assert_eq!(health.body["number_of_nodes"], 1);
}

#[tokio::test]
async fn calendar_histograms_bucket_by_month_quarter_and_year() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let mut lines = Vec::new();
    for (i, at) in [
        "2025-11-15T10:00:00Z",
        "2025-12-31T23:59:59Z",
        "2026-01-01T00:00:00Z",
        "2026-03-10T08:00:00Z",
        "2026-04-01T00:00:00Z",
    ]
    .iter()
    .enumerate()
    {
        lines.push(json!({"index": {"_id": format!("d{i}")}}));
        lines.push(json!({"@timestamp": at, "n": i}));
    }
    let written = client.send_ndjson("POST", "/dates/json", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let buckets = |answer: &common::Answer| -> Vec<(String, i64)> {
        answer.body["aggregations"]["h"]["buckets"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer:?}"))
            .iter()
            .map(|b| {
                (
                    b["key_as_string"].as_str().unwrap()[..7].to_owned(),
                    b["doc_count"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    let histogram = |interval: &str, query: Value| {
        json!({"size": 0, "query": query, "aggs": {"h": {"date_histogram": {
            "field": "@timestamp", "calendar_interval": interval}}}})
    };
    let all = json!({"match_all": {}});
    let answer = client
        .send(
            "POST",
            "/dates/_search",
            Some(&histogram("month", all.clone())),
        )
        .await;
    assert_eq!(
        buckets(&answer),
        [
            ("2025-11".to_owned(), 1),
            ("2025-12".to_owned(), 1),
            ("2026-01".to_owned(), 1),
            ("2026-02".to_owned(), 0),
            ("2026-03".to_owned(), 1),
            ("2026-04".to_owned(), 1),
        ]
    );
    let first = &answer.body["aggregations"]["h"]["buckets"][0];
    assert_eq!(first["key"], 1_761_955_200_000_i64, "{first}");
    let answer = client
        .send(
            "POST",
            "/dates/_search",
            Some(&histogram("1q", all.clone())),
        )
        .await;
    assert_eq!(
        buckets(&answer),
        [
            ("2025-10".to_owned(), 2),
            ("2026-01".to_owned(), 2),
            ("2026-04".to_owned(), 1)
        ]
    );
    let answer = client
        .send("POST", "/dates/_search", Some(&histogram("year", all)))
        .await;
    assert_eq!(
        buckets(&answer),
        [("2025-01".to_owned(), 2), ("2026-01".to_owned(), 3)]
    );
    // `order` by key, newest first; by count, most first.
    let mut newest_first = histogram("quarter", json!({"match_all": {}}));
    newest_first["aggs"]["h"]["date_histogram"]["order"] = json!({"_key": "desc"});
    let answer = client
        .send("POST", "/dates/_search", Some(&newest_first))
        .await;
    assert_eq!(
        buckets(&answer),
        [
            ("2026-04".to_owned(), 1),
            ("2026-01".to_owned(), 2),
            ("2025-10".to_owned(), 2)
        ]
    );
    let mut by_count = json!({"size": 0, "aggs": {"h": {"date_histogram": {
        "field": "@timestamp", "fixed_interval": "1d", "min_doc_count": 1,
        "order": {"_count": "desc"}}}}});
    let answer = client.send("POST", "/dates/_search", Some(&by_count)).await;
    assert_eq!(buckets(&answer).len(), 5, "{answer:?}");
    by_count["aggs"]["h"]["date_histogram"]["order"] = json!({"_key": "desc"});
    let answer = client.send("POST", "/dates/_search", Some(&by_count)).await;
    assert_eq!(buckets(&answer)[0].0, "2026-04", "{answer:?}");
    // Buckets run from the first period with a match to the last.
    let later = json!({"range": {"n": {"gte": 1, "lte": 3}}});
    let answer = client
        .send("POST", "/dates/_search", Some(&histogram("1M", later)))
        .await;
    assert_eq!(
        buckets(&answer),
        [
            ("2025-12".to_owned(), 1),
            ("2026-01".to_owned(), 1),
            ("2026-02".to_owned(), 0),
            ("2026-03".to_owned(), 1),
        ]
    );
}

#[tokio::test]
async fn prefixes_fuzziness_analyzers_and_the_simple_syntax() {
    let (_dir, _server, client) = with_logs().await;
    for (query, expected) in [
        // The last word is a prefix; any word (or all, with `and`).
        (
            json!({"match_bool_prefix": {"message": "served fro"}}),
            set(&[0, 1, 6, 9]),
        ),
        (
            json!({"match_bool_prefix": {"message": {"query": "served fro", "operator": "and"}}}),
            set(&[0, 6]),
        ),
        (
            json!({"multi_match": {"query": "ti", "type": "bool_prefix", "fields": ["message", "path"]}}),
            set(&[7]),
        ),
        // Within edits of a word: a transposition is one edit.
        (json!({"match": {"message": "cahce"}}), set(&[])),
        (
            json!({"match": {"message": {"query": "cahce", "fuzziness": 1}}}),
            set(&[0, 3, 6]),
        ),
        (
            json!({"match": {"message": {"query": "cahce", "fuzziness": "AUTO"}}}),
            set(&[0, 3, 6]),
        ),
        // The whitespace analyzer keeps the case: records are indexed lowercased.
        (
            json!({"match": {"message": {"query": "SERVED", "analyzer": "whitespace"}}}),
            set(&[]),
        ),
        (json!({"match": {"message": "SERVED"}}), set(&[0, 1, 6, 9])),
        (
            json!({"simple_query_string": {"query": "+served -cache", "fields": ["message"]}}),
            set(&[1, 9]),
        ),
        (
            json!({"simple_query_string": {"query": "\"not found\" | modif*", "fields": ["message"]}}),
            set(&[5, 8, 11]),
        ),
        // Without fields, every string of the record.
        (
            json!({"simple_query_string": {"query": "+disk +full"}}),
            set(&[3]),
        ),
        (
            json!({"simple_query_string": {"query": "disk full", "default_operator": "and"}}),
            set(&[3]),
        ),
        // A whole keyword, or a whole word of the text.
        (json!({"regexp": {"user.name": "a.n"}}), set(&[0, 4, 9])),
        (
            json!({"regexp": {"message": {"value": "cach.?"}}}),
            set(&[0, 3, 6]),
        ),
    ] {
        let found = ids(&client, json!({"query": query, "size": 100})).await;
        assert_eq!(found, expected, "{query}");
    }
    for (body, needle) in [
        (
            json!({"query": {"multi_match": {"query": "a", "type": "bool_prefix", "fields": ["message"], "slop": 1}}}),
            "[slop] not allowed for type [bool_prefix]",
        ),
        (
            json!({"query": {"match": {"message": {"query": "a", "fuzziness": 3}}}}),
            "invalid [fuzziness] [3]",
        ),
        (
            json!({"query": {"match": {"message": {"query": "a", "analyzer": "klingon"}}}}),
            "[analyzer] [klingon] is not served",
        ),
        (
            json!({"docvalue_fields": [{"field": "status", "format": "yyyy"}]}),
            "format [yyyy] of [status] is not served",
        ),
        (
            json!({"query": {"regexp": {"path": "a".repeat(1001)}}}),
            "The length of regex [1001]",
        ),
        (
            json!({"query": {"query_string": {"query": format!("path:/{}/", "a".repeat(1001))}}}),
            "The length of regex [1001]",
        ),
    ] {
        let answer = client.send("POST", "/logs/_search", Some(&body)).await;
        assert_eq!(answer.status, 400, "{body}: {answer:?}");
        let message = answer.body["message"].as_str().unwrap();
        assert!(message.contains(needle), "{message}");
    }
}

#[tokio::test]
async fn requested_fields_date_keys_and_range_keys() {
    let (_dir, _server, client) = with_logs().await;
    let body = json!({
        "query": {"ids": {"values": ["r0"]}},
        "docvalue_fields": ["status", {"field": "bytes", "format": "#.0"}, "user.name.keyword"],
        "stored_fields": ["_none_"],
    });
    let answer = client.send("POST", "/logs/_search", Some(&body)).await;
    let hit = &answer.body["hits"]["hits"][0];
    assert_eq!(
        hit["fields"],
        json!({"status": [200], "bytes": ["5120.0"], "user.name.keyword": ["ann"]}),
        "{answer:?}"
    );
    assert!(hit.get("_source").is_none(), "{hit}");
    // The URL's _source_includes wins over the body's _source.
    let answer = client
        .send(
            "POST",
            "/logs/_search?_source_includes=status",
            Some(&json!({"query": {"ids": {"values": ["r0"]}}, "_source": "method"})),
        )
        .await;
    assert_eq!(
        answer.body["hits"]["hits"][0]["_source"],
        json!({"status": 200})
    );

    let newest = client
        .send(
            "POST",
            "/logs/_search",
            Some(&json!({"query": {"ids": {"values": ["r11"]}}})),
        )
        .await;
    let newest = newest.body["hits"]["hits"][0]["_source"]["@timestamp"].clone();
    let body = json!({
        "size": 0,
        "aggs": {
            "latest": {"terms": {"field": "@timestamp", "size": 1, "order": {"_term": "desc"}}},
            "older": {"terms": {"field": "@timestamp", "size": 20, "exclude": [newest]}},
            "newest": {"terms": {"field": "@timestamp", "include": [newest]}},
            "halves": {"date_range": {"field": "@timestamp", "ranges": [{"to": "now-6h"}, {"from": "now-6h"}]}},
            "sizes": {"range": {"field": "bytes", "ranges": [{"to": 300}, {"from": 300, "key": "big"}]}},
        },
    });
    let answer = client.send("POST", "/logs/_search", Some(&body)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let aggs = &answer.body["aggregations"];
    let latest = &aggs["latest"]["buckets"][0];
    assert_eq!(latest["key_as_string"], newest, "{aggs}");
    let millis = chrono::DateTime::parse_from_rfc3339(newest.as_str().unwrap())
        .unwrap()
        .timestamp_millis();
    assert_eq!(latest["key"], json!(millis));
    // Dates to include or exclude.
    assert_eq!(
        aggs["older"]["buckets"].as_array().unwrap().len(),
        11,
        "{aggs}"
    );
    assert_eq!(aggs["newest"]["buckets"][0]["key"], json!(millis), "{aggs}");
    assert_eq!(
        aggs["newest"]["buckets"].as_array().unwrap().len(),
        1,
        "{aggs}"
    );
    let halves = aggs["halves"]["buckets"].as_array().unwrap();
    let counts: Vec<&Value> = halves.iter().map(|b| &b["doc_count"]).collect();
    assert_eq!(counts, [&json!(6), &json!(6)], "{aggs}");
    assert!(
        halves[1]["key"].as_str().unwrap().ends_with("Z-*"),
        "{aggs}"
    );
    let sizes: Vec<(&Value, &Value)> = aggs["sizes"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (&b["key"], &b["doc_count"]))
        .collect();
    assert_eq!(
        sizes,
        [(&json!("*-300.0"), &json!(6)), (&json!("big"), &json!(6))]
    );

    // Partitions of the terms: each term in exactly one, every record counted once.
    let mut keys = Vec::new();
    let mut records = 0;
    for partition in 0..3 {
        let body = json!({"size": 0, "aggs": {"m": {"terms": {
            "field": "method", "include": {"partition": partition, "num_partitions": 3},
        }}}});
        let answer = client.send("POST", "/logs/_search", Some(&body)).await;
        for bucket in answer.body["aggregations"]["m"]["buckets"]
            .as_array()
            .unwrap()
        {
            keys.push(bucket["key"].as_str().unwrap().to_owned());
            records += bucket["doc_count"].as_u64().unwrap();
        }
    }
    keys.sort();
    assert_eq!(keys, ["DELETE", "GET", "POST", "PUT"]);
    assert_eq!(records, 12);

    // Numbers printed in a decimal pattern.
    let body = json!({"size": 0, "aggs": {
        "h": {"histogram": {"field": "status", "interval": 100, "format": "Status ##0.0"}},
        "mean": {"avg": {"field": "bytes", "format": "#,##0.00"}},
    }});
    let answer = client.send("POST", "/logs/_search", Some(&body)).await;
    let aggs = &answer.body["aggregations"];
    assert_eq!(
        aggs["h"]["buckets"][0]["key_as_string"], "Status 200.0",
        "{aggs}"
    );
    // (5120 + 20480 + 310 + 120 + 0 + 230 + 9000 + 150 + 0 + 7000 + 800 + 200) / 12
    assert_eq!(aggs["mean"]["value_as_string"], "3,617.50", "{aggs}");
}

#[tokio::test]
async fn elasticsearch_delete_by_query_parameters_and_msearch_totals() {
    let (_dir, _server, client) = with_logs().await;
    // Parameters are checked before the dataset is looked up.
    for (path, needle) in [
        (
            "/nowhere/_delete_by_query?conflicts=cat",
            "conflicts may only be",
        ),
        (
            "/nowhere/_delete_by_query?max_docs=-4",
            "[max_docs] parameter cannot be negative, found [-4]",
        ),
        (
            "/nowhere/_delete_by_query?size=4&max_docs=5",
            "[max_docs] set to two different values [4] and [5]",
        ),
        (
            "/nowhere/_delete_by_query?max_docs=1&slices=2",
            "[max_docs] should be >= [slices]",
        ),
        (
            "/nowhere/_delete_by_query?slices=0",
            "[slices] must be a positive integer",
        ),
        (
            "/nowhere/_delete_by_query?scroll_size=asdf",
            "Failed to parse int parameter [scroll_size] with value [asdf]",
        ),
        (
            "/nowhere/_delete_by_query?requests_per_second=0",
            "[requests_per_second] must be a float greater than 0",
        ),
    ] {
        let body = json!({"query": {"match_all": {}}});
        let answer = client.send("POST", path, Some(&body)).await;
        assert_eq!(answer.status, 400, "{path}: {answer:?}");
        let message = answer.body["message"].as_str().unwrap();
        assert!(message.contains(needle), "{path}: {message}");
    }
    // At most max_docs records, scroll_size to a batch (an event each).
    let body = json!({"query": {"term": {"method": "GET"}}});
    let answer = client
        .send(
            "POST",
            "/logs/_delete_by_query?max_docs=5&scroll_size=2",
            Some(&body),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        (&answer.body["deleted"], &answer.body["batches"]),
        (&json!(5), &json!(3))
    );
    // The oldest writes went first: of the eight GETs, r8, r9 and r11 are left.
    let left = ids(
        &client,
        json!({"query": {"term": {"method": "GET"}}, "size": 100}),
    )
    .await;
    assert_eq!(left, set(&[8, 9, 11]));
    // Slices: the records split by row id, each slice counted on its own.
    let body = json!({"query": {"term": {"method": "POST"}}});
    let answer = client
        .send("POST", "/logs/_delete_by_query?slices=3", Some(&body))
        .await;
    assert_eq!(answer.body["deleted"], 2, "{answer:?}");
    let slices = answer.body["slices"].as_array().unwrap();
    assert_eq!(slices.len(), 3);
    let per_slice: u64 = slices.iter().map(|s| s["deleted"].as_u64().unwrap()).sum();
    assert_eq!(per_slice, 2);
    assert_eq!(slices[2]["slice_id"], 2);
    // A dataset has one copy: waiting for more deletes nothing, and says why.
    let answer = client
        .send(
            "POST",
            "/logs/_delete_by_query?wait_for_active_shards=3&timeout=1s",
            Some(&json!({"query": {"match_all": {}}})),
        )
        .await;
    assert_eq!(answer.status, 503, "{answer:?}");
    let reason = answer.body["failures"][0]["cause"]["reason"]
        .as_str()
        .unwrap();
    assert!(
        reason.contains("Not enough active copies to meet shard count of [3]"),
        "{reason}"
    );

    let searches = [
        json!({"index": "logs"}),
        json!({"query": {"term": {"method": "GET"}}}),
        json!({"index": "nowhere"}),
        json!({}),
    ];
    let answer = client
        .send_ndjson("POST", "/_msearch?rest_total_hits_as_int=true", &searches)
        .await;
    let responses = &answer.body["responses"];
    assert_eq!(responses[0]["hits"]["total"], 3, "{answer:?}");
    assert_eq!(responses[1]["error"]["reason"], "no such index [nowhere]");
    assert_eq!(responses[1]["error"]["root_cause"][0]["index"], "nowhere");
    // A bounded total cannot be printed as an exact number.
    let searches = [json!({"index": "logs"}), json!({"track_total_hits": 10})];
    let answer = client
        .send_ndjson("POST", "/_msearch?rest_total_hits_as_int=true", &searches)
        .await;
    assert_eq!(answer.status, 400, "{answer:?}");
}

#[tokio::test]
async fn declared_date_formats_read_print_sort_and_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let mappings = json!({"mappings": {"properties": {
        "at": {"type": "date", "format": "yyyy-MM-dd HH:mm:ss.SSS||epoch_millis"},
        "day": {"type": "date", "format": "epoch_second"},
    }}});
    let created = client.send("PUT", "/events", Some(&mappings)).await;
    assert_eq!(created.status, 200, "{created:?}");
    let bad = client
        .send(
            "PUT",
            "/_mapping_check",
            Some(
                &json!({"mappings": {"properties": {"at": {"type": "date", "format": "yyyy-ww"}}}}),
            ),
        )
        .await;
    assert_eq!(bad.status, 400, "{bad:?}");
    assert!(
        bad.body["message"].as_str().unwrap().contains("[ww]"),
        "{bad:?}"
    );

    let lines = [
        json!({"index": {"_id": "a"}}),
        json!({"at": "2019-10-21 08:30:04.828", "day": 1000}),
        json!({"index": {"_id": "b"}}),
        json!({"at": 1_571_617_804_828_i64, "day": "3000"}),
        json!({"index": {"_id": "c"}}),
        json!({"at": "21/10/2019"}),
    ];
    let written = client.send_ndjson("POST", "/events/_bulk", &lines).await;
    let items = written.body["items"].as_array().unwrap();
    assert_eq!(items[0]["index"]["status"], 201, "{written:?}");
    assert_eq!(items[1]["index"]["status"], 201, "{written:?}");
    // A value the format cannot read is refused, and the field keeps its type.
    assert_eq!(items[2]["index"]["status"], 400, "{written:?}");
    let mapping = client.send("GET", "/events/_mapping", None).await;
    assert_eq!(
        mapping.body["events"]["mappings"]["properties"]["at"],
        json!({"type": "date", "format": "yyyy-MM-dd HH:mm:ss.SSS||epoch_millis"}),
        "{mapping:?}"
    );

    // Sorted by time (milliseconds), printed back in the format.
    let body = json!({"sort": [{"at": "desc"}]});
    let answer = client.send("POST", "/events/_search", Some(&body)).await;
    let hits = answer.body["hits"]["hits"].as_array().unwrap();
    assert_eq!(
        hits[0]["sort"],
        json!([1_571_646_604_828_i64]),
        "{answer:?}"
    );
    assert_eq!(hits[0]["_source"]["at"], "2019-10-21 08:30:04.828");
    assert_eq!(hits[1]["_source"]["at"], "2019-10-21 00:30:04.828");
    assert_eq!(hits[0]["_source"]["day"], 1000);
    // The next page after a date named as text, in the field's format.
    let body = json!({"sort": [{"at": "desc"}], "search_after": ["2019-10-21 08:30:04.828"]});
    let answer = client.send("POST", "/events/_search", Some(&body)).await;
    assert_eq!(answer.body["hits"]["hits"][0]["_id"], "b", "{answer:?}");

    // A range query in a format of its own.
    let body =
        json!({"query": {"range": {"at": {"gte": "21/10/2019 08", "format": "dd/MM/yyyy HH"}}}});
    assert_eq!(
        client
            .send("POST", "/events/_search", Some(&body))
            .await
            .body["hits"]["total"]["value"],
        1
    );
    // Aggregation bounds and keys in the field's format.
    let body = json!({"size": 0, "aggs": {
        "days": {"date_range": {"field": "day", "ranges": [{"from": 1000, "to": 3000}, {"from": 3000}]}},
        "times": {"terms": {"field": "at"}},
    }});
    let answer = client.send("POST", "/events/_search", Some(&body)).await;
    let aggs = &answer.body["aggregations"];
    let days = aggs["days"]["buckets"].as_array().unwrap();
    assert_eq!(days[0]["key"], "1000-3000", "{aggs}");
    assert_eq!(days[0]["from"], 1_000_000, "{aggs}");
    assert_eq!(days[0]["doc_count"], 1, "{aggs}");
    assert_eq!(days[1]["key"], "3000-*", "{aggs}");
    let times: Vec<&Value> = aggs["times"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| &b["key_as_string"])
        .collect();
    assert!(times.contains(&&json!("2019-10-21 00:30:04.828")), "{aggs}");
}

#[tokio::test]
async fn arrays_are_several_values_of_a_field_in_segments_and_the_memtable() {
    let dir = tempfile::tempdir().unwrap();
    let flush = ["--set", "tables.flush_rows=3"];
    let server = Server::start(dir.path(), &flush);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let line = |id: &str, record: Value| vec![json!({"index": {"_id": id}}), record];
    // Three records with one tag each go to a segment, whose `tags` is a column of one value.
    let first: Vec<Value> = [
        line("a", json!({"tags": "red", "n": 5})),
        line("b", json!({"tags": "blue", "n": 1})),
        line("c", json!({"tags": "green", "n": 9})),
    ]
    .concat();
    // Arrays make the columns lists; the older records read as lists of one.
    let second: Vec<Value> = [
        line("d", json!({"tags": ["red", "blue"], "n": [2, 20]})),
        line(
            "e",
            json!({"tags": ["green"], "n": [7, -3, 4], "empty": []}),
        ),
    ]
    .concat();
    in_a_segment_then_the_memtable(&client, dir.path(), "items", &first, &second).await;

    let ids = |answer: &common::Answer| -> Vec<String> {
        assert_eq!(answer.status, 200, "{answer:?}");
        answer.body["hits"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let search = |body: Value| {
        let client = client.clone();
        async move { client.send("POST", "/items/_search", Some(&body)).await }
    };
    // A term matches any of a record's values.
    let red = search(json!({"query": {"term": {"tags": "red"}}, "sort": ["_id"]})).await;
    assert_eq!(ids(&red), ["a", "d"]);
    let big = search(json!({"query": {"range": {"n": {"gte": 10}}}})).await;
    assert_eq!(ids(&big), ["d"]);
    // Sorts pick a value by mode: the least ascending, the greatest descending by default.
    let by_max = search(json!({"sort": [{"n": "desc"}]})).await;
    assert_eq!(ids(&by_max), ["d", "c", "e", "a", "b"]);
    assert_eq!(by_max.body["hits"]["hits"][0]["sort"], json!([20]));
    let by_min = search(json!({"sort": [{"n": "asc"}]})).await;
    assert_eq!(ids(&by_min), ["e", "b", "d", "a", "c"]);
    let by_sum = search(json!({"sort": [{"n": {"order": "desc", "mode": "sum"}}]})).await;
    assert_eq!(ids(&by_sum), ["d", "c", "e", "a", "b"]);
    assert_eq!(by_sum.body["hits"]["hits"][0]["sort"], json!([22]));
    let by_avg = search(json!({"sort": [{"n": {"order": "asc", "mode": "avg"}}]})).await;
    assert_eq!(by_avg.body["hits"]["hits"][0]["sort"], json!([1]));
    assert_eq!(ids(&by_avg), ["b", "e", "a", "c", "d"]);
    // A terms aggregation counts each value once per record.
    let terms = search(json!({"size": 0, "aggs": {"t": {"terms": {"field": "tags"}}}})).await;
    let buckets: Vec<(String, u64)> = terms.body["aggregations"]["t"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["key"].as_str().unwrap().to_owned(),
                b["doc_count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        buckets,
        [
            ("blue".to_owned(), 2),
            ("green".to_owned(), 2),
            ("red".to_owned(), 2)
        ]
    );
    // `_source` gives the arrays back; the older records, a list of one value.
    let d = client.send("GET", "/items/_doc/d", None).await;
    assert_eq!(d.body["_source"]["tags"], json!(["red", "blue"]));
    assert_eq!(d.body["_source"]["n"], json!([2, 20]));
    assert!(d.body["_source"].get("empty").is_none());
    let a = client.send("GET", "/items/_doc/a", None).await;
    assert_eq!(a.body["_source"]["tags"], json!(["red"]));
    // The mapping shows the values' type.
    let mapping = client.send("GET", "/items/_mapping", None).await;
    assert_eq!(
        mapping.body["items"]["mappings"]["properties"]["n"],
        json!({"type": "long"})
    );
    // SQL reads the lists, the segment's values cast to them.
    let data = server.client(&common::account_with_key(dir.path(), "acme", None));
    let sql =
        json!({"sql": "SELECT _id, tags, array_length(n, 1) AS values FROM items ORDER BY _id"});
    let rows = data.post_json("/v1/query_sql/default", &sql).await;
    assert_eq!(rows.status, 200, "{rows:?}");
    assert_eq!(
        rows.body["data"],
        json!([
            {"_id": "a", "tags": ["red"], "values": 1},
            {"_id": "b", "tags": ["blue"], "values": 1},
            {"_id": "c", "tags": ["green"], "values": 1},
            {"_id": "d", "tags": ["red", "blue"], "values": 2},
            {"_id": "e", "tags": ["green"], "values": 3},
        ])
    );
}

#[tokio::test]
async fn hits_name_the_named_queries_they_match() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let lines = [
        json!({"index": {"_id": "a"}}),
        json!({"kind": "error", "code": 500}),
        json!({"index": {"_id": "b"}}),
        json!({"kind": "error", "code": 404}),
        json!({"index": {"_id": "c"}}),
        json!({"kind": "info", "code": 200}),
    ];
    let written = client.send_ndjson("POST", "/events/_bulk", &lines).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let body = json!({"query": {"bool": {"should": [
        {"term": {"kind": {"value": "error", "_name": "errors"}}},
        {"range": {"code": {"gte": 500, "_name": "server", "boost": 3}}},
        {"match": {"kind": {"query": "info", "_name": "infos"}}},
    ]}}, "sort": ["_id"]});
    let answer = client.send("POST", "/events/_search", Some(&body)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let matched: Vec<Value> = answer.body["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["matched_queries"].clone())
        .collect();
    assert_eq!(
        matched,
        [
            json!(["errors", "server"]),
            json!(["errors"]),
            json!(["infos"])
        ]
    );
    // With their scores.
    let scored = client
        .send(
            "POST",
            "/events/_search?include_named_queries_score=true",
            Some(&body),
        )
        .await;
    let first = &scored.body["hits"]["hits"][0]["matched_queries"];
    assert_eq!(first["server"], json!(3.0), "{first}");
    assert!(first["errors"].as_f64().unwrap() > 0.0);
}

/// Creates dataset `name` with `properties` and writes `records` to it (ids "0", "1", ...).
async fn dataset_of(client: &Signed, name: &str, properties: Value, records: &[Value]) {
    let created = client
        .send(
            "PUT",
            &format!("/{name}"),
            Some(&json!({"mappings": {"properties": properties}})),
        )
        .await;
    assert_eq!(created.status, 200, "{created:?}");
    if records.is_empty() {
        return;
    }
    let mut lines = Vec::new();
    for (i, record) in records.iter().enumerate() {
        lines.push(json!({"index": {"_id": i.to_string()}}));
        lines.push(record.clone());
    }
    let written = client
        .send_ndjson("POST", &format!("/{name}/_bulk"), &lines)
        .await;
    assert_eq!(written.body["errors"], false, "{written:?}");
}

/// The `(key_as_string or key, doc_count)` of each bucket of aggregation `name`.
fn buckets_of(answer: &common::Answer, name: &str) -> Vec<(Value, u64)> {
    answer.body["aggregations"][name]["buckets"]
        .as_array()
        .unwrap_or_else(|| panic!("no buckets: {answer:?}"))
        .iter()
        .map(|b| {
            let key = b.get("key_as_string").unwrap_or(&b["key"]).clone();
            (key, b["doc_count"].as_u64().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn range_fields_are_declared_queried_and_bucketed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let stays = [
        json!({"stay": {"gte": "2016-01-01", "lt": "2016-01-02"}, "rooms": {"gte": 1, "lte": 3}}),
        json!({"stay": {"gte": "2016-01-02", "lt": "2016-01-03"}, "rooms": {"gt": 3, "lt": 6}}),
        json!({"stay": {"gte": "2016-02-01", "lte": "2016-02-01T12:00:00Z"}, "rooms": {"lte": 10}}),
        json!({"stay": {"gte": "2016-03-01"}, "rooms": {"gte": 15}}),
        json!({"stay": {"lt": "2016-01-01"}}),
    ];
    let properties = json!({
        "stay": {"type": "date_range"},
        "rooms": {"type": "long_range"},
    });
    dataset_of(&client, "stays", properties, &stays).await;

    // The mapping shows the range fields, not the columns of their bounds.
    let mapping = client.send("GET", "/stays/_mapping", None).await;
    let shown = &mapping.body["stays"]["mappings"]["properties"];
    assert_eq!(shown["stay"], json!({"type": "date_range"}), "{mapping:?}");
    assert_eq!(shown["rooms"], json!({"type": "long_range"}), "{mapping:?}");
    // _source keeps the range as written.
    let found = client.send("GET", "/stays/_doc/1", None).await;
    assert_eq!(
        found.body["_source"]["rooms"],
        json!({"gt": 3, "lt": 6}),
        "{found:?}"
    );

    // A value that is not a range is refused, alone, and nothing of it is written.
    for (bad, needle) in [
        (json!({"stay": "2016-01-01"}), "a range is an object"),
        (
            json!({"stay": {"from": "2016-01-01"}}),
            "unknown parameter [from]",
        ),
        (json!({"rooms": {"gte": 1, "gt": 2}}), "not both of a pair"),
        (
            json!({"rooms": {"gte": 9, "lte": 2}}),
            "greater than max value",
        ),
        (json!({"rooms": {"gte": "many"}}), "does not fit"),
    ] {
        let answer = client
            .send_ndjson("POST", "/stays/_bulk", &[json!({"index": {}}), bad.clone()])
            .await;
        let error = &answer.body["items"][0]["index"]["error"];
        assert_eq!(
            error["type"], "mapper_parsing_exception",
            "{bad}: {answer:?}"
        );
        assert!(
            error["reason"].as_str().unwrap().contains(needle),
            "{bad}: {error}"
        );
    }
    assert_eq!(
        client.send("GET", "/stays/_count", None).await.body["count"],
        5
    );

    let search = |query: Value| {
        let client = client.clone();
        async move {
            let answer = client
                .send(
                    "POST",
                    "/stays/_search",
                    Some(&json!({"query": query, "size": 10})),
                )
                .await;
            common::hit_ids(&answer)
        }
    };
    // intersects (the default): the open ranges reach everything on their side.
    let january = json!({"range": {"stay": {"gte": "2016-01-01", "lt": "2016-02-01"}}});
    assert_eq!(search(january).await, ["0", "1"]);
    let before = json!({"range": {"stay": {"lte": "2015-12-31"}}});
    assert_eq!(search(before).await, ["4"]);
    let later = json!({"range": {"stay": {"gt": "2016-02-01T12:00:00Z"}}});
    assert_eq!(search(later).await, ["3"]);
    // An exclusive end: [3, 6) holds 4 and 5 only.
    assert_eq!(search(json!({"term": {"rooms": 3}})).await, ["0", "2"]);
    assert_eq!(search(json!({"term": {"rooms": 4}})).await, ["1", "2"]);
    assert_eq!(search(json!({"term": {"rooms": 6}})).await, ["2"]);
    assert_eq!(search(json!({"term": {"rooms": 20}})).await, ["3"]);
    // within and contains.
    let within = json!({"range": {"rooms": {"gte": 0, "lte": 5, "relation": "within"}}});
    assert_eq!(search(within).await, ["0", "1"]);
    let contains = json!({"range": {"rooms": {"gte": 2, "lte": 3, "relation": "CONTAINS"}}});
    assert_eq!(search(contains).await, ["0", "2"]);
    let unbounded = json!({"range": {"stay": {"lte": "2000-01-01", "relation": "contains"}}});
    assert_eq!(search(unbounded).await, ["4"]);
    assert_eq!(
        search(json!({"exists": {"field": "rooms"}})).await,
        ["0", "1", "2", "3"]
    );
    let wrong = client
        .send(
            "POST",
            "/stays/_search",
            Some(&json!({"query": {"range": {"rooms": {"gte": 1, "relation": "near"}}}})),
        )
        .await;
    assert_eq!(wrong.status, 400, "{wrong:?}");

    // A record counts in every bucket its range overlaps; open ranges fill up to the hard
    // bounds.
    let months = client
        .send(
            "POST",
            "/stays/_search",
            Some(&json!({"size": 0, "aggs": {"m": {"date_histogram": {
                "field": "stay", "calendar_interval": "month",
                "hard_bounds": {"min": "2015-11-01", "max": "2016-04-01"},
            }}}})),
        )
        .await;
    assert_eq!(
        buckets_of(&months, "m"),
        [
            (json!("2015-11-01T00:00:00.000Z"), 1),
            (json!("2015-12-01T00:00:00.000Z"), 1),
            (json!("2016-01-01T00:00:00.000Z"), 2),
            (json!("2016-02-01T00:00:00.000Z"), 1),
            (json!("2016-03-01T00:00:00.000Z"), 1),
            (json!("2016-04-01T00:00:00.000Z"), 1),
        ],
        "{months:?}"
    );
    let rooms = client
        .send(
            "POST",
            "/stays/_search",
            Some(&json!({"size": 0, "query": {"ids": {"values": ["0", "1"]}},
                "aggs": {"r": {"histogram": {"field": "rooms", "interval": 2}}}})),
        )
        .await;
    assert_eq!(
        buckets_of(&rooms, "r"),
        [(json!(0), 1), (json!(2), 1), (json!(4), 1)],
        "{rooms:?}"
    );
}

#[tokio::test]
async fn date_histograms_in_a_time_zone_and_weeks_from_monday() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let records = [
        // 2016-01-01T00:00Z is 2015-12-31T17:00 in Phoenix.
        json!({"at": "2016-01-01T00:00:00Z"}),
        json!({"at": "2016-01-01T08:00:00Z"}),
        // Paris changes its clocks on 2026-03-29 (01:00Z).
        json!({"at": "2026-03-28T23:30:00Z"}),
        json!({"at": "2026-03-29T21:59:00Z"}),
        json!({"at": "2026-03-29T22:00:00Z"}),
    ];
    dataset_of(&client, "times", json!({"at": {"type": "date"}}), &records).await;
    let histogram = |query: Value, histogram: Value| {
        let client = client.clone();
        async move {
            let body =
                json!({"size": 0, "query": query, "aggs": {"h": {"date_histogram": histogram}}});
            let answer = client.send("POST", "/times/_search", Some(&body)).await;
            assert_eq!(answer.status, 200, "{answer:?}");
            buckets_of(&answer, "h")
        }
    };
    let phoenix = histogram(
        json!({"range": {"at": {"lt": "2017-01-01"}}}),
        json!({"field": "at", "calendar_interval": "day", "time_zone": "America/Phoenix"}),
    )
    .await;
    assert_eq!(
        phoenix,
        [
            (json!("2015-12-31T00:00:00.000-07:00"), 1),
            (json!("2016-01-01T00:00:00.000-07:00"), 1),
        ]
    );
    // Days of Paris' clock across its change: the 29th has 23 hours.
    let paris = histogram(
        json!({"range": {"at": {"gte": "2026-01-01"}}}),
        json!({"field": "at", "calendar_interval": "day", "time_zone": "Europe/Paris"}),
    )
    .await;
    assert_eq!(
        paris,
        [
            (json!("2026-03-29T00:00:00.000+01:00"), 2),
            (json!("2026-03-30T00:00:00.000+02:00"), 1),
        ]
    );
    // Calendar weeks begin on Monday (2016-01-01 was a Friday).
    let weeks = histogram(
        json!({"range": {"at": {"lt": "2017-01-01"}}}),
        json!({"field": "at", "calendar_interval": "week"}),
    )
    .await;
    assert_eq!(weeks, [(json!("2015-12-28T00:00:00.000Z"), 2)]);
    let answer = client
        .send(
            "POST",
            "/times/_search",
            Some(&json!({"size": 0, "aggs": {"h": {"date_histogram": {
                "field": "at", "fixed_interval": "1h", "time_zone": "Mars/Olympus"}}}})),
        )
        .await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(
        answer.body["message"]
            .as_str()
            .unwrap()
            .contains("unknown time zone")
    );

    // A range aggregation over no records lists its ranges, empty.
    let empty = client
        .send(
            "POST",
            "/times/_search",
            Some(
                &json!({"size": 0, "query": {"term": {"at": 0}}, "aggs": {"r": {
                    "date_range": {"field": "at", "ranges": [{"from": "2020-01-01T00:00:00Z"}]},
                    "aggs": {"n": {"value_count": {"field": "at"}}},
                }}}),
            ),
        )
        .await;
    let bucket = &empty.body["aggregations"]["r"]["buckets"][0];
    assert_eq!(bucket["key"], "2020-01-01T00:00:00.000Z-*", "{empty:?}");
    assert_eq!(bucket["doc_count"], 0, "{empty:?}");
    assert_eq!(bucket["n"]["value"], 0, "{empty:?}");
    // Nor over a dataset that never had one.
    dataset_of(&client, "void", json!({"at": {"type": "date"}}), &[]).await;
    let void = client
        .send(
            "POST",
            "/void/_search",
            Some(&json!({"size": 0, "aggs": {"r": {
                "date_range": {"field": "at", "ranges": [{"from": "2020-01-01T00:00:00Z"}]},
                "aggs": {"n": {"value_count": {"field": "at"}}},
            }}})),
        )
        .await;
    assert_eq!(
        void.body["aggregations"]["r"], empty.body["aggregations"]["r"],
        "{void:?}"
    );
}

#[tokio::test]
async fn a_delete_by_query_may_run_as_a_task() {
    let (dir, server, client) = with_logs().await;
    let started = client
        .send(
            "POST",
            "/logs/_delete_by_query?wait_for_completion=false&slices=2",
            Some(&json!({"query": {"term": {"status": 404}}})),
        )
        .await;
    assert_eq!(started.status, 200, "{started:?}");
    assert!(started.body.get("deleted").is_none(), "{started:?}");
    let task = started.body["task"].as_str().unwrap().to_owned();
    assert!(task.contains(':'), "{task}");
    let done = client
        .send(
            "GET",
            &format!("/_tasks/{task}?wait_for_completion=true"),
            None,
        )
        .await;
    assert_eq!(done.status, 200, "{done:?}");
    assert_eq!(done.body["completed"], true, "{done:?}");
    assert_eq!(
        done.body["task"]["action"],
        "indices:data/write/delete/byquery"
    );
    assert_eq!(done.body["response"]["deleted"], 2, "{done:?}");
    assert_eq!(done.body["task"]["status"]["deleted"], 2, "{done:?}");
    assert_eq!(done.body["response"]["slices"].as_array().unwrap().len(), 2);
    assert_eq!(
        client.send("GET", "/logs/_count", None).await.body["count"],
        10
    );
    // Rethrottling an ended task lists nothing running.
    let rethrottled = client
        .send(
            "POST",
            &format!("/_delete_by_query/{task}/_rethrottle?requests_per_second=-1"),
            None,
        )
        .await;
    assert_eq!(rethrottled.status, 200, "{rethrottled:?}");
    assert_eq!(rethrottled.body["nodes"], json!({}));
    // A rethrottle needs a rate: a float above 0, or -1.
    for (query, needle) in [
        ("", "requests_per_second must be set"),
        ("?requests_per_second=0", "must be a float greater than 0"),
        ("?requests_per_second=fast", "Found [fast]"),
    ] {
        let refused = client
            .send(
                "POST",
                &format!("/_delete_by_query/{task}/_rethrottle{query}"),
                None,
            )
            .await;
        assert_eq!(refused.status, 400, "{query}: {refused:?}");
        let message = refused.body["message"].as_str().unwrap();
        assert!(message.contains(needle), "{query}: {message}");
    }

    // Another user does not see it; the root user learns that an unknown task is unknown.
    let role = "Version: 2025-01-01\nPermissions:\n  - ResourceType: record\n    Actions: [read, write]\n    Resources: [\"logs\"]\n  - ResourceType: metadata\n    Actions: [read]\n    Resources: [\"logs\"]\n";
    let made = common::yaml(&client, "PUT", "/role/writers", role).await;
    assert_eq!(made.status, 200, "{made:?}");
    let ann = common::user(&client, &server, "ann", &["writers"]).await;
    assert_eq!(
        ann.send("GET", &format!("/_tasks/{task}"), None)
            .await
            .status,
        403
    );
    let node = task.split(':').next().unwrap();
    let unknown = client
        .send("GET", &format!("/_tasks/{node}:999"), None)
        .await;
    assert_eq!(unknown.status, 404, "{unknown:?}");
    assert_eq!(client.send("GET", "/_tasks/nine", None).await.status, 400);
    // A task for a dataset that does not exist is not started.
    let missing = client
        .send(
            "POST",
            "/nowhere/_delete_by_query?wait_for_completion=false",
            Some(&json!({"query": {"match_all": {}}})),
        )
        .await;
    assert_eq!(missing.status, 404, "{missing:?}");
    // Ann's own task is hers to see.
    let hers = ann
        .send(
            "POST",
            "/logs/_delete_by_query?wait_for_completion=false",
            Some(&json!({"query": {"term": {"method": "PUT"}}})),
        )
        .await;
    let task = hers.body["task"].as_str().unwrap().to_owned();
    let seen = ann
        .send(
            "GET",
            &format!("/_tasks/{task}?wait_for_completion=true&timeout=10s"),
            None,
        )
        .await;
    assert_eq!(seen.body["response"]["deleted"], 1, "{seen:?}");
    drop(dir);
}

#[tokio::test]
async fn index_statistics_count_records_and_bytes() {
    let (_dir, _server, client) = with_logs().await;
    let stats = client.send("GET", "/logs/_stats", None).await;
    assert_eq!(stats.status, 200, "{stats:?}");
    let total = &stats.body["indices"]["logs"]["total"];
    assert_eq!(total["docs"]["count"], 12, "{stats:?}");
    assert!(
        total["store"]["size_in_bytes"].as_u64().unwrap() > 0,
        "{stats:?}"
    );
    assert_eq!(total["fielddata"]["memory_size_in_bytes"], 0);
    assert_eq!(stats.body["_all"]["primaries"]["docs"]["count"], 12);
    let docs = client.send("GET", "/_stats/docs", None).await;
    assert_eq!(
        docs.body["indices"]["logs"]["primaries"]["docs"]["count"],
        12
    );
    assert!(
        docs.body["indices"]["logs"]["primaries"]
            .get("store")
            .is_none()
    );
    assert_eq!(
        client.send("GET", "/logs/_stats/merge", None).await.status,
        400
    );
    assert_eq!(
        client.send("GET", "/nowhere/_stats", None).await.status,
        404
    );
}

#[tokio::test]
async fn a_search_profile_times_its_query_and_aggregations() {
    let (_dir, _server, client) = with_logs().await;
    let body = json!({
        "profile": true,
        "size": 0,
        "query": {"range": {"status": {"gte": 400}}},
        "aggs": {
            "codes": {"histogram": {"field": "status", "interval": 100}},
            "methods": {"terms": {"field": "method"}, "aggs": {"most": {"max": {"field": "bytes"}}}},
            "statuses": {"terms": {"field": "status"}},
            "distinct": {"cardinality": {"field": "status"}},
        },
    });
    let answer = client.send("POST", "/logs/_search", Some(&body)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let shard = &answer.body["profile"]["shards"][0];
    assert!(shard["id"].as_str().unwrap().contains("[logs]"), "{shard}");
    let query = &shard["searches"][0]["query"][0];
    assert!(query["time_in_nanos"].as_u64().unwrap() > 0, "{query}");
    let aggregations = shard["aggregations"].as_array().unwrap();
    let entry = |name: &str| {
        aggregations
            .iter()
            .find(|a| a["description"] == name)
            .unwrap_or_else(|| panic!("no {name} in {aggregations:?}"))
            .clone()
    };
    // Five records have a status of 400 or more (401, 404, 404, 500, 500): in two hundreds.
    let codes = entry("codes");
    assert_eq!(codes["type"], "NumericHistogramAggregator");
    assert_eq!(codes["breakdown"]["collect_count"], 5, "{codes}");
    assert_eq!(codes["debug"]["total_buckets"], 2, "{codes}");
    for phase in ["initialize", "collect", "build_aggregation"] {
        assert!(
            codes["breakdown"][phase].as_u64().unwrap() > 0,
            "{phase}: {codes}"
        );
    }
    let methods = entry("methods");
    assert_eq!(methods["type"], "StringTermsAggregator");
    assert_eq!(methods["children"][0]["type"], "MaxAggregator", "{methods}");
    let statuses = entry("statuses");
    assert_eq!(statuses["type"], "NumericTermsAggregator");
    assert_eq!(statuses["debug"]["result_strategy"], "long_terms");
    assert_eq!(statuses["debug"]["total_buckets"], 3, "{statuses}");
    let distinct = entry("distinct");
    assert!(
        distinct["debug"]["numeric_collectors_used"]
            .as_u64()
            .unwrap()
            > 0,
        "{distinct}"
    );
    assert_eq!(
        distinct["debug"]["ordinals_collectors_used"], 0,
        "{distinct}"
    );
    // The answer is the one a search without profile gives.
    let mut plain = body.clone();
    plain["profile"] = json!(false);
    let without = client.send("POST", "/logs/_search", Some(&plain)).await;
    assert_eq!(without.body["aggregations"], answer.body["aggregations"]);
    assert!(without.body.get("profile").is_none());
}

#[tokio::test]
async fn date_nanos_fields_keep_their_nanoseconds() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let records = [
        json!({"at": "2018-10-29T12:12:12.123456789Z", "micros": "2019-10-21 00:30:04.828740"}),
        json!({"at": "2018-10-29T12:12:12.987654321Z", "micros": "2019-10-21 08:30:04.828733"}),
        json!({"at": "1540815132500.25"}),
    ];
    let properties = json!({
        "at": {"type": "date_nanos"},
        "micros": {"type": "date_nanos", "format": "yyyy-MM-dd HH:mm:ss.SSSSSS"},
    });
    dataset_of(&client, "nanos", properties, &records).await;
    let search = |body: Value| {
        let client = client.clone();
        async move {
            let answer = client.send("POST", "/nanos/_search", Some(&body)).await;
            assert_eq!(answer.status, 200, "{answer:?}");
            answer.body["hits"]["hits"].as_array().unwrap().clone()
        }
    };
    let hits = search(json!({"sort": [{"at": "desc"}]})).await;
    let sorts: Vec<Value> = hits.iter().map(|h| h["sort"][0].clone()).collect();
    assert_eq!(
        sorts,
        [
            json!(1_540_815_132_987_654_321_i64),
            json!(1_540_815_132_500_250_000_i64),
            json!(1_540_815_132_123_456_789_i64)
        ]
    );
    assert_eq!(hits[0]["_source"]["at"], "2018-10-29T12:12:12.987654321Z");
    assert_eq!(hits[1]["_source"]["at"], "2018-10-29T12:12:12.500250Z");
    // search_after in nanoseconds, and in the field's format.
    let after =
        search(json!({"sort": [{"at": "desc"}], "search_after": [1_540_815_132_987_654_321_i64]}))
            .await;
    assert_eq!(after[0]["_id"], "2", "{after:?}");
    let micros = search(json!({"sort": [{"micros": "desc"}], "size": 1})).await;
    assert_eq!(micros[0]["_source"]["micros"], "2019-10-21 08:30:04.828733");
    assert_eq!(micros[0]["sort"][0], json!(1_571_646_604_828_733_000_i64));
    let next = search(json!({"sort": [{"micros": "desc"}], "size": 1, "search_after": ["2019-10-21 08:30:04.828733"]})).await;
    assert_eq!(
        next[0]["_source"]["micros"], "2019-10-21 00:30:04.828740",
        "{next:?}"
    );
    // Doc values in date formats.
    let fields = search(json!({
        "query": {"ids": {"values": ["0"]}},
        "docvalue_fields": [
            {"field": "at", "format": "strict_date_optional_time"},
            {"field": "at", "format": "epoch_millis"},
            {"field": "at", "format": "uuuu-MM-dd'T'HH:mm:ss.SSSSSSSSSX"},
        ],
    }))
    .await;
    assert_eq!(
        fields[0]["fields"]["at"],
        json!([
            "2018-10-29T12:12:12.123Z",
            "1540815132123.456789",
            "2018-10-29T12:12:12.123456789Z"
        ])
    );
    // Dates before 1970 do not fit.
    let refused = client
        .send_ndjson(
            "POST",
            "/nanos/_bulk",
            &[json!({"index": {}}), json!({"at": "1969-10-28T12:12:12Z"})],
        )
        .await;
    let error = &refused.body["items"][0]["index"]["error"];
    assert!(
        error["caused_by"]["reason"]
            .as_str()
            .unwrap()
            .contains("before the epoch"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn half_floats_sort_and_match_at_their_precision() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let records: Vec<Value> = [184.4, 194.4, 144.4]
        .iter()
        .map(|p| json!({"population": p, "exact": p}))
        .collect();
    let properties = json!({"population": {"type": "half_float"}, "exact": {"type": "double"}});
    dataset_of(&client, "towns", properties, &records).await;
    let search = |body: Value| {
        let client = client.clone();
        async move {
            let answer = client.send("POST", "/towns/_search", Some(&body)).await;
            assert_eq!(answer.status, 200, "{answer:?}");
            answer.body["hits"]["hits"].as_array().unwrap().clone()
        }
    };
    // 184.4 is kept as the half-precision 184.375 for sorting; _source keeps 184.4.
    let hits =
        search(json!({"sort": [{"population": "asc"}], "size": 1, "search_after": [184.375]}))
            .await;
    assert_eq!(hits[0]["_source"]["population"], 194.4, "{hits:?}");
    let sorted = search(json!({"sort": [{"population": "asc"}]})).await;
    assert_eq!(sorted[1]["sort"][0], 184.375, "{sorted:?}");
    assert_eq!(sorted[1]["_source"]["population"], 184.4);
    // A term matches at the field's precision; a double field keeps every digit.
    assert_eq!(
        search(json!({"query": {"term": {"population": 184.4}}}))
            .await
            .len(),
        1
    );
    assert_eq!(
        search(json!({"query": {"term": {"exact": 184.375}}}))
            .await
            .len(),
        0
    );
}

#[tokio::test]
async fn index_settings_given_at_creation_limit_searches() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let root = root_user(dir.path(), "acme");
    let client = Signed::new(&server, &root);
    // Settings in each spelling; those that mean nothing here are accepted and not kept.
    let created = client
        .send(
            "PUT",
            "/narrow",
            Some(&json!({"settings": {
                "index.max_docvalue_fields_search": 2,
                "index": {"max_result_window": "50", "number_of_shards": 3},
            }})),
        )
        .await;
    assert_eq!(created.status, 200, "{created:?}");
    let wide = client
        .send(
            "PUT",
            "/wide",
            Some(&json!({"settings": {"max_result_window": 20000}})),
        )
        .await;
    assert_eq!(wide.status, 200, "{wide:?}");
    for name in ["narrow", "wide"] {
        let lines = [json!({"index": {"_id": "1"}}), json!({"foo": "bar"})];
        let written = client
            .send_ndjson("POST", &format!("/{name}/_bulk"), &lines)
            .await;
        assert_eq!(written.body["errors"], false, "{written:?}");
    }
    let shown = client.send("GET", "/narrow/_settings", None).await;
    assert_eq!(shown.status, 200, "{shown:?}");
    let index = &shown.body["narrow"]["settings"]["index"];
    assert_eq!(index["max_docvalue_fields_search"], "2", "{shown:?}");
    assert_eq!(index["max_result_window"], "50", "{shown:?}");
    assert_eq!(index["number_of_shards"], "1", "{shown:?}");
    assert_eq!(
        client.send("GET", "/wide", None).await.body["wide"]["settings"]["index"]["max_result_window"],
        "20000"
    );

    // The narrow dataset's limits refuse what the default ones allow, in Elasticsearch's words.
    for (body, needle) in [
        (
            json!({"docvalue_fields": ["one", "two", "three"]}),
            "Trying to retrieve too many docvalue_fields. Must be less than or equal to: [2] but was [3]. This limit can be set by changing the [index.max_docvalue_fields_search] index level setting.",
        ),
        (
            json!({"from": 45, "size": 10}),
            "Result window is too large, from + size must be less than or equal to: [50] but was [55].",
        ),
    ] {
        let refused = client.send("POST", "/narrow/_search", Some(&body)).await;
        assert_eq!(refused.status, 400, "{body}: {refused:?}");
        let message = refused.body["message"].as_str().unwrap();
        assert!(message.contains(needle), "{body}: {message}");
        // A search of several datasets is limited by each.
        let both = client
            .send("POST", "/narrow,wide/_search", Some(&body))
            .await;
        assert_eq!(both.status, 400, "{body}: {both:?}");
        let alone = client.send("POST", "/wide/_search", Some(&body)).await;
        assert_eq!(alone.status, 200, "{body}: {alone:?}");
    }
    let within = client
        .send(
            "POST",
            "/narrow/_search",
            Some(&json!({"docvalue_fields": ["foo.keyword", "_id"], "size": 50})),
        )
        .await;
    assert_eq!(within.status, 200, "{within:?}");
    assert_eq!(within.body["hits"]["total"]["value"], 1);
    // A window beyond the default one, where the dataset's setting allows it.
    let deep = client
        .send(
            "POST",
            "/wide/_search",
            Some(&json!({"from": 15000, "size": 10})),
        )
        .await;
    assert_eq!(deep.status, 200, "{deep:?}");
    assert_eq!(deep.body["hits"]["hits"], json!([]));
    let default = client
        .send(
            "POST",
            "/narrow,wide/_search",
            Some(&json!({"from": 15000})),
        )
        .await;
    assert_eq!(default.status, 400, "{default:?}");

    // A kept setting out of its range refuses the creation: no dataset is made.
    for settings in [
        json!({"index.max_result_window": 0}),
        json!({"index.max_result_window": 2_000_000}),
        json!({"index.max_docvalue_fields_search": "many"}),
    ] {
        let refused = client
            .send("PUT", "/refused", Some(&json!({ "settings": settings })))
            .await;
        assert_eq!(refused.status, 400, "{settings}: {refused:?}");
        let message = refused.body["message"].as_str().unwrap();
        assert!(message.contains("Failed to parse value"), "{message}");
        assert_eq!(client.send("HEAD", "/refused", None).await.status, 404);
    }
    // They are set at creation, not changed later.
    let changed = client
        .send(
            "PUT",
            "/narrow/_settings",
            Some(&json!({"index": {"max_result_window": 100}})),
        )
        .await;
    assert_eq!(changed.status, 400, "{changed:?}");

    // The settings are kept across a restart (they are in the dataset's creation event).
    drop(server);
    let server = Server::start(dir.path(), &[]);
    let client = Signed::new(&server, &root);
    let refused = client
        .send(
            "POST",
            "/narrow/_search",
            Some(&json!({"from": 45, "size": 10})),
        )
        .await;
    assert_eq!(refused.status, 400, "{refused:?}");
}

/// `_id` is a keyword, as in Elasticsearch: a match-family query on it matches the whole id,
/// a query that names no field does not read it, and bulk updates, overwrites and deletes find
/// records by it in a segment as in the memtable.
#[tokio::test]
async fn the_id_is_a_keyword_in_segments_and_the_memtable() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--set", "tables.flush_rows=7"]);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let line = |i: usize| {
        let message = match i {
            0 => "web server started",
            _ => "request served",
        };
        [
            json!({"index": {"_id": format!("web-{i}")}}),
            json!({"message": message, "n": i}),
        ]
    };
    // Seven records go to a segment, three stay in the memtable.
    let first: Vec<Value> = (0..7).flat_map(line).collect();
    let second: Vec<Value> = (7..10).flat_map(line).collect();
    in_a_segment_then_the_memtable(&client, dir.path(), "site", &first, &second).await;

    let found = |query: Value| {
        let client = &client;
        async move {
            let body = json!({"query": query, "size": 20});
            let answer = client.send("POST", "/site/_search", Some(&body)).await;
            assert_eq!(answer.status, 200, "{body}: {answer:?}");
            answer.body["hits"]["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|hit| hit["_id"].as_str().unwrap().to_owned())
                .collect::<BTreeSet<String>>()
        }
    };
    let named = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let every: BTreeSet<String> = (0..10).map(|i| format!("web-{i}")).collect();
    let cases: Vec<(Value, BTreeSet<String>)> = vec![
        // The whole id, not its words "web" and "3".
        (json!({"match": {"_id": "web-3"}}), named(&["web-3"])),
        (json!({"match": {"_id": "web-8"}}), named(&["web-8"])),
        (json!({"match": {"_id": "web"}}), named(&[])),
        (json!({"match_phrase": {"_id": "web-5"}}), named(&["web-5"])),
        (json!({"match_bool_prefix": {"_id": "web-"}}), every.clone()),
        // The id whole, and the message's words ("web" of "web server started").
        (
            json!({"multi_match": {"query": "web-9", "fields": ["_id", "message"]}}),
            named(&["web-0", "web-9"]),
        ),
        (
            json!({"query_string": {"query": "_id:\"web-1\" OR _id:\"web-7\""}}),
            named(&["web-1", "web-7"]),
        ),
        // A query that names no field reads the record's strings, not its id.
        (json!({"query_string": {"query": "web"}}), named(&["web-0"])),
        (
            json!({"simple_query_string": {"query": "web"}}),
            named(&["web-0"]),
        ),
        (json!({"multi_match": {"query": "web"}}), named(&["web-0"])),
        (
            json!({"ids": {"values": ["web-2", "web-9"]}}),
            named(&["web-2", "web-9"]),
        ),
        (json!({"term": {"_id": "web-6"}}), named(&["web-6"])),
        // Numbers are matched as `term` matches them, in a query string too.
        (json!({"query_string": {"query": "n:3"}}), named(&["web-3"])),
        (
            json!({"query_string": {"query": "n:8 OR message:started"}}),
            named(&["web-0", "web-8"]),
        ),
        (json!({"match": {"n": 4}}), named(&["web-4"])),
    ];
    for (query, expected) in cases {
        assert_eq!(found(query.clone()).await, expected, "{query}");
    }

    // Records of the segment updated, overwritten and deleted by id through `_bulk`.
    let changes = [
        json!({"update": {"_id": "web-2"}}),
        json!({"doc": {"message": "updated"}}),
        json!({"index": {"_id": "web-4"}}),
        json!({"message": "replaced", "n": 40}),
        json!({"delete": {"_id": "web-5"}}),
        json!({"update": {"_id": "web-9"}}),
        json!({"doc": {"message": "updated"}}),
    ];
    let written = client.send_ndjson("POST", "/site/_bulk", &changes).await;
    assert_eq!(written.body["errors"], false, "{written:?}");
    let results: Vec<&str> = written.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let (_, outcome) = item.as_object().unwrap().iter().next().unwrap();
            outcome["result"].as_str().unwrap()
        })
        .collect();
    assert_eq!(results, ["updated", "updated", "deleted", "updated"]);
    let updated = found(json!({"match": {"message": "updated"}})).await;
    assert_eq!(updated, named(&["web-2", "web-9"]));
    let replaced = found(json!({"match": {"_id": "web-4"}})).await;
    assert_eq!(replaced, named(&["web-4"]));
    let count = client.send("GET", "/site/_count", None).await;
    assert_eq!(count.body["count"], 9, "{count:?}");
    let source = client.send("GET", "/site/_doc/web-2", None).await;
    assert_eq!(source.status, 200, "{source:?}");
    let kept = &source.body["_source"];
    assert_eq!(
        (&kept["message"], &kept["n"]),
        (&json!("updated"), &json!(2))
    );
    assert_eq!(
        found(json!({"ids": {"values": ["web-5"]}})).await,
        named(&[])
    );
}

/// A dataset nobody searches indexes its records in the background as a bulk load comes in
/// (`tables.index_rows` at a time), and its flush copies those indexes into the segment's:
/// the segment's document index holds several tantivy segments, and an alive bitset for the
/// records deleted and replaced before the flush. Searches then find each live record once.
#[tokio::test]
async fn a_bulk_loads_records_are_indexed_in_the_background_and_copied_by_the_flush() {
    let dir = tempfile::tempdir().unwrap();
    let settings = [
        "--set",
        "tables.index_rows=20",
        "--set",
        "tables.flush_rows=230",
    ];
    let server = Server::start(dir.path(), &settings);
    let client = Signed::new(&server, &root_user(dir.path(), "acme"));
    let record = |i: usize| {
        [
            json!({"index": {"_id": format!("r{i}")}}),
            json!({"message": format!("record {i} loaded"), "n": i}),
        ]
    };
    let bulk = |lines: Vec<Value>| {
        let client = &client;
        async move {
            let written = client.send_ndjson("POST", "/load/_bulk", &lines).await;
            assert_eq!(written.status, 200, "{written:?}");
            assert_eq!(written.body["errors"], false, "{written:?}");
        }
    };
    for first in (0..200).step_by(20) {
        bulk((first..first + 20).flat_map(record).collect()).await;
    }
    // A record deleted and one replaced, both among the first indexed, then the rest: 230
    // rows (the replaced record's two versions) make the flush.
    bulk(vec![
        json!({"delete": {"_id": "r5"}}),
        json!({"index": {"_id": "r17"}}),
        json!({"message": "record 17 changed", "n": 17}),
    ])
    .await;
    bulk((200..229).flat_map(record).collect()).await;
    let indexes = dir.path().join("indexes");
    let flushed = || {
        let indexes = indexes.clone();
        async move { docs_files(&indexes, "idx") > 0 }
    };
    assert!(
        common::eventually(30, flushed).await,
        "no segment was flushed"
    );
    assert_eq!(docs_dirs(&indexes), 1, "one segment");
    let tantivy_segments = docs_files(&indexes, "idx");
    assert!(
        tantivy_segments >= 2,
        "{tantivy_segments} tantivy segment(s)"
    );
    assert!(docs_files(&indexes, "del") >= 1, "no alive bitset");

    let search = |query: Value| {
        let client = &client;
        async move {
            let body = json!({"query": query, "size": 300});
            let answer = client.send("POST", "/load/_search", Some(&body)).await;
            assert_eq!(answer.status, 200, "{body}: {answer:?}");
            let hits = answer.body["hits"]["hits"].as_array().unwrap().clone();
            assert_eq!(answer.body["hits"]["total"]["value"], hits.len(), "{body}");
            hits.iter()
                .map(|hit| hit["_id"].as_str().unwrap().to_owned())
                .collect::<Vec<String>>()
        }
    };
    let mut every = search(json!({"match_all": {}})).await;
    every.sort();
    let mut expected: Vec<String> = (0..229)
        .filter(|i| *i != 5)
        .map(|i| format!("r{i}"))
        .collect();
    expected.sort();
    assert_eq!(every, expected, "each live record once");
    assert_eq!(
        search(json!({"match": {"message": "changed"}})).await,
        ["r17"]
    );
    assert_eq!(
        search(json!({"match_phrase": {"message": "record 17"}})).await,
        ["r17"]
    );
    assert!(search(json!({"term": {"n": 5}})).await.is_empty());
    let counted = client.send("GET", "/load/_count", None).await;
    assert_eq!(counted.body["count"], 228, "{counted:?}");
}
