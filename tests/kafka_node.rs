//! One strata node on a Kafka-backed log (the broker scripts/test starts on loopback): what it
//! holds (accounts, keys, databases, tables, rows, full-text and vector indexes) comes back from
//! Kafka alone after its data directory is wiped.
//!
//! Runs on Kafka whatever STRATA_TEST_LOG says, and fails, never skips, without a broker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Client, Server, account_with_key, kafka_env, shop_with_docs};
use serde_json::{Value, json};

/// What the node answers: the tables, every row by id, a BM25 search, a vector search.
async fn answers(client: &Client) -> Value {
    let tables = client.list_tables("shop").await;
    assert_eq!(tables.status, 200, "{tables:?}");
    let rows = client
        .post_json(
            "/v1/query_sql/shop",
            &json!({"sql": "SELECT _row_id, title, year FROM docs ORDER BY _row_id"}),
        )
        .await;
    assert_eq!(rows.status, 200, "{rows:?}");
    let bm25 = client
        .post_json(
            "/v1/bm25_search/shop",
            &json!({"table": "docs", "query": "fox", "columns": ["title"]}),
        )
        .await;
    assert_eq!(bm25.status, 200, "{bm25:?}");
    let vector = client.post_json("/v1/hybrid_search/shop", &json!({"table": "docs", "query": "fox", "vector": [3.0, 1.0, 1.0, 0.5], "columns": ["title"], "limit": 5}))
        .await;
    assert_eq!(vector.status, 200, "{vector:?}");
    json!({"tables": tables.body, "rows": rows.body["data"], "bm25": bm25.body, "hybrid": vector.body})
}

#[tokio::test]
async fn a_node_with_a_wiped_data_directory_rebuilds_everything_from_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node");
    std::fs::create_dir_all(&data).unwrap();
    let kafka = kafka_env(&data);
    let flush = ["--set", "tables.flush_rows=8"];
    let mut server = Server::start_with(&data, &flush, &kafka);
    // Through the running server's admin socket, so into Kafka.
    let key = account_with_key(&data, "acme", None);
    let client = shop_with_docs(&server, &key).await;
    for batch in 0..4 {
        let rows: Vec<Value> = (0..5)
            .map(|i| {
                json!({
                    "title": format!("the {} fox {batch}-{i}", if i % 2 == 0 { "quick" } else { "lazy" }),
                    "body": "jumps over the dog",
                    "year": 2000 + batch,
                    "embedding": [batch as f32, i as f32, 1.0, 0.5],
                })
            })
            .collect();
        let answer = client
            .post_json("/v1/append/shop?table=docs", &json!({ "data": rows }))
            .await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    let answer = client
        .post_json(
            "/v1/update/shop?table=docs&predicate=_row_id%20%3D%203",
            &json!({"data": [{"title": "the renamed fox", "year": 1999}]}),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let answer = client
        .post_empty("/v1/delete/shop?table=docs&predicate=year%20%3D%202002")
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let before = answers(&client).await;
    assert_eq!(before["rows"].as_array().unwrap().len(), 15, "{before}");
    assert!(server.stop());

    // Nothing of the node is left on disk; Kafka has the log.
    std::fs::remove_dir_all(&data).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    let server = Server::start_with(&data, &flush, &kafka);
    let client = server.client(&key);
    assert_eq!(answers(&client).await, before);
    // And it goes on taking writes where the log left off.
    let answer = client
        .post_json(
            "/v1/append/shop?table=docs",
            &json!({"data": [{"title": "after the wipe"}]}),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["data"][0]["_row_id"], 20, "{answer:?}");
}
