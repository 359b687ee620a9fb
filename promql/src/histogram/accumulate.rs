//! Running sums and means of histograms with Kahan–Babuška compensation, as the `sum` and `avg`
//! aggregations and `sum_over_time`/`avg_over_time` compute them.
//!
//! The mean is the compensated sum divided by the count for as long as the sum stays finite;
//! once adding a histogram would overflow, it switches to an incremental mean
//! (`mean·(n-1)/n + h/n`) for the rest of the series.
//!
//! Both accumulators record what Prometheus annotates: counter reset hints `reset` and
//! `not_reset` both seen ("conflicting counter resets during histogram aggregation") and
//! custom bounds reconciled ("mismatched custom buckets were reconciled during aggregation").
//! An error (exponential and custom buckets mixed) leaves the accumulator unusable; Prometheus
//! drops the result and warns.

use super::{CounterResetHint, FloatHistogram, HistogramError};

#[derive(Debug, Clone, Copy, Default)]
struct Notes {
    reset_seen: bool,
    not_reset_seen: bool,
    reconciled: bool,
}

impl Notes {
    fn track(&mut self, h: &FloatHistogram) {
        match h.counter_reset_hint {
            CounterResetHint::Reset => self.reset_seen = true,
            CounterResetHint::NotReset => self.not_reset_seen = true,
            CounterResetHint::Unknown | CounterResetHint::Gauge => {}
        }
    }
}

/// The compensated sum of histograms.
#[derive(Debug, Clone)]
pub struct HistogramSum {
    value: FloatHistogram,
    compensation: Option<FloatHistogram>,
    notes: Notes,
}

impl HistogramSum {
    /// A sum starting with `first`.
    pub fn new(first: &FloatHistogram) -> HistogramSum {
        let mut notes = Notes::default();
        notes.track(first);
        HistogramSum {
            value: first.clone(),
            compensation: None,
            notes,
        }
    }

    /// Adds `h`.
    pub fn add(&mut self, h: &FloatHistogram) -> Result<(), HistogramError> {
        self.notes.track(h);
        let outcome = self.value.kahan_add(h, &mut self.compensation)?;
        self.notes.reconciled |= outcome.nhcb_bounds_reconciled;
        Ok(())
    }

    /// Whether both a `reset` and a `not_reset` hint were seen.
    pub fn counter_reset_collision(&self) -> bool {
        self.notes.reset_seen && self.notes.not_reset_seen
    }

    /// Whether custom bucket bounds had to be reconciled.
    pub fn nhcb_bounds_reconciled(&self) -> bool {
        self.notes.reconciled
    }

    /// The sum, compensation included (not compacted).
    pub fn finish(self) -> FloatHistogram {
        let mut value = self.value;
        if let Some(mut c) = self.compensation {
            c.counter_reset_hint = value.counter_reset_hint;
            // Same schema kind as the value: adding it cannot fail.
            let _ = value.add(&c);
        }
        value
    }
}

/// The compensated mean of histograms.
#[derive(Debug, Clone)]
pub struct HistogramMean {
    count: f64,
    sum: FloatHistogram,
    mean: Option<FloatHistogram>,
    compensation: Option<FloatHistogram>,
    notes: Notes,
}

impl HistogramMean {
    /// A mean starting with `first`.
    pub fn new(first: &FloatHistogram) -> HistogramMean {
        let mut notes = Notes::default();
        notes.track(first);
        HistogramMean {
            count: 1.0,
            sum: first.clone(),
            mean: None,
            compensation: None,
            notes,
        }
    }

    /// Adds `h`.
    pub fn add(&mut self, h: &FloatHistogram) -> Result<(), HistogramError> {
        self.notes.track(h);
        self.count += 1.0;
        let n = self.count;
        if self.mean.is_none() {
            let mut trial = self.sum.clone();
            let mut c = self.compensation.clone();
            let outcome = trial.kahan_add(h, &mut c)?;
            self.notes.reconciled |= outcome.nhcb_bounds_reconciled;
            if !trial.has_overflow() {
                self.sum = trial;
                self.compensation = c;
                return Ok(());
            }
            // The direct sum would overflow: continue from the mean so far.
            let mut mean = self.sum.clone();
            mean.div(n - 1.0);
            if let Some(c) = self.compensation.as_mut() {
                c.div(n - 1.0);
            }
            self.mean = Some(mean);
        }
        let q = (n - 1.0) / n;
        if let Some(c) = self.compensation.as_mut() {
            c.mul(q);
        }
        let mut term = h.clone();
        term.div(n);
        if let Some(mean) = self.mean.as_mut() {
            mean.mul(q);
            let outcome = mean.kahan_add(&term, &mut self.compensation)?;
            self.notes.reconciled |= outcome.nhcb_bounds_reconciled;
        }
        Ok(())
    }

    /// The number of histograms added so far.
    pub fn count(&self) -> f64 {
        self.count
    }

    /// Whether both a `reset` and a `not_reset` hint were seen.
    pub fn counter_reset_collision(&self) -> bool {
        self.notes.reset_seen && self.notes.not_reset_seen
    }

    /// Whether custom bucket bounds had to be reconciled.
    pub fn nhcb_bounds_reconciled(&self) -> bool {
        self.notes.reconciled
    }

    /// The mean, compensation included (not compacted).
    pub fn finish(self) -> FloatHistogram {
        let (mut value, scale) = match self.mean {
            Some(mean) => (mean, None),
            None => {
                let mut sum = self.sum;
                sum.div(self.count);
                (sum, Some(self.count))
            }
        };
        if let Some(mut c) = self.compensation {
            if let Some(n) = scale {
                c.div(n);
            }
            c.counter_reset_hint = value.counter_reset_hint;
            // Same schema kind as the value: adding it cannot fail.
            let _ = value.add(&c);
        }
        value
    }
}
