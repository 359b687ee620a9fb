//! A Query DSL search body, read: its query, paging, sort, `_source`, fields, aggregations
//! and the rest, checked before anything runs (a key this server does not read is a 400).

use std::time::Duration;

use serde_json::{Map, Value, json};
use strata_projections::table::docs::{SortBy, SortMode, SortSpec, SortValue};

use super::bad;
use crate::{
    documents::{
        columns::Formats,
        source::{FieldRequest, SourceFilter},
    },
    error::Result,
};

/// How many hits are counted exactly unless `track_total_hits` says otherwise.
const DEFAULT_TRACK_TOTAL_HITS: u64 = 10_000;

/// Keys of a search body this server reads.
const SEARCH_KEYS: &[&str] = &[
    "query",
    "profile",
    "from",
    "size",
    "_source",
    "track_total_hits",
    "timeout",
    "sort",
    "search_after",
    "aggs",
    "aggregations",
    "terminate_after",
    "knn",
    "docvalue_fields",
    "fields",
    "stored_fields",
    "indices_boost",
];

/// Keys of a search body Elasticsearch reads that this server does not serve yet: a 400 that
/// says so rather than an answer that ignores them.
const NOT_YET: &[&str] = &[];

/// What a search's parameters say beside its body.
#[derive(Clone, Copy, Debug, Default)]
pub struct SearchOptions {
    /// Names of no dataset or alias are left out, not a 404 (`ignore_unavailable`).
    pub ignore_unavailable: bool,
}

/// A search body, read.
pub(super) struct Search {
    pub(super) query: Value,
    pub(super) from: usize,
    pub(super) size: usize,
    pub(super) source: SourceFilter,
    /// Count exactly up to this many; `None`: do not report a total.
    pub(super) track_total_hits: Option<u64>,
    /// Empty: by relevance.
    pub(super) sort: Vec<SortSpec>,
    pub(super) search_after: Option<Vec<Option<SortValue>>>,
    /// The body's `aggs` (or `aggregations`).
    pub(super) aggs: Option<Value>,
    /// Count at most this many matches, the first in write order.
    pub(super) terminate_after: Option<usize>,
    /// Fields each hit lists under `fields` (`docvalue_fields` and `fields`).
    pub(super) fields: Vec<FieldRequest>,
    /// How many of `fields` the body's `docvalue_fields` asks for (a dataset's
    /// `index.max_docvalue_fields_search` limits them).
    pub(super) docvalue_fields: usize,
    /// `indices_boost`: a dataset's scores are multiplied by the boost of the first entry that
    /// names it (by its name, a pattern, or an alias).
    pub(super) indices_boost: Vec<(String, f32)>,
    /// `timeout`: past it, no further segment is searched, and the answer is `timed_out` with
    /// the hits found so far.
    pub(super) timeout: Option<Duration>,
    /// `profile`: the answer says what each dataset's query and aggregations cost.
    pub(super) profile: bool,
}

impl Search {
    /// The sort a sorted search runs: the body's, or by score.
    pub(super) fn effective_sort(&self) -> Vec<SortSpec> {
        match self.sort.is_empty() {
            true => vec![SortSpec {
                by: SortBy::Score,
                descending: true,
                missing_first: false,
                mode: None,
            }],
            false => self.sort.clone(),
        }
    }
}

/// Reads a search body's `sort`: `"_score"`, `"field"`, `{"field": "asc"|"desc"}`,
/// `{"field": {"order": ..., "missing": "_first"|"_last"}}`, or a list of them.
fn parse_sort(value: Option<&Value>) -> Result<Vec<SortSpec>> {
    let items: Vec<&Value> = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().collect(),
        Some(one) => vec![one],
    };
    let invalid = |what: &Value| {
        bad(
            "parsing_exception",
            format!(
                "a sort is a field name, {{field: order}} or {{field: {{order, missing}}}}, not {what}"
            ),
        )
    };
    items
        .into_iter()
        .map(|item| {
            let (field, options) = match item {
                Value::String(field) => (field.as_str(), None),
                Value::Object(object) if object.len() == 1 => {
                    let (field, options) = object.iter().next().ok_or_else(|| invalid(item))?;
                    (field.as_str(), Some(options))
                }
                other => return Err(invalid(other)),
            };
            let by = match field {
                "_score" => SortBy::Score,
                "_doc" => SortBy::Doc,
                field => SortBy::Field(field.strip_suffix(".keyword").unwrap_or(field).to_owned()),
            };
            let (order, missing, mode) = match options {
                None => (None, None, None),
                Some(Value::String(order)) => (Some(order.as_str()), None, None),
                Some(Value::Object(options)) => (
                    options.get("order").and_then(Value::as_str),
                    options.get("missing").and_then(Value::as_str),
                    options.get("mode"),
                ),
                Some(other) => return Err(invalid(other)),
            };
            let mode = match mode {
                None | Some(Value::Null) => None,
                Some(value) => Some(value.as_str().and_then(SortMode::parse).ok_or_else(|| {
                    bad(
                        "parsing_exception",
                        format!("[mode] must be min, max, sum, avg or median, not {value}"),
                    )
                })?),
            };
            let descending = match order {
                None => by == SortBy::Score,
                Some("asc") => false,
                Some("desc") => true,
                Some(other) => {
                    return Err(bad(
                        "parsing_exception",
                        format!("[order] must be asc or desc, not {other:?}"),
                    ));
                }
            };
            Ok(SortSpec {
                by,
                descending,
                missing_first: missing == Some("_first"),
                mode,
            })
        })
        .collect()
}

/// `search_after` with its dates as milliseconds: a date field's sort value is its
/// milliseconds, and a page may name it as text too, in the field's format (or as an ISO date
/// without one), as Elasticsearch reads it.
pub(super) fn dates_after(
    table: &strata_projections::catalog::TableDef,
    sort: &[SortSpec],
    after: &[Option<SortValue>],
) -> Vec<Option<SortValue>> {
    use strata_projections::schema::ColumnType;
    let formats = Formats::of(table);
    sort.iter()
        .zip(after)
        .map(|(spec, value)| match (&spec.by, value) {
            (SortBy::Field(field), Some(SortValue::Text(text)))
                if table
                    .column(field)
                    .is_some_and(|c| matches!(c.data_type, ColumnType::Timestamp { .. })) =>
            {
                use strata_projections::{schema::TimestampUnit, table::dates};
                let nanos = table.column(field).is_some_and(|c| {
                    matches!(
                        c.data_type,
                        ColumnType::Timestamp {
                            unit: TimestampUnit::Nanoseconds,
                            ..
                        }
                    )
                });
                // A date_nanos field sorts by whole nanoseconds, a date field by milliseconds.
                match (nanos, formats.get(field)) {
                    (true, Some(format)) => format.read_nanos(&json!(text)).map(SortValue::Int),
                    (true, None) => dates::parse_date_nanos(text).map(SortValue::Int),
                    (false, Some(format)) => format
                        .read(&json!(text))
                        .map(|ms| SortValue::Number(ms as f64)),
                    (false, None) => {
                        dates::parse_date_millis(text).map(|ms| SortValue::Number(ms as f64))
                    }
                }
                .or_else(|| value.clone())
            }
            _ => value.clone(),
        })
        .collect()
}

fn usize_of(body: &Map<String, Value>, key: &str, default: usize) -> Result<usize> {
    let negative = body.get(key).and_then(|v| match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    });
    if let Some(n) = negative.filter(|n| *n < 0) {
        return Err(bad(
            "illegal_argument_exception",
            format!("[{key}] parameter cannot be negative, found [{n}]"),
        ));
    }
    match body.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => value
            .as_u64()
            .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
            .map(|n| n as usize)
            .ok_or_else(|| {
                bad(
                    "illegal_argument_exception",
                    format!("[{key}] must be a non-negative integer, not {value}"),
                )
            }),
    }
}

impl Search {
    pub(super) fn parse(body: &Value) -> Result<Search> {
        let empty = Map::new();
        let body = match body {
            Value::Null => &empty,
            Value::Object(object) => object,
            other => {
                return Err(bad(
                    "parsing_exception",
                    format!("a search body must be a JSON object, not {other}"),
                ));
            }
        };
        if let Some(key) = body.keys().find(|k| NOT_YET.contains(&k.as_str())) {
            return Err(bad(
                "illegal_argument_exception",
                format!("[{key}] is not supported yet"),
            ));
        }
        if let Some(key) = body.keys().find(|k| !SEARCH_KEYS.contains(&k.as_str())) {
            return Err(bad(
                "parsing_exception",
                format!("Unknown key for a search body [{key}]"),
            ));
        }
        let from = usize_of(body, "from", 0)?;
        let size = usize_of(body, "size", 10)?;
        let track_total_hits = match body.get("track_total_hits") {
            None | Some(Value::Null) => Some(DEFAULT_TRACK_TOTAL_HITS),
            Some(Value::Bool(true)) => Some(u64::MAX),
            Some(Value::Bool(false)) => None,
            Some(Value::Number(n)) if n.as_i64() == Some(-1) => Some(u64::MAX),
            Some(Value::Number(n)) if n.is_u64() => n.as_u64(),
            Some(other) => {
                return Err(bad(
                    "illegal_argument_exception",
                    format!(
                        "[track_total_hits] parameter must be positive or equals to -1, got {other}"
                    ),
                ));
            }
        };
        let sort = parse_sort(body.get("sort"))?;
        let search_after = match body.get("search_after") {
            None | Some(Value::Null) => None,
            Some(Value::Array(values)) => {
                if values.len() != sort.len() {
                    return Err(bad(
                        "illegal_argument_exception",
                        format!(
                            "search_after has {} value(s) but sort has {}",
                            values.len(),
                            sort.len()
                        ),
                    ));
                }
                Some(
                    values
                        .iter()
                        .map(|v| match v {
                            Value::Null => None,
                            Value::Number(n) => match n.as_i64() {
                                Some(whole) => Some(SortValue::Int(whole)),
                                None => n.as_f64().map(SortValue::Number),
                            },
                            Value::Bool(b) => Some(SortValue::Number(if *b { 1.0 } else { 0.0 })),
                            Value::String(s) => Some(SortValue::Text(s.clone())),
                            other => Some(SortValue::Text(other.to_string())),
                        })
                        .collect(),
                )
            }
            Some(other) => {
                return Err(bad(
                    "parsing_exception",
                    format!("[search_after] must be an array, not {other}"),
                ));
            }
        };
        let aggs = body
            .get("aggs")
            .or_else(|| body.get("aggregations"))
            .cloned();
        let terminate_after = match body.get("terminate_after") {
            None | Some(Value::Null) => None,
            Some(_) => Some(usize_of(body, "terminate_after", 0)?).filter(|n| *n > 0),
        };
        let mut source = SourceFilter::parse(body.get("_source"))?;
        // Stored fields: records keep none but `_source`, which comes back only when listed
        // (and `_source` does not ask for it).
        if let Some(stored) = body.get("stored_fields") {
            let listed = match stored {
                Value::String(one) => vec![one.as_str()],
                Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
                other => {
                    return Err(bad(
                        "parsing_exception",
                        format!("[stored_fields] must be a name or a list of names, not {other}"),
                    ));
                }
            };
            if !listed.contains(&"_source") && body.get("_source").is_none() {
                source.none = true;
            }
        }
        let timeout = match body.get("timeout") {
            None | Some(Value::Null) => None,
            Some(value) => parse_time_value("timeout", value)?,
        };
        let indices_boost = parse_indices_boost(body.get("indices_boost"))?;
        let mut fields = FieldRequest::parse_list("docvalue_fields", body.get("docvalue_fields"))?;
        let docvalue_fields = fields.len();
        fields.extend(FieldRequest::parse_list("fields", body.get("fields"))?);
        for field in &fields {
            field.check()?;
        }
        let profile = match body.get("profile") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(flag)) => *flag,
            Some(other) => {
                return Err(bad(
                    "parsing_exception",
                    format!("[profile] must be a boolean, not {other}"),
                ));
            }
        };
        Ok(Search {
            profile,
            docvalue_fields,
            timeout,
            indices_boost,
            fields,
            terminate_after,
            aggs,
            sort,
            search_after,
            query: with_knn(body.get("query"), body.get("knn")),
            from,
            size,
            source,
            track_total_hits,
        })
    }
}

/// An Elasticsearch time value (`500ms`, `2s`, `1m`, `-1` for none; units `nanos`, `micros`,
/// `ms`, `s`, `m`, `h`, `d`): `None` for `-1`, or when no time is set.
fn parse_time_value(setting: &str, value: &Value) -> Result<Option<Duration>> {
    let text = match value {
        Value::String(text) => text.trim().to_owned(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    };
    let failed = |why: &str| {
        bad(
            "parse_exception",
            format!(
                "failed to parse setting [{setting}] with value [{text}] as a time value: {why}"
            ),
        )
    };
    if text == "-1" || text == "0" {
        return Ok(None);
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .ok_or_else(|| failed("unit is missing or unrecognized"))?;
    let (number, unit) = text.split_at(split);
    if text.starts_with('-') {
        return Err(failed("negative durations are not supported"));
    }
    let number: f64 = number
        .parse()
        .map_err(|_| failed("unit is missing or unrecognized"))?;
    let seconds = match unit {
        "nanos" => 1e-9,
        "micros" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return Err(failed("unit is missing or unrecognized")),
    };
    Duration::try_from_secs_f64(number * seconds)
        .map(Some)
        .map_err(|_| failed("it is out of range"))
}

/// `indices_boost`, in either of Elasticsearch's forms: `[{"name": boost}, ...]`, or (older)
/// one object `{"name": boost, ...}`, in its order.
fn parse_indices_boost(value: Option<&Value>) -> Result<Vec<(String, f32)>> {
    let entries: Vec<(&String, &Value)> = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(object)) => object.iter().collect(),
        Some(Value::Array(items)) => {
            let mut entries = Vec::with_capacity(items.len());
            for item in items {
                match item.as_object() {
                    Some(object) if object.len() == 1 => entries.extend(object.iter()),
                    _ => {
                        return Err(bad(
                            "parsing_exception",
                            format!(
                                "[indices_boost] entries must be objects of one index and its boost, not {item}"
                            ),
                        ));
                    }
                }
            }
            entries
        }
        Some(other) => {
            return Err(bad(
                "parsing_exception",
                format!("[indices_boost] must be an array or an object, not {other}"),
            ));
        }
    };
    entries
        .into_iter()
        .map(|(name, boost)| match boost.as_f64() {
            Some(boost) => Ok((name.clone(), boost as f32)),
            None => Err(bad(
                "parsing_exception",
                format!("the boost of [{name}] in [indices_boost] must be a number, not {boost}"),
            )),
        })
        .collect()
}

/// A search's query with its top-level `knn` section (Elasticsearch's form, one object or
/// several): the records either finds, their scores added, as Elasticsearch combines them.
fn with_knn(query: Option<&Value>, knn: Option<&Value>) -> Value {
    let knn: Vec<Value> = match knn {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(|k| json!({"knn": k})).collect(),
        Some(one) => vec![json!({"knn": one})],
    };
    match (query, knn.is_empty()) {
        (Some(query), true) => query.clone(),
        (None, true) => json!({"match_all": {}}),
        (query, false) => {
            let mut should: Vec<Value> = query.into_iter().cloned().collect();
            should.extend(knn);
            json!({"bool": {"should": should}})
        }
    }
}
