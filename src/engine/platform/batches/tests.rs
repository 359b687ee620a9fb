//! Arrow batches written to a dataset keep their types: integers, floats, decimals (exact),
//! timestamps, booleans, strings, lists and structs; a second batch widens a column and
//! replaces a record by its id; a column that has no dataset type is refused with nothing
//! written; bulk's JSON still writes into the columns a batch made.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;

use arrow::{
    array::{
        BooleanArray, Decimal128Array, Float32Array, Float64Array, Int32Array, ListBuilder,
        StringArray, StringBuilder, StructArray, TimestampMicrosecondArray,
    },
    datatypes::{DataType, Field, Fields, Schema},
};
use bytes::Bytes;
use serde_json::{Value, json};

use super::*;
use crate::{
    documents::bulk,
    engine::{Outcome, SearchOptions, platform::testing::TestEngine},
};

fn first_batch() -> RecordBatch {
    let mut tags = ListBuilder::new(StringBuilder::new());
    for row in [vec!["red", "big"], vec![], vec!["blue"]] {
        for tag in row {
            tags.values().append_value(tag);
        }
        tags.append(true);
    }
    let city = StructArray::new(
        Fields::from(vec![Field::new("city", DataType::Utf8, true)]),
        vec![Arc::new(StringArray::from(vec![Some("Lyon"), None, Some("Oslo")])) as ArrayRef],
        None,
    );
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("_id", Arc::new(StringArray::from(vec!["a", "b", "c"]))),
        ("n", Arc::new(Int32Array::from(vec![1, 2, 3]))),
        ("x", Arc::new(Float32Array::from(vec![0.5, 1.5, 2.5]))),
        (
            "price",
            Arc::new(
                Decimal128Array::from(vec![1234, 500, 100_000_001])
                    .with_precision_and_scale(12, 2)
                    .unwrap(),
            ),
        ),
        (
            "at",
            Arc::new(
                TimestampMicrosecondArray::from(vec![
                    1_795_428_000_000_000,
                    1_795_428_001_000_123,
                    1_795_428_002_000_000,
                ])
                .with_timezone("UTC"),
            ),
        ),
        ("ok", Arc::new(BooleanArray::from(vec![true, false, true]))),
        (
            "name",
            Arc::new(StringArray::from(vec!["ann", "bob", "cat"])),
        ),
        ("tags", Arc::new(tags.finish())),
        ("address", Arc::new(city)),
    ];
    batch_of(columns)
}

fn batch_of(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let schema = Schema::new(
        columns
            .iter()
            .map(|(name, values)| Field::new(*name, values.data_type().clone(), true))
            .collect::<Vec<_>>(),
    );
    RecordBatch::try_new(
        Arc::new(schema),
        columns.into_iter().map(|(_, values)| values).collect(),
    )
    .unwrap()
}

async fn count(t: &TestEngine) -> u64 {
    t.engine
        .count_dataset(&t.root, Some("goods"), &Value::Null)
        .await
        .unwrap()
}

async fn described(t: &TestEngine) -> Vec<(String, String, String)> {
    t.sql(&t.root, "DESCRIBE goods")
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let text = |key: &str| r[key].as_str().unwrap().to_owned();
            (text("column"), text("type"), text("mapping"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_keep_their_types_and_widen_and_replace_as_bulk_does() {
    let t = TestEngine::open().await;
    let origin = Origin::system();
    let written = t
        .engine
        .ingest_batch(&t.root, "goods", &first_batch(), &origin)
        .await
        .unwrap();
    assert_eq!(written, 3);
    assert_eq!(count(&t).await, 3);

    // Each column in the type of its values.
    let columns = described(&t).await;
    let column = |name: &str| {
        columns
            .iter()
            .find(|(c, ..)| c == name)
            .cloned()
            .unwrap_or_else(|| panic!("no column {name}: {columns:?}"))
    };
    assert_eq!(column("n").2, "long");
    assert_eq!(column("x").2, "double");
    assert_eq!(column("price").2, "scaled_float");
    assert_eq!(column("at").2, "date");
    assert_eq!(column("ok").2, "boolean");
    assert_eq!(column("name").2, "text");
    assert_eq!(column("tags").1, "array");
    assert_eq!(column("address.city").2, "text");

    // Decimals are exact; finer times are kept to the millisecond; the record ids are the
    // batch's.
    let rows = t
        .sql(
            &t.root,
            "SELECT _id, CAST(price AS VARCHAR) AS price, n, x, ok, \"address.city\" AS city, \
             CAST(\"at\" AS BIGINT) AS at FROM goods ORDER BY _id",
        )
        .await
        .unwrap();
    assert_eq!(
        rows,
        [
            json!({"_id": "a", "price": "12.34", "n": 1, "x": 0.5, "ok": true, "city": "Lyon", "at": 1_795_428_000_000i64}),
            json!({"_id": "b", "price": "5.00", "n": 2, "x": 1.5, "ok": false, "at": 1_795_428_001_000i64}),
            json!({"_id": "c", "price": "1000000.01", "n": 3, "x": 2.5, "ok": true, "city": "Oslo", "at": 1_795_428_002_000i64}),
        ]
    );
    let exact = t
        .sql(
            &t.root,
            "SELECT CAST(sum(price) AS VARCHAR) AS total FROM goods",
        )
        .await
        .unwrap();
    assert_eq!(exact, [json!({"total": "1000017.35"})]);

    // The Query DSL searches the typed values.
    let found = t
        .engine
        .search_dataset(
            &t.root,
            Some("goods"),
            &json!({"query": {"range": {"price": {"gte": 10}}}, "sort": [{"n": "asc"}]}),
            &SearchOptions::default(),
        )
        .await
        .unwrap();
    let ids: Vec<&str> = found
        .hits
        .iter()
        .map(|h| h.id.as_deref().unwrap())
        .collect();
    assert_eq!(ids, ["a", "c"]);
    let source = found.hits[0].source.as_ref().unwrap();
    assert_eq!(source["price"], json!(12.34));
    assert_eq!(source["tags"], json!(["red", "big"]));
    assert_eq!(source["address"], json!({"city": "Lyon"}));

    // A second batch: `n` now holds fractions (the column widens to float64), and record `a`
    // is replaced by its id.
    let second = batch_of(vec![
        ("_id", Arc::new(StringArray::from(vec!["a", "d"]))),
        ("n", Arc::new(Float64Array::from(vec![10.25, 4.0]))),
    ]);
    t.engine
        .ingest_batch(&t.root, "goods", &second, &origin)
        .await
        .unwrap();
    assert_eq!(column_type(&described(&t).await, "n"), "double");
    assert_eq!(count(&t).await, 4);
    let a = t
        .sql(&t.root, "SELECT n, price FROM goods WHERE _id = 'a'")
        .await
        .unwrap();
    assert_eq!(a, [json!({"n": 10.25})]);

    // A column with no dataset type: refused, named, and nothing written.
    let binary = batch_of(vec![
        ("name", Arc::new(StringArray::from(vec!["eve"]))),
        (
            "blob",
            Arc::new(arrow::array::BinaryArray::from(vec![
                b"\x00\x01".as_slice(),
            ])),
        ),
    ]);
    let refused = t
        .engine
        .ingest_batch(&t.root, "goods", &binary, &origin)
        .await;
    match refused {
        Err(Error::BadRequest(reason)) => assert!(reason.contains("\"blob\""), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(count(&t).await, 4);

    // Bulk's JSON writes into the columns the batches made: a decimal stays exact.
    let body = "{\"index\": {\"_id\": \"e\"}}\n{\"price\": 7.5, \"n\": 2}\n";
    let items = t
        .engine
        .bulk(
            &t.root,
            Some("goods"),
            bulk::parse(&Bytes::from(body)).unwrap(),
            &origin,
        )
        .await;
    assert!(
        matches!(items[0].outcome, Outcome::Done { .. }),
        "{:?}",
        items[0]
    );
    let e = t
        .sql(
            &t.root,
            "SELECT CAST(price AS VARCHAR) AS price FROM goods WHERE _id = 'e'",
        )
        .await
        .unwrap();
    assert_eq!(e, [json!({"price": "7.50"})]);
}

fn column_type(columns: &[(String, String, String)], name: &str) -> String {
    columns
        .iter()
        .find(|(c, ..)| c == name)
        .map(|(_, t, _)| t.clone())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_an_id_twice_or_a_null_id_is_refused_whole() {
    let t = TestEngine::open().await;
    let origin = Origin::system();
    for ids in [vec![Some("a"), Some("a")], vec![Some("a"), None]] {
        let batch = batch_of(vec![
            ("_id", Arc::new(StringArray::from(ids))),
            ("n", Arc::new(Int32Array::from(vec![1, 2]))),
        ]);
        let refused = t
            .engine
            .ingest_batch(&t.root, "goods", &batch, &origin)
            .await;
        assert!(matches!(refused, Err(Error::BadRequest(_))), "{refused:?}");
    }
    let missing = t
        .engine
        .count_dataset(&t.root, Some("goods"), &Value::Null)
        .await;
    assert!(
        matches!(missing, Err(Error::DatasetNotFound(_))),
        "{missing:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_and_points_go_to_the_columns_declared_for_them() {
    use arrow::array::{FixedSizeListArray, Float64Array};
    let t = TestEngine::open().await;
    let origin = Origin::system();
    let mappings = json!({"properties": {
        "v": {"type": "knn_vector", "dimension": 2},
        "loc": {"type": "geo_point"},
    }});
    t.engine
        .create_dataset(
            &t.root,
            "places",
            crate::documents::mapping::declared_columns(&mappings, false).unwrap(),
            &[],
            &origin,
        )
        .await
        .unwrap();
    let vectors = FixedSizeListArray::from_iter_primitive::<arrow::datatypes::Float32Type, _, _>(
        [Some([Some(1.0), Some(0.0)]), Some([Some(0.0), Some(1.0)])],
        2,
    );
    let points = StructArray::new(
        Fields::from(vec![
            Field::new("lat", DataType::Float64, true),
            Field::new("lon", DataType::Float64, true),
        ]),
        vec![
            Arc::new(Float64Array::from(vec![45.76, 59.91])) as ArrayRef,
            Arc::new(Float64Array::from(vec![4.84, 10.75])),
        ],
        None,
    );
    let batch = batch_of(vec![
        ("_id", Arc::new(StringArray::from(vec!["lyon", "oslo"]))),
        ("v", Arc::new(vectors)),
        ("loc", Arc::new(points)),
    ]);
    t.engine
        .ingest_batch(&t.root, "places", &batch, &origin)
        .await
        .unwrap();
    let search = |body: Value| {
        let engine = t.engine.clone();
        let root = t.root.clone();
        async move {
            let found = engine
                .search_dataset(&root, Some("places"), &body, &SearchOptions::default())
                .await
                .unwrap();
            found
                .hits
                .iter()
                .map(|h| h.id.clone().unwrap())
                .collect::<Vec<_>>()
        }
    };
    let nearest = search(json!({"knn": {"field": "v", "query_vector": [0.9, 0.1], "k": 1}})).await;
    assert_eq!(nearest, ["lyon"]);
    let near_oslo = search(json!({"query": {"geo_distance": {
        "distance": "50km", "loc": {"lat": 59.9, "lon": 10.7}
    }}}))
    .await;
    assert_eq!(near_oslo, ["oslo"]);
    let columns = t.sql(&t.root, "DESCRIBE places").await.unwrap();
    let mapping = |name: &str| {
        columns
            .iter()
            .find(|c| c["column"] == name)
            .map(|c| c["mapping"].clone())
            .unwrap()
    };
    assert_eq!(mapping("v"), json!("knn_vector"));
    assert_eq!(mapping("loc"), json!("geo_point"));
}
