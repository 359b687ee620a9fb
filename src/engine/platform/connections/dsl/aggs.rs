//! Aggregations over the records a query matches: metrics (`avg`, `sum`, `min`, `max`,
//! `value_count`, `cardinality`), `terms` (with metric sub-aggregations) and `range`.
//!
//! Every metric, every `range` bucket and the count behind each `terms` aggregation's
//! `sum_other_doc_count` are one aggregate query without grouping; each `terms` aggregation is
//! one grouped query more.

use arrow::{
    array::{Array, ArrayRef, AsArray},
    compute::concat_batches,
    datatypes::{DataType, Int64Type},
    record_batch::RecordBatch,
};
use datafusion::{
    common::ScalarValue,
    functions_aggregate::expr_fn::{avg, count, count_distinct, max, min, sum},
    logical_expr::{SortExpr, utils::conjunction, when},
    prelude::{DataFrame, Expr, ident, lit},
};
use serde_json::{Map, Value, json};

use super::{
    Fields, bad, cells,
    coerce::{self, Dates, Op},
    internal,
    query::compare,
    subset::{AGG_KEYS, METRICS},
};
use crate::error::{Error, Result};

/// The column of a `terms` bucket's document count.
const COUNT: &str = "__dsl_count";

/// One named aggregation of the body.
pub(super) struct Named {
    name: String,
    meta: Option<Value>,
    agg: Agg,
}

/// An aggregation, read.
enum Agg {
    Metric(Metric),
    Terms(Terms),
    Range(RangeAgg),
}

/// The metric aggregations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Avg,
    Sum,
    Min,
    Max,
    ValueCount,
    Cardinality,
}

/// A metric on a field.
struct Metric {
    kind: Kind,
    field: String,
}

/// A metric under a `terms` aggregation.
struct Sub {
    name: String,
    meta: Option<Value>,
    metric: Metric,
}

/// What `terms` buckets are ordered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OrderBy {
    Count,
    Key,
    /// The value of the sub-aggregation at this index.
    Sub(usize),
}

/// A `terms` aggregation.
struct Terms {
    field: String,
    size: usize,
    /// Keys of the buckets' order, each ascending or not.
    order: Vec<(OrderBy, bool)>,
    min_doc_count: i64,
    subs: Vec<Sub>,
}

/// A `range` aggregation.
struct RangeAgg {
    field: String,
    keyed: bool,
    buckets: Vec<RangeBucket>,
}

/// One range of a `range` aggregation: from (inclusive) to (exclusive).
struct RangeBucket {
    key: String,
    from: Option<Bound>,
    to: Option<Bound>,
}

/// One end of a range: the literal compared with the column, and how the response shows it.
struct Bound {
    literal: ScalarValue,
    json: Value,
    as_string: Option<String>,
}

/// Reads the named aggregations of `aggs` (already checked against the subset).
pub(super) fn read(aggs: &Value, fields: &Fields) -> Result<Vec<Named>> {
    let map = aggs.as_object().ok_or_else(|| {
        bad(format!(
            "[aggs] is an object of named aggregations, got {aggs}"
        ))
    })?;
    map.iter()
        .map(|(name, definition)| {
            let (kind, body, definition) = kind_of(name, definition)?;
            let agg = match kind {
                "terms" => Agg::Terms(read_terms(name, body, definition, fields)?),
                "range" => Agg::Range(read_range(name, body, fields)?),
                metric => Agg::Metric(read_metric(metric, name, body, fields)?),
            };
            let meta = definition.get("meta").cloned();
            Ok(Named {
                name: name.clone(),
                meta,
                agg,
            })
        })
        .collect()
}

/// The type of aggregation `name`, its body and its whole definition.
fn kind_of<'a>(
    name: &str,
    definition: &'a Value,
) -> Result<(&'a str, &'a Value, &'a Map<String, Value>)> {
    let refuse = || {
        bad(format!(
            "aggregation [{name}] names exactly one aggregation type, got {definition}"
        ))
    };
    let map = definition.as_object().ok_or_else(refuse)?;
    let mut kinds = map.iter().filter(|(k, _)| !AGG_KEYS.contains(&k.as_str()));
    match (kinds.next(), kinds.next()) {
        (Some((kind, body)), None) => Ok((kind.as_str(), body, map)),
        _ => Err(refuse()),
    }
}

/// The object body of aggregation `name` of type `kind`, with only the `allowed` keys.
fn body_map<'a>(
    kind: &str,
    name: &str,
    body: &'a Value,
    allowed: &[&str],
) -> Result<&'a Map<String, Value>> {
    let map = body.as_object().ok_or_else(|| {
        bad(format!(
            "[{kind}] aggregation [{name}] takes an object, got {body}"
        ))
    })?;
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(bad(format!(
            "[{kind}] aggregation [{name}] does not support [{key}]"
        ))),
        None => Ok(map),
    }
}

/// The `field` of aggregation `name` of type `kind`, and its type.
fn field_of<'a>(
    kind: &str,
    name: &str,
    map: &Map<String, Value>,
    fields: &'a Fields,
) -> Result<(String, &'a DataType)> {
    let field = map
        .get("field")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("[{kind}] aggregation [{name}] needs a [field]")))?;
    Ok((field.to_string(), fields.require(field)?))
}

/// Reads metric aggregation `name` of type `kind`.
fn read_metric(kind: &str, name: &str, body: &Value, fields: &Fields) -> Result<Metric> {
    let allowed: &[&str] = if kind == "cardinality" {
        &["field", "precision_threshold"]
    } else {
        &["field"]
    };
    let map = body_map(kind, name, body, allowed)?;
    let (field, data_type) = field_of(kind, name, map, fields)?;
    let metric = match kind {
        "avg" => Kind::Avg,
        "sum" => Kind::Sum,
        "min" => Kind::Min,
        "max" => Kind::Max,
        "value_count" => Kind::ValueCount,
        "cardinality" => Kind::Cardinality,
        other => {
            return Err(bad(format!(
                "aggregation [{other}] is not served on a SQL source"
            )));
        }
    };
    if !metric.accepts(data_type) {
        return Err(bad(format!(
            "[{kind}] on [{field}]: not served on a field of type {data_type}"
        )));
    }
    Ok(Metric {
        kind: metric,
        field,
    })
}

impl Kind {
    /// Whether the metric is defined on a column of `data_type`.
    fn accepts(self, data_type: &DataType) -> bool {
        match self {
            Kind::Avg | Kind::Sum => data_type.is_numeric(),
            Kind::Min | Kind::Max => {
                data_type.is_numeric() || cells::is_temporal(data_type) || data_type.is_string()
            }
            Kind::ValueCount | Kind::Cardinality => true,
        }
    }
}

impl Metric {
    /// The aggregate expression of the metric.
    fn expr(&self) -> Expr {
        let column = ident(&self.field);
        match self.kind {
            Kind::Avg => avg(column),
            Kind::Sum => sum(column),
            Kind::Min => min(column),
            Kind::Max => max(column),
            Kind::ValueCount => count(column),
            Kind::Cardinality => count_distinct(column),
        }
    }
}

/// Reads `terms` aggregation `name` with its `definition` (for sub-aggregations).
fn read_terms(
    name: &str,
    body: &Value,
    definition: &Map<String, Value>,
    fields: &Fields,
) -> Result<Terms> {
    let allowed = ["field", "size", "order", "min_doc_count", "shard_size"];
    let map = body_map("terms", name, body, &allowed)?;
    let (field, _) = field_of("terms", name, map, fields)?;
    let positive = |key: &str, default: u64| match map.get(key) {
        None => Ok(default),
        Some(value) => value.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            bad(format!(
                "[terms] aggregation [{name}]: [{key}] must be a positive integer, got {value}"
            ))
        }),
    };
    let size = usize::try_from(positive("size", 10)?).unwrap_or(usize::MAX);
    let min_doc_count = i64::try_from(positive("min_doc_count", 1)?).unwrap_or(i64::MAX);
    let subs = read_subs(definition, fields)?;
    let order = read_order(name, map.get("order"), &subs)?;
    Ok(Terms {
        field,
        size,
        order,
        min_doc_count,
        subs,
    })
}

/// Reads the metric sub-aggregations of a `terms` aggregation's `definition`.
fn read_subs(definition: &Map<String, Value>, fields: &Fields) -> Result<Vec<Sub>> {
    let Some(subs) = definition
        .get("aggs")
        .or_else(|| definition.get("aggregations"))
    else {
        return Ok(Vec::new());
    };
    let map = subs.as_object().ok_or_else(|| {
        bad(format!(
            "[aggs] is an object of named aggregations, got {subs}"
        ))
    })?;
    map.iter()
        .map(|(name, definition)| read_sub(name, definition, fields))
        .collect()
}

/// Reads sub-aggregation `name` of a `terms` aggregation: a metric without sub-aggregations.
fn read_sub(name: &str, definition: &Value, fields: &Fields) -> Result<Sub> {
    let (kind, body, definition) = kind_of(name, definition)?;
    let nested = definition.contains_key("aggs") || definition.contains_key("aggregations");
    if !METRICS.contains(&kind) || nested {
        return Err(bad(format!(
            "sub-aggregation [{name}] under [terms] must be a metric without sub-aggregations"
        )));
    }
    Ok(Sub {
        name: name.to_string(),
        meta: definition.get("meta").cloned(),
        metric: read_metric(kind, name, body, fields)?,
    })
}

/// Reads the `order` of `terms` aggregation `name`: `{key: dir}` or an array of them, where
/// key is `_count`, `_key` or a sub-aggregation's name. Ties go by key, ascending.
fn read_order(name: &str, order: Option<&Value>, subs: &[Sub]) -> Result<Vec<(OrderBy, bool)>> {
    let refuse = |what: &Value| {
        bad(format!(
            "[terms] aggregation [{name}]: cannot order by {what}"
        ))
    };
    let entries: Vec<(&String, &Value)> = match order {
        None => Vec::new(),
        Some(Value::Object(map)) => map.iter().collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_object().ok_or_else(|| refuse(item)))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect(),
        Some(other) => return Err(refuse(other)),
    };
    let mut keys = Vec::new();
    for (key, direction) in entries {
        let by = match key.as_str() {
            "_count" => OrderBy::Count,
            "_key" | "_term" => OrderBy::Key,
            sub => OrderBy::Sub(
                subs.iter()
                    .position(|s| s.name == sub)
                    .ok_or_else(|| refuse(&json!(key)))?,
            ),
        };
        let asc = match direction.as_str() {
            Some("asc") => true,
            Some("desc") => false,
            _ => return Err(refuse(&json!({ key: direction }))),
        };
        keys.push((by, asc));
    }
    if keys.is_empty() {
        keys.push((OrderBy::Count, false));
    }
    if !keys.iter().any(|(by, _)| *by == OrderBy::Key) {
        keys.push((OrderBy::Key, true));
    }
    Ok(keys)
}

/// Reads `range` aggregation `name`.
fn read_range(name: &str, body: &Value, fields: &Fields) -> Result<RangeAgg> {
    let map = body_map("range", name, body, &["field", "ranges", "keyed"])?;
    let (field, data_type) = field_of("range", name, map, fields)?;
    if !data_type.is_numeric() && !cells::is_temporal(data_type) {
        return Err(bad(format!(
            "[range] aggregation on [{field}]: the field is neither a number nor a date (it is {data_type})"
        )));
    }
    let keyed = map.get("keyed").and_then(Value::as_bool).unwrap_or(false);
    let ranges = match map.get("ranges") {
        Some(Value::Array(ranges)) if !ranges.is_empty() => ranges,
        _ => {
            return Err(bad(format!(
                "[range] aggregation [{name}] needs a non-empty array of [ranges]"
            )));
        }
    };
    let dates = Dates {
        now: fields.now,
        epoch_seconds: false,
    };
    let buckets = ranges
        .iter()
        .map(|range| read_bucket(&field, data_type, range, dates))
        .collect::<Result<_>>()?;
    Ok(RangeAgg {
        field,
        keyed,
        buckets,
    })
}

/// Reads one range `{from?, to?, key?}` of a `range` aggregation on `field`.
fn read_bucket(
    field: &str,
    data_type: &DataType,
    range: &Value,
    dates: Dates,
) -> Result<RangeBucket> {
    let map = body_map("range", field, range, &["from", "to", "key"])?;
    let from = read_bound(field, data_type, map.get("from"), Op::Gte, dates)?;
    let to = read_bound(field, data_type, map.get("to"), Op::Lt, dates)?;
    let text = |bound: &Option<Bound>| match bound {
        None => "*".to_string(),
        Some(Bound {
            as_string: Some(s), ..
        }) => s.clone(),
        Some(Bound { json, .. }) => json
            .as_f64()
            .map_or_else(|| json.to_string(), format_double),
    };
    let key = match map.get("key") {
        None => format!("{}-{}", text(&from), text(&to)),
        Some(Value::String(key)) => key.clone(),
        Some(other) => {
            return Err(bad(format!(
                "[range] aggregation on [{field}]: a key is a string, got {other}"
            )));
        }
    };
    Ok(RangeBucket { key, from, to })
}

/// One end of a range, `None` when open.
fn read_bound(
    field: &str,
    data_type: &DataType,
    value: Option<&Value>,
    op: Op,
    dates: Dates,
) -> Result<Option<Bound>> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let refuse = |why: coerce::Unfit| bad(format!("[range] aggregation on [{field}]: {why}"));
    let literal = coerce::literal(value, data_type, op, dates).map_err(refuse)?;
    let bound = if cells::is_temporal(data_type) {
        let t = coerce::instant(value, op, dates).map_err(refuse)?;
        Bound {
            literal,
            json: json!(t.timestamp_millis()),
            as_string: Some(cells::rfc3339_millis(t)),
        }
    } else {
        let number = coerce::number(value).map_or(Value::Null, |f| json!(f));
        Bound {
            literal,
            json: number,
            as_string: None,
        }
    };
    Ok(Some(bound))
}

/// A double as the search engine writes it in range keys: `100.0`, `2.5`.
fn format_double(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

impl RangeBucket {
    /// Whether a record's `column` falls in the range.
    fn condition(&self, column: &Expr) -> Expr {
        let bounds = [(&self.from, Op::Gte), (&self.to, Op::Lt)];
        let parts = bounds.into_iter().filter_map(|(bound, op)| {
            bound
                .as_ref()
                .map(|b| compare(column.clone(), op, lit(b.literal.clone())))
        });
        conjunction(parts).unwrap_or_else(|| column.clone().is_not_null())
    }
}

/// The alias of the `j`th output of the `i`th aggregation in the ungrouped query.
fn alias(i: usize, j: usize) -> String {
    format!("__dsl_{i}_{j}")
}

/// Runs `aggs` over `frame`, the records the query matches.
pub(super) async fn run(frame: DataFrame, aggs: &[Named]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    if aggs.is_empty() {
        return Ok(out);
    }
    let exprs = ungrouped(aggs)?;
    let batches = frame
        .clone()
        .aggregate(Vec::new(), exprs)
        .map_err(internal)?
        .collect()
        .await
        .map_err(internal)?;
    let row = one_batch(&batches)?;
    for (i, named) in aggs.iter().enumerate() {
        let mut result = match &named.agg {
            Agg::Metric(_) => metric_value(column(&row, &alias(i, 0))?, 0),
            Agg::Terms(terms) => {
                let with_key = cells::sort_value(column(&row, &alias(i, 0))?, 0)
                    .as_i64()
                    .unwrap_or(0);
                run_terms(frame.clone(), terms, with_key).await?
            }
            Agg::Range(range) => range_result(range, &row, i)?,
        };
        if let Some(meta) = &named.meta {
            result.insert("meta".into(), meta.clone());
        }
        out.insert(named.name.clone(), Value::Object(result));
    }
    Ok(out)
}

/// The outputs of the ungrouped query: each metric, the number of records with a key of each
/// `terms` aggregation, the count of each range.
fn ungrouped(aggs: &[Named]) -> Result<Vec<Expr>> {
    let mut exprs = Vec::new();
    for (i, named) in aggs.iter().enumerate() {
        match &named.agg {
            Agg::Metric(metric) => exprs.push(metric.expr().alias(alias(i, 0))),
            Agg::Terms(terms) => exprs.push(count(ident(&terms.field)).alias(alias(i, 0))),
            Agg::Range(range) => {
                let column = ident(&range.field);
                for (j, bucket) in range.buckets.iter().enumerate() {
                    let one = when(bucket.condition(&column), lit(1i64))
                        .end()
                        .map_err(internal)?;
                    exprs.push(count(one).alias(alias(i, j)));
                }
            }
        }
    }
    Ok(exprs)
}

/// `batches` as one batch.
fn one_batch(batches: &[RecordBatch]) -> Result<RecordBatch> {
    let schema = batches
        .first()
        .map(RecordBatch::schema)
        .ok_or_else(|| Error::Internal("an aggregate query returned no batch".into()))?;
    concat_batches(&schema, batches)
        .map_err(|e| Error::Internal(format!("aggregation results: {e}")))
}

/// Column `name` of `batch`.
fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef> {
    batch
        .column_by_name(name)
        .ok_or_else(|| Error::Internal(format!("aggregation result lacks [{name}]")))
}

/// `{"value": v}` of a metric in `row` of `array`, with `value_as_string` for dates.
fn metric_value(array: &ArrayRef, row: usize) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("value".into(), cells::sort_value(array, row));
    if cells::is_temporal(array.data_type()) && !array.is_null(row) {
        map.insert("value_as_string".into(), cells::json(array, row));
    }
    map
}

/// The alias of the `j`th sub-aggregation in a `terms` query.
fn sub_alias(j: usize) -> String {
    format!("__dsl_sub_{j}")
}

impl Terms {
    /// The order of the buckets.
    fn sort(&self) -> Vec<SortExpr> {
        self.order
            .iter()
            .map(|(by, asc)| {
                let column = match by {
                    OrderBy::Count => ident(COUNT),
                    OrderBy::Key => ident(&self.field),
                    OrderBy::Sub(j) => ident(sub_alias(*j)),
                };
                column.sort(*asc, false)
            })
            .collect()
    }
}

/// Runs `terms` over `frame`; `with_key` records have a value of its field.
async fn run_terms(frame: DataFrame, terms: &Terms, with_key: i64) -> Result<Map<String, Value>> {
    let key = ident(&terms.field);
    let mut outputs = vec![count(lit(1i64)).alias(COUNT)];
    outputs.extend(
        terms
            .subs
            .iter()
            .enumerate()
            .map(|(j, sub)| sub.metric.expr().alias(sub_alias(j))),
    );
    let mut grouped = frame
        .filter(key.clone().is_not_null())
        .and_then(|f| f.aggregate(vec![key], outputs))
        .map_err(internal)?;
    if terms.min_doc_count > 1 {
        grouped = grouped
            .filter(ident(COUNT).gt_eq(lit(terms.min_doc_count)))
            .map_err(internal)?;
    }
    let batches = grouped
        .sort(terms.sort())
        .and_then(|f| f.limit(0, Some(terms.size)))
        .map_err(internal)?
        .collect()
        .await
        .map_err(internal)?;
    let mut buckets = Vec::new();
    let mut in_buckets = 0;
    for batch in &batches {
        for row in 0..batch.num_rows() {
            let (bucket, doc_count) = terms_bucket(terms, batch, row)?;
            in_buckets += doc_count;
            buckets.push(Value::Object(bucket));
        }
    }
    let mut result = Map::new();
    result.insert("doc_count_error_upper_bound".into(), json!(0));
    result.insert(
        "sum_other_doc_count".into(),
        json!((with_key - in_buckets).max(0)),
    );
    result.insert("buckets".into(), Value::Array(buckets));
    Ok(result)
}

/// The bucket of `row` of a `terms` query's `batch`, and its document count.
fn terms_bucket(
    terms: &Terms,
    batch: &RecordBatch,
    row: usize,
) -> Result<(Map<String, Value>, i64)> {
    let keys = batch
        .columns()
        .first()
        .ok_or_else(|| Error::Internal("a terms query returned no key".into()))?;
    let counts = column(batch, COUNT)?;
    let doc_count = counts
        .as_primitive_opt::<Int64Type>()
        .map_or(0, |c| c.value(row));
    let mut bucket = Map::new();
    bucket.insert("key".into(), cells::sort_value(keys, row));
    if cells::is_temporal(keys.data_type()) {
        bucket.insert("key_as_string".into(), cells::json(keys, row));
    }
    bucket.insert("doc_count".into(), json!(doc_count));
    for (j, sub) in terms.subs.iter().enumerate() {
        let mut value = metric_value(column(batch, &sub_alias(j))?, row);
        if let Some(meta) = &sub.meta {
            value.insert("meta".into(), meta.clone());
        }
        bucket.insert(sub.name.clone(), Value::Object(value));
    }
    Ok((bucket, doc_count))
}

/// The result of `range`, the `i`th aggregation, from the ungrouped query's `row`.
fn range_result(range: &RangeAgg, row: &RecordBatch, i: usize) -> Result<Map<String, Value>> {
    let mut list = Vec::new();
    let mut keyed = Map::new();
    for (j, bucket) in range.buckets.iter().enumerate() {
        let doc_count = cells::sort_value(column(row, &alias(i, j))?, 0);
        let mut out = Map::new();
        if !range.keyed {
            out.insert("key".into(), json!(bucket.key));
        }
        for (name, bound) in [("from", &bucket.from), ("to", &bucket.to)] {
            if let Some(bound) = bound {
                out.insert(name.into(), bound.json.clone());
                if let Some(text) = &bound.as_string {
                    out.insert(format!("{name}_as_string"), json!(text));
                }
            }
        }
        out.insert("doc_count".into(), doc_count);
        if range.keyed {
            keyed.insert(bucket.key.clone(), Value::Object(out));
        } else {
            list.push(Value::Object(out));
        }
    }
    let buckets = if range.keyed {
        Value::Object(keyed)
    } else {
        Value::Array(list)
    };
    Ok(Map::from_iter([("buckets".to_string(), buckets)]))
}
