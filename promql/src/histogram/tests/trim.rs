//! The trim operators, with cases from `native_histograms.test`.

use super::*;

use TrimSide::{KeepAbove, KeepBelow};

#[track_caller]
fn check(input: &str, cases: &[(TrimSide, f64, &str)]) {
    let x = h(input);
    for &(side, cutoff, want) in cases {
        let got = x.trim(side, cutoff);
        let expected = h(want);
        assert!(
            expected.matches_expected(&got, false),
            "{input} {side:?} {cutoff}:\n got {got}\nwant {expected}"
        );
    }
}

#[test]
#[allow(clippy::approx_constant)] // The cutoff of the test script, close to sqrt(2).
fn exponential_buckets() {
    check(
        "{{schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]}}",
        &[
            (
                KeepAbove,
                f64::NEG_INFINITY,
                "{{schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]}}",
            ),
            (
                KeepBelow,
                f64::INFINITY,
                "{{schema:0 sum:123.75 count:34 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1 2]}}",
            ),
            (KeepAbove, f64::INFINITY, "{{schema:0 z_bucket_w:0.001}}"),
            (
                KeepBelow,
                f64::NEG_INFINITY,
                "{{schema:0 z_bucket_w:0.001}}",
            ),
            (
                KeepAbove,
                0.0,
                "{{schema:0 sum:120.20840280171308 count:30.5 z_bucket:0.5 z_bucket_w:0.001 buckets:[2 4 8 16]}}",
            ),
            (
                KeepBelow,
                0.0,
                "{{schema:0 sum:-3.53578390593273768 count:3.5 z_bucket:0.5 z_bucket_w:0.001 n_buckets:[1 2]}}",
            ),
            (
                KeepBelow,
                1.4142135624,
                "{{count:8 sum:0.2570938865989847 z_bucket:1 z_bucket_w:0.001 buckets:[2 2] n_buckets:[1 2]}}",
            ),
            (
                KeepAbove,
                1.4142135624,
                "{{count:26 sum:116.50067065070982 z_bucket_w:0.001 buckets:[0 2 8 16]}}",
            ),
            (
                KeepBelow,
                2.0,
                "{{count:10 sum:3.5355339059327373 z_bucket:1 z_bucket_w:0.001 buckets:[2 4] n_buckets:[1 2]}}",
            ),
            (
                KeepAbove,
                2.0,
                "{{count:24 sum:113.13708498984761 z_bucket_w:0.001 offset:2 buckets:[8 16]}}",
            ),
            (
                KeepAbove,
                -1.0,
                "{{count:32 sum:119.50104602052653 z_bucket:1 z_bucket_w:0.001 buckets:[2 4 8 16] n_buckets:[1]}}",
            ),
            (
                KeepBelow,
                -1.0,
                "{{count:2 sum:-2.8284271247461903 z_bucket_w:0.001 n_offset:1 n_buckets:[2]}}",
            ),
        ],
    );
    check(
        "{{schema:2 sum:12.8286080906 count:28 z_bucket:1 z_bucket_w:0.001 buckets:[1 2 4 7 3] n_buckets:[1 5 3 1]}}",
        &[
            (
                KeepBelow,
                1.13,
                "{{schema:2 count:13.410582181123704 sum:-9.385798726068233 z_bucket:1 z_bucket_w:0.001 buckets:[1 1.410582181123704] n_buckets:[1 5 3 1]}}",
            ),
            (
                KeepAbove,
                1.13,
                "{{schema:2 count:14.589417818876296 sum:22.168126492693734 z_bucket_w:0.001 offset:1 buckets:[0.589417818876296 4 7 3]}}",
            ),
            (
                KeepAbove,
                -1.3,
                "{{schema:2 count:25.54213947904476 sum:16.29588491217537 z_bucket:1 z_bucket_w:0.001 buckets:[1 2 4 7 3] n_buckets:[1 5 1.54213947904476]}}",
            ),
            (
                KeepBelow,
                -1.3,
                "{{schema:2 count:2.45786052095524 sum:-3.5189307983595066 z_bucket_w:0.001 n_offset:2 n_buckets:[1.45786052095524 1]}}",
            ),
        ],
    );
}

#[test]
fn zero_bucket() {
    check(
        "{{schema:0 sum:8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 buckets:[10]}}",
        &[
            (
                KeepAbove,
                0.5,
                "{{schema:0 count:10 sum:7.0710678118654755 z_bucket:0 z_bucket_w:0.5 buckets:[10]}}",
            ),
            (
                KeepAbove,
                0.1,
                "{{schema:0 count:11.6 sum:7.551067811865476 z_bucket:1.6 z_bucket_w:0.5 buckets:[10]}}",
            ),
            (
                KeepAbove,
                0.0,
                "{{schema:0 sum:8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 buckets:[10]}}",
            ),
            (
                KeepBelow,
                0.5,
                "{{schema:0 count:2 sum:0.5 z_bucket:2 z_bucket_w:0.5}}",
            ),
            (
                KeepBelow,
                0.1,
                "{{schema:0 count:0.4 sum:0.02 z_bucket:0.4 z_bucket_w:0.5}}",
            ),
            (KeepBelow, 0.0, "{{schema:0 z_bucket_w:0.5}}"),
        ],
    );
    check(
        "{{schema:0 sum:-8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 n_buckets:[10]}}",
        &[
            (
                KeepBelow,
                -0.5,
                "{{schema:0 count:10 sum:-7.0710678118654755 z_bucket:0 z_bucket_w:0.5 n_buckets:[10]}}",
            ),
            (
                KeepBelow,
                -0.1,
                "{{schema:0 count:11.6 sum:-7.551067811865476 z_bucket:1.6 z_bucket_w:0.5 n_buckets:[10]}}",
            ),
            (
                KeepBelow,
                0.0,
                "{{schema:0 sum:-8.0210678118654755 count:12 z_bucket:2 z_bucket_w:0.5 n_buckets:[10]}}",
            ),
            (
                KeepAbove,
                -0.5,
                "{{schema:0 count:2 sum:-0.5 z_bucket:2 z_bucket_w:0.5}}",
            ),
            (
                KeepAbove,
                -0.1,
                "{{schema:0 count:0.4 sum:-0.02 z_bucket:0.4 z_bucket_w:0.5}}",
            ),
            (KeepAbove, 0.0, "{{schema:0 z_bucket_w:0.5}}"),
        ],
    );
    check(
        "{{schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1}}",
        &[
            (
                KeepAbove,
                0.1,
                "{{schema:0 count:0 sum:0 z_bucket:0 z_bucket_w:0.1}}",
            ),
            (
                KeepBelow,
                0.1,
                "{{schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1}}",
            ),
            (
                KeepAbove,
                0.05,
                "{{schema:0 count:1.25 sum:0.09375 z_bucket:1.25 z_bucket_w:0.1}}",
            ),
            (
                KeepBelow,
                0.05,
                "{{schema:0 count:3.75 sum:-0.09375 z_bucket:3.75 z_bucket_w:0.1}}",
            ),
            (
                KeepAbove,
                0.0,
                "{{schema:0 count:2.5 sum:0.125 z_bucket:2.5 z_bucket_w:0.1}}",
            ),
            (
                KeepBelow,
                0.0,
                "{{schema:0 count:2.5 sum:-0.125 z_bucket:2.5 z_bucket_w:0.1}}",
            ),
            (
                KeepAbove,
                -0.05,
                "{{schema:0 count:3.75 sum:0.09375 z_bucket:3.75 z_bucket_w:0.1}}",
            ),
            (
                KeepBelow,
                -0.05,
                "{{schema:0 count:1.25 sum:-0.09375 z_bucket:1.25 z_bucket_w:0.1}}",
            ),
            (
                KeepBelow,
                -0.1,
                "{{schema:0 count:0 sum:0 z_bucket:0 z_bucket_w:0.1}}",
            ),
            (
                KeepAbove,
                -0.1,
                "{{schema:0 count:5 sum:0 z_bucket:5 z_bucket_w:0.1}}",
            ),
        ],
    );
    check(
        "{{schema:0 sum:-6.75 z_bucket:5 z_bucket_w:0.01 buckets:[2 3] n_buckets:[1 2 3]}}",
        &[
            (
                KeepBelow,
                -0.005,
                "{{count:7.25 sum:-12.03019028017131 z_bucket:1.25 z_bucket_w:0.01 n_buckets:[1 2 3]}}",
            ),
            (
                KeepAbove,
                0.0,
                "{{count:7.5 sum:5.669354249492381 z_bucket:2.5 z_bucket_w:0.01 buckets:[2 3]}}",
            ),
        ],
    );
}

#[test]
fn custom_buckets() {
    check(
        "{{schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]}}",
        &[
            (
                KeepBelow,
                15.0,
                "{{schema:-53 count:11 sum:97.5 custom_values:[5 10 15 20] buckets:[1 6 4]}}",
            ),
            (
                KeepAbove,
                15.0,
                "{{schema:-53 count:4 sum:72.5 custom_values:[5 10 15 20] offset:3 buckets:[3 1]}}",
            ),
            (
                KeepBelow,
                13.0,
                "{{schema:-53 count:9.4 sum:75.1 custom_values:[5 10 15 20] buckets:[1 6 2.4]}}",
            ),
            (
                KeepAbove,
                13.0,
                "{{schema:-53 count:5.6 sum:94.9 custom_values:[5 10 15 20] offset:2 buckets:[1.6 3 1]}}",
            ),
            (
                KeepBelow,
                7.5,
                "{{schema:-53 count:4 sum:21.25 custom_values:[5 10 15 20] buckets:[1 3]}}",
            ),
            (
                KeepBelow,
                50.0,
                "{{schema:-53 count:14 sum:150.0 custom_values:[5 10 15 20] buckets:[1 6 4 3]}}",
            ),
            (
                KeepBelow,
                f64::NEG_INFINITY,
                "{{schema:-53 custom_values:[5 10 15 20]}}",
            ),
            (
                KeepAbove,
                f64::INFINITY,
                "{{schema:-53 custom_values:[5 10 15 20]}}",
            ),
            (
                KeepBelow,
                f64::INFINITY,
                "{{schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]}}",
            ),
            (
                KeepAbove,
                f64::NEG_INFINITY,
                "{{schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]}}",
            ),
            (
                KeepAbove,
                0.0,
                "{{schema:-53 sum:172.5 count:15 custom_values:[5 10 15 20] buckets:[1 6 4 3 1]}}",
            ),
            (KeepBelow, 0.0, "{{schema:-53 custom_values:[5 10 15 20]}}"),
        ],
    );
    check(
        "{{schema:-53 sum:172.5 count:15 custom_values:[-10 5 10 15 20] buckets:[2 1 6 4 3 1]}}",
        &[
            (
                KeepBelow,
                2.0,
                "{{schema:-53 count:2.8 sum:-23.2 custom_values:[-10 5 10 15 20] buckets:[2 0.8]}}",
            ),
            (
                KeepBelow,
                -4.0,
                "{{schema:-53 count:2.4 sum:-22.8 custom_values:[-10 5 10 15 20] buckets:[2 0.4]}}",
            ),
            (
                KeepBelow,
                -15.0,
                "{{schema:-53 count:2 sum:-30 custom_values:[-10 5 10 15 20] buckets:[2]}}",
            ),
        ],
    );
}

#[test]
fn custom_buckets_unbounded_on_a_side() {
    let one = "{{schema:-53 sum:100.0 count:100 buckets:[100]}}";
    let empty_one = "{{schema:-53 sum:0 count:0 buckets:[0]}}";
    check(
        one,
        &[
            (KeepBelow, 10.0, empty_one),
            (KeepAbove, 10.0, empty_one),
            (KeepBelow, f64::INFINITY, one),
            (KeepAbove, f64::INFINITY, empty_one),
            (KeepAbove, f64::NEG_INFINITY, one),
            (KeepBelow, f64::NEG_INFINITY, empty_one),
        ],
    );
    check(
        "{{schema:-53 sum:33.0 count:100 custom_values:[0] buckets:[1 100]}}",
        &[
            (
                KeepBelow,
                10.0,
                "{{schema:-53 sum:0.0 count:1 custom_values:[0] buckets:[1 0]}}",
            ),
            (
                KeepBelow,
                0.0,
                "{{schema:-53 sum:0.0 count:1 custom_values:[0] buckets:[1 0]}}",
            ),
            (
                KeepBelow,
                -10.0,
                "{{schema:-53 sum:-10.0 count:1 custom_values:[0] buckets:[1 0]}}",
            ),
            (
                KeepAbove,
                -10.0,
                "{{schema:-53 sum:0.0 count:100 custom_values:[0] buckets:[0 100]}}",
            ),
            (
                KeepAbove,
                0.0,
                "{{schema:-53 sum:0.0 count:100 custom_values:[0] buckets:[0 100]}}",
            ),
            (
                KeepAbove,
                10.0,
                "{{schema:-53 sum:1000.0 count:100 custom_values:[0] buckets:[0 100]}}",
            ),
        ],
    );
    check(
        "{{schema:-53 sum:33 count:101 custom_values:[5] buckets:[1 100]}}",
        &[
            (
                KeepBelow,
                10.0,
                "{{schema:-53 sum:2.5 count:1 custom_values:[5] buckets:[1 0]}}",
            ),
            (
                KeepBelow,
                2.0,
                "{{schema:-53 sum:0.4 count:0.4 custom_values:[5] buckets:[0.4 0]}}",
            ),
            (KeepBelow, 0.0, "{{schema:-53 custom_values:[5]}}"),
            (
                KeepBelow,
                -10.0,
                "{{schema:-53 sum:0.0 count:0 custom_values:[5] buckets:[0 0]}}",
            ),
            (
                KeepAbove,
                -10.0,
                "{{schema:-53 sum:500.0 count:100 custom_values:[5] buckets:[0 100]}}",
            ),
            (
                KeepAbove,
                0.0,
                "{{schema:-53 sum:33.0 count:101 custom_values:[5] buckets:[1 100]}}",
            ),
            (
                KeepAbove,
                2.0,
                "{{schema:-53 sum:502.1 count:100.6 custom_values:[5] buckets:[0.6 100]}}",
            ),
            (
                KeepAbove,
                10.0,
                "{{schema:-53 sum:1000.0 count:100 custom_values:[5] buckets:[0 100]}}",
            ),
        ],
    );
    check(
        "{{schema:-53 sum:33 count:101 custom_values:[-5] buckets:[1 100]}}",
        &[
            (
                KeepBelow,
                10.0,
                "{{schema:-53 sum:-5.0 count:1 custom_values:[-5] buckets:[1 0]}}",
            ),
            (
                KeepBelow,
                0.0,
                "{{schema:-53 sum:-5 count:1 custom_values:[-5] buckets:[1 0]}}",
            ),
            (
                KeepBelow,
                -2.0,
                "{{schema:-53 sum:-5.0 count:1 custom_values:[-5] buckets:[1 0]}}",
            ),
            (
                KeepBelow,
                -10.0,
                "{{schema:-53 sum:-10.0 count:1 custom_values:[-5] buckets:[1 0]}}",
            ),
            (
                KeepAbove,
                -10.0,
                "{{schema:-53 sum:-500 count:100 custom_values:[-5] buckets:[0 100]}}",
            ),
            (
                KeepAbove,
                -2.0,
                "{{schema:-53 sum:-200 count:100 custom_values:[-5] buckets:[0 100]}}",
            ),
            (
                KeepAbove,
                0.0,
                "{{schema:-53 sum:0.0 count:100 custom_values:[-5] buckets:[0 100]}}",
            ),
            (
                KeepAbove,
                10.0,
                "{{schema:-53 sum:1000.0 count:100 custom_values:[-5] buckets:[0 100]}}",
            ),
        ],
    );
}

#[test]
fn empty_histograms_stay_empty() {
    for input in ["{{}}", "{{schema:-53 custom_values:[-3 2]}}"] {
        for cutoff in [f64::NEG_INFINITY, -5.0, 0.0, 5.0, f64::INFINITY] {
            check(
                input,
                &[(KeepBelow, cutoff, input), (KeepAbove, cutoff, input)],
            );
        }
    }
}

#[test]
fn nan_cutoff_removes_nothing_and_input_is_untouched() {
    let x = h("{{schema:0 sum:5 count:3 buckets:[1 2]}}");
    assert_eq!(x.trim(KeepBelow, f64::NAN), x);
    let before = x.clone();
    let _ = x.trim(KeepAbove, 1.5);
    assert_eq!(x, before);
}
