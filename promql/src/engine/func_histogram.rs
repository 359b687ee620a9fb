//! Functions over histograms: the statistics of native histograms (`histogram_count`,
//! `_sum`, `_avg`, `_stddev`, `_stdvar`) and quantiles and fractions of native and classic
//! (`le`-labelled bucket series) histograms.

use std::collections::HashMap;
use std::sync::Arc;

use super::annotations::{self, Note};
use super::eval::Evaluator;
use super::functions::scalar_arg;
use super::series::{Sample, metric_name};
use super::{Hist, Result};
use crate::ast::{Expr, PosRange, format_go_float};
use crate::histogram::FloatHistogram;
use crate::quantile::{
    ClassicBucket, QuantileNote, bucket_fraction, bucket_quantile, histogram_avg,
    histogram_fraction, histogram_quantile, histogram_stddev, histogram_stdvar,
};
use crate::value::{Labels, METRIC_NAME};

/// The native and classic histograms of a vector.
struct Split {
    natives: Vec<(Arc<Labels>, Hist)>,
    /// Classic histograms: labels without `le` and the name, and their buckets.
    classics: Vec<(Labels, Vec<ClassicBucket>)>,
}

/// Sorts the samples into native histograms and classic bucket series (grouped by their
/// labels without `le`); a native and a classic histogram of the same series cancel out.
fn split(vec: &[Sample], pos: PosRange, notes: &mut Vec<Note>) -> Split {
    let mut index: HashMap<Labels, usize> = HashMap::new();
    let mut classics: Vec<(Labels, Vec<ClassicBucket>)> = Vec::new();
    let mut natives = Vec::new();
    for s in vec {
        if let Some(h) = &s.h {
            natives.push((s.labels.clone(), h.clone()));
            continue;
        }
        let le = s.labels.get("le").unwrap_or("");
        let Some(upper) = parse_go_float(le) else {
            notes.push(annotations::bad_bucket_label(
                metric_name(&s.labels),
                le,
                pos,
            ));
            continue;
        };
        let key = s.labels.filter(|n| n != "le");
        let i = *index.entry(key).or_insert_with(|| {
            let labels = s.labels.filter(|n| n != "le" && n != METRIC_NAME);
            classics.push((labels, Vec::new()));
            classics.len() - 1
        });
        if let Some((_, buckets)) = classics.get_mut(i) {
            buckets.push(ClassicBucket::new(upper, s.f));
        }
    }
    natives.retain(|(labels, _)| match index.get(labels.as_ref()) {
        Some(&i) if classics.get(i).is_some_and(|c| !c.1.is_empty()) => {
            notes.push(annotations::mixed_classic_native(metric_name(labels), pos));
            if let Some(c) = classics.get_mut(i) {
                c.1.clear();
            }
            false
        }
        _ => true,
    });
    classics.retain(|c| !c.1.is_empty());
    Split { natives, classics }
}

/// Go's `strconv.ParseFloat` for bucket bounds (`+Inf`, `1e3`, `0x1p-2` aside).
fn parse_go_float(s: &str) -> Option<f64> {
    match s.to_ascii_lowercase().as_str() {
        "+inf" | "inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ if s.is_empty() || s.contains(['_', ' ']) => None,
        _ => s.parse::<f64>().ok(),
    }
}

/// The label value of a quantile in `histogram_quantiles`, as OpenMetrics formats floats.
fn openmetrics_float(q: f64) -> String {
    let s = format_go_float(q);
    if q.is_finite() && !s.contains(['.', 'e']) {
        format!("{s}.0")
    } else {
        s
    }
}

fn stat(vec: &[Sample], f: impl Fn(&FloatHistogram) -> f64) -> Vec<Sample> {
    vec.iter()
        .filter_map(|s| {
            let h = s.h.as_ref()?;
            Some(Sample::float(s.labels.clone(), s.t, f(h), true))
        })
        .collect()
}

/// The `histogram_*` functions at one step.
pub(crate) fn call_histogram(
    _ev: &mut Evaluator<'_>,
    name: &str,
    args: &[&Expr],
    v: &[Vec<Sample>],
    ts: i64,
    notes: &mut Vec<Note>,
) -> Result<Vec<Sample>> {
    let pos = |i: usize| args.get(i).map(|a| a.pos()).unwrap_or_default();
    let vec_at = |i: usize| v.get(i).map(Vec::as_slice).unwrap_or(&[]);
    Ok(match name {
        "histogram_count" => stat(vec_at(0), |h| h.count),
        "histogram_sum" => stat(vec_at(0), |h| h.sum),
        "histogram_avg" => stat(vec_at(0), histogram_avg),
        "histogram_stddev" => stat(vec_at(0), histogram_stddev),
        "histogram_stdvar" => stat(vec_at(0), histogram_stdvar),
        "histogram_quantile" => {
            let q = scalar_arg(v, 0);
            if q.is_nan() || !(0.0..=1.0).contains(&q) {
                notes.push(annotations::invalid_quantile(q, pos(0)));
            }
            let parts = split(vec_at(1), pos(1), notes);
            quantiles(&parts, &[q], None, ts, pos(1), notes)
        }
        "histogram_quantiles" => {
            let label = match args.get(1) {
                Some(Expr::String(s)) => s.val.clone(),
                _ => String::new(),
            };
            let mut qs = Vec::new();
            for i in 2..v.len() {
                let q = scalar_arg(v, i);
                if q.is_nan() || !(0.0..=1.0).contains(&q) {
                    notes.push(annotations::invalid_quantile(q, pos(i)));
                }
                qs.push(q);
            }
            let parts = split(vec_at(0), pos(0), notes);
            quantiles(&parts, &qs, Some(&label), ts, pos(0), notes)
        }
        "histogram_fraction" => {
            let (lower, upper) = (scalar_arg(v, 0), scalar_arg(v, 1));
            let parts = split(vec_at(2), pos(2), notes);
            let mut out = Vec::new();
            for (labels, h) in &parts.natives {
                let r = histogram_fraction(lower, upper, h);
                if let Some(note) = r.note {
                    notes.push(annotations::quantile_note(
                        note.text(),
                        metric_name(labels),
                        pos(2),
                    ));
                }
                out.push(Sample::float(labels.clone(), ts, r.value, true));
            }
            for (labels, buckets) in &parts.classics {
                let f = bucket_fraction(lower, upper, buckets);
                out.push(Sample::float(Arc::new(labels.clone()), ts, f, true));
            }
            out
        }
        _ => Vec::new(),
    })
}

/// The quantiles `qs` of every histogram; with `label`, each result labelled with its
/// quantile (`histogram_quantiles`).
fn quantiles(
    parts: &Split,
    qs: &[f64],
    label: Option<&str>,
    ts: i64,
    pos: PosRange,
    notes: &mut Vec<Note>,
) -> Vec<Sample> {
    let labelled = |labels: &Labels, q: f64| -> Arc<Labels> {
        let mut l = labels.clone();
        if let Some(name) = label {
            l.set(name, openmetrics_float(q));
        }
        Arc::new(l)
    };
    let mut out = Vec::new();
    for &q in qs {
        for (labels, h) in &parts.natives {
            let r = histogram_quantile(q, h);
            if let Some(note) = r.note {
                notes.push(annotations::quantile_note(
                    note.text(),
                    metric_name(labels),
                    pos,
                ));
            }
            let l = if label.is_some() {
                labelled(labels, q)
            } else {
                labels.clone()
            };
            out.push(Sample::float(l, ts, r.value, true));
        }
        for (labels, buckets) in &parts.classics {
            let r = bucket_quantile(q, buckets);
            if let Some(QuantileNote::ForcedMonotonicity {
                min_bucket,
                max_bucket,
                max_diff,
            }) = r.note
            {
                notes.push(annotations::forced_monotonicity(
                    metric_name(labels),
                    min_bucket,
                    max_bucket,
                    max_diff,
                    pos,
                ));
            }
            out.push(Sample::float(labelled(labels, q), ts, r.value, true));
        }
    }
    out
}
