//! Documents of platform datasets: the NDJSON bulk format, and JSON records as rows.
//!
//! - [`bulk`] reads a bulk body (action lines, each but a delete's followed by its document) as
//!   Elasticsearch reads it: a malformed action line, or a body that is not NDJSON, refuses the
//!   whole request; a malformed document fails only its own item.
//! - [`Document`] is one record ready to write: its `_id`, its `@timestamp` (by the five rules of
//!   the specification) and its fields, objects flattened with dots.
//! - [`columns`] decides the columns a set of documents needs (dynamic mapping) and builds their
//!   rows in a dataset's schema; [`mapping`] shows a dataset's columns as a mapping.

pub mod bulk;
pub mod columns;
pub mod mapping;
pub mod settings;
pub mod source;
pub mod update;

use serde_json::{Map, Value};
use strata_projections::{
    catalog::{ColumnDef, TableDef},
    schema::ColumnType,
};

pub use crate::engine::{ID_FIELD, TIMESTAMP_FIELD};

/// The longest `_id` there may be, in bytes (as Elasticsearch).
pub const MAX_ID_BYTES: usize = 512;

/// The fields of a record whose values were left out as malformed (Elasticsearch's `_ignored`
/// metadata field): a `list<utf8>` column, searchable, shown beside a hit's `_source`.
pub const IGNORED_FIELD: &str = "_ignored";

/// Field names a document may not carry: the metadata of a record, and the row id of its table.
const METADATA_FIELDS: &[&str] = &[
    "_id",
    "_index",
    "_source",
    "_version",
    "_seq_no",
    "_primary_term",
    "_routing",
    "_score",
    "_type",
    "_ignored",
    "_field_names",
    "_row_id",
];

/// Why a document cannot be written: an item's error, as Elasticsearch types them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// `mapper_parsing_exception`, `illegal_argument_exception`, ...
    pub kind: &'static str,
    pub reason: String,
    /// The item's HTTP status.
    pub status: u16,
    /// What lies under it, as Elasticsearch nests an error's cause (`caused_by`): its type and
    /// reason.
    pub caused_by: Option<(&'static str, String)>,
}

impl Refusal {
    pub fn new(kind: &'static str, status: u16, reason: impl Into<String>) -> Refusal {
        Refusal {
            kind,
            reason: reason.into(),
            status,
            caused_by: None,
        }
    }

    /// This refusal, caused by `kind`: `reason`.
    pub fn caused_by(mut self, kind: &'static str, reason: impl Into<String>) -> Refusal {
        self.caused_by = Some((kind, reason.into()));
        self
    }

    pub fn parsing(reason: impl Into<String>) -> Refusal {
        Refusal::new("mapper_parsing_exception", 400, reason)
    }

    pub fn illegal(reason: impl Into<String>) -> Refusal {
        Refusal::new("illegal_argument_exception", 400, reason)
    }
}

/// One record to write: fields flattened (`{"a": {"b": 1}}` is field `a.b`), nulls left out.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub id: String,
    /// Unix time in milliseconds.
    pub timestamp: i64,
    /// Every field but `_id` and `@timestamp`, in key order.
    pub fields: Vec<(String, Value)>,
}

impl Document {
    /// Reads a document's JSON text. `id` is the record's id (given or generated), `now` the
    /// upload time in Unix milliseconds (for a missing or invalid `@timestamp`).
    pub fn parse(text: &[u8], id: String, now: i64) -> Result<Document, Refusal> {
        let value: Value = serde_json::from_slice(text)
            .map_err(|error| Refusal::parsing(format!("failed to parse the document: {error}")))?;
        let Value::Object(object) = value else {
            return Err(Refusal::parsing(
                "failed to parse the document: it is not a JSON object",
            ));
        };
        Document::from_object(object, id, now)
    }

    pub fn from_object(
        mut object: Map<String, Value>,
        id: String,
        now: i64,
    ) -> Result<Document, Refusal> {
        if let Some(name) = object
            .keys()
            .find(|key| METADATA_FIELDS.contains(&key.as_str()))
        {
            return Err(Refusal::parsing(format!(
                "Field [{name}] is a metadata field and cannot be added inside a document. Use the index API request parameters."
            )));
        }
        // Rules 1 to 5: a valid @timestamp is kept; an invalid one is removed and, as a missing
        // one, replaced by the upload time.
        let timestamp = object
            .remove(TIMESTAMP_FIELD)
            .and_then(|value| timestamp_of(&value))
            .unwrap_or(now);
        let mut fields = Vec::with_capacity(object.len());
        flatten("", object, &mut fields)?;
        Ok(Document {
            id,
            timestamp,
            fields,
        })
    }
}

impl Document {
    /// The record as a JSON object again: dotted names nested, `@timestamp` in milliseconds.
    pub fn to_source(&self) -> Map<String, Value> {
        let mut object = Map::new();
        object.insert(TIMESTAMP_FIELD.to_owned(), Value::from(self.timestamp));
        for (name, value) in self.fields.iter().filter(|(n, _)| n != IGNORED_FIELD) {
            source::insert(&mut object, name, value.clone());
        }
        object
    }

    /// Gathers the fields flattened under each `geo_point` column of `columns` (`place.lat`
    /// and `place.lon`, or a GeoJSON object's `place.type` and `place.coordinates`) back into
    /// one object at the column's name, which the column reads as a point.
    pub fn gather_points(&mut self, columns: &[ColumnDef]) {
        for column in columns
            .iter()
            .filter(|c| c.data_type == ColumnType::GeoPoint)
        {
            let prefix = format!("{}.", column.name);
            if !self
                .fields
                .iter()
                .any(|(name, _)| name.starts_with(&prefix))
            {
                continue;
            }
            let mut point = Map::new();
            let mut at = None;
            let mut kept = Vec::with_capacity(self.fields.len());
            for (name, value) in std::mem::take(&mut self.fields) {
                match name.strip_prefix(&prefix) {
                    Some(rest) => {
                        at.get_or_insert(kept.len());
                        source::insert(&mut point, rest, value);
                    }
                    None => kept.push((name, value)),
                }
            }
            let at = at.unwrap_or(kept.len());
            kept.insert(at, (column.name.clone(), Value::Object(point)));
            self.fields = kept;
        }
    }
}

/// `@timestamp` as Unix milliseconds: a number is taken as milliseconds already, a string must
/// be a date ([`parse_date`]); anything else is invalid.
pub fn timestamp_of(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => match n.as_i64() {
            Some(ms) => Some(ms),
            None => n
                .as_f64()
                .filter(|f| f.is_finite() && f.abs() < 9.2e18)
                .map(|f| f.trunc() as i64),
        },
        Value::String(text) => parse_date(text),
        _ => None,
    }
    .filter(|ms| strata_projections::table::dates::indexable(*ms))
}

/// A date as Elasticsearch's default dynamic date detection sees one (`strict_date_optional_time`):
/// `2026-11-23`, `2026-11-23T10:15`, `2026-11-23T10:15:30`, with fractions of a second and a
/// zone (`Z`, `+01:00`) or without (UTC). Unix milliseconds.
pub fn parse_date(text: &str) -> Option<i64> {
    strata_projections::table::dates::parse_date_millis(text)
}

/// Adds `object`'s fields to `out` under `prefix`, objects flattened with dots, nulls left out.
fn flatten(
    prefix: &str,
    object: Map<String, Value>,
    out: &mut Vec<(String, Value)>,
) -> Result<(), Refusal> {
    for (key, value) in object {
        if key.is_empty() || key.starts_with('.') || key.ends_with('.') || key.contains("..") {
            return Err(Refusal::illegal(format!(
                "field name [{prefix}{key}] cannot be empty, nor start or end with a dot, nor hold two dots in a row"
            )));
        }
        let name = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}{key}")
        };
        match value {
            Value::Null => {}
            Value::Object(inner) => flatten(&format!("{name}."), inner, out)?,
            // Several values of one field, as Elasticsearch reads an array: arrays in it are
            // its values too, nulls are none, and an empty array is no value.
            Value::Array(items) => {
                let mut values = Vec::with_capacity(items.len());
                flatten_values(items, &mut values);
                if !values.is_empty() {
                    out.push((name, Value::Array(values)));
                }
            }
            value => out.push((name, value)),
        }
    }
    Ok(())
}

/// The values of an array, arrays in it flattened, nulls left out.
fn flatten_values(items: Vec<Value>, out: &mut Vec<Value>) {
    for item in items {
        match item {
            Value::Null => {}
            Value::Array(inner) => flatten_values(inner, out),
            item => out.push(item),
        }
    }
}

/// A new record id: 20 URL-safe characters, time-ordered (a version 7 UUID's first 15 bytes).
pub fn generate_id() -> String {
    use base64::Engine as _;
    let uuid = uuid::Uuid::now_v7();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&uuid.as_bytes()[..15])
}

/// A dataset `name` of `columns`, as it is created (no index, no mapping): what tests and the
/// fuzz entries plan rows for.
pub(crate) fn dataset(name: &str, columns: Vec<ColumnDef>) -> TableDef {
    TableDef {
        name: name.into(),
        id: "t".into(),
        columns,
        dataset: true,
        ..Default::default()
    }
}

/// What the tests of this module and its children build datasets from.
#[cfg(test)]
pub(crate) mod test_support {
    use strata_projections::{
        catalog::{ColumnDef, TableDef},
        schema::ColumnType,
    };

    /// A nullable column.
    pub fn column(name: &str, data_type: ColumnType) -> ColumnDef {
        ColumnDef {
            name: name.to_owned(),
            data_type,
            nullable: true,
        }
    }

    /// Dataset `logs` with `columns`.
    pub fn dataset(columns: Vec<ColumnDef>) -> TableDef {
        super::dataset("logs", columns)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: i64 = 1_763_900_000_000;

    fn doc(value: Value) -> Result<Document, Refusal> {
        let text = serde_json::to_vec(&value).unwrap();
        Document::parse(&text, "id".to_owned(), NOW)
    }

    #[test]
    fn the_five_timestamp_rules() {
        // 2 and 3: milliseconds, and valid dates, are used as given.
        assert_eq!(
            doc(json!({"@timestamp": 1_700_000_000_123_i64}))
                .unwrap()
                .timestamp,
            1_700_000_000_123
        );
        assert_eq!(
            doc(json!({"@timestamp": "2026-11-23T10:00:00.5Z"}))
                .unwrap()
                .timestamp,
            1_795_428_000_500
        );
        assert_eq!(
            doc(json!({"@timestamp": "2026-11-23T11:00:00+01:00"}))
                .unwrap()
                .timestamp,
            1_795_428_000_000
        );
        assert_eq!(
            doc(json!({"@timestamp": "2026-11-23"})).unwrap().timestamp,
            1_795_392_000_000
        );
        // 4: an invalid one is removed, and the upload time used.
        for invalid in [
            json!("yesterday"),
            json!(true),
            json!({"a": 1}),
            json!("2026-13-45"),
        ] {
            let d = doc(json!({"@timestamp": invalid, "x": 1})).unwrap();
            assert_eq!(d.timestamp, NOW, "{invalid}");
            assert_eq!(d.fields, vec![("x".to_owned(), json!(1))]);
        }
        // 5: a missing one is the upload time.
        assert_eq!(doc(json!({"x": 1})).unwrap().timestamp, NOW);
    }

    #[test]
    fn objects_flatten_with_dots_and_nulls_are_left_out() {
        let d = doc(json!({"user": {"name": "ann", "geo": {"city": "Oslo"}}, "n": null, "tags": ["a", "b"]}))
            .unwrap();
        let names: Vec<&str> = d.fields.iter().map(|(n, _)| n.as_str()).collect();
        // serde_json's objects keep their keys sorted.
        assert_eq!(names, ["tags", "user.geo.city", "user.name"]);
    }

    #[test]
    fn metadata_fields_and_malformed_documents_are_refused() {
        let refusal = doc(json!({"_id": "x"})).unwrap_err();
        assert_eq!(refusal.kind, "mapper_parsing_exception");
        assert!(
            refusal.reason.contains("[_id] is a metadata field"),
            "{}",
            refusal.reason
        );
        assert!(doc(json!({"_row_id": 1})).is_err());
        assert!(Document::parse(b"{\"a\": ", "id".into(), NOW).is_err());
        assert!(Document::parse(b"[1, 2]", "id".into(), NOW).is_err());
        assert_eq!(
            doc(json!({"": 1})).unwrap_err().kind,
            "illegal_argument_exception"
        );
    }

    #[test]
    fn dates_are_what_elasticsearch_detects() {
        for date in [
            "2026-11-23",
            "2026-11-23T10:15",
            "2026-11-23T10:15:30",
            "2026-11-23T10:15:30.123Z",
            "2026-11-23T10:15:30+02:00",
        ] {
            assert!(parse_date(date).is_some(), "{date}");
        }
        for not in [
            "2026",
            "23/11/2026",
            "2026-11-23 10:15:30 and more",
            "hello",
            "2026-02-30",
        ] {
            assert!(parse_date(not).is_none(), "{not}");
        }
    }

    #[test]
    fn generated_ids_are_short_distinct_and_url_safe() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| generate_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|id| {
            id.len() == 20
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        }));
    }
}
