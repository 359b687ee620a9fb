//! Tests of the Query DSL on a SQL source, over an in-memory table of eight records whose
//! timestamps are relative to the time the test runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{collections::BTreeSet, sync::Arc};

use arrow::{
    array::{
        ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, TimestampMillisecondArray,
    },
    datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit},
    record_batch::RecordBatch,
};
use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use datafusion::{
    catalog::{MemTable, Session, TableProvider},
    common::{
        ScalarValue,
        tree_node::{TreeNode, TreeNodeRecursion},
    },
    logical_expr::{LogicalPlan, TableProviderFilterPushDown, TableType},
    physical_plan::ExecutionPlan,
    prelude::{Expr, SessionContext},
};
use serde_json::{Value, json};

use super::{
    check,
    coerce::{self, Dates, Op, date_math},
    glob, prepare,
    query::{escape_like, wildcard_to_like},
    search,
};
use crate::error::Error;

/// Offsets of the records' `at` from the test's start, in minutes (`None`: no value).
const AT_MINUTES: [Option<i64>; 8] = [
    Some(-60),
    Some(-3 * 60),
    Some(-25 * 60),
    Some(-48 * 60),
    Some(-10),
    Some(-192 * 60),
    None,
    Some(2 * 60),
];

/// The records' `at`, in epoch milliseconds, for a test started at `now`.
fn at_millis(now: DateTime<Utc>) -> Vec<Option<i64>> {
    AT_MINUTES
        .iter()
        .map(|m| m.map(|m| (now + TimeDelta::minutes(m)).timestamp_millis()))
        .collect()
}

/// The table: id, host, status, bytes, ok, at.
///
/// | id | host   | status | bytes  | ok    | at         |
/// |----|--------|--------|--------|-------|------------|
/// | 1  | web-1  | 200    | 100    | true  | now-1h     |
/// | 2  | web-2  | 200    | 250.5  | true  | now-3h     |
/// | 3  | db-1   | 500    | 1000   | false | now-25h    |
/// | 4  | web_1% | 404    | 50     | false | now-48h    |
/// | 5  | web-1  | 301    | null   | true  | now-10m    |
/// | 6  | cache  | null   | 75     | null  | now-192h   |
/// | 7  | db-2   | 200    | 300    | true  | null       |
/// | 8  | null   | 503    | 10     | false | now+2h     |
fn batch(now: DateTime<Utc>) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("host", DataType::Utf8, true),
        Field::new("status", DataType::Int64, true),
        Field::new("bytes", DataType::Float64, true),
        Field::new("ok", DataType::Boolean, true),
        Field::new(
            "at",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from((1..=8).collect::<Vec<i64>>())),
        Arc::new(StringArray::from(vec![
            Some("web-1"),
            Some("web-2"),
            Some("db-1"),
            Some("web_1%"),
            Some("web-1"),
            Some("cache"),
            Some("db-2"),
            None,
        ])),
        Arc::new(Int64Array::from(vec![
            Some(200),
            Some(200),
            Some(500),
            Some(404),
            Some(301),
            None,
            Some(200),
            Some(503),
        ])),
        Arc::new(Float64Array::from(vec![
            Some(100.0),
            Some(250.5),
            Some(1000.0),
            Some(50.0),
            None,
            Some(75.0),
            Some(300.0),
            Some(10.0),
        ])),
        Arc::new(BooleanArray::from(vec![
            Some(true),
            Some(true),
            Some(false),
            Some(false),
            Some(true),
            None,
            Some(true),
            Some(false),
        ])),
        Arc::new(TimestampMillisecondArray::from(at_millis(now)).with_timezone("UTC")),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

/// The table as a [`MemTable`].
fn mem_table(now: DateTime<Utc>) -> MemTable {
    let batch = batch(now);
    MemTable::try_new(batch.schema(), vec![vec![batch]]).unwrap()
}

/// Runs `body` over the table with `hidden` columns.
async fn search_hidden(body: Value, hidden: &[&str]) -> crate::error::Result<Value> {
    let hidden: BTreeSet<String> = hidden.iter().map(|s| s.to_string()).collect();
    let table = Arc::new(mem_table(Utc::now()));
    search(&SessionContext::new(), table, "logs", &body, &hidden).await
}

/// Runs `body`, which must succeed.
async fn run(body: Value) -> Value {
    match search_hidden(body.clone(), &[]).await {
        Ok(response) => response,
        Err(e) => panic!("{body} failed: {e}"),
    }
}

/// The ids of the hits of `response`, in order.
fn hit_ids(response: &Value) -> Vec<i64> {
    hits(response)
        .iter()
        .map(|h| h["_source"]["id"].as_i64().unwrap())
        .collect()
}

/// The hits of `response`.
fn hits(response: &Value) -> &Vec<Value> {
    response["hits"]["hits"].as_array().unwrap()
}

/// The ids of the records `query` matches, sorted; also checks the total agrees.
async fn matching(query: Value) -> Vec<i64> {
    let response = run(json!({"query": query})).await;
    let mut ids = hit_ids(&response);
    ids.sort_unstable();
    assert_eq!(
        response["hits"]["total"]["value"],
        json!(ids.len()),
        "{query}"
    );
    ids
}

/// The message of the client error `body` must cause.
async fn refused_hidden(body: Value, hidden: &[&str]) -> String {
    match search_hidden(body.clone(), hidden).await {
        Err(Error::BadRequest(message)) => message,
        other => panic!("{body}: expected a client error, got {other:?}"),
    }
}

/// The message of the client error `body` must cause (nothing hidden).
async fn refused(body: Value) -> String {
    refused_hidden(body, &[]).await
}

/// The aggregations of `body`'s response.
async fn aggregations(body: Value) -> Value {
    run(body).await["aggregations"].clone()
}

// ---------------------------------------------------------------- response

#[tokio::test]
async fn match_all_answers_the_search_engine_shape() {
    let now = Utc::now();
    let response = run(json!({})).await;
    assert_eq!(response["timed_out"], json!(false));
    assert!(response["took"].is_u64());
    assert_eq!(
        response["hits"]["total"],
        json!({"value": 8, "relation": "eq"})
    );
    assert_eq!(response["hits"]["max_score"], json!(1.0));
    assert!(response.get("aggregations").is_none());
    let hits = hits(&response);
    assert_eq!(hits.len(), 8);
    let first = hits.iter().find(|h| h["_id"] == json!("1")).unwrap();
    assert_eq!(first["_index"], json!("logs"));
    assert_eq!(first["_score"], json!(1.0));
    assert!(first.get("sort").is_none());
    let source = &first["_source"];
    assert_eq!(source["host"], json!("web-1"));
    assert_eq!(source["status"], json!(200));
    assert_eq!(source["bytes"], json!(100.0));
    assert_eq!(source["ok"], json!(true));
    let at = source["at"].as_str().unwrap();
    assert!(at.ends_with('Z'), "{at}");
    let parsed = DateTime::parse_from_rfc3339(at).unwrap();
    assert!(
        (parsed.timestamp_millis() - (now - TimeDelta::hours(1)).timestamp_millis()).abs() < 60_000
    );
    let seventh = hits.iter().find(|h| h["_id"] == json!("7")).unwrap();
    assert_eq!(seventh["_source"]["at"], Value::Null);
}

#[tokio::test]
async fn no_body_and_match_all_match_everything() {
    assert_eq!(run(Value::Null).await["hits"]["total"]["value"], json!(8));
    assert_eq!(
        run(json!({"query": {}})).await["hits"]["total"]["value"],
        json!(8)
    );
    assert_eq!(
        matching(json!({"match_all": {}})).await,
        vec![1, 2, 3, 4, 5, 6, 7, 8]
    );
    assert_eq!(
        matching(json!({"match_all": {"boost": 1.2}})).await.len(),
        8
    );
}

#[tokio::test]
async fn timestamps_and_values_convert_exactly() {
    let now = Utc::now();
    let millis = at_millis(now)[0].unwrap();
    let expected = DateTime::from_timestamp_millis(millis)
        .unwrap()
        .to_rfc3339_opts(SecondsFormat::AutoSi, true);
    let table = Arc::new(mem_table(now));
    let body = json!({"query": {"term": {"id": 1}}});
    let response = search(
        &SessionContext::new(),
        table,
        "logs",
        &body,
        &BTreeSet::new(),
    )
    .await
    .unwrap();
    assert_eq!(hits(&response)[0]["_source"]["at"], json!(expected));
}

// ---------------------------------------------------------------- term, terms

#[tokio::test]
async fn term_compares_in_the_column_type() {
    assert_eq!(
        matching(json!({"term": {"host": "web-1"}})).await,
        vec![1, 5]
    );
    assert_eq!(
        matching(json!({"term": {"host": {"value": "web-1", "boost": 2.0}}})).await,
        vec![1, 5]
    );
    assert_eq!(
        matching(json!({"term": {"status": 200}})).await,
        vec![1, 2, 7]
    );
    assert_eq!(
        matching(json!({"term": {"status": {"value": "200"}}})).await,
        vec![1, 2, 7]
    );
    assert_eq!(matching(json!({"term": {"bytes": 250.5}})).await, vec![2]);
    assert_eq!(
        matching(json!({"term": {"ok": true}})).await,
        vec![1, 2, 5, 7]
    );
    assert_eq!(
        matching(json!({"term": {"ok": "false"}})).await,
        vec![3, 4, 8]
    );
    let case = json!({"term": {"host": {"value": "WEB-1", "case_insensitive": true}}});
    assert_eq!(matching(case).await, vec![1, 5]);
}

#[tokio::test]
async fn term_on_a_timestamp_parses_the_date() {
    let now = Utc::now();
    let millis = at_millis(now)[0].unwrap();
    let date = DateTime::from_timestamp_millis(millis)
        .unwrap()
        .to_rfc3339_opts(SecondsFormat::Millis, true);
    let table = Arc::new(mem_table(now));
    let body = json!({"query": {"term": {"at": date}}});
    let response = search(
        &SessionContext::new(),
        table,
        "logs",
        &body,
        &BTreeSet::new(),
    )
    .await
    .unwrap();
    assert_eq!(hit_ids(&response), vec![1]);
}

#[tokio::test]
async fn term_values_that_do_not_convert_match_nothing() {
    assert!(
        matching(json!({"term": {"status": "abc"}}))
            .await
            .is_empty()
    );
    assert!(
        matching(json!({"term": {"status": 200.5}}))
            .await
            .is_empty()
    );
    assert!(matching(json!({"term": {"ok": "maybe"}})).await.is_empty());
}

#[tokio::test]
async fn term_on_a_missing_field_matches_nothing() {
    assert!(matching(json!({"term": {"nope": 1}})).await.is_empty());
    assert!(
        matching(json!({"term": {"host.keyword": "web-1"}}))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn terms_matches_any_value() {
    assert_eq!(
        matching(json!({"terms": {"host": ["web-1", "db-1"]}})).await,
        vec![1, 3, 5]
    );
    assert_eq!(
        matching(json!({"terms": {"status": [200, "404", "x"]}})).await,
        vec![1, 2, 4, 7]
    );
    assert_eq!(
        matching(json!({"terms": {"status": [301], "boost": 1.0}})).await,
        vec![5]
    );
    assert!(
        matching(json!({"terms": {"status": ["x"]}}))
            .await
            .is_empty()
    );
    assert!(matching(json!({"terms": {"nope": [1]}})).await.is_empty());
    let lookup =
        refused(json!({"query": {"terms": {"host": {"index": "i", "id": "1", "path": "p"}}}}))
            .await;
    assert!(lookup.contains("[terms] on [host]"), "{lookup}");
}

// ---------------------------------------------------------------- range

#[tokio::test]
async fn range_on_numbers_and_strings() {
    assert_eq!(
        matching(json!({"range": {"status": {"gte": 300, "lt": 500}}})).await,
        vec![4, 5]
    );
    assert_eq!(
        matching(json!({"range": {"status": {"gt": 200.5}}})).await,
        vec![3, 4, 5, 8]
    );
    assert_eq!(
        matching(json!({"range": {"status": {"gte": 200.5}}})).await,
        vec![3, 4, 5, 8]
    );
    assert_eq!(
        matching(json!({"range": {"status": {"lte": 200.5}}})).await,
        vec![1, 2, 7]
    );
    assert_eq!(
        matching(json!({"range": {"status": {"lt": 200.5}}})).await,
        vec![1, 2, 7]
    );
    assert_eq!(
        matching(json!({"range": {"status": {"gte": "301"}}})).await,
        vec![3, 4, 5, 8]
    );
    assert_eq!(
        matching(json!({"range": {"bytes": {"gt": 99.5, "lte": 300}}})).await,
        vec![1, 2, 7]
    );
    assert_eq!(
        matching(json!({"range": {"host": {"gte": "d", "lt": "e"}}})).await,
        vec![3, 7]
    );
    assert_eq!(
        matching(json!({"range": {"status": {}}})).await,
        vec![1, 2, 3, 4, 5, 7, 8]
    );
    assert!(
        matching(json!({"range": {"nope": {"gte": 1}}}))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn range_on_timestamps_with_date_math() {
    assert_eq!(
        matching(json!({"range": {"at": {"gte": "now-2h"}}})).await,
        vec![1, 5, 8]
    );
    assert_eq!(
        matching(json!({"range": {"at": {"gte": "now-2h", "lte": "now"}}})).await,
        vec![1, 5]
    );
    assert_eq!(
        matching(json!({"range": {"at": {"lt": "now-1d"}}})).await,
        vec![3, 4, 6]
    );
    assert_eq!(
        matching(json!({"range": {"at": {"gt": "now-15m"}}})).await,
        vec![5, 8]
    );
    let week = json!({"range": {"at": {"gte": "now-1w", "lt": "now+1h", "format": "strict_date_optional_time"}}});
    assert_eq!(matching(week).await, vec![1, 2, 3, 4, 5]);
    assert_eq!(
        matching(json!({"range": {"at": {"gt": "now+2h/d"}}}))
            .await
            .len(),
        0
    );
}

#[tokio::test]
async fn range_on_timestamps_with_dates_and_epoch_millis() {
    let now = Utc::now();
    let since = now - TimeDelta::hours(50);
    let rfc = since.to_rfc3339_opts(SecondsFormat::Millis, true);
    assert_eq!(
        matching(json!({"range": {"at": {"gte": rfc}}})).await,
        vec![1, 2, 3, 4, 5, 8]
    );
    let millis = (now - TimeDelta::hours(2)).timestamp_millis();
    assert_eq!(
        matching(json!({"range": {"at": {"gte": millis}}})).await,
        vec![1, 5, 8]
    );
    let seconds = json!({"range": {"at": {"gte": millis / 1000, "format": "epoch_second"}}});
    assert_eq!(matching(seconds).await, vec![1, 5, 8]);
    let utc = json!({"range": {"at": {"gte": "now-2h", "time_zone": "UTC"}}});
    assert_eq!(matching(utc).await, vec![1, 5, 8]);
}

#[tokio::test]
async fn range_bounds_that_do_not_convert_are_client_errors() {
    let message = refused(json!({"query": {"range": {"at": {"gte": "yesterday"}}}})).await;
    assert_eq!(message, "[range] on [at]: \"yesterday\" is not a date");
    let message = refused(json!({"query": {"range": {"status": {"gte": "abc"}}}})).await;
    assert!(
        message.starts_with("[range] on [status]: \"abc\""),
        "{message}"
    );
    let message =
        refused(json!({"query": {"range": {"at": {"gte": "now-1h", "time_zone": "+01:00"}}}}))
            .await;
    assert!(message.contains("time_zone"), "{message}");
    let message = refused(json!({"query": {"range": {"at": {"from": "now-1h"}}}})).await;
    assert!(message.contains("[from]"), "{message}");
}

// ---------------------------------------------------------------- exists, prefix, wildcard

#[tokio::test]
async fn exists_matches_records_with_a_value() {
    assert_eq!(
        matching(json!({"exists": {"field": "bytes"}})).await,
        vec![1, 2, 3, 4, 6, 7, 8]
    );
    assert_eq!(
        matching(json!({"exists": {"field": "at"}})).await,
        vec![1, 2, 3, 4, 5, 6, 8]
    );
    assert!(
        matching(json!({"exists": {"field": "nope"}}))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn prefix_escapes_like_wildcards() {
    assert_eq!(
        matching(json!({"prefix": {"host": "web"}})).await,
        vec![1, 2, 4, 5]
    );
    assert_eq!(matching(json!({"prefix": {"host": "web_"}})).await, vec![4]);
    assert_eq!(
        matching(json!({"prefix": {"host": {"value": "web_1%"}}})).await,
        vec![4]
    );
    let case = json!({"prefix": {"host": {"value": "WEB", "case_insensitive": true}}});
    assert_eq!(matching(case).await, vec![1, 2, 4, 5]);
    assert!(matching(json!({"prefix": {"nope": "a"}})).await.is_empty());
    let message = refused(json!({"query": {"prefix": {"status": "2"}}})).await;
    assert!(message.starts_with("[prefix] on [status]"), "{message}");
}

#[tokio::test]
async fn wildcard_translates_to_like_with_escaping() {
    assert_eq!(
        matching(json!({"wildcard": {"host": "web?1*"}})).await,
        vec![1, 4, 5]
    );
    assert_eq!(matching(json!({"wildcard": {"host": "*%"}})).await, vec![4]);
    assert_eq!(
        matching(json!({"wildcard": {"host": "*_*"}})).await,
        vec![4]
    );
    assert_eq!(
        matching(json!({"wildcard": {"host": {"value": "d*"}}})).await,
        vec![3, 7]
    );
    assert_eq!(
        matching(json!({"wildcard": {"host": {"wildcard": "c?che"}}})).await,
        vec![6]
    );
    assert!(
        matching(json!({"wildcard": {"host": "web\\*"}}))
            .await
            .is_empty()
    );
    assert!(
        matching(json!({"wildcard": {"nope": "*"}}))
            .await
            .is_empty()
    );
}

#[test]
fn like_patterns_escape_percent_underscore_and_backslash() {
    assert_eq!(escape_like("50%_off\\"), "50\\%\\_off\\\\");
    assert_eq!(wildcard_to_like("a*b?c%d_e"), "a%b_c\\%d\\_e");
    assert_eq!(wildcard_to_like("a\\*b\\?"), "a*b?");
    assert_eq!(wildcard_to_like("tail\\"), "tail\\\\");
}

// ---------------------------------------------------------------- bool

#[tokio::test]
async fn bool_must_filter_should() {
    let q = json!({"bool": {"must": {"term": {"host": "web-1"}}, "filter": [{"range": {"status": {"lt": 300}}}]}});
    assert_eq!(matching(q).await, vec![1]);
    let q = json!({"bool": {"should": [{"term": {"host": "db-1"}}, {"term": {"host": "cache"}}]}});
    assert_eq!(matching(q).await, vec![3, 6]);
    let q = json!({"bool": {"must": {"term": {"ok": true}}, "should": {"term": {"host": "none"}}}});
    assert_eq!(matching(q).await, vec![1, 2, 5, 7]);
    assert_eq!(matching(json!({"bool": {}})).await.len(), 8);
    let q = json!({"bool": {"filter": [{"range": {"at": {"gte": "now-1d"}}}], "must_not": [{"term": {"ok": false}}]}});
    assert_eq!(matching(q).await, vec![1, 2, 5]);
}

#[tokio::test]
async fn bool_minimum_should_match() {
    let should = json!([
        {"term": {"ok": true}},
        {"range": {"status": {"gte": 300}}},
        {"range": {"bytes": {"lt": 100}}},
    ]);
    for wanted in [json!(2), json!("2"), json!(-1), json!("67%")] {
        let q = json!({"bool": {"should": should, "minimum_should_match": wanted}});
        assert_eq!(matching(q).await, vec![4, 5, 8], "{wanted}");
    }
    for everything in [json!("100%"), json!("-25%"), json!(3)] {
        let q = json!({"bool": {"should": should, "minimum_should_match": everything}});
        assert!(matching(q).await.is_empty(), "{everything}");
    }
    let q = json!({"bool": {"should": should, "minimum_should_match": "-34%"}});
    assert_eq!(matching(q).await, vec![4, 5, 8]);
    let q = json!({"bool": {"should": should, "minimum_should_match": "1000%"}});
    assert!(matching(q).await.is_empty());
    let q = json!({"bool": {"should": should, "minimum_should_match": 4}});
    assert!(matching(q).await.is_empty());
    let q = json!({"bool": {"should": should, "minimum_should_match": 1}});
    assert_eq!(matching(q).await, vec![1, 2, 3, 4, 5, 6, 7, 8]);
}

#[tokio::test]
async fn must_not_keeps_records_lacking_the_field() {
    assert_eq!(
        matching(json!({"bool": {"must_not": {"term": {"status": 200}}}})).await,
        vec![3, 4, 5, 6, 8]
    );
    assert_eq!(
        matching(json!({"bool": {"must_not": {"exists": {"field": "at"}}}})).await,
        vec![7]
    );
    let nested = json!({"bool": {"must_not": [{"bool": {"should": [{"term": {"host": "web-1"}}, {"term": {"host": "web-2"}}]}}]}});
    assert_eq!(matching(nested).await, vec![3, 4, 6, 7, 8]);
}

#[tokio::test]
async fn must_not_on_a_missing_field_matches_everything() {
    assert_eq!(
        matching(json!({"bool": {"must_not": {"term": {"nope": 1}}}}))
            .await
            .len(),
        8
    );
    assert_eq!(
        matching(json!({"bool": {"must_not": {"range": {"nope": {"gt": 1}}}}}))
            .await
            .len(),
        8
    );
}

#[tokio::test]
async fn bool_refuses_unknown_keys() {
    let message =
        refused(json!({"query": {"bool": {"must": [], "adjust_pure_negative": true}}})).await;
    assert_eq!(message, "[bool] does not support [adjust_pure_negative]");
    let message = refused(json!({"query": {"term": {"host": "a", "status": 1}}})).await;
    assert!(
        message.starts_with("[term] names exactly one field"),
        "{message}"
    );
    let message =
        refused(json!({"query": {"term": {"host": "a"}, "exists": {"field": "a"}}})).await;
    assert!(
        message.starts_with("a query is an object naming one clause"),
        "{message}"
    );
}

// ---------------------------------------------------------------- sort and paging

#[tokio::test]
async fn sort_desc_puts_missing_values_last_and_returns_sort_values() {
    let response = run(json!({"sort": [{"status": "desc"}]})).await;
    let ids = hit_ids(&response);
    assert_eq!(&ids[..4], &[8, 3, 4, 5]);
    assert_eq!(ids[7], 6);
    assert_eq!(hits(&response)[0]["sort"], json!([503]));
    assert_eq!(hits(&response)[7]["sort"], json!([null]));
}

#[tokio::test]
async fn sort_on_several_keys() {
    let body = json!({"sort": [{"status": {"order": "asc"}}, {"id": "desc"}]});
    let response = run(body).await;
    assert_eq!(hit_ids(&response), vec![7, 2, 1, 5, 4, 3, 8, 6]);
    assert_eq!(hits(&response)[0]["sort"], json!([200, 7]));
    let first = run(json!({"sort": [{"status": {"order": "asc", "missing": "_first"}}]})).await;
    assert_eq!(hit_ids(&first)[0], 6);
}

#[tokio::test]
async fn sort_on_a_timestamp_gives_epoch_millis() {
    let response = run(json!({"sort": "at"})).await;
    assert_eq!(hit_ids(&response), vec![6, 4, 3, 2, 1, 5, 8, 7]);
    let first = hits(&response)[0]["sort"][0].as_i64().unwrap();
    let expected = (Utc::now() - TimeDelta::hours(192)).timestamp_millis();
    assert!((first - expected).abs() < 60_000);
}

#[tokio::test]
async fn sort_on_score_orders_nothing() {
    let response = run(json!({"sort": ["_score", {"id": "asc"}]})).await;
    assert_eq!(hit_ids(&response), vec![1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(hits(&response)[1]["sort"], json!([1.0, 2]));
    let unmapped =
        run(json!({"sort": [{"nope": {"order": "asc", "unmapped_type": "long"}}]})).await;
    assert_eq!(hits(&unmapped)[0]["sort"], json!([null]));
}

#[tokio::test]
async fn sort_refuses_missing_fields_and_bad_orders() {
    assert_eq!(
        refused(json!({"sort": [{"nope": "asc"}]})).await,
        "no field [nope]"
    );
    assert_eq!(
        refused(json!({"sort": "host.keyword"})).await,
        "no field [host.keyword]"
    );
    let message = refused(json!({"sort": [{"id": "sideways"}]})).await;
    assert_eq!(
        message,
        "[sort] on [id]: [order] must be one of asc, desc, got \"sideways\""
    );
    let message = refused(json!({"sort": [{"id": {"order": 1}}]})).await;
    assert!(message.starts_with("[sort] on [id]: [order]"), "{message}");
    let message = refused(json!({"sort": [{"id": {"mode": "avg"}}]})).await;
    assert_eq!(message, "[sort] on [id] does not support [mode]");
}

#[tokio::test]
async fn from_and_size_page_the_hits() {
    let response = run(json!({"sort": ["id"], "from": 2, "size": 3})).await;
    assert_eq!(hit_ids(&response), vec![3, 4, 5]);
    assert_eq!(response["hits"]["total"]["value"], json!(8));
    assert_eq!(hits(&response)[0]["_id"], json!("3"));
    assert_eq!(
        hit_ids(&run(json!({"sort": ["id"], "from": 7, "size": 5})).await),
        vec![8]
    );
    let past = run(json!({"from": 20})).await;
    assert!(hits(&past).is_empty());
    assert_eq!(past["hits"]["max_score"], Value::Null);
    assert_eq!(past["hits"]["total"]["value"], json!(8));
    let two = run(json!({"size": 2, "track_total_hits": true, "timeout": "1s"})).await;
    assert_eq!(hits(&two).len(), 2);
    assert_eq!(two["hits"]["total"]["value"], json!(8));
}

#[tokio::test]
async fn size_zero_gives_no_hits() {
    let response = run(json!({"size": 0, "track_total_hits": 100})).await;
    assert!(hits(&response).is_empty());
    assert_eq!(response["hits"]["max_score"], Value::Null);
    assert_eq!(response["hits"]["total"]["value"], json!(8));
}

#[tokio::test]
async fn paging_limits_are_client_errors() {
    assert!(
        refused(json!({"size": 10_001}))
            .await
            .contains("at most 10000")
    );
    assert!(
        refused(json!({"from": 9_995, "size": 10}))
            .await
            .contains("at most 10000")
    );
    assert!(refused(json!({"size": -1})).await.starts_with("[size]"));
    assert!(refused(json!({"from": "x"})).await.starts_with("[from]"));
    assert!(
        refused(json!({"track_total_hits": "yes"}))
            .await
            .starts_with("[track_total_hits]")
    );
}

// ---------------------------------------------------------------- _source and _id

/// The sorted field names of the first hit's `_source` for `source`.
async fn source_keys(source: Value) -> Vec<String> {
    let response = run(json!({"_source": source, "sort": ["id"], "size": 1})).await;
    let mut keys: Vec<String> = hits(&response)[0]["_source"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

#[tokio::test]
async fn source_filtering_forms() {
    assert!(source_keys(json!(false)).await.is_empty());
    assert_eq!(source_keys(json!(true)).await.len(), 6);
    assert_eq!(source_keys(json!("host")).await, ["host"]);
    assert_eq!(
        source_keys(json!(["host", "st*"])).await,
        ["host", "status"]
    );
    let filtered = source_keys(json!({"includes": ["*"], "excludes": ["b*", "at"]})).await;
    assert_eq!(filtered, ["host", "id", "ok", "status"]);
    assert!(source_keys(json!({"excludes": "*"})).await.is_empty());
    assert!(
        refused(json!({"_source": 12}))
            .await
            .starts_with("[_source]")
    );
}

#[tokio::test]
async fn source_false_still_gives_ids_and_sort_values() {
    let response = run(json!({"_source": false, "sort": [{"status": "desc"}], "size": 1})).await;
    let hit = &hits(&response)[0];
    assert_eq!(hit["_id"], json!("8"));
    assert_eq!(hit["_source"], json!({}));
    assert_eq!(hit["sort"], json!([503]));
}

#[test]
fn glob_matches_stars() {
    assert!(glob("st*", "status"));
    assert!(glob("*s", "bytes"));
    assert!(glob("*", ""));
    assert!(glob("a*b*c", "aXbYc"));
    assert!(!glob("a*b*c", "acb"));
    assert!(!glob("host", "hosts"));
    assert!(glob("host", "host"));
}

// ---------------------------------------------------------------- hidden columns

#[tokio::test]
async fn hidden_columns_are_no_fields() {
    let response = search_hidden(json!({}), &["bytes"]).await.unwrap();
    assert!(
        hits(&response)
            .iter()
            .all(|h| h["_source"].get("bytes").is_none())
    );
    assert!(
        hits(&response)
            .iter()
            .all(|h| h["_source"].get("host").is_some())
    );
    let term = search_hidden(json!({"query": {"term": {"bytes": 100.0}}}), &["bytes"])
        .await
        .unwrap();
    assert_eq!(term["hits"]["total"]["value"], json!(0));
    let exists = search_hidden(json!({"query": {"exists": {"field": "bytes"}}}), &["bytes"])
        .await
        .unwrap();
    assert_eq!(exists["hits"]["total"]["value"], json!(0));
    let not = json!({"query": {"bool": {"must_not": {"term": {"bytes": 100.0}}}}});
    assert_eq!(
        search_hidden(not, &["bytes"]).await.unwrap()["hits"]["total"]["value"],
        json!(8)
    );
    assert_eq!(
        refused_hidden(json!({"sort": ["bytes"]}), &["bytes"]).await,
        "no field [bytes]"
    );
    let avg = json!({"aggs": {"a": {"avg": {"field": "bytes"}}}});
    assert_eq!(refused_hidden(avg, &["bytes"]).await, "no field [bytes]");
}

#[tokio::test]
async fn hidden_id_makes_ids_positions() {
    let body = json!({"sort": [{"status": "asc"}, {"host": "asc"}], "from": 2, "size": 2});
    let response = search_hidden(body, &["id"]).await.unwrap();
    let ids: Vec<&Value> = hits(&response).iter().map(|h| &h["_id"]).collect();
    assert_eq!(ids, [&json!("2"), &json!("3")]);
    assert!(
        hits(&response)
            .iter()
            .all(|h| h["_source"].get("id").is_none())
    );
}

#[tokio::test]
async fn everything_hidden_still_counts() {
    let all = ["id", "host", "status", "bytes", "ok", "at"];
    let response = search_hidden(json!({"size": 2}), &all).await.unwrap();
    assert_eq!(response["hits"]["total"]["value"], json!(8));
    assert_eq!(hits(&response).len(), 2);
    assert_eq!(hits(&response)[0]["_source"], json!({}));
}

// ---------------------------------------------------------------- aggregations

#[tokio::test]
async fn metric_aggregations() {
    let aggs = aggregations(json!({"size": 0, "aggs": {
        "avg_b": {"avg": {"field": "bytes"}},
        "sum_b": {"sum": {"field": "bytes"}},
        "min_s": {"min": {"field": "status"}},
        "max_s": {"max": {"field": "status"}},
        "count_b": {"value_count": {"field": "bytes"}},
        "hosts": {"cardinality": {"field": "host"}},
        "first": {"min": {"field": "at"}},
    }}))
    .await;
    assert!((aggs["avg_b"]["value"].as_f64().unwrap() - 1785.5 / 7.0).abs() < 1e-9);
    assert_eq!(aggs["sum_b"], json!({"value": 1785.5}));
    assert_eq!(aggs["min_s"], json!({"value": 200}));
    assert_eq!(aggs["max_s"], json!({"value": 503}));
    assert_eq!(aggs["count_b"], json!({"value": 7}));
    assert_eq!(aggs["hosts"], json!({"value": 6}));
    let first = aggs["first"]["value"].as_i64().unwrap();
    assert!((first - (Utc::now() - TimeDelta::hours(192)).timestamp_millis()).abs() < 60_000);
    assert!(
        aggs["first"]["value_as_string"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
}

#[tokio::test]
async fn aggregations_run_over_what_the_query_matches_not_the_page() {
    let response = run(json!({
        "query": {"term": {"ok": true}},
        "size": 1,
        "aggregations": {"sum_b": {"sum": {"field": "bytes"}}},
    }))
    .await;
    assert_eq!(hits(&response).len(), 1);
    assert_eq!(response["aggregations"]["sum_b"], json!({"value": 650.5}));
}

#[tokio::test]
async fn metrics_of_no_records_are_null() {
    let aggs = aggregations(json!({"query": {"term": {"host": "zzz"}}, "aggs": {
        "a": {"avg": {"field": "bytes"}},
        "s": {"sum": {"field": "bytes"}},
        "lo": {"min": {"field": "at"}},
        "hi": {"max": {"field": "status"}},
        "n": {"value_count": {"field": "bytes"}},
        "c": {"cardinality": {"field": "host"}},
        "t": {"terms": {"field": "host"}},
    }}))
    .await;
    for name in ["a", "s", "lo", "hi"] {
        assert_eq!(aggs[name], json!({"value": null}), "{name}");
    }
    assert_eq!(aggs["n"], json!({"value": 0}));
    assert_eq!(aggs["c"], json!({"value": 0}));
    assert_eq!(
        aggs["t"],
        json!({"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": []})
    );
}

#[tokio::test]
async fn terms_aggregation_counts_and_sums_the_others() {
    let aggs = aggregations(
        json!({"size": 0, "aggs": {"hosts": {"terms": {"field": "host", "size": 2}}}}),
    )
    .await;
    assert_eq!(
        aggs["hosts"],
        json!({
            "doc_count_error_upper_bound": 0,
            "sum_other_doc_count": 4,
            "buckets": [{"key": "web-1", "doc_count": 2}, {"key": "cache", "doc_count": 1}],
        })
    );
}

/// The keys of the buckets of aggregation `name` in `aggs`.
fn bucket_keys(aggs: &Value, name: &str) -> Vec<Value> {
    aggs[name]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["key"].clone())
        .collect()
}

#[tokio::test]
async fn terms_aggregation_orders() {
    let aggs = aggregations(json!({"size": 0, "aggs": {
        "by_key": {"terms": {"field": "status", "order": {"_key": "asc"}}},
        "by_count": {"terms": {"field": "ok", "order": [{"_count": "asc"}]}},
        "busy": {"terms": {"field": "status", "min_doc_count": 2}},
    }}))
    .await;
    assert_eq!(
        bucket_keys(&aggs, "by_key"),
        [json!(200), json!(301), json!(404), json!(500), json!(503)]
    );
    assert_eq!(aggs["by_key"]["sum_other_doc_count"], json!(0));
    assert_eq!(bucket_keys(&aggs, "by_count"), [json!(false), json!(true)]);
    assert_eq!(aggs["by_count"]["buckets"][1]["doc_count"], json!(4));
    assert_eq!(bucket_keys(&aggs, "busy"), [json!(200)]);
}

#[tokio::test]
async fn terms_aggregation_with_metric_sub_aggregations() {
    let aggs = aggregations(json!({"size": 0, "aggs": {"by_status": {
        "terms": {"field": "status", "order": {"avg_b": "desc"}},
        "meta": {"note": "kept"},
        "aggs": {
            "avg_b": {"avg": {"field": "bytes"}},
            "n": {"value_count": {"field": "bytes"}},
            "hosts": {"cardinality": {"field": "host"}},
        },
    }}}))
    .await;
    assert_eq!(
        bucket_keys(&aggs, "by_status"),
        [json!(500), json!(200), json!(404), json!(503), json!(301)]
    );
    let bucket = &aggs["by_status"]["buckets"][1];
    assert_eq!(bucket["doc_count"], json!(3));
    assert!((bucket["avg_b"]["value"].as_f64().unwrap() - 650.5 / 3.0).abs() < 1e-9);
    assert_eq!(bucket["n"], json!({"value": 3}));
    assert_eq!(bucket["hosts"], json!({"value": 3}));
    assert_eq!(
        aggs["by_status"]["buckets"][4]["avg_b"],
        json!({"value": null})
    );
    assert_eq!(aggs["by_status"]["meta"], json!({"note": "kept"}));
}

#[tokio::test]
async fn terms_aggregation_refusals() {
    let message =
        refused(json!({"aggs": {"t": {"terms": {"field": "status", "order": {"nope": "asc"}}}}}))
            .await;
    assert!(message.contains("cannot order by"), "{message}");
    let message = refused(json!({"aggs": {"t": {"terms": {"field": "status", "size": 0}}}})).await;
    assert!(message.contains("[size]"), "{message}");
    let message = refused(json!({"aggs": {"t": {"terms": {"field": "status"}, "aggs": {"u": {"terms": {"field": "host"}}}}}})).await;
    assert!(
        message.starts_with("sub-aggregation [u] of type [terms] is not served on a SQL source"),
        "{message}"
    );
    assert_eq!(
        refused(json!({"aggs": {"t": {"terms": {"field": "nope"}}}})).await,
        "no field [nope]"
    );
    let message = refused(json!({"aggs": {"a": {"avg": {"field": "host"}}}})).await;
    assert!(message.starts_with("[avg] on [host]"), "{message}");
}

#[tokio::test]
async fn range_aggregation_keys_and_counts() {
    let aggs = aggregations(json!({"size": 0, "aggs": {
        "status": {"range": {"field": "status", "ranges": [{"to": 300}, {"from": 300, "to": 500}, {"from": 500}]}},
        "bytes": {"range": {"field": "bytes", "ranges": [{"key": "small", "to": 100}, {"from": 100}]}},
    }}))
    .await;
    assert_eq!(
        aggs["status"]["buckets"],
        json!([
            {"key": "*-300.0", "to": 300.0, "doc_count": 3},
            {"key": "300.0-500.0", "from": 300.0, "to": 500.0, "doc_count": 2},
            {"key": "500.0-*", "from": 500.0, "doc_count": 2},
        ])
    );
    assert_eq!(
        aggs["bytes"]["buckets"],
        json!([
            {"key": "small", "to": 100.0, "doc_count": 3},
            {"key": "100.0-*", "from": 100.0, "doc_count": 4},
        ])
    );
}

#[tokio::test]
async fn range_aggregation_keyed_and_on_dates() {
    let aggs = aggregations(json!({"size": 0, "aggs": {
        "keyed": {"range": {"field": "status", "keyed": true, "ranges": [{"from": 250.5, "to": 450}]}},
        "recent": {"range": {"field": "at", "ranges": [{"from": "now-1d"}]}},
    }}))
    .await;
    assert_eq!(
        aggs["keyed"]["buckets"],
        json!({"250.5-450.0": {"from": 250.5, "to": 450.0, "doc_count": 2}})
    );
    let recent = &aggs["recent"]["buckets"][0];
    assert_eq!(recent["doc_count"], json!(4));
    assert!(recent["key"].as_str().unwrap().ends_with("Z-*"), "{recent}");
    assert!(recent["from"].is_i64());
    assert!(recent["from_as_string"].as_str().unwrap().ends_with('Z'));
    let message =
        refused(json!({"aggs": {"r": {"range": {"field": "host", "ranges": [{"to": "m"}]}}}}))
            .await;
    assert!(
        message.starts_with("[range] aggregation on [host]"),
        "{message}"
    );
}

// ---------------------------------------------------------------- outside the subset

/// The message `check` gives for `body`, which must be refused.
fn check_refuses(body: Value) -> String {
    match check(&body) {
        Err(Error::BadRequest(message)) => message,
        other => panic!("{body}: expected a client error, got {other:?}"),
    }
}

#[tokio::test]
async fn query_clauses_outside_the_subset_are_named() {
    let served = "is not served on a SQL source: bool, term, terms, range, exists, match_all, prefix, wildcard";
    for clause in [
        "match",
        "match_phrase",
        "query_string",
        "geo_distance",
        "multi_match",
    ] {
        let body = json!({"query": {clause: {"host": "web"}}});
        let expected = format!("query clause [{clause}] {served}");
        assert_eq!(check_refuses(body.clone()), expected);
        assert_eq!(refused(body).await, expected);
    }
    let nested = json!({"query": {"bool": {"filter": [{"term": {"a": 1}}, {"bool": {"should": {"match_phrase": {"a": "b"}}}}]}}});
    assert!(check_refuses(nested).starts_with("query clause [match_phrase]"));
}

#[tokio::test]
async fn body_keys_outside_the_subset_are_named() {
    for key in ["knn", "highlight", "search_after"] {
        let body = json!({key: {}});
        let message = refused(body.clone()).await;
        assert!(
            message.starts_with(&format!("body key [{key}] is not served on a SQL source")),
            "{message}"
        );
        assert_eq!(check_refuses(body), message);
    }
    assert!(check_refuses(json!([1])).contains("JSON object"));
    assert!(check_refuses(json!({"aggs": {}, "aggregations": {}})).contains("not both"));
}

#[tokio::test]
async fn aggregations_outside_the_subset_are_named() {
    let body =
        json!({"aggs": {"per_hour": {"date_histogram": {"field": "at", "fixed_interval": "1h"}}}});
    let message = refused(body).await;
    assert_eq!(
        message,
        "aggregation [date_histogram] is not served on a SQL source: avg, sum, min, max, value_count, cardinality, terms, range"
    );
    let under_range = json!({"aggs": {"r": {"range": {"field": "status", "ranges": [{"to": 1}]}, "aggs": {"a": {"avg": {"field": "bytes"}}}}}});
    assert!(check_refuses(under_range).contains("under a [range] aggregation"));
}

#[test]
fn check_accepts_the_subset() {
    let body = json!({
        "query": {"bool": {"must": [{"term": {"a": 1}}], "should": {"wildcard": {"b": "x*"}}}},
        "aggs": {"t": {"terms": {"field": "a"}, "aggs": {"m": {"max": {"field": "b"}}}}},
        "sort": ["a"], "size": 1, "from": 0, "_source": false, "track_total_hits": true, "timeout": "1s",
    });
    assert!(check(&body).is_ok());
    assert!(check(&Value::Null).is_ok());
}

// ---------------------------------------------------------------- coercion and date math

#[test]
fn date_math_units_and_rounding() {
    let now = DateTime::parse_from_rfc3339("2024-03-15T10:30:45.123Z")
        .unwrap()
        .with_timezone(&Utc);
    let at = |s: &str, up: bool| {
        date_math(s, up, now).map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
    };
    let cases = [
        ("now", false, "2024-03-15T10:30:45.123Z"),
        ("now-1h", false, "2024-03-15T09:30:45.123Z"),
        ("now+2h", false, "2024-03-15T12:30:45.123Z"),
        ("now-15m", false, "2024-03-15T10:15:45.123Z"),
        ("now-30s", false, "2024-03-15T10:30:15.123Z"),
        ("now-1d", false, "2024-03-14T10:30:45.123Z"),
        ("now-1w", false, "2024-03-08T10:30:45.123Z"),
        ("now-1M", false, "2024-02-15T10:30:45.123Z"),
        ("now-1y", false, "2023-03-15T10:30:45.123Z"),
        ("now/d", false, "2024-03-15T00:00:00.000Z"),
        ("now/d", true, "2024-03-15T23:59:59.999Z"),
        ("now-1d/d", false, "2024-03-14T00:00:00.000Z"),
        ("now/w", false, "2024-03-11T00:00:00.000Z"),
        ("now/M", false, "2024-03-01T00:00:00.000Z"),
        ("now/h", true, "2024-03-15T10:59:59.999Z"),
        ("2024-01-31||+1M", false, "2024-02-29T00:00:00.000Z"),
        ("2024-01-31", false, "2024-01-31T00:00:00.000Z"),
        ("2024-01-01T12:00:00", false, "2024-01-01T12:00:00.000Z"),
        ("2024-01-01 12:00", false, "2024-01-01T12:00:00.000Z"),
        (
            "2024-01-01T12:00:00+02:00",
            false,
            "2024-01-01T10:00:00.000Z",
        ),
        ("1704067200000", false, "2024-01-01T00:00:00.000Z"),
        // As Elasticsearch: no amount is one.
        ("now+h", false, "2024-03-15T11:30:45.123Z"),
        ("now/1d", false, "2024-03-15T00:00:00.000Z"),
    ];
    for (input, up, expected) in cases {
        assert_eq!(at(input, up).as_deref(), Some(expected), "{input}");
    }
    for invalid in [
        "yesterday",
        "now-1x",
        "now-",
        "now/2d",
        "now*1d",
        "2024-13-01",
        "",
    ] {
        assert_eq!(at(invalid, false), None, "{invalid}");
    }
}

#[test]
fn literals_take_the_column_type() {
    let dates = Dates {
        now: Utc::now(),
        epoch_seconds: false,
    };
    let int = |v: Value, op| coerce::literal(&v, &DataType::Int64, op, dates);
    assert_eq!(int(json!(200.5), Op::Gt), Ok(ScalarValue::Int64(Some(200))));
    assert_eq!(
        int(json!(200.5), Op::Gte),
        Ok(ScalarValue::Int64(Some(201)))
    );
    assert_eq!(
        int(json!(200.5), Op::Lte),
        Ok(ScalarValue::Int64(Some(200)))
    );
    assert_eq!(int(json!(200.5), Op::Lt), Ok(ScalarValue::Int64(Some(201))));
    assert!(int(json!(200.5), Op::Eq).is_err());
    assert_eq!(
        coerce::literal(&json!("12"), &DataType::Int32, Op::Eq, dates),
        Ok(ScalarValue::Int32(Some(12)))
    );
    assert!(coerce::literal(&json!(300), &DataType::Int8, Op::Eq, dates).is_err());
    assert_eq!(
        coerce::literal(&json!(7), &DataType::Utf8View, Op::Eq, dates),
        Ok(ScalarValue::Utf8View(Some("7".into())))
    );
    let tz = DataType::Timestamp(TimeUnit::Second, Some("UTC".into()));
    assert_eq!(
        coerce::literal(&json!("2024-01-01T00:00:00Z"), &tz, Op::Eq, dates),
        Ok(ScalarValue::TimestampSecond(
            Some(1_704_067_200),
            Some("UTC".into())
        ))
    );
    assert_eq!(
        coerce::literal(&json!("2024-01-02"), &DataType::Date32, Op::Eq, dates),
        Ok(ScalarValue::Date32(Some(19_724)))
    );
    let decimal = coerce::literal(&json!(12.5), &DataType::Decimal128(10, 2), Op::Eq, dates);
    assert_eq!(decimal, Ok(ScalarValue::Decimal128(Some(1250), 10, 2)));
    let message = coerce::literal(&json!("yesterday"), &tz, Op::Gte, dates)
        .unwrap_err()
        .to_string();
    assert_eq!(message, "\"yesterday\" is not a date");
}

// ---------------------------------------------------------------- push-down

/// A [`MemTable`] that says it takes every filter (inexactly, so DataFusion still applies
/// them and results stay right).
#[derive(Debug)]
struct Inexact(MemTable);

#[async_trait::async_trait]
impl TableProvider for Inexact {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        self.0.scan(state, projection, filters, limit).await
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> datafusion::error::Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }
}

/// The filters DataFusion hands to the scan of `table` for `body`, with `hidden` columns.
fn scan_filters(table: Arc<dyn TableProvider>, body: &Value, hidden: &[&str]) -> String {
    let hidden: BTreeSet<String> = hidden.iter().map(|s| s.to_string()).collect();
    let (_, frame) = prepare(&SessionContext::new(), table, body, &hidden).unwrap();
    let plan = frame.into_optimized_plan().unwrap();
    let mut filters = Vec::new();
    plan.apply(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            filters.extend(scan.filters.iter().map(ToString::to_string));
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    assert!(!filters.is_empty(), "no filter reached the scan: {plan}");
    filters.join(" AND ")
}

#[tokio::test]
async fn filters_reach_the_table_scan_without_casts() {
    let body = json!({"query": {"bool": {
        "filter": [
            {"term": {"host": "web-1"}},
            {"terms": {"status": [200, 301, 404, 500, 503]}},
            {"range": {"at": {"gte": "now-1d"}}},
            {"range": {"status": {"lt": 600}}},
            {"wildcard": {"host": "w*"}},
            {"prefix": {"host": "web_"}},
            {"exists": {"field": "bytes"}},
        ],
        "must_not": {"term": {"ok": false}},
    }}});
    let table = Arc::new(Inexact(mem_table(Utc::now())));
    // Hiding a column puts a projection between the filter and the scan.
    for hidden in [&[][..], &["id"][..]] {
        let text = scan_filters(table.clone(), &body, hidden);
        assert!(!text.to_uppercase().contains("CAST"), "{text}");
        let parts = [
            "host = Utf8(\"web-1\")",
            "status IN (",
            "status < Int64(600)",
            "host LIKE Utf8(\"w%\")",
            "at >= TimestampMillisecond(",
            "bytes IS NOT NULL",
            "IS NOT TRUE",
        ];
        for part in parts {
            assert!(text.contains(part), "{part} not in {text}");
        }
    }
}

#[tokio::test]
async fn searches_through_a_pushing_down_provider_stay_right() {
    let table = Arc::new(Inexact(mem_table(Utc::now())));
    let body = json!({"query": {"bool": {
        "filter": [{"terms": {"status": [200, 301]}}, {"prefix": {"host": "web"}}, {"exists": {"field": "bytes"}}],
        "must_not": {"term": {"ok": false}},
    }}});
    let response = search(
        &SessionContext::new(),
        table,
        "logs",
        &body,
        &BTreeSet::new(),
    )
    .await
    .unwrap();
    let mut ids = hit_ids(&response);
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 2]);
}

// ---------------------------------------------------------------- other column types

/// A table of the types sources give besides those above: `Utf8View` strings (Parquet),
/// dates, decimals, 32-bit numbers and timestamps without time zone.
fn typed_batch() -> RecordBatch {
    use arrow::array::{
        Date32Array, Decimal128Array, Float32Array, Int32Array, StringViewArray,
        TimestampSecondArray,
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8View, true),
        Field::new("day", DataType::Date32, true),
        Field::new("price", DataType::Decimal128(10, 2), true),
        Field::new("n", DataType::Int32, true),
        Field::new("f", DataType::Float32, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Second, None), true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringViewArray::from(vec!["a_b", "a%b", "abc"])),
        Arc::new(Date32Array::from(vec![19_723, 19_724, 19_725])),
        Arc::new(
            Decimal128Array::from(vec![1250, 99, 100_000])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ),
        Arc::new(Int32Array::from(vec![1, 2, 3])),
        Arc::new(Float32Array::from(vec![1.1, 2.5, -0.25])),
        Arc::new(TimestampSecondArray::from(vec![
            1_704_067_200,
            1_704_153_600,
            1_704_240_000,
        ])),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

/// Runs `body` over `table` and gives the `name`s of the hits, in order.
async fn names(table: Arc<dyn TableProvider>, body: Value) -> Vec<String> {
    let response = search(
        &SessionContext::new(),
        table,
        "typed",
        &body,
        &BTreeSet::new(),
    )
    .await
    .unwrap();
    hits(&response)
        .iter()
        .map(|h| h["_source"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Runs the queries every typed table must answer the same way.
async fn check_typed_queries(table: Arc<dyn TableProvider>) {
    let run = |body: Value| names(table.clone(), body);
    let sorted = |query: Value| json!({"query": query, "sort": ["n"]});
    assert_eq!(run(sorted(json!({"term": {"name": "a%b"}}))).await, ["a%b"]);
    assert_eq!(
        run(sorted(json!({"prefix": {"name": "a_"}}))).await,
        ["a_b"]
    );
    assert_eq!(
        run(sorted(json!({"wildcard": {"name": "a?b"}}))).await,
        ["a_b", "a%b"]
    );
    assert_eq!(
        run(sorted(json!({"range": {"day": {"gte": "2024-01-02"}}}))).await,
        ["a%b", "abc"]
    );
    assert_eq!(
        run(sorted(json!({"range": {"day": {"lt": "now"}}})))
            .await
            .len(),
        3
    );
    assert_eq!(run(sorted(json!({"term": {"price": 12.5}}))).await, ["a_b"]);
    assert_eq!(
        run(sorted(json!({"range": {"price": {"gt": "1"}}}))).await,
        ["a_b", "abc"]
    );
    assert_eq!(
        run(sorted(json!({"terms": {"n": [1, "3"]}}))).await,
        ["a_b", "abc"]
    );
    assert_eq!(
        run(sorted(json!({"range": {"f": {"lt": 0}}}))).await,
        ["abc"]
    );
    let ts =
        json!({"range": {"ts": {"gt": "2024-01-01T00:00:00Z", "lte": "2024-01-02T00:00:00Z"}}});
    assert_eq!(run(sorted(ts)).await, ["a%b"]);
    assert_eq!(
        run(json!({"sort": [{"name": "desc"}]})).await,
        ["abc", "a_b", "a%b"]
    );
}

#[tokio::test]
async fn other_column_types_convert_both_ways() {
    let batch = typed_batch();
    let table = Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]]).unwrap());
    check_typed_queries(table.clone()).await;
    let body = json!({"sort": [{"day": "asc"}], "size": 1, "aggs": {
        "avg_price": {"avg": {"field": "price"}},
        "last_day": {"max": {"field": "day"}},
    }});
    let response = search(
        &SessionContext::new(),
        table,
        "typed",
        &body,
        &BTreeSet::new(),
    )
    .await
    .unwrap();
    let hit = &hits(&response)[0];
    assert_eq!(
        hit["_source"],
        json!({"name": "a_b", "day": "2024-01-01", "price": 12.5, "n": 1, "f": 1.1, "ts": "2024-01-01T00:00:00Z"})
    );
    assert_eq!(hit["_id"], json!("0"));
    assert_eq!(hit["sort"], json!([1_704_067_200_000_i64]));
    let aggs = &response["aggregations"];
    assert!((aggs["avg_price"]["value"].as_f64().unwrap() - 337.83).abs() < 0.01);
    assert_eq!(aggs["last_day"]["value_as_string"], json!("2024-01-03"));
}

#[tokio::test]
async fn a_parquet_listing_table_answers_the_same() {
    use datafusion::{dataframe::DataFrameWriteOptions, prelude::ParquetReadOptions};
    let unique = format!(
        "strata-dsl-{}-{}",
        std::process::id(),
        Utc::now().timestamp_nanos_opt().unwrap_or_default()
    );
    let dir = std::env::temp_dir().join(unique);
    let path = dir.join("typed.parquet");
    let ctx = SessionContext::new();
    let written = ctx.read_batch(typed_batch()).unwrap();
    written
        .write_parquet(path.to_str().unwrap(), DataFrameWriteOptions::new(), None)
        .await
        .unwrap();
    ctx.register_parquet(
        "typed",
        path.to_str().unwrap(),
        ParquetReadOptions::default(),
    )
    .await
    .unwrap();
    let table = ctx.table_provider("typed").await.unwrap();
    check_typed_queries(table).await;
    std::fs::remove_dir_all(&dir).unwrap();
}
