//! A dataset's columns as an Elasticsearch mapping (GET /{dataset}/_mapping): dotted column
//! names nest as objects' `properties`, and column types read as the field types Elasticsearch's
//! dynamic mapping gives the same values.

use serde_json::{Map, Value, json};
use strata_projections::{
    catalog::{ColumnDef, DeclaredField, TableDef, VectorMetric},
    schema::{ColumnType, MAX_VECTOR_DIM},
    table::dates::DateFormat,
};

use super::{ID_FIELD, TIMESTAMP_FIELD};
use crate::error::Error;

/// OpenSearch's name of a vector space.
fn space_type(metric: VectorMetric) -> &'static str {
    match metric {
        VectorMetric::L2 => "l2",
        VectorMetric::Cosine => "cosinesimil",
        VectorMetric::Dot => "innerproduct",
    }
}

/// The Elasticsearch field type of a column of `table`.
/// The Elasticsearch type a column shows as in its dataset's mapping.
pub fn es_type(table: &TableDef, column: &ColumnDef) -> String {
    field_type(table, column)["type"]
        .as_str()
        .unwrap_or("object")
        .to_owned()
}

fn field_type(table: &TableDef, column: &ColumnDef) -> Value {
    // A declared field shows as it was declared (but for vectors, which show their index).
    if let Some(declared) = table.declared.get(&column.name) {
        let mut field = json!({"type": declared.es_type});
        if let Some(format) = table.date_formats.get(&column.name) {
            field["format"] = json!(format);
        }
        if declared.ignore_malformed {
            field["ignore_malformed"] = json!(true);
        }
        return field;
    }
    field_type_of(table, &column.name, &column.data_type)
}

fn field_type_of(table: &TableDef, name: &str, data_type: &ColumnType) -> Value {
    match data_type {
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
        // Exact, with `scale` digits after the point: Elasticsearch's scaled float.
        ColumnType::Decimal { scale, .. } => json!({
            "type": "scaled_float",
            "scaling_factor": 10u64.pow(u32::try_from(*scale).unwrap_or(0)),
        }),
        ColumnType::Timestamp { .. } | ColumnType::Date32 => match table.date_formats.get(name) {
            Some(format) => json!({"type": "date", "format": format}),
            None => json!({"type": "date"}),
        },
        ColumnType::Binary => json!({"type": "binary"}),
        ColumnType::Vector { dim } => json!({
            "type": "knn_vector",
            "dimension": dim,
            "space_type": space_type(table.vector_metric.unwrap_or(VectorMetric::Cosine)),
        }),
        ColumnType::GeoPoint => json!({"type": "geo_point"}),
        // Any field may hold several values: a list is its items' type.
        ColumnType::List(item) => field_type_of(table, name, item),
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
        "date" => ColumnType::Timestamp {
            unit: TimestampUnit::Milliseconds,
            utc: true,
        },
        // Nanoseconds since the epoch, as Elasticsearch keeps them: 1970 to 2262.
        "date_nanos" => ColumnType::Timestamp {
            unit: TimestampUnit::Nanoseconds,
            utc: true,
        },
        "geo_point" => ColumnType::GeoPoint,
        _ => return None,
    })
}

/// The range field types served, and the Elasticsearch type of their bounds.
pub const RANGE_TYPES: &[(&str, &str)] = &[
    ("date_range", "date"),
    ("long_range", "long"),
    ("integer_range", "integer"),
    ("double_range", "double"),
    ("float_range", "float"),
];

/// The bounds a range field's value may have: an object of some of these (never both
/// `gte` and `gt`, nor `lte` and `lt`), each kept in its own column `<field>.<bound>`.
pub const RANGE_BOUNDS: [&str; 4] = ["gte", "gt", "lte", "lt"];

/// The type of the bounds of a range field type (`date` of `date_range`).
pub fn range_bound_type(kind: &str) -> Option<&'static str> {
    RANGE_TYPES
        .iter()
        .find(|(range, _)| *range == kind)
        .map(|(_, bound)| *bound)
}

/// What a `mappings` object declares: columns, and the one vector field a dataset may have
/// (its vector index's column and metric).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Declared {
    pub columns: Vec<ColumnDef>,
    pub vector: Option<(String, VectorMetric)>,
    /// Date fields declared with a `format`: field → format.
    pub date_formats: std::collections::BTreeMap<String, String>,
    /// Every declared field, with its Elasticsearch type and parameters.
    pub fields: std::collections::BTreeMap<String, DeclaredField>,
    /// The index settings of the configuration that the dataset keeps (see
    /// [`super::settings::kept`]); never from a mapping alone.
    pub settings: std::collections::BTreeMap<String, String>,
}

/// The Elasticsearch types whose fields take `ignore_malformed`.
const TAKE_IGNORE_MALFORMED: &[&str] = &[
    "long",
    "integer",
    "short",
    "byte",
    "double",
    "float",
    "half_float",
    "scaled_float",
    "unsigned_long",
    "date",
    "date_nanos",
    "ip",
    "geo_point",
];

fn bad(reason: String) -> Error {
    Error::BadRequest(format!("invalid mappings: {reason}"))
}

/// The columns an Elasticsearch `mappings` object declares (PUT /{dataset}): each field of
/// `properties` (objects' `properties` flattened with dots) as the column dynamic mapping would
/// give its values; `geo_point` as a point column; one `knn_vector` (OpenSearch's, with its
/// `dimension` and `space_type`) or `dense_vector` (Elasticsearch's, `dims` and `similarity`)
/// as the dataset's vector column. `dynamic` and `_source` are accepted; a type strata does not
/// serve yet is a 400 naming it. `ignore_malformed`: the index's default for the fields that take
/// it (`index.mapping.ignore_malformed`), which a field's own setting overrides.
pub fn declared_columns(mappings: &Value, ignore_malformed: bool) -> Result<Declared, Error> {
    let Value::Object(mappings) = mappings else {
        return Err(bad("they must be a JSON object".to_owned()));
    };
    let mut declared = Declared::default();
    for (key, value) in mappings {
        match key.as_str() {
            "properties" => declare("", value, ignore_malformed, &mut declared)?,
            "dynamic" | "_source" | "_meta" | "date_detection" | "numeric_detection" => {}
            other => return Err(bad(format!("[{other}] is not supported"))),
        }
    }
    Ok(declared)
}

/// Checks that each alias `declared` names a field that holds values of its own: one it
/// declares, or one `existing` says the dataset has.
pub fn check_aliases(declared: &Declared, existing: impl Fn(&str) -> bool) -> Result<(), Error> {
    for (name, field) in &declared.fields {
        let Some(target) = field.path.as_deref().filter(|_| field.es_type == "alias") else {
            continue;
        };
        let holds_values = target == TIMESTAMP_FIELD
            || declared.columns.iter().any(|c| c.name == target)
            || existing(target);
        if !holds_values {
            return Err(bad(format!(
                "Invalid [path] value [{target}] for field alias [{name}]: an alias must refer to an existing field in the mappings"
            )));
        }
    }
    Ok(())
}

/// `index.mapping.ignore_malformed` of an index's `settings`, in any of Elasticsearch's spellings
/// (`{"index.mapping.ignore_malformed": true}`, `{"index": {"mapping": {...}}}`, ...).
pub fn ignores_malformed(settings: Option<&Value>) -> Result<bool, Error> {
    let Some(settings) = settings else {
        return Ok(false);
    };
    let value = [
        "/index.mapping.ignore_malformed",
        "/index/mapping.ignore_malformed",
        "/index/mapping/ignore_malformed",
        "/mapping.ignore_malformed",
        "/mapping/ignore_malformed",
    ]
    .iter()
    .find_map(|pointer| settings.pointer(pointer));
    match value {
        None => Ok(false),
        Some(Value::Bool(flag)) => Ok(*flag),
        Some(Value::String(text)) if text == "true" || text == "false" => Ok(text == "true"),
        Some(other) => Err(Error::BadRequest(format!(
            "invalid settings: [index.mapping.ignore_malformed] must be a boolean, not {other}"
        ))),
    }
}

/// The dimension and metric of a declared vector field.
fn vector_field(path: &str, kind: &str, field: &Value) -> Result<(u32, VectorMetric), Error> {
    let (dim_key, space) = match kind {
        "knn_vector" => (
            "dimension",
            field
                .get("space_type")
                .or_else(|| field.pointer("/method/space_type"))
                .and_then(Value::as_str)
                .unwrap_or("l2"),
        ),
        _ => (
            "dims",
            field
                .get("similarity")
                .and_then(Value::as_str)
                .unwrap_or("cosine"),
        ),
    };
    let dim = field
        .get(dim_key)
        .and_then(Value::as_u64)
        .filter(|d| (1..=u64::from(MAX_VECTOR_DIM)).contains(d))
        .ok_or_else(|| {
            bad(format!(
                "[{dim_key}] of [{path}] must be an integer from 1 to {MAX_VECTOR_DIM}"
            ))
        })?;
    let metric = match space {
        "l2" | "l2_norm" => VectorMetric::L2,
        "cosinesimil" | "cosine" => VectorMetric::Cosine,
        "innerproduct" | "dot_product" | "max_inner_product" => VectorMetric::Dot,
        other => {
            return Err(bad(format!(
                "space [{other}] of [{path}] is not supported (l2, cosinesimil, innerproduct)"
            )));
        }
    };
    Ok((dim as u32, metric))
}

fn declare(
    prefix: &str,
    properties: &Value,
    ignore_malformed: bool,
    out: &mut Declared,
) -> Result<(), Error> {
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
            (None | Some("object"), Some(inner)) => {
                declare(&format!("{path}."), inner, ignore_malformed, out)?
            }
            (None | Some("object"), None) => {}
            (Some("alias"), _) => {
                let target = field
                    .get("path")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(format!("the field alias [{path}] needs a [path]")))?;
                out.fields.insert(
                    path.clone(),
                    DeclaredField {
                        es_type: "alias".to_owned(),
                        ignore_malformed: false,
                        path: Some(target.to_owned()),
                    },
                );
            }
            (Some(kind @ ("knn_vector" | "dense_vector")), _) => {
                if let Some((other, _)) = &out.vector {
                    return Err(bad(format!(
                        "[{path}] and [{other}] are both vector fields; a dataset has one"
                    )));
                }
                let (dim, metric) = vector_field(&path, kind, field)?;
                out.vector = Some((path.clone(), metric));
                out.columns.push(ColumnDef {
                    name: path,
                    data_type: ColumnType::Vector { dim },
                    nullable: true,
                });
            }
            (Some(kind), _) if range_bound_type(kind).is_some() => {
                declare_range(&path, kind, field, out)?;
            }
            (Some(kind), _) => {
                let data_type = column_type(kind).ok_or_else(|| {
                    bad(format!(
                        "field type [{kind}] of [{path}] is not supported yet"
                    ))
                })?;
                let format = field.get("format").and_then(Value::as_str);
                if path == TIMESTAMP_FIELD {
                    if !matches!(data_type, ColumnType::Timestamp { .. }) {
                        return Err(bad(format!(
                            "[{TIMESTAMP_FIELD}] is a date, not a [{kind}]"
                        )));
                    }
                    if format.is_some() {
                        return Err(bad(format!(
                            "[{TIMESTAMP_FIELD}] takes no format: it reads ISO 8601 dates and epoch milliseconds"
                        )));
                    }
                    continue;
                }
                if let (ColumnType::Timestamp { .. }, Some(format)) = (&data_type, format) {
                    DateFormat::parse(format)
                        .map_err(|reason| bad(format!("[format] of [{path}]: {reason}")))?;
                    out.date_formats.insert(path.clone(), format.to_owned());
                }
                let takes = TAKE_IGNORE_MALFORMED.contains(&kind);
                let ignore = match field.get("ignore_malformed") {
                    None => ignore_malformed && takes,
                    Some(Value::Bool(flag)) if takes => *flag,
                    Some(Value::Bool(_)) => {
                        return Err(bad(format!(
                            "[ignore_malformed] of [{path}]: a [{kind}] field does not take it"
                        )));
                    }
                    Some(other) => {
                        return Err(bad(format!(
                            "[ignore_malformed] of [{path}] must be a boolean, not {other}"
                        )));
                    }
                };
                out.fields.insert(
                    path.clone(),
                    DeclaredField {
                        es_type: kind.to_owned(),
                        ignore_malformed: ignore,
                        path: None,
                    },
                );
                // Multi-fields: other names for the same values (`title.raw`).
                if let Some(subfields) = field.get("fields") {
                    let Value::Object(subfields) = subfields else {
                        return Err(bad(format!("[fields] of [{path}] must be an object")));
                    };
                    for (sub, definition) in subfields {
                        let kind = definition.get("type").and_then(Value::as_str).unwrap_or("");
                        if column_type(kind).is_none() {
                            return Err(bad(format!(
                                "field type [{kind}] of the multi-field [{path}.{sub}] is not supported yet"
                            )));
                        }
                        out.fields.insert(
                            format!("{path}.{sub}"),
                            DeclaredField {
                                es_type: kind.to_owned(),
                                ignore_malformed: false,
                                path: Some(path.clone()),
                            },
                        );
                    }
                }
                out.columns.push(ColumnDef {
                    name: path,
                    data_type,
                    nullable: true,
                });
            }
        }
    }
    Ok(())
}

/// A range field (`date_range`, `long_range`, ...): a column per bound, `<path>.gte`, `.gt`,
/// `.lte` and `.lt`, of the bounds' type (a date range's format reads each), and the field
/// itself, declared without a column of its own.
fn declare_range(path: &str, kind: &str, field: &Value, out: &mut Declared) -> Result<(), Error> {
    let bound = range_bound_type(kind).unwrap_or("date");
    let data_type = column_type(bound).unwrap_or(ColumnType::Float64);
    let format = field.get("format").and_then(Value::as_str);
    if let Some(format) = format {
        if bound != "date" {
            return Err(bad(format!(
                "[format] of [{path}]: a [{kind}] field takes none"
            )));
        }
        DateFormat::parse(format)
            .map_err(|reason| bad(format!("[format] of [{path}]: {reason}")))?;
    }
    for key in field.as_object().into_iter().flat_map(|f| f.keys()) {
        if !matches!(
            key.as_str(),
            "type" | "format" | "coerce" | "index" | "doc_values" | "store"
        ) {
            return Err(bad(format!(
                "unknown parameter [{key}] of the [{kind}] field [{path}]"
            )));
        }
    }
    out.fields.insert(
        path.to_owned(),
        DeclaredField {
            es_type: kind.to_owned(),
            ignore_malformed: false,
            path: None,
        },
    );
    for end in RANGE_BOUNDS {
        let name = format!("{path}.{end}");
        if let Some(format) = format {
            out.date_formats.insert(name.clone(), format.to_owned());
        }
        out.fields.insert(
            name.clone(),
            DeclaredField {
                es_type: bound.to_owned(),
                ignore_malformed: false,
                path: None,
            },
        );
        out.columns.push(ColumnDef {
            name,
            data_type: data_type.clone(),
            nullable: true,
        });
    }
    if let Some(format) = format {
        out.date_formats.insert(path.to_owned(), format.to_owned());
    }
    Ok(())
}

/// The range field a column holds a bound of (`when` of `when.gte`), if it does.
pub fn range_of<'a>(table: &'a TableDef, column: &str) -> Option<(&'a str, &'a DeclaredField)> {
    let (field, end) = column.rsplit_once('.')?;
    RANGE_BOUNDS.contains(&end).then_some(())?;
    table
        .declared
        .get_key_value(field)
        .filter(|(_, declared)| range_bound_type(&declared.es_type).is_some())
        .map(|(name, declared)| (name.as_str(), declared))
}

/// `{"mappings": {"properties": ...}}` of a dataset: every column but `_id`, which is a
/// metadata field; a range field as itself, not its bounds' columns.
pub fn of(table: &TableDef) -> Value {
    let mut properties = Map::new();
    for (name, declared) in &table.declared {
        if range_bound_type(&declared.es_type).is_some() {
            let mut leaf = json!({"type": declared.es_type});
            if let Some(format) = table.date_formats.get(name) {
                leaf["format"] = json!(format);
            }
            insert(&mut properties, name, leaf);
        }
    }
    for column in table
        .columns
        .iter()
        .filter(|c| c.name != ID_FIELD && c.name != super::IGNORED_FIELD)
        .filter(|c| range_of(table, &c.name).is_none())
    {
        let mut leaf = field_type(table, column);
        // Its multi-fields, under `fields`.
        for (name, declared) in &table.declared {
            if declared.es_type != "alias"
                && declared.path.as_deref() == Some(column.name.as_str())
                && let Some(sub) = name.strip_prefix(&format!("{}.", column.name))
            {
                leaf["fields"][sub] = json!({"type": declared.es_type});
            }
        }
        insert(&mut properties, &column.name, leaf);
    }
    for (name, declared) in &table.declared {
        if let (Some(path), "alias") = (&declared.path, declared.es_type.as_str()) {
            insert(
                &mut properties,
                name,
                json!({"type": "alias", "path": path}),
            );
        }
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
        let columns: Vec<(String, String)> = declared_columns(&mappings, false)
            .unwrap()
            .columns
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
            (
                json!({"properties": {"v": {"type": "knn_vector"}}}),
                "[dimension] of [v]",
            ),
            (
                json!({"properties": {"v": {"type": "knn_vector", "dimension": 2, "space_type": "hamming"}}}),
                "space [hamming]",
            ),
            (
                json!({"properties": {
                    "a": {"type": "knn_vector", "dimension": 2},
                    "b": {"type": "dense_vector", "dims": 2},
                }}),
                "both vector fields",
            ),
        ] {
            let error = declared_columns(&bad, false).unwrap_err().to_string();
            assert!(error.contains(needle), "{bad}: {error}");
        }
    }

    #[test]
    fn geo_points_and_vectors_are_declared() {
        let declared = declared_columns(
            &json!({"properties": {
                "place": {"properties": {"location": {"type": "geo_point"}}},
                "embedding": {"type": "knn_vector", "dimension": 3,
                              "method": {"name": "hnsw", "space_type": "innerproduct"}},
            }}),
            false,
        )
        .unwrap();
        let columns: Vec<(String, ColumnType)> = declared
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.data_type.clone()))
            .collect();
        assert_eq!(
            columns,
            [
                ("embedding".to_owned(), ColumnType::Vector { dim: 3 }),
                ("place.location".to_owned(), ColumnType::GeoPoint),
            ]
        );
        assert_eq!(
            declared.vector,
            Some(("embedding".to_owned(), VectorMetric::Dot))
        );
        let es = declared_columns(
            &json!({"properties": {"v": {"type": "dense_vector", "dims": 4, "similarity": "l2_norm"}}}),
            false,
        )
        .unwrap();
        assert_eq!(es.vector, Some(("v".to_owned(), VectorMetric::L2)));
        let mut table = dataset(declared.columns);
        table.vector_column = Some("embedding".into());
        table.vector_metric = Some(VectorMetric::Dot);
        assert_eq!(
            of(&table),
            json!({"mappings": {"properties": {
                "embedding": {"type": "knn_vector", "dimension": 3, "space_type": "innerproduct"},
                "place": {"properties": {"location": {"type": "geo_point"}}},
            }}})
        );
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
