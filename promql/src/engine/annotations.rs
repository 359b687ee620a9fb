//! Warnings and infos, worded as Prometheus' `util/annotations` words them, with the
//! `(line:col)` of the node they concern. Each text is kept once.

use std::collections::HashSet;

use crate::ast::{PosRange, annotation_position, format_go_float, go_quote};
use crate::histogram::HistogramOp;

/// The annotations of one query.
#[derive(Debug, Default)]
pub(crate) struct Annotations {
    seen: HashSet<String>,
    pub warnings: Vec<String>,
    pub infos: Vec<String>,
}

/// The kind of an annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Warning,
    Info,
}

/// An annotation before it is placed in the query text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Note {
    pub kind: Kind,
    pub text: String,
    pub pos: PosRange,
}

impl Annotations {
    /// Adds `note`, positioned in `query`.
    pub fn add(&mut self, query: &str, note: Note) {
        let (prefix, list) = match note.kind {
            Kind::Warning => ("PromQL warning", &mut self.warnings),
            Kind::Info => ("PromQL info", &mut self.infos),
        };
        let full = format!(
            "{prefix}: {} {}",
            note.text,
            annotation_position(query, note.pos)
        );
        if self.seen.insert(full.clone()) {
            list.push(full);
        }
    }
}

fn warn(text: String, pos: PosRange) -> Note {
    Note {
        kind: Kind::Warning,
        text,
        pos,
    }
}

fn info(text: String, pos: PosRange) -> Note {
    Note {
        kind: Kind::Info,
        text,
        pos,
    }
}

/// ` for metric name "x"`, or nothing without a name.
fn for_metric(name: &str) -> String {
    if name.is_empty() {
        String::new()
    } else {
        format!(" for metric name {}", go_quote(name))
    }
}

pub(crate) fn invalid_quantile(q: f64, pos: PosRange) -> Note {
    warn(
        format!(
            "quantile value should be between 0 and 1, got {}",
            format_go_float(q)
        ),
        pos,
    )
}

pub(crate) fn invalid_ratio(r: f64, to: f64, pos: PosRange) -> Note {
    warn(
        format!(
            "ratio value should be between -1 and 1, got {}, capping to {}",
            format_go_float(r),
            format_go_float(to)
        ),
        pos,
    )
}

pub(crate) fn bad_bucket_label(name: &str, le: &str, pos: PosRange) -> Note {
    warn(
        format!(
            "bucket label \"le\" is missing or has a malformed value of {}{}",
            go_quote(le),
            for_metric(name)
        ),
        pos,
    )
}

pub(crate) fn mixed_floats_histograms(name: &str, pos: PosRange) -> Note {
    warn(
        format!(
            "encountered a mix of histograms and floats for metric name {}",
            go_quote(name)
        ),
        pos,
    )
}

pub(crate) fn mixed_floats_histograms_agg(pos: PosRange) -> Note {
    warn(
        "encountered a mix of histograms and floats for aggregation".to_string(),
        pos,
    )
}

pub(crate) fn mixed_classic_native(name: &str, pos: PosRange) -> Note {
    warn(
        format!(
            "vector contains a mix of classic and native histograms{}",
            for_metric(name)
        ),
        pos,
    )
}

pub(crate) fn not_counter(name: &str, pos: PosRange) -> Note {
    warn(
        format!(
            "this native histogram metric is not a counter: {}",
            go_quote(name)
        ),
        pos,
    )
}

pub(crate) fn not_gauge(name: &str, pos: PosRange) -> Note {
    warn(
        format!(
            "this native histogram metric is not a gauge: {}",
            go_quote(name)
        ),
        pos,
    )
}

pub(crate) fn mixed_exponential_custom(name: &str, pos: PosRange) -> Note {
    warn(
        format!(
            "vector contains a mix of histograms with exponential and custom buckets schemas for metric name {}",
            go_quote(name)
        ),
        pos,
    )
}

pub(crate) fn incompatible_bucket_layout(op: &str, pos: PosRange) -> Note {
    warn(
        format!("incompatible bucket layout encountered for binary operator {op}"),
        pos,
    )
}

pub(crate) fn counter_reset_collision(op: HistogramOp, pos: PosRange) -> Note {
    warn(
        format!(
            "conflicting counter resets during histogram {}",
            op.as_str()
        ),
        pos,
    )
}

pub(crate) fn sort_in_range_query(pos: PosRange) -> Note {
    warn(
        "sort is ineffective for range queries since results are always ordered by labels"
            .to_string(),
        pos,
    )
}

pub(crate) fn possible_non_counter(name: &str, pos: PosRange) -> Note {
    info(
        format!(
            "metric might not be a counter, name does not end in _total/_sum/_count/_bucket: {}",
            go_quote(name)
        ),
        pos,
    )
}

pub(crate) fn mismatched_custom_buckets(op: HistogramOp, pos: PosRange) -> Note {
    info(
        format!(
            "mismatched custom buckets were reconciled during {}",
            op.as_str()
        ),
        pos,
    )
}

pub(crate) fn incompatible_types(lhs: &str, op: &str, rhs: &str, pos: PosRange) -> Note {
    info(
        format!(
            "incompatible sample types encountered for binary operator {}: {lhs} {op} {rhs}",
            go_quote(op)
        ),
        pos,
    )
}

pub(crate) fn histogram_ignored_in_aggregation(agg: &str, pos: PosRange) -> Note {
    info(format!("ignored histogram in {agg} aggregation"), pos)
}

pub(crate) fn histogram_ignored_in_mixed_range(name: &str, pos: PosRange) -> Note {
    info(
        format!(
            "ignored histograms in a range containing both floats and histograms for metric name {}",
            go_quote(name)
        ),
        pos,
    )
}

/// An info whose text comes from the quantile module, followed by the metric name.
pub(crate) fn quantile_note(text: &str, name: &str, pos: PosRange) -> Note {
    info(format!("{text}{}", for_metric(name)), pos)
}

/// The forced-monotonicity info of `histogram_quantile` over classic buckets.
pub(crate) fn forced_monotonicity(
    name: &str,
    min_bucket: f64,
    max_bucket: f64,
    max_diff: f64,
    pos: PosRange,
) -> Note {
    info(
        format!(
            "input to histogram_quantile needed to be fixed for monotonicity (see https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile){}, from buckets {} to {}, with a max diff of {}",
            for_metric(name),
            format_go_float(min_bucket),
            format_go_float(max_bucket),
            format_go_float(max_diff)
        ),
        pos,
    )
}
