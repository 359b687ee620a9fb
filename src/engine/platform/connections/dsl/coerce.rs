//! JSON values of a search body as literals of a column's Arrow type, so that a comparison
//! needs no cast of the column (and stays something the source can take). Dates are read as
//! RFC 3339, `YYYY-MM-DD[THH:MM[:SS[.f]]]`, epoch milliseconds, or date math: `now` or
//! `<date>||`, then any of `+N<unit>`, `-N<unit>` and `/<unit>` (rounding), with the units
//! `y`, `M`, `w`, `d`, `h`/`H`, `m`, `s`.

use std::{fmt, sync::Arc};

use arrow::datatypes::{DataType, TimeUnit};
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use datafusion::common::ScalarValue;
use serde_json::Value;

/// The comparison a literal takes part in. It decides how a value that falls between two values
/// of the column's type is rounded (`gt 200.5` on integers is `gt 200`, `gte 200.5` is
/// `gte 201`), and how date rounding goes (`lte now/d` is the end of today, `gte now/d` its
/// start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Eq,
    Gt,
    Gte,
    Lt,
    Lte,
}

impl Op {
    /// Whether the comparison splits the values just after the bound (`gt`, `lte`) rather than
    /// just before it (`gte`, `lt`, `eq`): then an integer bound is rounded down and a date
    /// rounding (`/d`) goes to the end of its unit.
    fn splits_after(self) -> bool {
        matches!(self, Op::Gt | Op::Lte)
    }
}

/// How date values are read: the instant `now` stands for, and whether bare numbers are epoch
/// seconds (a `format` naming `epoch_second`) rather than milliseconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dates {
    pub now: DateTime<Utc>,
    pub epoch_seconds: bool,
}

/// Why a value cannot be a literal of a column's type, e.g. `"yesterday" is not a date`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unfit(String);

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// "`value` is not `what`".
fn unfit(value: &Value, what: &str) -> Unfit {
    Unfit(format!("{value} is not {what}"))
}

/// `value` as a literal of `data_type`, for comparison `op`.
pub(super) fn literal(
    value: &Value,
    data_type: &DataType,
    op: Op,
    dates: Dates,
) -> Result<ScalarValue, Unfit> {
    if !matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
        return Err(unfit(value, "a string, a number or a boolean"));
    }
    match data_type {
        DataType::Timestamp(unit, tz) => timestamp(instant(value, op, dates)?, *unit, tz.clone())
            .ok_or_else(|| unfit(value, "a date in range")),
        DataType::Date32 => {
            let days = instant(value, op, dates)?.date_naive() - NaiveDate::default();
            i32::try_from(days.num_days())
                .map(|d| ScalarValue::Date32(Some(d)))
                .map_err(|_| unfit(value, "a date in range"))
        }
        DataType::Date64 => Ok(ScalarValue::Date64(Some(
            instant(value, op, dates)?.timestamp_millis(),
        ))),
        DataType::Boolean => boolean(value),
        t if t.is_integer() => cast(integer(value, op)?, t, value),
        t if t.is_floating() => cast(float(value)?, t, value),
        t if t.is_string() => Ok(string(t, text(value))),
        t => cast(ScalarValue::Utf8(Some(text(value))), t, value),
    }
}

/// `text` as a literal of string type `data_type` (`Utf8` unless it is another string type).
pub(super) fn string(data_type: &DataType, text: String) -> ScalarValue {
    match data_type {
        DataType::LargeUtf8 => ScalarValue::LargeUtf8(Some(text)),
        DataType::Utf8View => ScalarValue::Utf8View(Some(text)),
        _ => ScalarValue::Utf8(Some(text)),
    }
}

/// The text of a scalar JSON value: a string as is, anything else as JSON.
pub(super) fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `scalar` cast to `data_type`; failing (out of range, unparsable) means `value` is no
/// value of that type.
fn cast(scalar: ScalarValue, data_type: &DataType, value: &Value) -> Result<ScalarValue, Unfit> {
    scalar
        .cast_to(data_type)
        .map_err(|_| unfit(value, &format!("a value of type {data_type}")))
}

/// `value` as a boolean: `true`, `false` or their strings.
fn boolean(value: &Value) -> Result<ScalarValue, Unfit> {
    match value {
        Value::Bool(b) => Ok(ScalarValue::Boolean(Some(*b))),
        Value::String(s) if s == "true" || s == "false" => {
            Ok(ScalarValue::Boolean(Some(s == "true")))
        }
        other => Err(unfit(other, "a boolean")),
    }
}

/// `value` as a number (a JSON number or a numeric string).
pub(super) fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|f| f.is_finite())
}

/// `value` as a floating-point literal.
fn float(value: &Value) -> Result<ScalarValue, Unfit> {
    number(value)
        .map(|f| ScalarValue::Float64(Some(f)))
        .ok_or_else(|| unfit(value, "a number"))
}

/// `value` as an integer literal, a fraction rounded as `op` allows (none for `eq`).
fn integer(value: &Value, op: Op) -> Result<ScalarValue, Unfit> {
    let exact = match value {
        Value::Number(n) => n
            .as_i64()
            .map(|i| ScalarValue::Int64(Some(i)))
            .or_else(|| n.as_u64().map(|u| ScalarValue::UInt64(Some(u)))),
        Value::String(s) => s
            .trim()
            .parse::<i64>()
            .ok()
            .map(|i| ScalarValue::Int64(Some(i))),
        _ => None,
    };
    if let Some(exact) = exact {
        return Ok(exact);
    }
    let f = number(value).ok_or_else(|| unfit(value, "a number"))?;
    let rounded = match op {
        Op::Eq if f.fract() != 0.0 => return Err(unfit(value, "an integer")),
        Op::Eq => f,
        op if op.splits_after() => f.floor(),
        _ => f.ceil(),
    };
    if rounded.abs() > 9.2e18 {
        return Err(unfit(value, "an integer in range"));
    }
    // Whole and in range, so the conversion is exact.
    Ok(ScalarValue::Int64(Some(rounded as i64)))
}

/// Instant `t` as a timestamp literal of `unit` and time zone `tz`.
fn timestamp(t: DateTime<Utc>, unit: TimeUnit, tz: Option<Arc<str>>) -> Option<ScalarValue> {
    Some(match unit {
        TimeUnit::Second => ScalarValue::TimestampSecond(Some(t.timestamp()), tz),
        TimeUnit::Millisecond => ScalarValue::TimestampMillisecond(Some(t.timestamp_millis()), tz),
        TimeUnit::Microsecond => ScalarValue::TimestampMicrosecond(Some(t.timestamp_micros()), tz),
        TimeUnit::Nanosecond => {
            ScalarValue::TimestampNanosecond(Some(t.timestamp_nanos_opt()?), tz)
        }
    })
}

/// `value` as an instant: a number of epoch milliseconds (seconds if `dates` says so), a date
/// or date math, rounded as `op` wants.
pub(super) fn instant(value: &Value, op: Op, dates: Dates) -> Result<DateTime<Utc>, Unfit> {
    let t = match value {
        Value::Number(n) => n.as_i64().and_then(|n| epoch(n, dates.epoch_seconds)),
        Value::String(s) => date_math(s.trim(), op.splits_after(), dates.now),
        _ => None,
    };
    t.ok_or_else(|| unfit(value, "a date"))
}

/// Epoch `n` in seconds or milliseconds as an instant.
fn epoch(n: i64, seconds: bool) -> Option<DateTime<Utc>> {
    if seconds {
        DateTime::from_timestamp(n, 0)
    } else {
        DateTime::from_timestamp_millis(n)
    }
}

/// Date math `s` (`now-1d/d`, `2024-01-01||+1M`, or a plain date); `/unit` rounds to the unit's
/// end when `round_up`, else to its start.
pub(crate) fn date_math(s: &str, round_up: bool, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let (anchor, math) = if let Some(math) = s.strip_prefix("now") {
        (now, math)
    } else if let Some((date, math)) = s.split_once("||") {
        (date_only(date)?, math)
    } else {
        (date_only(s)?, "")
    };
    strata_projections::table::dates::apply_date_math(anchor, math, round_up)
}

/// A date without math: RFC 3339, `YYYY-MM-DD[(T| )HH:MM[:SS[.f]]]` (UTC), or epoch millis.
fn date_only(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, format) {
            return Some(t.and_utc());
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Some(date.and_hms_opt(0, 0, 0)?.and_utc());
    }
    s.parse::<i64>()
        .ok()
        .and_then(DateTime::from_timestamp_millis)
}
