//! How `field_*` and `count_*` conditions compare JSON values: numbers numerically (also when
//! written as strings), RFC 3339 timestamps as times, everything else as JSON. The semantics
//! are documented on [`Condition::Count`](super::Condition::Count) and
//! [`Condition::Field`](super::Condition::Field).

use std::borrow::Cow;
use std::cmp::Ordering;

use regex::Regex;
use serde_json::{Number, Value};

use super::FieldOp;

/// `count` against a `count_*` threshold, exactly for integers.
pub(super) fn compare_count(count: u64, threshold: &Number) -> Ordering {
    match (threshold.as_u64(), threshold.as_i64(), threshold.as_f64()) {
        (Some(t), _, _) => count.cmp(&t),
        (None, Some(_), _) => Ordering::Greater, // a negative integer
        (None, None, t) => (count as f64)
            .partial_cmp(&t.unwrap_or(f64::NAN))
            .unwrap_or(Ordering::Less),
    }
}

/// Applies a `field_*` op to the value `found` at `path` and the condition's `want`.
pub(super) fn evaluate_field(
    op: FieldOp,
    found: &Value,
    want: &Value,
    regex: Option<&Regex>,
    path: &str,
) -> Result<bool, String> {
    Ok(match op {
        FieldOp::Equals => loose_eq(found, want),
        FieldOp::NotEquals => !loose_eq(found, want),
        FieldOp::Contains => match found {
            Value::String(s) => s.contains(text_of(want).as_ref()),
            Value::Array(items) => items.iter().any(|item| loose_eq(item, want)),
            other => {
                let kind = kind_of(other);
                return Err(format!(
                    "field_contains needs a string or an array at {path}, not {kind}"
                ));
            }
        },
        FieldOp::StartsWith => text_of(found).starts_with(text_of(want).as_ref()),
        FieldOp::EndsWith => text_of(found).ends_with(text_of(want).as_ref()),
        FieldOp::Matches => match regex {
            Some(regex) => regex.is_match(&text_of(found)),
            None => return Err("field_matches has no compiled regex".into()),
        },
        FieldOp::GreaterThan => order(found, want, path)? == Ordering::Greater,
        FieldOp::LessThan => order(found, want, path)? == Ordering::Less,
    })
}

/// A string's content, or any other value's JSON text.
fn text_of(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(s) => Cow::Borrowed(s),
        other => Cow::Owned(other.to_string()),
    }
}

/// A type name for error messages.
pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) if timestamp_of(value).is_some() => "a timestamp string",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

/// Whether `greater_than`/`less_than` can compare `value`: a number, numeric string or time.
pub(super) fn is_orderable(value: &Value) -> bool {
    number_of(value).is_some() || timestamp_of(value).is_some()
}

/// A JSON number, or a string that parses as a finite number.
fn number_of(value: &Value) -> Option<Num> {
    match value {
        Value::Number(n) => (n.as_i64().map(i128::from))
            .or_else(|| n.as_u64().map(i128::from))
            .map(Num::Int)
            .or_else(|| n.as_f64().map(Num::Float)),
        Value::String(s) => match s.trim().parse::<i128>() {
            Ok(i) => Some(Num::Int(i)),
            Err(_) => s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(Num::Float),
        },
        _ => None,
    }
}

fn compare_numbers(a: Num, b: Num) -> Ordering {
    let as_float = |n| match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    };
    match (a, b) {
        (Num::Int(a), Num::Int(b)) => a.cmp(&b),
        _ => as_float(a)
            .partial_cmp(&as_float(b))
            .unwrap_or(Ordering::Equal),
    }
}

/// JSON equality with numbers compared numerically and numeric strings equal to numbers.
fn loose_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_) | Value::String(_))
        | (Value::String(_), Value::Number(_)) => match (number_of(a), number_of(b)) {
            (Some(x), Some(y)) => compare_numbers(x, y) == Ordering::Equal,
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| loose_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            let same = |(k, v): (&String, &Value)| y.get(k).is_some_and(|w| loose_eq(v, w));
            x.len() == y.len() && x.iter().all(same)
        }
        _ => a == b,
    }
}

/// Orders `found` against `want`: numerically, or as times when both are RFC 3339 timestamps.
fn order(found: &Value, want: &Value, path: &str) -> Result<Ordering, String> {
    if let (Some(a), Some(b)) = (number_of(found), number_of(want)) {
        return Ok(compare_numbers(a, b));
    }
    if let (Some(a), Some(b)) = (timestamp_of(found), timestamp_of(want)) {
        return Ok(a.cmp(&b));
    }
    let (found, want) = (kind_of(found), kind_of(want));
    Err(format!("cannot compare {found} at {path} with {want}"))
}

/// An RFC 3339 timestamp string (`2024-05-01T10:00:00.5+02:00`) as (epoch seconds, nanos).
pub(super) fn timestamp_of(value: &Value) -> Option<(i64, u32)> {
    let b = value.as_str()?.as_bytes();
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let digits = |from: usize, to: usize| -> Option<i64> {
        let slice = b.get(from..to)?;
        slice.iter().try_fold(0, |acc, d| {
            d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
        })
    };
    let separators = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if separators.iter().any(|&(i, c)| at(i) != c) || !matches!(at(10), b'T' | b't' | b' ') {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 7)?, digits(8, 10)?);
    let (hour, minute, second) = (digits(11, 13)?, digits(14, 16)?, digits(17, 19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if !(1..=month_days).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let (mut i, mut nanos, mut scale) = (19, 0, 1_000_000_000);
    if at(i) == b'.' {
        i += 1;
        while at(i).is_ascii_digit() {
            scale /= 10; // digits past the ninth add nothing
            nanos += u32::from(at(i) - b'0') * scale;
            i += 1;
        }
        if at(i - 1) == b'.' {
            return None;
        }
    }
    let offset = match at(i) {
        b'Z' | b'z' if b.len() == i + 1 => 0,
        sign @ (b'+' | b'-') if b.len() == i + 6 && at(i + 3) == b':' => {
            let (h, m) = (digits(i + 1, i + 3)?, digits(i + 4, i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            (h * 3600 + m * 60) * if sign == b'-' { -1 } else { 1 }
        }
        _ => return None,
    };
    // Days from 1970-01-01 to the civil date (H. Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let (era, yoe) = (y.div_euclid(400), y.rem_euclid(400));
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Some((
        days * 86_400 + hour * 3600 + minute * 60 + second - offset,
        nanos,
    ))
}
