//! The subset of the Query DSL served on a SQL source, and the check that refuses the rest up
//! front, naming the first clause outside it.

use serde_json::Value;

use super::bad;
use crate::error::{Error, Result};

/// The keys a search body may have.
const BODY_KEYS: [&str; 9] = [
    "query",
    "aggs",
    "aggregations",
    "sort",
    "size",
    "from",
    "_source",
    "track_total_hits",
    "timeout",
];

/// The query clauses served.
pub(super) const QUERY_CLAUSES: [&str; 8] = [
    "bool",
    "term",
    "terms",
    "range",
    "exists",
    "match_all",
    "prefix",
    "wildcard",
];

/// The aggregations served at the top level.
const AGGREGATIONS: [&str; 8] = [
    "avg",
    "sum",
    "min",
    "max",
    "value_count",
    "cardinality",
    "terms",
    "range",
];

/// The aggregations served under a `terms` aggregation: the metrics.
pub(super) const METRICS: [&str; 6] = ["avg", "sum", "min", "max", "value_count", "cardinality"];

/// The keys of an aggregation's definition that are not its type.
pub(super) const AGG_KEYS: [&str; 3] = ["aggs", "aggregations", "meta"];

/// Checks that `body` names only what the subset serves.
pub(super) fn check(body: &Value) -> Result<()> {
    let map = match body {
        Value::Null => return Ok(()),
        Value::Object(map) => map,
        other => return Err(bad(format!("a search body is a JSON object, got {other}"))),
    };
    if let Some(key) = map.keys().find(|k| !BODY_KEYS.contains(&k.as_str())) {
        return Err(not_served("body key", key, &BODY_KEYS));
    }
    if map.contains_key("aggs") && map.contains_key("aggregations") {
        return Err(bad("use one of [aggs] and [aggregations], not both"));
    }
    if let Some(query) = map.get("query") {
        check_query(query)?;
    }
    match map.get("aggs").or_else(|| map.get("aggregations")) {
        Some(aggs) => check_aggs(aggs, None),
        None => Ok(()),
    }
}

/// The error for query clause `name`, which is not served.
pub(super) fn query_not_served(name: &str) -> Error {
    not_served("query clause", name, &QUERY_CLAUSES)
}

/// "`what` [`name`] is not served on a SQL source: `served`".
fn not_served(what: &str, name: &str, served: &[&str]) -> Error {
    bad(format!(
        "{what} [{name}] is not served on a SQL source: {}",
        served.join(", ")
    ))
}

/// Checks the clause names of `query`, recursing into `bool`. Shapes are checked later, when
/// the query is translated.
fn check_query(query: &Value) -> Result<()> {
    let Some(map) = query.as_object() else {
        return Ok(());
    };
    for (name, body) in map {
        if !QUERY_CLAUSES.contains(&name.as_str()) {
            return Err(query_not_served(name));
        }
        if name == "bool" {
            check_bool(body)?;
        }
    }
    Ok(())
}

/// Checks the clauses inside a `bool` clause's `body`.
fn check_bool(body: &Value) -> Result<()> {
    for occur in ["must", "filter", "should", "must_not"] {
        match body.get(occur) {
            Some(Value::Array(clauses)) => clauses.iter().try_for_each(check_query)?,
            Some(clause) => check_query(clause)?,
            None => {}
        }
    }
    Ok(())
}

/// Checks the aggregation types of `aggs`, recursing into sub-aggregations; `parent` is the
/// type of the aggregation they are under.
fn check_aggs(aggs: &Value, parent: Option<&str>) -> Result<()> {
    let Some(map) = aggs.as_object() else {
        return Ok(());
    };
    for (name, definition) in map {
        let Some(definition) = definition.as_object() else {
            continue;
        };
        let kinds = definition
            .keys()
            .filter(|k| !AGG_KEYS.contains(&k.as_str()));
        let mut kind = None;
        for key in kinds {
            check_agg_kind(key, name, parent)?;
            kind = Some(key.as_str());
        }
        for sub in ["aggs", "aggregations"] {
            if let Some(subs) = definition.get(sub) {
                check_aggs(subs, Some(kind.unwrap_or("?")))?;
            }
        }
    }
    Ok(())
}

/// Checks that aggregation type `kind`, named `name`, is served under `parent`.
fn check_agg_kind(kind: &str, name: &str, parent: Option<&str>) -> Result<()> {
    match parent {
        None if AGGREGATIONS.contains(&kind) => Ok(()),
        None => Err(not_served("aggregation", kind, &AGGREGATIONS)),
        Some("terms") if METRICS.contains(&kind) => Ok(()),
        Some("terms") => Err(not_served(
            &format!("sub-aggregation [{name}] of type"),
            kind,
            &METRICS,
        )),
        Some(parent) => Err(bad(format!(
            "sub-aggregation [{name}] of type [{kind}] under a [{parent}] aggregation is not \
             served on a SQL source: only [terms] takes sub-aggregations (metrics)"
        ))),
    }
}
