//! Selectors: reading storage for instant selectors (latest sample within the lookback
//! window, staleness markers ending a series), smoothed instant selectors, and range
//! selectors evaluated on their own (the matrix result of an instant query).

use std::sync::Arc;

use super::QueryError;
use super::Result;
use super::eval::Evaluator;
use super::extended::{extend_floats, interpolate};
use super::series::{EvSeries, hist_size};
use crate::ast::{Matcher, MatrixSelector, VectorSelector};
use crate::value::{FPoint, HPoint, Series, is_stale_nan};

/// The latest sample at or before a reference time.
pub(crate) enum Latest<'s> {
    Float(i64, f64),
    Hist(i64, &'s HPoint),
}

/// Walks a series forward in time, finding the latest sample at or before each (non-decreasing)
/// reference time.
pub(crate) struct LatestCursor {
    fi: usize,
    hi: usize,
}

impl LatestCursor {
    pub fn new() -> LatestCursor {
        LatestCursor { fi: 0, hi: 0 }
    }

    /// The latest sample at or before `r` and after `r - lookback`, unless it is a
    /// staleness marker.
    pub fn at<'s>(&mut self, s: &'s Series, r: i64, lookback: i64) -> Option<Latest<'s>> {
        while s.floats.get(self.fi).is_some_and(|p| p.t <= r) {
            self.fi += 1;
        }
        while s.histograms.get(self.hi).is_some_and(|p| p.t <= r) {
            self.hi += 1;
        }
        let f = self.fi.checked_sub(1).and_then(|i| s.floats.get(i));
        let h = self.hi.checked_sub(1).and_then(|i| s.histograms.get(i));
        let latest = match (f, h) {
            (Some(f), Some(h)) if h.t > f.t => Latest::Hist(h.t, h),
            (Some(f), _) => Latest::Float(f.t, f.f),
            (None, Some(h)) => Latest::Hist(h.t, h),
            (None, None) => return None,
        };
        match latest {
            Latest::Float(t, _) | Latest::Hist(t, _) if t <= r - lookback => None,
            Latest::Float(_, v) if is_stale_nan(v) => None,
            Latest::Hist(_, h) if is_stale_nan(h.h.sum) => None,
            other => Some(other),
        }
    }
}

impl Evaluator<'_> {
    /// Reads the series matching `matchers` with samples in `[mint, maxt]`.
    pub fn select(&mut self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>> {
        self.check_deadline()?;
        self.storage
            .select(matchers, mint, maxt)
            .map_err(|e| QueryError::Storage(format!("expanding series: {e}")))
    }

    /// The reference times of the steps (`@` pins them; the offset shifts them), with the
    /// step each belongs to.
    pub fn reference_times(&self, at: Option<i64>, offset: i64) -> Vec<(i64, i64)> {
        self.steps()
            .map(|ts| (ts, at.unwrap_or(ts).saturating_sub(offset)))
            .collect()
    }

    /// An instant vector selector over all steps.
    pub fn eval_vector_selector(&mut self, vs: &VectorSelector) -> Result<Vec<EvSeries>> {
        if vs.smoothed {
            return self.eval_smoothed_selector(vs);
        }
        self.selector_points(vs, |_, p| p)
    }

    /// The selected samples per step; `map(t, point)` may rewrite each point (given the time
    /// of the raw sample).
    pub fn selector_points(
        &mut self,
        vs: &VectorSelector,
        map: impl Fn(i64, Point) -> Point,
    ) -> Result<Vec<EvSeries>> {
        let offset = self.offset_ms(&vs.offset)?;
        let refs = self.reference_times(self.at_ms(vs.at), offset);
        let (Some(first), Some(last)) = (refs.first(), refs.last()) else {
            return Ok(Vec::new());
        };
        let mint = first.1.saturating_sub(self.lookback).saturating_add(1);
        let series = self.select_for(vs, mint, last.1)?;
        let mut out = Vec::with_capacity(series.len());
        for s in &series {
            self.check_deadline()?;
            let mut es = EvSeries::new(Arc::new(s.labels.clone()), false);
            let mut cur = LatestCursor::new();
            for &(ts, r) in &refs {
                let point = match cur.at(s, r, self.lookback) {
                    None => continue,
                    Some(Latest::Float(t, f)) => map(t, Point::Float(f)),
                    Some(Latest::Hist(t, h)) => map(t, Point::Hist(h.h.clone())),
                };
                match point {
                    Point::Float(f) => {
                        self.add_samples(1)?;
                        es.floats.push(FPoint { t: ts, f });
                    }
                    Point::Hist(h) => {
                        self.add_samples(hist_size(&h))?;
                        es.hists.push(HPoint { t: ts, h });
                    }
                }
            }
            if !es.is_empty() {
                out.push(es);
            }
        }
        Ok(out)
    }

    /// `x smoothed`: the value at each reference time interpolated between the samples
    /// around it (within the lookback window on either side), or the last one before it.
    fn eval_smoothed_selector(&mut self, vs: &VectorSelector) -> Result<Vec<EvSeries>> {
        let offset = self.offset_ms(&vs.offset)?;
        let refs = self.reference_times(self.at_ms(vs.at), offset);
        let (Some(first), Some(last)) = (refs.first(), refs.last()) else {
            return Ok(Vec::new());
        };
        let lb = self.lookback;
        let series = self.select_for(
            vs,
            first.1.saturating_sub(lb).saturating_add(1),
            last.1.saturating_add(lb),
        )?;
        let mut out = Vec::with_capacity(series.len());
        for s in &series {
            self.check_deadline()?;
            let floats: Vec<FPoint> = s
                .floats
                .iter()
                .copied()
                .filter(|p| !is_stale_nan(p.f))
                .collect();
            let hists: Vec<&HPoint> = s
                .histograms
                .iter()
                .filter(|p| !is_stale_nan(p.h.sum))
                .collect();
            let mut es = EvSeries::new(Arc::new(s.labels.clone()), false);
            for &(ts, r) in &refs {
                let lo = floats.partition_point(|p| p.t <= r - lb);
                let hi = floats.partition_point(|p| p.t <= r + lb);
                let window = floats.get(lo..hi).unwrap_or(&[]);
                if hists.iter().any(|p| p.t > r - lb && p.t <= r + lb) {
                    return Err(QueryError::Execution(
                        "smoothed and anchored modifiers do not work with native histograms"
                            .to_string(),
                    ));
                }
                let i = window.partition_point(|p| p.t < r);
                let value = match (window.get(i), i.checked_sub(1).and_then(|j| window.get(j))) {
                    (Some(p), _) if p.t == r => p.f,
                    (Some(next), Some(prev)) => interpolate(*prev, *next, r, false),
                    (None, Some(prev)) => prev.f,
                    _ => continue,
                };
                self.add_samples(1)?;
                es.floats.push(FPoint { t: ts, f: value });
            }
            if !es.is_empty() {
                out.push(es);
            }
        }
        Ok(out)
    }

    /// A range selector evaluated on its own (only at one time): the raw samples in the
    /// window, with their own timestamps.
    pub fn eval_matrix_selector(&mut self, ms: &MatrixSelector) -> Result<Vec<EvSeries>> {
        if self.start != self.end {
            return Err(QueryError::Execution(
                "cannot do range evaluation of matrix selector".to_string(),
            ));
        }
        let arg = self.fetch_range_selector(ms)?;
        let r = arg.at.unwrap_or(self.start).saturating_sub(arg.offset);
        let (mint, maxt) = arg.bounds(r, self.lookback);
        let mut out = Vec::new();
        for s in &arg.series {
            let (floats, hists) = super::range_args::window(s, mint, maxt);
            let mut es = EvSeries::new(s.labels.clone(), false);
            if arg.anchored || arg.smoothed {
                if !hists.is_empty() {
                    return Err(QueryError::Execution(
                        "anchored modifier is not supported with histograms".to_string(),
                    ));
                }
                es.floats = extend_floats(floats, r - arg.range, r, arg.smoothed);
            } else {
                es.floats = floats.to_vec();
                es.hists = hists.to_vec();
            }
            self.add_samples(es.sample_count())?;
            if !es.is_empty() {
                out.push(es);
            }
        }
        Ok(out)
    }
}

/// A sample value as a selector passes it on.
pub(crate) enum Point {
    Float(f64),
    Hist(super::Hist),
}
