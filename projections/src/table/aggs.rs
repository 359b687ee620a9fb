//! Query DSL aggregations over a dataset's document indexes: Elasticsearch's request shape,
//! translated to tantivy's aggregations on the `kw` field, run per index with the deleted rows
//! filtered out, and merged (tantivy's intermediate results) into one answer.
//!
//! Served: `avg`, `sum`, `min`, `max`, `value_count`, `stats`, `cardinality`, `terms`,
//! `histogram`, `date_histogram` (`fixed_interval`, and `calendar_interval` or `interval` of a
//! minute, hour, day or week), `range`, each with sub-aggregations under buckets.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tantivy::{
    aggregation::{
        AggContextParams, AggregationLimitsGuard, DistributedAggregationCollector,
        agg_req::Aggregations, intermediate_agg_result::IntermediateAggregationResults,
    },
    collector::FilterCollector,
    tokenizer::TokenizerManager,
};

use super::{
    TableSnapshot,
    docs::{DocsIndex, KEYWORD_FIELD, ROW_ID_FIELD},
    dsl::{DslError, date_math},
    text::index_error,
};
use crate::error::Result;

/// Where a translated aggregation keeps its `meta` until the answer echoes it.
const META_MARKER: &str = "strata_meta";

/// The most memory one aggregation request may take, and the most buckets.
const MEMORY_LIMIT: u64 = 512 << 20;
const BUCKET_LIMIT: u32 = 65_000;

/// Aggregation types passed to tantivy as they are (with their field renamed).
const NATIVE: &[&str] = &[
    "avg",
    "sum",
    "min",
    "max",
    "value_count",
    "stats",
    "cardinality",
    "terms",
    "histogram",
    "date_histogram",
    "range",
];

fn invalid(reason: impl Into<String>) -> DslError {
    DslError {
        kind: "illegal_argument_exception",
        reason: reason.into(),
    }
}

/// What the translation needs to know of a dataset's fields.
pub trait Fields {
    /// Whether `field` is a date column.
    fn is_date(&self, field: &str) -> bool;
}

/// An aggregation request translated for tantivy, with what is needed to shape its answer as
/// Elasticsearch's.
#[derive(Debug)]
pub struct Request {
    pub aggregations: Aggregations,
    translated: Value,
}

/// Translates a search body's `aggs` into tantivy's request. `now` anchors date math in range
/// bounds.
pub fn translate(aggs: &Value, fields: &dyn Fields, now: i64) -> Result<Request, DslError> {
    let translated = translate_level(aggs, fields, now)?;
    let aggregations = serde_json::from_value(without_markers(translated.clone()))
        .map_err(|e| invalid(format!("invalid aggregation: {e}")))?;
    Ok(Request {
        aggregations,
        translated,
    })
}

/// The translation without the markers it keeps for [`finish`] (`dates` on a range of dates,
/// an aggregation's `meta`).
fn without_markers(mut value: Value) -> Value {
    if let Value::Object(object) = &mut value {
        object.remove("dates");
        object.remove(META_MARKER);
        for inner in object.values_mut() {
            *inner = without_markers(std::mem::take(inner));
        }
    }
    value
}

/// A date in Elasticsearch's output format.
fn date_text(ms: i64) -> Value {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(at) => json!(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()),
        None => json!(ms),
    }
}

/// A number as Elasticsearch prints it: whole values as integers.
fn whole(value: &Value) -> Value {
    match value.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => json!(f as i64),
        _ => value.clone(),
    }
}

/// Shapes tantivy's answer to `translated` (one level of named aggregations) as
/// Elasticsearch's: integer keys and counts, dates in milliseconds and Elasticsearch's format,
/// only the ranges that were asked for.
fn finish(translated: &Value, result: &mut Value) {
    let (Value::Object(requests), Value::Object(results)) = (translated, result) else {
        return;
    };
    for (name, request) in requests {
        let Some(result) = results.get_mut(name) else {
            continue;
        };
        let sub = request.get("aggs");
        if let Some(meta) = request.get(META_MARKER) {
            result["meta"] = meta.clone();
        }
        if request.get("date_histogram").is_some() {
            for bucket in buckets(result) {
                if let Some(key) = bucket.get("key").and_then(Value::as_f64) {
                    bucket["key"] = json!(key as i64);
                    bucket["key_as_string"] = date_text(key as i64);
                }
                finish_sub(sub, bucket);
            }
        } else if let Some(body) = request.get("range") {
            let dates = body.get("dates").and_then(Value::as_bool).unwrap_or(false);
            let asked: Vec<(Option<f64>, Option<f64>)> = body["ranges"]
                .as_array()
                .map(|ranges| {
                    ranges
                        .iter()
                        .map(|r| {
                            (
                                r.get("from").and_then(Value::as_f64),
                                r.get("to").and_then(Value::as_f64),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            if let Some(Value::Array(list)) = result.get_mut("buckets") {
                list.retain(|bucket| {
                    let bounds = (
                        bucket.get("from").and_then(Value::as_f64),
                        bucket.get("to").and_then(Value::as_f64),
                    );
                    asked.contains(&bounds)
                });
            }
            for bucket in buckets(result) {
                if dates {
                    let mut ends = Vec::new();
                    for end in ["from", "to"] {
                        match bucket.get(end).and_then(Value::as_f64) {
                            Some(ns) => {
                                let ms = (ns / 1e6).round() as i64;
                                bucket[end] = json!(ms);
                                bucket[format!("{end}_as_string")] = date_text(ms);
                                ends.push(date_text(ms).as_str().unwrap_or("*").to_owned());
                            }
                            None => ends.push("*".to_owned()),
                        }
                    }
                    bucket["key"] = json!(format!("{}-{}", ends[0], ends[1]));
                }
                finish_sub(sub, bucket);
            }
        } else if request.get("cardinality").is_some() || request.get("value_count").is_some() {
            if let Some(value) = result.get("value").cloned() {
                result["value"] = whole(&value);
            }
        } else if request.get("terms").is_some() || request.get("histogram").is_some() {
            for bucket in buckets(result) {
                if let Some(key) = bucket.get("key").cloned() {
                    bucket["key"] = whole(&key);
                }
                finish_sub(sub, bucket);
            }
        }
    }
}

fn finish_sub(sub: Option<&Value>, bucket: &mut Value) {
    if let Some(sub) = sub {
        finish(sub, bucket);
    }
}

fn buckets(result: &mut Value) -> Vec<&mut Value> {
    match result.get_mut("buckets") {
        Some(Value::Array(list)) => list.iter_mut().collect(),
        Some(Value::Object(keyed)) => keyed.values_mut().collect(),
        _ => Vec::new(),
    }
}

fn translate_level(aggs: &Value, fields: &dyn Fields, now: i64) -> Result<Value, DslError> {
    let Value::Object(aggs) = aggs else {
        return Err(invalid("[aggs] must be an object of named aggregations"));
    };
    let mut out = Map::new();
    for (name, agg) in aggs {
        let Value::Object(agg) = agg else {
            return Err(invalid(format!("aggregation [{name}] must be an object")));
        };
        let mut translated = Map::new();
        let mut kind = None;
        for (key, body) in agg {
            match key.as_str() {
                "aggs" | "aggregations" => {
                    translated.insert("aggs".into(), translate_level(body, fields, now)?);
                }
                // Echoed in the answer, as Elasticsearch does (kept under a marker meanwhile).
                "meta" => {
                    translated.insert(META_MARKER.into(), body.clone());
                }
                other if NATIVE.contains(&other) => {
                    if kind.replace(other).is_some() {
                        return Err(invalid(format!(
                            "aggregation [{name}] has more than one type"
                        )));
                    }
                    translated.insert(other.into(), translate_one(name, other, body, fields, now)?);
                }
                "filters" | "filter" | "date_range" | "ip_range" | "composite" | "top_hits"
                | "percentiles" | "extended_stats" | "multi_terms" => {
                    return Err(invalid(format!(
                        "aggregation type [{key}] of [{name}] is not supported yet"
                    )));
                }
                other => {
                    return Err(DslError {
                        kind: "parsing_exception",
                        reason: format!("unknown aggregation type [{other}] in [{name}]"),
                    });
                }
            }
        }
        if kind.is_none() {
            return Err(invalid(format!("aggregation [{name}] has no type")));
        }
        out.insert(name.clone(), Value::Object(translated));
    }
    Ok(Value::Object(out))
}

/// A fixed interval for a calendar one tantivy can take as fixed (UTC days are fixed).
fn fixed_of_calendar(interval: &str) -> Option<&'static str> {
    match interval {
        "1m" | "minute" => Some("1m"),
        "1h" | "hour" => Some("1h"),
        "1d" | "day" => Some("1d"),
        "1w" | "week" => Some("7d"),
        _ => None,
    }
}

fn translate_one(
    name: &str,
    kind: &str,
    body: &Value,
    fields: &dyn Fields,
    now: i64,
) -> Result<Value, DslError> {
    let Value::Object(body) = body else {
        return Err(invalid(format!("[{kind}] of [{name}] must be an object")));
    };
    let mut body = body.clone();
    let field = body
        .get("field")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("[{kind}] aggregation [{name}] needs a [field]")))?
        .to_owned();
    let field = field.strip_suffix(".keyword").unwrap_or(&field).to_owned();
    let is_date = fields.is_date(&field);
    body.insert("field".into(), json!(format!("{KEYWORD_FIELD}.{field}")));
    match kind {
        "date_histogram" => {
            for key in ["calendar_interval", "interval"] {
                if let Some(interval) = body.remove(key) {
                    let text = interval.as_str().unwrap_or_default().to_owned();
                    let fixed = fixed_of_calendar(&text)
                        .map(str::to_owned)
                        .or_else(|| (key == "interval").then(|| text.clone()))
                        .ok_or_else(|| {
                            invalid(format!(
                                "calendar_interval [{text}] of [{name}] is not supported yet; use a fixed_interval, or a minute, hour, day or week"
                            ))
                        })?;
                    body.insert("fixed_interval".into(), json!(fixed));
                }
            }
            // Elasticsearch's default: empty buckets inside the bounds are listed.
            body.entry("min_doc_count").or_insert(json!(0));
            body.remove("format");
            body.remove("time_zone");
        }
        "range" => {
            if let Some(Value::Array(ranges)) = body.get_mut("ranges") {
                for range in ranges.iter_mut() {
                    for bound in ["from", "to"] {
                        let Some(value) = range.get(bound).cloned() else {
                            continue;
                        };
                        let number = match (&value, is_date) {
                            (Value::Null, _) => continue,
                            // Dates are bucketed in nanoseconds.
                            (Value::String(text), true) => date_math(text, now, false)
                                .map(|ms| ms as f64 * 1e6)
                                .ok_or_else(|| invalid(format!("invalid date [{text}]")))?,
                            (Value::Number(n), true) => n.as_f64().unwrap_or(0.0) * 1e6,
                            (Value::Number(n), false) => n.as_f64().unwrap_or(0.0),
                            (Value::String(text), false) => text.parse::<f64>().map_err(|_| {
                                invalid(format!("invalid range bound [{text}] of [{name}]"))
                            })?,
                            (other, _) => {
                                return Err(invalid(format!("invalid range bound {other}")));
                            }
                        };
                        range[bound] = json!(number);
                    }
                }
            }
            body.remove("format");
            if is_date {
                body.insert("dates".into(), json!(true));
            }
        }
        _ => {
            body.remove("format");
        }
    }
    Ok(Value::Object(body))
}

/// The limits of one aggregation request.
fn limits() -> AggregationLimitsGuard {
    AggregationLimitsGuard::new(Some(MEMORY_LIMIT), Some(BUCKET_LIMIT))
}

/// Partial results of an aggregation request: gathered from every document index of one or
/// more snapshots, then finished by [`Request::finish`].
#[derive(Default)]
pub struct Partial(Option<IntermediateAggregationResults>);

impl Request {
    /// Elasticsearch's `aggregations` object of what `partial` gathered.
    pub fn finish(&self, partial: Partial) -> Result<Value> {
        let results = partial
            .0
            .unwrap_or_default()
            .into_final_result(self.aggregations.clone(), limits())
            .map_err(index_error)?;
        let mut answer = serde_json::to_value(results).map_err(index_error)?;
        finish(&self.translated, &mut answer);
        Ok(answer)
    }
}

impl TableSnapshot {
    /// Runs `request` over the live records `query` matches, adding to `partial`.
    pub fn aggregate_into(
        &self,
        query: &dyn tantivy::query::Query,
        request: &Request,
        partial: &mut Partial,
    ) -> Result<()> {
        let aggs = &request.aggregations;
        let mut run = |index: &DocsIndex, deleted: Arc<roaring::RoaringTreemap>| -> Result<()> {
            let collector = FilterCollector::new(
                ROW_ID_FIELD.to_owned(),
                move |id: u64| !deleted.contains(id),
                DistributedAggregationCollector::from_aggs(
                    aggs.clone(),
                    AggContextParams::new(limits(), TokenizerManager::default()),
                ),
            );
            let part = index
                .searcher
                .search(query, &collector)
                .map_err(index_error)?;
            match partial.0.as_mut() {
                Some(merged) => merged.merge_fruits(part).map_err(index_error)?,
                None => partial.0 = Some(part),
            }
            Ok(())
        };
        self.each_docs_index(&mut run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dates;
    impl Fields for Dates {
        fn is_date(&self, field: &str) -> bool {
            field == "@timestamp"
        }
    }

    #[test]
    fn fields_move_under_kw_and_intervals_become_fixed() {
        let aggs = json!({
            "per_day": {
                "date_histogram": {"field": "@timestamp", "calendar_interval": "day"},
                "aggs": {"bytes": {"avg": {"field": "bytes"}}},
            },
            "methods": {"terms": {"field": "method.keyword", "size": 3}},
        });
        let translated = translate_level(&aggs, &Dates, 0).unwrap();
        assert_eq!(
            translated["per_day"]["date_histogram"],
            json!({"field": "kw.@timestamp", "fixed_interval": "1d", "min_doc_count": 0})
        );
        assert_eq!(
            translated["per_day"]["aggs"]["bytes"]["avg"]["field"],
            "kw.bytes"
        );
        assert_eq!(translated["methods"]["terms"]["field"], "kw.method");
        assert!(translate(&aggs, &Dates, 0).is_ok());
        let ranged = json!({"r": {"range": {"field": "@timestamp", "ranges": [{"from": 1000}]}}});
        let translated = translate_level(&ranged, &Dates, 0).unwrap();
        assert_eq!(translated["r"]["range"]["ranges"][0]["from"], json!(1.0e9));
        assert!(
            translate(&ranged, &Dates, 0).is_ok(),
            "the marker is not sent to tantivy"
        );
    }

    #[test]
    fn unsupported_aggregations_say_so() {
        for (aggs, needle) in [
            (
                json!({"a": {"date_histogram": {"field": "@timestamp", "calendar_interval": "1M"}}}),
                "calendar_interval [1M]",
            ),
            (
                json!({"a": {"percentiles": {"field": "x"}}}),
                "[percentiles] of [a] is not supported yet",
            ),
            (
                json!({"a": {"nope": {}}}),
                "unknown aggregation type [nope]",
            ),
            (json!({"a": {"avg": {}}}), "needs a [field]"),
            (json!({"a": {}}), "has no type"),
        ] {
            let error = translate(&aggs, &Dates, 0).unwrap_err();
            assert!(error.reason.contains(needle), "{aggs}: {}", error.reason);
        }
    }
}
