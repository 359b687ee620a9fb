//! Quantiles and fractions of native histograms.
//!
//! Within an exponential bucket, observations are assumed to spread as they would fill the
//! buckets of a histogram with a higher resolution: the interpolation is linear in the
//! logarithm of the value. Custom buckets and the zero bucket interpolate linearly. The zero
//! bucket is taken to start at 0 when the histogram has only positive buckets (end at 0 with
//! only negative ones); the lowest custom bucket starts at 0 if its bound is positive.
//!
//! NaN observations count in `count` but in no bucket; a NaN `sum` gives them away.

use super::{Bucket, FloatHistogram, FractionNote, FractionResult, QuantileNote, QuantileResult};

/// The φ-quantile `q` of `h`. NaN for an empty histogram or a NaN `q`; `-Inf` for `q < 0`,
/// `+Inf` for `q > 1`. With NaN observations (NaN sum), a quantile among them is NaN and any
/// other may be skewed; both are annotated.
pub fn histogram_quantile(q: f64, h: &FloatHistogram) -> QuantileResult {
    let done = |value: f64, note: Option<QuantileNote>| QuantileResult {
        value,
        note,
        small_deltas_ignored: false,
    };
    if q < 0.0 {
        return done(f64::NEG_INFINITY, None);
    }
    if q > 1.0 {
        return done(f64::INFINITY, None);
    }
    if h.count == 0.0 || q.is_nan() {
        return done(f64::NAN, None);
    }
    // With NaN observations only the ascending walk finds the right rank.
    let forward = h.sum.is_nan() || q < 0.5;
    let mut it = if forward {
        h.all_buckets()
    } else {
        h.all_buckets_reverse()
    };
    let mut rank = if forward {
        q * h.count
    } else {
        (1.0 - q) * h.count
    };
    let mut count = 0.0;
    let mut bucket = Bucket {
        lower: 0.0,
        upper: 0.0,
        lower_inclusive: false,
        upper_inclusive: false,
        count: 0.0,
        index: 0,
    };
    for b in it.by_ref() {
        bucket = b;
        if b.count == 0.0 {
            continue;
        }
        count += b.count;
        if count >= rank {
            break;
        }
    }
    if h.uses_custom_buckets() {
        if bucket.lower == f64::NEG_INFINITY {
            if bucket.upper <= 0.0 {
                return done(bucket.upper, None);
            }
            bucket.lower = 0.0;
        } else if bucket.upper == f64::INFINITY {
            return done(bucket.lower, None);
        }
    } else if bucket.lower < 0.0 && bucket.upper > 0.0 {
        narrow_zero_bucket(&mut bucket, h);
    }
    // Rounding can push the running count past the total.
    if count > h.count {
        count = h.count;
    }
    if count < rank {
        if h.sum.is_nan() {
            return done(f64::NAN, Some(QuantileNote::NanObservationsResultNan));
        }
        return done(bucket.upper, None);
    }
    if forward {
        rank -= count - bucket.count;
    } else {
        rank = count - rank;
    }
    let mut note = None;
    if h.sum.is_nan() {
        let in_buckets = count + it.map(|b| b.count).sum::<f64>();
        if in_buckets < h.count {
            note = Some(QuantileNote::NanObservationsSkewed);
        }
    }
    let fraction = rank / bucket.count;
    let value = if h.uses_custom_buckets() || (bucket.lower <= 0.0 && bucket.upper >= 0.0) {
        bucket.lower + (bucket.upper - bucket.lower) * fraction
    } else {
        let log_lower = bucket.lower.abs().log2();
        let log_upper = bucket.upper.abs().log2();
        if bucket.lower > 0.0 {
            (log_lower + (log_upper - log_lower) * fraction).exp2()
        } else {
            -(log_upper + (log_lower - log_upper) * (1.0 - fraction)).exp2()
        }
    };
    done(value, note)
}

/// The fraction of the observations of `h` between `lower` and `upper`, interpolated as for
/// [`histogram_quantile`]. NaN for an empty histogram or NaN bounds, 0 if `lower >= upper`.
/// NaN observations count in the denominator only (annotated).
pub fn histogram_fraction(lower: f64, upper: f64, h: &FloatHistogram) -> FractionResult {
    let plain = |value: f64| FractionResult { value, note: None };
    if h.count == 0.0 || lower.is_nan() || upper.is_nan() {
        return plain(f64::NAN);
    }
    if lower >= upper {
        return plain(0.0);
    }
    let (mut rank, mut lower_rank, mut upper_rank) = (0.0, 0.0, 0.0);
    let (mut lower_set, mut upper_set) = (false, false);
    let mut in_buckets = 0.0;
    let mut it = h.all_buckets();
    for mut b in it.by_ref() {
        in_buckets += b.count;
        let mut zero_bucket = false;
        if b.lower <= 0.0 && b.upper >= 0.0 {
            zero_bucket = true;
            narrow_zero_bucket(&mut b, h);
        }
        let linear = h.uses_custom_buckets() || zero_bucket;
        let interpolate = |v: f64| {
            if linear {
                if b.lower == f64::NEG_INFINITY {
                    return b.count;
                }
                rank + b.count * (v - b.lower) / (b.upper - b.lower)
            } else {
                let (log_lower, log_upper, log_v) =
                    (b.lower.abs().log2(), b.upper.abs().log2(), v.abs().log2());
                let fraction = if v > 0.0 {
                    (log_v - log_lower) / (log_upper - log_lower)
                } else {
                    1.0 - (log_v - log_upper) / (log_lower - log_upper)
                };
                rank + b.count * fraction
            }
        };
        if !lower_set && b.lower >= lower {
            lower_rank = rank;
            lower_set = true;
        }
        if !upper_set && b.lower >= upper {
            upper_rank = rank;
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        if !lower_set && b.lower < lower && b.upper > lower {
            lower_rank = interpolate(lower);
            lower_set = true;
        }
        if !upper_set && b.lower < upper && b.upper > upper {
            upper_rank = interpolate(upper);
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        rank += b.count;
    }
    let mut note = None;
    let count = if h.sum.is_nan() {
        in_buckets += it.map(|b| b.count).sum::<f64>();
        if in_buckets < h.count {
            note = Some(FractionNote::NanObservationsExcluded);
        }
        in_buckets
    } else {
        h.count
    };
    if !lower_set || lower_rank > count {
        lower_rank = count;
    }
    if !upper_set || upper_rank > count {
        upper_rank = count;
    }
    FractionResult {
        value: (upper_rank - lower_rank) / h.count,
        note,
    }
}

/// A bucket around zero starts at 0 in a histogram with only positive buckets, and ends at 0
/// in one with only negative buckets.
fn narrow_zero_bucket(b: &mut Bucket, h: &FloatHistogram) {
    if h.negative_buckets.is_empty() && !h.positive_buckets.is_empty() {
        b.lower = 0.0;
    } else if h.positive_buckets.is_empty() && !h.negative_buckets.is_empty() {
        b.upper = 0.0;
    }
}
