use std::sync::Arc;

use arrow::{
    array::{AsArray, Int32Array, StringArray},
    datatypes::{Float32Type, Int64Type, TimestampMillisecondType},
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};

use super::*;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("title", DataType::Utf8, false),
        Field::new("n", DataType::Int64, true),
        Field::new(
            "at",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
        Field::new(
            "v",
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), 2),
            true,
        ),
    ]))
}

fn json(body: &str) -> Result<RecordBatch> {
    RowsBody::Json(body.as_bytes().to_vec()).into_batch(&schema())
}

fn ipc(batches: &[RecordBatch]) -> Vec<u8> {
    let mut out = Vec::new();
    let schema = batches.first().map(|b| b.schema()).unwrap_or_else(schema);
    let mut writer = StreamWriter::try_new(&mut out, &schema).unwrap();
    for batch in batches {
        writer.write(batch).unwrap();
    }
    writer.finish().unwrap();
    drop(writer);
    out
}

fn message(result: Result<RecordBatch>) -> String {
    match result {
        Err(Error::BadRequest(message)) => message,
        other => panic!("expected a bad request, got {other:?}"),
    }
}

#[test]
fn json_rows_decode_into_the_table_types() {
    let batch = json(
        r#"{"data": [
            {"title": "a", "n": 1, "at": "2024-05-01T10:00:00Z", "v": [1.5, 2]},
            {"title": "b"}
        ]}"#,
    )
    .unwrap();
    assert_eq!(batch.num_rows(), 2);
    assert_eq!(batch.column(1).as_primitive::<Int64Type>().value(0), 1);
    assert!(batch.column(1).is_null(1));
    assert_eq!(
        batch
            .column(2)
            .as_primitive::<TimestampMillisecondType>()
            .value(0),
        1_714_557_600_000
    );
    let v = batch.column(3).as_fixed_size_list();
    assert_eq!(
        v.value(0).as_primitive::<Float32Type>().values(),
        &[1.5, 2.0]
    );
    assert!(v.is_null(1));
    assert_eq!(json(r#"{"data": []}"#).unwrap().num_rows(), 0);
}

#[test]
fn bad_json_rows_name_the_column() {
    for (body, needles) in [
        (r#"{"data": [{"title": "a", "colour": 1}]}"#, vec!["colour"]),
        (
            r#"{"data": [{"title": "a", "_row_id": 1}]}"#,
            vec!["_row_id", "assigned"],
        ),
        (r#"{"data": [{"title": "a", "n": "many"}]}"#, vec!["n"]),
        (r#"{"data": [{"n": 1}]}"#, vec!["title"]),
        (r#"{"data": [{"title": "a", "v": [1, 2, 3]}]}"#, vec!["v"]),
        (
            r#"{"data": [{"title": "a", "at": "yesterday"}]}"#,
            vec!["yesterday"],
        ),
        (
            r#"{"data": [{"title": "a", "n": 1.5}]}"#,
            vec!["\"n\"", "an integer", "fractional"],
        ),
        (
            r#"{"data": [{"title": "a", "n": "12"}]}"#,
            vec!["\"n\"", "an integer", "a string"],
        ),
        (r#"{"data": [{"title": 7}]}"#, vec!["\"title\"", "a string"]),
        (
            r#"{"data": [{"title": "a", "v": [1, "x"]}]}"#,
            vec!["\"v\"", "2 numbers"],
        ),
        (
            r#"{"data": [{"title": null}]}"#,
            vec!["\"title\" is not nullable", "row 0"],
        ),
        ("  ", vec!["required"]),
        (r#"{"rows": []}"#, vec!["\"data\""]),
        (r#"{"data": [], "more": 1}"#, vec!["more"]),
        (r#"{"data": [1]}"#, vec!["row 0"]),
        (r#"[1]"#, vec!["object"]),
        (r#"{"data": ["#, vec!["invalid request body"]),
        (r#"{"data": {}}"#, vec!["holding an array"]),
        (r#"{"data": 1}"#, vec!["holding an array"]),
        (r#"{"data": [], "data": []}"#, vec!["twice"]),
        (
            r#"{"data": []} x"#,
            vec!["invalid request body", "trailing"],
        ),
        ("7", vec!["object"]),
    ] {
        let message = message(json(body));
        for needle in needles {
            assert!(
                message.contains(needle),
                "{body}: {message} should mention {needle}"
            );
        }
    }
}

/// Rows are checked and decoded a chunk at a time as they are parsed: every chunk lands, a
/// refusal names its row wherever it is, and the row limit stops the parse where it is passed.
#[test]
fn json_rows_are_decoded_as_they_are_parsed() {
    let rows = |n: usize| -> Vec<String> {
        (0..n)
            .map(|i| format!(r#"{{"title": "t{i}", "n": {i}}}"#))
            .collect()
    };
    let body = |rows: &[String]| format!(r#"{{"data": [{}]}}"#, rows.join(","));
    let many = rows(3 * JSON_CHUNK_ROWS + 5);
    let batch = json(&body(&many)).unwrap();
    assert_eq!(batch.num_rows(), many.len());
    let n = batch.column(1).as_primitive::<Int64Type>();
    assert!((0..many.len()).all(|i| n.value(i) == i as i64));

    let mut bad = many.clone();
    bad[2500] = r#"{"title": "t", "n": "x"}"#.to_owned();
    let refused = message(json(&body(&bad)));
    assert!(refused.contains("row 2500"), "{refused}");

    let over = from_json(body(&rows(3)).as_bytes(), &schema(), 2);
    let refused = message(over);
    assert!(
        refused.contains("more than 2 rows") && refused.contains("at most 2 rows"),
        "{refused}"
    );
    assert_eq!(
        from_json(body(&rows(2)).as_bytes(), &schema(), 2)
            .unwrap()
            .num_rows(),
        2
    );
}

#[test]
fn arrow_rows_are_matched_by_name_and_cast_when_lossless() {
    let given = Arc::new(Schema::new(vec![
        Field::new("n", DataType::Int32, true),
        Field::new("title", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        given,
        vec![
            Arc::new(Int32Array::from(vec![7, 8])),
            Arc::new(StringArray::from(vec!["x", "y"])),
        ],
    )
    .unwrap();
    let coerced = RowsBody::ArrowIpc(ipc(&[batch]))
        .into_batch(&schema())
        .unwrap();
    assert_eq!(coerced.schema(), schema());
    assert_eq!(
        coerced.column(1).as_primitive::<Int64Type>().values(),
        &[7, 8]
    );
    assert!(coerced.column(3).is_null(0));
}

#[test]
fn arrow_casts_that_lose_information_are_refused() {
    let one = |field: Field, column: ArrayRef| {
        let fields = vec![Field::new("title", DataType::Utf8, false), field];
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            vec![Arc::new(StringArray::from(vec!["a"])), column],
        )
        .unwrap();
        RowsBody::ArrowIpc(ipc(&[batch])).into_batch(&schema())
    };
    // A fractional number into an int64 column, a string into an int64 column: refused.
    let error = message(one(
        Field::new("n", DataType::Float64, true),
        Arc::new(arrow::array::Float64Array::from(vec![1.5])),
    ));
    assert!(
        error.contains("\"n\"") && error.contains("without losing"),
        "{error}"
    );
    let error = message(one(
        Field::new("n", DataType::Utf8, true),
        Arc::new(StringArray::from(vec!["12"])),
    ));
    assert!(error.contains("without losing"), "{error}");
    // A float64 vector of the column's dimension is stored as float32; another dimension is not.
    let vectors = |n: i32, values: Vec<f64>| {
        let item = Arc::new(Field::new("item", DataType::Float64, true));
        let array = arrow::array::FixedSizeListArray::try_new(
            item.clone(),
            n,
            Arc::new(arrow::array::Float64Array::from(values)),
            None,
        )
        .unwrap();
        (
            Field::new("v", DataType::FixedSizeList(item, n), true),
            Arc::new(array) as ArrayRef,
        )
    };
    let (field, column) = vectors(2, vec![0.5, 0.25]);
    let stored = one(field, column).unwrap();
    let v = stored.column(3).as_fixed_size_list();
    assert_eq!(
        v.value(0).as_primitive::<Float32Type>().values(),
        &[0.5, 0.25]
    );
    let (field, column) = vectors(3, vec![1.0, 2.0, 3.0]);
    let error = message(one(field, column));
    assert!(error.contains("\"v\""), "{error}");
}

#[test]
fn bad_arrow_bodies_are_refused() {
    let one = |fields: Vec<Field>, columns: Vec<ArrayRef>| {
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    };
    let good = one(
        vec![Field::new("title", DataType::Utf8, false)],
        vec![Arc::new(StringArray::from(vec!["a"]))],
    );
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"not arrow at all".to_vec(), "not an Arrow IPC stream"),
        (ipc(&[]), "holds 0"),
        (ipc(&[good.clone(), good.clone()]), "holds 2"),
        (
            ipc(&[one(
                vec![Field::new("title", DataType::Utf8, true)],
                vec![Arc::new(StringArray::from(vec![None::<&str>]))],
            )]),
            "\"title\" is not nullable",
        ),
        (
            ipc(&[one(
                vec![
                    Field::new("title", DataType::Utf8, false),
                    Field::new("n", DataType::Utf8, true),
                ],
                vec![
                    Arc::new(StringArray::from(vec!["a"])),
                    Arc::new(StringArray::from(vec!["seven"])),
                ],
            )]),
            "column \"n\"",
        ),
        (
            ipc(&[one(
                vec![Field::new("extra", DataType::Utf8, true)],
                vec![Arc::new(StringArray::from(vec!["a"]))],
            )]),
            "\"extra\" is not in the table",
        ),
        (
            ipc(&[one(
                vec![Field::new("n", DataType::Int64, true)],
                vec![Arc::new(arrow::array::Int64Array::from(vec![1]))],
            )]),
            "\"title\" is missing",
        ),
    ];
    for (bytes, needle) in cases {
        let message = message(RowsBody::ArrowIpc(bytes).into_batch(&schema()));
        assert!(
            message.contains(needle),
            "{message} should mention {needle}"
        );
    }
}

#[test]
fn rows_render_as_ipc_and_json() {
    let batch = json(r#"{"data": [{"title": "a", "n": 2, "v": [1, 2]}]}"#).unwrap();
    let bytes = to_ipc(&schema(), std::slice::from_ref(&batch)).unwrap();
    let back = ipc::read_one_batch(&bytes, usize::MAX).unwrap();
    assert_eq!(back, batch);
    let text = String::from_utf8(to_json(&[batch]).unwrap()).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["data"][0]["title"], "a");
    assert_eq!(value["data"][0]["n"], 2);
    assert_eq!(value["data"][0]["at"], serde_json::Value::Null);
    assert_eq!(value["data"][0]["v"], serde_json::json!([1.0, 2.0]));
    assert_eq!(to_json(&[]).unwrap(), b"{\"data\":[]}");
}

/// The bodies of ../shared/repro/arrow: each crashed the server once (an abort on a huge
/// allocation, or a panic in the arrow crates). The valid one reads; every other is refused.
#[test]
fn hostile_arrow_bodies_are_refused_with_a_reason() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/repro/arrow");
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let arrowt = Arc::new(Schema::new(vec![
        Field::new("title", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
        Field::new(
            "v",
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), 4),
            true,
        ),
    ]));
    let valid = RowsBody::ArrowIpc(read("valid.arrows"))
        .into_batch(&arrowt)
        .unwrap();
    assert_eq!(valid.num_rows(), 100);
    let refused = |bytes: Vec<u8>| message(RowsBody::ArrowIpc(bytes).into_batch(&arrowt));
    let alloc = refused(read("alloc-abort.arrows"));
    assert!(alloc.contains("bytes remain"), "{alloc}");
    for name in [
        "panic-0.arrows",
        "panic-1.arrows",
        "panic-2.arrows",
        "panic-3.arrows",
        "panic-drops-connection.arrows",
    ] {
        let message = refused(read(name));
        assert!(!message.is_empty(), "{name}");
    }
    // 2 GiB of metadata stated in 72 bytes.
    let mut stated = vec![0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F];
    stated.extend([0u8; 64]);
    let message = refused(stated);
    assert!(
        message.contains("states 2147483647 bytes of metadata, but 64 bytes remain"),
        "{message}"
    );
}

#[test]
fn a_body_may_not_state_more_rows_than_a_request_takes() {
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new(
            "title",
            DataType::Utf8,
            false,
        )])),
        vec![Arc::new(StringArray::from(vec!["a", "b", "c"]))],
    )
    .unwrap();
    let bytes = ipc(&[batch]);
    let error = ipc::read_one_batch(&bytes, 2).unwrap_err().to_string();
    assert!(error.contains("at most 2 rows"), "{error}");
    // A null 2-dimension vector and the rest: each row takes its columns' width decoded.
    assert_eq!(
        max_rows(&schema()),
        MAX_DECODED_ROWS_BYTES / (4 + 8 + 8 + 8 + 4)
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
    /// Any change of up to 8 bytes of a valid body is read or refused; never an abort or an
    /// unanswered panic.
    #[test]
    fn mutated_arrow_bodies_never_crash(
        changes in proptest::collection::vec((0usize..4376, proptest::num::u8::ANY), 1..8)
    ) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/repro/arrow");
        let mut bytes = std::fs::read(dir.join("valid.arrows")).unwrap();
        for (at, byte) in changes {
            let at = at % bytes.len();
            bytes[at] = byte;
        }
        let _ = ipc::read_one_batch(&bytes, 1_000_000);
    }
}
