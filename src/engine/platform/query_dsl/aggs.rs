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

use strata_projections::{
    Error, Result,
    table::{
        TableSnapshot,
        dates::DateFormat,
        dates::{date_math, parse_date_millis},
        decimal::DecimalFormat,
        docs::{DocsIndex, KEYWORD_FIELD, ROW_ID_FIELD, search_live},
    },
};

use super::{compile::DslError, zone::Zone};

/// A failure of the document index, or of an aggregation tantivy refuses.
fn index_error(error: impl std::fmt::Display) -> Error {
    Error::Index(error.to_string())
}

/// Where a translated aggregation keeps its `meta` until the answer echoes it.
const META_MARKER: &str = "strata_meta";
/// Marks a range aggregation that stands for a calendar date_histogram (months, quarters,
/// years), with the histogram's `min_doc_count`.
const CALENDAR_MARKER: &str = "strata_calendar";
/// Keeps a date_histogram's `order` (tantivy lists its buckets by key) for [`finish`].
const ORDER_MARKER: &str = "strata_order";
/// The date format an aggregation of dates prints its keys in (the request's `format`, or the
/// field's declared one).
const FORMAT_MARKER: &str = "strata_format";
/// The time zone (`time_zone`) a date_histogram's buckets begin in local time of, and its keys
/// print in.
const TIME_ZONE_MARKER: &str = "strata_time_zone";
/// The decimal pattern an aggregation of numbers prints its keys or value in.
const NUMBER_FORMAT_MARKER: &str = "strata_number_format";
/// Keeps a terms aggregation's `include: {partition, num_partitions}` and its `size`: tantivy
/// lists the terms, and [`finish`] keeps those of the partition.
const PARTITION_MARKER: &str = "strata_partition";
/// Marks a terms aggregation of a date field, whose keys [`finish`] turns to milliseconds.
const DATES_MARKER: &str = "strata_dates";
/// Marks a terms aggregation of booleans (`value_type: boolean`): keys 1 and 0 read `true`
/// and `false`.
const BOOLEANS_MARKER: &str = "strata_booleans";

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
    "date_range",
];

/// The type of aggregation `agg` (an object of its type's body, `aggs` and `meta`) when tantivy
/// runs it.
pub fn native_kind(agg: &Value) -> Option<&'static str> {
    NATIVE.iter().copied().find(|kind| agg.get(*kind).is_some())
}

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

    /// The earliest and latest values of the date `field` (Unix milliseconds), if it has any.
    fn date_bounds(&self, _field: &str) -> Option<(i64, i64)> {
        None
    }

    /// The format the mapping declares for the date `field`, if any.
    fn date_format(&self, _field: &str) -> Option<String> {
        None
    }

    /// Whether `field` is declared an IP address field.
    fn is_ip(&self, _field: &str) -> bool {
        false
    }

    /// The field whose values `field` reads (an alias's target, a multi-field's parent).
    fn resolve(&self, field: &str) -> String {
        field.to_owned()
    }
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
        object.remove(CALENDAR_MARKER);
        object.remove(ORDER_MARKER);
        object.remove(DATES_MARKER);
        object.remove(BOOLEANS_MARKER);
        object.remove(FORMAT_MARKER);
        object.remove(PARTITION_MARKER);
        object.remove(NUMBER_FORMAT_MARKER);
        object.remove(TIME_ZONE_MARKER);
        for inner in object.values_mut() {
            *inner = without_markers(std::mem::take(inner));
        }
    }
    value
}

/// A date as an aggregation of `request` prints it: in its format, or Elasticsearch's default.
fn date_printed(request: &Value, ms: i64) -> Value {
    let offset = request
        .get(TIME_ZONE_MARKER)
        .and_then(Value::as_str)
        .and_then(|text| Zone::parse(text).ok())
        .map_or(chrono::Offset::fix(&chrono::Utc), |zone| zone.offset_at(ms));
    let format = request
        .get(FORMAT_MARKER)
        .and_then(Value::as_str)
        .and_then(|text| DateFormat::parse(text).ok())
        .unwrap_or_else(DateFormat::iso);
    match format.print_at(ms, offset) {
        Value::Number(n) => Value::String(n.to_string()),
        text => text,
    }
}

/// A number as Elasticsearch prints it: whole values as integers.
fn whole(value: &Value) -> Value {
    match value.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => json!(f as i64),
        _ => value.clone(),
    }
}

/// A terms aggregation's `include: {"partition": p, "num_partitions": n}`, Elasticsearch's way
/// of paging through many terms: the aggregation lists the terms (up to [`BUCKET_LIMIT`] of
/// them, by count), and [`finish`] keeps the `size` of them that fall in partition `p`.
fn partitioned(name: &str, body: &mut Map<String, Value>) -> Result<(), DslError> {
    let Some(Value::Object(include)) = body.get("include") else {
        return Ok(());
    };
    if !include.contains_key("partition") && !include.contains_key("num_partitions") {
        return Ok(());
    }
    let number = |key: &str| include.get(key).and_then(Value::as_u64);
    let (Some(partition), Some(partitions)) = (number("partition"), number("num_partitions"))
    else {
        return Err(invalid(format!(
            "[include] of [{name}] needs [partition] and [num_partitions], non-negative integers"
        )));
    };
    if partitions == 0 || partition >= partitions {
        return Err(invalid(format!(
            "[partition] of [{name}] must be below [num_partitions] ({partition} of {partitions})"
        )));
    }
    let size = body.get("size").and_then(Value::as_u64).unwrap_or(10);
    body.remove("include");
    body.insert("size".into(), json!(BUCKET_LIMIT));
    body.insert(
        PARTITION_MARKER.into(),
        json!({"partition": partition, "of": partitions, "size": size}),
    );
    Ok(())
}

/// Keeps the buckets of a terms aggregation's partition (see [`partitioned`]), at most `size`.
fn keep_partition(partition: &Value, result: &mut Value) {
    let number = |key: &str| partition[key].as_u64().unwrap_or(0);
    let (wanted, of, size) = (number("partition"), number("of").max(1), number("size"));
    let Some(Value::Array(list)) = result.get_mut("buckets") else {
        return;
    };
    list.retain(|bucket| partition_of(&bucket["key"], of) == Some(wanted));
    keep_first(result, size);
}

/// Keeps a terms aggregation's first `size` buckets (of those kept after tantivy listed them
/// all), counting the records of the rest in `sum_other_doc_count`.
fn keep_first(result: &mut Value, size: u64) {
    let Some(Value::Array(list)) = result.get_mut("buckets") else {
        return;
    };
    let rest: u64 = list
        .iter()
        .skip(size as usize)
        .map(|b| b["doc_count"].as_u64().unwrap_or(0))
        .sum();
    list.truncate(size as usize);
    result["sum_other_doc_count"] = json!(rest);
}

/// The partition of a term as Elasticsearch computes it, so that a term falls in the same one
/// on both: a string by murmur3 (x86, 32 bits, seed 31) of its UTF-8 bytes, an integer by
/// HPPC's `BitMixer.mix64`, a double by that of its sortable bits; then the floor modulo.
fn partition_of(key: &Value, partitions: u64) -> Option<u64> {
    let partitions = i64::try_from(partitions).ok()?;
    let hash = match key {
        Value::String(text) => i64::from(murmur3_x86_32(text.as_bytes(), 31)),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => mix64(i),
            (None, Some(f)) => {
                let bits = f.to_bits() as i64;
                mix64(bits ^ ((bits >> 63) & i64::MAX))
            }
            _ => return None,
        },
        _ => return None,
    };
    u64::try_from(hash.rem_euclid(partitions)).ok()
}

/// MurmurHash3, x86, 32 bits (Lucene's `StringHelper.murmurhash3_x86_32`).
fn murmur3_x86_32(data: &[u8], seed: u32) -> i32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mix = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        h ^= mix(k);
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, byte) in tail.iter().enumerate() {
            k ^= u32::from(*byte) << (8 * i);
        }
        h ^= mix(k);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h as i32
}

/// HPPC's `BitMixer.mix64`.
fn mix64(value: i64) -> i64 {
    let mut k = value as u64;
    k = (k ^ (k >> 32)).wrapping_mul(0x4cd6_944c_5cc2_0b6d);
    k = (k ^ (k >> 29)).wrapping_mul(0xfc12_c5b1_9d32_59e9);
    (k ^ (k >> 32)) as i64
}

/// A double as Java prints it (`Double.toString`), as Elasticsearch's range keys show it:
/// `50.0`, `0.5`, `1.0E7`.
fn java_double(value: f64) -> String {
    let magnitude = value.abs();
    if value == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let text = format!("{value}");
        if text.contains('.') {
            text
        } else {
            format!("{text}.0")
        }
    } else {
        let text = format!("{value:E}");
        match text.split_once('E') {
            Some((mantissa, exponent)) if !mantissa.contains('.') => {
                format!("{mantissa}.0E{exponent}")
            }
            _ => text,
        }
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
        // The aggregation's own body (under its type), with its markers.
        let own = request
            .as_object()
            .and_then(|r| r.iter().find(|(k, _)| NATIVE.contains(&k.as_str())))
            .map(|(_, body)| body);
        let decimal = own
            .and_then(|body| body.get(NUMBER_FORMAT_MARKER))
            .and_then(Value::as_str)
            .and_then(DecimalFormat::parse);
        if let Some(partition) = request.pointer(&format!("/terms/{PARTITION_MARKER}")) {
            keep_partition(partition, result);
        }
        if let Some(meta) = request.get(META_MARKER) {
            result["meta"] = meta.clone();
        }
        if let Some(histogram) = request.get("date_histogram") {
            for bucket in buckets(result) {
                if let Some(key) = bucket.get("key").and_then(Value::as_f64) {
                    bucket["key"] = json!(key as i64);
                    bucket["key_as_string"] = date_printed(histogram, key as i64);
                }
                finish_sub(sub, bucket);
            }
            order_buckets(histogram.get(ORDER_MARKER), result);
        } else if let Some(range) = request.get("range")
            && let Some(calendar) = range.get(CALENDAR_MARKER)
        {
            finish_calendar(range, calendar, result);
            for bucket in buckets(result) {
                finish_sub(sub, bucket);
            }
            order_buckets(range.get(ORDER_MARKER), result);
        } else if let Some(body) = request.get("range") {
            let dates = body.get("dates").and_then(Value::as_bool).unwrap_or(false);
            let bounds = |r: &Value| {
                (
                    r.get("from").and_then(Value::as_f64),
                    r.get("to").and_then(Value::as_f64),
                )
            };
            let asked: Vec<&Value> = body["ranges"]
                .as_array()
                .map(|ranges| ranges.iter().collect())
                .unwrap_or_default();
            if let Some(Value::Array(list)) = result.get_mut("buckets") {
                list.retain(|bucket| asked.iter().any(|r| bounds(r) == bounds(bucket)));
                // Nothing was searched (a dataset without records): every range is listed,
                // empty, as Elasticsearch lists them.
                if list.is_empty() {
                    list.extend(asked.iter().map(|r| empty_range_bucket(r, sub)));
                }
            }
            for bucket in buckets(result) {
                let keyed = asked
                    .iter()
                    .any(|r| bounds(r) == bounds(bucket) && r.get("key").is_some());
                if keyed {
                    // The range's own key, as asked.
                } else if !dates {
                    let end = |key: &str| bucket.get(key).and_then(Value::as_f64);
                    let (from, to) = (end("from"), end("to"));
                    let text = |end: Option<f64>| end.map_or_else(|| "*".to_owned(), java_double);
                    bucket["key"] = json!(format!("{}-{}", text(from), text(to)));
                }
                if dates {
                    let mut ends = Vec::new();
                    for end in ["from", "to"] {
                        match bucket.get(end).and_then(Value::as_f64) {
                            Some(ns) => {
                                let ms = (ns / 1e6).round() as i64;
                                bucket[end] = json!(ms);
                                let text = date_printed(body, ms);
                                ends.push(text.as_str().unwrap_or("*").to_owned());
                                bucket[format!("{end}_as_string")] = text;
                            }
                            None => ends.push("*".to_owned()),
                        }
                    }
                    if !keyed {
                        bucket["key"] = json!(format!("{}-{}", ends[0], ends[1]));
                    }
                }
                finish_sub(sub, bucket);
            }
        } else if let (Some(decimal), Some(value)) =
            (&decimal, result.get("value").and_then(Value::as_f64))
        {
            result["value_as_string"] = json!(decimal.format(value));
        } else if request.get("cardinality").is_some() || request.get("value_count").is_some() {
            if let Some(value) = result.get("value").cloned() {
                result["value"] = whole(&value);
            }
        } else if let Some(terms) = request.get("terms")
            && let Some(dates) = terms.get(DATES_MARKER)
        {
            let listed = |key: &str| -> Option<Vec<i64>> {
                dates[key]
                    .as_array()
                    .map(|list| list.iter().filter_map(Value::as_i64).collect())
            };
            let (include, exclude) = (listed("include"), listed("exclude"));
            let millis = |bucket: &Value| match bucket.get("key") {
                Some(Value::String(text)) => parse_date_millis(text),
                Some(Value::Number(n)) => n.as_f64().map(|f| f as i64),
                _ => None,
            };
            if let Some(Value::Array(list)) = result.get_mut("buckets") {
                list.retain(|bucket| {
                    let ms = millis(bucket);
                    include
                        .as_ref()
                        .is_none_or(|keep| ms.is_some_and(|m| keep.contains(&m)))
                        && exclude
                            .as_ref()
                            .is_none_or(|drop| !ms.is_some_and(|m| drop.contains(&m)))
                });
            }
            if let Some(size) = dates["size"].as_u64() {
                keep_first(result, size);
            }
            for bucket in buckets(result) {
                let ms = match bucket.get("key") {
                    Some(Value::String(text)) => parse_date_millis(text),
                    Some(Value::Number(n)) => n.as_f64().map(|f| f as i64),
                    _ => None,
                };
                if let Some(ms) = ms {
                    bucket["key"] = json!(ms);
                    bucket["key_as_string"] = date_printed(terms, ms);
                }
                finish_sub(sub, bucket);
            }
        } else if request.get("terms").is_some() || request.get("histogram").is_some() {
            let booleans = request
                .pointer(&format!("/terms/{BOOLEANS_MARKER}"))
                .is_some();
            for bucket in buckets(result) {
                if let Some(key) = bucket.get("key").cloned() {
                    bucket["key"] = whole(&key);
                    if booleans && let Some(n) = key.as_f64() {
                        bucket["key_as_string"] = json!((n != 0.0).to_string());
                    } else if let (Some(decimal), Some(n)) = (&decimal, key.as_f64()) {
                        bucket["key_as_string"] = json!(decimal.format(n));
                    }
                }
                finish_sub(sub, bucket);
            }
        }
    }
}

/// Orders a histogram's buckets by a date_histogram's `order`: `{"_key": "asc"|"desc"}`
/// (`_time` is its old name) or `{"_count": ...}` (ties by key, ascending); a list's first.
fn order_buckets(order: Option<&Value>, result: &mut Value) {
    let order = match order {
        Some(Value::Array(list)) => list.first(),
        other => other,
    };
    let Some(Value::Object(order)) = order else {
        return;
    };
    let Some((by, direction)) = order.iter().next() else {
        return;
    };
    let descending = direction.as_str() == Some("desc");
    let Some(Value::Array(list)) = result.get_mut("buckets") else {
        return;
    };
    let key = |b: &Value| b["key"].as_f64().unwrap_or(0.0);
    let count = |b: &Value| b["doc_count"].as_u64().unwrap_or(0);
    match by.as_str() {
        "_count" => list.sort_by(|a, b| {
            let order = count(a).cmp(&count(b));
            let order = if descending { order.reverse() } else { order };
            order.then_with(|| key(a).total_cmp(&key(b)))
        }),
        _ => {
            list.sort_by(|a, b| key(a).total_cmp(&key(b)));
            if descending {
                list.reverse();
            }
        }
    }
}

/// Shapes the buckets of a calendar histogram's range aggregation as date_histogram buckets:
/// keyed by their period's start, from the first period with records to the last (or only
/// those with `min_doc_count` records, when it is above 0).
fn finish_calendar(range: &Value, calendar: &Value, result: &mut Value) {
    let min_doc_count = calendar["min_doc_count"].as_u64().unwrap_or(0);
    let Some(Value::Array(list)) = result.get_mut("buckets") else {
        return;
    };
    // The periods asked for: tantivy adds the open ends before and after.
    list.retain(|b| b.get("from").is_some() && b.get("to").is_some());
    list.sort_by(|a, b| {
        a["from"]
            .as_f64()
            .unwrap_or(0.0)
            .total_cmp(&b["from"].as_f64().unwrap_or(0.0))
    });
    let count = |b: &Value| b["doc_count"].as_u64().unwrap_or(0);
    if min_doc_count == 0 {
        let first = list.iter().position(|b| count(b) > 0).unwrap_or(list.len());
        let last = list
            .iter()
            .rposition(|b| count(b) > 0)
            .map_or(first, |i| i + 1);
        list.truncate(last);
        list.drain(..first);
    } else {
        list.retain(|b| count(b) >= min_doc_count);
    }
    for bucket in list.iter_mut() {
        let ms = (bucket["from"].as_f64().unwrap_or(0.0) / 1e6).round() as i64;
        if let Value::Object(object) = bucket {
            for key in ["from", "to", "from_as_string", "to_as_string"] {
                object.remove(key);
            }
        }
        bucket["key"] = json!(ms);
        bucket["key_as_string"] = date_printed(range, ms);
    }
}

/// A range's bucket when no record was searched: its bounds (and key, when asked), a
/// `doc_count` of 0, and its sub-aggregations over nothing.
fn empty_range_bucket(range: &Value, sub: Option<&Value>) -> Value {
    let mut bucket = sub.map(empty_results).unwrap_or_else(|| json!({}));
    for key in ["key", "from", "to"] {
        if let Some(value) = range.get(key).filter(|v| !v.is_null()) {
            bucket[key] = value.clone();
        }
    }
    bucket["doc_count"] = json!(0);
    bucket
}

/// The results of translated aggregations over no records, as tantivy gives them.
fn empty_results(translated: &Value) -> Value {
    serde_json::from_value::<Aggregations>(without_markers(translated.clone()))
        .ok()
        .and_then(|aggs| {
            IntermediateAggregationResults::default()
                .into_final_result(aggs, limits())
                .ok()
        })
        .and_then(|results| serde_json::to_value(results).ok())
        .unwrap_or_else(|| json!({}))
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
                    let body = translate_one(name, other, body, fields, now)?;
                    // date_range is a range aggregation whose bounds are dates.
                    let other = if other == "date_range" {
                        "range"
                    } else {
                        other
                    };
                    // A calendar histogram runs as a range aggregation of its periods.
                    let kind = match body.get(CALENDAR_MARKER) {
                        Some(_) => "range",
                        None => other,
                    };
                    translated.insert(kind.into(), body);
                }
                "filters" | "filter" | "ip_range" | "composite" | "top_hits" | "percentiles"
                | "extended_stats" | "multi_terms" => {
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

/// The months of a calendar interval tantivy cannot take as fixed.
fn calendar_months(interval: &str) -> Option<u32> {
    match interval {
        "1M" | "month" => Some(1),
        "1q" | "quarter" => Some(3),
        "1y" | "year" => Some(12),
        _ => None,
    }
}

/// How a histogram of local time steps: by calendar months, or by a fixed length (with the
/// grid's own shift, as a week's 4 days) of wall-clock time.
#[derive(Clone, Copy)]
enum Step {
    Months(u32),
    Fixed(i64, i64),
}

const DAY_MS: i64 = 86_400_000;

/// The bounds of the periods of `step` in the wall-clock time of `zone` (UTC without one),
/// shifted by `shift`, that cover `low` to `high` (Unix milliseconds): the start of each, then
/// the end of the last.
fn periods(
    low: i64,
    high: i64,
    step: Step,
    zone: Option<Zone>,
    shift: i64,
) -> Result<Vec<i64>, DslError> {
    use chrono::{Datelike, NaiveDate};
    let zone = zone.unwrap_or(Zone::Fixed(chrono::Offset::fix(&chrono::Utc)));
    let out_of_range = || invalid(format!("dates out of range for a histogram: {low}"));
    let shift = chrono::Duration::milliseconds(shift);
    let first = zone.local_of(low).ok_or_else(out_of_range)? - shift;
    // The first period's start, in wall-clock time (before the shift).
    let mut at = match step {
        Step::Months(months) => {
            NaiveDate::from_ymd_opt(first.year(), first.month0() / months * months + 1, 1)
                .and_then(|day| day.and_hms_opt(0, 0, 0))
                .ok_or_else(out_of_range)?
        }
        Step::Fixed(interval, grid) => {
            let local = first.and_utc().timestamp_millis();
            let start = (local - grid).div_euclid(interval) * interval + grid;
            chrono::DateTime::from_timestamp_millis(start)
                .ok_or_else(out_of_range)?
                .naive_utc()
        }
    };
    let mut bounds = Vec::new();
    loop {
        let instant = zone.instant_of(at + shift).ok_or_else(out_of_range)?;
        if bounds.last().is_none_or(|last| *last < instant) {
            bounds.push(instant);
        }
        if instant > high {
            return Ok(bounds);
        }
        if bounds.len() > BUCKET_LIMIT as usize {
            return Err(invalid(format!(
                "a date histogram would have more than {BUCKET_LIMIT} buckets"
            )));
        }
        at = match step {
            Step::Months(months) => at.checked_add_months(chrono::Months::new(months)),
            Step::Fixed(interval, _) => {
                at.checked_add_signed(chrono::Duration::milliseconds(interval))
            }
        }
        .ok_or_else(out_of_range)?;
    }
}

/// A duration as tantivy and Elasticsearch write an `offset` or a fixed interval: `+6h`,
/// `-30m`, `1d`, `1500ms`; milliseconds.
fn offset_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => (1, text),
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = rest.split_at(digits);
    let unit = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => DAY_MS,
        _ => return None,
    };
    number
        .parse::<i64>()
        .ok()?
        .checked_mul(unit)
        .map(|ms| sign * ms)
}

/// The name a zone is kept under in a translated request (read again by [`Zone::parse`]).
fn zone_name(zone: &Zone) -> String {
    match zone {
        Zone::Fixed(offset) => offset.to_string(),
        Zone::Region(tz) => tz.name().to_owned(),
    }
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
        .ok_or_else(|| {
            invalid(format!(
                "Required one of fields [field, script], but none were specified: [{kind}] aggregation [{name}] needs a [field] (scripts are not served)"
            ))
        })?
        .to_owned();
    if kind == "cardinality"
        && let Some(threshold) = body.get("precision_threshold").and_then(Value::as_i64)
        && threshold < 0
    {
        return Err(invalid(format!(
            "[precisionThreshold] must be greater than or equal to 0. Found [{threshold}] in [{name}]"
        )));
    }
    let field = fields.resolve(field.strip_suffix(".keyword").unwrap_or(&field));
    let value_type = body.remove("value_type");
    let is_date = kind == "date_range"
        || value_type.as_ref().and_then(Value::as_str) == Some("date")
        || fields.is_date(&field);
    // Dates print in the request's format, else the field's; other formats are not served.
    let requested = body.remove("format");
    let date_format = match (is_date, requested.as_ref().and_then(Value::as_str)) {
        (true, Some(text)) => Some(text.to_owned()),
        (true, None) => fields.date_format(&field),
        (false, _) => None,
    };
    if let Some(text) = &date_format {
        DateFormat::parse(text)
            .map_err(|reason| invalid(format!("[format] of [{name}]: {reason}")))?;
        body.insert(FORMAT_MARKER.into(), json!(text));
    }
    // Numbers print in a decimal pattern (`key_as_string`, `value_as_string`).
    if let (false, Some(text)) = (is_date, requested.as_ref().and_then(Value::as_str)) {
        DecimalFormat::parse(text).ok_or_else(|| {
            invalid(format!(
                "[format] of [{name}]: [{text}] is not a decimal pattern (such as 0.00)"
            ))
        })?;
        body.insert(NUMBER_FORMAT_MARKER.into(), json!(text));
    }
    body.insert("field".into(), json!(format!("{KEYWORD_FIELD}.{field}")));
    match kind {
        "date_histogram" => {
            let zone = match body.remove("time_zone") {
                Some(Value::String(text)) => Some(
                    Zone::parse(&text).map_err(|reason| invalid(format!("[{name}]: {reason}")))?,
                ),
                Some(other) => {
                    return Err(invalid(format!(
                        "[time_zone] of [{name}] must be a string, not {other}"
                    )));
                }
                None => None,
            };
            let zone = zone.filter(|zone| !zone.is_utc());
            if let Some(zone) = &zone {
                body.insert(TIME_ZONE_MARKER.into(), json!(zone_name(zone)));
            }
            // The request's own shift of the buckets (`offset`), in local time.
            let shift = match body.remove("offset") {
                None => 0,
                Some(Value::String(text)) => offset_ms(&text).ok_or_else(|| {
                    invalid(format!(
                        "[offset] of [{name}]: [{text}] is not a duration such as +6h or -30m"
                    ))
                })?,
                Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
                Some(other) => {
                    return Err(invalid(format!(
                        "[offset] of [{name}] must be a duration, not {other}"
                    )));
                }
            };
            // Calendar weeks begin on Monday; the epoch (a Thursday) is 4 days after one.
            let mut grid = 0;
            for key in ["calendar_interval", "interval"] {
                if let Some(interval) = body.remove(key) {
                    let text = interval.as_str().unwrap_or_default().to_owned();
                    if let Some(months) = calendar_months(&text) {
                        return calendar_histogram(
                            &field,
                            &body,
                            Step::Months(months),
                            zone,
                            shift,
                            fields,
                        );
                    }
                    let fixed = fixed_of_calendar(&text)
                        .map(str::to_owned)
                        .or_else(|| (key == "interval").then(|| text.clone()))
                        .ok_or_else(|| {
                            invalid(format!(
                                "calendar_interval [{text}] of [{name}] is not supported yet; use a fixed_interval, or a minute, hour, day or week"
                            ))
                        })?;
                    if matches!(text.as_str(), "week" | "1w") {
                        grid = 4 * DAY_MS;
                    }
                    body.insert("fixed_interval".into(), json!(fixed));
                }
            }
            let interval = body
                .get("fixed_interval")
                .and_then(Value::as_str)
                .and_then(offset_ms)
                .filter(|ms| *ms > 0);
            if let Some(interval) = interval {
                let mut offset = grid + shift;
                // Buckets begin at local times of the zone: a shift by its offset while it
                // keeps one over the field's values, periods of local time where it changes.
                if let Some(zone) = zone
                    && let Some((low, high)) = fields.date_bounds(&field)
                {
                    match zone.constant_offset_ms(low, high) {
                        Some(zone_offset) => offset -= zone_offset,
                        None => {
                            return calendar_histogram(
                                &field,
                                &body,
                                Step::Fixed(interval, grid),
                                Some(zone),
                                shift,
                                fields,
                            );
                        }
                    }
                }
                let offset = offset.rem_euclid(interval);
                if offset != 0 {
                    body.insert("offset".into(), json!(format!("{offset}ms")));
                }
            }
            // Elasticsearch's default: empty buckets inside the bounds are listed.
            body.entry("min_doc_count").or_insert(json!(0));
            if let Some(order) = body.remove("order") {
                body.insert(ORDER_MARKER.into(), order);
            }
        }
        "range" | "date_range" => {
            if let Some(Value::Array(ranges)) = body.get_mut("ranges") {
                for range in ranges.iter_mut() {
                    for bound in ["from", "to"] {
                        let Some(value) = range.get(bound).cloned() else {
                            continue;
                        };
                        let formatted = date_format
                            .as_deref()
                            .and_then(|text| DateFormat::parse(text).ok()?.read(&value));
                        let number = match (&value, is_date) {
                            (Value::Null, _) => continue,
                            // A date in the field's (or the request's) format.
                            (_, true) if formatted.is_some() => {
                                formatted.unwrap_or_default() as f64 * 1e6
                            }
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
            body.remove("time_zone");
            if is_date {
                body.insert("dates".into(), json!(true));
            }
        }
        "terms" => {
            // An IP field's terms are addresses, not strings a pattern reads.
            if fields.is_ip(&field)
                && ["include", "exclude"]
                    .iter()
                    .any(|key| body.get(*key).is_some_and(Value::is_string))
            {
                return Err(invalid(format!(
                    "Aggregation [{name}] cannot support regular expression style include/exclude settings as they can only be applied to string fields. Use an array of values for include/exclude clauses"
                )));
            }
            partitioned(name, &mut body)?;
            if is_date {
                // tantivy filters string terms only: dates to include or exclude (a list) are
                // kept as milliseconds for [`finish`], which drops the other buckets.
                let mut marker = json!({});
                for key in ["include", "exclude"] {
                    if let Some(Value::Array(values)) = body.get(key) {
                        let ms: Option<Vec<i64>> = values
                            .iter()
                            .map(|value| match value {
                                Value::String(text) => parse_date_millis(text),
                                Value::Number(n) => n.as_i64(),
                                _ => None,
                            })
                            .collect();
                        let ms = ms.ok_or_else(|| {
                            invalid(format!("[{key}] of [{name}] must list dates"))
                        })?;
                        marker[key] = json!(ms);
                        body.remove(key);
                    }
                }
                // Every term comes back to be filtered; `size` applies after.
                if marker.as_object().is_some_and(|m| !m.is_empty()) {
                    let size = body.get("size").and_then(Value::as_u64).unwrap_or(10);
                    marker["size"] = json!(size);
                    body.insert("size".into(), json!(BUCKET_LIMIT));
                }
                body.insert(DATES_MARKER.into(), marker);
            }
            // `_term` is the old name of `_key`.
            if let Some(Value::Object(order)) = body.get_mut("order")
                && let Some(direction) = order.remove("_term")
            {
                order.insert("_key".into(), direction);
            }
            // A boolean is kept as 1 or 0.
            if let Some(Value::Bool(b)) = body.get("missing") {
                let number = u8::from(*b);
                body.insert("missing".into(), json!(number));
            }
            if value_type.as_ref().and_then(Value::as_str) == Some("boolean") {
                body.insert(BOOLEANS_MARKER.into(), json!(true));
            }
        }
        _ => {}
    }
    Ok(Value::Object(body))
}

/// A date_histogram whose buckets tantivy's fixed grid cannot draw (months, quarters, years;
/// or local days and hours of a zone whose offset changes among the values), as a range
/// aggregation of the periods that cover the field's values (with a marker [`finish`] reads);
/// a field without values has no buckets.
fn calendar_histogram(
    field: &str,
    body: &Map<String, Value>,
    step: Step,
    zone: Option<Zone>,
    shift: i64,
    fields: &dyn Fields,
) -> Result<Value, DslError> {
    let min_doc_count = body
        .get("min_doc_count")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let path = format!("{KEYWORD_FIELD}.{field}");
    let Some((low, high)) = fields.date_bounds(field) else {
        return Ok(json!({"field": path, "fixed_interval": "1d"}));
    };
    let bounds = periods(low, high, step, zone, shift)?;
    // Dates are bucketed in nanoseconds.
    let ranges: Vec<Value> = bounds
        .windows(2)
        .map(|w| json!({"from": w[0] as f64 * 1e6, "to": w[1] as f64 * 1e6}))
        .collect();
    let mut range = json!({
        "field": path,
        "ranges": ranges,
        CALENDAR_MARKER: {"min_doc_count": min_doc_count},
    });
    for marker in [ORDER_MARKER, FORMAT_MARKER, TIME_ZONE_MARKER] {
        if let Some(value) = body.get(marker) {
            range[marker] = value.clone();
        }
    }
    if let Some(order) = body.get("order") {
        range[ORDER_MARKER] = order.clone();
    }
    Ok(range)
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

/// The earliest and latest values of the date `field` in `snapshot`'s document indexes
/// (Unix milliseconds; deleted records may widen them), if it has any.
pub fn date_bounds(snapshot: &TableSnapshot, field: &str) -> Result<Option<(i64, i64)>> {
    use tantivy::columnar::ColumnValues;
    let name = format!("{KEYWORD_FIELD}.{field}");
    let mut bounds: Option<(i64, i64)> = None;
    snapshot.each_docs_index(&mut |index: &DocsIndex, _| -> Result<()> {
        for reader in index.searcher.segment_readers() {
            let column = reader
                .fast_fields()
                .column_opt::<tantivy::DateTime>(&name)
                .map_err(index_error)?;
            let Some(column) = column.filter(|c| c.values.num_vals() > 0) else {
                continue;
            };
            let (low, high) = (
                column.min_value().into_timestamp_millis(),
                column.max_value().into_timestamp_millis(),
            );
            bounds = Some(match bounds {
                None => (low, high),
                Some((a, b)) => (a.min(low), b.max(high)),
            });
        }
        Ok(())
    })?;
    Ok(bounds)
}

/// Runs `request` over the live records `query` matches, adding to `partial`.
pub fn aggregate_into(
    snapshot: &TableSnapshot,
    query: &dyn tantivy::query::Query,
    request: &Request,
    partial: &mut Partial,
) -> Result<()> {
    let aggs = &request.aggregations;
    let mut run = |index: &DocsIndex, deleted: Arc<roaring::RoaringTreemap>| -> Result<()> {
        let collector = DistributedAggregationCollector::from_aggs(
            aggs.clone(),
            AggContextParams::new(limits(), TokenizerManager::default()),
        );
        let part = search_live(index, query, deleted, collector)?;
        match partial.0.as_mut() {
            Some(merged) => merged.merge_fruits(part).map_err(index_error)?,
            None => partial.0 = Some(part),
        }
        Ok(())
    };
    snapshot.each_docs_index(&mut run)
}

/// What one aggregation cost over one snapshot, phase by phase (a search's `profile`), and how
/// the values of its field were held in the segments it read.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Making each segment's collector.
    pub build_leaf_collector: std::time::Duration,
    /// Collecting the matching records.
    pub collect: std::time::Duration,
    /// Handing over each segment's partial result.
    pub post_collection: std::time::Duration,
    /// Merging the segments' partial results.
    pub reduce: std::time::Duration,
    pub segments: u64,
    /// Records collected (live matches).
    pub collected: u64,
    /// Segments where the field has no values, numbers (or dates, booleans), or strings
    /// (collected as term ordinals).
    pub empty: u64,
    pub numeric: u64,
    pub ordinals: u64,
}

/// [`aggregate_into`], each phase timed: the segments' collectors are made, fed and
/// harvested here rather than inside tantivy's search loop, which does the same. `field` is
/// the aggregation's field, whose columns are described in the answer.
pub fn aggregate_into_measured(
    snapshot: &TableSnapshot,
    query: &dyn tantivy::query::Query,
    request: &Request,
    field: Option<&str>,
    partial: &mut Partial,
) -> Result<Measured> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;
    use tantivy::collector::{Collector, SegmentCollector};
    let mut measured = Measured::default();
    let aggs = &request.aggregations;
    let mut run = |index: &DocsIndex, deleted: Arc<roaring::RoaringTreemap>| -> Result<()> {
        let collected = Arc::new(AtomicU64::new(0));
        let counter = collected.clone();
        let collector = FilterCollector::new(
            ROW_ID_FIELD.to_owned(),
            move |id: u64| {
                let live = !deleted.contains(id);
                if live {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                live
            },
            DistributedAggregationCollector::from_aggs(
                aggs.clone(),
                AggContextParams::new(limits(), TokenizerManager::default()),
            ),
        );
        let searcher = &index.searcher;
        let weight = query
            .weight(tantivy::query::EnableScoring::disabled_from_searcher(
                searcher,
            ))
            .map_err(index_error)?;
        let mut fruits = Vec::new();
        for (ord, reader) in searcher.segment_readers().iter().enumerate() {
            measured.segments += 1;
            if let Some(field) = field {
                let name = format!("{KEYWORD_FIELD}.{field}");
                let fast = reader.fast_fields();
                let strings = fast.str(&name).map_err(index_error)?.is_some();
                let numbers = fast
                    .column_opt::<i64>(&name)
                    .map_err(index_error)?
                    .is_some()
                    || fast
                        .column_opt::<f64>(&name)
                        .map_err(index_error)?
                        .is_some()
                    || fast
                        .column_opt::<tantivy::DateTime>(&name)
                        .map_err(index_error)?
                        .is_some()
                    || fast
                        .column_opt::<bool>(&name)
                        .map_err(index_error)?
                        .is_some();
                match (strings, numbers) {
                    (true, _) => measured.ordinals += 1,
                    (false, true) => measured.numeric += 1,
                    (false, false) => measured.empty += 1,
                }
            }
            let started = Instant::now();
            let mut child = collector
                .for_segment(ord as u32, reader)
                .map_err(index_error)?;
            measured.build_leaf_collector += started.elapsed();
            let started = Instant::now();
            let alive = reader.alive_bitset();
            weight
                .for_each_no_score(reader, &mut |docs| {
                    for doc in docs {
                        if alive.is_none_or(|a| a.is_alive(*doc)) {
                            child.collect(*doc, 0.0);
                        }
                    }
                })
                .map_err(index_error)?;
            measured.collect += started.elapsed();
            let started = Instant::now();
            fruits.push(child.harvest());
            measured.post_collection += started.elapsed();
        }
        let started = Instant::now();
        let part = collector.merge_fruits(fruits).map_err(index_error)?;
        match partial.0.as_mut() {
            Some(merged) => merged.merge_fruits(part).map_err(index_error)?,
            None => partial.0 = Some(part),
        }
        measured.reduce += started.elapsed();
        measured.collected += collected.load(Ordering::Relaxed);
        Ok(())
    };
    snapshot.each_docs_index(&mut run)?;
    Ok(measured)
}

/// The ranges of a range field (`date_range`, `long_range`, ...) in the records a query
/// matches, each as its inclusive ends (dates in milliseconds); an unbounded end is infinite.
struct RangeEnds {
    path: String,
    dates: bool,
}

/// One segment's columns of a range field's bounds, and the ranges gathered.
struct SegmentRanges {
    ends: [Option<tantivy::columnar::Column<f64>>; 4],
    dates: [Option<tantivy::columnar::Column<tantivy::DateTime>>; 4],
    longs: [Option<tantivy::columnar::Column<i64>>; 4],
    found: Vec<(f64, f64)>,
}

impl tantivy::collector::Collector for RangeEnds {
    type Fruit = Vec<(f64, f64)>;
    type Child = SegmentRanges;

    fn for_segment(
        &self,
        _segment: tantivy::SegmentOrdinal,
        reader: &tantivy::SegmentReader,
    ) -> tantivy::Result<SegmentRanges> {
        let fast = reader.fast_fields();
        let name = |end: &str| format!("{KEYWORD_FIELD}.{}.{end}", self.path);
        let ends = ["gte", "gt", "lte", "lt"];
        let mut out = SegmentRanges {
            ends: [None, None, None, None],
            dates: [None, None, None, None],
            longs: [None, None, None, None],
            found: Vec::new(),
        };
        for (i, end) in ends.iter().enumerate() {
            if self.dates {
                out.dates[i] = fast.column_opt::<tantivy::DateTime>(&name(end))?;
            } else {
                out.longs[i] = fast.column_opt::<i64>(&name(end))?;
                out.ends[i] = fast.column_opt::<f64>(&name(end))?;
            }
        }
        Ok(out)
    }

    fn requires_scoring(&self) -> bool {
        false
    }

    fn merge_fruits(&self, fruits: Vec<Vec<(f64, f64)>>) -> tantivy::Result<Vec<(f64, f64)>> {
        Ok(fruits.into_iter().flatten().collect())
    }
}

impl tantivy::collector::SegmentCollector for SegmentRanges {
    type Fruit = Vec<(f64, f64)>;

    fn collect(&mut self, doc: tantivy::DocId, _score: tantivy::Score) {
        let value = |i: usize| -> Option<f64> {
            if let Some(column) = &self.dates[i] {
                return column.first(doc).map(|d| d.into_timestamp_millis() as f64);
            }
            if let Some(column) = &self.longs[i]
                && let Some(n) = column.first(doc)
            {
                return Some(n as f64);
            }
            self.ends[i].as_ref().and_then(|column| column.first(doc))
        };
        let dates = self.dates.iter().any(Option::is_some);
        let integral = dates || self.longs.iter().any(Option::is_some);
        let step = |v: f64, up: bool| match (integral, up) {
            (true, true) => v + 1.0,
            (true, false) => v - 1.0,
            (false, true) => v.next_up(),
            (false, false) => v.next_down(),
        };
        let low = value(0)
            .or_else(|| value(1).map(|v| step(v, true)))
            .unwrap_or(f64::NEG_INFINITY);
        let high = value(2)
            .or_else(|| value(3).map(|v| step(v, false)))
            .unwrap_or(f64::INFINITY);
        if value(0).or(value(1)).or(value(2)).or(value(3)).is_some() {
            self.found.push((low, high));
        }
    }

    fn harvest(self) -> Vec<(f64, f64)> {
        self.found
    }
}

/// A `histogram` or `date_histogram` over the range field at `path` (of type `range_type`):
/// a record counts in every bucket its range overlaps, as Elasticsearch counts it. `sources`
/// are the searched snapshots with the search's query compiled for each. Served: `interval`,
/// `fixed_interval` or `calendar_interval`, `offset`, `time_zone`, `min_doc_count`,
/// `hard_bounds`, `extended_bounds`, `format`; sub-aggregations are not.
pub fn range_histogram(
    name: &str,
    kind: &str,
    body: &Value,
    path: &str,
    sources: &[(&TableSnapshot, &dyn tantivy::query::Query)],
    now: i64,
) -> Result<std::result::Result<Value, DslError>> {
    let dates = kind == "date_histogram";
    let Value::Object(spec) = body else {
        return Ok(Err(invalid(format!(
            "[{kind}] of [{name}] must be an object"
        ))));
    };
    for key in spec.keys() {
        if !matches!(
            key.as_str(),
            "field"
                | "interval"
                | "fixed_interval"
                | "calendar_interval"
                | "offset"
                | "time_zone"
                | "min_doc_count"
                | "hard_bounds"
                | "extended_bounds"
                | "format"
        ) {
            return Ok(Err(invalid(format!(
                "[{key}] of [{kind}] [{name}] over a range field is not supported yet"
            ))));
        }
    }
    let mut ranges = Vec::new();
    for (snapshot, query) in sources {
        let mut run = |index: &DocsIndex, deleted: Arc<roaring::RoaringTreemap>| -> Result<()> {
            let ends = RangeEnds {
                path: path.to_owned(),
                dates,
            };
            ranges.extend(search_live(index, *query, deleted, ends)?);
            Ok(())
        };
        snapshot.each_docs_index(&mut run)?;
    }
    Ok(histogram_of_ranges(name, kind, spec, &ranges, now))
}

/// The buckets of [`range_histogram`] for `ranges` (inclusive ends).
fn histogram_of_ranges(
    name: &str,
    kind: &str,
    spec: &Map<String, Value>,
    ranges: &[(f64, f64)],
    now: i64,
) -> std::result::Result<Value, DslError> {
    let dates = kind == "date_histogram";
    let zone = match spec.get("time_zone").and_then(Value::as_str) {
        Some(text) => Some(Zone::parse(text).map_err(|r| invalid(format!("[{name}]: {r}")))?),
        None => None,
    }
    .filter(|zone| !zone.is_utc());
    let bound = |value: &Value| -> Option<f64> {
        match (value, dates) {
            (Value::Number(n), _) => n.as_f64(),
            (Value::String(text), true) => date_math(text, now, false).map(|ms| ms as f64),
            (Value::String(text), false) => text.parse().ok(),
            _ => None,
        }
    };
    let bounds_of = |key: &str| -> std::result::Result<Option<(f64, f64)>, DslError> {
        let Some(object) = spec.get(key) else {
            return Ok(None);
        };
        let (Some(min), Some(max)) = (
            object.get("min").and_then(bound),
            object.get("max").and_then(bound),
        ) else {
            return Err(invalid(format!(
                "[{key}] of [{name}] needs a [min] and a [max]"
            )));
        };
        Ok(Some((min, max)))
    };
    let hard = bounds_of("hard_bounds")?;
    let extended = bounds_of("extended_bounds")?;
    let min_doc_count = spec
        .get("min_doc_count")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    // The span buckets are drawn over: the finite ends of the ranges, widened by
    // `extended_bounds`, within `hard_bounds`.
    let finite = ranges
        .iter()
        .flat_map(|(a, b)| [*a, *b])
        .filter(|v| v.is_finite());
    let (mut low, mut high) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
        (l.min(v), h.max(v))
    });
    if let Some((min, max)) = extended {
        (low, high) = (low.min(min), high.max(max));
    }
    if let Some((min, max)) = hard {
        // Open ranges reach the hard bounds; nothing goes past them.
        if ranges.iter().any(|(a, _)| a.is_infinite()) {
            low = min;
        }
        if ranges.iter().any(|(_, b)| b.is_infinite()) {
            high = max;
        }
        (low, high) = (low.max(min), high.min(max));
    }
    let mut buckets = Vec::new();
    if low <= high && low.is_finite() && high.is_finite() {
        // The buckets' starts from the one holding `low` past `high`.
        let shift = match spec.get("offset") {
            None => 0.0,
            Some(Value::String(text)) if dates => offset_ms(text).ok_or_else(|| {
                invalid(format!("[offset] of [{name}]: [{text}] is not a duration"))
            })? as f64,
            Some(value) => value
                .as_f64()
                .or_else(|| value.as_str().and_then(|t| t.parse().ok()))
                .ok_or_else(|| invalid(format!("[offset] of [{name}] must be a number")))?,
        };
        let starts: Vec<f64> = match dates {
            true => {
                let interval = ["calendar_interval", "fixed_interval", "interval"]
                    .iter()
                    .find_map(|key| spec.get(*key).and_then(Value::as_str))
                    .ok_or_else(|| {
                        invalid(format!("[{name}]: a date histogram needs an interval"))
                    })?;
                let step = match calendar_months(interval) {
                    Some(months) => Step::Months(months),
                    None => {
                        let fixed = fixed_of_calendar(interval).unwrap_or(interval);
                        let ms = offset_ms(fixed).filter(|ms| *ms > 0).ok_or_else(|| {
                            invalid(format!("[{name}]: [{interval}] is not an interval"))
                        })?;
                        let grid = if matches!(interval, "week" | "1w") {
                            4 * DAY_MS
                        } else {
                            0
                        };
                        Step::Fixed(ms, grid)
                    }
                };
                periods(low as i64, high as i64, step, zone, shift as i64)?
                    .into_iter()
                    .map(|ms| ms as f64)
                    .collect()
            }
            false => {
                let interval = spec
                    .get("interval")
                    .and_then(Value::as_f64)
                    .filter(|i| *i > 0.0)
                    .ok_or_else(|| {
                        invalid(format!("[{name}]: a histogram needs an [interval] above 0"))
                    })?;
                let first = ((low - shift) / interval).floor() * interval + shift;
                let count = ((high - first) / interval).floor() as usize + 2;
                if count > BUCKET_LIMIT as usize {
                    return Err(invalid(format!(
                        "[{name}] would have more than {BUCKET_LIMIT} buckets"
                    )));
                }
                (0..count).map(|i| first + i as f64 * interval).collect()
            }
        };
        // A bucket is [start, next start); its key must fall within the hard bounds.
        let count = starts.len().saturating_sub(1);
        let mut counts = vec![0i64; count + 1];
        let index = |v: f64| starts.partition_point(|s| *s <= v).saturating_sub(1);
        for (a, b) in ranges {
            if count == 0 || *b < starts[0] || *a >= starts[count] {
                continue;
            }
            let i = index(a.max(starts[0])).min(count - 1);
            let j = index(*b).min(count - 1);
            counts[i] += 1;
            counts[j + 1] -= 1;
        }
        let mut running = 0;
        let format = spec.get("format").cloned();
        let printer =
            json!({FORMAT_MARKER: format, TIME_ZONE_MARKER: zone.as_ref().map(zone_name)});
        for (i, start) in starts.iter().take(count).enumerate() {
            running += counts[i];
            if let Some((min, max)) = hard
                && (*start < min || *start > max)
            {
                continue;
            }
            let mut bucket = json!({"key": start, "doc_count": running});
            if dates {
                bucket["key"] = json!(*start as i64);
                bucket["key_as_string"] = date_printed(&printer, *start as i64);
            } else {
                bucket["key"] = whole(&json!(start));
            }
            buckets.push(bucket);
        }
    }
    // Empty buckets are listed between the first and last that are not, or all of them with
    // `min_doc_count` above 0 left out.
    let doc_count = |b: &Value| b["doc_count"].as_u64().unwrap_or(0);
    if min_doc_count == 0 && extended.is_none() {
        let first = buckets
            .iter()
            .position(|b| doc_count(b) > 0)
            .unwrap_or(buckets.len());
        let last = buckets
            .iter()
            .rposition(|b| doc_count(b) > 0)
            .map_or(first, |i| i + 1);
        buckets.truncate(last);
        buckets.drain(..first);
    } else if min_doc_count > 0 {
        buckets.retain(|b| doc_count(b) >= min_doc_count);
    }
    Ok(json!({ "buckets": buckets }))
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
    fn calendar_periods_cover_the_values() {
        let ms = |text: &str| {
            chrono::DateTime::parse_from_rfc3339(text)
                .unwrap()
                .timestamp_millis()
        };
        let months = periods(
            ms("2026-01-31T23:00:00Z"),
            ms("2026-03-01T00:00:00Z"),
            Step::Months(1),
            None,
            0,
        )
        .unwrap();
        let expected: Vec<i64> = [
            "2026-01-01T00:00:00Z",
            "2026-02-01T00:00:00Z",
            "2026-03-01T00:00:00Z",
            "2026-04-01T00:00:00Z",
        ]
        .iter()
        .map(|t| ms(t))
        .collect();
        assert_eq!(months, expected);
        let quarters = periods(
            ms("2025-05-05T00:00:00Z"),
            ms("2025-07-01T00:00:00Z"),
            Step::Months(3),
            None,
            0,
        )
        .unwrap();
        assert_eq!(quarters[0], ms("2025-04-01T00:00:00Z"));
        assert_eq!(quarters.len(), 3);
        let years = periods(
            ms("2024-12-31T23:59:59Z"),
            ms("2025-01-01T00:00:00Z"),
            Step::Months(12),
            None,
            0,
        )
        .unwrap();
        assert_eq!(
            years,
            [
                ms("2024-01-01T00:00:00Z"),
                ms("2025-01-01T00:00:00Z"),
                ms("2026-01-01T00:00:00Z")
            ]
        );
    }

    #[test]
    fn local_days_of_a_zone_follow_its_clock_changes() {
        let ms = |text: &str| {
            chrono::DateTime::parse_from_rfc3339(text)
                .unwrap()
                .timestamp_millis()
        };
        let paris = Zone::parse("Europe/Paris").ok();
        // Clocks go forward on 2026-03-29: that day has 23 hours.
        let days = periods(
            ms("2026-03-28T12:00:00Z"),
            ms("2026-03-30T12:00:00Z"),
            Step::Fixed(DAY_MS, 0),
            paris,
            0,
        )
        .unwrap();
        let expected: Vec<i64> = [
            "2026-03-28T00:00:00+01:00",
            "2026-03-29T00:00:00+01:00",
            "2026-03-30T00:00:00+02:00",
            "2026-03-31T00:00:00+02:00",
        ]
        .iter()
        .map(|t| ms(t))
        .collect();
        assert_eq!(days, expected);
        // Months begin at local midnight, and an offset shifts them in local time.
        let months = periods(
            ms("2026-01-15T00:00:00Z"),
            ms("2026-01-20T00:00:00Z"),
            Step::Months(1),
            paris,
            6 * 3_600_000,
        )
        .unwrap();
        assert_eq!(
            months,
            [
                ms("2026-01-01T06:00:00+01:00"),
                ms("2026-02-01T06:00:00+01:00")
            ]
        );
    }

    struct Bounded(i64, i64);
    impl Fields for Bounded {
        fn is_date(&self, _field: &str) -> bool {
            true
        }
        fn date_bounds(&self, _field: &str) -> Option<(i64, i64)> {
            Some((self.0, self.1))
        }
    }

    #[test]
    fn a_zone_of_one_offset_shifts_the_grid_and_weeks_begin_on_monday() {
        let histogram = |body: Value| {
            let translated = translate(
                &json!({"h": {"date_histogram": body}}),
                &Bounded(0, DAY_MS),
                0,
            )
            .unwrap()
            .translated;
            translated["h"]["date_histogram"].clone()
        };
        let day = histogram(
            json!({"field": "at", "calendar_interval": "day", "time_zone": "America/Phoenix"}),
        );
        assert_eq!(day["offset"], json!("25200000ms"));
        assert_eq!(day[TIME_ZONE_MARKER], json!("America/Phoenix"));
        let week = histogram(json!({"field": "at", "calendar_interval": "week"}));
        assert_eq!(week["offset"], json!(format!("{}ms", 4 * DAY_MS)));
        let shifted = histogram(
            json!({"field": "at", "fixed_interval": "1d", "offset": "+6h", "time_zone": "+01:00"}),
        );
        assert_eq!(shifted["offset"], json!("18000000ms"));
        let utc = histogram(json!({"field": "at", "fixed_interval": "1h", "time_zone": "UTC"}));
        assert!(utc.get("offset").is_none() && utc.get(TIME_ZONE_MARKER).is_none());
        let error = translate(
            &json!({"h": {"date_histogram": {"field": "at", "fixed_interval": "1h", "time_zone": "Nowhere/Land"}}}),
            &Bounded(0, DAY_MS),
            0,
        )
        .unwrap_err();
        assert!(
            error.reason.contains("unknown time zone [Nowhere/Land]"),
            "{}",
            error.reason
        );
    }

    #[test]
    fn keys_print_in_the_zone() {
        let request = json!({TIME_ZONE_MARKER: "America/Phoenix"});
        assert_eq!(
            date_printed(&request, 1_451_606_400_000),
            json!("2015-12-31T17:00:00.000-07:00")
        );
        assert_eq!(
            date_printed(&json!({}), 0),
            json!("1970-01-01T00:00:00.000Z")
        );
    }

    #[test]
    fn terms_fall_in_the_partitions_elasticsearch_gives_them() {
        // The partitions Elasticsearch's own tests expect (search.aggregation/20_terms.yml).
        assert_eq!(partition_of(&json!("abc"), 2), Some(1));
        assert_eq!(partition_of(&json!("bcd"), 2), Some(0));
        assert_eq!(partition_of(&json!(1234), 2), Some(1));
        assert_eq!(partition_of(&json!(5678), 2), Some(0));
        // Lucene's murmur3 of known inputs.
        assert_eq!(murmur3_x86_32(b"", 0), 0);
        assert_eq!(murmur3_x86_32(b"hello", 0), 613_153_351);
        let mut body = json!({"field": "f", "include": {"partition": 2, "num_partitions": 2}});
        let Value::Object(body) = &mut body else {
            unreachable!()
        };
        assert!(partitioned("a", body).is_err());
    }

    #[test]
    fn range_keys_print_doubles_as_java_does() {
        assert_eq!(java_double(50.0), "50.0");
        assert_eq!(java_double(-0.5), "-0.5");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(1.5e7), "1.5E7");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(1e-4), "1.0E-4");
    }

    #[test]
    fn unsupported_aggregations_say_so() {
        for (aggs, needle) in [
            (
                json!({"a": {"date_histogram": {"field": "@timestamp", "calendar_interval": "2M"}}}),
                "calendar_interval [2M]",
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
