//! Function calls: the dispatch between functions over range vectors (one window per series
//! and step), functions over instant vectors (one vector per step), and the few that work on
//! whole series (`label_replace`, `label_join`, `info`) or on the query itself (`time()`,
//! `step()`, ...).

use std::sync::Arc;

use super::annotations::{self, Note};
use super::eval::{Evaluator, Value};
use super::func_instant::call_instant;
use super::range_args::{RangeArg, Windows};
use super::series::{EvSeries, Sample, metric_name};
use super::{QueryError, Result};
use crate::ast::{ANCHORED_SAFE, Call, Expr, MatchOp, PosRange, SMOOTHED_SAFE};
use crate::value::{FPoint, HPoint, Labels};

/// What a function over a range vector computes for one window (a histogram behind an `Arc`,
/// so that a float answer is small to pass back, and a histogram read is not copied).
pub(crate) enum RangeOut {
    Float(f64),
    Hist(Arc<crate::histogram::FloatHistogram>),
}

/// One window of one series, with what the functions need to know about it.
pub(crate) struct Window<'a> {
    pub floats: &'a [FPoint],
    pub hists: &'a [HPoint],
    /// The evaluation step.
    pub ts: i64,
    /// The end of the window (the step moved by `@` and the offset).
    pub r: i64,
    pub arg: &'a RangeArg,
    pub labels: &'a Labels,
    /// The scalar arguments at this step, in argument order (the range vector left out).
    pub params: &'a [f64],
    /// The positions of the call's arguments.
    pub arg_pos: &'a [PosRange],
}

impl Window<'_> {
    pub fn name(&self) -> &str {
        metric_name(self.labels)
    }

    /// The position of argument `i` (of the range vector argument if out of bounds).
    pub fn pos(&self, i: usize) -> PosRange {
        self.arg_pos.get(i).copied().unwrap_or(self.arg.pos)
    }
}

impl Evaluator<'_> {
    pub fn eval_call(&mut self, call: &Call) -> Result<Value> {
        let name = call.func.name;
        let args: Vec<&Expr> = call.args.iter().map(Expr::unparen).collect();
        match name {
            "time" => return self.per_step(|_, ts| ts as f64 / 1000.0),
            "pi" => return self.constant(std::f64::consts::PI).map(Value::Matrix),
            "step" => {
                return self
                    .constant(self.dctx.step_ms as f64 / 1000.0)
                    .map(Value::Matrix);
            }
            "range" => {
                return self
                    .constant(self.dctx.range_ms as f64 / 1000.0)
                    .map(Value::Matrix);
            }
            "start" => {
                return self
                    .constant(self.query_start as f64 / 1000.0)
                    .map(Value::Matrix);
            }
            "end" => {
                return self
                    .constant(self.query_end as f64 / 1000.0)
                    .map(Value::Matrix);
            }
            "label_replace" => return self.eval_label_replace(&args).map(Value::Matrix),
            "label_join" => return self.eval_label_join(&args).map(Value::Matrix),
            "info" => return self.eval_info(&args).map(Value::Matrix),
            "timestamp" => {
                if let Some(Expr::VectorSelector(vs)) = args.first() {
                    return self.eval_timestamp_of_selector(vs).map(Value::Matrix);
                }
            }
            _ => {}
        }
        if let Some(idx) = args
            .iter()
            .position(|a| matches!(a, Expr::MatrixSelector(_) | Expr::Subquery(_)))
        {
            return self
                .eval_range_function(call, &args, idx)
                .map(Value::Matrix);
        }
        let orig = self.current_samples;
        let mut inputs = Vec::with_capacity(args.len());
        for a in &args {
            if matches!(a, Expr::String(_)) {
                inputs.push(Vec::new());
            } else {
                inputs.push(self.eval_matrix(a)?);
            }
        }
        if self.is_range && name.starts_with("sort") {
            self.note(annotations::sort_in_range_query(call.pos));
        }
        let mat = self.range_eval(inputs, None, orig, |ev, ts, vectors, _| {
            let mut notes = Vec::new();
            let out = call_instant(ev, call, &args, ts, vectors, &mut notes)?;
            for n in notes {
                ev.note(n);
            }
            Ok(out)
        })?;
        Ok(Value::Matrix(mat))
    }

    /// A scalar computed from the step time.
    fn per_step(&mut self, f: impl Fn(&Self, i64) -> f64) -> Result<Value> {
        let mut s = EvSeries::new(Arc::new(Labels::new()), false);
        for ts in self.steps() {
            s.push(ts, f(self, ts), None);
        }
        self.add_samples(s.floats.len())?;
        Ok(Value::Matrix(vec![s]))
    }

    /// `timestamp(selector)`: the time of the selected raw sample, not of the step.
    fn eval_timestamp_of_selector(
        &mut self,
        vs: &crate::ast::VectorSelector,
    ) -> Result<Vec<EvSeries>> {
        use super::selectors::Point;
        let mut mat = if vs.smoothed {
            self.eval_vector_selector(vs)?
        } else {
            self.selector_points(vs, |t, _| Point::Float(t as f64 / 1000.0))?
        };
        for s in &mut mat {
            s.drop_name = true;
            if vs.smoothed {
                for p in &mut s.floats {
                    p.f = p.t as f64 / 1000.0;
                }
            }
        }
        Ok(mat)
    }

    fn eval_range_function(
        &mut self,
        call: &Call,
        args: &[&Expr],
        idx: usize,
    ) -> Result<Vec<EvSeries>> {
        let name = call.func.name;
        let mut params: Vec<Vec<f64>> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            if i != idx {
                params.push(self.eval_scalar_per_step(a)?);
            }
        }
        let arg = match args.get(idx) {
            Some(Expr::MatrixSelector(ms)) => self.fetch_range_selector(ms)?,
            Some(Expr::Subquery(sq)) => self.fetch_subquery(sq)?,
            _ => {
                return Err(QueryError::Execution(format!(
                    "no range vector argument to {name}"
                )));
            }
        };
        if arg.anchored && !ANCHORED_SAFE.contains(&name) {
            return Err(QueryError::Execution(format!(
                "anchored modifier can only be used with: {} - not with {name}",
                ANCHORED_SAFE_SORTED.join(", ")
            )));
        }
        if arg.smoothed && !SMOOTHED_SAFE.contains(&name) {
            return Err(QueryError::Execution(format!(
                "smoothed modifier can only be used with: {} - not with {name}",
                SMOOTHED_SAFE_SORTED.join(", ")
            )));
        }
        let arg_pos: Vec<PosRange> = args.iter().map(|a| a.pos()).collect();
        let refs = self.reference_times(arg.at, arg.offset);
        let keep_name = name == "last_over_time" || name == "first_over_time";
        let mut out = Vec::with_capacity(arg.series.len());
        let mut step_params = vec![0.0; params.len()];
        for s in &arg.series {
            self.check_deadline()?;
            // A subquery's series may already have lost its name (`last_over_time(abs(x)[5m:])`).
            let mut es = EvSeries::new(s.labels.clone(), !keep_name || s.drop_name);
            if !s.floats.is_empty() {
                es.floats.reserve(refs.len());
            }
            let mut windows = Windows::new(s);
            for (step, &(ts, r)) in refs.iter().enumerate() {
                let (mint, maxt) = arg.bounds(r, self.lookback);
                let (floats, hists) = windows.at(mint, maxt);
                if floats.is_empty() && hists.is_empty() {
                    continue;
                }
                if (arg.anchored || arg.smoothed) && !hists.is_empty() {
                    return Err(QueryError::Execution(
                        "smoothed and anchored modifiers do not work with native histograms"
                            .to_string(),
                    ));
                }
                for (slot, p) in step_params.iter_mut().zip(&params) {
                    *slot = p.get(step).copied().unwrap_or(f64::NAN);
                }
                let w = Window {
                    floats,
                    hists,
                    ts,
                    r,
                    arg: &arg,
                    labels: &s.labels,
                    params: &step_params,
                    arg_pos: &arg_pos,
                };
                let mut notes: Vec<Note> = Vec::new();
                let result = call_range(name, &w, &mut notes)?;
                for n in notes {
                    self.note(n);
                }
                match result {
                    Some(RangeOut::Float(f)) => es.push(ts, f, None),
                    Some(RangeOut::Hist(h)) => es.push(ts, 0.0, Some(h)),
                    None => {}
                }
            }
            if es.is_empty() {
                continue;
            }
            self.add_samples(es.sample_count())?;
            if matches!(name, "rate" | "increase") && !es.floats.is_empty() {
                let metric = metric_name(&s.labels);
                if !metric.is_empty()
                    && !["_total", "_sum", "_count", "_bucket"]
                        .iter()
                        .any(|suffix| metric.ends_with(suffix))
                {
                    self.note(annotations::possible_non_counter(metric, arg.pos));
                }
            }
            out.push(es);
        }
        if name == "absent_over_time" {
            return self.absent_over_time(out, args.get(idx).copied());
        }
        Ok(out)
    }

    /// `absent_over_time`: 1 at the steps where no series had samples.
    fn absent_over_time(
        &mut self,
        mat: Vec<EvSeries>,
        arg: Option<&Expr>,
    ) -> Result<Vec<EvSeries>> {
        let steps = self.num_steps();
        if mat.iter().any(|s| s.floats.len() + s.hists.len() == steps) {
            return Ok(Vec::new());
        }
        let mut found = std::collections::HashSet::new();
        for s in &mat {
            found.extend(s.floats.iter().map(|p| p.t));
            found.extend(s.hists.iter().map(|p| p.t));
        }
        let labels = match arg {
            Some(Expr::MatrixSelector(ms)) => absent_labels(&ms.vector.matchers),
            _ => Labels::new(),
        };
        let mut s = EvSeries::new(Arc::new(labels), true);
        for ts in self.steps() {
            if !found.contains(&ts) {
                s.push(ts, 1.0, None);
            }
        }
        if s.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![s])
    }
}

/// The labels `absent()` gives its result: those matched by exactly one equality matcher.
pub(crate) fn absent_labels(matchers: &[crate::ast::Matcher]) -> Labels {
    let mut labels = Labels::new();
    let mut has = std::collections::HashSet::new();
    for m in matchers {
        if m.name == crate::value::METRIC_NAME {
            continue;
        }
        if m.op == MatchOp::Equal && !has.contains(m.name.as_str()) {
            labels.set(m.name.clone(), m.value.clone());
            has.insert(m.name.as_str());
        } else {
            labels.remove(&m.name);
        }
    }
    labels
}

const ANCHORED_SAFE_SORTED: [&str; 5] = ["changes", "delta", "increase", "rate", "resets"];
const SMOOTHED_SAFE_SORTED: [&str; 3] = ["delta", "increase", "rate"];

/// Dispatches a function over one window.
fn call_range(name: &str, w: &Window<'_>, notes: &mut Vec<Note>) -> Result<Option<RangeOut>> {
    use super::func_over_time as ot;
    use super::func_rate as rate;
    Ok(match name {
        "rate" => rate::extrapolated_rate(w, true, true, notes),
        "increase" => rate::extrapolated_rate(w, true, false, notes),
        "delta" => rate::extrapolated_rate(w, false, false, notes),
        "irate" => rate::instant_value(w, true, notes),
        "idelta" => rate::instant_value(w, false, notes),
        "deriv" => rate::deriv(w, notes),
        "predict_linear" => rate::predict_linear(w, notes),
        "double_exponential_smoothing" | "holt_winters" => {
            rate::double_exponential_smoothing(w, notes)?
        }
        "avg_over_time" => ot::avg_over_time(w, notes),
        "sum_over_time" => ot::sum_over_time(w, notes),
        "count_over_time" => Some(RangeOut::Float((w.floats.len() + w.hists.len()) as f64)),
        "present_over_time" | "absent_over_time" => Some(RangeOut::Float(1.0)),
        "first_over_time" => ot::first_over_time(w),
        "last_over_time" => ot::last_over_time(w),
        "ts_of_first_over_time" => ot::ts_of_first(w),
        "ts_of_last_over_time" => ot::ts_of_last(w),
        "max_over_time" => ot::compare_over_time(w, notes, |cur, m| cur > m || m.is_nan(), false),
        "min_over_time" => ot::compare_over_time(w, notes, |cur, m| cur < m || m.is_nan(), false),
        "ts_of_max_over_time" => {
            ot::compare_over_time(w, notes, |cur, m| cur >= m || m.is_nan(), true)
        }
        "ts_of_min_over_time" => {
            ot::compare_over_time(w, notes, |cur, m| cur <= m || m.is_nan(), true)
        }
        "quantile_over_time" => ot::quantile_over_time(w, notes),
        "mad_over_time" => ot::mad_over_time(w, notes),
        "stddev_over_time" => ot::variance_over_time(w, notes, true),
        "stdvar_over_time" => ot::variance_over_time(w, notes, false),
        "changes" => ot::changes(w),
        "resets" => ot::resets(w),
        other => {
            return Err(QueryError::Execution(format!(
                "function {other} is not supported over range vectors"
            )));
        }
    })
}

/// The sample of a vector for the scalar argument `i` of a call (NaN when absent).
pub(crate) fn scalar_arg(vectors: &[Vec<Sample>], i: usize) -> f64 {
    vectors
        .get(i)
        .and_then(|v| v.first())
        .map_or(f64::NAN, |s| s.f)
}
