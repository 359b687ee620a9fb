//! A dataset's columns as an Elasticsearch mapping (GET /{dataset}/_mapping): dotted column
//! names nest as objects' `properties`, and column types read as the field types Elasticsearch's
//! dynamic mapping gives the same values.

use serde_json::{Map, Value, json};
use strata_projections::{
    catalog::{ColumnDef, TableDef},
    schema::ColumnType,
};

use super::{ID_FIELD, TIMESTAMP_FIELD};
use crate::error::Error;

/// The Elasticsearch field type of a column.
fn field_type(column: &ColumnDef) -> Value {
    match &column.data_type {
        // A string is searchable as text, and as a keyword (also under `<name>.keyword`).
        ColumnType::Utf8 => json!({
            "type": "text",
            "fields": {"keyword": {"type": "keyword", "ignore_above": 256}},
        }),
        ColumnType::Bool => json!({"type": "boolean"}),
        ColumnType::Int8 => json!({"type": "byte"}),
        ColumnType::Int16 => json!({"type": "short"}),
        ColumnType::Int32 => json!({"type": "integer"}),
        ColumnType::Int64 => json!({"type": "long"}),
        ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 => json!({"type": "long"}),
        ColumnType::UInt64 => json!({"type": "unsigned_long"}),
        ColumnType::Float32 => json!({"type": "float"}),
        ColumnType::Float64 => json!({"type": "double"}),
        ColumnType::Timestamp { .. } | ColumnType::Date32 => json!({"type": "date"}),
        ColumnType::Binary => json!({"type": "binary"}),
        ColumnType::Vector { dim } => json!({"type": "knn_vector", "dimension": dim}),
        ColumnType::List(_) => json!({"type": "text"}),
    }
}

/// The column type of a declared Elasticsearch field type; `None` for one strata does not serve.
fn column_type(kind: &str) -> Option<ColumnType> {
    use strata_projections::schema::TimestampUnit;
    Some(match kind {
        // An IP address is kept as its text: term queries match it, ranges do not.
        "text" | "keyword" | "match_only_text" | "constant_keyword" | "wildcard" | "ip" => {
            ColumnType::Utf8
        }
        "long" | "integer" | "short" | "byte" => ColumnType::Int64,
        // unsigned_long is kept as a float64: exact up to 2^53.
        "double" | "float" | "half_float" | "scaled_float" | "unsigned_long" => ColumnType::Float64,
        "boolean" => ColumnType::Bool,
        "date" | "date_nanos" => ColumnType::Timestamp {
            unit: TimestampUnit::Milliseconds,
            utc: true,
        },
        _ => return None,
    })
}

/// The columns an Elasticsearch `mappings` object declares (PUT /{dataset}): each field of
/// `properties` (objects' `properties` flattened with dots) as the column dynamic mapping would
/// give its values. `dynamic` and `_source` are accepted; a type strata does not serve yet is a
/// 400 naming it.
pub fn declared_columns(mappings: &Value) -> Result<Vec<ColumnDef>, Error> {
    let bad = |reason: String| Error::BadRequest(format!("invalid mappings: {reason}"));
    let Value::Object(mappings) = mappings else {
        return Err(bad("they must be a JSON object".to_owned()));
    };
    let mut columns = Vec::new();
    for (key, value) in mappings {
        match key.as_str() {
            "properties" => declare("", value, &mut columns)?,
            "dynamic" | "_source" | "_meta" | "date_detection" | "numeric_detection" => {}
            other => return Err(bad(format!("[{other}] is not supported"))),
        }
    }
    Ok(columns)
}

fn declare(prefix: &str, properties: &Value, out: &mut Vec<ColumnDef>) -> Result<(), Error> {
    let bad = |reason: String| Error::BadRequest(format!("invalid mappings: {reason}"));
    let Value::Object(properties) = properties else {
        return Err(bad("[properties] must be an object".to_owned()));
    };
    for (name, field) in properties {
        let path = format!("{prefix}{name}");
        if path == ID_FIELD {
            return Err(bad(
                "[_id] is a metadata field and cannot be declared".to_owned()
            ));
        }
        let kind = field.get("type").and_then(Value::as_str);
        match (kind, field.get("properties")) {
            (None | Some("object"), Some(inner)) => declare(&format!("{path}."), inner, out)?,
            (None | Some("object"), None) => {}
            (Some(kind), _) => {
                let data_type = column_type(kind).ok_or_else(|| {
                    bad(format!(
                        "field type [{kind}] of [{path}] is not supported yet"
                    ))
                })?;
                if path == TIMESTAMP_FIELD {
                    if !matches!(data_type, ColumnType::Timestamp { .. }) {
                        return Err(bad(format!(
                            "[{TIMESTAMP_FIELD}] is a date, not a [{kind}]"
                        )));
                    }
                    continue;
                }
                out.push(ColumnDef {
                    name: path,
                    data_type,
                    nullable: true,
                });
            }
        }
    }
    Ok(())
}

/// `{"mappings": {"properties": ...}}` of a dataset: every column but `_id`, which is a
/// metadata field.
pub fn of(table: &TableDef) -> Value {
    let mut properties = Map::new();
    for column in table.columns.iter().filter(|c| c.name != ID_FIELD) {
        insert(&mut properties, &column.name, field_type(column));
    }
    json!({"mappings": {"properties": properties}})
}

/// Puts `leaf` at the dotted `path` of `properties`, making objects on the way. A column whose
/// name is also the prefix of others (`a` and `a.b`) keeps its own type; the others nest under
/// its `properties`.
fn insert(properties: &mut Map<String, Value>, path: &str, leaf: Value) {
    match path.split_once('.') {
        None => match properties.get_mut(path) {
            Some(Value::Object(existing)) => {
                if let Value::Object(leaf) = leaf {
                    for (key, value) in leaf {
                        existing.entry(key).or_insert(value);
                    }
                }
            }
            _ => {
                properties.insert(path.to_owned(), leaf);
            }
        },
        Some((head, rest)) => {
            let entry = properties
                .entry(head.to_owned())
                .or_insert_with(|| json!({}));
            let Value::Object(object) = entry else {
                return;
            };
            let inner = object.entry("properties").or_insert_with(|| json!({}));
            if let Value::Object(inner) = inner {
                insert(inner, rest, leaf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use strata_projections::schema::TimestampUnit;

    use super::*;
    use crate::documents::test_support::{column, dataset};

    #[test]
    fn declared_mappings_become_columns() {
        let mappings = json!({
            "dynamic": true,
            "properties": {
                "name": {"type": "keyword"},
                "count": {"type": "integer"},
                "user": {"properties": {"age": {"type": "double"}}},
                "@timestamp": {"type": "date"},
            },
        });
        let columns: Vec<(String, String)> = declared_columns(&mappings)
            .unwrap()
            .into_iter()
            .map(|c| (c.name, c.data_type.to_string()))
            .collect();
        let expected: Vec<(String, String)> = [
            ("count", "int64"),
            ("name", "utf8"),
            ("user.age", "float64"),
        ]
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
        assert_eq!(columns, expected);
        for (bad, needle) in [
            (
                json!({"properties": {"p": {"type": "geo_shape"}}}),
                "[geo_shape] of [p] is not supported yet",
            ),
            (
                json!({"properties": {"_id": {"type": "keyword"}}}),
                "metadata field",
            ),
            (json!({"routing": {}}), "[routing] is not supported"),
            (
                json!({"properties": {"@timestamp": {"type": "long"}}}),
                "is a date",
            ),
        ] {
            let error = declared_columns(&bad).unwrap_err().to_string();
            assert!(error.contains(needle), "{bad}: {error}");
        }
    }

    #[test]
    fn dotted_columns_nest_and_types_read_as_elasticsearch_names_them() {
        let table = dataset(vec![
            column("_id", ColumnType::Utf8),
            column(
                "@timestamp",
                ColumnType::Timestamp {
                    unit: TimestampUnit::Milliseconds,
                    utc: true,
                },
            ),
            column("status", ColumnType::Int64),
            column("user.name", ColumnType::Utf8),
            column("user.geo.lat", ColumnType::Float64),
            column("ok", ColumnType::Bool),
        ]);
        let text = json!({"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}});
        assert_eq!(
            of(&table),
            json!({"mappings": {"properties": {
                "@timestamp": {"type": "date"},
                "status": {"type": "long"},
                "user": {"properties": {
                    "name": text,
                    "geo": {"properties": {"lat": {"type": "double"}}},
                }},
                "ok": {"type": "boolean"},
            }}})
        );
    }
}
