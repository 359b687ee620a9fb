//! A record read back as the JSON object it was written as (`_source`): columns in the
//! dataset's current schema, dotted names nested again, nulls left out, and `_source`
//! filtering (a list of patterns, `{includes, excludes}`, or `false`).

use arrow::{
    array::{Array, AsArray, RecordBatch},
    datatypes::{DataType, Float64Type, Int64Type, TimeUnit, TimestampMillisecondType},
    util::display::{ArrayFormatter, FormatOptions},
};
use serde_json::{Map, Value};

use super::ID_FIELD;
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

/// A value of a column as JSON; `None` for null.
pub fn json_value(column: &dyn Array, row: usize) -> Option<Value> {
    if column.is_null(row) {
        return None;
    }
    Some(match column.data_type() {
        DataType::Utf8 => Value::from(column.as_string::<i32>().value(row)),
        DataType::Int64 => Value::from(column.as_primitive::<Int64Type>().value(row)),
        DataType::Float64 => {
            let f = column.as_primitive::<Float64Type>().value(row);
            serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
        }
        DataType::Boolean => Value::from(column.as_boolean().value(row)),
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            let ms = column.as_primitive::<TimestampMillisecondType>().value(row);
            match chrono::DateTime::from_timestamp_millis(ms) {
                Some(at) => Value::from(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()),
                None => Value::from(ms),
            }
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
        _ => {
            let options = FormatOptions::default();
            let formatter = ArrayFormatter::try_new(column, &options).ok()?;
            Value::from(formatter.value(row).to_string())
        }
    })
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
/// `_source` as `filter` keeps it.
pub fn record(batch: &RecordBatch, row: usize, filter: &SourceFilter) -> (Option<String>, Value) {
    let schema = batch.schema();
    let mut id = None;
    let mut source = Map::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        let name = field.name();
        if name == ID_FIELD {
            id = json_value(column.as_ref(), row).and_then(|v| v.as_str().map(str::to_owned));
            continue;
        }
        if name == strata_projections::table::rows::ROW_ID || filter.none || !filter.keeps(name) {
            continue;
        }
        if let Some(value) = json_value(column.as_ref(), row) {
            insert(&mut source, name, value);
        }
    }
    (id, Value::Object(source))
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
        let (id, source) = record(&batch(), 0, &SourceFilter::default());
        assert_eq!(id.as_deref(), Some("a"));
        assert_eq!(
            source,
            json!({"@timestamp": "2026-11-23T10:00:00.000Z", "status": 200, "user": {"name": "ann"}})
        );
    }

    #[test]
    fn source_filtering_in_its_three_forms() {
        let filter = |value: Value| SourceFilter::parse(Some(&value)).unwrap();
        let source = |f: &SourceFilter| record(&batch(), 0, f).1;
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
