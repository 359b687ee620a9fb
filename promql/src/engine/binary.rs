//! Binary operators: between scalars, between a vector and a scalar, and between two vectors
//! with their vector matching (`on`/`ignoring`, `group_left`/`group_right`, `bool`, `fill`).
//! Set operators live in [`super::sets`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::annotations::{self, Note};
use super::eval::{Evaluator, Value};
use super::series::{EvSeries, Sample, match_labels};
use super::{Hist, QueryError, Result};
use crate::ast::{
    BinaryExpr, BinaryOp, PosRange, ValueType, VectorMatchCardinality as Card, VectorMatching,
};
use crate::histogram::{CounterResetHint, HistogramError, HistogramOp, TrimSide};
use crate::value::Labels;

/// What one element operation gives: the value, whether to keep it, and what to annotate.
pub(crate) struct ElemResult {
    pub f: f64,
    pub h: Option<Hist>,
    pub keep: bool,
    /// An annotation for which the element is kept.
    pub info: Option<Note>,
    /// An annotation (or failure) for which the element is dropped.
    pub err: Option<Note>,
}

impl ElemResult {
    fn value(f: f64, h: Option<Hist>, keep: bool) -> ElemResult {
        ElemResult {
            f,
            h,
            keep,
            info: None,
            err: None,
        }
    }

    fn dropped(note: Note) -> ElemResult {
        ElemResult {
            f: 0.0,
            h: None,
            keep: false,
            info: None,
            err: Some(note),
        }
    }
}

/// Whether the operator changes what the metric means (arithmetic), so that the metric name
/// goes.
pub(crate) fn changes_metric_schema(op: BinaryOp) -> bool {
    matches!(
        op,
        BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Pow
            | BinaryOp::Mod
            | BinaryOp::Atan2
    )
}

/// The operator between two floats; comparisons give 1 or 0.
pub(crate) fn scalar_binop(op: BinaryOp, l: f64, r: f64) -> f64 {
    let b = |x: bool| if x { 1.0 } else { 0.0 };
    match op {
        BinaryOp::Add => l + r,
        BinaryOp::Sub => l - r,
        BinaryOp::Mul => l * r,
        BinaryOp::Div => l / r,
        BinaryOp::Pow => l.powf(r),
        BinaryOp::Mod => l % r,
        BinaryOp::Atan2 => l.atan2(r),
        BinaryOp::Eql => b(l == r),
        BinaryOp::Neq => b(l != r),
        BinaryOp::Gtr => b(l > r),
        BinaryOp::Lss => b(l < r),
        BinaryOp::Gte => b(l >= r),
        BinaryOp::Lte => b(l <= r),
        _ => f64::NAN,
    }
}

fn compact(mut h: crate::histogram::FloatHistogram) -> Option<Hist> {
    h.compact(0);
    Some(Arc::new(h))
}

/// The operator between two elements, floats or histograms.
pub(crate) fn elem_binop(
    op: BinaryOp,
    l: f64,
    r: f64,
    hl: Option<&Hist>,
    hr: Option<&Hist>,
    pos: PosRange,
) -> ElemResult {
    let incompatible = |lt: &str, rt: &str| {
        ElemResult::dropped(annotations::incompatible_types(lt, op.name(), rt, pos))
    };
    match (hl, hr) {
        (None, None) => match op {
            BinaryOp::Eql => ElemResult::value(l, None, l == r),
            BinaryOp::Neq => ElemResult::value(l, None, l != r),
            BinaryOp::Gtr => ElemResult::value(l, None, l > r),
            BinaryOp::Lss => ElemResult::value(l, None, l < r),
            BinaryOp::Gte => ElemResult::value(l, None, l >= r),
            BinaryOp::Lte => ElemResult::value(l, None, l <= r),
            BinaryOp::TrimUpper | BinaryOp::TrimLower => incompatible("float", "float"),
            _ => ElemResult::value(scalar_binop(op, l, r), None, true),
        },
        (None, Some(hr)) => match op {
            BinaryOp::Mul => {
                let mut h = (**hr).clone();
                h.mul(l);
                ElemResult::value(0.0, compact(h), true)
            }
            _ => incompatible("float", "histogram"),
        },
        (Some(hl), None) => match op {
            BinaryOp::Mul | BinaryOp::Div => {
                let mut h = (**hl).clone();
                if op == BinaryOp::Mul {
                    h.mul(r);
                } else {
                    h.div(r);
                }
                ElemResult::value(0.0, compact(h), true)
            }
            BinaryOp::TrimUpper | BinaryOp::TrimLower => {
                let side = if op == BinaryOp::TrimUpper {
                    TrimSide::KeepBelow
                } else {
                    TrimSide::KeepAbove
                };
                ElemResult::value(0.0, compact(hl.trim(side, r)), true)
            }
            _ => incompatible("histogram", "float"),
        },
        (Some(hl), Some(hr)) => match op {
            BinaryOp::Add | BinaryOp::Sub => {
                let mut h = (**hl).clone();
                let (outcome, hop) = if op == BinaryOp::Add {
                    (h.add(hr), HistogramOp::Addition)
                } else {
                    (h.sub(hr), HistogramOp::Subtraction)
                };
                let outcome = match outcome {
                    Ok(o) => o,
                    Err(HistogramError::IncompatibleSchema) => {
                        return ElemResult::dropped(annotations::incompatible_bucket_layout(
                            op.name(),
                            pos,
                        ));
                    }
                    Err(_) => return ElemResult::value(0.0, None, false),
                };
                if op == BinaryOp::Sub {
                    h.counter_reset_hint = CounterResetHint::Gauge;
                }
                if outcome.counter_reset_collision {
                    return ElemResult::dropped(annotations::counter_reset_collision(hop, pos));
                }
                let mut res = ElemResult::value(0.0, compact(h), true);
                if outcome.nhcb_bounds_reconciled {
                    res.info = Some(annotations::mismatched_custom_buckets(hop, pos));
                }
                res
            }
            BinaryOp::Eql => ElemResult::value(0.0, Some(hl.clone()), hl.equals(hr)),
            BinaryOp::Neq => ElemResult::value(0.0, Some(hl.clone()), !hl.equals(hr)),
            _ => incompatible("histogram", "histogram"),
        },
    }
}

/// The join signature of a series.
pub(crate) fn signature(labels: &Labels, m: &VectorMatching) -> Labels {
    match_labels(labels, m.on, &m.matching_labels)
}

/// Signature ordinals of the series of both sides (equal signatures share one).
pub(crate) fn ordinals(
    lhs: &[EvSeries],
    rhs: &[EvSeries],
    m: &VectorMatching,
) -> (Vec<Vec<usize>>, usize) {
    let mut index: HashMap<Labels, usize> = HashMap::new();
    let mut out = Vec::with_capacity(2);
    for side in [lhs, rhs] {
        let ords = side
            .iter()
            .map(|s| {
                let next = index.len();
                *index.entry(signature(&s.labels, m)).or_insert(next)
            })
            .collect();
        out.push(ords);
    }
    (out, index.len())
}

impl Evaluator<'_> {
    pub fn eval_binary(&mut self, b: &BinaryExpr) -> Result<Value> {
        let orig = self.current_samples;
        let lt = b.lhs.value_type();
        let rt = b.rhs.value_type();
        let lhs = self.eval_matrix(&b.lhs)?;
        let rhs = self.eval_matrix(&b.rhs)?;
        let pos = b.lhs.pos().merge(b.rhs.pos());
        let op = b.op;
        let mat = match (lt == ValueType::Scalar, rt == ValueType::Scalar) {
            (true, true) => self.range_eval(vec![lhs, rhs], None, orig, |_, ts, v, _| {
                let l = v.first().and_then(|x| x.first()).map_or(f64::NAN, |s| s.f);
                let r = v.get(1).and_then(|x| x.first()).map_or(f64::NAN, |s| s.f);
                Ok(vec![Sample::float(
                    Arc::new(Labels::new()),
                    ts,
                    scalar_binop(op, l, r),
                    false,
                )])
            })?,
            (false, false) => {
                let matching = b.matching.clone().unwrap_or_else(|| VectorMatching {
                    card: if op.is_set_operator() {
                        Card::ManyToMany
                    } else {
                        Card::OneToOne
                    },
                    ..VectorMatching::default()
                });
                let (ords, nsigs) = ordinals(&lhs, &rhs, &matching);
                let return_bool = b.return_bool;
                self.range_eval(vec![lhs, rhs], Some(&ords), orig, |ev, _, v, o| {
                    let empty = Vec::new();
                    let (l, r) = (v.first().unwrap_or(&empty), v.get(1).unwrap_or(&empty));
                    let eo = Vec::new();
                    let (lo, ro) = (o.first().unwrap_or(&eo), o.get(1).unwrap_or(&eo));
                    if op.is_set_operator() {
                        return Ok(super::sets::set_op(op, l, r, lo, ro, nsigs));
                    }
                    let mut note = None;
                    let out =
                        vector_binop(op, l, r, lo, ro, &matching, return_bool, pos, &mut note)?;
                    if let Some(n) = note {
                        ev.note(n);
                    }
                    Ok(out)
                })?
            }
            (lscalar, _) => {
                let return_bool = b.return_bool;
                self.range_eval(vec![lhs, rhs], None, orig, |ev, _, v, _| {
                    let empty = Vec::new();
                    let (vec, scalar) = if lscalar {
                        (v.get(1).unwrap_or(&empty), v.first())
                    } else {
                        (v.first().unwrap_or(&empty), v.get(1))
                    };
                    let s = scalar.and_then(|x| x.first()).map_or(f64::NAN, |s| s.f);
                    let mut note = None;
                    let out = vector_scalar_binop(op, vec, s, lscalar, return_bool, pos, &mut note);
                    if let Some(n) = note {
                        ev.note(n);
                    }
                    Ok(out)
                })?
            }
        };
        Ok(Value::Matrix(mat))
    }
}

/// A vector and a scalar; `swap` when the scalar is on the left.
fn vector_scalar_binop(
    op: BinaryOp,
    vec: &[Sample],
    scalar: f64,
    swap: bool,
    return_bool: bool,
    pos: PosRange,
    last_note: &mut Option<Note>,
) -> Vec<Sample> {
    let mut out = Vec::with_capacity(vec.len());
    for s in vec {
        let (mut lf, mut rf) = (s.f, scalar);
        let (mut lh, mut rh) = (s.h.as_ref(), None);
        if swap {
            std::mem::swap(&mut lf, &mut rf);
            std::mem::swap(&mut lh, &mut rh);
        }
        let mut res = elem_binop(op, lf, rf, lh, rh, pos);
        if let Some(n) = res.err.take() {
            *last_note = Some(n);
            continue;
        }
        if op.is_comparison() && swap {
            res.f = rf;
            res.h = rh.cloned();
        }
        if return_bool {
            res.f = if res.keep { 1.0 } else { 0.0 };
            res.keep = true;
        }
        if res.keep {
            out.push(Sample {
                labels: s.labels.clone(),
                t: s.t,
                f: res.f,
                h: res.h,
                drop_name: s.drop_name || changes_metric_schema(op) || return_bool,
            });
        }
    }
    out
}

/// The labels of a result element of a vector/vector operation.
fn result_labels(lhs: &Labels, rhs: &Labels, op: BinaryOp, m: &VectorMatching) -> Labels {
    let mut labels = if changes_metric_schema(op) {
        super::series::drop_metadata(lhs)
    } else {
        lhs.clone()
    };
    if m.card == Card::OneToOne {
        labels = if m.on {
            labels.filter(|n| m.matching_labels.iter().any(|x| x == n))
        } else {
            labels.filter(|n| !m.matching_labels.iter().any(|x| x == n))
        };
    }
    for name in &m.include {
        match rhs.get(name) {
            Some(v) if !v.is_empty() => labels.set(name.clone(), v.to_string()),
            _ => labels.remove(name),
        }
    }
    labels
}

/// Two vectors, arithmetic or comparison, matched by signature.
#[allow(clippy::too_many_arguments)]
fn vector_binop(
    op: BinaryOp,
    lhs: &[Sample],
    rhs: &[Sample],
    lords: &[usize],
    rords: &[usize],
    m: &VectorMatching,
    return_bool: bool,
    pos: PosRange,
    last_note: &mut Option<Note>,
) -> Result<Vec<Sample>> {
    if m.card == Card::ManyToMany {
        return Err(QueryError::Execution(
            "many-to-many only allowed for set operators".to_string(),
        ));
    }
    let fill = m.fill;
    if (lhs.is_empty() && rhs.is_empty()) || ((lhs.is_empty() || rhs.is_empty()) && !fill.is_set())
    {
        return Ok(Vec::new());
    }
    let swapped = m.card == Card::OneToMany;
    let (lhs, rhs, lords, rords) = if swapped {
        (rhs, lhs, rords, lords)
    } else {
        (lhs, rhs, lords, rords)
    };
    let mut right: HashMap<usize, &Sample> = HashMap::with_capacity(rhs.len());
    let mut right_order: Vec<usize> = Vec::with_capacity(rhs.len());
    for (i, rs) in rhs.iter().enumerate() {
        let ord = rords.get(i).copied().unwrap_or(0);
        if let Some(dup) = right.get(&ord) {
            let side = if swapped { "left" } else { "right" };
            // The pair is named in label order, so that the message is stable.
            let (first, second) = if rs.labels <= dup.labels {
                (&rs.labels, &dup.labels)
            } else {
                (&dup.labels, &rs.labels)
            };
            return Err(QueryError::Execution(format!(
                "found duplicate series for the match group {} on the {side} hand-side of the operation: [{first}, {second}];many-to-many matching not allowed: matching labels must be unique on one side",
                match_labels(&rs.labels, m.on, &m.matching_labels),
            )));
        }
        right.insert(ord, rs);
        right_order.push(ord);
    }
    let mut matched: HashMap<usize, HashSet<Arc<Labels>>> = HashMap::new();
    // Keyed by the addresses of both label sets, which the entry keeps alive.
    type Cached = (Arc<Labels>, Arc<Labels>, Arc<Labels>);
    let mut label_cache: HashMap<(usize, usize), Cached> = HashMap::new();
    let mut out = Vec::new();
    let mut do_op = |ls: &Sample,
                     rs: &Sample,
                     ord: usize,
                     out: &mut Vec<Sample>,
                     matched: &mut HashMap<usize, HashSet<Arc<Labels>>>|
     -> Result<()> {
        let (mut fl, mut fr, mut hl, mut hr) = (ls.f, rs.f, ls.h.as_ref(), rs.h.as_ref());
        if swapped {
            std::mem::swap(&mut fl, &mut fr);
            std::mem::swap(&mut hl, &mut hr);
        }
        let mut res = elem_binop(op, fl, fr, hl, hr, pos);
        if let Some(n) = res.err.take() {
            *last_note = Some(n);
            return Ok(());
        }
        if let Some(n) = res.info.take() {
            *last_note = Some(n);
        }
        if return_bool {
            res.h = None;
            res.f = if res.keep { 1.0 } else { 0.0 };
        }
        let key = (
            Arc::as_ptr(&ls.labels) as usize,
            Arc::as_ptr(&rs.labels) as usize,
        );
        let labels = label_cache
            .entry(key)
            .or_insert_with(|| {
                (
                    ls.labels.clone(),
                    rs.labels.clone(),
                    Arc::new(result_labels(&ls.labels, &rs.labels, op, m)),
                )
            })
            .2
            .clone();
        match matched.get_mut(&ord) {
            Some(_) if m.card == Card::OneToOne => {
                return Err(QueryError::Execution(
                    "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)"
                        .to_string(),
                ));
            }
            Some(set) => {
                if !set.insert(labels.clone()) {
                    return Err(QueryError::Execution(
                        "multiple matches for labels: grouping labels must ensure unique matches"
                            .to_string(),
                    ));
                }
            }
            None => {
                let mut set = HashSet::new();
                set.insert(labels.clone());
                matched.insert(ord, set);
            }
        }
        if !res.keep && !return_bool {
            return Ok(());
        }
        out.push(Sample {
            labels,
            t: ls.t,
            f: res.f,
            h: res.h,
            drop_name: return_bool,
        });
        Ok(())
    };
    for (i, ls) in lhs.iter().enumerate() {
        let ord = lords.get(i).copied().unwrap_or(0);
        match right.get(&ord) {
            Some(rs) => do_op(ls, rs, ord, &mut out, &mut matched)?,
            None => {
                if let Some(v) = fill.rhs {
                    let rs = Sample::float(
                        Arc::new(match_labels(&ls.labels, m.on, &m.matching_labels)),
                        ls.t,
                        v,
                        false,
                    );
                    do_op(ls, &rs, ord, &mut out, &mut matched)?;
                }
            }
        }
    }
    if let Some(v) = fill.lhs {
        for ord in right_order {
            if matched.contains_key(&ord) {
                continue;
            }
            let Some(rs) = right.get(&ord) else { continue };
            let ls = Sample::float(
                Arc::new(match_labels(&rs.labels, m.on, &m.matching_labels)),
                rs.t,
                v,
                false,
            );
            do_op(&ls, rs, ord, &mut out, &mut matched)?;
        }
    }
    Ok(out)
}
