//! Functions over instant vectors, called once per step with the vectors of their arguments
//! (a scalar argument is a vector of one sample; string arguments are read from the call).

use std::cmp::Ordering;
use std::sync::Arc;

use chrono::{DateTime, Datelike, NaiveDate, Timelike, Utc};

use super::annotations::Note;
use super::eval::Evaluator;
use super::functions::{absent_labels, scalar_arg};
use super::series::Sample;
use super::{QueryError, Result};
use crate::ast::{Call, Expr};
use crate::value::Labels;

/// Calls the instant-vector function `call` at step `ts`.
pub(crate) fn call_instant(
    ev: &mut Evaluator<'_>,
    call: &Call,
    args: &[&Expr],
    ts: i64,
    v: &[Vec<Sample>],
    notes: &mut Vec<Note>,
) -> Result<Vec<Sample>> {
    let name = call.func.name;
    let first = || v.first().map(Vec::as_slice).unwrap_or(&[]);
    if let Some(f) = math_function(name) {
        return Ok(float_map(first(), f));
    }
    if name.starts_with("histogram_") {
        return super::func_histogram::call_histogram(ev, name, args, v, ts, notes);
    }
    Ok(match name {
        "round" => {
            let to_nearest = if v.len() >= 2 { scalar_arg(v, 1) } else { 1.0 };
            let inverse = 1.0 / to_nearest;
            float_map(first(), |f| (f * inverse + 0.5).floor() / inverse)
        }
        "clamp" => clamp(first(), scalar_arg(v, 1), scalar_arg(v, 2)),
        "clamp_max" => clamp(first(), f64::NEG_INFINITY, scalar_arg(v, 1)),
        "clamp_min" => clamp(first(), scalar_arg(v, 1), f64::INFINITY),
        "timestamp" => first()
            .iter()
            .map(|s| Sample::float(s.labels.clone(), ts, s.t as f64 / 1000.0, true))
            .collect(),
        "vector" => vec![Sample::float(
            Arc::new(Labels::new()),
            ts,
            scalar_arg(v, 0),
            false,
        )],
        "scalar" => {
            let mut floats = first().iter().filter(|s| s.h.is_none());
            let value = match (floats.next(), floats.next()) {
                (Some(s), None) => s.f,
                _ => f64::NAN,
            };
            vec![Sample::float(Arc::new(Labels::new()), ts, value, false)]
        }
        "sort" => sorted_by_value(first(), false),
        "sort_desc" => sorted_by_value(first(), true),
        "sort_by_label" | "sort_by_label_desc" => {
            super::func_labels::sort_by_label(first(), args, name == "sort_by_label_desc")
        }
        "absent" => {
            if !first().is_empty() {
                Vec::new()
            } else {
                let labels = match args.first() {
                    Some(Expr::VectorSelector(vs)) => absent_labels(&vs.matchers),
                    _ => Labels::new(),
                };
                vec![Sample::float(Arc::new(labels), ts, 1.0, true)]
            }
        }
        "min_of" | "max_of" => {
            let (a, b) = (scalar_arg(v, 0), scalar_arg(v, 1));
            let value = if a.is_nan() || b.is_nan() {
                f64::NAN
            } else if name == "min_of" {
                a.min(b)
            } else {
                a.max(b)
            };
            vec![Sample::float(Arc::new(Labels::new()), ts, value, false)]
        }
        "days_in_month" | "day_of_month" | "day_of_week" | "day_of_year" | "hour" | "minute"
        | "month" | "year" => date_function(name, v, ts),
        "start_timestamp" => Vec::new(),
        other => {
            return Err(QueryError::Execution(format!(
                "function {other} is not supported"
            )));
        }
    })
}

/// The float functions applied sample by sample.
fn math_function(name: &str) -> Option<fn(f64) -> f64> {
    Some(match name {
        "abs" => f64::abs,
        "ceil" => f64::ceil,
        "floor" => f64::floor,
        "exp" => f64::exp,
        "sqrt" => f64::sqrt,
        "ln" => f64::ln,
        "log2" => f64::log2,
        "log10" => f64::log10,
        "sin" => f64::sin,
        "cos" => f64::cos,
        "tan" => f64::tan,
        "asin" => f64::asin,
        "acos" => f64::acos,
        "atan" => f64::atan,
        "sinh" => f64::sinh,
        "cosh" => f64::cosh,
        "tanh" => f64::tanh,
        "asinh" => f64::asinh,
        "acosh" => f64::acosh,
        "atanh" => f64::atanh,
        "rad" => |v| v * std::f64::consts::PI / 180.0,
        "deg" => |v| v * 180.0 / std::f64::consts::PI,
        "sgn" => |v| {
            if v < 0.0 {
                -1.0
            } else if v > 0.0 {
                1.0
            } else {
                v
            }
        },
        _ => return None,
    })
}

/// `f` applied to the float samples (histograms are left out); the name is dropped.
fn float_map(vec: &[Sample], f: impl Fn(f64) -> f64) -> Vec<Sample> {
    vec.iter()
        .filter(|s| s.h.is_none())
        .map(|s| Sample::float(s.labels.clone(), s.t, f(s.f), true))
        .collect()
}

fn clamp(vec: &[Sample], min: f64, max: f64) -> Vec<Sample> {
    if max < min {
        return Vec::new();
    }
    float_map(vec, |f| go_max(min, go_min(max, f)))
}

/// `math.Min`: NaN wins.
pub(crate) fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// `math.Max`: NaN wins.
pub(crate) fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// `sort` and `sort_desc`: floats only, NaN last either way.
fn sorted_by_value(vec: &[Sample], desc: bool) -> Vec<Sample> {
    let mut out: Vec<Sample> = vec.iter().filter(|s| s.h.is_none()).cloned().collect();
    out.sort_by(|a, b| match (a.f.is_nan(), b.f.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) if desc => b.f.total_cmp(&a.f),
        (false, false) => a.f.total_cmp(&b.f),
    });
    out
}

/// The calendar functions, of the given timestamps (seconds) or of the step time.
fn date_function(name: &str, v: &[Vec<Sample>], ts: i64) -> Vec<Sample> {
    let compute = |secs: f64| -> f64 {
        let secs = if secs.is_nan() { i64::MIN } else { secs as i64 };
        let Some(t) = DateTime::<Utc>::from_timestamp(secs, 0) else {
            return f64::NAN;
        };
        f64::from(match name {
            "days_in_month" => days_in_month(t.year(), t.month()),
            "day_of_month" => t.day(),
            "day_of_week" => t.weekday().num_days_from_sunday(),
            "day_of_year" => t.ordinal(),
            "hour" => t.hour(),
            "minute" => t.minute(),
            "month" => t.month(),
            _ => return f64::from(t.year()),
        })
    };
    match v.first() {
        None => vec![Sample::float(
            Arc::new(Labels::new()),
            ts,
            compute((ts.div_euclid(1000)) as f64),
            false,
        )],
        Some(vec) => vec
            .iter()
            .filter(|s| s.h.is_none())
            .map(|s| Sample::float(s.labels.clone(), s.t, compute(s.f), true))
            .collect(),
    }
}

fn days_in_month(year: i32, month: u32) -> u32 {
    let (ny, nm) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    match (
        NaiveDate::from_ymd_opt(year, month, 1),
        NaiveDate::from_ymd_opt(ny, nm, 1),
    ) {
        (Some(a), Some(b)) => u32::try_from((b - a).num_days()).unwrap_or(0),
        _ => 0,
    }
}
