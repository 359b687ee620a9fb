//! Text forms, the test runner's comparison, and classic histogram conversion.

use super::*;

#[test]
fn go_float_formatting() {
    let cases = [
        (0.0, "0"),
        (-0.0, "-0"),
        (1.0, "1"),
        (-2.5, "-2.5"),
        (123456.0, "123456"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1.5e-7, "1.5e-07"),
        (1e100, "1e+100"),
        (2.258e220, "2.258e+220"),
        (0.1, "0.1"),
        (1.0 / 3.0, "0.3333333333333333"),
        (std::f64::consts::SQRT_2, "1.4142135623730951"),
        (f64::MAX, "1.7976931348623157e+308"),
        (5e-324, "5e-324"),
        (f64::INFINITY, "+Inf"),
        (f64::NEG_INFINITY, "-Inf"),
        (f64::NAN, "NaN"),
    ];
    for (v, want) in cases {
        assert_eq!(format_go_float(v), want, "{v:e}");
    }
}

#[test]
fn display_is_the_test_notation_compacted() {
    let x = exp(
        1,
        (0.001, 1.0),
        22.0,
        3.0,
        &[(-1, 2), (2, 1)],
        &[5.0, 10.0, 7.0],
        &[(2, 1)],
        &[0.5],
    );
    assert_eq!(
        x.to_string(),
        "{{schema:1 count:22 sum:3 z_bucket:1 z_bucket_w:0.001 offset:-1 buckets:[5 10 0 0 7] n_offset:2 n_buckets:[0.5]}}"
    );
    assert_eq!(FloatHistogram::default().to_string(), "{{}}");
    let mut gauge = h("{{schema:-53 count:3 sum:NaN custom_values:[1 2.5] buckets:[1 2]}}");
    gauge.counter_reset_hint = CounterResetHint::Gauge;
    assert_eq!(
        gauge.to_string(),
        "{{schema:-53 count:3 sum:NaN custom_values:[1 2.5] counter_reset_hint:gauge buckets:[1 2]}}"
    );
}

#[test]
fn describe_lists_populated_buckets() {
    let x =
        h("{{schema:0 count:6 sum:3.5 z_bucket:2 z_bucket_w:0.001 buckets:[0 3] n_buckets:[1]}}");
    assert_eq!(
        x.describe(),
        "{count:6, sum:3.5, [-1,-0.5):1, [-0.001,0.001]:2, (1,2]:3}"
    );
}

#[test]
fn notation_round_trips() {
    for text in [
        "{{schema:1 count:22 sum:3 z_bucket:1 z_bucket_w:0.001 offset:-1 buckets:[5 10 7] n_offset:2 n_buckets:[1 2]}}",
        "{{schema:-53 count:15 sum:172.5 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]}}",
        "{{count:-4 sum:-4 counter_reset_hint:gauge buckets:[-1 -2 -1]}}",
        "{{}}",
    ] {
        assert_eq!(h(text).to_string(), text);
    }
}

#[test]
fn notation_fields() {
    let x = h(
        "{{ schema:2  sum:1e100 count:0x10 z_bucket:5 z_bucket_w:0.25 buckets:[ 1 Inf NaN ] offset:3 n_buckets:[2.258E+220] n_offset:-2 counter_reset_hint:not_reset }}",
    );
    assert_eq!(x.schema, 2);
    assert_eq!(x.sum, 1e100);
    assert_eq!(x.count, 16.0);
    assert_eq!((x.zero_count, x.zero_threshold), (5.0, 0.25));
    assert_eq!(x.positive_spans, spans(&[(3, 3)]));
    assert_eq!(x.positive_buckets[1], f64::INFINITY);
    assert!(x.positive_buckets[2].is_nan());
    assert_eq!(x.negative_spans, spans(&[(-2, 1)]));
    assert_eq!(x.counter_reset_hint, CounterResetHint::NotReset);
    assert!(x.custom_values.is_empty());
    let fields = HistogramFields {
        schema: -53,
        count: 3.0,
        buckets: vec![1.0, 2.0],
        custom_values: vec![5.0],
        ..HistogramFields::default()
    };
    let y = FloatHistogram::from(fields);
    assert_eq!(y.positive_spans, spans(&[(0, 2)]));
    assert_eq!(&y.custom_values[..], &[5.0]);
    assert!(y.negative_spans.is_empty());
}

#[test]
fn notation_errors_name_the_input() {
    for bad in [
        "{schema:1}",
        "{{schema:1.5}}",
        "{{colour:red}}",
        "{{buckets:1}}",
        "{{buckets:[1 x]}}",
        "{{counter_reset_hint:maybe}}",
        "{{sum}}",
        "{{buckets:[1 2}}",
    ] {
        let err = FloatHistogram::parse_notation(bad).unwrap_err();
        assert!(matches!(err, HistogramError::Notation(_)), "{bad}: {err}");
        assert!(err.to_string().starts_with("invalid histogram notation: "));
    }
}

#[test]
fn almost_equal_like_prometheus() {
    assert!(almost_equal(f64::NAN, f64::NAN, DEFAULT_EPSILON));
    assert!(almost_equal(1.0, 1.0 + 1e-7, DEFAULT_EPSILON));
    assert!(!almost_equal(1.0, 1.0 + 1e-5, DEFAULT_EPSILON));
    assert!(!almost_equal(0.0, 1e-300, DEFAULT_EPSILON));
    assert!(almost_equal(0.0, 1e-320, DEFAULT_EPSILON));
    assert!(almost_equal(f64::INFINITY, f64::INFINITY, DEFAULT_EPSILON));
    assert!(!almost_equal(f64::INFINITY, f64::MAX, DEFAULT_EPSILON));
    assert!(!almost_equal(1.0, f64::NAN, DEFAULT_EPSILON));
}

#[test]
fn matches_expected_compacts_and_tolerates() {
    let want = h("{{schema:0 count:107 sum:4.4 z_bucket:17 z_bucket_w:0.001 buckets:[5 14 7]}}");
    let got = exp(
        0,
        (0.001, 17.0000001),
        107.0,
        4.4000001,
        &[(-1, 1), (0, 3), (1, 1)],
        &[0.0, 5.0, 14.0, 7.0000001, 0.0],
        &[(5, 1)],
        &[0.0],
    );
    assert!(want.matches_expected(&got, false));
    let mut other_threshold = got.clone();
    other_threshold.zero_threshold = 0.0010000001;
    assert!(!want.matches_expected(&other_threshold, false));
    let mut shifted = got.clone();
    shifted.positive_spans[0].offset = 0;
    assert!(!want.matches_expected(&shifted, false));
    let mut gauge = got.clone();
    gauge.counter_reset_hint = CounterResetHint::Gauge;
    assert!(want.matches_expected(&gauge, false));
    assert!(!want.matches_expected(&gauge, true));
    let custom = h("{{schema:-53 count:1 custom_values:[5] buckets:[1]}}");
    let other_bounds = h("{{schema:-53 count:1 custom_values:[6] buckets:[1]}}");
    assert!(!custom.matches_expected(&other_bounds, false));
}

#[test]
fn classic_histogram_to_custom_buckets() {
    let mut c = ClassicHistogram::new();
    for (le, count) in [
        (1e0, 11.0),
        (0.1, 5.0),
        (0.2, 7.0),
        (f64::INFINITY, 12.0),
        (0.2, 9.0),
    ] {
        c.set_bucket_count(le, count);
    }
    c.set_sum(3.5);
    let x = c.convert().unwrap();
    assert_same(
        &x,
        &h("{{schema:-53 count:12 sum:3.5 custom_values:[0.1 0.2 1] buckets:[5 2 4 1]}}"),
    );
    // Integral counts keep up to two empty buckets inside a span.
    let mut gaps = ClassicHistogram::new();
    for (le, count) in [
        (0.0, 0.0),
        (2.0, 1.0),
        (4.0, 1.0),
        (6.0, 3.0),
        (f64::INFINITY, 3.0),
    ] {
        gaps.set_bucket_count(le, count);
    }
    let y = gaps.convert().unwrap();
    assert_eq!(y.positive_spans, spans(&[(1, 3)]));
    assert_eq!(y.positive_buckets, vec![1.0, 0.0, 2.0]);
    assert_eq!(&y.custom_values[..], &[0.0, 2.0, 4.0, 6.0]);
    assert_eq!(y.count, 3.0);
}

#[test]
fn classic_histogram_without_inf_bucket_or_count() {
    let mut c = ClassicHistogram::new();
    c.set_bucket_count(1.0, 2.0);
    c.set_count(5.0);
    assert_same(
        &c.convert().unwrap(),
        &h("{{schema:-53 count:5 custom_values:[1] buckets:[2 3]}}"),
    );
    let mut only_count = ClassicHistogram::new();
    only_count.set_count(4.0);
    assert_same(
        &only_count.convert().unwrap(),
        &h("{{schema:-53 count:4 buckets:[4]}}"),
    );
    assert!(ClassicHistogram::new().convert().is_err());
}

#[test]
fn classic_histogram_errors() {
    let mut decreasing = ClassicHistogram::new();
    decreasing.set_bucket_count(1.0, 5.0);
    decreasing.set_bucket_count(2.0, 3.0);
    assert!(matches!(
        decreasing.convert(),
        Err(HistogramError::Classic(_))
    ));
    let mut mismatch = ClassicHistogram::new();
    mismatch.set_bucket_count(f64::INFINITY, 5.0);
    mismatch.set_count(6.0);
    assert!(mismatch.convert().is_err());
    let mut nan = ClassicHistogram::new();
    nan.set_bucket_count(f64::NAN, 1.0);
    assert!(nan.convert().is_err());
    let mut negative = ClassicHistogram::new();
    negative.set_count(-1.0);
    assert!(negative.convert().is_err());
}
