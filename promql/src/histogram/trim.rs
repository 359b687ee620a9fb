//! The trim operators: `h </ x` keeps the observations below `x`, `h >/ x` those above.
//!
//! A bucket entirely on the kept side stays, one entirely on the other side is emptied, and a
//! bucket the cutoff falls into keeps the share of its count that interpolation assigns to the
//! kept side: logarithmic for exponential buckets, linear for custom buckets and the zero
//! bucket. Count and sum are re-estimated from the kept buckets, each bucket contributing its
//! kept count times a representative value of its kept part (geometric mean of the bounds for
//! exponential buckets, arithmetic mean otherwise). If nothing is removed, the histogram is
//! returned unchanged, sum included.
//!
//! Custom buckets unbounded on one side follow Prometheus' rules: observations in a `+Inf`
//! bucket count as `+Inf` (represented by the larger of its lower bound and the cutoff), those
//! in a `-Inf` bucket ending at or below zero as `-Inf` (represented by the smaller of its upper
//! bound and the cutoff); a `-Inf` bucket ending above zero is taken to start at zero, except
//! that `>/` with a negative cutoff drops it. These rules reproduce every trim case of
//! Prometheus' `native_histograms.test`.

use super::FloatHistogram;
use super::iter::Bucket;

/// Which observations a trim operator keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrimSide {
    /// `</`: keep the observations below the cutoff.
    KeepBelow,
    /// `>/`: keep the observations above the cutoff.
    KeepAbove,
}

/// The kept part of one bucket: count and representative value.
struct Kept {
    count: f64,
    value: f64,
}

impl FloatHistogram {
    /// The histogram with the observations on the far side of `cutoff` removed. A NaN cutoff
    /// removes nothing.
    pub fn trim(&self, side: TrimSide, cutoff: f64) -> FloatHistogram {
        if cutoff.is_nan() {
            return self.clone();
        }
        let mut out = self.clone();
        let mut removed = false;
        let mut count = 0.0;
        let mut sum = 0.0;
        let mut account = |bucket: &Bucket, kept: &Kept| -> f64 {
            if kept.count != bucket.count {
                removed = true;
            }
            if kept.count != 0.0 {
                count += kept.count;
                sum += kept.count * kept.value;
            }
            kept.count
        };

        if self.uses_custom_buckets() {
            let buckets: Vec<Bucket> = self.positive_buckets().collect();
            out.positive_buckets = buckets
                .iter()
                .map(|b| account(b, &trim_custom(b, side, cutoff)))
                .collect();
        } else {
            let zero = self.zero_bucket_range();
            let zero_kept = trim_linear(&zero, side, cutoff);
            out.zero_count = account(&zero, &zero_kept);
            for positive in [true, false] {
                let kept: Vec<f64> = self
                    .side_buckets(positive, self.schema)
                    .map(|b| self.clamp_to_zero_bucket(b))
                    .map(|b| account(&b, &trim_exponential(&b, side, cutoff)))
                    .collect();
                if positive {
                    out.positive_buckets = kept;
                } else {
                    out.negative_buckets = kept;
                }
            }
        }
        if !removed {
            return self.clone();
        }
        out.count = count;
        out.sum = sum;
        out.compact(0);
        out
    }

    /// The zero bucket, with its range narrowed to `[0, threshold]` (or `[-threshold, 0]`)
    /// when the histogram has only positive (or only negative) buckets.
    pub(super) fn zero_bucket_range(&self) -> Bucket {
        let mut zero = self.zero_bucket();
        if self.negative_buckets.is_empty() && !self.positive_buckets.is_empty() {
            zero.lower = 0.0;
        } else if self.positive_buckets.is_empty() && !self.negative_buckets.is_empty() {
            zero.upper = 0.0;
        }
        zero
    }
}

/// Linear interpolation within `[lower, upper]`.
fn trim_linear(b: &Bucket, side: TrimSide, cutoff: f64) -> Kept {
    let (lower, upper) = (b.lower, b.upper);
    let full = Kept {
        count: b.count,
        value: (lower + upper) / 2.0,
    };
    let none = Kept {
        count: 0.0,
        value: 0.0,
    };
    match side {
        TrimSide::KeepBelow if cutoff >= upper => full,
        TrimSide::KeepBelow if cutoff <= lower => none,
        TrimSide::KeepBelow => Kept {
            count: b.count * (cutoff - lower) / (upper - lower),
            value: (lower + cutoff) / 2.0,
        },
        TrimSide::KeepAbove if cutoff <= lower => full,
        TrimSide::KeepAbove if cutoff >= upper => none,
        TrimSide::KeepAbove => Kept {
            count: b.count * (upper - cutoff) / (upper - lower),
            value: (cutoff + upper) / 2.0,
        },
    }
}

/// Logarithmic interpolation within an exponential bucket (entirely positive or entirely
/// negative), the representative value being the geometric mean of the kept range.
fn trim_exponential(b: &Bucket, side: TrimSide, cutoff: f64) -> Kept {
    let (lower, upper) = (b.lower, b.upper);
    let sign = if upper <= 0.0 { -1.0 } else { 1.0 };
    let geometric = |a: f64, z: f64| sign * (a * z).sqrt();
    let full = Kept {
        count: b.count,
        value: geometric(lower, upper),
    };
    let none = Kept {
        count: 0.0,
        value: 0.0,
    };
    let inside = cutoff > lower && cutoff < upper;
    // Share of the bucket below the cutoff, on a logarithmic scale of the values.
    let below_share = || {
        let (l, u, c) = (lower.abs().log2(), upper.abs().log2(), cutoff.abs().log2());
        if sign > 0.0 {
            (c - l) / (u - l)
        } else {
            (l - c) / (l - u)
        }
    };
    match side {
        TrimSide::KeepBelow if cutoff >= upper => full,
        TrimSide::KeepBelow if !inside => none,
        TrimSide::KeepBelow => Kept {
            count: b.count * below_share(),
            value: geometric(lower, cutoff),
        },
        TrimSide::KeepAbove if cutoff <= lower => full,
        TrimSide::KeepAbove if !inside => none,
        TrimSide::KeepAbove => Kept {
            count: b.count * (1.0 - below_share()),
            value: geometric(cutoff, upper),
        },
    }
}

/// A custom bucket, with Prometheus' treatment of the `-Inf` and `+Inf` buckets.
fn trim_custom(b: &Bucket, side: TrimSide, cutoff: f64) -> Kept {
    let keep_all_or_nothing = |keep: bool, value: f64| Kept {
        count: if keep { b.count } else { 0.0 },
        value,
    };
    let (lower, upper) = (b.lower, b.upper);
    match (lower == f64::NEG_INFINITY, upper == f64::INFINITY) {
        // The only bucket: (-Inf, +Inf].
        (true, true) => match side {
            TrimSide::KeepBelow => keep_all_or_nothing(cutoff == f64::INFINITY, 0.0),
            TrimSide::KeepAbove => keep_all_or_nothing(cutoff == f64::NEG_INFINITY, 0.0),
        },
        // (lower, +Inf]: observations at +Inf.
        (false, true) => match side {
            TrimSide::KeepBelow => keep_all_or_nothing(cutoff == f64::INFINITY, lower),
            TrimSide::KeepAbove => keep_all_or_nothing(cutoff != f64::INFINITY, lower.max(cutoff)),
        },
        // (-Inf, upper] ending at or below zero: observations at -Inf.
        (true, false) if upper <= 0.0 => match side {
            TrimSide::KeepBelow => {
                keep_all_or_nothing(cutoff != f64::NEG_INFINITY, upper.min(cutoff))
            }
            TrimSide::KeepAbove => keep_all_or_nothing(cutoff == f64::NEG_INFINITY, upper),
        },
        // (-Inf, upper] ending above zero: taken as [0, upper].
        (true, false) => {
            if side == TrimSide::KeepAbove && cutoff < 0.0 {
                return keep_all_or_nothing(cutoff == f64::NEG_INFINITY, upper / 2.0);
            }
            let zero_based = Bucket { lower: 0.0, ..*b };
            trim_linear(&zero_based, side, cutoff)
        }
        (false, false) => trim_linear(b, side, cutoff),
    }
}
