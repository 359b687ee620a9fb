//! Addition, re-expressed from Prometheus' `TestFloatHistogramAdd` (results compared after
//! compaction, both operand orders), and Kahan addition.

use super::*;

pub(super) struct Case {
    pub(super) name: &'static str,
    pub(super) a: FloatHistogram,
    pub(super) b: FloatHistogram,
    pub(super) want: Option<FloatHistogram>,
    pub(super) collision: bool,
    pub(super) reconciled: bool,
}

pub(super) fn ok(
    name: &'static str,
    a: FloatHistogram,
    b: FloatHistogram,
    want: FloatHistogram,
) -> Case {
    Case {
        name,
        a,
        b,
        want: Some(want),
        collision: false,
        reconciled: false,
    }
}

/// Checks `a op b` and that `b` is left alone.
pub(super) fn check(
    case: &Case,
    a: &FloatHistogram,
    b: &FloatHistogram,
    want: Option<&FloatHistogram>,
    sub: bool,
) {
    let mut x = a.clone();
    let b_before = b.clone();
    let result = if sub { x.sub(b) } else { x.add(b) };
    assert_eq!(b, &b_before, "{}: argument changed", case.name);
    match (result, want) {
        (Ok(outcome), Some(want)) => {
            assert_eq!(
                outcome.counter_reset_collision, case.collision,
                "{}",
                case.name
            );
            assert_eq!(
                outcome.nhcb_bounds_reconciled, case.reconciled,
                "{}",
                case.name
            );
            let (got, want) = (compacted(&x), compacted(want));
            assert_eq!(got, want, "{}:\n got {got}\nwant {want}", case.name);
        }
        (Ok(outcome), None) => {
            assert_eq!(
                outcome.counter_reset_collision, case.collision,
                "{}",
                case.name
            );
        }
        (Err(e), None) => {
            assert_eq!(e, HistogramError::IncompatibleSchema, "{}", case.name);
            assert_eq!(
                e.to_string(),
                "cannot apply this operation on histograms with a mix of exponential and custom bucket schemas"
            );
            assert_eq!(x, *a, "{}: receiver changed on error", case.name);
        }
        (Err(e), Some(_)) => panic!("{}: {e}", case.name),
    }
}

fn add_cases() -> Vec<Case> {
    let first = || {
        exp(
            0,
            (0.01, 11.0),
            30.0,
            2.345,
            &[(-2, 2), (2, 3)],
            &[1.0, 0.0, 3.0, 4.0, 7.0],
            &[(3, 2), (3, 2)],
            &[3.0, 1.0, 5.0, 6.0],
        )
    };
    let overlapping = || {
        exp(
            0,
            (0.01, 8.0),
            21.0,
            1.234,
            &[(-1, 4), (0, 3)],
            &[5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0],
            &[(4, 2), (1, 2)],
            &[1.0, 1.0, 4.0, 4.0],
        )
    };
    let overlap_sum = |zero: (f64, f64), pos_spans: &[(i32, u32)], pos: &[f64]| {
        exp(
            0,
            zero,
            51.0,
            3.579,
            pos_spans,
            pos,
            &[(3, 3), (1, 3)],
            &[3.0, 2.0, 1.0, 4.0, 9.0, 6.0],
        )
    };
    let high_res = || {
        exp(
            1,
            (0.01, 11.0),
            30.0,
            2.345,
            &[(-4, 3), (5, 5)],
            &[1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
            &[(6, 3), (6, 4)],
            &[3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0],
        )
    };
    let wide_zero = |threshold: f64| {
        exp(
            0,
            (threshold, 17.0),
            21.0,
            1.234,
            &[(1, 2), (0, 3)],
            &[2.0, 3.0, 6.0, 2.0, 5.0],
            &[(4, 2), (1, 2)],
            &[1.0, 1.0, 4.0, 4.0],
        )
    };
    let custom = |count: f64, sum: f64, s: &[(i32, u32)], b: &[f64], bounds: &[f64]| {
        nhcb(count, sum, s, b, bounds)
    };
    let b5 = [1.0, 2.0, 3.0, 4.0, 5.0];
    let b7 = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
    let b9 = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    let mut cases = vec![
        ok(
            "same bucket layout",
            exp(
                0,
                (0.01, 11.0),
                30.0,
                2.345,
                &[(-2, 2), (1, 3)],
                &[1.0, 0.0, 3.0, 4.0, 7.0],
                &[(3, 2), (3, 2)],
                &[3.0, 1.0, 5.0, 6.0],
            ),
            exp(
                0,
                (0.01, 8.0),
                21.0,
                1.234,
                &[(-2, 2), (1, 3)],
                &[0.0, 0.0, 2.0, 3.0, 6.0],
                &[(3, 2), (3, 2)],
                &[1.0, 1.0, 4.0, 4.0],
            ),
            exp(
                0,
                (0.01, 19.0),
                51.0,
                3.579,
                &[(-2, 2), (1, 3)],
                &[1.0, 0.0, 5.0, 7.0, 13.0],
                &[(3, 2), (3, 2)],
                &[4.0, 2.0, 9.0, 10.0],
            ),
        ),
        ok(
            "same bucket layout, defined differently",
            exp(
                0,
                (0.01, 11.0),
                30.0,
                2.345,
                &[(-2, 2), (1, 1), (0, 2)],
                &[1.0, 0.0, 3.0, 4.0, 7.0],
                &[(3, 2), (3, 2)],
                &[3.0, 1.0, 5.0, 6.0],
            ),
            exp(
                0,
                (0.01, 8.0),
                21.0,
                1.234,
                &[(-2, 2), (1, 2), (0, 1)],
                &[0.0, 0.0, 2.0, 3.0, 6.0],
                &[(3, 7)],
                &[1.0, 1.0, 0.0, 0.0, 0.0, 4.0, 4.0],
            ),
            exp(
                0,
                (0.01, 19.0),
                51.0,
                3.579,
                &[(-2, 2), (1, 1), (0, 2)],
                &[1.0, 0.0, 5.0, 7.0, 13.0],
                &[(3, 5), (0, 2)],
                &[4.0, 2.0, 0.0, 0.0, 0.0, 9.0, 10.0],
            ),
        ),
        ok(
            "non-overlapping spans",
            exp(
                0,
                (0.001, 11.0),
                30.0,
                2.345,
                &[(-2, 2), (2, 3)],
                &[1.0, 0.0, 3.0, 4.0, 7.0],
                &[(3, 2), (3, 2)],
                &[3.0, 1.0, 5.0, 6.0],
            ),
            exp(
                0,
                (0.001, 8.0),
                21.0,
                1.234,
                &[(0, 2), (3, 3)],
                &[5.0, 4.0, 2.0, 3.0, 6.0],
                &[(-9, 2), (3, 2)],
                &[1.0, 1.0, 4.0, 4.0],
            ),
            exp(
                0,
                (0.001, 19.0),
                51.0,
                3.579,
                &[(-2, 4), (0, 6)],
                &[1.0, 0.0, 5.0, 4.0, 3.0, 4.0, 7.0, 2.0, 3.0, 6.0],
                &[(-9, 2), (3, 2), (5, 2), (3, 2)],
                &[1.0, 1.0, 4.0, 4.0, 3.0, 1.0, 5.0, 6.0],
            ),
        ),
        ok(
            "overlapping spans",
            first(),
            overlapping(),
            overlap_sum(
                (0.01, 19.0),
                &[(-2, 4), (0, 4)],
                &[1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
            ),
        ),
        ok(
            "schema change",
            overlapping(),
            high_res(),
            overlap_sum(
                (0.01, 19.0),
                &[(-2, 5), (0, 3)],
                &[1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
            ),
        ),
        ok(
            "larger zero bucket in first histogram",
            wide_zero(1.0),
            first(),
            overlap_sum((1.0, 29.0), &[(1, 2), (0, 3)], &[2.0, 6.0, 10.0, 9.0, 5.0]),
        ),
        ok(
            "larger zero threshold ends up inside a populated bucket",
            wide_zero(0.2),
            first(),
            overlap_sum(
                (0.25, 29.0),
                &[(-1, 1), (1, 5)],
                &[0.0, 2.0, 6.0, 10.0, 9.0, 5.0],
            ),
        ),
        ok(
            "schema change combined with larger zero bucket in second histogram",
            exp(
                0,
                (0.01, 8.0),
                21.0,
                1.234,
                &[(-2, 5), (0, 3)],
                &[2.0, 5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0],
                &[(4, 2), (1, 2)],
                &[1.0, 1.0, 4.0, 4.0],
            ),
            exp(
                1,
                (0.25, 12.0),
                30.0,
                2.345,
                &[(-3, 2), (5, 5)],
                &[1.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
                &[(6, 3), (6, 4)],
                &[3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0],
            ),
            overlap_sum(
                (0.25, 22.0),
                &[(-1, 7)],
                &[6.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
            ),
        ),
        ok(
            "schema change combined with larger zero bucket in first histogram",
            exp(
                0,
                (0.25, 8.0),
                21.0,
                1.234,
                &[(-1, 4), (0, 3)],
                &[5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0],
                &[(4, 2), (1, 2)],
                &[1.0, 1.0, 4.0, 4.0],
            ),
            high_res(),
            overlap_sum(
                (0.25, 20.0),
                &[(-1, 4), (0, 3)],
                &[5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
            ),
        ),
        ok(
            "same custom bucket layout",
            custom(
                15.0,
                2.345,
                &[(0, 2), (1, 3)],
                &[1.0, 0.0, 3.0, 4.0, 7.0],
                &b5,
            ),
            custom(
                11.0,
                1.234,
                &[(0, 2), (1, 3)],
                &[0.0, 0.0, 2.0, 3.0, 6.0],
                &b5,
            ),
            custom(
                26.0,
                3.579,
                &[(0, 2), (1, 3)],
                &[1.0, 0.0, 5.0, 7.0, 13.0],
                &b5,
            ),
        ),
        ok(
            "same custom bucket layout, defined differently",
            custom(
                15.0,
                2.345,
                &[(0, 2), (1, 1), (0, 2)],
                &[1.0, 0.0, 3.0, 4.0, 7.0],
                &b5,
            ),
            custom(
                11.0,
                1.234,
                &[(0, 2), (1, 2), (0, 1)],
                &[0.0, 0.0, 2.0, 3.0, 6.0],
                &b5,
            ),
            custom(
                26.0,
                3.579,
                &[(0, 2), (1, 3)],
                &[1.0, 0.0, 5.0, 7.0, 13.0],
                &b5,
            ),
        ),
        ok(
            "non-overlapping spans with custom buckets",
            custom(
                15.0,
                2.345,
                &[(0, 2), (2, 3)],
                &[1.0, 0.0, 3.0, 4.0, 7.0],
                &b9,
            ),
            custom(
                20.0,
                1.234,
                &[(2, 2), (3, 3)],
                &[5.0, 4.0, 2.0, 3.0, 6.0],
                &b9,
            ),
            custom(
                35.0,
                3.579,
                &[(0, 4), (0, 6)],
                &[1.0, 0.0, 5.0, 4.0, 3.0, 4.0, 7.0, 2.0, 3.0, 6.0],
                &b9,
            ),
        ),
        ok(
            "overlapping spans with custom buckets",
            custom(
                15.0,
                2.345,
                &[(0, 2), (2, 3)],
                &[1.0, 0.0, 3.0, 4.0, 7.0],
                &b7,
            ),
            custom(
                27.0,
                1.234,
                &[(1, 4), (0, 3)],
                &[5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0],
                &b7,
            ),
            custom(
                42.0,
                3.579,
                &[(0, 4), (0, 4)],
                &[1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
                &b7,
            ),
        ),
        ok(
            "custom buckets with partial intersection",
            custom(10.0, 100.0, &[(0, 3)], &[2.0, 3.0, 5.0], &[1.0, 2.5]),
            custom(
                8.0,
                80.0,
                &[(0, 4)],
                &[1.0, 2.0, 3.0, 2.0],
                &[1.0, 2.0, 3.0],
            ),
            custom(18.0, 180.0, &[(0, 2)], &[3.0, 15.0], &[1.0]),
        ),
        ok(
            "different custom bucket layout - intersection and rollup",
            custom(6.0, 2.345, &[(0, 1), (1, 1)], &[1.0, 5.0], &[2.0, 4.0]),
            custom(
                220.0,
                1.234,
                &[(0, 2), (1, 1), (0, 2)],
                &[10.0, 20.0, 40.0, 50.0, 100.0],
                &b5,
            ),
            custom(226.0, 3.579, &[(0, 3)], &[31.0, 40.0, 155.0], &[2.0, 4.0]),
        ),
        ok(
            "custom buckets with no common boundaries except +Inf",
            custom(3.0, 50.0, &[(0, 2)], &[1.0, 2.0], &[1.5]),
            custom(30.0, 40.0, &[(0, 2)], &[10.0, 20.0], &[2.5]),
            custom(33.0, 90.0, &[(0, 1)], &[33.0], &[]),
        ),
        Case {
            name: "mix exponential and custom buckets histograms",
            a: first(),
            b: custom(
                11.0,
                12.0,
                &[(0, 2), (1, 3)],
                &[0.0, 0.0, 2.0, 3.0, 6.0],
                &b5,
            ),
            want: None,
            collision: false,
            reconciled: false,
        },
        Case {
            name: "counter reset hint collision",
            a: FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                counter_reset_hint: CounterResetHint::Reset,
                ..FloatHistogram::default()
            },
            b: FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                counter_reset_hint: CounterResetHint::NotReset,
                ..FloatHistogram::default()
            },
            want: None,
            collision: true,
            reconciled: false,
        },
    ];
    for c in cases.iter_mut() {
        if c.name.contains("intersection") || c.name.contains("no common") {
            c.reconciled = true;
        }
    }
    cases
}

#[test]
fn add_in_both_orders() {
    for case in add_cases() {
        check(&case, &case.a, &case.b, case.want.as_ref(), false);
        check(&case, &case.b, &case.a, case.want.as_ref(), false);
    }
}

#[test]
fn counter_reset_hints_of_sums() {
    use CounterResetHint::*;
    let cases = [
        (Gauge, NotReset, Gauge, false),
        (NotReset, Gauge, Gauge, false),
        (Unknown, NotReset, Unknown, false),
        (Unknown, Gauge, Gauge, false),
        (Gauge, Unknown, Gauge, false),
        (Gauge, Reset, Gauge, false),
        (NotReset, Unknown, Unknown, false),
        (NotReset, NotReset, NotReset, false),
        (Reset, NotReset, Unknown, true),
        (NotReset, Reset, Unknown, true),
        (Reset, Reset, Reset, false),
    ];
    for (a, b, want, collision) in cases {
        let mut x = FloatHistogram {
            counter_reset_hint: a,
            ..FloatHistogram::default()
        };
        let y = FloatHistogram {
            counter_reset_hint: b,
            ..FloatHistogram::default()
        };
        let outcome = x.add(&y).unwrap();
        assert_eq!(
            (x.counter_reset_hint, outcome.counter_reset_collision),
            (want, collision)
        );
    }
}

#[test]
fn kahan_add_matches_add_on_exact_values() {
    for case in add_cases().into_iter().filter(|c| c.want.is_some()) {
        let mut sum = case.a.clone();
        let mut comp = None;
        let outcome = sum.kahan_add(&case.b, &mut comp).unwrap();
        assert_eq!(
            outcome.nhcb_bounds_reconciled, case.reconciled,
            "{}",
            case.name
        );
        let comp = comp.unwrap();
        assert_eq!(comp.schema, sum.schema, "{}", case.name);
        sum.add(&comp).unwrap();
        let want = case.want.as_ref().unwrap();
        assert_same(&sum, want);
    }
}

#[test]
fn kahan_add_rejects_mixed_schemas_without_change() {
    let mut a = h("{{count:1 buckets:[1]}}");
    let before = a.clone();
    let mut comp = None;
    let err = a
        .kahan_add(&h("{{schema:-53 count:1 buckets:[1]}}"), &mut comp)
        .unwrap_err();
    assert_eq!(err, HistogramError::IncompatibleSchema);
    assert_eq!(a, before);
    assert!(comp.is_none());
}

#[test]
fn kahan_add_compensates_large_magnitudes() {
    let terms = [
        "{{schema:0 count:1 sum:1 buckets:[1]}}",
        "{{schema:0 count:2 sum:1e100 buckets:[1e100]}}",
        "{{schema:0 count:3 sum:1 buckets:[1]}}",
        "{{schema:0 count:4 sum:-1e100 buckets:[-1e100]}}",
    ];
    let mut sum = h(terms[0]);
    let mut comp = None;
    for t in &terms[1..] {
        sum.kahan_add(&h(t), &mut comp).unwrap();
    }
    sum.add(&comp.unwrap()).unwrap();
    assert_eq!(
        (sum.count, sum.sum, sum.positive_buckets[0]),
        (10.0, 2.0, 2.0)
    );

    let mut plain = h(terms[0]);
    for t in &terms[1..] {
        plain.add(&h(t)).unwrap();
    }
    assert_eq!(plain.sum, 0.0);
}
