//! A seeded generator of sales-like rows (8 columns), for the benchmarks: the same seed gives
//! the same rows on every machine.

#![allow(clippy::expect_used)]

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use arrow::{
    array::{
        ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
        TimestampMillisecondArray,
    },
    datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit},
};
use parquet::{
    arrow::ArrowWriter,
    file::reader::{FileReader, SerializedFileReader},
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::{Value, json};

const CATEGORIES: usize = 100;
const WORDS: &[&str] = &[
    "red", "green", "blue", "fast", "slow", "north", "south", "order", "return", "gift", "bulk",
    "sample", "express", "standard", "priority", "online", "store", "phone",
];

pub struct Generator {
    seed: u64,
}

impl Generator {
    pub fn new(seed: u64) -> Generator {
        Generator { seed }
    }

    pub fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("category", DataType::Utf8, false),
            Field::new("amount", DataType::Float64, true),
            Field::new("quantity", DataType::Int32, true),
            Field::new("customer", DataType::Int64, true),
            Field::new("note", DataType::Utf8, true),
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
            Field::new("paid", DataType::Boolean, true),
        ]))
    }

    /// The `index`-th batch of `rows` rows.
    pub fn batch(&self, index: usize, rows: usize) -> RecordBatch {
        let mut rng = StdRng::seed_from_u64(self.seed ^ (index as u64).wrapping_mul(0x9E37_79B9));
        let first = (index * rows) as i64;
        let note = |rng: &mut StdRng| {
            (0..rng.random_range(2..5))
                .map(|_| WORDS[rng.random_range(0..WORDS.len())])
                .collect::<Vec<_>>()
                .join(" ")
        };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(
                (0..rows as i64).map(|i| first + i),
            )),
            Arc::new(StringArray::from_iter_values((0..rows).map(|_| {
                format!("category-{:03}", rng.random_range(0..CATEGORIES))
            }))),
            Arc::new(Float64Array::from_iter_values(
                (0..rows).map(|_| (rng.random_range(100..100_000) as f64) / 100.0),
            )),
            Arc::new(Int32Array::from_iter_values(
                (0..rows).map(|_| rng.random_range(1..20)),
            )),
            Arc::new(Int64Array::from_iter_values(
                (0..rows).map(|_| rng.random_range(0..1_000_000)),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|_| note(&mut rng)),
            )),
            Arc::new(
                TimestampMillisecondArray::from_iter_values(
                    (0..rows as i64).map(|i| 1_700_000_000_000 + (first + i) * 1_000),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(BooleanArray::from_iter(
                (0..rows).map(|_| Some(rng.random_bool(0.8))),
            )),
        ];
        RecordBatch::try_new(Self::schema(), columns).expect("a valid batch")
    }
}

/// The create_table request of a table of these rows.
pub fn table_request(name: &str) -> Value {
    json!({"name": name, "schema": [
        {"name": "id", "type": "int64", "nullable": false},
        {"name": "category", "type": "utf8", "nullable": false},
        {"name": "amount", "type": "float64"},
        {"name": "quantity", "type": "int32"},
        {"name": "customer", "type": "int64"},
        {"name": "note", "type": "utf8"},
        {"name": "at", "type": "timestamp[ms,UTC]"},
        {"name": "paid", "type": "bool"}
    ]})
}

/// One batch as an Arrow IPC stream.
pub fn ipc(batch: &RecordBatch) -> Vec<u8> {
    let mut out = Vec::new();
    let mut writer =
        arrow::ipc::writer::StreamWriter::try_new(&mut out, &batch.schema()).expect("writer");
    writer.write(batch).expect("write");
    writer.finish().expect("finish");
    drop(writer);
    out
}

/// One batch as a Parquet file, with the writer settings of strata's segments.
pub fn parquet(batch: &RecordBatch) -> Vec<u8> {
    let properties = strata_projections::table::segment_properties(
        strata_projections::table::TableOptions::default().page_bytes,
    );
    let mut out = Vec::new();
    let mut writer =
        ArrowWriter::try_new(&mut out, batch.schema(), Some(properties)).expect("writer");
    writer.write(batch).expect("write");
    writer.close().expect("close");
    out
}

/// Every segment file under a data directory's `tables/`.
pub fn segment_files(tables: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(tables, &mut out);
    out.sort();
    out
}

/// The rows of a Parquet file, from its footer (0 for a file being written).
pub fn parquet_rows(path: &Path) -> usize {
    std::fs::File::open(path)
        .ok()
        .and_then(|f| SerializedFileReader::new(f).ok())
        .map_or(0, |r| r.metadata().file_metadata().num_rows() as usize)
}
