//! Rates and trends over a window: `rate`, `increase`, `delta` (extrapolated to the window
//! boundaries, counter resets corrected, native histograms included), `irate`, `idelta`,
//! `deriv`, `predict_linear` and `double_exponential_smoothing`.

use super::annotations::{self, Note};
use super::extended::extended_rate;
use super::functions::{RangeOut, Window};
use super::{QueryError, Result};
use crate::ast::PosRange;
use crate::histogram::{AddOutcome, CounterResetHint, FloatHistogram, HistogramError, HistogramOp};
use crate::quantile::kahan_sum_inc;
use crate::value::{FPoint, HPoint};

/// `rate` (`is_counter`, `is_rate`), `increase` (`is_counter`) and `delta`.
pub(crate) fn extrapolated_rate(
    w: &Window<'_>,
    is_counter: bool,
    is_rate: bool,
    notes: &mut Vec<Note>,
) -> Option<RangeOut> {
    let range = w.arg.range;
    let range_secs = range as f64 / 1000.0;
    if w.arg.anchored || w.arg.smoothed {
        return extended_rate(
            w.floats,
            w.r - range,
            w.r,
            w.arg.smoothed,
            is_counter,
            is_rate.then_some(range_secs),
        )
        .map(RangeOut::Float);
    }
    let pos = w.pos(0);
    if !w.floats.is_empty() && !w.hists.is_empty() {
        notes.push(annotations::mixed_floats_histograms(w.name(), pos));
        return None;
    }
    let range_start = w.r - range;
    let range_end = w.r;
    let (first_t, last_t, samples_minus_one, mut result_f, mut result_h);
    if w.hists.len() > 1 {
        let n = w.hists.len() - 1;
        first_t = w.hists[0].t;
        last_t = w.hists[n].t;
        samples_minus_one = n;
        result_f = 0.0;
        result_h = Some(histogram_rate(w.hists, is_counter, w.name(), pos, notes)?);
    } else if w.floats.len() > 1 {
        let n = w.floats.len() - 1;
        first_t = w.floats[0].t;
        last_t = w.floats[n].t;
        samples_minus_one = n;
        result_h = None;
        result_f = w.floats[n].f - w.floats[0].f;
        if is_counter {
            for pair in w.floats.windows(2) {
                if pair[1].f < pair[0].f {
                    result_f += pair[0].f;
                }
            }
        }
    } else {
        return None;
    }
    let mut to_start = (first_t - range_start) as f64 / 1000.0;
    let mut to_end = (range_end - last_t) as f64 / 1000.0;
    let sampled = (last_t - first_t) as f64 / 1000.0;
    let avg_between = sampled / samples_minus_one as f64;
    let threshold = avg_between * 1.1;
    if to_start >= threshold {
        to_start = avg_between / 2.0;
    }
    if is_counter {
        let mut to_zero = to_start;
        match &result_h {
            None => {
                if result_f > 0.0 && w.floats.first().is_some_and(|p| p.f >= 0.0) {
                    to_zero = sampled * (w.floats[0].f / result_f);
                }
            }
            Some(h) => {
                if h.count > 0.0 && w.hists.first().is_some_and(|p| p.h.count >= 0.0) {
                    to_zero = sampled * (w.hists[0].h.count / h.count);
                }
            }
        }
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    if to_end >= threshold {
        to_end = avg_between / 2.0;
    }
    let mut factor = (sampled + to_start + to_end) / sampled;
    if is_rate {
        factor /= range_secs;
    }
    match result_h.as_mut() {
        Some(h) => {
            h.mul(factor);
            result_h.map(|h| RangeOut::Hist(std::sync::Arc::new(h)))
        }
        None => {
            result_f *= factor;
            Some(RangeOut::Float(result_f))
        }
    }
}

/// The increase of a series of histograms from the first to the last, counter resets
/// corrected when `is_counter`; `None` (annotated) when they cannot be combined.
fn histogram_rate(
    points: &[HPoint],
    is_counter: bool,
    name: &str,
    pos: PosRange,
    notes: &mut Vec<Note>,
) -> Option<FloatHistogram> {
    let first = points.first()?;
    let last = points.last()?;
    let mut prev: FloatHistogram = (*first.h).clone();
    let mut custom = prev.uses_custom_buckets();
    let gauge = CounterResetHint::Gauge;
    if is_counter && (prev.counter_reset_hint == gauge || last.h.counter_reset_hint == gauge) {
        notes.push(annotations::not_counter(name, pos));
    }
    if is_counter
        && let Some(second) = points.get(1)
        && second.h.detect_reset(&prev)
    {
        prev = FloatHistogram {
            schema: second.h.schema,
            custom_values: second.h.custom_values.clone(),
            ..FloatHistogram::default()
        };
        custom = second.h.uses_custom_buckets();
    }
    if last.h.uses_custom_buckets() != custom {
        notes.push(annotations::mixed_exponential_custom(name, pos));
        return None;
    }
    let mut min_schema = last.h.schema.min(prev.schema);
    if points.len() > 2 {
        for p in &points[1..points.len() - 1] {
            if !is_counter {
                continue;
            }
            if p.h.counter_reset_hint == gauge {
                notes.push(annotations::not_counter(name, pos));
            }
            min_schema = min_schema.min(p.h.schema);
            if p.h.uses_custom_buckets() != custom {
                notes.push(annotations::mixed_exponential_custom(name, pos));
                return None;
            }
        }
    }
    let mut h = last
        .h
        .copy_to_schema(min_schema)
        .unwrap_or_else(|_| (*last.h).clone());
    noted(h.sub(&prev), HistogramOp::Subtraction, name, pos, notes)?;
    if is_counter {
        let mut prev_h: &FloatHistogram = &prev;
        for p in &points[1..] {
            if p.h.detect_reset(prev_h) {
                noted(h.add(prev_h), HistogramOp::Addition, name, pos, notes)?;
            }
            prev_h = &p.h;
        }
    } else if first.h.counter_reset_hint != gauge || last.h.counter_reset_hint != gauge {
        notes.push(annotations::not_gauge(name, pos));
    }
    h.counter_reset_hint = gauge;
    h.compact(0);
    Some(h)
}

/// One of the last two samples of a window.
#[derive(Clone, Copy)]
enum Last<'a> {
    F(i64, f64),
    H(i64, &'a FloatHistogram),
}

impl Last<'_> {
    fn t(&self) -> i64 {
        match self {
            Last::F(t, _) | Last::H(t, _) => *t,
        }
    }
}

/// `irate` (`is_rate`) and `idelta`: from the last two samples of the window.
pub(crate) fn instant_value(
    w: &Window<'_>,
    is_rate: bool,
    notes: &mut Vec<Note>,
) -> Option<RangeOut> {
    if w.floats.len() + w.hists.len() < 2 {
        return None;
    }
    let mut last: Vec<Last<'_>> = Vec::with_capacity(4);
    let nf = w.floats.len();
    for p in &w.floats[nf.saturating_sub(2)..] {
        last.push(Last::F(p.t, p.f));
    }
    let nh = w.hists.len();
    for p in &w.hists[nh.saturating_sub(2)..] {
        last.push(Last::H(p.t, &p.h));
    }
    last.sort_by_key(Last::t);
    let (a, b) = (last[last.len() - 2], last[last.len() - 1]);
    let interval = b.t() - a.t();
    if interval == 0 {
        return None;
    }
    let pos = w.pos(0);
    let secs = interval as f64 / 1000.0;
    match (a, b) {
        (Last::F(_, fa), Last::F(_, fb)) => {
            let mut v = fb;
            if !is_rate || fb >= fa || fb.is_nan() || fa.is_nan() {
                v = fb - fa;
            }
            if is_rate {
                v /= secs;
            }
            Some(RangeOut::Float(v))
        }
        (Last::H(_, ha), Last::H(_, hb)) => {
            let gauge = CounterResetHint::Gauge;
            if is_rate && (hb.counter_reset_hint == gauge || ha.counter_reset_hint == gauge) {
                notes.push(annotations::not_counter(w.name(), pos));
            }
            if !is_rate && (hb.counter_reset_hint != gauge || ha.counter_reset_hint != gauge) {
                notes.push(annotations::not_gauge(w.name(), pos));
            }
            let mut result = hb.clone();
            if !is_rate || !hb.detect_reset(ha) {
                noted(
                    result.sub(ha),
                    HistogramOp::Subtraction,
                    w.name(),
                    pos,
                    notes,
                )?;
            }
            result.counter_reset_hint = gauge;
            result.compact(0);
            if is_rate {
                result.div(secs);
            }
            Some(RangeOut::Hist(std::sync::Arc::new(result)))
        }
        _ => {
            notes.push(annotations::mixed_floats_histograms(w.name(), pos));
            None
        }
    }
}

/// Least-squares slope and intercept at `intercept_time`, sums compensated.
fn linear_regression(samples: &[FPoint], intercept_time: i64) -> (f64, f64) {
    let (mut n, mut sum_x, mut cx, mut sum_y, mut cy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let (mut sum_xy, mut cxy, mut sum_x2, mut cx2) = (0.0, 0.0, 0.0, 0.0);
    let init_y = samples.first().map_or(f64::NAN, |p| p.f);
    let mut const_y = true;
    for (i, p) in samples.iter().enumerate() {
        if const_y && i > 0 && p.f != init_y {
            const_y = false;
        }
        n += 1.0;
        let x = (p.t - intercept_time) as f64 / 1e3;
        (sum_x, cx) = kahan_sum_inc(x, sum_x, cx);
        (sum_y, cy) = kahan_sum_inc(p.f, sum_y, cy);
        (sum_xy, cxy) = kahan_sum_inc(x * p.f, sum_xy, cxy);
        (sum_x2, cx2) = kahan_sum_inc(x * x, sum_x2, cx2);
    }
    if const_y {
        if init_y.is_infinite() {
            return (f64::NAN, f64::NAN);
        }
        return (0.0, init_y);
    }
    sum_x += cx;
    sum_y += cy;
    sum_xy += cxy;
    sum_x2 += cx2;
    let cov_xy = sum_xy - sum_x * sum_y / n;
    let var_x = sum_x2 - sum_x * sum_x / n;
    let slope = cov_xy / var_x;
    let intercept = sum_y / n - slope * sum_x / n;
    (slope, intercept)
}

/// Fewer than two floats: nothing, annotated if histograms were ignored.
fn too_few_floats(w: &Window<'_>, notes: &mut Vec<Note>) -> bool {
    if w.floats.len() < 2 {
        if w.floats.len() == 1 && !w.hists.is_empty() {
            notes.push(annotations::histogram_ignored_in_mixed_range(
                w.name(),
                w.pos(0),
            ));
        }
        return true;
    }
    false
}

fn note_ignored_histograms(w: &Window<'_>, notes: &mut Vec<Note>) {
    if !w.hists.is_empty() {
        notes.push(annotations::histogram_ignored_in_mixed_range(
            w.name(),
            w.pos(0),
        ));
    }
}

pub(crate) fn deriv(w: &Window<'_>, notes: &mut Vec<Note>) -> Option<RangeOut> {
    if too_few_floats(w, notes) {
        return None;
    }
    let (slope, _) = linear_regression(w.floats, w.floats[0].t);
    note_ignored_histograms(w, notes);
    Some(RangeOut::Float(slope))
}

pub(crate) fn predict_linear(w: &Window<'_>, notes: &mut Vec<Note>) -> Option<RangeOut> {
    let duration = *w.params.first()?;
    if too_few_floats(w, notes) {
        return None;
    }
    let (slope, intercept) = linear_regression(w.floats, w.ts);
    note_ignored_histograms(w, notes);
    Some(RangeOut::Float(slope * duration + intercept))
}

/// `double_exponential_smoothing(v, sf, tf)`.
pub(crate) fn double_exponential_smoothing(
    w: &Window<'_>,
    notes: &mut Vec<Note>,
) -> Result<Option<RangeOut>> {
    let (Some(&sf), Some(&tf)) = (w.params.first(), w.params.get(1)) else {
        return Ok(None);
    };
    if sf <= 0.0 || sf >= 1.0 || sf.is_nan() {
        return Err(QueryError::Execution(format!(
            "invalid smoothing factor. Expected: 0 < sf < 1, got: {sf:.6}"
        )));
    }
    if tf <= 0.0 || tf >= 1.0 || tf.is_nan() {
        return Err(QueryError::Execution(format!(
            "invalid trend factor. Expected: 0 < tf < 1, got: {tf:.6}"
        )));
    }
    if too_few_floats(w, notes) {
        return Ok(None);
    }
    let f = w.floats;
    let (mut s0, mut s1) = (0.0, f[0].f);
    let mut b = f[1].f - f[0].f;
    for (i, p) in f.iter().enumerate().skip(1) {
        let x = sf * p.f;
        if i > 1 {
            b = tf * (s1 - s0) + (1.0 - tf) * b;
        }
        let y = (1.0 - sf) * (s1 + b);
        (s0, s1) = (s1, x + y);
    }
    note_ignored_histograms(w, notes);
    Ok(Some(RangeOut::Float(s1)))
}

/// Notes what adding or subtracting two histograms (`op`) reported; `None` when their schemas
/// cannot be combined (exponential with custom buckets), which ends the function's result.
fn noted(
    outcome: std::result::Result<AddOutcome, HistogramError>,
    op: HistogramOp,
    name: &str,
    pos: PosRange,
    notes: &mut Vec<Note>,
) -> Option<()> {
    match outcome {
        Err(HistogramError::IncompatibleSchema) => {
            notes.push(annotations::mixed_exponential_custom(name, pos));
            None
        }
        Err(_) => Some(()),
        Ok(outcome) => {
            if outcome.nhcb_bounds_reconciled {
                notes.push(annotations::mismatched_custom_buckets(op, pos));
            }
            Some(())
        }
    }
}
