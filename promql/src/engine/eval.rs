//! The evaluator: its state (time range, limits, annotations), the dispatch over node types,
//! and the step-by-step driver [`Evaluator::range_eval`] that operators and functions over
//! instant vectors are written against.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::annotations::{Annotations, Note};
use super::series::{EvSeries, Sample, drop_metadata, hist_size};
use super::{EngineOptions, QueryError, QueryOutput, QueryValue, Result};
use crate::ast::{
    AtModifier, DurationContext, DurationExpr, Expr, NumberLiteral, PosRange, UnaryExpr, UnaryOp,
    VectorSelector,
};
use crate::storage::Queryable;
use crate::value::{Labels, Series};

/// The value of a node: a matrix (instant vectors and scalars are matrices with one point per
/// step; a scalar is one series without labels) or a string.
#[derive(Debug)]
pub(crate) enum Value {
    Matrix(Vec<EvSeries>),
    String(String),
}

/// The state of one query's evaluation. Subqueries evaluate their inner expression with
/// `start`, `end` and `interval` changed and restored afterwards.
pub(crate) struct Evaluator<'a> {
    pub storage: &'a dyn Queryable,
    /// The query text, for the positions of annotations.
    pub query: &'a str,
    /// The first step of the current evaluation (Unix ms).
    pub start: i64,
    /// The last step of the current evaluation (Unix ms).
    pub end: i64,
    /// The distance between steps (1 for an instant query, as in Prometheus).
    pub interval: i64,
    /// Start and end of the query itself (`@ start()`, `start()`, `end()`).
    pub query_start: i64,
    pub query_end: i64,
    /// Whether the query is a range query.
    pub is_range: bool,
    pub lookback: i64,
    pub subquery_step: i64,
    max_samples: usize,
    pub current_samples: usize,
    deadline: Option<Instant>,
    annos: Annotations,
    /// The context duration expressions are folded in: the query's step and range.
    pub dctx: DurationContext,
    /// The selectors read with histogram statistics decoding ([`super::stats`]).
    stats_selectors: HashSet<PosRange>,
    /// [`EngineOptions::delayed_name_removal`].
    delayed_name_removal: bool,
}

impl<'a> Evaluator<'a> {
    pub fn new(
        storage: &'a dyn Queryable,
        query: &'a str,
        opts: &EngineOptions,
        start: i64,
        end: i64,
        step: i64,
    ) -> Evaluator<'a> {
        Evaluator {
            storage,
            query,
            start,
            end,
            interval: if step > 0 { step } else { 1 },
            query_start: start,
            query_end: end,
            is_range: step > 0,
            lookback: opts.lookback_ms,
            subquery_step: if opts.subquery_step_ms > 0 {
                opts.subquery_step_ms
            } else {
                60_000
            },
            max_samples: opts.max_samples,
            current_samples: 0,
            deadline: opts.deadline,
            annos: Annotations::default(),
            dctx: DurationContext {
                step_ms: step.max(0),
                range_ms: end.saturating_sub(start),
            },
            stats_selectors: HashSet::new(),
            delayed_name_removal: opts.delayed_name_removal,
        }
    }

    /// Evaluates the whole query and applies the delayed name removal.
    pub fn eval_top(&mut self, expr: &Expr) -> Result<Value> {
        self.stats_selectors = super::stats::stats_selectors(expr);
        match self.eval(expr)? {
            Value::Matrix(mat) => Ok(Value::Matrix(cleanup_names(mat)?)),
            other => Ok(other),
        }
    }

    /// The result with the annotations collected.
    pub fn finish(self, value: QueryValue) -> QueryOutput {
        QueryOutput {
            value,
            warnings: self.annos.warnings,
            infos: self.annos.infos,
        }
    }

    /// The series `vs` selects, with samples from `mint` to `maxt`; read as the histogram
    /// statistics iterator reads them where the query needs only counts and sums.
    pub fn select_for(&mut self, vs: &VectorSelector, mint: i64, maxt: i64) -> Result<Vec<Series>> {
        let mut series = self.select(&vs.matchers, mint, maxt)?;
        if self.stats_selectors.contains(&vs.pos) {
            series.iter_mut().for_each(super::stats::rehint);
        }
        Ok(series)
    }

    /// Records an annotation.
    pub fn note(&mut self, note: Note) {
        self.annos.add(self.query, note);
    }

    pub fn check_deadline(&self) -> Result<()> {
        match self.deadline {
            Some(d) if Instant::now() >= d => Err(QueryError::Timeout),
            _ => Ok(()),
        }
    }

    /// Accounts for `n` more samples held in memory.
    pub fn add_samples(&mut self, n: usize) -> Result<()> {
        self.current_samples = self.current_samples.saturating_add(n);
        if self.current_samples > self.max_samples {
            return Err(QueryError::TooManySamples);
        }
        Ok(())
    }

    /// The number of steps of the current evaluation.
    pub fn num_steps(&self) -> usize {
        usize::try_from((self.end - self.start) / self.interval + 1).unwrap_or(0)
    }

    /// The step timestamps of the current evaluation.
    pub fn steps(&self) -> impl Iterator<Item = i64> + use<> {
        let (start, interval) = (self.start, self.interval);
        (0..self.num_steps()).map(move |i| start + interval * i as i64)
    }

    /// A duration in milliseconds; offsets may be negative, ranges and steps may not.
    pub fn duration_ms(&self, d: &DurationExpr, allow_negative: bool) -> Result<i64> {
        d.to_ms(&self.dctx, allow_negative)
            .map_err(|e| QueryError::BadData(e.message))
    }

    pub fn offset_ms(&self, d: &Option<DurationExpr>) -> Result<i64> {
        match d {
            None => Ok(0),
            Some(d) => self.duration_ms(d, true),
        }
    }

    /// The time an `@` modifier pins evaluation to.
    pub fn at_ms(&self, at: Option<AtModifier>) -> Option<i64> {
        at.map(|a| match a {
            AtModifier::Timestamp(t) => t,
            AtModifier::Start => self.query_start,
            AtModifier::End => self.query_end,
        })
    }

    /// Evaluates `expr` over the steps of the current evaluation.
    pub fn eval(&mut self, expr: &Expr) -> Result<Value> {
        self.check_deadline()?;
        if self.end < self.start {
            return Ok(Value::Matrix(Vec::new()));
        }
        let value = match expr {
            Expr::Aggregate(a) => self.eval_aggregate(a),
            Expr::Binary(b) => self.eval_binary(b),
            Expr::Call(c) => self.eval_call(c),
            Expr::MatrixSelector(m) => self.eval_matrix_selector(m).map(Value::Matrix),
            Expr::Number(n) => self.scalar_value(n).map(Value::Matrix),
            Expr::Paren(p) => self.eval(&p.expr),
            Expr::String(s) => Ok(Value::String(s.val.clone())),
            Expr::Subquery(s) => self.eval_subquery_result(s).map(Value::Matrix),
            Expr::Unary(u) => self.eval_unary(u),
            Expr::VectorSelector(v) => self.eval_vector_selector(v).map(Value::Matrix),
        }?;
        // Without delayed name removal, a node's result loses the names it marked at once, so
        // that its parent never sees them (and equal label sets collide here, as in Prometheus).
        match value {
            Value::Matrix(mat) if !self.delayed_name_removal && mat.iter().any(|s| s.drop_name) => {
                cleanup_names(mat).map(Value::Matrix)
            }
            other => Ok(other),
        }
    }

    /// Evaluates an expression that yields a matrix (anything but a string).
    pub fn eval_matrix(&mut self, expr: &Expr) -> Result<Vec<EvSeries>> {
        match self.eval(expr)? {
            Value::Matrix(m) => Ok(m),
            Value::String(_) => Err(QueryError::Execution(format!(
                "unexpected string expression {expr}"
            ))),
        }
    }

    /// A constant over all steps.
    pub fn constant(&mut self, v: f64) -> Result<Vec<EvSeries>> {
        let mut s = EvSeries::new(Arc::new(Labels::new()), false);
        for t in self.steps() {
            s.push(t, v, None);
        }
        self.add_samples(s.floats.len())?;
        Ok(vec![s])
    }

    fn scalar_value(&mut self, n: &NumberLiteral) -> Result<Vec<EvSeries>> {
        self.constant(n.val)
    }

    /// Evaluates a scalar expression into one value per step (NaN where it has none).
    pub fn eval_scalar_per_step(&mut self, expr: &Expr) -> Result<Vec<f64>> {
        let mat = self.eval_matrix(expr)?;
        let mut out = vec![f64::NAN; self.num_steps()];
        if let Some(s) = mat.first() {
            for p in &s.floats {
                let i = (p.t - self.start) / self.interval;
                if let Some(slot) = usize::try_from(i).ok().and_then(|i| out.get_mut(i)) {
                    *slot = p.f;
                }
            }
        }
        Ok(out)
    }

    fn eval_unary(&mut self, u: &UnaryExpr) -> Result<Value> {
        let mut mat = self.eval_matrix(&u.expr)?;
        if u.op == UnaryOp::Sub {
            for s in &mut mat {
                s.drop_name = true;
                for p in &mut s.floats {
                    p.f = -p.f;
                }
                for p in &mut s.hists {
                    let mut h = (*p.h).clone();
                    h.mul(-1.0);
                    p.h = Arc::new(h);
                }
            }
        }
        Ok(Value::Matrix(mat))
    }

    /// Runs `f` on the instant vectors of `inputs` at every step and collects its outputs
    /// into series. `ordinals` (per input, per series) are handed to `f` for the gathered
    /// samples, for vector matching. `orig` is the sample count before the inputs were
    /// evaluated.
    pub fn range_eval<F>(
        &mut self,
        inputs: Vec<Vec<EvSeries>>,
        ordinals: Option<&[Vec<usize>]>,
        orig: usize,
        mut f: F,
    ) -> Result<Vec<EvSeries>>
    where
        F: FnMut(&mut Self, i64, &[Vec<Sample>], &[Vec<usize>]) -> Result<Vec<Sample>>,
    {
        let mut cursors: Vec<Vec<(usize, usize)>> =
            inputs.iter().map(|m| vec![(0, 0); m.len()]).collect();
        let mut vectors: Vec<Vec<Sample>> =
            inputs.iter().map(|m| Vec::with_capacity(m.len())).collect();
        let mut gathered_ords: Vec<Vec<usize>> = vec![Vec::new(); inputs.len()];
        let single = self.start == self.end;
        let mut out: Vec<EvSeries> = Vec::new();
        let mut index: HashMap<Arc<Labels>, (usize, i64)> = HashMap::new();
        let mut temp = self.current_samples;
        for ts in self.steps() {
            self.check_deadline()?;
            self.current_samples = temp;
            for (i, mat) in inputs.iter().enumerate() {
                let vec = &mut vectors[i];
                vec.clear();
                gathered_ords[i].clear();
                for (si, s) in mat.iter().enumerate() {
                    let cur = &mut cursors[i][si];
                    let sample = if s.floats.get(cur.0).is_some_and(|p| p.t == ts) {
                        let f = s.floats[cur.0].f;
                        cur.0 += 1;
                        Sample::float(s.labels.clone(), ts, f, s.drop_name)
                    } else if s.hists.get(cur.1).is_some_and(|p| p.t == ts) {
                        let h = s.hists[cur.1].h.clone();
                        cur.1 += 1;
                        Sample {
                            labels: s.labels.clone(),
                            t: ts,
                            f: 0.0,
                            h: Some(h),
                            drop_name: s.drop_name,
                        }
                    } else {
                        continue;
                    };
                    vec.push(sample);
                    if let Some(ords) = ordinals {
                        gathered_ords[i].push(ords[i].get(si).copied().unwrap_or(0));
                    }
                    self.add_samples(1)?;
                }
            }
            let result = f(self, ts, &vectors, &gathered_ords)?;
            let n: usize = result
                .iter()
                .map(|s| s.h.as_ref().map_or(1, |h| hist_size(h)))
                .sum();
            self.add_samples(n)?;
            temp = temp.saturating_add(n);
            if single {
                for s in result {
                    let mut series = EvSeries::new(s.labels, s.drop_name);
                    series.push(ts, s.f, s.h);
                    out.push(series);
                }
                break;
            }
            for s in result {
                match index.get_mut(&s.labels) {
                    Some((i, last)) => {
                        if *last == ts {
                            return Err(duplicate_labelset());
                        }
                        *last = ts;
                        if let Some(series) = out.get_mut(*i) {
                            series.push(ts, s.f, s.h);
                        }
                    }
                    None => {
                        index.insert(s.labels.clone(), (out.len(), ts));
                        let mut series = EvSeries::new(s.labels, s.drop_name);
                        series.push(ts, s.f, s.h);
                        out.push(series);
                    }
                }
            }
        }
        self.current_samples = orig.saturating_add(out.iter().map(EvSeries::sample_count).sum());
        Ok(out)
    }
}

pub(crate) fn duplicate_labelset() -> QueryError {
    QueryError::Execution("vector cannot contain metrics with the same labelset".to_string())
}

/// Drops the metric name (and the other metadata labels) of the series marked for it, then
/// merges series that became equal; two points at one time are an error.
pub(crate) fn cleanup_names(mat: Vec<EvSeries>) -> Result<Vec<EvSeries>> {
    let mat: Vec<EvSeries> = mat
        .into_iter()
        .map(|mut s| {
            if s.drop_name {
                s.labels = Arc::new(drop_metadata(&s.labels));
                s.drop_name = false;
            }
            s
        })
        .collect();
    merge_same_labels(mat)
}

/// Merges series with equal labels into one; points at the same time are an error.
pub(crate) fn merge_same_labels(mat: Vec<EvSeries>) -> Result<Vec<EvSeries>> {
    let mut index: HashMap<Arc<Labels>, usize> = HashMap::with_capacity(mat.len());
    let mut out: Vec<EvSeries> = Vec::with_capacity(mat.len());
    let mut merged_any = false;
    for s in mat {
        match index.get(&s.labels) {
            Some(&i) => {
                merged_any = true;
                if let Some(base) = out.get_mut(i) {
                    base.floats.extend(s.floats);
                    base.hists.extend(s.hists);
                    base.drop_name |= s.drop_name;
                }
            }
            None => {
                index.insert(s.labels.clone(), out.len());
                out.push(s);
            }
        }
    }
    if merged_any {
        for s in &mut out {
            s.floats.sort_by_key(|p| p.t);
            s.hists.sort_by_key(|p| p.t);
            let dup_f = s.floats.windows(2).any(|w| w[0].t == w[1].t);
            let dup_h = s.hists.windows(2).any(|w| w[0].t == w[1].t);
            let cross = !s.floats.is_empty()
                && !s.hists.is_empty()
                && s.hists
                    .iter()
                    .any(|h| s.floats.binary_search_by_key(&h.t, |p| p.t).is_ok());
            if dup_f || dup_h || cross {
                return Err(duplicate_labelset());
            }
        }
    }
    Ok(out)
}
