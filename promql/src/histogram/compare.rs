//! Comparing histograms: exact equality (PromQL's `==` between histograms and `changes()`), and
//! the tolerant comparison Prometheus' test runner applies to expected results.

use super::FloatHistogram;
use super::layout::same_layout;

/// The tolerance of Prometheus' test runner.
pub const DEFAULT_EPSILON: f64 = 0.000001;

/// Prometheus' `almost.Equal`: true if both are NaN, if they are equal, or if they differ by
/// less than `epsilon` relative to the sum of their magnitudes (by less than `epsilon` times the
/// smallest normal number when either is zero or both are tiny).
pub fn almost_equal(a: f64, b: f64, epsilon: f64) -> bool {
    if a.is_nan() && b.is_nan() {
        return true;
    }
    if a == b {
        return true;
    }
    let abs_sum = a.abs() + b.abs();
    let diff = (a - b).abs();
    if a == 0.0 || b == 0.0 || abs_sum < f64::MIN_POSITIVE {
        return diff < epsilon * f64::MIN_POSITIVE;
    }
    diff / abs_sum.min(f64::MAX) < epsilon
}

impl FloatHistogram {
    /// Exact equality of the data: schema, counts, sum and bucket values compared bit for bit,
    /// custom bounds and zero threshold by value, and the same bucket layout (spans may be cut
    /// differently). Fields the schema does not use are compared too. The counter reset hint is
    /// not compared.
    pub fn equals(&self, other: &FloatHistogram) -> bool {
        let bits_eq = |a: &[f64], b: &[f64]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
        };
        self.schema == other.schema
            && self.count.to_bits() == other.count.to_bits()
            && self.sum.to_bits() == other.sum.to_bits()
            && (!self.uses_custom_buckets() || self.custom_values[..] == other.custom_values[..])
            && self.zero_threshold == other.zero_threshold
            && self.zero_count.to_bits() == other.zero_count.to_bits()
            && same_layout(&self.negative_spans, &other.negative_spans)
            && bits_eq(&self.negative_buckets, &other.negative_buckets)
            && same_layout(&self.positive_spans, &other.positive_spans)
            && bits_eq(&self.positive_buckets, &other.positive_buckets)
    }

    /// Whether `actual` matches `self` as an expected test result: both compacted, then schema,
    /// custom bounds, zero threshold and layout equal, count, sum, zero count and bucket values
    /// within [`DEFAULT_EPSILON`]. The counter reset hint counts only if `compare_hint` is set
    /// (the runner sets it when the expected histogram states a hint).
    pub fn matches_expected(&self, actual: &FloatHistogram, compare_hint: bool) -> bool {
        let mut exp = self.clone();
        exp.compact(0);
        let mut act = actual.clone();
        act.compact(0);
        let close = |a: f64, b: f64| almost_equal(a, b, DEFAULT_EPSILON);
        let all_close = |a: &[f64], b: &[f64]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| close(*x, *y))
        };
        exp.schema == act.schema
            && close(exp.count, act.count)
            && close(exp.sum, act.sum)
            && (!exp.uses_custom_buckets() || exp.custom_values[..] == act.custom_values[..])
            && exp.zero_threshold == act.zero_threshold
            && close(exp.zero_count, act.zero_count)
            && same_layout(&exp.negative_spans, &act.negative_spans)
            && all_close(&exp.negative_buckets, &act.negative_buckets)
            && same_layout(&exp.positive_spans, &act.positive_spans)
            && all_close(&exp.positive_buckets, &act.positive_buckets)
            && (!compare_hint || exp.counter_reset_hint == act.counter_reset_hint)
    }
}
