//! Compaction, re-expressed from Prometheus' `TestFloatHistogramCompact` (exact layouts).

use super::*;

fn side(s: &[(i32, u32)], b: &[f64]) -> (Vec<Span>, Vec<f64>) {
    (spans(s), b.to_vec())
}

#[track_caller]
fn check(input: (&[(i32, u32)], &[f64]), max_empty: usize, want: (&[(i32, u32)], &[f64])) {
    let mut x = FloatHistogram {
        positive_spans: spans(input.0),
        positive_buckets: input.1.to_vec(),
        negative_spans: spans(input.0),
        negative_buckets: input.1.to_vec(),
        ..FloatHistogram::default()
    };
    x.compact(max_empty);
    let want = side(want.0, want.1);
    assert_eq!((x.positive_spans.clone(), x.positive_buckets.clone()), want);
    assert_eq!((x.negative_spans, x.negative_buckets), want);
}

#[test]
fn nothing_to_do() {
    check(
        (&[(-2, 1), (2, 3)], &[1.0, 3.3, 4.2, 0.1]),
        0,
        (&[(-2, 1), (2, 3)], &[1.0, 3.3, 4.2, 0.1]),
    );
    check((&[], &[]), 0, (&[], &[]));
}

#[test]
fn eliminates_zero_offsets_and_zero_lengths() {
    check(
        (&[(-2, 1), (0, 3), (0, 1)], &[1.0, 3.3, 4.2, 0.1, 3.3]),
        0,
        (&[(-2, 5)], &[1.0, 3.3, 4.2, 0.1, 3.3]),
    );
    check(
        (
            &[(0, 2), (0, 2), (2, 1), (0, 1)],
            &[3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0],
        ),
        0,
        (&[(0, 4), (2, 2)], &[3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0]),
    );
    check(
        (&[(-2, 2), (2, 0), (3, 3)], &[1.0, 3.3, 4.2, 0.1, 3.3]),
        0,
        (&[(-2, 2), (5, 3)], &[1.0, 3.3, 4.2, 0.1, 3.3]),
    );
    check(
        (
            &[(0, 2), (0, 0), (2, 0), (1, 4)],
            &[3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0],
        ),
        0,
        (&[(0, 2), (3, 4)], &[3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0]),
    );
    check(
        (
            &[(-2, 2), (2, 0), (2, 0), (2, 0), (3, 3)],
            &[1.0, 3.3, 4.2, 0.1, 3.3],
        ),
        0,
        (&[(-2, 2), (9, 3)], &[1.0, 3.3, 4.2, 0.1, 3.3]),
    );
}

#[test]
fn cuts_empty_buckets() {
    check(
        (&[(-4, 4), (5, 3)], &[0.0, 0.0, 1.0, 3.3, 4.2, 0.1, 3.3]),
        0,
        (&[(-2, 2), (5, 3)], &[1.0, 3.3, 4.2, 0.1, 3.3]),
    );
    check(
        (
            &[(-4, 4), (5, 6)],
            &[0.0, 0.0, 1.0, 3.3, 4.2, 0.1, 3.3, 0.0, 0.0, 0.0],
        ),
        0,
        (&[(-2, 2), (5, 3)], &[1.0, 3.3, 4.2, 0.1, 3.3]),
    );
    check(
        (&[(5, 4)], &[1.0, 3.0, 0.0, 2.0]),
        0,
        (&[(5, 2), (1, 1)], &[1.0, 3.0, 2.0]),
    );
    check(
        (
            &[(-4, 6), (3, 6)],
            &[0.0, 0.0, 1.0, 3.3, 0.0, 0.0, 4.2, 0.1, 3.3, 0.0, 0.0, 0.0],
        ),
        0,
        (&[(-2, 2), (5, 3)], &[1.0, 3.3, 4.2, 0.1, 3.3]),
    );
    check(
        (
            &[(-4, 6), (3, 3)],
            &[0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3],
        ),
        0,
        (&[(-2, 1), (2, 1), (3, 3)], &[1.0, 3.3, 4.2, 0.1, 3.3]),
    );
    check(
        (
            &[(-4, 3), (2, 2), (3, 4)],
            &[0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3],
        ),
        0,
        (&[(-2, 1), (7, 4)], &[1.0, 3.3, 4.2, 0.1, 3.3]),
    );
}

#[test]
fn keeps_or_merges_within_max_empty_buckets() {
    check(
        (&[(-4, 4), (5, 3)], &[0.0, 0.0, 1.0, 3.3, 4.2, 0.1, 3.3]),
        10,
        (
            &[(-2, 10)],
            &[1.0, 3.3, 0.0, 0.0, 0.0, 0.0, 0.0, 4.2, 0.1, 3.3],
        ),
    );
    check(
        (&[(-2, 4)], &[1.0, 0.0, 0.0, 3.3]),
        1,
        (&[(-2, 1), (2, 1)], &[1.0, 3.3]),
    );
    check(
        (&[(-2, 4), (3, 1)], &[1.0, 0.0, 0.0, 3.3, 4.2]),
        1,
        (&[(-2, 1), (2, 1), (3, 1)], &[1.0, 3.3, 4.2]),
    );
    check(
        (
            &[(-4, 6), (3, 3), (10, 2)],
            &[0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3, 2.0, 3.0],
        ),
        1,
        (
            &[(-2, 1), (2, 1), (3, 3), (10, 2)],
            &[1.0, 3.3, 4.2, 0.1, 3.3, 2.0, 3.0],
        ),
    );
    check(
        (&[(0, 1), (1, 1)], &[1.0, 2.0]),
        1,
        (&[(0, 3)], &[1.0, 0.0, 2.0]),
    );
}

#[test]
fn custom_buckets() {
    let mut x = nhcb(
        0.0,
        0.0,
        &[(0, 2), (0, 1), (5, 3)],
        &[1.0, 0.0, 3.3, 4.2, 0.0, 0.1],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    );
    x.compact(0);
    assert_eq!(x.positive_spans, spans(&[(0, 1), (1, 1), (5, 1), (1, 1)]));
    assert_eq!(x.positive_buckets, vec![1.0, 3.3, 4.2, 0.1]);
    assert_eq!(x.custom_values.len(), 9);
}

#[test]
fn equals_compares_layout_and_bits() {
    let a = exp(
        0,
        (0.01, 1.0),
        5.0,
        2.0,
        &[(0, 1), (0, 2)],
        &[1.0, 2.0, 3.0],
        &[],
        &[],
    );
    let b = exp(
        0,
        (0.01, 1.0),
        5.0,
        2.0,
        &[(0, 3)],
        &[1.0, 2.0, 3.0],
        &[],
        &[],
    );
    assert!(a.equals(&b));
    let with_empty_span = exp(
        0,
        (0.01, 1.0),
        5.0,
        2.0,
        &[(0, 0), (0, 3)],
        &[1.0, 2.0, 3.0],
        &[],
        &[],
    );
    assert!(a.equals(&with_empty_span));
    let mut shifted = b.clone();
    shifted.positive_spans[0].offset = 1;
    assert!(!a.equals(&shifted));
    let mut nan_sum = a.clone();
    nan_sum.sum = f64::NAN;
    assert!(nan_sum.equals(&nan_sum.clone()));
    assert!(!nan_sum.equals(&a));
    let mut gauge = a.clone();
    gauge.counter_reset_hint = CounterResetHint::Gauge;
    assert!(gauge.equals(&a));
    let c1 = h("{{schema:-53 sum:1 count:1 custom_values:[2] buckets:[1]}}");
    let c2 = h("{{schema:-53 sum:1 count:1 custom_values:[5 10] buckets:[1]}}");
    assert!(!c1.equals(&c2));
    assert!(c2.equals(&c2.clone()));
}
