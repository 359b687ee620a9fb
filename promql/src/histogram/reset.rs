//! Counter reset detection between two consecutive histograms of a series.

use super::bounds::{bucket_bound, exponential_bound};
use super::layout::{Entry, entries};
use super::{CounterResetHint, FloatHistogram, is_exponential_schema};

impl FloatHistogram {
    /// Whether a counter reset happened between `previous` and `self`.
    ///
    /// A `reset` or `not_reset` hint on `self` decides. Otherwise (also for gauge histograms,
    /// which PromQL may still treat as counters) it is a reset if the count went down, if a
    /// populated bucket disappeared or went down, or if the resolution went up or the zero
    /// threshold went down. A coarser schema or a wider zero bucket in `self` is met by merging
    /// the buckets of `previous` accordingly. Custom-bucket histograms with different bounds are
    /// compared on the bounds they share.
    pub fn detect_reset(&self, previous: &FloatHistogram) -> bool {
        match self.counter_reset_hint {
            CounterResetHint::Reset => return true,
            CounterResetHint::NotReset => return false,
            CounterResetHint::Unknown | CounterResetHint::Gauge => {}
        }
        if self.count < previous.count {
            return true;
        }
        if self.uses_custom_buckets() {
            if !previous.uses_custom_buckets() {
                return true;
            }
            if self.custom_values[..] != previous.custom_values[..] {
                return reset_on_shared_bounds(self, previous);
            }
        }
        if self.schema > previous.schema {
            return true;
        }
        if self.zero_threshold < previous.zero_threshold {
            return true;
        }
        let (previous_zero, threshold) = previous.zero_count_at(self.zero_threshold);
        if threshold != self.zero_threshold {
            // The zero bucket would cut a populated bucket of the previous histogram.
            return true;
        }
        if self.zero_count < previous_zero {
            return true;
        }
        [true, false].into_iter().any(|positive| {
            let above = |&(i, _): &Entry| {
                !is_exponential_schema(self.schema)
                    || exponential_bound(i, self.schema) > self.zero_threshold
            };
            let current: Vec<Entry> = self
                .side_entries(positive, self.schema)
                .into_iter()
                .filter(above)
                .collect();
            let before: Vec<Entry> = previous
                .side_entries(positive, self.schema)
                .into_iter()
                .filter(above)
                .collect();
            bucket_went_down(&current, &before)
        })
    }

    /// The zero count this histogram would have with its zero threshold raised to `larger`,
    /// and the threshold needed for that: raised further to the end of any populated bucket
    /// that `larger` would cut.
    pub(super) fn zero_count_at(&self, larger: f64) -> (f64, f64) {
        if larger <= self.zero_threshold {
            return (self.zero_count, larger);
        }
        let pos = self.side_entries(true, self.schema);
        let neg = self.side_entries(false, self.schema);
        let mut larger = larger;
        'outer: loop {
            let mut count = self.zero_count;
            for &(i, v) in &pos {
                let (lower, upper) = (self.abs_bound(i.wrapping_sub(1)), self.abs_bound(i));
                if lower >= larger {
                    break;
                }
                count += v;
                if upper > larger {
                    if v != 0.0 {
                        larger = upper;
                    }
                    break;
                }
            }
            for &(i, v) in &neg {
                let (lower, upper) = (self.abs_bound(i.wrapping_sub(1)), self.abs_bound(i));
                if lower >= larger {
                    break;
                }
                count += v;
                if upper > larger {
                    if v != 0.0 {
                        larger = upper;
                        continue 'outer;
                    }
                    break;
                }
            }
            return (count, larger);
        }
    }

    fn abs_bound(&self, index: i32) -> f64 {
        bucket_bound(index, self.schema, &self.custom_values)
    }
}

/// Whether a populated bucket of `before` is missing from `current` or has a lower count there.
fn bucket_went_down(current: &[Entry], before: &[Entry]) -> bool {
    let mut k = 0;
    before.iter().any(|&(i, was)| {
        while k < current.len() && current[k].0 < i {
            k += 1;
        }
        match current.get(k) {
            Some(&(j, now)) if j == i => now < was,
            _ => was != 0.0,
        }
    })
}

/// Reset detection for custom-bucket histograms with different bounds: at each bound both
/// share (and at `+Inf`), the counts of the buckets up to that bound, not yet compared, are
/// rolled up on both sides and compared.
fn reset_on_shared_bounds(current: &FloatHistogram, previous: &FloatHistogram) -> bool {
    let uppers = |h: &FloatHistogram| -> Vec<(f64, f64)> {
        entries(&h.positive_spans, &h.positive_buckets)
            .into_iter()
            .map(|(i, v)| (bucket_bound(i, h.schema, &h.custom_values), v))
            .collect()
    };
    let (cur, prev) = (uppers(current), uppers(previous));
    let (mut ci, mut pi) = (0, 0);
    let roll_up = |buckets: &[(f64, f64)], pos: &mut usize, bound: f64| -> f64 {
        let mut sum = 0.0;
        while let Some(&(upper, v)) = buckets.get(*pos) {
            if upper > bound {
                break;
            }
            sum += v;
            *pos += 1;
        }
        sum
    };
    let shared_bounds = {
        let mut shared = Vec::new();
        let (a, b) = (&current.custom_values, &previous.custom_values);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if a[i] == b[j] {
                shared.push(a[i]);
                i += 1;
                j += 1;
            } else if a[i] < b[j] {
                i += 1;
            } else {
                j += 1;
            }
        }
        shared.push(f64::INFINITY);
        shared
    };
    shared_bounds.into_iter().any(|bound| {
        let now = roll_up(&cur, &mut ci, bound);
        let was = roll_up(&prev, &mut pi, bound);
        now < was
    })
}
