//! Arrow values as the JSON of a search response: in `_source` (timestamps as RFC 3339, dates
//! as `YYYY-MM-DD`), as sort values and aggregation keys (dates as epoch milliseconds, as the
//! search engine writes them), and as `_id`.

use arrow::{
    array::{Array, AsArray},
    datatypes::{
        DataType, Int8Type, Int16Type, Int32Type, Int64Type, TimeUnit, TimestampMicrosecondType,
        TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt8Type,
        UInt16Type, UInt32Type, UInt64Type,
    },
    util::display::{ArrayFormatter, FormatOptions},
};
use chrono::{DateTime, NaiveDate, SecondsFormat, TimeDelta, Utc};
use serde_json::{Number, Value};

/// Whether `data_type` holds dates or instants.
pub(super) fn is_temporal(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64
    )
}

/// Instant `t` as RFC 3339 with milliseconds and `Z`, as range keys show it.
pub(super) fn rfc3339_millis(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The value at `row` of `array` as `_source` JSON: numbers, strings, booleans, timestamps as
/// RFC 3339 (UTC, `Z`), dates as `YYYY-MM-DD`, decimals as numbers, anything else its display.
pub(super) fn json(array: &dyn Array, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Boolean => Value::Bool(array.as_boolean().value(row)),
        DataType::Int8 => Value::from(array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => Value::from(array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => Value::from(array.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => Value::from(array.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => Value::from(array.as_primitive::<UInt8Type>().value(row)),
        DataType::UInt16 => Value::from(array.as_primitive::<UInt16Type>().value(row)),
        DataType::UInt32 => Value::from(array.as_primitive::<UInt32Type>().value(row)),
        DataType::UInt64 => Value::from(array.as_primitive::<UInt64Type>().value(row)),
        DataType::Utf8 => Value::from(array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => Value::from(array.as_string::<i64>().value(row)),
        DataType::Utf8View => Value::from(array.as_string_view().value(row)),
        DataType::Date32 | DataType::Date64 => instant(array, row).map_or(Value::Null, |t| {
            Value::from(t.format("%Y-%m-%d").to_string())
        }),
        DataType::Timestamp(..) => instant(array, row).map_or(Value::Null, |t| {
            Value::from(t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
        }),
        DataType::Float16
        | DataType::Float32
        | DataType::Float64
        | DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => number(&display(array, row)),
        _ => Value::from(display(array, row)),
    }
}

/// The value at `row` of `array` as a sort value or aggregation key: as in `_source`, but
/// dates and timestamps as epoch milliseconds.
pub(super) fn sort_value(array: &dyn Array, row: usize) -> Value {
    if is_temporal(array.data_type()) && !array.is_null(row) {
        return instant(array, row).map_or(Value::Null, |t| Value::from(t.timestamp_millis()));
    }
    json(array, row)
}

/// The value at `row` of `array` as a hit's `_id`, `None` when null.
pub(super) fn id(array: &dyn Array, row: usize) -> Option<String> {
    match json(array, row) {
        Value::Null => None,
        Value::String(s) => Some(s),
        other => Some(other.to_string()),
    }
}

/// The display of the value at `row` of `array` (empty if it cannot be shown).
fn display(array: &dyn Array, row: usize) -> String {
    ArrayFormatter::try_new(array, &FormatOptions::default())
        .map(|f| f.value(row).to_string())
        .unwrap_or_default()
}

/// `text` as a JSON number (as the shortest one that reads back the same), else as a string.
fn number(text: &str) -> Value {
    text.parse::<Number>()
        .map_or_else(|_| Value::from(text), Value::Number)
}

/// The date or timestamp at `row` of `array` as an instant (UTC; a timestamp without time zone
/// is taken as UTC).
fn instant(array: &dyn Array, row: usize) -> Option<DateTime<Utc>> {
    match array.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => {
            DateTime::from_timestamp(array.as_primitive::<TimestampSecondType>().value(row), 0)
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => DateTime::from_timestamp_millis(
            array.as_primitive::<TimestampMillisecondType>().value(row),
        ),
        DataType::Timestamp(TimeUnit::Microsecond, _) => DateTime::from_timestamp_micros(
            array.as_primitive::<TimestampMicrosecondType>().value(row),
        ),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => Some(DateTime::from_timestamp_nanos(
            array.as_primitive::<TimestampNanosecondType>().value(row),
        )),
        DataType::Date32 => {
            let days = array
                .as_primitive::<arrow::datatypes::Date32Type>()
                .value(row);
            let date =
                NaiveDate::default().checked_add_signed(TimeDelta::try_days(days.into())?)?;
            Some(date.and_hms_opt(0, 0, 0)?.and_utc())
        }
        DataType::Date64 => DateTime::from_timestamp_millis(
            array
                .as_primitive::<arrow::datatypes::Date64Type>()
                .value(row),
        ),
        _ => None,
    }
}
