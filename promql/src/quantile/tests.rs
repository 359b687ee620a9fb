//! Unit tests of the quantile module.

use super::super::histogram::{ClassicHistogram, DEFAULT_EPSILON};
use super::*;

#[path = "tests/classic.rs"]
mod classic;
#[path = "tests/native.rs"]
mod native;

#[test]
fn kahan_sum_compensates() {
    let mut sum_c = (0.0, 0.0);
    for v in [1.0, 1e100, 1.0, -1e100] {
        sum_c = kahan_sum_inc(v, sum_c.0, sum_c.1);
    }
    assert_eq!(sum_c.0 + sum_c.1, 2.0);
    let naive: f64 = [1.0, 1e100, 1.0, -1e100].iter().sum();
    assert_eq!(naive, 0.0);
    let (s, c) = kahan_sum_inc(f64::INFINITY, 1.0, 0.5);
    assert_eq!((s, c), (f64::INFINITY, 0.0));
    let mut d = (1e100, 0.0);
    for v in [-1.0, 1e100, -1.0] {
        d = kahan_sum_dec(v, d.0, d.1);
    }
    assert_eq!(d.0 + d.1, 2.0);
}

#[test]
fn float_mean_direct_and_incremental() {
    let mut m = FloatMean::new(1.0);
    for v in [1e100, 1.0, -1e100] {
        m.add(v);
    }
    assert_eq!(m.count(), 4.0);
    assert_eq!(m.finish(), 0.5);
    let mut big = FloatMean::new(f64::MAX);
    big.add(f64::MAX);
    big.add(-f64::MAX);
    assert!(almost_equal(big.finish(), f64::MAX / 3.0, DEFAULT_EPSILON));
    assert_eq!(FloatMean::new(7.0).finish(), 7.0);
}

#[test]
fn quantile_of_values() {
    let mut v = [3.0, 1.0, 2.0, 4.0];
    assert_eq!(quantile(0.5, &mut v), 2.5);
    assert_eq!(quantile(0.0, &mut v), 1.0);
    assert_eq!(quantile(1.0, &mut v), 4.0);
    assert_eq!(quantile(0.75, &mut v), 3.25);
    assert!(quantile(0.5, &mut []).is_nan());
    assert!(quantile(f64::NAN, &mut v).is_nan());
    assert_eq!(quantile(-1.0, &mut v), f64::NEG_INFINITY);
    assert_eq!(quantile(2.0, &mut v), f64::INFINITY);
    let mut with_nan = [2.0, f64::NAN, 1.0];
    assert!(quantile(0.0, &mut with_nan).is_nan());
    assert_eq!(quantile(1.0, &mut with_nan), 2.0);
}
