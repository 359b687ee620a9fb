//! The aggregations of a search (`aggs`), over every searched dataset at once: most run in
//! tantivy ([`aggs`]); `filters` and `ip_range` at the top level run each bucket's query with the
//! search's (their sub-aggregations too); sibling pipeline aggregations (`avg_bucket`,
//! `sum_bucket`, `min_bucket`, `max_bucket`) are computed from the buckets of the others.

use std::{ops::Bound, sync::Arc};

use serde_json::{Map, Value, json};
use strata_projections::table::{TableSnapshot, docs, ip};

use super::{
    aggs, bad,
    compile::{self as dsl, DslQuery},
};
use crate::error::{Error, Result};

/// One searched dataset's part of the aggregations: its snapshot, its document index schema
/// as the searcher may search it, and the search's query compiled for it.
pub(super) struct Part {
    pub snapshot: Arc<TableSnapshot>,
    pub docs: docs::DocsSchema,
    pub query: DslQuery,
}

impl Part {
    fn with(&self, query: DslQuery) -> Part {
        Part {
            snapshot: self.snapshot.clone(),
            docs: self.docs.clone(),
            query,
        }
    }
}

/// Which fields of the searched datasets are dates (in any of them), and their bounds, for
/// aggregations.
struct DatasetFields<'a>(Vec<&'a Part>);

impl aggs::Fields for DatasetFields<'_> {
    fn date_format(&self, field: &str) -> Option<String> {
        self.0
            .iter()
            .filter(|part| part.docs.path(field) != docs::UNMAPPED_PATH)
            .find_map(|part| part.snapshot.table.date_formats.get(field).cloned())
    }

    fn date_bounds(&self, field: &str) -> Option<(i64, i64)> {
        self.0
            .iter()
            .filter(|part| part.docs.path(field) != docs::UNMAPPED_PATH)
            .filter_map(|part| aggs::date_bounds(&part.snapshot, field).ok().flatten())
            .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
    }

    /// The field whose values `field` reads; a field the searcher may not search reads
    /// nothing, as one that is not mapped.
    fn resolve(&self, field: &str) -> String {
        self.0
            .iter()
            .map(|part| part.docs.path(field))
            .find(|resolved| *resolved != field)
            .unwrap_or(field)
            .to_owned()
    }

    fn is_ip(&self, field: &str) -> bool {
        self.0
            .iter()
            .any(|part| part.snapshot.table.declared_type(field) == Some("ip"))
    }

    fn is_date(&self, field: &str) -> bool {
        use strata_projections::schema::ColumnType;
        self.0
            .iter()
            .flat_map(|p| &p.snapshot.table.columns)
            .any(|c| {
                c.name == field
                    && matches!(
                        c.data_type,
                        ColumnType::Timestamp { .. } | ColumnType::Date32
                    )
            })
    }
}

/// Runs a search body's `aggs` over what each part's query matches in its snapshot (one part
/// per searched dataset), merged (see the module documentation).
pub(super) fn aggregate(parts: &[Part], request: &Value, now: i64) -> Result<Value> {
    let Value::Object(named) = request else {
        return Err(bad(
            "illegal_argument_exception",
            "[aggs] must be an object of named aggregations",
        ));
    };
    let kind_of = |agg: &Value| {
        if range_histogram_of(parts, agg).is_some() {
            return Some("range_histogram");
        }
        ["filters", "ip_range"]
            .into_iter()
            .chain(PIPELINES.iter().copied())
            .find(|kind| agg.get(*kind).is_some())
    };
    let native: Map<String, Value> = named
        .iter()
        .filter(|(_, agg)| kind_of(agg).is_none())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut answer = match native.is_empty() {
        true => json!({}),
        false => {
            let fields = DatasetFields(parts.iter().collect());
            let translated = aggs::translate(&Value::Object(native), &fields, now)
                .map_err(|error| bad(error.kind, error.reason))?;
            let mut partial = aggs::Partial::default();
            for part in parts {
                aggs::aggregate_into(
                    &part.snapshot,
                    part.query.as_ref(),
                    &translated,
                    &mut partial,
                )
                .map_err(index_error)?;
            }
            translated.finish(partial).map_err(index_error)?
        }
    };
    let buckets = Buckets { parts, now };
    for (name, agg) in named {
        let result = match kind_of(agg) {
            Some("filters") => buckets.filters(name, &agg["filters"], agg)?,
            Some("ip_range") => buckets.ip_ranges(name, &agg["ip_range"], agg)?,
            Some("range_histogram") => buckets.range_histogram(name, agg)?,
            _ => continue,
        };
        answer[name] = result;
        if let Some(meta) = agg.get("meta") {
            answer[name]["meta"] = meta.clone();
        }
    }
    // Pipelines read the others' buckets.
    for (name, agg) in named {
        if let Some(kind) = kind_of(agg).filter(|k| PIPELINES.contains(k)) {
            answer[name] = sibling_pipeline(name, kind, &agg[kind], &answer)?;
        }
    }
    Ok(answer)
}

/// The `aggregations` of a search's `profile`, for each part (dataset): each aggregation that
/// runs in tantivy, run again over that part alone with each phase timed
/// ([`aggs::aggregate_into_measured`]). `type` names the aggregator as Elasticsearch's profiler
/// does; `debug` has the buckets that received records, and what kind of column each segment
/// holds the field in; sub-aggregations are listed under `children` (they run inside their
/// parent's collector, which their time is part of). `filters`, `ip_range`, pipelines and
/// histograms of range fields are not listed.
pub(super) fn profile(parts: &[Part], request: &Value, now: i64) -> Result<Vec<Vec<Value>>> {
    use std::time::Instant;
    let mut out: Vec<Vec<Value>> = vec![Vec::new(); parts.len()];
    let Value::Object(named) = request else {
        return Ok(out);
    };
    let fields = DatasetFields(parts.iter().collect());
    for (name, agg) in named {
        let Some(kind) = aggs::native_kind(agg) else {
            continue;
        };
        if range_histogram_of(parts, agg).is_some() {
            continue;
        }
        let started = Instant::now();
        let single = json!({ name.clone(): agg.clone() });
        let translated = aggs::translate(&single, &fields, now)
            .map_err(|error| bad(error.kind, error.reason))?;
        let initialize = started.elapsed();
        let field = agg[kind]["field"].as_str();
        for (part, entries) in parts.iter().zip(out.iter_mut()) {
            let path = field.map(|f| {
                part.docs
                    .path(f.strip_suffix(".keyword").unwrap_or(f))
                    .to_owned()
            });
            let mut partial = aggs::Partial::default();
            let measured = aggs::aggregate_into_measured(
                &part.snapshot,
                part.query.as_ref(),
                &translated,
                path.as_deref(),
                &mut partial,
            )
            .map_err(index_error)?;
            let started = Instant::now();
            let result = translated.finish(partial).map_err(index_error)?;
            let build = started.elapsed();
            let result = &result[name.as_str()];
            entries.push(profiled(
                name, kind, agg, result, &measured, initialize, build,
            ));
        }
    }
    Ok(out)
}

/// One aggregation's entry in a search's `profile`.
fn profiled(
    name: &str,
    kind: &str,
    agg: &Value,
    result: &Value,
    measured: &aggs::Measured,
    initialize: std::time::Duration,
    build: std::time::Duration,
) -> Value {
    let nanos = |d: std::time::Duration| d.as_nanos() as u64;
    let buckets: Vec<&Value> = match result.get("buckets") {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(Value::Object(keyed)) => keyed.values().collect(),
        _ => Vec::new(),
    };
    let filled = buckets
        .iter()
        .filter(|b| b["doc_count"].as_u64().unwrap_or(0) > 0)
        .count();
    let numeric = measured.numeric > 0 && measured.ordinals == 0;
    let mut debug = json!({});
    let type_name = match kind {
        "histogram" => "NumericHistogramAggregator",
        "date_histogram" => "DateHistogramAggregator",
        "terms" if numeric => {
            let whole = buckets
                .iter()
                .all(|b| b["key"].as_f64().is_some_and(|k| k.fract() == 0.0));
            debug["result_strategy"] = json!(if whole { "long_terms" } else { "double_terms" });
            "NumericTermsAggregator"
        }
        "terms" => {
            debug["result_strategy"] = json!("terms");
            "StringTermsAggregator"
        }
        "cardinality" => {
            debug = json!({
                "empty_collectors_used": measured.empty,
                "numeric_collectors_used": measured.numeric,
                "ordinals_collectors_used": measured.ordinals,
                "ordinals_collectors_overhead_too_high": 0,
                "string_hashing_collectors_used": 0,
            });
            "CardinalityAggregator"
        }
        "avg" => "AvgAggregator",
        "sum" => "SumAggregator",
        "min" => "MinAggregator",
        "max" => "MaxAggregator",
        "stats" => "StatsAggregator",
        "value_count" => "ValueCountAggregator",
        _ => "RangeAggregator",
    };
    if result.get("buckets").is_some() {
        debug["total_buckets"] = json!(filled);
    }
    let breakdown = json!({
        "initialize": nanos(initialize),
        "initialize_count": 1,
        "build_leaf_collector": nanos(measured.build_leaf_collector),
        "build_leaf_collector_count": measured.segments,
        "collect": nanos(measured.collect),
        "collect_count": measured.collected,
        "post_collection": nanos(measured.post_collection),
        "post_collection_count": measured.segments,
        "build_aggregation": nanos(build),
        "build_aggregation_count": 1,
        "reduce": nanos(measured.reduce),
        "reduce_count": 1,
    });
    let total = initialize
        + measured.build_leaf_collector
        + measured.collect
        + measured.post_collection
        + measured.reduce
        + build;
    let children: Vec<Value> = agg
        .get("aggs")
        .or_else(|| agg.get("aggregations"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(sub, body)| {
            let kind = aggs::native_kind(body)?;
            let type_name = match kind {
                "max" => "MaxAggregator",
                "min" => "MinAggregator",
                "avg" => "AvgAggregator",
                "sum" => "SumAggregator",
                "stats" => "StatsAggregator",
                "value_count" => "ValueCountAggregator",
                "cardinality" => "CardinalityAggregator",
                "terms" => "TermsAggregator",
                "histogram" => "NumericHistogramAggregator",
                "date_histogram" => "DateHistogramAggregator",
                _ => "RangeAggregator",
            };
            Some(json!({"type": type_name, "description": sub}))
        })
        .collect();
    let mut entry = json!({
        "type": type_name,
        "description": name,
        "time_in_nanos": nanos(total),
        "breakdown": breakdown,
        "debug": debug,
    });
    if !children.is_empty() {
        entry["children"] = json!(children);
    }
    entry
}

/// A `histogram` or `date_histogram` of `agg` over a range field: its type and the field's
/// path in the document index.
fn range_histogram_of(parts: &[Part], agg: &Value) -> Option<(&'static str, String)> {
    ["histogram", "date_histogram"]
        .into_iter()
        .find_map(|kind| {
            let field = agg.get(kind)?.get("field")?.as_str()?;
            parts.iter().find_map(|part| {
                let path = part.docs.path(field);
                part.docs.range_type(path).map(|_| (kind, path.to_owned()))
            })
        })
}

/// Sibling pipeline aggregations served: a metric over the buckets of another aggregation.
const PIPELINES: &[&str] = &["avg_bucket", "sum_bucket", "min_bucket", "max_bucket"];

fn index_error(error: strata_projections::Error) -> Error {
    match error {
        strata_projections::Error::Index(reason) => bad("illegal_argument_exception", reason),
        other => Error::Projection(other),
    }
}

/// Aggregations whose buckets are queries run with the search's.
struct Buckets<'a> {
    parts: &'a [Part],
    now: i64,
}

impl Buckets<'_> {
    /// The bucket of the records `filter` (a compiled query) matches among the search's: its
    /// `doc_count` and its sub-aggregations.
    fn bucket(&self, filter: DslQuery, agg: &Value) -> Result<Value> {
        let combined: Vec<Part> = self
            .parts
            .iter()
            .map(|part| part.with(dsl::both(part.query.box_clone(), filter.box_clone())))
            .collect();
        let mut count = 0;
        for part in &combined {
            count += part
                .snapshot
                .search_documents(part.query.as_ref(), 0, docs::Deadline::default())
                .map_err(index_error)?
                .total;
        }
        let sub = agg.get("aggs").or_else(|| agg.get("aggregations"));
        let mut bucket = match sub {
            Some(sub) => aggregate(&combined, sub, self.now)?,
            None => json!({}),
        };
        bucket["doc_count"] = json!(count);
        Ok(bucket)
    }

    /// A histogram over a range field: each record counts in every bucket its range overlaps
    /// ([`aggs::range_histogram`]).
    fn range_histogram(&self, name: &str, agg: &Value) -> Result<Value> {
        let Some((kind, path)) = range_histogram_of(self.parts, agg) else {
            return Ok(json!({"buckets": []}));
        };
        if agg
            .get("aggs")
            .or_else(|| agg.get("aggregations"))
            .is_some()
        {
            return Err(bad(
                "illegal_argument_exception",
                format!(
                    "sub-aggregations of the {kind} [{name}] over a range field are not supported yet"
                ),
            ));
        }
        let sources: Vec<(&TableSnapshot, &dyn tantivy::query::Query)> = self
            .parts
            .iter()
            .map(|part| (part.snapshot.as_ref(), part.query.as_ref()))
            .collect();
        aggs::range_histogram(name, kind, &agg[kind], &path, &sources, self.now)
            .map_err(index_error)?
            .map_err(|error| bad(error.kind, error.reason))
    }

    /// Every dataset's document index has the same schema: any compiles the filters (as its
    /// searcher may search it).
    fn schema(&self) -> docs::DocsSchema {
        self.parts
            .first()
            .map(|part| part.docs.clone())
            .unwrap_or_default()
    }

    /// A `filters` aggregation: a bucket per query (keyed, or a list), and the records none
    /// matches when asked (`other_bucket`).
    fn filters(&self, name: &str, spec: &Value, agg: &Value) -> Result<Value> {
        let schema = self.schema();
        let other_key = match (spec.get("other_bucket"), spec.get("other_bucket_key")) {
            (Some(Value::Bool(false)), _) => None,
            (_, Some(key)) => Some(key.as_str().unwrap_or("_other_").to_owned()),
            (Some(Value::Bool(true)), None) => Some("_other_".to_owned()),
            _ => None,
        };
        let bucket_of = |filter: &Value| -> Result<Value> {
            let filter = dsl::compile(&schema, filter, self.now)
                .map_err(|error| bad(error.kind, error.reason))?;
            self.bucket(filter, agg)
        };
        let none_of = |filters: Vec<&Value>| json!({"bool": {"must_not": filters}});
        let buckets = match &spec["filters"] {
            Value::Object(keyed) => {
                let mut buckets = keyed
                    .iter()
                    .map(|(key, filter)| Ok((key.clone(), bucket_of(filter)?)))
                    .collect::<Result<Map<String, Value>>>()?;
                if let Some(key) = other_key {
                    let other = bucket_of(&none_of(keyed.values().collect()))?;
                    buckets.insert(key, other);
                }
                Value::Object(buckets)
            }
            Value::Array(list) => {
                let mut buckets: Vec<Value> = list.iter().map(bucket_of).collect::<Result<_>>()?;
                if other_key.is_some() {
                    buckets.push(bucket_of(&none_of(list.iter().collect()))?);
                }
                Value::Array(buckets)
            }
            other => {
                return Err(bad(
                    "illegal_argument_exception",
                    format!(
                        "[filters] of [{name}] must be an object or a list of queries, not {other}"
                    ),
                ));
            }
        };
        Ok(json!({ "buckets": buckets }))
    }

    /// An `ip_range` aggregation: a bucket per range of addresses of an IP field, each `from`
    /// (included) `to` (excluded) or a CIDR `mask`, keyed `from-to` (`*` where unbounded) or by
    /// its mask or its own `key`.
    fn ip_ranges(&self, name: &str, spec: &Value, agg: &Value) -> Result<Value> {
        let invalid = |reason: String| bad("illegal_argument_exception", reason);
        let field = spec
            .get("field")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(format!("[ip_range] aggregation [{name}] needs a [field]")))?;
        let Some(Value::Array(ranges)) = spec.get("ranges") else {
            return Err(invalid(format!(
                "[ip_range] aggregation [{name}] needs [ranges]"
            )));
        };
        let address = |range: &Value, bound: &str| -> Result<Option<u128>> {
            match range.get(bound) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) => ip::number(text).map(Some).ok_or_else(|| {
                    invalid(format!(
                        "[{bound}] of [{name}]: [{text}] is not an IP address"
                    ))
                }),
                Some(other) => Err(invalid(format!(
                    "[{bound}] of [{name}] must be an IP address, not {other}"
                ))),
            }
        };
        let schema = self.schema();
        let mut buckets = Vec::with_capacity(ranges.len());
        for range in ranges {
            let (from, to, mut key) = match range.get("mask").and_then(Value::as_str) {
                Some(mask) => {
                    let (lo, hi) = ip::block(mask).ok_or_else(|| {
                        invalid(format!("[mask] of [{name}]: [{mask}] is not a CIDR block"))
                    })?;
                    (Some(lo), hi.checked_add(1), mask.to_owned())
                }
                None => {
                    let (from, to) = (address(range, "from")?, address(range, "to")?);
                    let text = |n: Option<u128>| n.map_or("*".to_owned(), ip::display);
                    (from, to, format!("{}-{}", text(from), text(to)))
                }
            };
            if let Some(own) = range.get("key").and_then(Value::as_str) {
                key = own.to_owned();
            }
            let lower = from.map_or(Bound::Unbounded, Bound::Included);
            let upper = to.map_or(Bound::Unbounded, Bound::Excluded);
            let mut bucket = self.bucket(dsl::ip_range_query(&schema, field, lower, upper), agg)?;
            bucket["key"] = json!(key);
            if let Some(from) = from {
                bucket["from"] = json!(ip::display(from));
            }
            if let Some(to) = to {
                bucket["to"] = json!(ip::display(to));
            }
            buckets.push(bucket);
        }
        let keyed = spec.get("keyed").and_then(Value::as_bool) == Some(true);
        Ok(match keyed {
            true => {
                let keyed: Map<String, Value> = buckets
                    .into_iter()
                    .map(|b| (b["key"].as_str().unwrap_or_default().to_owned(), b))
                    .collect();
                json!({ "buckets": keyed })
            }
            false => json!({ "buckets": buckets }),
        })
    }
}

/// A sibling pipeline aggregation (`avg_bucket`, ...): the metric `kind` names over the values
/// `buckets_path` (`agg>sub.metric`, `agg>sub`, `agg._count`) reads in each bucket of the
/// aggregation it names; buckets without a value, and empty ones but for their count, are gaps,
/// skipped (Elasticsearch's `gap_policy: skip`).
fn sibling_pipeline(name: &str, kind: &str, spec: &Value, answer: &Value) -> Result<Value> {
    let invalid = |reason: String| bad("illegal_argument_exception", reason);
    let path = spec
        .get("buckets_path")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            invalid(format!(
                "[{kind}] aggregation [{name}] needs a [buckets_path]"
            ))
        })?;
    let mut steps: Vec<&str> = path.split('>').collect();
    // The last step may name a metric of its aggregation (`sub.value`) or the bucket's count.
    let last = steps.pop().unwrap_or_default();
    let (last, metric) = match last.split_once('.') {
        Some((agg, metric)) => (agg, Some(metric)),
        None => (last, None),
    };
    steps.push(last);
    let (first, rest) = steps.split_first().unwrap_or((&"", &[]));
    let buckets = match answer.get(*first).map(|a| &a["buckets"]) {
        Some(Value::Array(list)) => list.clone(),
        Some(Value::Object(keyed)) => keyed.values().cloned().collect(),
        _ => {
            return Err(invalid(format!(
                "No aggregation found for path [{path}] of [{name}]: [{first}] is not a multi-bucket aggregation of this search"
            )));
        }
    };
    // With no further step, `first.metric` names a bucket property (`_count`, `_key`) or a
    // sub-aggregation.
    let counting = metric == Some("_count") || (rest.is_empty() && metric.is_none());
    let values: Vec<f64> = buckets
        .iter()
        .filter(|bucket| counting || bucket["doc_count"].as_u64() != Some(0))
        .filter_map(|bucket| {
            let value = match (rest, metric) {
                ([], Some("_count")) => &bucket["doc_count"],
                ([], Some(sub)) => {
                    let sub = &bucket[sub];
                    sub.get("value").unwrap_or(sub)
                }
                ([], None) => &bucket["doc_count"],
                (steps, metric) => {
                    let mut at = bucket;
                    for step in steps {
                        at = &at[*step];
                    }
                    match metric {
                        Some("_count") => &at["doc_count"],
                        Some(metric) => &at[metric],
                        None => at.get("value").unwrap_or(at),
                    }
                }
            };
            value.as_f64()
        })
        .collect();
    let value = match kind {
        "sum_bucket" => Some(values.iter().sum::<f64>()),
        "avg_bucket" => {
            (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
        }
        "min_bucket" => values.iter().copied().reduce(f64::min),
        _ => values.iter().copied().reduce(f64::max),
    };
    Ok(json!({ "value": value }))
}
