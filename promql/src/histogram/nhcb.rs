//! Classic histograms (`_bucket{le=...}`, `_count`, `_sum` series) turned into histograms with
//! custom buckets, as Prometheus does for `load_with_nhcb` in its test scripts and when
//! converting scraped classic histograms.

use super::{CUSTOM_BUCKETS_SCHEMA, FloatHistogram, HistogramError, Span};

/// The samples of one classic histogram at one timestamp, collected bucket by bucket.
#[derive(Debug, Clone, Default)]
pub struct ClassicHistogram {
    /// (upper bound, cumulative count), sorted by bound.
    buckets: Vec<(f64, f64)>,
    count: Option<f64>,
    sum: f64,
    error: Option<String>,
}

impl ClassicHistogram {
    pub fn new() -> ClassicHistogram {
        ClassicHistogram::default()
    }

    /// Records the cumulative count of the bucket with upper bound `le`. A repeated bound is
    /// ignored; a NaN bound, a negative count or counts that do not grow with the bound make
    /// the conversion fail.
    pub fn set_bucket_count(&mut self, le: f64, count: f64) {
        if self.error.is_some() {
            return;
        }
        if le.is_nan() {
            self.error = Some("bucket boundary must not be NaN".to_string());
            return;
        }
        if count < 0.0 {
            self.error = Some(format!(
                "bucket count must be non-negative: le={le}, count={count}"
            ));
            return;
        }
        let at = self.buckets.partition_point(|(b, _)| *b < le);
        if self.buckets.get(at).is_some_and(|(b, _)| *b == le) {
            return;
        }
        if at > 0 && count < self.buckets[at - 1].1 {
            self.error = Some(format!("count is not cumulative: le={le}, count={count}"));
            return;
        }
        if self.buckets.get(at).is_some_and(|(_, c)| count > *c) {
            self.error = Some(format!("count is not cumulative: le={le}, count={count}"));
            return;
        }
        self.buckets.insert(at, (le, count));
    }

    /// Records the `_count` sample.
    pub fn set_count(&mut self, count: f64) {
        if self.error.is_some() {
            return;
        }
        if count < 0.0 {
            self.error = Some(format!("count must be non-negative: count={count}"));
            return;
        }
        self.count = Some(count);
    }

    /// Records the `_sum` sample.
    pub fn set_sum(&mut self, sum: f64) {
        self.sum = sum;
    }

    /// The histogram with custom buckets. Without a `_count` sample, the count of the highest
    /// bucket is taken; without a `+Inf` bucket, one holding the count is added.
    pub fn convert(&self) -> Result<FloatHistogram, HistogramError> {
        if let Some(why) = &self.error {
            return Err(HistogramError::Classic(why.clone()));
        }
        let mut buckets = self.buckets.clone();
        let count = match (self.count, buckets.last()) {
            (Some(count), _) => count,
            (None, Some(&(_, highest))) => highest,
            (None, None) => {
                return Err(HistogramError::Classic(
                    "count must be provided when no buckets are present".to_string(),
                ));
            }
        };
        if buckets.last().is_none_or(|(le, _)| *le != f64::INFINITY) {
            buckets.push((f64::INFINITY, count));
        }
        let highest = buckets.last().map_or(count, |(_, c)| *c);
        if highest != count {
            return Err(HistogramError::Classic(format!(
                "count mismatch: count={count} != highest bucket count={highest}"
            )));
        }
        let integral = count == count.round() && buckets.iter().all(|(_, c)| *c == c.round());
        let mut previous = 0.0;
        let counts: Vec<f64> = buckets
            .iter()
            .map(|(_, c)| {
                let delta = c - previous;
                previous = *c;
                delta
            })
            .collect();
        let bounds: Vec<f64> = buckets[..buckets.len() - 1]
            .iter()
            .map(|(le, _)| *le)
            .collect();
        let mut h = FloatHistogram {
            schema: CUSTOM_BUCKETS_SCHEMA,
            count,
            sum: self.sum,
            positive_spans: vec![Span::new(0, counts.len() as u32)],
            positive_buckets: counts,
            custom_values: bounds.into(),
            ..FloatHistogram::default()
        };
        h.compact(if integral { 2 } else { 0 });
        Ok(h)
    }
}
