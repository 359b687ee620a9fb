//! Native float histograms, as PromQL evaluates them: exponential bucket schemas (-4 to 8)
//! and custom buckets (schema -53, "NHCB"), with absolute bucket counts.
//!
//! This module owns the value type [`FloatHistogram`] and every operation Prometheus' engine
//! applies to it: addition and subtraction (merging spans, lowering to the coarser schema,
//! widening the zero bucket, reconciling custom bounds), Kahan-compensated addition for
//! aggregations, scaling, compaction, counter-reset detection, resolution reduction, bucket
//! iteration, the trim operators `</` and `>/`, and the text forms of Prometheus' test files.
//!
//! Guarantees:
//! - no operation panics, whatever the input; malformed span/bucket pairs are read as far as
//!   they are consistent;
//! - the argument of a binary operation is never modified; the receiver is;
//! - results are the numbers Prometheus computes (up to floating-point summation order in a few
//!   places, noted where it matters), and the same bucket layout once compacted. Span
//!   boundaries of uncompacted results may be drawn differently from Prometheus (adjacent spans
//!   are merged), which no comparison here observes. Bucket bounds of schemas 1 to 8 are the
//!   correctly rounded powers of two, which can differ from Prometheus' precomputed table in
//!   the last digit (see `bounds.rs`).
//!
//! Annotations are not formatted here: operations report the condition ([`AddOutcome`],
//! [`HistogramError`]) and the evaluator words it with the metric name and position.

use std::sync::Arc;

use super::quantile::{kahan_sum_dec, kahan_sum_inc};

#[path = "histogram/accumulate.rs"]
mod accumulate;
#[path = "histogram/arith.rs"]
mod arith;
#[path = "histogram/bounds.rs"]
mod bounds;
#[path = "histogram/compare.rs"]
mod compare;
#[path = "histogram/iter.rs"]
mod iter;
#[path = "histogram/layout.rs"]
mod layout;
#[path = "histogram/nhcb.rs"]
mod nhcb;
#[path = "histogram/notation.rs"]
mod notation;
#[path = "histogram/ops.rs"]
mod ops;
#[path = "histogram/reset.rs"]
mod reset;
#[path = "histogram/text.rs"]
mod text;
#[path = "histogram/trim.rs"]
mod trim;

#[cfg(test)]
#[path = "histogram/tests.rs"]
mod tests;

pub use accumulate::{HistogramMean, HistogramSum};
pub use compare::{DEFAULT_EPSILON, almost_equal};
pub use iter::{Bucket, BucketIter};
pub use nhcb::ClassicHistogram;
pub use notation::HistogramFields;
pub use text::format_go_float;
pub use trim::TrimSide;

/// The schema number of histograms with custom bucket bounds (NHCB).
pub const CUSTOM_BUCKETS_SCHEMA: i32 = -53;
/// The lowest exponential schema (buckets growing by a factor of 2^16).
pub const EXPONENTIAL_SCHEMA_MIN: i32 = -4;
/// The highest exponential schema (256 buckets per power of two).
pub const EXPONENTIAL_SCHEMA_MAX: i32 = 8;

/// Whether `schema` is the custom-buckets schema.
pub fn is_custom_buckets_schema(schema: i32) -> bool {
    schema == CUSTOM_BUCKETS_SCHEMA
}

/// Whether `schema` is one of the exponential schemas.
pub fn is_exponential_schema(schema: i32) -> bool {
    (EXPONENTIAL_SCHEMA_MIN..=EXPONENTIAL_SCHEMA_MAX).contains(&schema)
}

/// What a histogram says about counter resets relative to its predecessor in a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CounterResetHint {
    /// Nothing is known; a reset has to be detected by comparing with the predecessor.
    #[default]
    Unknown,
    /// A counter reset happened since the predecessor.
    Reset,
    /// No counter reset happened since the predecessor.
    NotReset,
    /// The histogram is a gauge histogram; counter resets do not apply.
    Gauge,
}

impl CounterResetHint {
    /// The name the test scripts use (`counter_reset_hint:gauge`).
    pub fn as_str(self) -> &'static str {
        match self {
            CounterResetHint::Unknown => "unknown",
            CounterResetHint::Reset => "reset",
            CounterResetHint::NotReset => "not_reset",
            CounterResetHint::Gauge => "gauge",
        }
    }

    /// The hint named `name` as the test scripts write it.
    pub fn from_name(name: &str) -> Option<CounterResetHint> {
        match name {
            "unknown" => Some(CounterResetHint::Unknown),
            "reset" => Some(CounterResetHint::Reset),
            "not_reset" => Some(CounterResetHint::NotReset),
            "gauge" => Some(CounterResetHint::Gauge),
            _ => None,
        }
    }
}

/// A run of consecutive buckets: `offset` is the gap (in bucket indices) before the run, counted
/// from the end of the previous span, or the absolute index of the first bucket for the first
/// span; `length` is the number of buckets in the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub offset: i32,
    pub length: u32,
}

impl Span {
    pub fn new(offset: i32, length: u32) -> Span {
        Span { offset, length }
    }
}

/// A native histogram with float counts.
///
/// For exponential schemas, bucket index `i` of the positive side covers
/// `(2^(i·2^-schema - 2^-schema), 2^(i·2^-schema)]`; the negative side mirrors it. The zero bucket
/// covers `[-zero_threshold, zero_threshold]`. For the custom-buckets schema only the positive
/// side is used: bucket `i` covers `(custom_values[i-1], custom_values[i]]`, with `-Inf` below the
/// first bound and `+Inf` above the last.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FloatHistogram {
    pub counter_reset_hint: CounterResetHint,
    pub schema: i32,
    pub zero_threshold: f64,
    pub zero_count: f64,
    pub count: f64,
    pub sum: f64,
    pub positive_spans: Vec<Span>,
    pub negative_spans: Vec<Span>,
    pub positive_buckets: Vec<f64>,
    pub negative_buckets: Vec<f64>,
    /// The upper bounds of the custom buckets, strictly increasing, without the final `+Inf`.
    /// Shared between the histograms of a series; empty unless the schema is custom.
    pub custom_values: Arc<[f64]>,
}

impl FloatHistogram {
    /// Whether the histogram uses custom bucket bounds.
    pub fn uses_custom_buckets(&self) -> bool {
        is_custom_buckets_schema(self.schema)
    }

    /// The zero bucket: `[-zero_threshold, zero_threshold]` with the zero count.
    pub fn zero_bucket(&self) -> Bucket {
        Bucket {
            lower: -self.zero_threshold,
            upper: self.zero_threshold,
            lower_inclusive: true,
            upper_inclusive: true,
            count: self.zero_count,
            index: 0,
        }
    }

    /// Whether any count, the sum or any bucket is infinite: the sign that a running sum
    /// overflowed and an average has to be computed incrementally.
    pub fn has_overflow(&self) -> bool {
        self.count.is_infinite()
            || self.sum.is_infinite()
            || self.zero_count.is_infinite()
            || self
                .positive_buckets
                .iter()
                .chain(&self.negative_buckets)
                .any(|b| b.is_infinite())
    }

    /// Checks that spans and buckets agree, that no bucket count is negative and that the
    /// fields unused by the schema are empty, as Prometheus does for stored histograms.
    /// Results of PromQL arithmetic (negative buckets, for example) need not pass.
    pub fn validate(&self) -> Result<(), HistogramError> {
        if self.uses_custom_buckets() {
            check_custom_bounds(&self.custom_values, &self.positive_spans)?;
            if self.zero_count != 0.0 || self.zero_threshold != 0.0 {
                return Err(HistogramError::CustomBucketsZeroBucket);
            }
            if !self.negative_spans.is_empty() || !self.negative_buckets.is_empty() {
                return Err(HistogramError::CustomBucketsNegativeBuckets);
            }
        } else if is_exponential_schema(self.schema) {
            check_spans(&self.negative_spans, self.negative_buckets.len(), false)?;
            if !self.custom_values.is_empty() {
                return Err(HistogramError::ExponentialWithCustomBounds);
            }
            if self.zero_count < 0.0 || self.negative_buckets.iter().any(|b| *b < 0.0) {
                return Err(HistogramError::NegativeBucketCount);
            }
        } else {
            return Err(HistogramError::InvalidSchema(self.schema));
        }
        check_spans(
            &self.positive_spans,
            self.positive_buckets.len(),
            self.uses_custom_buckets(),
        )?;
        if self.positive_buckets.iter().any(|b| *b < 0.0) {
            return Err(HistogramError::NegativeBucketCount);
        }
        if self.count < 0.0 {
            return Err(HistogramError::NegativeCount);
        }
        Ok(())
    }
}

fn check_spans(
    spans: &[Span],
    buckets: usize,
    first_offset_too: bool,
) -> Result<(), HistogramError> {
    let mut total = 0usize;
    for (i, span) in spans.iter().enumerate() {
        if (i > 0 || first_offset_too) && span.offset < 0 {
            return Err(HistogramError::NegativeSpanOffset { span: i + 1 });
        }
        total = total.saturating_add(span.length as usize);
    }
    if total != buckets {
        return Err(HistogramError::SpansBucketsMismatch {
            spans: total,
            buckets,
        });
    }
    Ok(())
}

fn check_custom_bounds(bounds: &[f64], spans: &[Span]) -> Result<(), HistogramError> {
    if bounds.windows(2).any(|w| w[0] >= w[1]) || bounds.iter().any(|b| b.is_nan()) {
        return Err(HistogramError::CustomBoundsNotIncreasing);
    }
    if bounds.last().is_some_and(|b| b.is_infinite()) {
        return Err(HistogramError::CustomBoundsInfinite);
    }
    let covered: i64 = spans
        .iter()
        .map(|s| i64::from(s.offset) + i64::from(s.length))
        .sum();
    if covered > bounds.len() as i64 + 1 {
        return Err(HistogramError::CustomBoundsTooFew {
            bounds: bounds.len(),
            needed: covered,
        });
    }
    Ok(())
}

/// The operation a histogram annotation is about, as Prometheus names it in the message
/// ("... during histogram addition").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HistogramOp {
    Addition,
    Subtraction,
    Aggregation,
}

impl HistogramOp {
    pub fn as_str(self) -> &'static str {
        match self {
            HistogramOp::Addition => "addition",
            HistogramOp::Subtraction => "subtraction",
            HistogramOp::Aggregation => "aggregation",
        }
    }
}

/// What an addition or subtraction noticed besides its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AddOutcome {
    /// One histogram said `reset` and the other `not_reset`; the result's hint is `unknown`.
    /// Prometheus warns `conflicting counter resets during histogram <op>`.
    pub counter_reset_collision: bool,
    /// The two histograms had different custom bounds; both were mapped onto the bounds they
    /// share. Prometheus informs `mismatched custom buckets were reconciled during <op>`.
    pub nhcb_bounds_reconciled: bool,
}

impl AddOutcome {
    /// Both outcomes of a series of operations: a flag is set if any operation set it.
    pub fn merge(self, other: AddOutcome) -> AddOutcome {
        AddOutcome {
            counter_reset_collision: self.counter_reset_collision || other.counter_reset_collision,
            nhcb_bounds_reconciled: self.nhcb_bounds_reconciled || other.nhcb_bounds_reconciled,
        }
    }
}

/// Why a histogram operation could not be done.
#[derive(Debug, Clone, PartialEq)]
pub enum HistogramError {
    /// An exponential and a custom-buckets histogram met in one operation. Prometheus turns
    /// this into the warning "vector contains a mix of histograms with exponential and custom
    /// buckets schemas".
    IncompatibleSchema,
    /// A resolution change that is not a reduction between exponential schemas.
    SchemaChange {
        from: i32,
        to: i32,
    },
    InvalidSchema(i32),
    NegativeSpanOffset {
        span: usize,
    },
    SpansBucketsMismatch {
        spans: usize,
        buckets: usize,
    },
    NegativeBucketCount,
    NegativeCount,
    CustomBoundsNotIncreasing,
    CustomBoundsInfinite,
    CustomBoundsTooFew {
        bounds: usize,
        needed: i64,
    },
    CustomBucketsZeroBucket,
    CustomBucketsNegativeBuckets,
    ExponentialWithCustomBounds,
    /// The `{{...}}` notation could not be read; the text names the offending part.
    Notation(String),
    /// Classic buckets could not be turned into a custom-buckets histogram.
    Classic(String),
}

impl std::fmt::Display for HistogramError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HistogramError::IncompatibleSchema => f.write_str(
                "cannot apply this operation on histograms with a mix of exponential and custom bucket schemas",
            ),
            HistogramError::SchemaChange { from, to } => {
                write!(f, "cannot change histogram schema from {from} to {to}")
            }
            HistogramError::InvalidSchema(s) => write!(f, "invalid histogram schema {s}"),
            HistogramError::NegativeSpanOffset { span } => {
                write!(f, "histogram span number {span} has a negative offset")
            }
            HistogramError::SpansBucketsMismatch { spans, buckets } => write!(
                f,
                "histogram spans need {spans} buckets, have {buckets} buckets"
            ),
            HistogramError::NegativeBucketCount => {
                f.write_str("histogram has a bucket whose observation count is negative")
            }
            HistogramError::NegativeCount => f.write_str("histogram observation count is negative"),
            HistogramError::CustomBoundsNotIncreasing => {
                f.write_str("histogram custom bounds must be in strictly increasing order")
            }
            HistogramError::CustomBoundsInfinite => {
                f.write_str("histogram custom bounds must be finite")
            }
            HistogramError::CustomBoundsTooFew { bounds, needed } => write!(
                f,
                "only {bounds} custom bounds defined which is insufficient to cover total span length of {needed}"
            ),
            HistogramError::CustomBucketsZeroBucket => {
                f.write_str("custom buckets histogram has a zero bucket")
            }
            HistogramError::CustomBucketsNegativeBuckets => {
                f.write_str("custom buckets histogram has negative buckets")
            }
            HistogramError::ExponentialWithCustomBounds => {
                f.write_str("histogram with exponential schema has custom bounds")
            }
            HistogramError::Notation(part) => write!(f, "invalid histogram notation: {part}"),
            HistogramError::Classic(why) => write!(f, "cannot convert classic histogram: {why}"),
        }
    }
}

impl std::error::Error for HistogramError {}
