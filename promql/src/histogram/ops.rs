//! Operations on one histogram: scaling by a scalar, compaction, and lowering the resolution.

use super::layout::{compacted, entries, reduced};
use super::{CounterResetHint, FloatHistogram, HistogramError, is_custom_buckets_schema};

impl FloatHistogram {
    /// Multiplies all counts, the zero count and the sum by `factor`; the layout stays. A
    /// negative factor makes the result a gauge histogram.
    pub fn mul(&mut self, factor: f64) -> &mut FloatHistogram {
        self.zero_count *= factor;
        self.count *= factor;
        self.sum *= factor;
        for b in self
            .positive_buckets
            .iter_mut()
            .chain(&mut self.negative_buckets)
        {
            *b *= factor;
        }
        if factor < 0.0 {
            self.counter_reset_hint = CounterResetHint::Gauge;
        }
        self
    }

    /// Divides all counts, the zero count and the sum by `divisor`. Dividing by zero leaves
    /// infinite (or NaN) count, sum and zero count and removes all buckets. A negative divisor
    /// makes the result a gauge histogram.
    pub fn div(&mut self, divisor: f64) -> &mut FloatHistogram {
        self.zero_count /= divisor;
        self.count /= divisor;
        self.sum /= divisor;
        if divisor == 0.0 {
            self.positive_buckets.clear();
            self.negative_buckets.clear();
            self.positive_spans.clear();
            self.negative_spans.clear();
            return self;
        }
        for b in self
            .positive_buckets
            .iter_mut()
            .chain(&mut self.negative_buckets)
        {
            *b /= divisor;
        }
        if divisor < 0.0 {
            self.counter_reset_hint = CounterResetHint::Gauge;
        }
        self
    }

    /// Drops empty buckets, keeping runs of at most `max_empty_buckets` empty buckets between
    /// populated ones as explicit zeros (and merging spans that close). `compact(0)` gives the
    /// canonical layout: no empty buckets, no touching spans.
    pub fn compact(&mut self, max_empty_buckets: usize) -> &mut FloatHistogram {
        let pos = entries(&self.positive_spans, &self.positive_buckets);
        (self.positive_spans, self.positive_buckets) =
            compacted(&pos, max_empty_buckets, |v| *v == 0.0, 0.0);
        let neg = entries(&self.negative_spans, &self.negative_buckets);
        (self.negative_spans, self.negative_buckets) =
            compacted(&neg, max_empty_buckets, |v| *v == 0.0, 0.0);
        self
    }

    /// A copy with the buckets merged into the coarser exponential `target` schema. The copy
    /// keeps the counts, the sum and the zero bucket; unless the schema stays the same, its
    /// counter reset hint is `unknown`.
    pub fn copy_to_schema(&self, target: i32) -> Result<FloatHistogram, HistogramError> {
        if target == self.schema {
            return Ok(self.clone());
        }
        self.check_reduction(target)?;
        let mut out = FloatHistogram {
            schema: target,
            zero_threshold: self.zero_threshold,
            zero_count: self.zero_count,
            count: self.count,
            sum: self.sum,
            ..FloatHistogram::default()
        };
        (out.positive_spans, out.positive_buckets) = self.reduced_side(true, target);
        (out.negative_spans, out.negative_buckets) = self.reduced_side(false, target);
        Ok(out)
    }

    /// Merges the buckets into the coarser exponential `target` schema in place.
    pub fn reduce_resolution(&mut self, target: i32) -> Result<(), HistogramError> {
        if target == self.schema {
            return Err(HistogramError::SchemaChange {
                from: self.schema,
                to: target,
            });
        }
        self.check_reduction(target)?;
        (self.positive_spans, self.positive_buckets) = self.reduced_side(true, target);
        (self.negative_spans, self.negative_buckets) = self.reduced_side(false, target);
        self.schema = target;
        Ok(())
    }

    fn check_reduction(&self, target: i32) -> Result<(), HistogramError> {
        if self.uses_custom_buckets() || is_custom_buckets_schema(target) || target > self.schema {
            return Err(HistogramError::SchemaChange {
                from: self.schema,
                to: target,
            });
        }
        Ok(())
    }

    fn reduced_side(&self, positive: bool, target: i32) -> (Vec<super::Span>, Vec<f64>) {
        let raw = if positive {
            entries(&self.positive_spans, &self.positive_buckets)
        } else {
            entries(&self.negative_spans, &self.negative_buckets)
        };
        super::layout::from_entries(&reduced(&raw, self.schema, target))
    }
}
