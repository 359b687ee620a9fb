//! Aggregations: `sum`, `avg`, `count`, `group`, `min`, `max`, `stddev`, `stdvar`,
//! `quantile` (one output series per group) and `count_values`; the `k`-aggregations are in
//! [`super::topk`].

use std::collections::HashMap;
use std::sync::Arc;

use super::annotations::{self, Note};
use super::eval::{Evaluator, Value};
use super::func_instant::{go_max, go_min};
use super::series::{EvSeries, Sample, metric_name};
use super::{QueryError, Result};
use crate::ast::{AggregateExpr, AggregateOp, Expr, PosRange};
use crate::histogram::{FloatHistogram, HistogramError, HistogramMean, HistogramOp, HistogramSum};
use crate::quantile::{FloatMean, kahan_sum_inc, quantile};
use crate::value::{Labels, METRIC_NAME};

/// The labels of the group a series belongs to (they also identify the group).
pub(crate) fn group_labels(labels: &Labels, grouping: &[String], without: bool) -> Labels {
    if without {
        labels.filter(|n| n != METRIC_NAME && !grouping.iter().any(|g| g == n))
    } else if grouping.is_empty() {
        Labels::new()
    } else {
        labels.filter(|n| grouping.iter().any(|g| g == n))
    }
}

/// The parameter of an aggregation per step, with its extremes over all steps.
pub(crate) struct Params {
    pub values: Vec<f64>,
    pub min: f64,
    pub max: f64,
    pub any_nan: bool,
}

impl Params {
    pub fn at(&self, step: usize) -> f64 {
        self.values.get(step).copied().unwrap_or(0.0)
    }
}

/// Running histogram accumulation of a group.
enum HistAcc {
    Sum(HistogramSum),
    Mean(HistogramMean),
}

/// The state of one group at one step.
#[derive(Default)]
struct Group {
    seen: bool,
    f: f64,
    c: f64,
    mean: Option<FloatMean>,
    /// The running mean of `stddev` and `stdvar`.
    fmean: f64,
    count: f64,
    has_float: bool,
    has_hist: bool,
    hist: Option<HistAcc>,
    incompatible: bool,
    values: Vec<f64>,
    drop_name: bool,
}

impl Evaluator<'_> {
    pub fn eval_aggregate(&mut self, a: &AggregateExpr) -> Result<Value> {
        let mut grouping = a.grouping.clone();
        grouping.sort();
        if a.op == AggregateOp::CountValues {
            return self.eval_count_values(a, grouping).map(Value::Matrix);
        }
        let orig = self.current_samples;
        let params = match a.param.as_deref().map(Expr::unparen) {
            Some(p) => Some(self.params(p)?),
            None => None,
        };
        let input = self.eval_matrix(&a.expr)?;
        let result = match a.op {
            AggregateOp::Topk
            | AggregateOp::Bottomk
            | AggregateOp::Limitk
            | AggregateOp::LimitRatio => self.eval_k_aggregation(a, &grouping, input, params)?,
            _ => self.eval_grouped(a, &grouping, input, params)?,
        };
        self.current_samples = orig.saturating_add(result.iter().map(EvSeries::sample_count).sum());
        Ok(Value::Matrix(result))
    }

    fn params(&mut self, p: &Expr) -> Result<Params> {
        let values = self.eval_scalar_per_step(p)?;
        let constant = matches!(p, Expr::Number(_));
        let (mut min, mut max) = (f64::MAX, -f64::MAX);
        for &v in &values {
            max = go_max(max, v);
            min = go_min(min, v);
        }
        if constant && let Some(&v) = values.first() {
            (min, max) = (v, v);
        }
        let any_nan = values.iter().any(|v| v.is_nan());
        Ok(Params {
            values,
            min,
            max,
            any_nan,
        })
    }

    fn eval_grouped(
        &mut self,
        a: &AggregateExpr,
        grouping: &[String],
        input: Vec<EvSeries>,
        params: Option<Params>,
    ) -> Result<Vec<EvSeries>> {
        let param_pos = a
            .param
            .as_deref()
            .map(|p| p.unparen().pos())
            .unwrap_or_default();
        if a.op == AggregateOp::Quantile
            && let Some(p) = &params
        {
            if p.any_nan {
                self.note(annotations::invalid_quantile(f64::NAN, param_pos));
            }
            if p.max > 1.0 {
                self.note(annotations::invalid_quantile(p.max, param_pos));
            }
            if p.min < 0.0 {
                self.note(annotations::invalid_quantile(p.min, param_pos));
            }
        }
        let mut index: HashMap<Labels, usize> = HashMap::new();
        let mut out: Vec<EvSeries> = Vec::new();
        let to_group: Vec<usize> = input
            .iter()
            .map(|s| {
                let key = group_labels(&s.labels, grouping, a.without);
                *index.entry(key.clone()).or_insert_with(|| {
                    out.push(EvSeries::new(Arc::new(key), false));
                    out.len() - 1
                })
            })
            .collect();
        let mut cursors = vec![(0usize, 0usize); input.len()];
        let expr_pos = a.expr.pos();
        for (step, ts) in self.steps().enumerate() {
            self.check_deadline()?;
            let q = params.as_ref().map_or(0.0, |p| p.at(step));
            let mut groups: Vec<Group> = (0..out.len()).map(|_| Group::default()).collect();
            let mut notes = Vec::new();
            for (si, s) in input.iter().enumerate() {
                let Some((f, h)) = next_value(s, &mut cursors[si], ts) else {
                    continue;
                };
                let Some(g) = to_group.get(si).and_then(|&gi| groups.get_mut(gi)) else {
                    continue;
                };
                accumulate(a.op, g, f, h, s, expr_pos, &mut notes);
            }
            for n in notes {
                self.note(n);
            }
            for (gi, g) in groups.into_iter().enumerate() {
                if !g.seen {
                    continue;
                }
                let mut notes = Vec::new();
                let value = finish(a.op, g.clone_flags(), g, q, expr_pos, &mut notes);
                for n in notes {
                    self.note(n);
                }
                if let (Some((f, h, drop_name)), Some(series)) = (value, out.get_mut(gi)) {
                    series.push(ts, f, h.map(Arc::new));
                    series.drop_name = drop_name;
                    self.add_samples(1)?;
                }
            }
        }
        out.retain(|s| !s.is_empty());
        Ok(out)
    }

    fn eval_count_values(
        &mut self,
        a: &AggregateExpr,
        mut grouping: Vec<String>,
    ) -> Result<Vec<EvSeries>> {
        let label = match a.param.as_deref().map(Expr::unparen) {
            Some(Expr::String(s)) => s.clone(),
            _ => {
                return Err(QueryError::Execution(
                    "count_values needs a label name".to_string(),
                ));
            }
        };
        if let Some(bytes) = &label.invalid_utf8 {
            return Err(QueryError::Execution(format!(
                "invalid label name {}",
                crate::ast::go_quote_bytes(bytes)
            )));
        }
        if label.val.is_empty() {
            return Err(QueryError::Execution(format!(
                "invalid label name {}",
                crate::ast::go_quote(&label.val)
            )));
        }
        if !a.without {
            grouping.push(label.val.clone());
            grouping.sort();
        }
        let orig = self.current_samples;
        let input = self.eval_matrix(&a.expr)?;
        let without = a.without;
        self.range_eval(vec![input], None, orig, |_, ts, v, _| {
            let mut index: HashMap<Labels, usize> = HashMap::new();
            let mut out: Vec<Sample> = Vec::new();
            for s in v.first().map(Vec::as_slice).unwrap_or(&[]) {
                let value = match &s.h {
                    Some(h) => h.describe(),
                    None => crate::format::float(s.f),
                };
                let mut labels = (*s.labels).clone();
                labels.set(label.val.clone(), value);
                let key = group_labels(&labels, &grouping, without);
                match index.get(&key) {
                    Some(&i) => {
                        if let Some(o) = out.get_mut(i) {
                            o.f += 1.0;
                        }
                    }
                    None => {
                        index.insert(key.clone(), out.len());
                        out.push(Sample::float(Arc::new(key), ts, 1.0, false));
                    }
                }
            }
            Ok(out)
        })
    }
}

/// The value of series `s` at `ts`, moving its cursor past it.
pub(crate) fn next_value(
    s: &EvSeries,
    cur: &mut (usize, usize),
    ts: i64,
) -> Option<(f64, Option<super::Hist>)> {
    if let Some(p) = s.floats.get(cur.0).filter(|p| p.t == ts) {
        cur.0 += 1;
        return Some((p.f, None));
    }
    if let Some(p) = s.hists.get(cur.1).filter(|p| p.t == ts) {
        cur.1 += 1;
        return Some((0.0, Some(p.h.clone())));
    }
    None
}

impl Group {
    fn clone_flags(&self) -> (bool, bool) {
        (self.has_float, self.has_hist)
    }
}

fn agg_name(op: AggregateOp) -> &'static str {
    op.name()
}

/// Adds one sample to its group.
fn accumulate(
    op: AggregateOp,
    g: &mut Group,
    f: f64,
    h: Option<super::Hist>,
    s: &EvSeries,
    pos: PosRange,
    notes: &mut Vec<Note>,
) {
    use AggregateOp as A;
    if !g.seen {
        *g = Group {
            seen: true,
            f,
            count: 1.0,
            drop_name: s.drop_name,
            ..Group::default()
        };
        match (op, &h) {
            (A::Sum, None) => g.has_float = true,
            (A::Avg, None) => {
                g.has_float = true;
                g.mean = Some(FloatMean::new(f));
            }
            (A::Sum, Some(h)) => {
                g.has_hist = true;
                g.hist = Some(HistAcc::Sum(HistogramSum::new(h)));
            }
            (A::Avg, Some(h)) => {
                g.has_hist = true;
                g.hist = Some(HistAcc::Mean(HistogramMean::new(h)));
            }
            (A::Stddev | A::Stdvar | A::Quantile | A::Min | A::Max, Some(_)) => {
                g.seen = false;
                notes.push(annotations::histogram_ignored_in_aggregation(
                    agg_name(op),
                    pos,
                ));
            }
            (A::Stddev | A::Stdvar, None) => {
                g.fmean = f;
                g.f = if f.is_nan() || f.is_infinite() {
                    f64::NAN
                } else {
                    0.0
                };
            }
            (A::Quantile, None) => g.values.push(f),
            (A::Group, _) => g.f = 1.0,
            _ => {}
        }
        return;
    }
    if g.incompatible {
        return;
    }
    g.drop_name |= s.drop_name;
    match op {
        A::Sum | A::Avg => {
            if op == A::Avg {
                g.count += 1.0;
            }
            match h {
                Some(h) => {
                    g.has_hist = true;
                    let result = match g.hist.as_mut() {
                        Some(HistAcc::Sum(acc)) => acc.add(&h),
                        Some(HistAcc::Mean(acc)) => acc.add(&h),
                        None => Ok(()),
                    };
                    if let Err(HistogramError::IncompatibleSchema) = result {
                        notes.push(annotations::mixed_exponential_custom(
                            metric_name(&s.labels),
                            pos,
                        ));
                        g.incompatible = true;
                    } else if result.is_err() {
                        g.incompatible = true;
                    }
                }
                None => {
                    g.has_float = true;
                    if op == A::Sum {
                        (g.f, g.c) = kahan_sum_inc(f, g.f, g.c);
                    } else {
                        match g.mean.as_mut() {
                            Some(m) => m.add(f),
                            None => g.mean = Some(FloatMean::new(f)),
                        }
                    }
                }
            }
        }
        A::Max | A::Min => {
            if h.is_some() {
                notes.push(annotations::histogram_ignored_in_aggregation(
                    agg_name(op),
                    pos,
                ));
                return;
            }
            let replace = if op == A::Max { g.f < f } else { g.f > f };
            if replace || g.f.is_nan() {
                g.f = f;
            }
        }
        A::Count => g.count += 1.0,
        A::Stddev | A::Stdvar => {
            if h.is_some() {
                notes.push(annotations::histogram_ignored_in_aggregation(
                    agg_name(op),
                    pos,
                ));
                return;
            }
            g.count += 1.0;
            let delta = f - g.fmean;
            g.fmean += delta / g.count;
            g.f += delta * (f - g.fmean);
        }
        A::Quantile => {
            if h.is_some() {
                notes.push(annotations::histogram_ignored_in_aggregation(
                    agg_name(op),
                    pos,
                ));
                return;
            }
            g.values.push(f);
        }
        _ => {}
    }
}

/// The result of a group at one step: value, histogram and whether to drop the name.
fn finish(
    op: AggregateOp,
    (has_float, has_hist): (bool, bool),
    mut g: Group,
    q: f64,
    pos: PosRange,
    notes: &mut Vec<Note>,
) -> Option<(f64, Option<FloatHistogram>, bool)> {
    use AggregateOp as A;
    let mut hist = None;
    match op {
        A::Sum | A::Avg => {
            if has_float && has_hist {
                notes.push(annotations::mixed_floats_histograms_agg(pos));
                return None;
            }
            if g.incompatible {
                return None;
            }
            let (collision, reconciled, h) = match g.hist.take() {
                Some(HistAcc::Sum(acc)) => (
                    acc.counter_reset_collision(),
                    acc.nhcb_bounds_reconciled(),
                    Some(acc.finish()),
                ),
                Some(HistAcc::Mean(acc)) => (
                    acc.counter_reset_collision(),
                    acc.nhcb_bounds_reconciled(),
                    Some(acc.finish()),
                ),
                None => (false, false, None),
            };
            if reconciled {
                notes.push(annotations::mismatched_custom_buckets(
                    HistogramOp::Aggregation,
                    pos,
                ));
            }
            if collision {
                notes.push(annotations::counter_reset_collision(
                    HistogramOp::Aggregation,
                    pos,
                ));
            }
            if let Some(mut h) = h {
                h.compact(0);
                hist = Some(h);
            } else if op == A::Sum {
                g.f += g.c;
            } else if let Some(m) = &g.mean {
                g.f = m.finish();
            }
        }
        A::Count => g.f = g.count,
        A::Stdvar => g.f /= g.count,
        A::Stddev => g.f = (g.f / g.count).sqrt(),
        A::Quantile => g.f = quantile(q, &mut g.values),
        _ => {}
    }
    Some((g.f, hist, g.drop_name))
}
