//! Comparing a query's result and annotations with the expectations of an `eval` command, as
//! Prometheus' runner does (`util/almost.Equal` for floats, compacted layouts for native
//! histograms).

use std::collections::HashMap;

use strata_promql::engine::{QueryOutput, QueryValue};
use strata_promql::histogram::{DEFAULT_EPSILON, almost_equal};
use strata_promql::parser::SeriesItem;
use strata_promql::value::{Labels, SampleValue, Series, is_stale_nan};

use super::script::{Eval, Matcher, to_histogram};

/// `almost.Equal`, where a staleness marker only equals another one.
pub fn float_eq(a: f64, b: f64) -> bool {
    if is_stale_nan(a) || is_stale_nan(b) {
        return is_stale_nan(a) && is_stale_nan(b);
    }
    almost_equal(a, b, DEFAULT_EPSILON)
}

fn item_value(item: &SeriesItem) -> Option<f64> {
    match item {
        SeriesItem::Float(f) => Some(*f),
        SeriesItem::Stale => Some(strata_promql::value::stale_nan()),
        _ => None,
    }
}

fn check_kind(kind: &str, expected: &[Matcher], actual: &[String]) -> Result<(), String> {
    if expected.is_empty() {
        return Ok(());
    }
    if actual.is_empty() {
        return Err(format!("expected {kind} annotations but none were found"));
    }
    for e in expected {
        if !actual.iter().any(|a| e.matches(a)) {
            return Err(format!(
                "no {kind} annotation matches the expectation; found {actual:?}"
            ));
        }
    }
    for a in actual {
        if !expected.iter().any(|e| e.matches(a)) {
            return Err(format!("unexpected {kind} annotation {a:?}"));
        }
    }
    Ok(())
}

/// Checks the annotations of a successful query.
pub fn check_annotations(ev: &Eval, out: &QueryOutput) -> Result<(), String> {
    if ev.warn && out.warnings.is_empty() {
        return Err("expected warnings but got none".to_string());
    }
    if ev.info && out.infos.is_empty() {
        return Err("expected info annotations but got none".to_string());
    }
    check_kind("warn", &ev.warns, &out.warnings)?;
    check_kind("info", &ev.infos, &out.infos)?;
    if ev.no_warn && !out.warnings.is_empty() {
        return Err(format!("unexpected warnings {:?}", out.warnings));
    }
    if ev.no_info && !out.infos.is_empty() {
        return Err(format!("unexpected infos {:?}", out.infos));
    }
    Ok(())
}

/// Checks the result value.
pub fn compare(ev: &Eval, value: &QueryValue) -> Result<(), String> {
    let expected: HashMap<&Labels, (&Vec<SeriesItem>, usize)> =
        ev.expected.iter().map(|(l, v, p)| (l, (v, *p))).collect();
    match value {
        QueryValue::Matrix(mat) => {
            if ev.ordered {
                return Err("expected ordered result, but query returned a matrix".to_string());
            }
            if ev.scalar.is_some() {
                return Err("expected scalar result, but got matrix".to_string());
            }
            if mat.windows(2).any(|w| w[0].labels > w[1].labels) {
                return Err("matrix results should always be sorted by labels".to_string());
            }
            let (start, end, step) = match (ev.range, ev.range_vector) {
                (Some(r), _) | (None, Some(r)) => r,
                _ => (ev.at, i64::MIN, 0),
            };
            for s in mat {
                let Some((vals, _)) = expected.get(&s.labels) else {
                    return Err(format!("unexpected metric {} in result", s.labels));
                };
                compare_series(s, vals, start, end, step)?;
            }
            for l in expected.keys() {
                if !mat.iter().any(|s| &&s.labels == l) {
                    return Err(format!("expected metric {l} not found"));
                }
            }
        }
        QueryValue::Vector(vec) => {
            if ev.scalar.is_some() {
                return Err("expected scalar result, but got vector".to_string());
            }
            for (i, s) in vec.iter().enumerate() {
                let Some((vals, pos)) = expected.get(&s.labels) else {
                    return Err(format!(
                        "unexpected metric {} in result, has {:?}",
                        s.labels, s.value
                    ));
                };
                if ev.ordered && *pos != i + 1 {
                    return Err(format!(
                        "expected metric {} at position {pos} but was at {}",
                        s.labels,
                        i + 1
                    ));
                }
                match (vals.first(), &s.value) {
                    (Some(SeriesItem::Histogram(e)), SampleValue::Histogram(h)) => {
                        let eh = to_histogram(e);
                        if !eh.matches_expected(h, e.counter_reset_hint_set) {
                            return Err(format!(
                                "expected {} for {} but got {}",
                                eh.describe(),
                                s.labels,
                                h.describe()
                            ));
                        }
                    }
                    (Some(SeriesItem::Histogram(_)), SampleValue::Float(f)) => {
                        return Err(format!(
                            "expected histogram for {} but got float {f}",
                            s.labels
                        ));
                    }
                    (e, SampleValue::Histogram(h))
                        if !matches!(e, Some(SeriesItem::Histogram(_))) =>
                    {
                        return Err(format!(
                            "expected float for {} but got histogram {}",
                            s.labels,
                            h.describe()
                        ));
                    }
                    (e, SampleValue::Float(f)) => {
                        let exp = e.and_then(item_value).unwrap_or(0.0);
                        if !float_eq(exp, *f) {
                            return Err(format!("expected {exp} for {} but got {f}", s.labels));
                        }
                    }
                    _ => {}
                }
            }
            for l in expected.keys() {
                if !vec.iter().any(|s| &&s.labels == l) {
                    return Err(format!("expected metric {l} not found"));
                }
            }
        }
        QueryValue::Scalar { v, .. } => {
            let Some(exp) = ev.scalar else {
                return Err(format!(
                    "expected vector or matrix result, but got scalar {v}"
                ));
            };
            if !float_eq(exp, *v) {
                return Err(format!("expected scalar {exp} but got {v}"));
            }
        }
        QueryValue::String { s, .. } => {
            if ev.expect_string.as_deref() != Some(s.as_str()) {
                return Err(format!(
                    "expected string {:?} but got {s:?}",
                    ev.expect_string
                ));
            }
        }
    }
    Ok(())
}

fn compare_series(
    s: &Series,
    vals: &[SeriesItem],
    start: i64,
    end: i64,
    step: i64,
) -> Result<(), String> {
    let mut floats = Vec::new();
    let mut hists = Vec::new();
    for (i, item) in vals.iter().enumerate() {
        let t = start + i as i64 * step;
        if t > end {
            return Err(format!(
                "expected {} points for {}, but query time range cannot return this many points",
                vals.len(),
                s.labels
            ));
        }
        match item {
            SeriesItem::Histogram(h) => hists.push((t, h)),
            SeriesItem::Omitted => {}
            other => floats.push((t, item_value(other).unwrap_or(f64::NAN))),
        }
    }
    if floats.len() != s.floats.len() || hists.len() != s.histograms.len() {
        return Err(format!(
            "expected {} float points and {} histogram points for {}, but got {:?} and {} histograms",
            floats.len(),
            hists.len(),
            s.labels,
            s.floats.iter().map(|p| (p.t, p.f)).collect::<Vec<_>>(),
            s.histograms.len()
        ));
    }
    for ((t, f), p) in floats.iter().zip(&s.floats) {
        if *t != p.t {
            return Err(format!(
                "expected float at {t} for {}, got one at {}",
                s.labels, p.t
            ));
        }
        if !float_eq(*f, p.f) {
            return Err(format!("expected {f} at {t} for {}, got {}", s.labels, p.f));
        }
    }
    for ((t, h), p) in hists.iter().zip(&s.histograms) {
        if *t != p.t {
            return Err(format!(
                "expected histogram at {t} for {}, got one at {}",
                s.labels, p.t
            ));
        }
        let eh = to_histogram(h);
        if !eh.matches_expected(&p.h, h.counter_reset_hint_set) {
            return Err(format!(
                "expected {} at {t} for {}, got {}",
                eh.describe(),
                s.labels,
                p.h.describe()
            ));
        }
    }
    Ok(())
}
