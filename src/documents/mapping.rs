//! A dataset's columns as an Elasticsearch mapping (GET /{dataset}/_mapping): dotted column
//! names nest as objects' `properties`, and column types read as the field types Elasticsearch's
//! dynamic mapping gives the same values.

use serde_json::{Map, Value, json};
use strata_projections::{
    catalog::{ColumnDef, TableDef},
    schema::ColumnType,
};

use super::ID_FIELD;

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
