//! Subtraction, re-expressed from Prometheus' `TestFloatHistogramSub` (both operand orders),
//! and cases of `native_histograms.test`.

use super::add::{Case, check, ok};
use super::*;

#[test]
fn sub_in_both_orders() {
    let b5 = [1.0, 2.0, 3.0, 4.0, 5.0];
    let cases = vec![
        ok(
            "same bucket layout",
            exp(
                0,
                (0.01, 11.0),
                30.0,
                23.0,
                &[(-2, 2), (1, 3)],
                &[1.0, 0.0, 3.0, 4.0, 7.0],
                &[(3, 2), (3, 2)],
                &[3.0, 1.0, 5.0, 6.0],
            ),
            exp(
                0,
                (0.01, 8.0),
                21.0,
                12.0,
                &[(-2, 2), (1, 3)],
                &[0.0, 0.0, 2.0, 3.0, 6.0],
                &[(3, 2), (3, 2)],
                &[1.0, 1.0, 4.0, 4.0],
            ),
            exp(
                0,
                (0.01, 3.0),
                9.0,
                11.0,
                &[(-2, 2), (1, 3)],
                &[1.0, 0.0, 1.0, 1.0, 1.0],
                &[(3, 2), (3, 2)],
                &[2.0, 0.0, 1.0, 2.0],
            ),
        ),
        ok(
            "schema change",
            exp(
                0,
                (0.01, 8.0),
                59.0,
                1.234,
                &[(-2, 5), (0, 3)],
                &[2.0, 5.0, 4.0, 2.0, 3.0, 6.0, 7.0, 5.0],
                &[(3, 3), (1, 3)],
                &[4.0, 10.0, 1.0, 4.0, 14.0, 7.0],
            ),
            exp(
                1,
                (0.01, 2.0),
                19.0,
                0.345,
                &[(-4, 3), (5, 5)],
                &[1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 3.0, 4.0],
                &[(6, 3), (6, 4)],
                &[3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0],
            ),
            exp(
                0,
                (0.01, 6.0),
                40.0,
                0.889,
                &[(-2, 5), (0, 3)],
                &[1.0, 5.0, 4.0, 2.0, 2.0, 2.0, 0.0, 5.0],
                &[(3, 3), (1, 3)],
                &[1.0, 9.0, 1.0, 4.0, 9.0, 1.0],
            ),
        ),
        ok(
            "same custom bucket layout",
            nhcb(
                15.0,
                23.0,
                &[(0, 2), (1, 3)],
                &[1.0, 0.0, 3.0, 4.0, 7.0],
                &b5,
            ),
            nhcb(
                11.0,
                12.0,
                &[(0, 2), (1, 3)],
                &[0.0, 0.0, 2.0, 3.0, 6.0],
                &b5,
            ),
            nhcb(
                4.0,
                11.0,
                &[(0, 2), (1, 3)],
                &[1.0, 0.0, 1.0, 1.0, 1.0],
                &b5,
            ),
        ),
        Case {
            name: "different custom bucket layout - with intersection and rollup",
            a: FloatHistogram {
                counter_reset_hint: CounterResetHint::Gauge,
                ..nhcb(
                    220.0,
                    9.9,
                    &[(0, 2), (1, 1), (0, 2)],
                    &[10.0, 20.0, 40.0, 50.0, 100.0],
                    &b5,
                )
            },
            b: FloatHistogram {
                counter_reset_hint: CounterResetHint::Gauge,
                ..nhcb(6.0, 4.4, &[(0, 1), (1, 1)], &[1.0, 5.0], &[2.0, 4.0])
            },
            want: Some(FloatHistogram {
                counter_reset_hint: CounterResetHint::Gauge,
                ..nhcb(214.0, 5.5, &[(0, 3)], &[29.0, 40.0, 145.0], &[2.0, 4.0])
            }),
            collision: false,
            reconciled: true,
        },
    ];
    for case in cases {
        check(&case, &case.a, &case.b, case.want.as_ref(), true);
        let negated = case.want.as_ref().map(|w| {
            let mut n = w.clone();
            n.mul(-1.0);
            n.counter_reset_hint = w.counter_reset_hint;
            n
        });
        check(&case, &case.b, &case.a, negated.as_ref(), true);
    }
}

#[test]
fn sub_from_the_test_scripts() {
    let a0 = "{{schema:0 count:41 sum:2345.6 z_bucket:5 z_bucket_w:0.001 buckets:[1 3 1 2 1 1 1] n_buckets:[0 1 4 2 7 0 0 0 0 5 5 2]}}";
    let b1 = "{{schema:1 count:11 sum:1234.5 z_bucket:3 z_bucket_w:0.001 buckets:[0 2 1] n_buckets:[0 0 3 2]}}";
    let mut x = h(a0);
    x.sub(&h(b1)).unwrap();
    assert_matches(
        &x,
        "{{schema:0 count:30 sum:1111.1 z_bucket:2 z_bucket_w:0.001 buckets:[1 0 1 2 1 1 1] n_buckets:[0 -2 2 2 7 0 0 0 0 5 5 2]}}",
    );
    let mut y = h(b1);
    y.sub(&h(a0)).unwrap();
    assert_matches(
        &y,
        "{{schema:0 count:-30 sum:-1111.1 z_bucket:-2 z_bucket_w:0.001 buckets:[-1 0 -1 -2 -1 -1 -1] n_buckets:[0 2 -2 -2 -7 0 0 0 0 -5 -5 -2]}}",
    );
    // Custom bounds reconciled to nothing in common but +Inf, values cancelling out.
    let mut z = h("{{schema:-53 sum:1 count:1 custom_values:[10] buckets:[1]}}");
    let outcome = z
        .sub(&h(
            "{{schema:-53 sum:1 count:1 custom_values:[2 10] buckets:[1]}}",
        ))
        .unwrap();
    assert!(outcome.nhcb_bounds_reconciled);
    assert_matches(&z, "{{schema:-53 custom_values:[10]}}");
}
