//! Classic-bucket quantiles and fractions: Prometheus' `TestBucketQuantile_ForcedMonotonicity`
//! and the classic cases of `histograms.test` (which the same data also checks as custom-bucket
//! histograms, converted the way `load_with_nhcb` converts them).

// The tables hold numbers as the test scripts write them.
#![allow(
    clippy::approx_constant,
    clippy::excessive_precision,
    clippy::type_complexity
)]

use super::*;

fn buckets(pairs: &[(f64, f64)]) -> Vec<ClassicBucket> {
    pairs
        .iter()
        .map(|&(le, c)| ClassicBucket::new(le, c))
        .collect()
}

#[test]
fn forced_monotonicity_and_small_deltas() {
    let inf = f64::INFINITY;
    #[rustfmt::skip]
    let cases: [(&str, Vec<(f64, f64)>, bool, bool, [(f64, f64); 4]); 6] = [
        ("simple - monotonic",
         vec![(10.0, 10.0), (15.0, 15.0), (20.0, 15.0), (30.0, 15.0), (inf, 15.0)],
         false, false, [(1.0, 15.0), (0.99, 14.85), (0.9, 13.5), (0.5, 7.5)]),
        ("simple - non-monotonic middle",
         vec![(10.0, 10.0), (15.0, 15.0), (20.0, 15.00000000001), (30.0, 15.0), (inf, 15.0)],
         false, true, [(1.0, 15.0), (0.99, 14.85), (0.9, 13.5), (0.5, 7.5)]),
        ("real example - monotonic",
         vec![(1.0, 6454661.3014166197), (5.0, 8339611.2001912938), (10.0, 14118319.2444762159),
              (25.0, 14130031.5272856522), (50.0, 46001270.3030008152), (64.0, 46008473.8585563600),
              (80.0, 46008473.8585563600), (100.0, 46008473.8585563600), (250.0, 46008473.8585563600),
              (1000.0, 46008473.8585563600), (inf, 46008473.8585563600)],
         false, false, [(1.0, 64.0), (0.99, 49.64475715376406), (0.9, 46.39671690938454), (0.5, 31.96098248992002)]),
        ("real example - non-monotonic",
         vec![(1.0, 6454661.3014166225), (5.0, 8339611.2001912957), (10.0, 14118319.2444762159),
              (25.0, 14130031.5272856504), (50.0, 46001270.3030008227), (64.0, 46008473.8585563824),
              (80.0, 46008473.8585563898), (100.0, 46008473.8585563824), (250.0, 46008473.8585563824),
              (1000.0, 46008473.8585563898), (inf, 46008473.8585563824)],
         false, true, [(1.0, 64.0), (0.99, 49.64475715376406), (0.9, 46.39671690938454), (0.5, 31.96098248992002)]),
        ("real example 2 - monotonic",
         vec![(0.005, 9.6), (0.01, 9.688888889), (0.025, 9.755555556), (0.05, 9.844444444),
              (0.1, 9.888888889), (0.25, 9.888888889), (0.5, 9.888888889), (1.0, 9.888888889),
              (2.5, 9.888888889), (5.0, 9.888888889), (10.0, 9.888888889), (25.0, 9.888888889),
              (50.0, 9.888888889), (100.0, 9.888888889), (inf, 9.888888889)],
         false, false, [(1.0, 0.1), (0.99, 0.03468750000281261), (0.9, 0.00463541666671875), (0.5, 0.0025752314815104174)]),
        ("real example 2 - non-monotonic",
         vec![(0.005, 9.6), (0.01, 9.688888889), (0.025, 9.755555556), (0.05, 9.844444444),
              (0.1, 9.888888889), (0.25, 9.888888889), (0.5, 9.888888889), (1.0, 9.888888889),
              (2.5, 9.888888889), (5.0, 9.888888889), (10.0, 9.888888889001), (25.0, 9.888888889),
              (50.0, 9.888888888999), (100.0, 9.888888889), (inf, 9.888888889)],
         false, true, [(1.0, 0.1), (0.99, 0.03468750000281261), (0.9, 0.00463541666671875), (0.5, 0.0025752314815104174)]),
    ];
    for (name, input, forced, fixed, expected) in cases {
        for (q, want) in expected {
            let r = bucket_quantile(q, &buckets(&input));
            assert_eq!(r.note.is_some(), forced, "{name} q={q}");
            assert_eq!(r.small_deltas_ignored, fixed, "{name} q={q}");
            assert!(
                ((r.value - want) / want).abs() < 1e-12,
                "{name} q={q}: {} != {want}",
                r.value
            );
        }
    }
}

#[test]
fn forced_monotonicity_reports_the_range() {
    let input = buckets(&[
        (0.1, 20.0),
        (1.0, 10.0),
        (10.0, 50.0),
        (100.0, 40.0),
        (1000.0, 90.0),
        (f64::INFINITY, 80.0),
    ]);
    let r = bucket_quantile(0.5, &input);
    assert_eq!(r.value, 8.5);
    assert_eq!(
        r.note,
        Some(QuantileNote::ForcedMonotonicity {
            min_bucket: 1.0,
            max_bucket: f64::INFINITY,
            max_diff: 10.0,
        })
    );
    assert!(
        r.note
            .unwrap()
            .text()
            .starts_with("input to histogram_quantile needed to be fixed for monotonicity")
    );
}

#[test]
fn special_cases() {
    let input = buckets(&[(1.0, 1.0), (f64::INFINITY, 2.0)]);
    assert!(bucket_quantile(f64::NAN, &input).value.is_nan());
    assert_eq!(bucket_quantile(-0.1, &input).value, f64::NEG_INFINITY);
    assert_eq!(bucket_quantile(1.1, &input).value, f64::INFINITY);
    assert!(
        bucket_quantile(0.5, &buckets(&[(1.0, 1.0), (2.0, 2.0)]))
            .value
            .is_nan()
    );
    assert!(
        bucket_quantile(0.5, &buckets(&[(f64::INFINITY, 2.0)]))
            .value
            .is_nan()
    );
    assert!(
        bucket_quantile(0.5, &buckets(&[(1.0, 0.0), (f64::INFINITY, 0.0)]))
            .value
            .is_nan()
    );
    assert!(bucket_quantile(0.5, &[]).value.is_nan());
    // Unsorted input with a repeated bound.
    let messy = buckets(&[(f64::INFINITY, 4.0), (2.0, 1.0), (1.0, 1.0), (2.0, 1.0)]);
    assert_eq!(bucket_quantile(0.5, &messy).value, 2.0);
    // Negative bounds: the lowest bucket's bound is the answer.
    assert_eq!(
        bucket_quantile(0.1, &buckets(&[(-1.0, 5.0), (f64::INFINITY, 10.0)])).value,
        -1.0
    );
    assert!(bucket_fraction(0.0, 1.0, &[]).is_nan());
    assert!(bucket_fraction(0.0, 1.0, &buckets(&[(1.0, 1.0)])).is_nan());
}

/// (function, arguments, buckets as (le, cumulative count), expected) from `histograms.test`.
#[rustfmt::skip]
fn script_cases() -> Vec<(&'static str, &'static [f64], &'static [(f64, f64)], f64)> {
    vec![
        ("fraction", &[0.0, 4.0], &[(0.0, 0.0), (2.0, 10.0), (4.0, 20.0), (6.0, 30.0), (f64::INFINITY, 30.0)], 0.6666666666666666),
        ("fraction", &[0.0, 6.0], &[(0.0, 0.0), (2.0, 10.0), (4.0, 20.0), (6.0, 30.0), (f64::INFINITY, 30.0)], 1.0),
        ("fraction", &[0.0, 3.5], &[(0.0, 0.0), (2.0, 10.0), (4.0, 20.0), (6.0, 30.0), (f64::INFINITY, 30.0)], 0.5833333333333334),
        ("fraction", &[0.0, 0.2], &[(0.0, 0.0), (0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 110.0)], 0.6363636363636364),
        ("fraction", &[0.0, 0.2], &[(-0.25, 0.0), (-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 20.0)], 0.0),
        ("fraction", &[0.0, 1.5], &[(1.0, 1.0), (2.0, 3.0), (3.0, 6.0), (f64::INFINITY, 100.0)], 0.02),
        ("fraction", &[-4.0, -2.0], &[(-3.0, 10.0), (-2.0, 12.0), (-1.0, 15.0), (f64::INFINITY, 100.0)], 0.02),
        ("fraction", &[f64::NEG_INFINITY, -1.5], &[(-3.0, 10.0), (-2.0, 12.0), (-1.0, 15.0), (f64::INFINITY, 100.0)], 0.135),
        ("fraction", &[f64::NEG_INFINITY, f64::INFINITY], &[(1.0, 1.0), (2.0, 3.0), (3.0, 6.0), (f64::INFINITY, 100.0)], 1.0),
        ("fraction", &[f64::NEG_INFINITY, f64::INFINITY], &[(-3.0, 10.0), (-2.0, 12.0), (-1.0, 15.0), (f64::INFINITY, 100.0)], 1.0),
        ("fraction", &[4.0, 5.0], &[(1.0, 1.0), (2.0, 3.0), (3.0, 6.0), (f64::INFINITY, 100.0)], 0.0),
        ("fraction", &[0.0, 1.0], &[(-3.0, 10.0), (-2.0, 12.0), (-1.0, 15.0), (f64::INFINITY, 100.0)], 0.0),
        ("fraction", &[2.0, 5.0], &[(1.0, 1.0), (2.0, 3.0), (3.0, 6.0), (f64::INFINITY, 100.0)], 0.03),
        ("fraction", &[400.0, f64::INFINITY], &[(1.0, 1.0), (2.0, 3.0), (3.0, 6.0), (f64::INFINITY, 100.0)], 0.94),
        ("fraction", &[2.0, 2.0], &[(1.0, 1.0), (2.0, 3.0), (3.0, 6.0), (f64::INFINITY, 100.0)], 0.0),
        ("fraction", &[3.0, 2.0], &[(1.0, 1.0), (2.0, 3.0), (3.0, 6.0), (f64::INFINITY, 100.0)], 0.0),
        ("fraction", &[0.0, 1.0], &[(f64::INFINITY, 100.0)], 0.0),
        ("fraction", &[0.0, 5.0], &[(1.0, 0.0), (2.0, 0.0), (3.0, 0.0), (f64::INFINITY, 0.0)], f64::NAN),
        ("fraction", &[2.0, 3.5], &[(1.0, 1.0), (2.0, 3.0), (3.0, 6.0), (f64::INFINITY, 100.0)], 0.03),
        ("fraction", &[0.5, 2.0], &[(1.0, 1.0), (2.0, 3.0), (3.0, 6.0), (f64::INFINITY, 100.0)], 0.025),
        ("fraction", &[1.0, 3.0], &[(1.0, 1.0), (2.0, 3.0), (3.0, 6.0), (f64::INFINITY, 100.0)], 0.05),
        ("fraction", &[0.1, 0.75], &[(0.5, 2.5), (1.0, 7.5), (f64::INFINITY, 100.0)], 0.045),
        ("fraction", &[-1.0, 1.0], &[(-2.0, 5.0), (-1.0, 10.0), (0.0, 15.0), (1.0, 20.0), (f64::INFINITY, 100.0)], 0.1),
        ("fraction", &[f64::NAN, 1.0], &[(1.0, 1.0), (f64::INFINITY, 100.0)], f64::NAN),
        ("fraction", &[0.0, f64::NAN], &[(1.0, 1.0), (f64::INFINITY, 100.0)], f64::NAN),
        ("fraction", &[-10.0, -5.0], &[(1.0, 1.0), (2.0, 3.0), (f64::INFINITY, 10.0)], 0.0),
        ("fraction", &[5.0, 10.0], &[(1.0, 1.0), (2.0, 3.0), (f64::INFINITY, 10.0)], 0.0),
        ("quantile", &[0.0], &[(0.0, 0.0), (0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 110.0)], 0.0),
        ("quantile", &[0.0], &[(-0.25, 0.0), (-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 20.0)], -0.25),
        ("quantile", &[0.25], &[(0.0, 0.0), (0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 110.0)], 0.055),
        ("quantile", &[0.25], &[(-0.25, 0.0), (-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 20.0)], -0.225),
        ("quantile", &[0.5], &[(0.0, 0.0), (0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 110.0)], 0.125),
        ("quantile", &[0.5], &[(-0.25, 0.0), (-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 20.0)], -0.2),
        ("quantile", &[0.75], &[(0.0, 0.0), (0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 110.0)], 0.45),
        ("quantile", &[0.75], &[(-0.25, 0.0), (-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 20.0)], -0.15),
        ("quantile", &[1.0], &[(0.0, 0.0), (0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 110.0)], 1.0),
        ("quantile", &[1.0], &[(-0.25, 0.0), (-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 20.0)], -0.1),
        ("quantile", &[-0.1], &[(0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 120.0)], f64::NEG_INFINITY),
        ("quantile", &[-0.1], &[(-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 30.0)], f64::NEG_INFINITY),
        ("quantile", &[1.01], &[(0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 120.0)], f64::INFINITY),
        ("quantile", &[1.01], &[(-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 30.0)], f64::INFINITY),
        ("quantile", &[f64::NAN], &[(0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 120.0)], f64::NAN),
        ("quantile", &[f64::NAN], &[(-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 30.0)], f64::NAN),
        ("quantile", &[0.0], &[(0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 120.0)], 0.0),
        ("quantile", &[0.0], &[(-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 30.0)], -0.2),
        ("quantile", &[1.0], &[(0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 120.0)], 1.0),
        ("quantile", &[1.0], &[(-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 30.0)], 0.3),
        ("quantile", &[0.2], &[(0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 120.0)], 0.048),
        ("quantile", &[0.2], &[(-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 30.0)], -0.2),
        ("quantile", &[0.5], &[(0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 120.0)], 0.15),
        ("quantile", &[0.5], &[(-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 30.0)], -0.15),
        ("quantile", &[0.8], &[(0.1, 50.0), (0.2, 70.0), (1.0, 110.0), (f64::INFINITY, 120.0)], 0.72),
        ("quantile", &[0.8], &[(-0.2, 10.0), (-0.1, 20.0), (0.3, 20.0), (f64::INFINITY, 30.0)], 0.3),
        ("quantile", &[1.0 / 6.0], &[(0.0, 0.0), (2.0, 1.0), (4.0, 2.0), (6.0, 3.0), (f64::INFINITY, 3.0)], 1.0),
        ("quantile", &[0.5], &[(0.0, 0.0), (2.0, 1.0), (4.0, 2.0), (6.0, 3.0), (f64::INFINITY, 3.0)], 3.0),
        ("quantile", &[5.0 / 6.0], &[(0.0, 0.0), (2.0, 1.0), (4.0, 2.0), (6.0, 3.0), (f64::INFINITY, 3.0)], 5.0),
        ("quantile", &[0.01], &[(0.1, 20.0), (1.0, 10.0), (10.0, 50.0), (100.0, 40.0), (1000.0, 90.0), (f64::INFINITY, 80.0)], 0.0045),
        ("quantile", &[0.5], &[(0.1, 20.0), (1.0, 10.0), (10.0, 50.0), (100.0, 40.0), (1000.0, 90.0), (f64::INFINITY, 80.0)], 8.5),
        ("quantile", &[0.99], &[(0.1, 20.0), (1.0, 10.0), (10.0, 50.0), (100.0, 40.0), (1000.0, 90.0), (f64::INFINITY, 80.0)], 979.75),
    ]
}

#[test]
fn cases_from_the_test_scripts() {
    for (function, args, input, want) in script_cases() {
        let classic = buckets(input);
        let got = match function {
            "quantile" => bucket_quantile(args[0], &classic).value,
            _ => bucket_fraction(args[0], args[1], &classic),
        };
        assert!(
            almost_equal(want, got, DEFAULT_EPSILON),
            "{function}{args:?} {input:?}: {got} != {want}"
        );
        let mut c = ClassicHistogram::new();
        for b in &classic {
            c.set_bucket_count(b.upper_bound, b.count);
        }
        let Ok(native) = c.convert() else {
            // Decreasing counts: no custom-bucket histogram can hold them.
            continue;
        };
        let got = match function {
            "quantile" => histogram_quantile(args[0], &native).value,
            _ => histogram_fraction(args[0], args[1], &native).value,
        };
        assert!(
            almost_equal(want, got, DEFAULT_EPSILON),
            "native {function}{args:?} {input:?}: {got} != {want}"
        );
    }
}
