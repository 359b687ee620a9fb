//! Range-vector arguments: a range selector read from storage, or a subquery evaluated over
//! the steps its windows need. Functions over range vectors look at one window of one series
//! at a time; [`window`] slices it without copying.

use std::sync::Arc;

use super::Result;
use super::eval::Evaluator;
use super::series::EvSeries;
use crate::ast::{MatrixSelector, PosRange, SubqueryExpr};
use crate::histogram::CounterResetHint;
use crate::value::{FPoint, HPoint, is_stale_nan};

/// The series of a range-vector argument and how its windows are placed.
#[derive(Debug)]
pub(crate) struct RangeArg {
    /// The series with their samples, staleness markers removed.
    pub series: Vec<EvSeries>,
    pub range: i64,
    pub offset: i64,
    pub at: Option<i64>,
    pub anchored: bool,
    pub smoothed: bool,
    /// The position of the argument, for annotations.
    pub pos: PosRange,
}

impl RangeArg {
    /// The left-open window `(mint, maxt]` for reference time `r`, widened by the lookback
    /// for anchored and smoothed selectors.
    pub fn bounds(&self, r: i64, lookback: i64) -> (i64, i64) {
        let mut mint = r.saturating_sub(self.range);
        let mut maxt = r;
        if self.anchored || self.smoothed {
            mint = mint.saturating_sub(lookback);
        }
        if self.smoothed {
            maxt = maxt.saturating_add(lookback);
        }
        (mint, maxt)
    }
}

/// The samples of `s` in `(mint, maxt]`.
pub(crate) fn window(s: &EvSeries, mint: i64, maxt: i64) -> (&[FPoint], &[HPoint]) {
    let flo = s.floats.partition_point(|p| p.t <= mint);
    let fhi = s.floats.partition_point(|p| p.t <= maxt);
    let hlo = s.hists.partition_point(|p| p.t <= mint);
    let hhi = s.hists.partition_point(|p| p.t <= maxt);
    (
        s.floats.get(flo..fhi.max(flo)).unwrap_or(&[]),
        s.hists.get(hlo..hhi.max(hlo)).unwrap_or(&[]),
    )
}

/// The windows of one series at the steps of an evaluation, whose bounds never go back: two
/// indexes per kind of sample walk forward, rather than four searches a step. Bounds that go
/// back (never from [`Evaluator::reference_times`]) start the walk over.
pub(crate) struct Windows<'s> {
    series: &'s EvSeries,
    floats: (usize, usize),
    hists: (usize, usize),
    bounds: (i64, i64),
}

impl<'s> Windows<'s> {
    pub fn new(series: &'s EvSeries) -> Windows<'s> {
        Windows {
            series,
            floats: (0, 0),
            hists: (0, 0),
            bounds: (i64::MIN, i64::MIN),
        }
    }

    /// The samples in `(mint, maxt]`, as [`window`] finds them.
    pub fn at(&mut self, mint: i64, maxt: i64) -> (&'s [FPoint], &'s [HPoint]) {
        if mint < self.bounds.0 || maxt < self.bounds.1 {
            self.floats = (0, 0);
            self.hists = (0, 0);
        }
        self.bounds = (mint, maxt);
        let s = self.series;
        (
            advance(&s.floats, &mut self.floats, mint, maxt, |p| p.t),
            advance(&s.hists, &mut self.hists, mint, maxt, |p| p.t),
        )
    }
}

/// Moves `(lo, hi)` forward to the points of `all` in `(mint, maxt]`, and slices them.
fn advance<'a, T>(
    all: &'a [T],
    (lo, hi): &mut (usize, usize),
    mint: i64,
    maxt: i64,
    t: impl Fn(&T) -> i64,
) -> &'a [T] {
    while all.get(*lo).is_some_and(|p| t(p) <= mint) {
        *lo += 1;
    }
    *hi = (*hi).max(*lo);
    while all.get(*hi).is_some_and(|p| t(p) <= maxt) {
        *hi += 1;
    }
    &all[*lo..*hi]
}

impl Evaluator<'_> {
    /// Reads a range selector for all steps of the current evaluation.
    pub fn fetch_range_selector(&mut self, ms: &MatrixSelector) -> Result<RangeArg> {
        let vs = &ms.vector;
        let mut arg = RangeArg {
            series: Vec::new(),
            range: self.duration_ms(&ms.range, false)?,
            offset: self.offset_ms(&vs.offset)?,
            at: self.at_ms(vs.at),
            anchored: vs.anchored,
            smoothed: vs.smoothed,
            pos: PosRange::new(vs.pos.start, ms.end),
        };
        let refs = self.reference_times(arg.at, arg.offset);
        let (Some(first), Some(last)) = (refs.first(), refs.last()) else {
            return Ok(arg);
        };
        let (mint, _) = arg.bounds(first.1, self.lookback);
        let (_, maxt) = arg.bounds(last.1, self.lookback);
        let series = self.select_for(vs, mint.saturating_add(1), maxt)?;
        arg.series = series
            .into_iter()
            .map(|s| EvSeries {
                labels: Arc::new(s.labels),
                floats: s
                    .floats
                    .into_iter()
                    .filter(|p| !is_stale_nan(p.f))
                    .collect(),
                hists: s
                    .histograms
                    .into_iter()
                    .filter(|p| !is_stale_nan(p.h.sum))
                    .collect(),
                drop_name: false,
            })
            .collect();
        Ok(arg)
    }

    /// Evaluates a subquery as the argument of a function: its inner expression over the
    /// aligned steps that cover every window, histogram reset hints cleared.
    pub fn fetch_subquery(&mut self, sq: &SubqueryExpr) -> Result<RangeArg> {
        let (series, range, offset, at) = self.eval_subquery(sq)?;
        let series = series
            .into_iter()
            .map(|mut s| {
                for p in &mut s.hists {
                    if matches!(
                        p.h.counter_reset_hint,
                        CounterResetHint::Reset | CounterResetHint::NotReset
                    ) {
                        let mut h = (*p.h).clone();
                        h.counter_reset_hint = CounterResetHint::Unknown;
                        p.h = Arc::new(h);
                    }
                }
                s
            })
            .collect();
        Ok(RangeArg {
            series,
            range,
            offset,
            at,
            anchored: false,
            smoothed: false,
            pos: PosRange::new(sq.expr.pos().start, sq.end),
        })
    }

    /// A subquery's inner expression evaluated over its own steps, with its range, offset
    /// and `@` time.
    pub fn eval_subquery(
        &mut self,
        sq: &SubqueryExpr,
    ) -> Result<(Vec<EvSeries>, i64, i64, Option<i64>)> {
        let range = self.duration_ms(&sq.range, false)?;
        let offset = self.offset_ms(&sq.offset)?;
        let at = self.at_ms(sq.at);
        let step = match &sq.step {
            Some(d) => self.duration_ms(d, false)?,
            None => self.subquery_step,
        };
        let eff_start = at.unwrap_or(self.start).saturating_sub(offset);
        let eff_end = at.unwrap_or(self.end).saturating_sub(offset);
        let lower = eff_start.saturating_sub(range);
        let mut start = step.saturating_mul(lower / step);
        if start <= lower {
            start = start.saturating_add(step);
        }
        let saved = (self.start, self.end, self.interval);
        (self.start, self.end, self.interval) = (start, eff_end, step);
        let result = self.eval_matrix(&sq.expr);
        (self.start, self.end, self.interval) = saved;
        Ok((result?, range, offset, at))
    }

    /// A subquery evaluated on its own (the matrix result of an instant query).
    pub fn eval_subquery_result(&mut self, sq: &SubqueryExpr) -> Result<Vec<EvSeries>> {
        let (mat, _, _, _) = self.eval_subquery(sq)?;
        Ok(mat.into_iter().filter(|s| !s.is_empty()).collect())
    }
}
