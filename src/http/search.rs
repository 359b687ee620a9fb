//! Elasticsearch's JSON of a Query DSL search's typed answer ([`SearchResult`]): the one place
//! it is rendered.

use serde_json::{Map, Value, json};
use strata_projections::table::docs::SortValue;

use crate::engine::{Aggregation, Aggregations, Bucket, Hit, SearchResult};

/// How a search's answer is shown, beside its body.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shown {
    /// A hit's `matched_queries` give each named query's score (`include_named_queries_score`).
    pub named_scores: bool,
    /// `hits.total` is a number, not `{value, relation}` (`rest_total_hits_as_int`); -1 when
    /// not counted.
    pub total_as_int: bool,
}

/// The response body of a search.
pub fn answer(result: &SearchResult, shown: Shown) -> Value {
    let mut hits = Map::new();
    if let Some(total) = &result.total {
        let relation = if total.at_least { "gte" } else { "eq" };
        hits.insert(
            "total".into(),
            json!({"value": total.value, "relation": relation}),
        );
    }
    hits.insert("max_score".into(), json!(result.max_score));
    hits.insert(
        "hits".into(),
        Value::Array(result.hits.iter().map(|h| hit(h, shown)).collect()),
    );
    if shown.total_as_int {
        let total = result.total.map_or(json!(-1), |t| json!(t.value));
        hits.insert("total".into(), total);
    }
    let shards = result.shards;
    let mut answer = json!({
        "took": result.took_ms,
        "timed_out": result.timed_out,
        "_shards": {"total": shards, "successful": shards, "skipped": 0, "failed": 0},
        "hits": hits,
    });
    if let Some(early) = result.terminated_early {
        answer["terminated_early"] = json!(early);
    }
    if let Some(aggregations) = &result.aggregations {
        answer["aggregations"] = self::aggregations(aggregations);
    }
    if let Some(profile) = &result.profile {
        answer["profile"] = profile.clone();
    }
    answer
}

fn sort_value(value: &Option<SortValue>) -> Value {
    match value {
        None => Value::Null,
        Some(SortValue::Text(text)) => json!(text),
        Some(SortValue::Int(n)) => json!(n),
        Some(SortValue::Number(n)) if n.fract() == 0.0 && n.abs() < 9.0e15 => json!(*n as i64),
        Some(SortValue::Number(n)) => json!(n),
    }
}

fn hit(hit: &Hit, shown: Shown) -> Value {
    let mut entry = Map::new();
    entry.insert("_index".into(), json!(hit.index));
    entry.insert("_id".into(), json!(hit.id));
    entry.insert("_score".into(), json!(hit.score));
    if let Some(source) = &hit.source {
        entry.insert("_source".into(), Value::Object(source.clone()));
    }
    if !hit.ignored.is_empty() {
        entry.insert("_ignored".into(), json!(hit.ignored));
    }
    if !hit.matched_queries.is_empty() {
        let named = &hit.matched_queries;
        let value = match shown.named_scores {
            true => Value::Object(
                named
                    .iter()
                    .map(|(name, score)| (name.clone(), json!(score)))
                    .collect(),
            ),
            false => json!(named.iter().map(|(name, _)| name).collect::<Vec<_>>()),
        };
        entry.insert("matched_queries".into(), value);
    }
    if !hit.fields.is_empty() {
        entry.insert("fields".into(), Value::Object(hit.fields.clone()));
    }
    if let Some(sort) = &hit.sort {
        entry.insert(
            "sort".into(),
            Value::Array(sort.iter().map(sort_value).collect()),
        );
    }
    Value::Object(entry)
}

/// The `aggregations` object of a search's answer.
pub fn aggregations(aggregations: &Aggregations) -> Value {
    Value::Object(
        aggregations
            .0
            .iter()
            .map(|(name, result)| (name.clone(), aggregation(result)))
            .collect(),
    )
}

fn with_nested(mut object: Map<String, Value>, nested: &Aggregations) -> Value {
    for (name, result) in &nested.0 {
        object.insert(name.clone(), aggregation(result));
    }
    Value::Object(object)
}

fn aggregation(result: &Aggregation) -> Value {
    match result {
        Aggregation::Value { value, rest } => {
            let mut object = rest.clone();
            object.insert(
                "value".into(),
                value.clone().map_or(Value::Null, Value::Number),
            );
            Value::Object(object)
        }
        Aggregation::Buckets {
            buckets,
            keyed,
            rest,
        } => {
            let mut object = rest.clone();
            let shown = match keyed {
                true => Value::Object(
                    buckets
                        .iter()
                        .map(|b| (key_text(&b.key), bucket(b, false)))
                        .collect(),
                ),
                false => Value::Array(buckets.iter().map(|b| bucket(b, true)).collect()),
            };
            object.insert("buckets".into(), shown);
            Value::Object(object)
        }
        Aggregation::Single {
            doc_count,
            aggregations,
            rest,
        } => {
            let mut object = rest.clone();
            object.insert("doc_count".into(), json!(doc_count));
            with_nested(object, aggregations)
        }
        Aggregation::Values(values) => Value::Object(values.clone()),
    }
}

fn key_text(key: &Value) -> String {
    match key {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn bucket(bucket: &Bucket, with_key: bool) -> Value {
    let mut object = bucket.rest.clone();
    if with_key && !bucket.key.is_null() {
        object.insert("key".into(), bucket.key.clone());
    }
    object.insert("doc_count".into(), json!(bucket.doc_count));
    with_nested(object, &bucket.aggregations)
}
