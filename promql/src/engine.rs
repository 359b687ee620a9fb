//! The PromQL evaluator: a parsed query evaluated over the samples a [`Queryable`] gives, with
//! the semantics of Prometheus' engine (`promql/engine.go` and `functions.go`).
//!
//! Every expression is evaluated over all steps of the query at once (an instant query is a
//! query of one step): a node yields a matrix whose series hold one point per step at which
//! they have a value, and its parent walks those matrices step by step. Selectors read storage
//! once per node, for the whole time range the node needs; functions over range vectors slide a
//! window over each series instead of copying it per step.
//!
//! Guarantees:
//! - data is only read through [`Queryable`];
//! - the query stops with [`QueryError::Timeout`] once the deadline passes and with
//!   [`QueryError::TooManySamples`] once it would hold more than `max_samples` samples;
//! - no input makes it panic;
//! - functions and operators that change what a value means drop `__name__` from their
//!   results at once, as Prometheus does by default, or only at the end of the evaluation
//!   with [`EngineOptions::delayed_name_removal`] (Prometheus' feature flag
//!   `promql-delayed-name-removal`, on in its test engine);
//! - annotations (warnings and infos) carry Prometheus' texts and the `(line:col)` of the node
//!   they concern; they are deduplicated.

use std::sync::Arc;
use std::time::Instant;

use super::ast::{Expr, ValueType};
use super::histogram::FloatHistogram;
use super::parser::{self, ErrorKind};
use super::storage::Queryable;
use super::value::{self, Labels, SampleValue};

mod aggregate;
mod annotations;
mod binary;
mod eval;
mod extended;
mod func_histogram;
mod func_instant;
mod func_labels;
mod func_over_time;
mod func_rate;
mod functions;
mod info;
mod range_args;
mod selectors;
mod series;
mod sets;
mod stats;
mod topk;

use eval::Evaluator;
use series::EvSeries;

/// How queries are evaluated.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// How far back an instant selector looks for the latest sample (Prometheus: 5m).
    pub lookback_ms: i64,
    /// The most samples a query may hold in memory at once.
    pub max_samples: usize,
    /// The step of subqueries that do not give one (Prometheus: the global evaluation
    /// interval, 1m by default).
    pub subquery_step_ms: i64,
    /// When the query has to give up.
    pub deadline: Option<Instant>,
    /// Drop `__name__` at the end of the evaluation rather than where a function or operator
    /// changes the value's meaning, so that `label_replace` and friends still see it.
    pub delayed_name_removal: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            lookback_ms: 300_000,
            max_samples: 50_000_000,
            subquery_step_ms: 60_000,
            deadline: None,
            delayed_name_removal: false,
        }
    }
}

/// The result of a query.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryValue {
    Scalar {
        t: i64,
        v: f64,
    },
    String {
        t: i64,
        s: String,
    },
    /// An instant vector, in the order the evaluation produced it (it matters for `sort`,
    /// `topk` and the like).
    Vector(Vec<VectorSample>),
    /// A range vector, sorted by labels.
    Matrix(Vec<value::Series>),
}

/// One element of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorSample {
    pub labels: Labels,
    pub t: i64,
    pub value: SampleValue,
}

/// A result with its annotations, as Prometheus words them (`PromQL warning: ... (1:5)`).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryOutput {
    pub value: QueryValue,
    pub warnings: Vec<String>,
    pub infos: Vec<String>,
}

/// Why a query failed; the message is Prometheus'.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    /// The query does not parse, or its parameters are not acceptable.
    #[error("{0}")]
    BadData(String),
    /// The evaluation failed.
    #[error("{0}")]
    Execution(String),
    #[error("query timed out in expression evaluation")]
    Timeout,
    #[error("query processing would load too many samples into memory in query execution")]
    TooManySamples,
    /// Storage could not answer.
    #[error("{0}")]
    Storage(String),
}

pub(crate) type Result<T> = std::result::Result<T, QueryError>;

/// Evaluates `query` at `t_ms` (Unix milliseconds).
pub fn instant_query(
    storage: &dyn Queryable,
    query: &str,
    t_ms: i64,
    opts: &EngineOptions,
) -> Result<QueryOutput> {
    let expr = parse(query)?;
    let mut ev = Evaluator::new(storage, query, opts, t_ms, t_ms, 0);
    let out = ev.eval_top(&expr)?;
    let value = match out {
        eval::Value::String(s) => QueryValue::String { t: t_ms, s },
        eval::Value::Matrix(mat) => match expr.value_type() {
            ValueType::Scalar => QueryValue::Scalar {
                t: t_ms,
                v: mat
                    .first()
                    .and_then(|s| s.floats.first())
                    .map_or(f64::NAN, |p| p.f),
            },
            ValueType::Matrix => QueryValue::Matrix(sorted_series(mat)),
            _ => QueryValue::Vector(to_vector(mat, t_ms)),
        },
    };
    Ok(ev.finish(value))
}

/// Evaluates `query` from `start_ms` to `end_ms` every `step_ms`; the result is a matrix
/// sorted by labels (a scalar expression gives one series without labels).
pub fn range_query(
    storage: &dyn Queryable,
    query: &str,
    start_ms: i64,
    end_ms: i64,
    step_ms: i64,
    opts: &EngineOptions,
) -> Result<QueryOutput> {
    if step_ms <= 0 {
        return Err(QueryError::BadData(
            "zero or negative query resolution step widths are not accepted. Try a positive integer"
                .to_string(),
        ));
    }
    if end_ms < start_ms {
        return Err(QueryError::BadData(
            "end timestamp must not be before start time".to_string(),
        ));
    }
    let expr = parse(query)?;
    let vt = expr.value_type();
    if vt != ValueType::Vector && vt != ValueType::Scalar {
        return Err(QueryError::BadData(format!(
            "invalid expression type \"{}\" for range query, must be Scalar or instant Vector",
            vt.documented()
        )));
    }
    let mut ev = Evaluator::new(storage, query, opts, start_ms, end_ms, step_ms);
    let value = match ev.eval_top(&expr)? {
        eval::Value::Matrix(mat) => QueryValue::Matrix(sorted_series(mat)),
        eval::Value::String(_) => QueryValue::Matrix(Vec::new()),
    };
    Ok(ev.finish(value))
}

/// Parses the query; execution-time checks the parser makes become execution errors.
fn parse(query: &str) -> Result<Expr> {
    parser::parse(query).map_err(|e| match e.first() {
        Some(first) if first.kind == ErrorKind::Execution => {
            QueryError::Execution(first.message.clone())
        }
        _ => QueryError::BadData(e.to_string()),
    })
}

fn sorted_series(mat: Vec<EvSeries>) -> Vec<value::Series> {
    let mut out: Vec<value::Series> = mat
        .into_iter()
        .filter(|s| !s.floats.is_empty() || !s.hists.is_empty())
        .map(|s| value::Series {
            labels: Arc::unwrap_or_clone(s.labels),
            floats: s.floats,
            histograms: s.hists,
        })
        .collect();
    out.sort_by(|a, b| a.labels.cmp(&b.labels));
    out
}

/// One sample per series, stamped with the evaluation time.
fn to_vector(mat: Vec<EvSeries>, t: i64) -> Vec<VectorSample> {
    mat.into_iter()
        .filter_map(|s| {
            let value = if let Some(h) = s.hists.into_iter().next() {
                SampleValue::Histogram(h.h)
            } else {
                SampleValue::Float(s.floats.first()?.f)
            };
            Some(VectorSample {
                labels: Arc::unwrap_or_clone(s.labels),
                t,
                value,
            })
        })
        .collect()
}

/// A histogram sample value behind an `Arc`, as results share them.
pub(crate) type Hist = Arc<FloatHistogram>;
