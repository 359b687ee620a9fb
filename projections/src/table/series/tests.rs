use std::sync::Arc;

use arrow::{
    array::{Float64Array, RecordBatch, StringArray, TimestampMillisecondArray, UInt64Array},
    datatypes::{DataType, Field, Schema, TimeUnit},
};
use proptest::prelude::*;
use roaring::RoaringTreemap;

use super::{Point, SeriesSet, codec, column_of_label, label_of_column, series_id};

/// Sample rows: (row id, time, value, metric name, job).
fn rows(samples: &[(u64, i64, f64, &str, Option<&str>)]) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("_row_id", DataType::UInt64, false),
        Field::new(
            "@timestamp",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
        Field::new("_series", DataType::UInt64, false),
        Field::new("value", DataType::Float64, false),
        Field::new("__name__", DataType::Utf8, true),
        Field::new("job", DataType::Utf8, true),
    ]);
    let ids = samples.iter().map(|s| {
        let mut labels = vec![("__name__", s.3)];
        labels.extend(s.4.map(|job| ("job", job)));
        series_id(labels)
    });
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(UInt64Array::from_iter_values(samples.iter().map(|s| s.0))),
            Arc::new(
                TimestampMillisecondArray::from_iter_values(samples.iter().map(|s| s.1))
                    .with_timezone("UTC"),
            ),
            Arc::new(UInt64Array::from_iter_values(ids)),
            Arc::new(Float64Array::from_iter_values(samples.iter().map(|s| s.2))),
            Arc::new(StringArray::from_iter(samples.iter().map(|s| Some(s.3)))),
            Arc::new(StringArray::from_iter(samples.iter().map(|s| s.4))),
        ],
    )
    .unwrap()
}

fn read_all(set: &SeriesSet, slot: usize, deleted: &RoaringTreemap) -> Vec<(i64, f64)> {
    let mut out = Vec::new();
    set.read(slot, i64::MIN, i64::MAX, deleted, &mut out)
        .unwrap();
    out.iter().map(|p| (p.t, p.v)).collect()
}

/// The label sets of a set's series, in its order, as text.
fn label_sets(set: &SeriesSet) -> Vec<String> {
    set.series()
        .iter()
        .map(|s| format!("{:?}", s.labels))
        .collect()
}

fn example() -> RecordBatch {
    rows(&[
        (0, 2000, 1.0, "up", Some("a")),
        (1, 1000, 5.0, "up", Some("b")),
        (2, 1000, 0.5, "up", Some("a")),
        (3, 3000, 2.0, "up", Some("a")),
        (4, 2000, 7.0, "up", Some("a")),
        (5, 1000, 9.0, "mem", None),
    ])
}

#[test]
fn groups_rows_by_series_in_time_order_and_the_last_write_of_a_time_wins() {
    let set = SeriesSet::build(&example()).unwrap();
    assert_eq!(
        label_sets(&set),
        [
            r#"[("__name__", "mem")]"#,
            r#"[("__name__", "up"), ("job", "a")]"#,
            r#"[("__name__", "up"), ("job", "b")]"#
        ]
    );
    let none = RoaringTreemap::new();
    assert_eq!(
        read_all(&set, 1, &none),
        [(1000, 0.5), (2000, 7.0), (3000, 2.0)]
    );
    // Row 4 deleted: the earlier write at 2000 shows again.
    let deleted: RoaringTreemap = [4u64].into_iter().collect();
    assert_eq!(
        read_all(&set, 1, &deleted),
        [(1000, 0.5), (2000, 1.0), (3000, 2.0)]
    );
    assert_eq!(set.series()[1].samples, 4);
    assert_eq!((set.series()[1].min_t, set.series()[1].max_t), (1000, 3000));
    assert_eq!(set.time_span(), (1000, 3000));
}

#[test]
fn label_sets_that_share_an_id_stay_apart_and_an_empty_value_is_no_label() {
    // Series ids are hashes, so two label sets may share one: here three do, rows interleaved.
    let batch = rows(&[
        (0, 1000, 1.0, "up", Some("a")),
        (1, 1000, 2.0, "up", Some("b")),
        (2, 2000, 3.0, "up", Some("a")),
        (3, 2000, 4.0, "up", Some("")),
        (4, 3000, 5.0, "up", None),
        (5, 3000, 6.0, "up", Some("b")),
    ]);
    let mut columns = batch.columns().to_vec();
    columns[2] = Arc::new(UInt64Array::from(vec![7u64; 6]));
    let batch = RecordBatch::try_new(batch.schema(), columns).unwrap();
    let set = SeriesSet::build(&batch).unwrap();
    assert_eq!(
        label_sets(&set),
        [
            r#"[("__name__", "up")]"#,
            r#"[("__name__", "up"), ("job", "a")]"#,
            r#"[("__name__", "up"), ("job", "b")]"#
        ]
    );
    assert!(set.series().iter().all(|s| s.id == 7));
    let none = RoaringTreemap::new();
    assert_eq!(read_all(&set, 0, &none), [(2000, 4.0), (3000, 5.0)]);
    assert_eq!(read_all(&set, 1, &none), [(1000, 1.0), (2000, 3.0)]);
    assert_eq!(read_all(&set, 2, &none), [(1000, 2.0), (3000, 6.0)]);
}

#[test]
fn reads_a_time_range_and_selects_through_postings() {
    let set = SeriesSet::build(&example()).unwrap();
    let mut out = Vec::new();
    set.read(1, 1500, 2000, &RoaringTreemap::new(), &mut out)
        .unwrap();
    assert_eq!(
        out,
        [Point {
            t: 2000,
            v: 7.0,
            row: 4
        }]
    );
    assert_eq!(set.select(&[("__name__", "up")], |_| true), [1, 2]);
    assert_eq!(
        set.select(&[("__name__", "up"), ("job", "b")], |_| true),
        [2]
    );
    assert!(set.select(&[("job", "c")], |_| true).is_empty());
    assert_eq!(set.select(&[], |s| s.label("job").is_none()), [0]);
}

#[test]
fn a_range_read_appends_to_what_is_read_already() {
    let dir = tempfile::tempdir().unwrap();
    let built = SeriesSet::build(&example()).unwrap();
    let opened = built.write(&dir.path().join("series")).unwrap();
    for set in [&built, &opened] {
        let before = Point {
            t: 500,
            v: 9.0,
            row: 99,
        };
        let mut out = vec![before];
        set.read(1, 1000, 2500, &RoaringTreemap::new(), &mut out)
            .unwrap();
        let read: Vec<(i64, f64)> = out.iter().map(|p| (p.t, p.v)).collect();
        assert_eq!(read[0], (500, 9.0));
        assert!(
            read[1..].iter().all(|(t, _)| (1000..=2500).contains(t)),
            "{read:?}"
        );
        assert_eq!(
            read[1..],
            read_all(&built, 1, &RoaringTreemap::new())[..read.len() - 1]
        );
    }
}

#[test]
fn a_written_set_reads_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let built = SeriesSet::build(&example()).unwrap();
    let path = dir.path().join("series");
    let written = built.write(&path).unwrap();
    let opened = SeriesSet::open(&path).unwrap();
    let deleted: RoaringTreemap = [4u64].into_iter().collect();
    for set in [&written, &opened] {
        assert_eq!(set.series(), built.series());
        for slot in 0..3 {
            assert_eq!(
                read_all(set, slot, &deleted),
                read_all(&built, slot, &deleted)
            );
        }
    }
}

#[test]
fn a_damaged_file_is_corruption_not_wrong_samples() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("series");
    SeriesSet::build(&example()).unwrap().write(&path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 6;
    bytes[last] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let set = SeriesSet::open(&path).unwrap();
    let mut out = Vec::new();
    let errors = (0..3)
        .filter(|slot| {
            set.read(*slot, i64::MIN, i64::MAX, &RoaringTreemap::new(), &mut out)
                .is_err()
        })
        .count();
    assert_eq!(errors, 1);
    bytes[30] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    assert!(SeriesSet::open(&path).is_err());
}

#[test]
fn label_columns_escape_the_sample_columns() {
    assert_eq!(column_of_label("job"), "job");
    assert_eq!(column_of_label("value"), "label:value");
    assert_eq!(column_of_label("label:x"), "label:label:x");
    for label in ["job", "value", "_series", "label:x", "@timestamp"] {
        assert_eq!(label_of_column(&column_of_label(label)), Some(label));
    }
    assert_eq!(label_of_column("value"), None);
    assert_eq!(label_of_column("_row_id"), None);
}

#[test]
fn series_ids_are_stable() {
    // Stored in the log: a change here breaks every metrics dataset written before it. (The
    // figure is FNV-1a of b"__name__\xffup\xff", computed apart from this code.)
    assert_eq!(series_id([("__name__", "up")]), 0xa6a0_cb87_086e_c65b);
    assert_ne!(
        series_id([("a", "bc")]),
        series_id([("ab", "c")]),
        "names and values are delimited"
    );
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::from_bits(0x7ff0_0000_0000_0002)),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        (0u32..1000).prop_map(f64::from),
        any::<f64>(),
    ]
}

proptest! {
    #[test]
    fn blocks_round_trip(
        start in any::<i64>(),
        steps in proptest::collection::vec((-20_000i64..60_000, value(), 0u64..1 << 40), 0..200),
    ) {
        let mut t = start;
        let points: Vec<Point> = steps
            .iter()
            .map(|(step, v, row)| {
                t = t.wrapping_add(*step);
                Point { t, v: *v, row: *row }
            })
            .collect();
        let series = vec![super::SeriesMeta {
            id: 1,
            labels: vec![("__name__".into(), "m".into())],
            min_t: 0,
            max_t: 0,
            samples: points.len() as u32,
        }];
        let file = codec::encode(&series, std::slice::from_ref(&points));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        std::fs::write(&path, &file).unwrap();
        let (read, blocks) = codec::read_table(&std::fs::File::open(&path).unwrap(), &path).unwrap();
        prop_assert_eq!(&read, &series);
        let (offset, len) = blocks[0];
        let block = &file[offset as usize..(offset + u64::from(len)) as usize];
        // Appended after what the vector holds already.
        let mut decoded = vec![Point { t: -1, v: 0.5, row: 7 }];
        codec::decode_block_into(block, points.len(), &mut decoded).unwrap();
        let decoded = &decoded[1..];
        prop_assert_eq!(decoded.len(), points.len());
        for (a, b) in decoded.iter().zip(&points) {
            prop_assert_eq!((a.t, a.v.to_bits(), a.row), (b.t, b.v.to_bits(), b.row));
        }
    }

    /// A block read for a time range holds the points in the range, each whole; a block in
    /// time order holds nothing else.
    #[test]
    fn blocks_read_for_a_range_hold_its_points(
        steps in proptest::collection::vec((-20_000i64..60_000, value(), 0u64..1 << 40), 0..200),
        from in -1_000_000i64..4_000_000,
        span in 0i64..4_000_000,
        sorted in any::<bool>(),
    ) {
        let mut t = 0i64;
        let mut points: Vec<Point> = steps
            .iter()
            .map(|(step, v, row)| {
                t = t.wrapping_add(*step);
                Point { t, v: *v, row: *row }
            })
            .collect();
        if sorted {
            points.sort_by_key(|p| (p.t, p.row));
        }
        let block = codec::encode_block_for_tests(&points);
        let (mint, maxt) = (from, from + span);
        let mut read = Vec::new();
        codec::decode_block_range(&block, points.len(), mint, maxt, &mut read).unwrap();
        let key = |p: &Point| (p.t, p.v.to_bits(), p.row);
        let inside = |ps: &[Point]| -> Vec<_> {
            ps.iter().filter(|p| (mint..=maxt).contains(&p.t)).map(key).collect()
        };
        prop_assert_eq!(inside(&read), inside(&points));
        if sorted {
            prop_assert_eq!(read.len(), inside(&points).len());
        }
    }
}
