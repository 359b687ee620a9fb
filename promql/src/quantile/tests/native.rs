//! Native-histogram quantiles, fractions and moments, with the cases of
//! `native_histograms.test` that apply to a single histogram.

// The tables hold numbers as the test scripts write them.
#![allow(
    clippy::approx_constant,
    clippy::excessive_precision,
    clippy::type_complexity
)]

use super::*;

fn h(text: &str) -> FloatHistogram {
    FloatHistogram::parse_notation(text).unwrap()
}

/// (q, histogram, expected, annotation).
#[rustfmt::skip]
fn quantile_cases() -> Vec<(&'static [f64], &'static str, f64, Option<QuantileNote>)> {
    vec![
        (&[0.5], "{{schema:0 sum:5 count:4 buckets:[1 2 1]}}", 1.414213562373095, None),
        (&[0.5], "{{schema:0 z_bucket:1 z_bucket_w:0.5 sum:0.25 count:1}}", 0.0, None),
        (&[0.5], "{{schema:0 sum:-5 count:4 n_buckets:[1 2 1]}}", -1.414213562373095, None),
        (&[0.5], "{{schema:0 sum:-4 count:4 n_buckets:[1 2 1]}}", -1.414213562373095, None),
        (&[1.001], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", f64::INFINITY, None),
        (&[1.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 16.0, None),
        (&[0.99], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 15.67072476139083, None),
        (&[0.9], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 12.99603834169977, None),
        (&[0.6], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 4.594793419988138, None),
        (&[0.5], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 1.5874010519681994, None),
        (&[0.1], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0006, None),
        (&[0.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[-1.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", f64::NEG_INFINITY, None),
        (&[1.001], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", f64::INFINITY, None),
        (&[1.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[0.99], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", -6e-05, None),
        (&[0.9], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", -0.0006, None),
        (&[0.5], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", -1.5874010519681996, None),
        (&[0.1], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", -12.996038341699768, None),
        (&[0.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", -16.0, None),
        (&[-1.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", f64::NEG_INFINITY, None),
        (&[1.001], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", f64::INFINITY, None),
        (&[1.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 16.0, None),
        (&[0.99], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 15.34822590920423, None),
        (&[0.9], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 10.556063286183155, None),
        (&[0.7], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 1.2030250360821164, None),
        (&[0.55], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.0006, None),
        (&[0.5], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[0.45], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", -0.0006, None),
        (&[0.3], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", -1.2030250360821169, None),
        (&[0.1], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", -10.556063286183155, None),
        (&[0.01], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", -15.34822590920423, None),
        (&[0.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", -16.0, None),
        (&[-1.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", f64::NEG_INFINITY, None),
        (&[0.5], "{{schema:-1 sum:6 count:5 buckets:[0 5]}}", 2.0, None),
        (&[0.5], "{{schema:0 sum:4 count:5 buckets:[0 5]}}", 1.4142135623730951, None),
        (&[0.5], "{{schema:1 sum:4 count:5 buckets:[0 5]}}", 1.189207, None),
        (&[0.5], "{{schema:-1 sum:6 count:5 buckets:[0 0 5]}}", 8.0, None),
        (&[0.5], "{{schema:0 sum:4 count:5 buckets:[0 0 5]}}", 2.82842712474619, None),
        (&[0.5], "{{schema:1 sum:4 count:5 buckets:[0 0 5]}}", 1.6817928305074292, None),
        (&[0.5], "{{schema:-1 sum:6 count:5 n_buckets:[0 5]}}", -2.0, None),
        (&[0.5], "{{schema:0 sum:4 count:5 n_buckets:[0 5]}}", -1.4142135623730951, None),
        (&[0.5], "{{schema:1 sum:4 count:5 n_buckets:[0 5]}}", -1.189207, None),
        (&[0.5], "{{schema:-1 sum:6 count:5 n_buckets:[0 0 5]}}", -8.0, None),
        (&[0.5], "{{schema:0 sum:4 count:5 n_buckets:[0 0 5]}}", -2.82842712474619, None),
        (&[0.5], "{{schema:1 sum:4 count:5 n_buckets:[0 0 5]}}", -1.6817928305074292, None),
        (&[0.08333333333333333], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0005, None),
        (&[0.6320802083934297], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 6.0, None),
        (&[0.9166666666666666], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", -0.0005, None),
        (&[0.36791979160657035], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", -6.0, None),
        (&[0.5416666666666666], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.0005, None),
        (&[0.4583333333333333], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", -0.0005, None),
        (&[0.5], "{{schema:-53 sum:5 count:4 custom_values:[5 10] buckets:[1 2 1]}}", 7.5, None),
        (&[1.0], "{{schema:0 count:3 sum:NaN}}", f64::NAN, Some(QuantileNote::NanObservationsResultNan)),
        (&[1.0], "{{schema:0 count:15 sum:NaN buckets:[12]}}", f64::NAN, Some(QuantileNote::NanObservationsResultNan)),
        (&[0.81], "{{schema:0 count:3 sum:NaN}}", f64::NAN, Some(QuantileNote::NanObservationsResultNan)),
        (&[0.81], "{{schema:0 count:15 sum:NaN buckets:[12]}}", f64::NAN, Some(QuantileNote::NanObservationsResultNan)),
        (&[0.8], "{{schema:0 count:3 sum:NaN}}", f64::NAN, Some(QuantileNote::NanObservationsResultNan)),
        (&[0.8], "{{schema:0 count:15 sum:NaN buckets:[12]}}", 1.0, Some(QuantileNote::NanObservationsSkewed)),
        (&[0.4], "{{schema:0 count:3 sum:NaN}}", f64::NAN, Some(QuantileNote::NanObservationsResultNan)),
        (&[0.4], "{{schema:0 count:15 sum:NaN buckets:[12]}}", 0.7071067811865475, Some(QuantileNote::NanObservationsSkewed)),
    ]
}

/// (lower and upper, histogram, expected, annotation).
#[rustfmt::skip]
fn fraction_cases() -> Vec<(&'static [f64], &'static str, f64, Option<FractionNote>)> {
    vec![
        (&[f64::NEG_INFINITY, f64::INFINITY], "{{}}", f64::NAN, None),
        (&[f64::NEG_INFINITY, f64::INFINITY], "{{schema:-53 custom_values:[-2 3]}}", f64::NAN, None),
        (&[0.0, 8.0], "{{}}", f64::NAN, None),
        (&[0.0, 8.0], "{{schema:-53 custom_values:[-2 3]}}", f64::NAN, None),
        (&[1.0, 2.0], "{{schema:0 sum:5 count:4 buckets:[1 2 1]}}", 0.5, None),
        (&[0.0, 8.0], "{{schema:0 sum:5 count:4 buckets:[1 2 1]}}", 1.0, None),
        (&[-0.5, 0.5], "{{schema:0 z_bucket:1 z_bucket_w:0.5 sum:0.25 count:1}}", 1.0, None),
        (&[-2.0, -1.0], "{{schema:0 sum:-5 count:4 n_buckets:[1 2 1]}}", 0.5, None),
        (&[-2.0, -1.0], "{{schema:0 sum:-4 count:4 n_buckets:[1 2 1]}}", 0.5, None),
        (&[0.0, 2.0], "{{schema:-1 sum:6 count:5 buckets:[0 5]}}", 0.5, None),
        (&[0.0, 1.4142135623730951], "{{schema:0 sum:4 count:5 buckets:[0 5]}}", 0.5, None),
        (&[0.0, 1.189207], "{{schema:1 sum:4 count:5 buckets:[0 5]}}", 0.5, None),
        (&[0.0, 8.0], "{{schema:-1 sum:6 count:5 buckets:[0 0 5]}}", 0.5, None),
        (&[0.0, 2.82842712474619], "{{schema:0 sum:4 count:5 buckets:[0 0 5]}}", 0.5, None),
        (&[0.0, 1.6817928305074292], "{{schema:1 sum:4 count:5 buckets:[0 0 5]}}", 0.5, None),
        (&[-2.0, 0.0], "{{schema:-1 sum:6 count:5 n_buckets:[0 5]}}", 0.5, None),
        (&[-1.4142135623730951, 0.0], "{{schema:0 sum:4 count:5 n_buckets:[0 5]}}", 0.5, None),
        (&[-1.189207, 0.0], "{{schema:1 sum:4 count:5 n_buckets:[0 5]}}", 0.5, None),
        (&[-8.0, 0.0], "{{schema:-1 sum:6 count:5 n_buckets:[0 0 5]}}", 0.5, None),
        (&[-2.82842712474619, 0.0], "{{schema:0 sum:4 count:5 n_buckets:[0 0 5]}}", 0.5, None),
        (&[-1.6817928305074292, 0.0], "{{schema:1 sum:4 count:5 n_buckets:[0 0 5]}}", 0.5, None),
        (&[3.1415, 42.0], "{{}}", f64::NAN, None),
        (&[0.0, f64::INFINITY], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 1.0, None),
        (&[f64::NEG_INFINITY, 0.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[-0.001, 0.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[0.0, 0.001], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.16666666666666666, None),
        (&[0.001, f64::INFINITY], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.8333333333333334, None),
        (&[0.0, 0.0005], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.08333333333333333, None),
        (&[f64::NEG_INFINITY, -0.001], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[1.0, 2.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.25, None),
        (&[0.0, 1.5], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.4795739585136224, None),
        (&[1.5, 2.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.10375937481971091, None),
        (&[1.0, 8.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.3333333333333333, None),
        (&[0.0, 6.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.6320802083934297, None),
        (&[1.0, 6.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.29874687506009634, None),
        (&[1.5, 6.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.15250624987980724, None),
        (&[-2.0, -1.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[-2.0, -1.5], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[-8.0, -1.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[-6.0, -1.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[-6.0, -1.5], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[42.0, 3.1415], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[0.0, 0.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[1e-06, 1e-06], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[42.0, 42.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[-3.1, -3.1], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[3.1415, f64::NAN], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", f64::NAN, None),
        (&[f64::NAN, 42.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", f64::NAN, None),
        (&[f64::NAN, f64::NAN], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", f64::NAN, None),
        (&[f64::NEG_INFINITY, f64::INFINITY], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}", 1.0, None),
        (&[0.0, f64::INFINITY], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[f64::NEG_INFINITY, 0.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 1.0, None),
        (&[-0.001, 0.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.16666666666666666, None),
        (&[0.0, 0.001], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[-0.0005, 0.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.08333333333333333, None),
        (&[f64::NEG_INFINITY, -0.0005], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.9166666666666666, None),
        (&[0.001, f64::INFINITY], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[f64::NEG_INFINITY, -0.001], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.8333333333333334, None),
        (&[1.0, 2.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[1.5, 2.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[1.0, 8.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[1.0, 6.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[1.5, 6.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[-2.0, -1.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.25, None),
        (&[-2.0, -1.5], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.10375937481971091, None),
        (&[-8.0, -1.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.3333333333333333, None),
        (&[f64::NEG_INFINITY, -6.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.36791979160657035, None),
        (&[-6.0, -1.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.29874687506009634, None),
        (&[-6.0, -1.5], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.15250624987980724, None),
        (&[42.0, 3.1415], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[0.0, 0.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[1e-06, 1e-06], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[42.0, 42.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[-3.1, -3.1], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[3.1415, f64::NAN], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", f64::NAN, None),
        (&[f64::NAN, 42.0], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", f64::NAN, None),
        (&[f64::NAN, f64::NAN], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", f64::NAN, None),
        (&[f64::NEG_INFINITY, f64::INFINITY], "{{schema:0 count:12 sum:100 z_bucket:2 z_bucket_w:0.001 n_buckets:[2 3 0 1 4]}}", 1.0, None),
        (&[0.0, f64::INFINITY], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.5, None),
        (&[f64::NEG_INFINITY, 0.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.5, None),
        (&[-0.001, 0.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.08333333333333333, None),
        (&[0.0, 0.001], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.08333333333333333, None),
        (&[-0.0005, 0.0005], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.08333333333333333, None),
        (&[f64::NEG_INFINITY, 0.0005], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.5416666666666666, None),
        (&[f64::NEG_INFINITY, -0.0005], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.4583333333333333, None),
        (&[0.001, f64::INFINITY], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.4166666666666667, None),
        (&[f64::NEG_INFINITY, -0.001], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.4166666666666667, None),
        (&[1.0, 2.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.125, None),
        (&[1.5, 2.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.051879687409855414, None),
        (&[1.0, 8.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.16666666666666666, None),
        (&[1.0, 6.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.14937343753004825, None),
        (&[1.5, 6.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.07625312493990366, None),
        (&[-2.0, -1.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.125, None),
        (&[-2.0, -1.5], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.051879687409855456, None),
        (&[-8.0, -1.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.16666666666666666, None),
        (&[-6.0, -1.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.14937343753004817, None),
        (&[-6.0, -1.5], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.07625312493990362, None),
        (&[42.0, 3.1415], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[0.0, 0.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[1e-06, 1e-06], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[42.0, 42.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[-3.1, -3.1], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 0.0, None),
        (&[3.1415, f64::NAN], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", f64::NAN, None),
        (&[f64::NAN, 42.0], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", f64::NAN, None),
        (&[f64::NAN, f64::NAN], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", f64::NAN, None),
        (&[f64::NEG_INFINITY, f64::INFINITY], "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 1.0, None),
        (&[5.0, 10.0], "{{schema:-53 sum:5 count:4 custom_values:[5 10] buckets:[1 2 1]}}", 0.5, None),
        (&[f64::NEG_INFINITY, 0.7071067811865475], "{{schema:0 count:3 sum:NaN}}", 0.0, Some(FractionNote::NanObservationsExcluded)),
        (&[f64::NEG_INFINITY, 0.7071067811865475], "{{schema:0 count:15 sum:NaN buckets:[12]}}", 0.4, Some(FractionNote::NanObservationsExcluded)),
        (&[f64::NEG_INFINITY, f64::INFINITY], "{{schema:0 count:3 sum:NaN}}", 0.0, Some(FractionNote::NanObservationsExcluded)),
        (&[f64::NEG_INFINITY, f64::INFINITY], "{{schema:0 count:15 sum:NaN buckets:[12]}}", 0.8, Some(FractionNote::NanObservationsExcluded)),
    ]
}

/// (function, histogram, expected).
#[rustfmt::skip]
fn stat_cases() -> Vec<(&'static str, &'static str, f64)> {
    vec![
        ("count", "{{}}", 0.0),
        ("count", "{{schema:-53 custom_values:[-2 3]}}", 0.0),
        ("sum", "{{}}", 0.0),
        ("sum", "{{schema:-53 custom_values:[-2 3]}}", 0.0),
        ("avg", "{{}}", f64::NAN),
        ("avg", "{{schema:-53 custom_values:[-2 3]}}", f64::NAN),
        ("count", "{{schema:0 sum:5 count:4 buckets:[1 2 1]}}", 4.0),
        ("sum", "{{schema:0 sum:5 count:4 buckets:[1 2 1]}}", 5.0),
        ("avg", "{{schema:0 sum:5 count:4 buckets:[1 2 1]}}", 1.25),
        ("count", "{{schema:0 z_bucket:1 z_bucket_w:0.5 sum:0.25 count:1}}", 1.0),
        ("sum", "{{schema:0 z_bucket:1 z_bucket_w:0.5 sum:0.25 count:1}}", 0.25),
        ("avg", "{{schema:0 z_bucket:1 z_bucket_w:0.5 sum:0.25 count:1}}", 0.25),
        ("count", "{{schema:0 sum:-5 count:4 n_buckets:[1 2 1]}}", 4.0),
        ("sum", "{{schema:0 sum:-5 count:4 n_buckets:[1 2 1]}}", -5.0),
        ("avg", "{{schema:0 sum:-5 count:4 n_buckets:[1 2 1]}}", -1.25),
        ("count", "{{schema:0 sum:-4 count:4 n_buckets:[1 2 1]}}", 4.0),
        ("sum", "{{schema:0 sum:-4 count:4 n_buckets:[1 2 1]}}", -4.0),
        ("avg", "{{schema:0 sum:-4 count:4 n_buckets:[1 2 1]}}", -1.0),
        ("count", "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 24.0),
        ("sum", "{{schema:0 count:24 sum:100 z_bucket:4 z_bucket_w:0.001 buckets:[2 3 0 1 4] n_buckets:[2 3 0 1 4]}}", 100.0),
        ("stddev", "{{schema:2 count:4 sum:10 buckets:[1 0 0 0 1 0 0 1 1]}}", 1.0787993180043811),
        ("stdvar", "{{schema:2 count:4 sum:10 buckets:[1 0 0 0 1 0 0 1 1]}}", 1.163807968526718),
        ("stddev", "{{schema:8 count:10 sum:10 buckets:[1 2 3 4]}}", 0.0048960313898237465),
        ("stdvar", "{{schema:8 count:10 sum:10 buckets:[1 2 3 4]}}", 2.3971123370139447e-05),
        ("stddev", "{{schema:3 count:7 sum:62 z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]}}", 42.94723640026),
        ("stdvar", "{{schema:3 count:7 sum:62 z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]}}", 1844.4651144196398),
        ("stddev", "{{schema:0 count:10 sum:-112946 z_bucket:0 n_buckets:[0 0 1 1 1 0 1 1 0 0 3 0 0 0 1 0 0 1]}}", 27556.344499842),
        ("stdvar", "{{schema:0 count:10 sum:-112946 z_bucket:0 n_buckets:[0 0 1 1 1 0 1 1 0 0 3 0 0 0 1 0 0 1]}}", 759352122.1939945),
        ("stddev", "{{schema:0 count:10 sum:-100 z_bucket:0 n_buckets:[0 0 0 0 10]}}", 1.3137084989848),
        ("stdvar", "{{schema:0 count:10 sum:-100 z_bucket:0 n_buckets:[0 0 0 0 10]}}", 1.725830020304794),
        ("stddev", "{{schema:3 count:7 sum:NaN z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]}}", f64::NAN),
        ("stdvar", "{{schema:3 count:7 sum:NaN z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]}}", f64::NAN),
        ("stddev", "{{schema:3 count:7 sum:Inf z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]}}", f64::INFINITY),
        ("stdvar", "{{schema:3 count:7 sum:Inf z_bucket:1 buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ] n_buckets:[0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 ]}}", f64::INFINITY),
    ]
}

#[test]
fn quantiles_from_the_test_scripts() {
    for (q, input, want, note) in quantile_cases() {
        let r = histogram_quantile(q[0], &h(input));
        assert!(
            almost_equal(want, r.value, DEFAULT_EPSILON),
            "{q:?} {input}: {} != {want}",
            r.value
        );
        assert_eq!(r.note, note, "{q:?} {input}");
    }
}

#[test]
fn fractions_from_the_test_scripts() {
    for (bounds, input, want, note) in fraction_cases() {
        let r = histogram_fraction(bounds[0], bounds[1], &h(input));
        assert!(
            almost_equal(want, r.value, DEFAULT_EPSILON),
            "{bounds:?} {input}: {} != {want}",
            r.value
        );
        assert_eq!(r.note, note, "{bounds:?} {input}");
    }
}

#[test]
fn moments_from_the_test_scripts() {
    for (function, input, want) in stat_cases() {
        let x = h(input);
        let got = match function {
            "stddev" => histogram_stddev(&x),
            "stdvar" => histogram_stdvar(&x),
            "avg" => histogram_avg(&x),
            "count" => x.count,
            _ => x.sum,
        };
        assert!(
            almost_equal(want, got, DEFAULT_EPSILON),
            "{function} {input}: {got} != {want}"
        );
    }
}

#[test]
fn quantile_special_cases() {
    let x = h("{{schema:0 sum:5 count:4 buckets:[1 2 1]}}");
    assert_eq!(histogram_quantile(-1.0, &x).value, f64::NEG_INFINITY);
    assert_eq!(histogram_quantile(2.0, &x).value, f64::INFINITY);
    assert!(histogram_quantile(f64::NAN, &x).value.is_nan());
    assert!(histogram_quantile(0.5, &h("{{}}")).value.is_nan());
    // A quantile in a run of empty buckets is the lower bound of the next populated bucket.
    let gap = h("{{schema:0 count:2 sum:3 buckets:[1 0 0 1]}}");
    assert_eq!(histogram_quantile(0.5, &gap).value, 4.0);
    assert_eq!(
        histogram_quantile(0.49, &gap).value,
        0.5f64.powf(1.0 - 0.98)
    );
    // Custom buckets: the +Inf bucket answers with its lower bound, a -Inf bucket ending at or
    // below zero with its upper bound.
    let custom = h("{{schema:-53 count:10 custom_values:[-1 5] buckets:[2 3 5]}}");
    assert_eq!(histogram_quantile(0.9, &custom).value, 5.0);
    assert_eq!(histogram_quantile(0.1, &custom).value, -1.0);
    assert_eq!(histogram_quantile(0.3, &custom).value, 1.0);
}

#[test]
fn fraction_special_cases() {
    let x = h("{{schema:0 sum:5 count:4 buckets:[1 2 1]}}");
    assert_eq!(histogram_fraction(2.0, 2.0, &x).value, 0.0);
    assert_eq!(histogram_fraction(3.0, 2.0, &x).value, 0.0);
    assert!(histogram_fraction(f64::NAN, 1.0, &x).value.is_nan());
    assert!(histogram_fraction(0.0, 1.0, &h("{{}}")).value.is_nan());
    assert_eq!(
        histogram_fraction(f64::NEG_INFINITY, f64::INFINITY, &x).value,
        1.0
    );
    assert_eq!(histogram_fraction(0.5, 1.0, &x).value, 0.25);
}

#[test]
fn note_texts() {
    assert_eq!(
        QuantileNote::NanObservationsResultNan.text(),
        "input to histogram_quantile has NaN observations, result is NaN"
    );
    assert_eq!(
        QuantileNote::NanObservationsSkewed.text(),
        "input to histogram_quantile has NaN observations, result is skewed higher"
    );
    assert_eq!(
        FractionNote::NanObservationsExcluded.text(),
        "input to histogram_fraction has NaN observations, which are excluded from all fractions"
    );
}
