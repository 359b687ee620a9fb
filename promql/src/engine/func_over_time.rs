//! The `*_over_time` functions, `changes` and `resets`: one value from the samples of a
//! window.

use super::annotations::{self, Note};
use super::functions::{RangeOut, Window};
use crate::histogram::{FloatHistogram, HistogramError, HistogramMean, HistogramOp, HistogramSum};
use crate::quantile::{FloatMean, kahan_sum_inc, quantile};

/// The annotations of a histogram sum or mean, and its result.
fn finish_hist(
    w: &Window<'_>,
    notes: &mut Vec<Note>,
    result: Result<FloatHistogram, HistogramError>,
    collision: bool,
    reconciled: bool,
) -> Option<RangeOut> {
    let pos = w.pos(0);
    if collision {
        notes.push(annotations::counter_reset_collision(
            HistogramOp::Aggregation,
            pos,
        ));
    }
    if reconciled {
        notes.push(annotations::mismatched_custom_buckets(
            HistogramOp::Aggregation,
            pos,
        ));
    }
    match result {
        Ok(h) => Some(RangeOut::Hist(std::sync::Arc::new(h))),
        Err(HistogramError::IncompatibleSchema) => {
            notes.push(annotations::mixed_exponential_custom(w.name(), pos));
            None
        }
        Err(_) => None,
    }
}

pub(crate) fn avg_over_time(w: &Window<'_>, notes: &mut Vec<Note>) -> Option<RangeOut> {
    if !w.floats.is_empty() && !w.hists.is_empty() {
        notes.push(annotations::mixed_floats_histograms(w.name(), w.pos(0)));
        return None;
    }
    if let Some((first, rest)) = w.floats.split_first() {
        let mut mean = FloatMean::new(first.f);
        for p in rest {
            mean.add(p.f);
        }
        return Some(RangeOut::Float(mean.finish()));
    }
    let (first, rest) = w.hists.split_first()?;
    let mut mean = HistogramMean::new(&first.h);
    let mut result = Ok(());
    for p in rest {
        result = mean.add(&p.h);
        if result.is_err() {
            break;
        }
    }
    let (collision, reconciled) = (
        mean.counter_reset_collision(),
        mean.nhcb_bounds_reconciled(),
    );
    let result = result.map(|()| mean.finish());
    finish_hist(w, notes, result, collision, reconciled)
}

pub(crate) fn sum_over_time(w: &Window<'_>, notes: &mut Vec<Note>) -> Option<RangeOut> {
    if !w.floats.is_empty() && !w.hists.is_empty() {
        notes.push(annotations::mixed_floats_histograms(w.name(), w.pos(0)));
        return None;
    }
    if !w.floats.is_empty() {
        let (mut sum, mut c) = (0.0, 0.0);
        for p in w.floats {
            (sum, c) = kahan_sum_inc(p.f, sum, c);
        }
        return Some(RangeOut::Float(if sum.is_infinite() {
            sum
        } else {
            sum + c
        }));
    }
    let (first, rest) = w.hists.split_first()?;
    let mut sum = HistogramSum::new(&first.h);
    let mut result = Ok(());
    for p in rest {
        result = sum.add(&p.h);
        if result.is_err() {
            break;
        }
    }
    let (collision, reconciled) = (sum.counter_reset_collision(), sum.nhcb_bounds_reconciled());
    let result = result.map(|()| sum.finish());
    finish_hist(w, notes, result, collision, reconciled)
}

pub(crate) fn first_over_time(w: &Window<'_>) -> Option<RangeOut> {
    match (w.floats.first(), w.hists.first()) {
        (Some(f), Some(h)) if h.t < f.t => Some(RangeOut::Hist(h.h.clone())),
        (Some(f), _) => Some(RangeOut::Float(f.f)),
        (None, Some(h)) => Some(RangeOut::Hist(h.h.clone())),
        (None, None) => None,
    }
}

pub(crate) fn last_over_time(w: &Window<'_>) -> Option<RangeOut> {
    match (w.floats.last(), w.hists.last()) {
        (Some(f), Some(h)) if h.t > f.t => Some(RangeOut::Hist(h.h.clone())),
        (Some(f), _) => Some(RangeOut::Float(f.f)),
        (None, Some(h)) => Some(RangeOut::Hist(h.h.clone())),
        (None, None) => None,
    }
}

pub(crate) fn ts_of_first(w: &Window<'_>) -> Option<RangeOut> {
    let tf = w.floats.first().map_or(i64::MAX, |p| p.t);
    let th = w.hists.first().map_or(i64::MAX, |p| p.t);
    Some(RangeOut::Float(tf.min(th) as f64 / 1000.0))
}

pub(crate) fn ts_of_last(w: &Window<'_>) -> Option<RangeOut> {
    let tf = w.floats.last().map_or(0, |p| p.t);
    let th = w.hists.last().map_or(0, |p| p.t);
    Some(RangeOut::Float(tf.max(th) as f64 / 1000.0))
}

/// `max_over_time`, `min_over_time` and their `ts_of_` variants: the float that `better`
/// prefers over the best so far.
pub(crate) fn compare_over_time(
    w: &Window<'_>,
    notes: &mut Vec<Note>,
    better: impl Fn(f64, f64) -> bool,
    timestamp: bool,
) -> Option<RangeOut> {
    let first = w.floats.first()?;
    if !w.hists.is_empty() {
        notes.push(annotations::histogram_ignored_in_mixed_range(
            w.name(),
            w.pos(0),
        ));
    }
    let (mut best, mut best_t) = (first.f, first.t);
    for p in w.floats {
        if better(p.f, best) {
            best = p.f;
            best_t = p.t;
        }
    }
    Some(RangeOut::Float(if timestamp {
        best_t as f64 / 1000.0
    } else {
        best
    }))
}

pub(crate) fn quantile_over_time(w: &Window<'_>, notes: &mut Vec<Note>) -> Option<RangeOut> {
    let q = *w.params.first()?;
    if w.floats.is_empty() {
        return None;
    }
    if q.is_nan() || !(0.0..=1.0).contains(&q) {
        notes.push(annotations::invalid_quantile(q, w.pos(0)));
    }
    if !w.hists.is_empty() {
        notes.push(annotations::histogram_ignored_in_mixed_range(
            w.name(),
            w.pos(0),
        ));
    }
    let mut values: Vec<f64> = w.floats.iter().map(|p| p.f).collect();
    Some(RangeOut::Float(quantile(q, &mut values)))
}

pub(crate) fn mad_over_time(w: &Window<'_>, notes: &mut Vec<Note>) -> Option<RangeOut> {
    if w.floats.is_empty() {
        return None;
    }
    if !w.hists.is_empty() {
        notes.push(annotations::histogram_ignored_in_mixed_range(
            w.name(),
            w.pos(0),
        ));
    }
    // A NaN sample makes the deviation NaN rather than being sorted aside.
    if w.floats.iter().any(|p| p.f.is_nan()) {
        return Some(RangeOut::Float(f64::NAN));
    }
    let mut values: Vec<f64> = w.floats.iter().map(|p| p.f).collect();
    let median = quantile(0.5, &mut values);
    let mut deviations: Vec<f64> = w.floats.iter().map(|p| (p.f - median).abs()).collect();
    Some(RangeOut::Float(quantile(0.5, &mut deviations)))
}

/// `stddev_over_time` (`sqrt`) and `stdvar_over_time`.
pub(crate) fn variance_over_time(
    w: &Window<'_>,
    notes: &mut Vec<Note>,
    sqrt: bool,
) -> Option<RangeOut> {
    if w.floats.is_empty() {
        return None;
    }
    if !w.hists.is_empty() {
        notes.push(annotations::histogram_ignored_in_mixed_range(
            w.name(),
            w.pos(0),
        ));
    }
    let (mut count, mut mean, mut c_mean, mut aux, mut c_aux) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for p in w.floats {
        count += 1.0;
        let delta = p.f - (mean + c_mean);
        (mean, c_mean) = kahan_sum_inc(delta / count, mean, c_mean);
        (aux, c_aux) = kahan_sum_inc(delta * (p.f - (mean + c_mean)), aux, c_aux);
    }
    let variance = (aux + c_aux) / count;
    Some(RangeOut::Float(if sqrt {
        variance.sqrt()
    } else {
        variance
    }))
}

/// A float or a histogram sample, for `changes` and `resets`.
#[derive(Clone, Copy)]
enum Val<'a> {
    F(f64),
    H(&'a FloatHistogram),
}

/// The samples of the window in time order; for an anchored window starting with the last
/// float at or before the window start. `None` when an anchored window has nothing after it.
fn ordered_samples<'a>(w: &'a Window<'_>) -> Option<Vec<Val<'a>>> {
    let mut fi = 0;
    if w.arg.anchored {
        let start = w.r - w.arg.range;
        match w.floats.last() {
            Some(p) if p.t > start => {}
            _ => return None,
        }
        let searched = &w.floats[..w.floats.len() - 1];
        fi = searched.partition_point(|p| p.t <= start).saturating_sub(1);
    }
    let mut out = Vec::with_capacity(w.floats.len() + w.hists.len());
    let mut hi = 0;
    while fi < w.floats.len() || hi < w.hists.len() {
        match (w.floats.get(fi), w.hists.get(hi)) {
            (Some(f), Some(h)) if h.t < f.t => {
                out.push(Val::H(&h.h));
                hi += 1;
            }
            (Some(f), _) => {
                out.push(Val::F(f.f));
                fi += 1;
            }
            (None, Some(h)) => {
                out.push(Val::H(&h.h));
                hi += 1;
            }
            (None, None) => break,
        }
    }
    Some(out)
}

pub(crate) fn changes(w: &Window<'_>) -> Option<RangeOut> {
    let samples = ordered_samples(w)?;
    let changes = samples
        .windows(2)
        .filter(|pair| match (pair[0], pair[1]) {
            (Val::F(a), Val::F(b)) => a != b && !(a.is_nan() && b.is_nan()),
            (Val::H(a), Val::H(b)) => !b.equals(a),
            _ => true,
        })
        .count();
    Some(RangeOut::Float(changes as f64))
}

pub(crate) fn resets(w: &Window<'_>) -> Option<RangeOut> {
    let samples = ordered_samples(w)?;
    let resets = samples
        .windows(2)
        .filter(|pair| match (pair[0], pair[1]) {
            (Val::F(a), Val::F(b)) => b < a,
            (Val::H(a), Val::H(b)) => b.detect_reset(a),
            _ => true,
        })
        .count();
    Some(RangeOut::Float(resets as f64))
}
