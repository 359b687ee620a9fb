//! Unit tests of the histogram module. Many cases are re-expressed from Prometheus'
//! `model/histogram/float_histogram_test.go` and from `native_histograms.test`.

use super::super::quantile::{histogram_fraction, histogram_quantile, histogram_stddev};
use super::*;

#[path = "tests/accumulate.rs"]
mod accumulate;
#[path = "tests/add.rs"]
mod add;
#[path = "tests/compact.rs"]
mod compact;
#[path = "tests/iter.rs"]
mod iter;
#[path = "tests/reset.rs"]
mod reset;
#[path = "tests/robust.rs"]
mod robust;
#[path = "tests/sub.rs"]
mod sub;
#[path = "tests/text.rs"]
mod text;
#[path = "tests/trim.rs"]
mod trim;

/// A histogram in the test-script notation.
fn h(text: &str) -> FloatHistogram {
    FloatHistogram::parse_notation(text).unwrap()
}

fn spans(s: &[(i32, u32)]) -> Vec<Span> {
    s.iter().map(|&(o, l)| Span::new(o, l)).collect()
}

/// An exponential histogram from its fields; `zero` is (threshold, count).
#[allow(clippy::too_many_arguments)]
fn exp(
    schema: i32,
    zero: (f64, f64),
    count: f64,
    sum: f64,
    pos_spans: &[(i32, u32)],
    pos: &[f64],
    neg_spans: &[(i32, u32)],
    neg: &[f64],
) -> FloatHistogram {
    FloatHistogram {
        schema,
        zero_threshold: zero.0,
        zero_count: zero.1,
        count,
        sum,
        positive_spans: spans(pos_spans),
        positive_buckets: pos.to_vec(),
        negative_spans: spans(neg_spans),
        negative_buckets: neg.to_vec(),
        ..FloatHistogram::default()
    }
}

/// A histogram with custom buckets.
fn nhcb(count: f64, sum: f64, s: &[(i32, u32)], buckets: &[f64], bounds: &[f64]) -> FloatHistogram {
    FloatHistogram {
        schema: CUSTOM_BUCKETS_SCHEMA,
        count,
        sum,
        positive_spans: spans(s),
        positive_buckets: buckets.to_vec(),
        custom_values: bounds.to_vec().into(),
        ..FloatHistogram::default()
    }
}

fn compacted(h: &FloatHistogram) -> FloatHistogram {
    let mut c = h.clone();
    c.compact(0);
    c
}

/// Equal once both are compacted, all fields compared exactly.
#[track_caller]
fn assert_same(actual: &FloatHistogram, expected: &FloatHistogram) {
    let (a, e) = (compacted(actual), compacted(expected));
    assert_eq!(a, e, "\n got {a}\nwant {e}");
}

/// Equal within the test runner's tolerance, as Prometheus' test scripts compare.
#[track_caller]
fn assert_matches(actual: &FloatHistogram, expected: &str) {
    let want = h(expected);
    assert!(
        want.matches_expected(actual, expected.contains("counter_reset_hint")),
        "\n got {actual}\nwant {want}"
    );
}

#[test]
fn mul_scales_counts_and_sum() {
    let mut x = exp(
        0,
        (0.01, 5.5),
        3493.3,
        2349209.324,
        &[(-2, 1), (2, 3)],
        &[1.0, 3.3, 4.2, 0.1],
        &[(3, 2), (3, 2)],
        &[3.1, 3.0, 1.234e5, 1000.0],
    );
    let same = x.clone();
    x.mul(1.0);
    assert_eq!(x, same);
    x.mul(2.0);
    let want = exp(
        0,
        (0.01, 11.0),
        3493.3 * 2.0,
        2349209.324 * 2.0,
        &[(-2, 1), (2, 3)],
        &[2.0, 6.6, 8.4, 0.2],
        &[(3, 2), (3, 2)],
        &[6.2, 6.0, 1.234e5 * 2.0, 2000.0],
    );
    assert_eq!(x, want);
    let mut empty = FloatHistogram::default();
    empty.mul(3.25);
    assert_eq!(empty, FloatHistogram::default());
}

#[test]
fn negative_factor_or_divisor_makes_a_gauge() {
    let mut x = h("{{count:4 sum:4 buckets:[1 2 1]}}");
    x.mul(-1.0);
    assert_matches(
        &x,
        "{{count:-4 sum:-4 counter_reset_hint:gauge buckets:[-1 -2 -1]}}",
    );
    let mut y = h("{{count:4 sum:4 counter_reset_hint:not_reset buckets:[1 2 1]}}");
    y.div(-2.0);
    assert_eq!(y.counter_reset_hint, CounterResetHint::Gauge);
    let mut z = h("{{count:4 sum:4 counter_reset_hint:not_reset buckets:[1 2 1]}}");
    z.mul(0.5);
    assert_eq!(z.counter_reset_hint, CounterResetHint::NotReset);
}

#[test]
fn division_by_zero_drops_buckets() {
    let mut x = h(
        "{{schema:0 count:21 sum:1234.5 z_bucket:1 z_bucket_w:0.001 buckets:[1 2] n_buckets:[3]}}",
    );
    x.div(0.0);
    assert!(x.count.is_infinite() && x.sum.is_infinite() && x.zero_count.is_infinite());
    assert!(x.positive_buckets.is_empty() && x.negative_buckets.is_empty());
    assert!(x.positive_spans.is_empty() && x.negative_spans.is_empty());
    let mut empty = h("{{}}");
    empty.div(0.0);
    assert!(empty.count.is_nan() && empty.sum.is_nan());
}

#[test]
fn copy_to_schema() {
    let input = exp(
        1,
        (0.01, 11.0),
        30.0,
        2.345,
        &[(-4, 3), (5, 5)],
        &[1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
        &[(6, 3), (6, 4)],
        &[3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0],
    );
    let before = input.clone();
    assert_eq!(input.copy_to_schema(1).unwrap(), input);
    let want = exp(
        0,
        (0.01, 11.0),
        30.0,
        2.345,
        &[(-2, 2), (2, 3)],
        &[1.0, 0.0, 3.0, 4.0, 7.0],
        &[(3, 2), (3, 2)],
        &[3.0, 1.0, 5.0, 6.0],
    );
    assert_eq!(input.copy_to_schema(0).unwrap(), want);
    assert_eq!(input, before);
    assert!(input.copy_to_schema(2).is_err());
    assert!(input.copy_to_schema(CUSTOM_BUCKETS_SCHEMA).is_err());

    let custom = nhcb(
        30.0,
        2.345,
        &[(0, 3), (5, 5)],
        &[1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
    );
    assert_eq!(
        custom.copy_to_schema(CUSTOM_BUCKETS_SCHEMA).unwrap(),
        custom
    );
    assert!(custom.copy_to_schema(0).is_err());
}

#[test]
fn reduce_resolution_in_place() {
    let mut x = h("{{schema:2 count:10 sum:3 buckets:[1 2 3 4] offset:1}}");
    x.reduce_resolution(0).unwrap();
    // Schema 2 indices 1..4 fall into schema 0 buckets 1 (indices 1..4).
    assert_same(&x, &h("{{schema:0 count:10 sum:3 offset:1 buckets:[10]}}"));
    assert!(x.reduce_resolution(0).is_err());
    assert!(x.reduce_resolution(1).is_err());
}

#[test]
fn bounds_of_exponential_schemas() {
    let x = h("{{schema:1 count:3 buckets:[1 1 1]}}");
    let uppers: Vec<f64> = x.positive_buckets().map(|b| b.upper).collect();
    assert_eq!(uppers, vec![1.0, std::f64::consts::SQRT_2, 2.0]);
    let y = h("{{schema:-1 count:2 offset:-1 buckets:[1 1]}}");
    let got: Vec<(f64, f64)> = y.positive_buckets().map(|b| (b.lower, b.upper)).collect();
    assert_eq!(got, vec![(0.0625, 0.25), (0.25, 1.0)]);
    // The correctly rounded 2^(k/256)/2 for a few k (1, 100, 255).
    let fine = h("{{schema:8 count:3 offset:1 buckets:[1]}}");
    assert_eq!(
        fine.positive_buckets().next().unwrap().upper,
        1.0027112750502025
    );
    assert_eq!(bounds::exponential_bound(100, 8), 1.3109612115247644);
    assert_eq!(bounds::exponential_bound(255, 8), 1.9945921121709402);
    // The bucket below the one for infinite observations ends at the largest float.
    assert_eq!(bounds::exponential_bound(1024, 0), f64::MAX);
    assert_eq!(bounds::exponential_bound(1025, 0), f64::INFINITY);
    assert_eq!(bounds::exponential_bound(256, -2), f64::MAX);
    assert_eq!(bounds::exponential_bound(1024 * 256, 8), f64::MAX);
}

#[test]
fn has_overflow() {
    assert!(!h("{{count:1e308 sum:1}}").has_overflow());
    assert!(h("{{count:Inf}}").has_overflow());
    assert!(h("{{sum:-Inf}}").has_overflow());
    assert!(h("{{buckets:[1 Inf]}}").has_overflow());
    assert!(!h("{{sum:NaN}}").has_overflow());
}

#[test]
fn validate() {
    assert!(
        h("{{schema:3 count:3 buckets:[1 2] n_buckets:[0]}}")
            .validate()
            .is_ok()
    );
    assert!(
        h("{{schema:-53 custom_values:[1 2] buckets:[1 2 3]}}")
            .validate()
            .is_ok()
    );
    assert_eq!(
        h("{{schema:9}}").validate(),
        Err(HistogramError::InvalidSchema(9))
    );
    assert_eq!(
        h("{{buckets:[1 -2]}}").validate(),
        Err(HistogramError::NegativeBucketCount)
    );
    assert_eq!(
        h("{{schema:-53 custom_values:[2 1] buckets:[1]}}").validate(),
        Err(HistogramError::CustomBoundsNotIncreasing)
    );
    assert!(matches!(
        h("{{schema:-53 custom_values:[1] buckets:[1 2 3]}}").validate(),
        Err(HistogramError::CustomBoundsTooFew { .. })
    ));
    let mut bad = h("{{buckets:[1 2]}}");
    bad.positive_buckets.push(3.0);
    assert!(matches!(
        bad.validate(),
        Err(HistogramError::SpansBucketsMismatch {
            spans: 2,
            buckets: 3
        })
    ));
}
