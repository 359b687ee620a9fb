//! Counter reset detection, re-expressed from Prometheus' `TestFloatHistogramDetectReset`.

use super::*;

const NEG: [f64; 4] = [3.1, 3.0, 1.234e5, 1000.0];
const NEG_SPANS: &[(i32, u32)] = &[(3, 2), (3, 2)];

/// The usual test histogram with the given zero bucket, count and positive side.
fn base(zero: (f64, f64), count: f64, pos_spans: &[(i32, u32)], pos: &[f64]) -> FloatHistogram {
    exp(0, zero, count, 2349209.324, pos_spans, pos, NEG_SPANS, &NEG)
}

fn with_neg(mut x: FloatHistogram, neg: &[f64]) -> FloatHistogram {
    x.negative_buckets = neg.to_vec();
    x
}

fn high_res() -> FloatHistogram {
    exp(
        1,
        (0.01, 5.5),
        3493.3,
        2349209.324,
        &[(-5, 4), (2, 6)],
        &[0.4, 0.6, 1.0, 0.23, 2.0, 1.3, 1.2, 3.0, 0.05, 0.05],
        &[(5, 4), (6, 4)],
        &[2.0, 1.1, 2.0, 1.0, 0.234e5, 1e5, 500.0, 500.0],
    )
}

#[test]
fn detect_reset_cases() {
    let z = (0.01, 5.5);
    let full = || base(z, 3493.3, &[(-2, 2), (1, 3)], &[1.0, 1.23, 3.3, 4.2, 0.1]);
    let with_gap = || base(z, 3493.3, &[(-2, 2), (1, 3)], &[1.0, 0.0, 3.3, 4.2, 0.1]);
    let missing = || base(z, 3493.3, &[(-2, 1), (2, 3)], &[1.0, 3.3, 4.2, 0.1]);
    let mut cases: Vec<(&str, FloatHistogram, FloatHistogram, bool)> = vec![
        (
            "zero values",
            FloatHistogram::default(),
            FloatHistogram::default(),
            false,
        ),
        (
            "no buckets to some buckets",
            FloatHistogram::default(),
            missing(),
            false,
        ),
        (
            "some buckets to no buckets",
            missing(),
            FloatHistogram::default(),
            true,
        ),
        ("one bucket appears", missing(), full(), false),
        ("one bucket disappears", full(), missing(), true),
        (
            "an unpopulated bucket disappears",
            with_gap(),
            missing(),
            false,
        ),
        (
            "an unpopulated bucket at the end disappears",
            base(z, 3493.3, &[(-2, 1), (1, 3)], &[1.0, 3.3, 4.2, 0.0]),
            base(z, 3493.3, &[(-2, 1), (1, 2)], &[1.0, 3.3, 4.2]),
            false,
        ),
        (
            "an unpopulated bucket disappears in a histogram with nothing else",
            exp(0, (0.0, 0.0), 0.0, 0.0, &[(23, 1)], &[0.0], &[], &[]),
            FloatHistogram::default(),
            false,
        ),
        (
            "zero count goes up",
            with_gap(),
            base(
                (0.01, 5.6),
                3493.3,
                &[(-2, 2), (1, 3)],
                &[1.0, 0.0, 3.3, 4.2, 0.1],
            ),
            false,
        ),
        (
            "zero count goes down",
            with_gap(),
            base(
                (0.01, 5.4),
                3493.3,
                &[(-2, 2), (1, 3)],
                &[1.0, 0.0, 3.3, 4.2, 0.1],
            ),
            true,
        ),
        (
            "count goes up",
            with_gap(),
            base(z, 3493.4, &[(-2, 2), (1, 3)], &[1.0, 0.0, 3.3, 4.2, 0.1]),
            false,
        ),
        (
            "count goes down",
            with_gap(),
            base(z, 3493.2, &[(-2, 2), (1, 3)], &[1.0, 0.0, 3.3, 4.2, 0.1]),
            true,
        ),
        (
            "one positive bucket goes up",
            with_gap(),
            base(z, 3493.3, &[(-2, 2), (1, 3)], &[1.0, 0.0, 3.3, 4.3, 0.1]),
            false,
        ),
        (
            "one positive bucket goes down",
            with_gap(),
            base(z, 3493.3, &[(-2, 2), (1, 3)], &[1.0, 0.0, 3.3, 4.1, 0.1]),
            true,
        ),
        (
            "one negative bucket goes up",
            with_gap(),
            with_neg(with_gap(), &[3.1, 3.1, 1.234e5, 1000.0]),
            false,
        ),
        (
            "one negative bucket goes down",
            with_gap(),
            with_neg(with_gap(), &[3.1, 2.9, 1.234e5, 1000.0]),
            true,
        ),
        (
            "zero threshold decreases",
            full(),
            base(
                (0.009, 5.5),
                3493.3,
                &[(-2, 2), (1, 3)],
                &[1.0, 1.23, 3.3, 4.2, 0.1],
            ),
            true,
        ),
        (
            "zero threshold increases without touching any existing buckets",
            full(),
            base(
                (0.011, 5.5),
                3493.3,
                &[(-2, 2), (1, 3)],
                &[1.0, 1.23, 3.3, 4.2, 0.1],
            ),
            false,
        ),
        (
            "zero threshold increases enough to cover existing buckets",
            full(),
            base((1.0, 7.73), 3493.3, &[(1, 3)], &[3.3, 4.2, 0.1]),
            false,
        ),
        (
            "zero threshold increases into the middle of an existing bucket",
            full(),
            base(
                (0.3, 5.5),
                3493.3,
                &[(-2, 2), (1, 3)],
                &[1.0, 1.23, 3.3, 4.2, 0.1],
            ),
            true,
        ),
        (
            "schema increases without any other changes",
            full(),
            high_res(),
            true,
        ),
        (
            "schema decreases without any other changes",
            high_res(),
            full(),
            false,
        ),
        (
            "schema decreases and a bucket goes up",
            high_res(),
            base(z, 3493.3, &[(-2, 2), (1, 3)], &[1.0, 1.23, 4.3, 4.2, 0.1]),
            false,
        ),
        (
            "schema decreases and a bucket goes down",
            high_res(),
            base(z, 3493.3, &[(-2, 2), (1, 3)], &[1.0, 1.23, 2.3, 4.2, 0.1]),
            true,
        ),
    ];
    let b4 = [1.0, 2.0, 3.0, 4.0];
    cases.extend([
        (
            "custom: one bucket appears",
            nhcb(3493.3, 1.0, &[(0, 1), (2, 3)], &[1.0, 3.3, 4.2, 0.1], &b4),
            nhcb(
                3493.3,
                1.0,
                &[(0, 2), (1, 3)],
                &[1.0, 1.23, 3.3, 4.2, 0.1],
                &b4,
            ),
            false,
        ),
        (
            "custom: one bucket disappears",
            nhcb(
                3493.3,
                1.0,
                &[(0, 2), (1, 3)],
                &[1.0, 1.23, 3.3, 4.2, 0.1],
                &b4,
            ),
            nhcb(3493.3, 1.0, &[(0, 1), (2, 3)], &[1.0, 3.3, 4.2, 0.1], &b4),
            true,
        ),
        (
            "custom: an unpopulated bucket disappears",
            nhcb(
                3493.3,
                1.0,
                &[(0, 2), (1, 3)],
                &[1.0, 0.0, 3.3, 4.2, 0.1],
                &b4,
            ),
            nhcb(3493.3, 1.0, &[(0, 1), (2, 3)], &[1.0, 3.3, 4.2, 0.1], &b4),
            false,
        ),
        (
            "custom: one positive bucket goes down",
            nhcb(
                3493.3,
                1.0,
                &[(0, 2), (1, 3)],
                &[1.0, 0.0, 3.3, 4.2, 0.1],
                &b4,
            ),
            nhcb(
                3493.3,
                1.0,
                &[(0, 2), (1, 3)],
                &[1.0, 0.0, 3.3, 4.1, 0.1],
                &b4,
            ),
            true,
        ),
        (
            "mismatched custom bounds, all buckets increase",
            nhcb(
                200.0,
                1000.0,
                &[(0, 4)],
                &[20.0, 35.0, 40.0, 50.0],
                &[0.0, 1.0, 2.0, 3.0],
            ),
            nhcb(
                200.0,
                1000.0,
                &[(0, 5)],
                &[25.0, 15.0, 40.0, 50.0, 70.0],
                &[0.0, 0.5, 1.0, 2.0, 3.0],
            ),
            false,
        ),
        (
            "mismatched custom bounds, reset in a middle bucket",
            nhcb(
                100.0,
                500.0,
                &[(1, 4)],
                &[10.0, 15.0, 20.0, 25.0],
                &[0.0, 1.0, 3.0, 5.0],
            ),
            nhcb(
                100.0,
                500.0,
                &[(1, 5)],
                &[10.0, 16.0, 10.0, 5.0, 25.0],
                &[0.0, 1.0, 2.0, 3.0, 5.0],
            ),
            true,
        ),
        (
            "mismatched custom bounds, reset in the last bucket",
            nhcb(
                100.0,
                500.0,
                &[(1, 3)],
                &[10.0, 20.0, 20.0],
                &[0.0, 1.0, 2.0],
            ),
            nhcb(
                100.0,
                500.0,
                &[(1, 4)],
                &[100.0, 200.0, 8.0, 7.0],
                &[0.0, 1.0, 2.0, 3.0],
            ),
            true,
        ),
        (
            "mismatched custom bounds, nothing in common but +Inf",
            nhcb(
                100.0,
                500.0,
                &[(1, 3)],
                &[10.0, 20.0, 30.0],
                &[4.0, 5.0, 6.0],
            ),
            nhcb(
                100.0,
                500.0,
                &[(1, 3)],
                &[15.0, 25.0, 35.0],
                &[1.0, 2.0, 3.0],
            ),
            false,
        ),
        (
            "mismatched custom bounds, sparse common bounds",
            nhcb(
                200.0,
                1000.0,
                &[(0, 4)],
                &[10.0, 20.0, 30.0, 40.0],
                &[0.0, 1.0, 3.0, 5.0],
            ),
            nhcb(
                200.0,
                1000.0,
                &[(0, 5)],
                &[15.0, 25.0, 70.0, 50.0, 100.0],
                &[0.0, 2.0, 3.0, 4.0, 5.0],
            ),
            false,
        ),
        (
            "mismatched custom bounds and split spans, reset",
            nhcb(
                200.0,
                1000.0,
                &[(0, 2), (1, 3)],
                &[10.0, 20.0, 30.0, 40.0, 50.0],
                &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
            ),
            nhcb(
                200.0,
                1000.0,
                &[(0, 3), (1, 2)],
                &[15.0, 25.0, 35.0, 25.0, 60.0],
                &[0.0, 1.0, 3.0, 4.0, 5.0, 7.0],
            ),
            true,
        ),
        (
            "mismatched custom bounds and split spans, no reset",
            nhcb(
                300.0,
                1500.0,
                &[(0, 2), (2, 3)],
                &[10.0, 20.0, 30.0, 40.0, 50.0],
                &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            ),
            nhcb(
                300.0,
                1500.0,
                &[(0, 3), (1, 2)],
                &[12.0, 25.0, 45.0, 75.0, 95.0],
                &[0.0, 0.5, 1.0, 3.0, 5.0, 7.0],
            ),
            false,
        ),
    ]);
    for (name, previous, current, want) in cases {
        assert_eq!(current.detect_reset(&previous), want, "{name}");
    }
}

#[test]
fn hints_decide_without_looking() {
    let previous = h("{{count:10 buckets:[10]}}");
    let mut current = h("{{count:1 buckets:[1]}}");
    current.counter_reset_hint = CounterResetHint::NotReset;
    assert!(!current.detect_reset(&previous));
    current.counter_reset_hint = CounterResetHint::Gauge;
    assert!(current.detect_reset(&previous));
    let mut grown = h("{{count:20 buckets:[20]}}");
    grown.counter_reset_hint = CounterResetHint::Reset;
    assert!(grown.detect_reset(&previous));
}

#[test]
fn schema_kinds_changing() {
    let custom = h("{{schema:-53 count:1 custom_values:[1] buckets:[1]}}");
    let exponential = h("{{count:1 buckets:[1]}}");
    assert!(custom.detect_reset(&exponential));
    assert!(exponential.detect_reset(&custom));
}
