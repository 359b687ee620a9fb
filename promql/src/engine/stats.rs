//! Histogram statistics decoding: the selectors whose histograms feed only
//! `histogram_count`, `histogram_sum` or `histogram_avg`, and the counter-reset hints such a
//! selector reads.
//!
//! Prometheus reads those selectors through its `HistogramStatsIterator`, which decodes only
//! a histogram's count and sum and, having no buckets to hand to the engine, detects counter
//! resets itself as it iterates: a sample whose stored hint is unknown is hinted as a reset or
//! not against the sample before it. Those hints decide the engine's annotations (a mix of
//! resets and non-resets in one aggregation is a warning), so strata reproduces them.

use std::collections::HashSet;
use std::sync::Arc;

use crate::ast::{BinaryOp, Expr, PosRange};
use crate::histogram::CounterResetHint;
use crate::value::{Series, is_stale_nan};

/// The positions of the vector selectors read with statistics decoding
/// (`detectHistogramStatsDecoding`): walking up from a selector, `histogram_count`,
/// `histogram_sum` and `histogram_avg` turn it on; a subquery, a function that needs the
/// buckets (`histogram_quantile`, `histogram_quantiles`, `histogram_fraction`) or a trim
/// operator (`</`, `>/`) turns it off and ends the walk.
pub(crate) fn stats_selectors(expr: &Expr) -> HashSet<PosRange> {
    let mut found = HashSet::new();
    let mut path = Vec::new();
    visit(expr, &mut path, &mut found);
    found
}

fn visit<'e>(expr: &'e Expr, path: &mut Vec<&'e Expr>, found: &mut HashSet<PosRange>) {
    let selector = match expr {
        Expr::VectorSelector(vs) => Some(vs),
        Expr::MatrixSelector(ms) => Some(&ms.vector),
        _ => None,
    };
    if let Some(vs) = selector {
        if decodes_stats(path) {
            found.insert(vs.pos);
        }
        return;
    }
    path.push(expr);
    for child in expr.children() {
        visit(child, path, found);
    }
    path.pop();
}

fn decodes_stats(path: &[&Expr]) -> bool {
    let mut skip = false;
    for node in path.iter().rev() {
        match node {
            Expr::Subquery(_) => return false,
            Expr::Call(call) => match call.func.name {
                "histogram_count" | "histogram_sum" | "histogram_avg" => skip = true,
                "histogram_quantile" | "histogram_quantiles" | "histogram_fraction" => {
                    return false;
                }
                _ => {}
            },
            Expr::Binary(b) if matches!(b.op, BinaryOp::TrimUpper | BinaryOp::TrimLower) => {
                return false;
            }
            _ => {}
        }
    }
    skip
}

/// Re-hints the histograms of `series` as the statistics iterator reads them: a sample with
/// an unknown hint is a reset when it is one against the previous sample, not a reset
/// otherwise, and stays unknown when it is the first one read. Stale markers pass unchanged.
pub(crate) fn rehint(series: &mut Series) {
    let mut previous: Option<Arc<crate::histogram::FloatHistogram>> = None;
    for point in &mut series.histograms {
        if is_stale_nan(point.h.sum) {
            continue;
        }
        let current = point.h.clone();
        if current.counter_reset_hint == CounterResetHint::Unknown
            && let Some(prev) = &previous
        {
            let hint = if current.detect_reset(prev) {
                CounterResetHint::Reset
            } else {
                CounterResetHint::NotReset
            };
            let mut h = (*current).clone();
            h.counter_reset_hint = hint;
            point.h = Arc::new(h);
        }
        previous = Some(current);
    }
}
