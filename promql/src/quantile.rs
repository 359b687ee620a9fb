//! Quantiles, fractions and moments of histograms, and compensated summation.
//!
//! - [`bucket_quantile`] and [`bucket_fraction`]: `histogram_quantile` and `histogram_fraction`
//!   over classic histograms, given as (upper bound, cumulative count) buckets;
//! - [`histogram_quantile`] and [`histogram_fraction`]: the same over native histograms, with
//!   logarithmic interpolation in exponential buckets and linear interpolation in custom
//!   buckets and the zero bucket;
//! - [`histogram_stddev`], [`histogram_stdvar`], [`histogram_avg`]: estimates from the buckets;
//! - [`kahan_sum_inc`], [`kahan_sum_dec`], [`FloatMean`]: Kahan–Babuška summation as
//!   Prometheus uses it for `sum`, `avg` and the `*_over_time` functions;
//! - [`quantile`]: the φ-quantile of plain values (`quantile`, `quantile_over_time`).
//!
//! Where Prometheus attaches an annotation, the result carries a [`QuantileNote`] or
//! [`FractionNote`]; the evaluator words it with the metric name and the position.

use super::histogram::{Bucket, FloatHistogram, almost_equal};

#[path = "quantile/classic.rs"]
mod classic;
#[path = "quantile/native.rs"]
mod native;
#[path = "quantile/stats.rs"]
mod stats;

#[cfg(test)]
#[path = "quantile/tests.rs"]
mod tests;

pub use classic::{ClassicBucket, bucket_fraction, bucket_quantile};
pub use native::{histogram_fraction, histogram_quantile};
pub use stats::{
    FloatMean, histogram_avg, histogram_stddev, histogram_stdvar, kahan_sum_dec, kahan_sum_inc,
    quantile,
};

/// A quantile and what Prometheus would annotate about it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantileResult {
    pub value: f64,
    pub note: Option<QuantileNote>,
    /// Classic buckets only: differences between adjacent buckets small enough to be rounding
    /// noise were ignored. Prometheus does not annotate this.
    pub small_deltas_ignored: bool,
}

/// The conditions Prometheus annotates on `histogram_quantile`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QuantileNote {
    /// Classic buckets whose cumulative counts decreased were made monotonic (info). The
    /// bounds are the lowest and highest `le` whose count was raised, `max_diff` the largest
    /// raise. Prometheus: `input to histogram_quantile needed to be fixed for monotonicity (see
    /// ...) for metric name "...", from buckets <min> to <max>, with a max diff of <diff>, over
    /// <n> samples from <t1> to <t2>`.
    ForcedMonotonicity {
        min_bucket: f64,
        max_bucket: f64,
        max_diff: f64,
    },
    /// A native histogram with NaN observations, and the quantile among them (info):
    /// "input to histogram_quantile has NaN observations, result is NaN".
    NanObservationsResultNan,
    /// A native histogram with NaN observations; the quantile was found among the other
    /// observations but is skewed (info): "input to histogram_quantile has NaN observations,
    /// result is skewed higher".
    NanObservationsSkewed,
}

impl QuantileNote {
    /// Prometheus' message without the metric name, details and position.
    pub fn text(&self) -> &'static str {
        match self {
            QuantileNote::ForcedMonotonicity { .. } => {
                "input to histogram_quantile needed to be fixed for monotonicity (see https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile)"
            }
            QuantileNote::NanObservationsResultNan => {
                "input to histogram_quantile has NaN observations, result is NaN"
            }
            QuantileNote::NanObservationsSkewed => {
                "input to histogram_quantile has NaN observations, result is skewed higher"
            }
        }
    }
}

/// A fraction and what Prometheus would annotate about it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FractionResult {
    pub value: f64,
    pub note: Option<FractionNote>,
}

/// The conditions Prometheus annotates on `histogram_fraction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FractionNote {
    /// The histogram has NaN observations; they count in the denominator only (info):
    /// "input to histogram_fraction has NaN observations, which are excluded from all
    /// fractions".
    NanObservationsExcluded,
}

impl FractionNote {
    /// Prometheus' message without the metric name and position.
    pub fn text(&self) -> &'static str {
        match self {
            FractionNote::NanObservationsExcluded => {
                "input to histogram_fraction has NaN observations, which are excluded from all fractions"
            }
        }
    }
}
