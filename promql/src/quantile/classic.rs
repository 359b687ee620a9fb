//! Quantiles and fractions of classic histograms: buckets given as upper bound (`le`) and
//! cumulative count, one of them `+Inf`.

use super::{QuantileNote, QuantileResult, almost_equal};

/// Relative differences between adjacent cumulative counts below this are taken as rounding
/// noise (as in query-sharded sums) and smoothed over without an annotation.
const SMALL_DELTA_TOLERANCE: f64 = 1e-12;

/// One classic bucket: its upper bound (`le`) and cumulative count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassicBucket {
    pub upper_bound: f64,
    pub count: f64,
}

impl ClassicBucket {
    pub fn new(upper_bound: f64, count: f64) -> ClassicBucket {
        ClassicBucket { upper_bound, count }
    }
}

/// The φ-quantile `q` of a classic histogram, interpolating linearly within the bucket the
/// rank falls into.
///
/// The lowest bucket starts at 0 if its bound is positive (and its bound is the answer if
/// not); a quantile in the `+Inf` bucket is the second-highest bound. Buckets are sorted and
/// buckets with equal bounds merged; decreasing counts are raised to make them monotonic
/// (annotated). NaN for a NaN `q`, no `+Inf` bucket, fewer than two buckets or no observations;
/// `-Inf` for `q < 0`, `+Inf` for `q > 1`.
pub fn bucket_quantile(q: f64, buckets: &[ClassicBucket]) -> QuantileResult {
    let plain = |value: f64| QuantileResult {
        value,
        note: None,
        small_deltas_ignored: false,
    };
    if q.is_nan() {
        return plain(f64::NAN);
    }
    if q < 0.0 {
        return plain(f64::NEG_INFINITY);
    }
    if q > 1.0 {
        return plain(f64::INFINITY);
    }
    let mut buckets = sorted_coalesced(buckets);
    if buckets
        .last()
        .is_none_or(|b| b.upper_bound != f64::INFINITY)
    {
        return plain(f64::NAN);
    }
    let fix = make_monotonic(&mut buckets);
    let result = |value: f64| QuantileResult {
        value,
        note: fix.forced.then_some(QuantileNote::ForcedMonotonicity {
            min_bucket: fix.min_bucket,
            max_bucket: fix.max_bucket,
            max_diff: fix.max_diff,
        }),
        small_deltas_ignored: fix.fixed_precision,
    };
    let n = buckets.len();
    if n < 2 {
        return result(f64::NAN);
    }
    let observations = buckets[n - 1].count;
    if observations == 0.0 {
        return result(f64::NAN);
    }
    let rank = q * observations;
    let b = buckets[..n - 1].partition_point(|bucket| bucket.count < rank);
    if b == n - 1 {
        return result(buckets[n - 2].upper_bound);
    }
    if b == 0 && buckets[0].upper_bound <= 0.0 {
        return result(buckets[0].upper_bound);
    }
    let (start, count, rank) = if b > 0 {
        (
            buckets[b - 1].upper_bound,
            buckets[b].count - buckets[b - 1].count,
            rank - buckets[b - 1].count,
        )
    } else {
        (0.0, buckets[0].count, rank)
    };
    let end = buckets[b].upper_bound;
    result(start + (end - start) * (rank / count))
}

/// The fraction of observations between `lower` and `upper` in a classic histogram,
/// interpolating linearly (the lowest bucket starting at 0 if its bound is positive, at `-Inf`
/// otherwise, where nothing is interpolated). NaN without a `+Inf` bucket, without observations
/// or for NaN bounds; 0 if `lower >= upper`.
pub fn bucket_fraction(lower: f64, upper: f64, buckets: &[ClassicBucket]) -> f64 {
    let buckets = sorted_coalesced(buckets);
    let Some(last) = buckets.last() else {
        return f64::NAN;
    };
    if last.upper_bound != f64::INFINITY {
        return f64::NAN;
    }
    let count = last.count;
    if count == 0.0 || lower.is_nan() || upper.is_nan() {
        return f64::NAN;
    }
    if lower >= upper {
        return 0.0;
    }
    let (mut rank, mut lower_rank, mut upper_rank) = (0.0, 0.0, 0.0);
    let (mut lower_set, mut upper_set) = (false, false);
    let mut lower_bound = if buckets[0].upper_bound <= 0.0 {
        f64::NEG_INFINITY
    } else {
        0.0
    };
    for (i, b) in buckets.iter().enumerate() {
        if i > 0 {
            lower_bound = buckets[i - 1].upper_bound;
        }
        let upper_bound = b.upper_bound;
        let interpolate = |v: f64| {
            if lower_bound == f64::NEG_INFINITY {
                b.count
            } else {
                rank + (b.count - rank) * (v - lower_bound) / (upper_bound - lower_bound)
            }
        };
        if !lower_set && lower_bound >= lower {
            lower_rank = rank;
            lower_set = true;
        }
        if !upper_set && lower_bound >= upper {
            upper_rank = rank;
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        if !lower_set && lower_bound < lower && upper_bound > lower {
            lower_rank = interpolate(lower);
            lower_set = true;
        }
        if !upper_set && lower_bound < upper && upper_bound > upper {
            upper_rank = interpolate(upper);
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        rank = b.count;
    }
    if !lower_set || lower_rank > count {
        lower_rank = count;
    }
    if !upper_set || upper_rank > count {
        upper_rank = count;
    }
    (upper_rank - lower_rank) / count
}

/// The buckets sorted by bound, buckets with equal bounds summed into one.
fn sorted_coalesced(buckets: &[ClassicBucket]) -> Vec<ClassicBucket> {
    let mut sorted = buckets.to_vec();
    sorted.sort_by(|a, b| a.upper_bound.total_cmp(&b.upper_bound));
    let mut out: Vec<ClassicBucket> = Vec::with_capacity(sorted.len());
    for b in sorted {
        match out.last_mut() {
            Some(last) if last.upper_bound == b.upper_bound => last.count += b.count,
            _ => out.push(b),
        }
    }
    out
}

struct MonotonicityFix {
    forced: bool,
    fixed_precision: bool,
    min_bucket: f64,
    max_bucket: f64,
    max_diff: f64,
}

/// Smooths over rounding noise between adjacent counts, then raises every count below the
/// highest count so far to that count.
fn make_monotonic(buckets: &mut [ClassicBucket]) -> MonotonicityFix {
    let mut fix = MonotonicityFix {
        forced: false,
        fixed_precision: false,
        min_bucket: f64::INFINITY,
        max_bucket: f64::NEG_INFINITY,
        max_diff: 0.0,
    };
    let Some(first) = buckets.first() else {
        return fix;
    };
    let mut prev = first.count;
    for b in buckets.iter_mut().skip(1) {
        let curr = b.count;
        if curr == prev {
            continue;
        }
        if almost_equal(prev, curr, SMALL_DELTA_TOLERANCE) {
            b.count = prev;
            fix.fixed_precision = true;
            continue;
        }
        if curr < prev {
            b.count = prev;
            fix.forced = true;
            fix.min_bucket = fix.min_bucket.min(b.upper_bound);
            fix.max_bucket = fix.max_bucket.max(b.upper_bound);
            fix.max_diff = fix.max_diff.max(prev - curr);
            continue;
        }
        prev = curr;
    }
    fix
}
