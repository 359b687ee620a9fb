//! A record read back as the JSON object it was written as (`_source`): columns in the
//! dataset's current schema, dotted names nested again, nulls left out, and `_source`
//! filtering (a list of patterns, `{includes, excludes}`, or `false`).

use arrow::{
    array::{Array, AsArray, RecordBatch},
    datatypes::{DataType, Float64Type, Int64Type, TimeUnit, TimestampMillisecondType},
    util::display::{ArrayFormatter, FormatOptions},
};
use serde_json::{Map, Value};

use strata_projections::table::{dates::DateFormat, decimal::DecimalFormat};

use super::{ID_FIELD, IGNORED_FIELD, columns::Formats};
use crate::{error::Error, keys::pattern_matches};

/// Which fields of `_source` a search returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceFilter {
    /// `_source: false`.
    pub none: bool,
    /// Patterns (`*` wildcards); empty: every field.
    pub includes: Vec<String>,
    pub excludes: Vec<String>,
}

impl SourceFilter {
    /// Reads a search body's `_source`.
    pub fn parse(value: Option<&Value>) -> Result<SourceFilter, Error> {
        let patterns = |value: Option<&Value>| -> Result<Vec<String>, Error> {
            match value {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::String(one)) => Ok(vec![one.clone()]),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_str().map(str::to_owned).ok_or_else(|| {
                            Error::BadRequest(format!(
                                "_source patterns must be strings, not {item}"
                            ))
                        })
                    })
                    .collect(),
                Some(other) => Err(Error::BadRequest(format!(
                    "_source must be true, false, a pattern, a list of patterns or {{includes, excludes}}, not {other}"
                ))),
            }
        };
        match value {
            None | Some(Value::Bool(true)) => Ok(SourceFilter::default()),
            Some(Value::Bool(false)) => Ok(SourceFilter {
                none: true,
                ..SourceFilter::default()
            }),
            Some(Value::Object(object)) => Ok(SourceFilter {
                none: false,
                includes: patterns(object.get("includes").or(object.get("include")))?,
                excludes: patterns(object.get("excludes").or(object.get("exclude")))?,
            }),
            other => Ok(SourceFilter {
                none: false,
                includes: patterns(other)?,
                excludes: Vec::new(),
            }),
        }
    }

    fn keeps(&self, path: &str) -> bool {
        let hit = |pattern: &String| {
            pattern_matches(pattern, path)
                || path
                    .strip_prefix(pattern.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
        };
        (self.includes.is_empty() || self.includes.iter().any(hit))
            && !self.excludes.iter().any(hit)
    }
}

/// `source` as `filter` keeps it (its fields by their dotted paths); `None` for `_source:
/// false`.
pub fn filtered(source: &Map<String, Value>, filter: &SourceFilter) -> Option<Value> {
    fn walk(
        prefix: &str,
        object: &Map<String, Value>,
        filter: &SourceFilter,
        out: &mut Map<String, Value>,
    ) {
        for (key, value) in object {
            let path = match prefix.is_empty() {
                true => key.clone(),
                false => format!("{prefix}.{key}"),
            };
            match value {
                Value::Object(inner) if !filter.keeps(&path) || !filter.excludes.is_empty() => {
                    let mut kept = Map::new();
                    walk(&path, inner, filter, &mut kept);
                    if !kept.is_empty() {
                        out.insert(key.clone(), Value::Object(kept));
                    }
                }
                _ if filter.keeps(&path) => {
                    out.insert(key.clone(), value.clone());
                }
                _ => {}
            }
        }
    }
    if filter.none {
        return None;
    }
    let mut out = Map::new();
    walk("", source, filter, &mut out);
    Some(Value::Object(out))
}

/// The fields whose values row `row` of `batch` left out as malformed (its `_ignored`), if any.
pub fn ignored(batch: &RecordBatch, row: usize) -> Option<Value> {
    let column = batch.column_by_name(IGNORED_FIELD)?;
    json_value(column.as_ref(), row)
}

/// A value of a column as JSON; `None` for null.
pub fn json_value(column: &dyn Array, row: usize) -> Option<Value> {
    if column.is_null(row) {
        return None;
    }
    Some(match column.data_type() {
        DataType::Utf8 => Value::from(column.as_string::<i32>().value(row)),
        DataType::Int64 => Value::from(column.as_primitive::<Int64Type>().value(row)),
        DataType::UInt64 => Value::from(
            column
                .as_primitive::<arrow::datatypes::UInt64Type>()
                .value(row),
        ),
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32 => {
            let value = arrow::compute::cast(&column.slice(row, 1), &DataType::Int64).ok()?;
            Value::from(value.as_primitive::<Int64Type>().value(0))
        }
        DataType::Float32 => {
            // The shortest decimal that reads back as the float32: 0.1, not 0.10000000149.
            let f = column
                .as_primitive::<arrow::datatypes::Float32Type>()
                .value(row);
            let f = f.to_string().parse::<f64>().unwrap_or(f64::from(f));
            serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
        }
        DataType::Float64 => {
            let f = column.as_primitive::<Float64Type>().value(row);
            serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
        }
        // A decimal as the JSON number its exact text reads as.
        DataType::Decimal128(..) => {
            let text = column
                .as_primitive::<arrow::datatypes::Decimal128Type>()
                .value_as_string(row);
            text.parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map_or(Value::String(text), Value::Number)
        }
        DataType::Boolean => Value::from(column.as_boolean().value(row)),
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            let ms = column.as_primitive::<TimestampMillisecondType>().value(row);
            match chrono::DateTime::from_timestamp_millis(ms) {
                Some(at) => Value::from(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()),
                None => Value::from(ms),
            }
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            let ns = column
                .as_primitive::<arrow::datatypes::TimestampNanosecondType>()
                .value(row);
            // To the nanosecond, as many digits as it takes (.123, .123456, .123456789).
            let at = chrono::DateTime::from_timestamp_nanos(ns);
            Value::from(at.format("%Y-%m-%dT%H:%M:%S%.fZ").to_string())
        }
        DataType::Struct(_) => {
            // A geo point: {lat, lon}.
            let point = column.as_struct();
            let mut object = Map::new();
            for (field, child) in point.fields().iter().zip(point.columns()) {
                object.insert(field.name().clone(), json_value(child, row)?);
            }
            Value::Object(object)
        }
        DataType::FixedSizeList(..) => {
            // A vector.
            let values = column.as_fixed_size_list().value(row);
            let values = values.as_primitive::<arrow::datatypes::Float32Type>();
            Value::Array(
                values
                    .iter()
                    .map(|v| {
                        // The shortest decimal that reads back as the float32: 0.1, not
                        // 0.10000000149011612.
                        v.and_then(|f| f.to_string().parse::<f64>().ok())
                            .and_then(serde_json::Number::from_f64)
                            .map_or(Value::Null, Value::Number)
                    })
                    .collect(),
            )
        }
        DataType::List(_) => {
            // A field's several values.
            let values = column.as_list::<i32>().value(row);
            Value::Array(
                (0..values.len())
                    .map(|i| json_value(values.as_ref(), i).unwrap_or(Value::Null))
                    .collect(),
            )
        }
        _ => {
            let options = FormatOptions::default();
            let formatter = ArrayFormatter::try_new(column, &options).ok()?;
            Value::from(formatter.value(row).to_string())
        }
    })
}

/// A value of a column as JSON, its dates (one or several) printed in `format`.
fn formatted_value(column: &dyn Array, row: usize, format: Option<&DateFormat>) -> Option<Value> {
    if column.is_null(row) {
        return None;
    }
    match (format, column.data_type()) {
        (Some(format), DataType::Timestamp(TimeUnit::Millisecond, _)) => {
            Some(format.print(column.as_primitive::<TimestampMillisecondType>().value(row)))
        }
        (Some(format), DataType::Timestamp(TimeUnit::Nanosecond, _)) => Some(
            format.print_nanos(
                column
                    .as_primitive::<arrow::datatypes::TimestampNanosecondType>()
                    .value(row),
            ),
        ),
        (Some(_), DataType::List(_)) => {
            let values = column.as_list::<i32>().value(row);
            Some(Value::Array(
                (0..values.len())
                    .map(|i| formatted_value(values.as_ref(), i, format).unwrap_or(Value::Null))
                    .collect(),
            ))
        }
        _ => json_value(column, row),
    }
}

/// Puts `value` at the dotted `path` of `object`, making objects on the way; where a name on the
/// way already holds a value, the rest of the path is kept as one dotted key.
pub fn insert(object: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        None => {
            object.insert(path.to_owned(), value);
        }
        Some((head, rest)) => match object
            .entry(head.to_owned())
            .or_insert_with(|| Value::Object(Map::new()))
        {
            Value::Object(inner) => insert(inner, rest, value),
            _ => {
                object.insert(path.to_owned(), value);
            }
        },
    }
}

/// Row `row` of `batch` (a dataset's columns, with or without `_row_id`): its `_id`, and its
/// `_source` as `filter` keeps it, dates with a declared format printed in it.
pub fn record(
    batch: &RecordBatch,
    row: usize,
    filter: &SourceFilter,
    formats: &Formats,
) -> (Option<String>, Value) {
    let schema = batch.schema();
    let mut id = None;
    let mut source = Map::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        let name = field.name();
        if name == ID_FIELD {
            id = json_value(column.as_ref(), row).and_then(|v| v.as_str().map(str::to_owned));
            continue;
        }
        if name == strata_projections::table::rows::ROW_ID
            || name == IGNORED_FIELD
            || filter.none
            || !filter.keeps(name)
        {
            continue;
        }
        if let Some(value) = formatted_value(column.as_ref(), row, formats.get(name)) {
            insert(&mut source, name, value);
        }
    }
    (id, Value::Object(source))
}

/// A field a search asks back by name (`docvalue_fields`, `fields`): `name`, with `.keyword`
/// read as the field itself, and a `format`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldRequest {
    pub name: String,
    pub format: Option<String>,
}

impl FieldRequest {
    /// A list of names or `{field, format}` objects, as `key` holds it.
    pub fn parse_list(key: &str, value: Option<&Value>) -> Result<Vec<FieldRequest>, Error> {
        let invalid = |item: &Value| {
            Error::BadRequest(format!(
                "[parsing_exception] [{key}] takes field names or {{field, format}} objects, not {item}"
            ))
        };
        let items = match value {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(items)) => items.as_slice(),
            Some(one) => std::slice::from_ref(one),
        };
        items
            .iter()
            .map(|item| match item {
                Value::String(name) => Ok(FieldRequest {
                    name: name.clone(),
                    format: None,
                }),
                Value::Object(object) => {
                    let name = object.get("field").and_then(Value::as_str);
                    let format = match object.get("format") {
                        None | Some(Value::Null) => None,
                        Some(Value::String(f)) if f == "use_field_mapping" => None,
                        Some(Value::String(f)) => Some(f.clone()),
                        Some(_) => return Err(invalid(item)),
                    };
                    Ok(FieldRequest {
                        name: name.ok_or_else(|| invalid(item))?.to_owned(),
                        format,
                    })
                }
                _ => Err(invalid(item)),
            })
            .collect()
    }

    /// Checks the format before the search runs: a decimal pattern (`#.0`, `0.00`) for
    /// numbers, or a date format (`epoch_millis`, `strict_date_optional_time`, a pattern such
    /// as `yyyy-MM-dd HH:mm:ss.SSSSSS`) for dates.
    pub fn check(&self) -> Result<(), Error> {
        match self.format.as_deref() {
            None => Ok(()),
            Some(format)
                if DecimalFormat::parse(format).is_some() || DateFormat::parse(format).is_ok() =>
            {
                Ok(())
            }
            Some(format) => Err(Error::BadRequest(format!(
                "[illegal_argument_exception] format [{format}] of [{}] is not served: a decimal pattern such as #.00, or a date format such as epoch_millis",
                self.name
            ))),
        }
    }

    /// The values of a date column in row `row` printed in this request's date format, as
    /// Elasticsearch prints doc values (strings, `epoch_millis` too); `None` when the column
    /// holds no dates or the format is none.
    fn dates(&self, column: &dyn Array, row: usize) -> Option<Vec<Value>> {
        let format = DateFormat::parse(self.format.as_deref()?).ok()?;
        let text = |value: Value| match value {
            Value::String(text) => Value::String(text),
            other => Value::String(other.to_string()),
        };
        let printed = match column.data_type() {
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                vec![text(format.print(
                    column.as_primitive::<TimestampMillisecondType>().value(row),
                ))]
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => vec![text(
                format.print_nanos(
                    column
                        .as_primitive::<arrow::datatypes::TimestampNanosecondType>()
                        .value(row),
                ),
            )],
            DataType::List(_) => {
                let values = column.as_list::<i32>().value(row);
                (0..values.len())
                    .filter(|i| !values.is_null(*i))
                    .map(|i| self.dates(values.as_ref(), i))
                    .collect::<Option<Vec<Vec<Value>>>>()?
                    .into_iter()
                    .flatten()
                    .collect()
            }
            _ => return None,
        };
        Some(printed)
    }

    /// The values of this field in row `row` of `batch` (every value of a list), formatted;
    /// `None` when it has none.
    pub fn values(&self, batch: &RecordBatch, row: usize) -> Option<Vec<Value>> {
        let name = self.name.strip_suffix(".keyword").unwrap_or(&self.name);
        let column = batch.column_by_name(name)?;
        if column.is_null(row) {
            return None;
        }
        if let Some(dates) = self.dates(column.as_ref(), row) {
            return Some(dates);
        }
        let values = match json_value(column.as_ref(), row)? {
            Value::Array(items) => items,
            one => vec![one],
        };
        let format = |value: Value| -> Value {
            let number = || match &value {
                Value::Number(n) => n.as_f64(),
                Value::String(text) => chrono::DateTime::parse_from_rfc3339(text)
                    .ok()
                    .map(|at| at.timestamp_millis() as f64),
                _ => None,
            };
            match self.format.as_deref() {
                Some("epoch_millis") => match number() {
                    Some(ms) => Value::String(format!("{}", ms as i64)),
                    None => value,
                },
                Some(pattern) => match (DecimalFormat::parse(pattern), value.as_f64()) {
                    (Some(decimal), Some(f)) => Value::String(decimal.format(f)),
                    _ => value,
                },
                None => value,
            }
        };
        Some(values.into_iter().map(format).collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::{
        array::{Int64Array, StringArray, TimestampMillisecondArray},
        datatypes::{Field, Schema},
    };
    use serde_json::json;

    use super::*;

    #[test]
    fn requested_fields_come_back_as_lists_in_their_format() {
        let requests = FieldRequest::parse_list(
            "docvalue_fields",
            Some(&json!(["status", {"field": "status", "format": "#.00"}, "user.name.keyword"])),
        )
        .unwrap();
        let batch = batch();
        let values: Vec<_> = requests.iter().map(|r| r.values(&batch, 0)).collect();
        assert_eq!(values[0], Some(vec![json!(200)]));
        assert_eq!(values[1], Some(vec![json!("200.00")]));
        assert_eq!(values[2], Some(vec![json!("ann")]));
        let epoch = FieldRequest {
            name: "@timestamp".into(),
            format: Some("epoch_millis".into()),
        };
        assert_eq!(epoch.values(&batch, 0), Some(vec![json!("1795428000000")]));
        assert!(
            FieldRequest {
                name: "x".into(),
                format: Some("yyyy".into())
            }
            .check()
            .is_err()
        );
    }

    fn batch() -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("_id", DataType::Utf8, false),
            Field::new(
                "@timestamp",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                false,
            ),
            Field::new("status", DataType::Int64, true),
            Field::new("user.name", DataType::Utf8, true),
            Field::new("user.city", DataType::Utf8, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(StringArray::from(vec!["a"])),
                Arc::new(
                    TimestampMillisecondArray::from(vec![1_795_428_000_000]).with_timezone("UTC"),
                ),
                Arc::new(Int64Array::from(vec![200])),
                Arc::new(StringArray::from(vec![Some("ann")])),
                Arc::new(StringArray::from(vec![None::<&str>])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn a_record_reads_back_nested_without_nulls() {
        let (id, source) = record(&batch(), 0, &SourceFilter::default(), &Formats::default());
        assert_eq!(id.as_deref(), Some("a"));
        assert_eq!(
            source,
            json!({"@timestamp": "2026-11-23T10:00:00.000Z", "status": 200, "user": {"name": "ann"}})
        );
    }

    #[test]
    fn source_filtering_in_its_three_forms() {
        let filter = |value: Value| SourceFilter::parse(Some(&value)).unwrap();
        let source = |f: &SourceFilter| record(&batch(), 0, f, &Formats::default()).1;
        assert_eq!(source(&filter(json!(false))), json!({}));
        assert_eq!(source(&filter(json!(["stat*"]))), json!({"status": 200}));
        assert_eq!(
            source(&filter(json!("user"))),
            json!({"user": {"name": "ann"}})
        );
        assert_eq!(
            source(&filter(
                json!({"includes": ["*"], "excludes": ["user.*", "@timestamp"]})
            )),
            json!({"status": 200})
        );
        assert!(SourceFilter::parse(Some(&json!(5))).is_err());
    }
}
