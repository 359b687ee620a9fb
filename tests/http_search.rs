//! Search over HTTP, against the real binary: bm25_search, token_match, exact_match, count and
//! hybrid_search, their 400s, read-your-writes, indexes across restarts, and a differential test
//! of BM25 and k-NN against brute force computed here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::{collections::HashMap, path::Path, time::SystemTime};

use common::{Answer, Client, Server, account_with_key};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::{Value, json};

fn assert_error(answer: &Answer, status: u16, needle: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    let message = answer.body["message"].as_str().unwrap_or("");
    assert!(message.contains(needle), "{needle:?} not in {answer:?}");
}

fn docs() -> Value {
    json!({
        "name": "docs",
        "schema": [
            {"name": "title", "type": "utf8", "nullable": true},
            {"name": "body", "type": "utf8", "nullable": true},
            {"name": "tag", "type": "utf8", "nullable": true},
            {"name": "year", "type": "int32", "nullable": true},
            {"name": "emb", "type": "vector<float32,3>", "nullable": true}
        ],
        "fts_columns": ["title", "body"],
        "exact_columns": ["tag", "year"],
        "vector_column": "emb",
        "vector_metric": "cosine"
    })
}

fn sample() -> Value {
    json!([
        {"title": "The quick brown fox", "body": "jumps over the lazy dog", "tag": "animal", "year": 2020, "emb": [1.0, 0.0, 0.0]},
        {"title": "Lazy afternoons", "body": "a dog sleeps in the sun", "tag": "animal", "year": 2021, "emb": [0.9, 0.1, 0.0]},
        {"title": "Rust in production", "body": "memory safety without garbage collection", "tag": "tech", "year": 2021, "emb": [0.0, 1.0, 0.0]},
        {"title": "Foxes of the north", "body": "the red fox hunts at dawn", "tag": "animal", "year": 2019, "emb": [0.7, 0.0, 0.7]},
        {"title": "Search engines", "body": "BM25 ranks documents by term frequency", "tag": "tech", "year": 2022, "emb": [0.0, 0.8, 0.6]},
        {"title": null, "body": null, "tag": null, "year": null, "emb": null}
    ])
}

async fn setup(client: &Client) {
    assert_eq!(client.create_database("lib").await.status, 201);
    assert_eq!(client.create_table("lib", &docs()).await.status, 200);
    let answer = client
        .post_json("/v1/append/lib?table=docs", &json!({ "data": sample() }))
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
}

fn start(extra: &[&str]) -> (tempfile::TempDir, Server, String) {
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let server = Server::start(dir.path(), extra);
    (dir, server, key)
}

fn rows(answer: &Answer) -> Vec<Value> {
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["data"].as_array().unwrap().clone()
}

fn ids(rows: &[Value]) -> Vec<u64> {
    rows.iter()
        .map(|r| r["_row_id"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn bm25_token_exact_count_and_hybrid() {
    let (_dir, server, key) = start(&[]);
    let client = server.client(&key);
    setup(&client).await;

    // BM25 over both columns: the two fox documents, best first.
    let found = rows(
        &client
            .post_json(
                "/v1/bm25_search/lib",
                &json!({"table": "docs", "query": "fox"}),
            )
            .await,
    );
    assert_eq!(ids(&found).len(), 2);
    let mut scores: Vec<f64> = found
        .iter()
        .map(|r| r["_score"].as_f64().unwrap())
        .collect();
    assert!(scores[0] >= scores[1] && scores[1] > 0.0, "{scores:?}");
    assert!(
        found
            .iter()
            .all(|r| r.get("title").is_some() && r.get("emb").is_some())
    );
    // One column only, with projection, paging and a filter.
    let only_title = rows(
        &client
            .post_json(
                "/v1/bm25_search/lib",
                &json!({"table": "docs", "query": "fox", "column": "title", "columns": ["title"]}),
            )
            .await,
    );
    assert_eq!(ids(&only_title), vec![0]);
    assert_eq!(
        only_title[0].as_object().unwrap().len(),
        3,
        "{only_title:?}"
    ); // _row_id, title, _score
    let second = rows(
        &client
            .post_json(
                "/v1/bm25_search/lib",
                &json!({"table": "docs", "query": "fox", "limit": 1, "offset": 1}),
            )
            .await,
    );
    assert_eq!(ids(&second), ids(&found)[1..].to_vec());
    let filtered = rows(
        &client
            .post_json(
                "/v1/bm25_search/lib",
                &json!({"table": "docs", "query": "fox dog", "filter": "year >= 2020"}),
            )
            .await,
    );
    assert!(
        filtered.iter().all(|r| r["year"].as_i64().unwrap() >= 2020),
        "{filtered:?}"
    );
    assert_eq!(filtered.len(), 2);
    // Arrow IPC by default.
    let response = client
        .http
        .post(format!("{}/v1/bm25_search/lib", client.base))
        .bearer_auth(&key)
        .json(&json!({"table": "docs", "query": "fox"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"],
        "application/vnd.apache.arrow.stream"
    );
    let bytes = response.bytes().await.unwrap();
    let reader =
        arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes.to_vec()), None)
            .unwrap();
    assert!(reader.schema().field_with_name("_score").is_ok());
    let n: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(n, 2);

    // count is the number of rows BM25 can page through.
    for query in ["fox", "the", "dog fox", "nothing-here"] {
        let count = client
            .post_json("/v1/count/lib", &json!({"table": "docs", "query": query}))
            .await;
        assert_eq!(count.status, 200, "{count:?}");
        let all = rows(
            &client
                .post_json(
                    "/v1/bm25_search/lib",
                    &json!({"table": "docs", "query": query, "limit": 10000}),
                )
                .await,
        );
        assert_eq!(
            count.body["count"].as_u64().unwrap(),
            all.len() as u64,
            "{query}"
        );
    }
    scores.clear();

    // token_match: any / all, in row-id order.
    let any = rows(
        &client
            .post_json(
                "/v1/token_match/lib",
                &json!({"table": "docs", "column": "body", "tokens": ["DOG", "fox"]}),
            )
            .await,
    );
    assert_eq!(ids(&any), vec![0, 1, 3]);
    let all = rows(
        &client.post_json("/v1/token_match/lib",
            &json!({"table": "docs", "column": "body", "tokens": ["dog", "lazy"], "mode": "all"}),
        )
        .await,
    );
    assert_eq!(ids(&all), vec![0]);
    let limited = rows(
        &client
            .post_json(
                "/v1/token_match/lib",
                &json!({"table": "docs", "column": "body", "tokens": ["the"], "limit": 1}),
            )
            .await,
    );
    assert_eq!(ids(&limited), vec![0]);

    // exact_match on a string and on an integer column.
    let animals = rows(
        &client
            .post_json(
                "/v1/exact_match/lib",
                &json!({"table": "docs", "column": "tag", "value": "animal"}),
            )
            .await,
    );
    assert_eq!(ids(&animals), vec![0, 1, 3]);
    let year = rows(
        &client.post_json("/v1/exact_match/lib",
            &json!({"table": "docs", "column": "year", "value": 2021, "filter": "tag = 'tech'"}),
        )
        .await,
    );
    assert_eq!(ids(&year), vec![2]);
    let none = rows(
        &client
            .post_json(
                "/v1/exact_match/lib",
                &json!({"table": "docs", "column": "tag", "value": "Animal"}),
            )
            .await,
    );
    assert!(none.is_empty());

    // hybrid: ranks from each list, fused score = sum of weight / (k + rank).
    let bm25 = ids(&rows(
        &client
            .post_json(
                "/v1/bm25_search/lib",
                &json!({"table": "docs", "query": "fox dog", "limit": 100}),
            )
            .await,
    ));
    let hybrid = rows(
        &client
            .post_json(
                "/v1/hybrid_search/lib",
                &json!({
                    "table": "docs", "query": "fox dog", "vector": [0.0, 1.0, 0.1], "rrf_k": 10,
                    "weights": {"bm25": 2.0, "vector": 1.0}, "limit": 10
                }),
            )
            .await,
    );
    assert_eq!(hybrid.len(), 5, "{hybrid:?}");
    let mut last = f64::INFINITY;
    for row in &hybrid {
        let id = row["_row_id"].as_u64().unwrap();
        let bm25_rank = row["_bm25_rank"].as_u64();
        let vector_rank = row["_vector_rank"].as_u64();
        assert_eq!(
            bm25_rank,
            bm25.iter().position(|b| *b == id).map(|p| p as u64 + 1),
            "{row}"
        );
        let expected = bm25_rank.map_or(0.0, |r| 2.0 / (10.0 + r as f64))
            + vector_rank.map_or(0.0, |r| 1.0 / (10.0 + r as f64));
        let score = row["_score"].as_f64().unwrap();
        assert!((score - expected).abs() < 1e-5, "{row}: {expected}");
        assert!(score <= last);
        last = score;
    }
    // The nearest vector to [0, 1, 0.1] is row 2 (rank 1 of the vector list).
    let row2 = hybrid.iter().find(|r| r["_row_id"] == 2).unwrap();
    assert_eq!(row2["_vector_rank"], 1);
    assert!(row2["_bm25_rank"].is_null());
}

#[tokio::test]
async fn searches_see_every_write_and_never_a_deleted_row() {
    // Tiny flushes: rows move into segments (and their indexes) between requests.
    let (_dir, server, key) = start(&[
        "--set",
        "tables.flush_rows=2",
        "--set",
        "tables.compact_min_segments=3",
    ]);
    let client = server.client(&key);
    setup(&client).await;
    for round in 0..6 {
        let rows_in = json!([{"title": format!("fresh words round{round}"), "tag": "new", "emb": [0.0, 0.0, 1.0]}]);
        let appended = client
            .post_json("/v1/append/lib?table=docs", &json!({ "data": rows_in }))
            .await;
        let id = appended.body["data"][0]["_row_id"].as_u64().unwrap();
        let found = rows(
            &client
                .post_json(
                    "/v1/bm25_search/lib",
                    &json!({"table": "docs", "query": format!("round{round}")}),
                )
                .await,
        );
        assert_eq!(ids(&found), vec![id], "round {round}");
        let exact = rows(
            &client
                .post_json(
                    "/v1/exact_match/lib",
                    &json!({"table": "docs", "column": "tag", "value": "new", "limit": 100}),
                )
                .await,
        );
        assert_eq!(exact.len(), round + 1);
    }
    // Update a row: the old text no longer matches, the new one does, under the same row id.
    let predicate = "title%20%3D%20%27Lazy%20afternoons%27";
    let updated = client.post_json(&format!("/v1/update/lib?table=docs&predicate={predicate}"),
        &json!({"data": [{"title": "Busy mornings", "body": "coffee", "tag": "animal", "year": 2021, "emb": [0.0, 1.0, 0.0]}]}),
    )
    .await;
    assert_eq!(updated.status, 200, "{updated:?}");
    let old = rows(
        &client
            .post_json(
                "/v1/bm25_search/lib",
                &json!({"table": "docs", "query": "afternoons"}),
            )
            .await,
    );
    assert!(old.is_empty(), "{old:?}");
    let new = rows(
        &client
            .post_json(
                "/v1/bm25_search/lib",
                &json!({"table": "docs", "query": "coffee"}),
            )
            .await,
    );
    assert_eq!(ids(&new), vec![1]);
    assert_eq!(
        client
            .post_json(
                "/v1/count/lib",
                &json!({"table": "docs", "query": "afternoons"})
            )
            .await
            .body["count"],
        0
    );
    // Delete: gone from every search.
    let deleted = client
        .post_empty("/v1/delete/lib?table=docs&predicate=tag%20%3D%20%27animal%27")
        .await;
    assert_eq!(deleted.status, 200, "{deleted:?}");
    let fox = rows(
        &client
            .post_json(
                "/v1/bm25_search/lib",
                &json!({"table": "docs", "query": "fox dog coffee"}),
            )
            .await,
    );
    assert!(fox.is_empty(), "{fox:?}");
    let tokens = rows(
        &client
            .post_json(
                "/v1/token_match/lib",
                &json!({"table": "docs", "column": "body", "tokens": ["dog"]}),
            )
            .await,
    );
    assert!(tokens.is_empty());
    let exact = rows(
        &client
            .post_json(
                "/v1/exact_match/lib",
                &json!({"table": "docs", "column": "tag", "value": "animal"}),
            )
            .await,
    );
    assert!(exact.is_empty());
    let hybrid = rows(
        &client
            .post_json(
                "/v1/hybrid_search/lib",
                &json!({"table": "docs", "query": "fox", "vector": [1.0, 0.0, 0.0], "limit": 100}),
            )
            .await,
    );
    assert!(hybrid.iter().all(|r| r["tag"] != "animal"), "{hybrid:?}");
    // Left: rows 2 and 4 and the six fresh ones with a vector (row 5 has none).
    assert_eq!(hybrid.len(), 8, "{hybrid:?}");
}

#[tokio::test]
async fn bad_searches_are_400s_naming_the_problem() {
    let (_dir, server, key) = start(&[]);
    let client = server.client(&key);
    setup(&client).await;
    let cases = [
        (
            "/v1/bm25_search/lib",
            json!({"table": "docs", "query": "x", "column": "tag"}),
            "not full-text indexed",
        ),
        (
            "/v1/bm25_search/lib",
            json!({"table": "docs", "query": "x", "filter": "nope > 1"}),
            "invalid filter",
        ),
        (
            "/v1/bm25_search/lib",
            json!({"table": "docs", "query": "x", "filter": "year"}),
            "invalid filter",
        ),
        (
            "/v1/bm25_search/lib",
            json!({"table": "docs", "query": "x", "columns": ["nope"]}),
            "nope",
        ),
        (
            "/v1/bm25_search/lib",
            json!({"table": "docs", "query": "x", "limit": 20000}),
            "at most",
        ),
        ("/v1/bm25_search/lib", json!({"table": "docs"}), "query"),
        (
            "/v1/bm25_search/lib",
            json!({"table": "docs", "query": "x", "bogus": 1}),
            "bogus",
        ),
        (
            "/v1/token_match/lib",
            json!({"table": "docs", "column": "year", "tokens": ["x"]}),
            "not full-text indexed",
        ),
        (
            "/v1/token_match/lib",
            json!({"table": "docs", "column": "body", "tokens": []}),
            "tokens",
        ),
        (
            "/v1/token_match/lib",
            json!({"table": "docs", "column": "body", "tokens": ["x"], "mode": "some"}),
            "some",
        ),
        (
            "/v1/exact_match/lib",
            json!({"table": "docs", "column": "title", "value": "x"}),
            "not exact-match indexed",
        ),
        (
            "/v1/exact_match/lib",
            json!({"table": "docs", "column": "year", "value": "2020"}),
            "year",
        ),
        (
            "/v1/exact_match/lib",
            json!({"table": "docs", "column": "tag", "value": ["a"]}),
            "scalar",
        ),
        (
            "/v1/hybrid_search/lib",
            json!({"table": "docs", "query": "x", "vector": [1.0, 2.0]}),
            "dimension 3",
        ),
        (
            "/v1/hybrid_search/lib",
            json!({"table": "docs", "query": "x", "vector": [1.0, 2.0, 3.0], "column": "tag"}),
            "not full-text indexed",
        ),
        (
            "/v1/hybrid_search/lib",
            json!({"table": "docs", "query": "x", "vector": [1.0, 2.0, 3.0], "rrf_k": -1}),
            "rrf_k",
        ),
        (
            "/v1/count/lib",
            json!({"table": "docs", "query": "x", "column": "emb"}),
            "not full-text indexed",
        ),
    ];
    for (path, body, needle) in cases {
        let answer = client.post_json(path, &body).await;
        assert_error(&answer, 400, needle);
    }
    // A table without indexes, and one that does not exist.
    let plain = json!({"name": "plain", "schema": [{"name": "a", "type": "utf8"}]});
    assert_eq!(client.create_table("lib", &plain).await.status, 200);
    let answer = client
        .post_json(
            "/v1/bm25_search/lib",
            &json!({"table": "plain", "query": "x"}),
        )
        .await;
    assert_error(&answer, 400, "no full-text columns");
    let answer = client
        .post_json(
            "/v1/hybrid_search/lib",
            &json!({"table": "plain", "query": "x", "vector": [1.0]}),
        )
        .await;
    assert_error(&answer, 400, "full-text");
    let answer = client
        .post_json("/v1/count/lib", &json!({"table": "missing", "query": "x"}))
        .await;
    assert_eq!(answer.status, 404, "{answer:?}");
    // A vector of the wrong dimension is refused at append too, and nothing is applied.
    let answer = client
        .post_json(
            "/v1/append/lib?table=docs",
            &json!({"data": [{"title": "x", "emb": [1.0]}]}),
        )
        .await;
    assert_error(&answer, 400, "emb");
}

/// How many segment index directories (named by the segment's number) are under `dir`.
/// The rows of every Parquet segment file under `tables` (0 for a file being written).
fn segment_rows(tables: &Path) -> usize {
    let mut rows = 0;
    let mut stack = vec![tables.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                rows += std::fs::File::open(&path)
                    .ok()
                    .and_then(|f| parquet::file::reader::SerializedFileReader::new(f).ok())
                    .map_or(0, |r| {
                        use parquet::file::reader::FileReader;
                        r.metadata().file_metadata().num_rows() as usize
                    });
            }
        }
    }
    rows
}

fn segment_dirs(dir: &Path) -> usize {
    let mut count = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten() {
            let entry = entry.unwrap();
            if entry.metadata().unwrap().is_dir() {
                let name = entry.file_name().to_string_lossy().to_string();
                if name.len() == 12 && name.chars().all(|c| c.is_ascii_digit()) {
                    count += 1;
                } else {
                    stack.push(entry.path());
                }
            }
        }
    }
    count
}

/// Every file under `dir` with its modification time.
fn files(dir: &Path) -> HashMap<String, SystemTime> {
    let mut out = HashMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                out.insert(entry.path().display().to_string(), meta.modified().unwrap());
            }
        }
    }
    out
}

#[tokio::test]
async fn indexes_come_back_after_a_restart_without_a_rebuild() {
    // Every segment gets an HNSW graph (no exact fallback), so the graph is what is reloaded.
    // A search examines every node of these small graphs (ef_search above the row count), so
    // its answer does not depend on which rows sit in the graphs and which in the memtable.
    let args = [
        "--set",
        "tables.flush_rows=50",
        "--set",
        "tables.vector_graph_min_rows=0",
        "--set",
        "tables.hnsw_ef_search=1000",
    ];
    let dir = tempfile::tempdir().unwrap();
    let key = account_with_key(dir.path(), "acme", None);
    let mut server = Server::start(dir.path(), &args);
    let client = server.client(&key);
    setup(&client).await;
    let mut rng = StdRng::seed_from_u64(7);
    let words = ["alpha", "beta", "gamma", "delta", "omega", "sigma"];
    for _ in 0..4 {
        let batch: Vec<Value> = (0..60)
            .map(|_| {
                let text: Vec<&str> = (0..5)
                    .map(|_| words[rng.random_range(0..words.len())])
                    .collect();
                json!({"title": text.join(" "), "tag": words[rng.random_range(0..3)],
                       "emb": [rng.random::<f32>(), rng.random::<f32>(), rng.random::<f32>()]})
            })
            .collect();
        assert_eq!(
            client
                .post_json("/v1/append/lib?table=docs", &json!({ "data": batch }))
                .await
                .status,
            200
        );
    }
    let queries = [
        (
            "/v1/bm25_search/lib",
            json!({"table": "docs", "query": "alpha omega", "limit": 20}),
        ),
        (
            "/v1/hybrid_search/lib",
            json!({"table": "docs", "query": "beta", "vector": [0.2, 0.5, 0.9], "limit": 20}),
        ),
        (
            "/v1/exact_match/lib",
            json!({"table": "docs", "column": "tag", "value": "gamma", "limit": 500}),
        ),
        ("/v1/count/lib", json!({"table": "docs", "query": "sigma"})),
    ];
    // Wait until every row is in a segment (each indexed before its manifest names it) and
    // no flush is left, so the restart reopens exactly the state the answers came from.
    let indexes = dir.path().join("indexes");
    let tables = dir.path().join("tables");
    let mut settled = 0;
    assert!(
        common::eventually(20, || {
            let rows = segment_rows(&tables);
            settled = if rows == sample().as_array().unwrap().len() + 240 {
                settled + 1
            } else {
                0
            };
            async move { settled >= 3 }
        })
        .await,
        "the rows did not settle into segments: {}",
        std::fs::read_to_string(&server.log).unwrap_or_default()
    );
    assert!(segment_dirs(&indexes) >= 1);
    let mut before = Vec::new();
    for (path, body) in &queries {
        before.push(client.post_json(path, body).await.body);
    }
    assert!(server.stop());
    let written = files(&indexes);

    let server = Server::start(dir.path(), &args);
    let client = server.client(&key);
    for ((path, body), expected) in queries.iter().zip(&before) {
        assert_eq!(&client.post_json(path, body).await.body, expected, "{path}");
    }
    let after = files(&indexes);
    for (path, modified) in &written {
        assert_eq!(
            after.get(path),
            Some(modified),
            "{path} was rebuilt or changed on restart"
        );
    }
    drop(server);

    // A lost index directory is rebuilt from the segments, with the same answers.
    std::fs::remove_dir_all(&indexes).unwrap();
    let server = Server::start(dir.path(), &args);
    let client = server.client(&key);
    for ((path, body), expected) in queries.iter().zip(&before) {
        let answer = client.post_json(path, body).await;
        if path.contains("hybrid") {
            // A rebuilt graph may order near-equal neighbours differently; the rows are the same.
            let mut got = ids(answer.body["data"].as_array().unwrap());
            let mut want = ids(expected["data"].as_array().unwrap());
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want);
        } else {
            assert_eq!(&answer.body, expected, "{path}");
        }
    }
    assert!(!files(&indexes).is_empty());
}

/// The analyzer of the full-text columns, as docs/api.md describes it.
fn analyze(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty() && t.len() <= 40)
        .map(str::to_lowercase)
        .collect()
}

/// BM25 (k1 = 1.2, b = 0.75) of every document for a query over one column.
fn brute_bm25(docs: &[(u64, String)], query: &str) -> Vec<(u64, f64)> {
    let (k1, b) = (1.2, 0.75);
    let analyzed: Vec<(u64, Vec<String>)> = docs.iter().map(|(id, t)| (*id, analyze(t))).collect();
    let n = analyzed.len() as f64;
    let avg = analyzed.iter().map(|(_, t)| t.len()).sum::<usize>() as f64 / n;
    let mut terms = analyze(query);
    terms.sort();
    terms.dedup();
    let mut out = Vec::new();
    for (id, tokens) in &analyzed {
        let mut score = 0.0;
        for term in &terms {
            let df = analyzed.iter().filter(|(_, t)| t.contains(term)).count() as f64;
            let tf = tokens.iter().filter(|t| *t == term).count() as f64;
            if tf == 0.0 {
                continue;
            }
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            score += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * tokens.len() as f64 / avg));
        }
        if score > 0.0 {
            out.push((*id, score));
        }
    }
    out.sort_by(|a, c| c.1.total_cmp(&a.1).then(a.0.cmp(&c.0)));
    out
}

/// Checks a ranked answer against the brute-force ranking: every returned row has its exact
/// score, scores do not increase, and the rows are the top k (up to ties at the cut).
fn check_ranking(
    got: &[(u64, f64)],
    want: &[(u64, f64)],
    k: usize,
    lower_is_better: bool,
    context: &str,
) {
    let expected: HashMap<u64, f64> = want.iter().copied().collect();
    assert_eq!(
        got.len(),
        want.len().min(k),
        "{context}: {got:?} vs {want:?}"
    );
    let tolerance = |x: f64| 1e-4 * x.abs().max(1.0);
    for pair in got.windows(2) {
        let (a, b) = (pair[0].1, pair[1].1);
        let ordered = if lower_is_better {
            a <= b + tolerance(b)
        } else {
            a + tolerance(a) >= b
        };
        assert!(ordered, "{context}: out of order {got:?}");
    }
    for (id, score) in got {
        let truth = expected
            .get(id)
            .unwrap_or_else(|| panic!("{context}: row {id} should not match"));
        assert!(
            (truth - score).abs() <= tolerance(*truth),
            "{context}: row {id} scored {score}, expected {truth}"
        );
    }
    if let Some(cut) = got.last().map(|(_, s)| *s) {
        for (id, score) in want {
            let clearly_better = if lower_is_better {
                *score < cut - tolerance(cut)
            } else {
                *score > cut + tolerance(cut)
            };
            if clearly_better {
                assert!(
                    got.iter().any(|(g, _)| g == id),
                    "{context}: row {id} ({score}) is missing from {got:?}"
                );
            }
        }
    }
}

fn distance(metric: &str, a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    match metric {
        "cosine" => {
            let na = a.iter().map(|x| x * x).sum::<f64>().sqrt();
            let nb = b.iter().map(|x| x * x).sum::<f64>().sqrt();
            1.0 - dot / (na * nb)
        }
        "l2" => a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y) * (x - y))
            .sum::<f64>()
            .sqrt(),
        _ => -dot,
    }
}

#[tokio::test]
async fn bm25_and_knn_equal_brute_force_on_random_tables() {
    // Small flushes: each table ends up spread over segments and the memtable.
    let (_dir, server, key) = start(&[
        "--set",
        "tables.flush_rows=13",
        "--set",
        "tables.compact_min_segments=4",
    ]);
    let client = server.client(&key);
    assert_eq!(client.create_database("rnd").await.status, 201);
    let vocabulary: Vec<String> = (0..25).map(|i| format!("w{i}")).collect();
    for seed in 0..6u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let metric = ["cosine", "l2", "dot"][seed as usize % 3];
        let table = format!("t{seed}");
        let definition = json!({
            "name": table,
            "schema": [{"name": "text", "type": "utf8"}, {"name": "v", "type": "vector<float32,4>"}],
            "fts_columns": ["text"], "vector_column": "v", "vector_metric": metric
        });
        assert_eq!(client.create_table("rnd", &definition).await.status, 200);
        let mut docs: Vec<(u64, String)> = Vec::new();
        let mut vectors: Vec<(u64, Vec<f64>)> = Vec::new();
        for _ in 0..rng.random_range(2..7) {
            let batch: Vec<(String, Vec<f32>)> = (0..rng.random_range(1..20))
                .map(|_| {
                    // Skewed word choice, so that frequencies differ.
                    let words: Vec<&str> = (0..rng.random_range(1..15))
                        .map(|_| vocabulary[(rng.random::<f64>().powi(2) * 25.0) as usize].as_str())
                        .collect();
                    let v: Vec<f32> = (0..4).map(|_| rng.random_range(-1.0f32..1.0)).collect();
                    (words.join(" "), v)
                })
                .collect();
            let data: Vec<Value> = batch
                .iter()
                .map(|(t, v)| json!({"text": t, "v": v}))
                .collect();
            let answer = client
                .post_json(
                    &format!("/v1/append/rnd?table={table}"),
                    &json!({ "data": data }),
                )
                .await;
            for ((text, v), row) in batch.into_iter().zip(rows(&answer)) {
                let id = row["_row_id"].as_u64().unwrap();
                docs.push((id, text));
                vectors.push((id, v.into_iter().map(f64::from).collect()));
            }
        }
        for _ in 0..8 {
            let query: Vec<&str> = (0..rng.random_range(1..4))
                .map(|_| vocabulary[rng.random_range(0..25)].as_str())
                .collect();
            let query = query.join(" ");
            let k = rng.random_range(1..12);
            let answer = client
                .post_json(
                    "/v1/bm25_search/rnd",
                    &json!({"table": table, "query": query, "limit": k}),
                )
                .await;
            let got: Vec<(u64, f64)> = rows(&answer)
                .iter()
                .map(|r| {
                    (
                        r["_row_id"].as_u64().unwrap(),
                        r["_score"].as_f64().unwrap(),
                    )
                })
                .collect();
            check_ranking(
                &got,
                &brute_bm25(&docs, &query),
                k,
                false,
                &format!("seed {seed} bm25 {query:?}"),
            );

            // k-NN through hybrid search with the BM25 side weighted 0: the vector ranks alone.
            let q: Vec<f32> = (0..4).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let answer = client
                .post_json(
                    "/v1/hybrid_search/rnd",
                    &json!({
                        "table": table, "query": "", "vector": q, "limit": k, "candidates": k,
                        "weights": {"bm25": 0.0, "vector": 1.0}
                    }),
                )
                .await;
            let q64: Vec<f64> = q.iter().map(|x| f64::from(*x)).collect();
            let by_id: HashMap<u64, &Vec<f64>> = vectors.iter().map(|(id, v)| (*id, v)).collect();
            let got: Vec<(u64, f64)> = rows(&answer)
                .iter()
                .map(|r| {
                    let id = r["_row_id"].as_u64().unwrap();
                    (id, distance(metric, &q64, by_id[&id]))
                })
                .collect();
            let mut want: Vec<(u64, f64)> = vectors
                .iter()
                .map(|(id, v)| (*id, distance(metric, &q64, v)))
                .collect();
            want.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            check_ranking(&got, &want, k, true, &format!("seed {seed} knn {metric}"));
        }
    }
}
