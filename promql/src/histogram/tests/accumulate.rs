//! Sums and means of histograms, with cases from `native_histograms.test` (aggregation and
//! `*_over_time` share the arithmetic).

use super::*;

fn sum_of(inputs: &[&str]) -> HistogramSum {
    let mut s = HistogramSum::new(&h(inputs[0]));
    for x in &inputs[1..] {
        s.add(&h(x)).unwrap();
    }
    s
}

fn mean_of(inputs: &[&str]) -> HistogramMean {
    let mut m = HistogramMean::new(&h(inputs[0]));
    for x in &inputs[1..] {
        m.add(&h(x)).unwrap();
    }
    m
}

const MIXED_SCHEMAS: [&str; 4] = [
    "{{schema:0 count:25 sum:3.1 z_bucket:4 z_bucket_w:0.001 buckets:[1 2 0 1 1] n_buckets:[2 4 0 0 1 9]}}",
    "{{schema:0 count:41 sum:1e100 z_bucket:5 z_bucket_w:0.001 buckets:[1 3 1 2 1 1 1] n_buckets:[0 1 4 2 7 0 0 0 0 5 5 2]}}",
    "{{schema:0 count:41 sum:-1e100 z_bucket:5 z_bucket_w:0.001 buckets:[1 3 1 2 1 1 1] n_buckets:[0 1 4 2 7 0 0 0 0 5 5 2]}}",
    "{{schema:1 count:0 sum:1.3 z_bucket:3 z_bucket_w:0.001 buckets:[2 4 2 3 2 2] n_buckets:[1 2 5 3 8 1 1 1 1 6 3]}}",
];

/// Very large and very small values: the mean has to switch to incremental calculation.
const HUGE: [&str; 8] = [
    "{{schema:0 count:1.7976931348623157e+308 sum:5.30921651659898 z_bucket:1.78264e50 z_bucket_w:0.001 buckets:[1.78264E+50 1.78264E+215 1.78264E+219 3363.5121756487] n_buckets:[1178.20696291113 731.697776280323 715.201503759399 1386.11378876781 855.572553278132]}}",
    "{{schema:0 count:1e308 sum:0.961118537914768 z_bucket:0.76342771 z_bucket_w:0.001 buckets:[0.76342771 0.76342771 0.76342771 195.70084087969] n_buckets:[421.30382970055 0 450441.779]}}",
    "{{schema:0 count:1e-6 sum:1.62091361305318 z_bucket:1.9592258 z_bucket_w:0.001 buckets:[1.9592258 1.9592258 1.9592258 1135.74692279] n_buckets:[0 4504.41779 588.599358265103 40.3760942760943]}}",
    "{{schema:0 count:1e-6 sum:0.865089463758091 z_bucket:7.69805412 z_bucket_w:0.001 buckets:[2.258E+220 2.258E+220 2.3757689E+217 1078.68071312804] n_buckets:[349.905284031261 0 0 0.161173466838949 588.599358]}}",
    "{{schema:0 count:1e-6 sum:0.323055185914577 z_bucket:458.90154 z_bucket_w:0.001 buckets:[7.69805412 7.69805412 2.258E+220 3173.28218135701]}}",
    "{{schema:0 count:1e-6 sum:0.951811357687154 z_bucket:1.78264e50 z_bucket_w:0.001 buckets:[458.90154 458.90154 7.69805412 2178.35] n_buckets:[2054.92644438789 844.560108898123]}}",
    "{{schema:0 count:1e-6 sum:0 z_bucket:5 z_bucket_w:0.001 buckets:[0 0 1.78264E+219 376.770478890989]}}",
    "{{schema:0 count:1e-6 sum:0 z_bucket:0 z_bucket_w:0.001 buckets:[0 0 458.90154 250325.5] n_buckets:[0 0.0000000011353 0 608.697257]}}",
];

#[test]
fn sum_and_mean_across_schemas_with_compensation() {
    assert_matches(
        &sum_of(&MIXED_SCHEMAS).finish(),
        "{{schema:0 count:107 sum:4.4 z_bucket:17 z_bucket_w:0.001 buckets:[5 14 7 7 3 2 2] n_buckets:[3 13 19 6 17 18 0 0 0 10 10 4]}}",
    );
    assert_matches(
        &mean_of(&MIXED_SCHEMAS).finish(),
        "{{schema:0 count:26.75 sum:1.1 z_bucket:4.25 z_bucket_w:0.001 buckets:[1.25 3.5 1.75 1.75 0.75 0.5 0.5] n_buckets:[0.75 3.25 4.75 1.5 4.25 4.5 0 0 0 2.5 2.5 1]}}",
    );
}

#[test]
fn mean_switches_to_incremental_on_overflow() {
    let want = "{{schema:0 count:3.497116418577895e+307 sum:1.2539005843658437 z_bucket:4.4566e49 z_bucket_w:0.001 buckets:[2.8225e+219 2.822522283e+219 3.271129711125e+219 32728.442914086805] n_buckets:[500.5428151288539 760.0844593974477 56468.19748275306 254.4185391888429 180.5214889097665]}}";
    let m = mean_of(&HUGE);
    assert_eq!(m.count(), 8.0);
    assert_matches(&m.finish(), want);
    let s = sum_of(&HUGE).finish();
    assert!(s.count.is_infinite());
    assert_matches(
        &s,
        "{{schema:0 count:Inf sum:10.03120467492675 z_bucket:3.56528e+50 z_bucket_w:0.001 buckets:[2.258e+220 2.2580178264e+220 2.6169037689e+220 261827.54331269444] n_buckets:[4004.342521030831 6080.675675179582 451745.57986202446 2035.3483135107433 1444.171911278132]}}",
    );
}

#[test]
fn compensation_of_sums_and_means() {
    let series = [
        "{{schema:0 count:1 sum:5.3}}",
        "{{schema:0 count:2 sum:1e100}}",
        "{{schema:0 count:3 sum:1}}",
        "{{schema:0 count:4 sum:-1e100}}",
        "{{schema:0 count:5 sum:2}}",
        "{{schema:0 count:6 sum:1e50}}",
        "{{schema:0 count:7 sum:-1e50}}",
    ];
    assert_matches(&sum_of(&series).finish(), "{{schema:0 count:28 sum:8.3}}");
    assert_matches(
        &mean_of(&series).finish(),
        "{{schema:0 count:4 sum:1.1857142857142857}}",
    );
    let incremental = [
        "{{schema:0 count:1.7976931348623157e+308 sum:5.3}}",
        "{{schema:0 count:1e308 sum:1e100}}",
        "{{schema:0 count:1e-6 sum:-1e100}}",
        "{{schema:0 count:1e-6 sum:1}}",
        "{{schema:0 count:1e-6 sum:1e50}}",
        "{{schema:0 count:1e-6 sum:-1e50}}",
        "{{schema:0 count:1e-6 sum:0}}",
    ];
    assert_matches(
        &sum_of(&incremental).finish(),
        "{{schema:0 count:Inf sum:6.3}}",
    );
    assert_matches(
        &mean_of(&incremental).finish(),
        "{{schema:0 count:3.9967044783747367e+307 sum:0.9}}",
    );
}

#[test]
fn notes_on_hints_and_custom_bounds() {
    let s = sum_of(&[
        "{{count:1 counter_reset_hint:reset buckets:[1]}}",
        "{{count:1 counter_reset_hint:gauge buckets:[1]}}",
        "{{count:1 counter_reset_hint:not_reset buckets:[1]}}",
    ]);
    assert!(s.counter_reset_collision());
    assert!(!s.nhcb_bounds_reconciled());
    let finished = s.finish();
    assert_eq!(finished.counter_reset_hint, CounterResetHint::Gauge);

    let m = mean_of(&[
        "{{schema:-53 sum:1 count:1 custom_values:[5] buckets:[1]}}",
        "{{schema:-53 sum:1 count:1 custom_values:[5] buckets:[1]}}",
        "{{schema:-53 sum:1 count:1 custom_values:[5 10] buckets:[1]}}",
    ]);
    assert!(m.nhcb_bounds_reconciled());
    assert!(!m.counter_reset_collision());
    assert_matches(
        &m.finish(),
        "{{schema:-53 count:1 sum:1 custom_values:[5] buckets:[1]}}",
    );

    let mismatched = sum_of(&[
        "{{schema:-53 sum:1 count:1 custom_values:[10] buckets:[1]}}",
        "{{schema:-53 sum:1 count:1 custom_values:[2 10] buckets:[1]}}",
    ]);
    assert!(mismatched.nhcb_bounds_reconciled());
    assert_matches(
        &mismatched.finish(),
        "{{schema:-53 count:2 sum:2 custom_values:[10] buckets:[2]}}",
    );
}

#[test]
fn mixing_exponential_and_custom_fails() {
    let mut s = HistogramSum::new(&h("{{sum:4 count:3 buckets:[1 2 1]}}"));
    assert_eq!(
        s.add(&h(
            "{{schema:-53 sum:1 count:1 custom_values:[5 10] buckets:[1]}}"
        )),
        Err(HistogramError::IncompatibleSchema)
    );
    let mut m = HistogramMean::new(&h(
        "{{schema:-53 sum:1 count:1 custom_values:[5 10] buckets:[1]}}",
    ));
    assert!(m.add(&h("{{sum:4 count:3 buckets:[1 2 1]}}")).is_err());
}

#[test]
fn single_histogram() {
    let one = "{{schema:-53 sum:1 count:5 custom_values:[5 10] buckets:[1 4]}}";
    assert_matches(&sum_of(&[one]).finish(), one);
    assert_matches(&mean_of(&[one]).finish(), one);
}
