//! A search engine's Query DSL, served on one table of an external SQL source (PostgreSQL,
//! MySQL, SQLite, Parquet files): the search body is translated into DataFusion DataFrame
//! operations (a filter, a sort, a limit, aggregates) so that DataFusion pushes what it can
//! (filters, limits, projections) down to the source, and the answer takes the search engine's
//! response shape.
//!
//! # The subset
//!
//! - Body keys: `query`, `aggs`/`aggregations`, `sort`, `size` (default 10), `from` (default 0;
//!   `from + size` at most 10000), `_source`, `track_total_hits` and `timeout` (accepted; the
//!   total is always exact and nothing times out).
//! - Queries: `match_all`, `bool` (`must`, `filter`, `should` with `minimum_should_match`,
//!   `must_not`), `term`, `terms`, `range` (dates and date math such as `now-1h/d` on date and
//!   timestamp columns), `exists`, `prefix`, `wildcard`. `boost` and `_name` are ignored.
//! - Sort: fields (`asc`/`desc`, missing values last unless `missing: _first`), `_score` and
//!   `_doc`. Every hit scores 1.0, so sorting on `_score` changes nothing.
//! - Aggregations: `avg`, `sum`, `min`, `max`, `value_count`, `cardinality`, `terms` (with
//!   metric sub-aggregations) and `range`, over every record the query matches.
//!
//! Anything else is refused up front as a client error naming it ([`check`]).
//!
//! # Semantics
//!
//! A field is a column of the table, named exactly (a dotted name that is no column is no
//! field); hidden columns are removed before anything runs, so they are no fields either. A
//! query on a missing field matches nothing (and `must_not` of it everything); a sort or an
//! aggregation on one is a client error. Values are converted to the column's type, so that the
//! source sees plain `column op literal` comparisons it can index: a `term` value that does not
//! convert (`"abc"` on a number) matches nothing, a `range` bound that does not convert is a
//! client error. A record lacking a field never matches a clause on it, as in the search
//! engine: `must_not` is `IS NOT TRUE`, not SQL's `NOT`. Dates are dates only on date and
//! timestamp columns: on a string column a `range` compares strings.
//!
//! Every hit scores 1.0. Without a sort, hits come in the source's order, which a source need
//! not keep from one search to the next: paging wants a sort. The total is a `COUNT` of its
//! own, and the aggregations run over every matching record, not just the page; the three
//! run concurrently.

mod aggs;
mod cells;
mod coerce;
pub(crate) use coerce::date_math;
mod query;
mod subset;
#[cfg(test)]
mod tests;

use std::{collections::BTreeSet, sync::Arc, time::Instant};

use arrow::{
    datatypes::{DataType, Field, Schema},
    record_batch::RecordBatch,
};
use chrono::{DateTime, Utc};
use datafusion::{
    catalog::TableProvider,
    error::DataFusionError,
    logical_expr::SortExpr,
    prelude::{DataFrame, Expr, SessionContext, ident},
};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};

/// The largest `from + size` a search may ask for.
const MAX_WINDOW: usize = 10_000;

/// Runs `body` (a Query DSL search body) over `table` named `index` (used as `_index` in hits).
///
/// `hidden` names the columns the caller may not see: they are removed before anything runs,
/// so a query naming one matches nothing and a sort or aggregation naming one is a client
/// error ("no field [x]"). Returns the search engine's response JSON.
///
/// # Errors
///
/// [`Error::BadRequest`] for a client mistake (a clause outside the subset, a malformed body,
/// a sort or aggregation on no field, a bound that is no value of its column's type), found
/// before anything runs; [`Error::Internal`] when DataFusion or the source fails.
pub async fn search(
    ctx: &SessionContext,
    table: Arc<dyn TableProvider>,
    index: &str,
    body: &Value,
    hidden: &BTreeSet<String>,
) -> Result<Value> {
    let started = Instant::now();
    let (plan, frame) = prepare(ctx, table, body, hidden)?;
    let total = async { frame.clone().count().await.map_err(internal) };
    let hits = page(frame.clone(), &plan, index);
    let aggregations = async {
        match &plan.aggs {
            Some(aggs) => aggs::run(frame.clone(), aggs).await.map(Some),
            None => Ok(None),
        }
    };
    let (total, hits, aggregations) = tokio::try_join!(total, hits, aggregations)?;
    Ok(response(started, total, hits, aggregations))
}

/// The clauses of `body` outside the subset, checked before anything runs. Only names are
/// checked here (body keys, query clauses, aggregation types); shapes are checked when
/// [`search`] translates the body.
///
/// # Errors
///
/// [`Error::BadRequest`] naming the first clause outside the subset, e.g. "query clause
/// [match_phrase] is not served on a SQL source: bool, term, terms, range, exists, match_all,
/// prefix, wildcard", or when `body` is neither an object nor null.
pub fn check(body: &Value) -> Result<()> {
    subset::check(body)
}

/// A client error with `message`.
fn bad(message: impl Into<String>) -> Error {
    Error::BadRequest(message.into())
}

/// A DataFusion failure while running a search that was accepted: the source's (its stage
/// named, see [`super::source::failure`]) or ours.
fn internal(error: DataFusionError) -> Error {
    super::sql::classify_source("search", error)
}

/// A Query DSL query (a role's record filter) as a condition on the columns of `schema`, for
/// a source to filter by.
///
/// # Errors
///
/// [`Error::BadRequest`] when the query is outside the subset or malformed.
pub fn filter_expr(query_body: &Value, schema: &Schema) -> Result<Expr> {
    subset::check(&json!({"query": query_body}))?;
    let fields = Fields {
        schema: schema.clone(),
        now: Utc::now(),
    };
    query::filter(query_body, &fields)
}

/// The columns a search may name (the table's, less the hidden ones) and the instant that
/// `now` stands for in date math.
struct Fields {
    schema: Schema,
    now: DateTime<Utc>,
}

impl Fields {
    /// The type of column `name`, `None` when there is no such (visible) column.
    fn get(&self, name: &str) -> Option<&DataType> {
        self.schema.field_with_name(name).ok().map(Field::data_type)
    }

    /// The type of column `name`; a client error "no field [name]" when there is none.
    fn require(&self, name: &str) -> Result<&DataType> {
        self.get(name)
            .ok_or_else(|| bad(format!("no field [{name}]")))
    }
}

/// A search body, read and checked against the table's columns.
struct Plan {
    filter: Option<Expr>,
    sort: Vec<SortKey>,
    from: usize,
    size: usize,
    source: SourceFilter,
    /// The column whose values are the hits' `_id`.
    id_column: Option<String>,
    /// The columns the page of hits reads: `_source`, `_id` and sort values.
    columns: Vec<String>,
    aggs: Option<Vec<aggs::Named>>,
}

/// Checks `body`, reads the visible part of `table` and filters it by the body's query.
fn prepare(
    ctx: &SessionContext,
    table: Arc<dyn TableProvider>,
    body: &Value,
    hidden: &BTreeSet<String>,
) -> Result<(Plan, DataFrame)> {
    check(body)?;
    let frame = visible(ctx, table, hidden)?;
    let fields = Fields {
        schema: frame.schema().as_arrow().clone(),
        now: Utc::now(),
    };
    let empty = Map::new();
    let plan = Plan::read(body.as_object().unwrap_or(&empty), &fields)?;
    let frame = match &plan.filter {
        Some(filter) => frame.filter(filter.clone()).map_err(internal)?,
        None => frame,
    };
    Ok((plan, frame))
}

/// `table` without its `hidden` columns.
fn visible(
    ctx: &SessionContext,
    table: Arc<dyn TableProvider>,
    hidden: &BTreeSet<String>,
) -> Result<DataFrame> {
    let frame = ctx.read_table(table).map_err(internal)?;
    let schema = frame.schema().as_arrow();
    if !schema.fields().iter().any(|f| hidden.contains(f.name())) {
        return Ok(frame);
    }
    let columns: Vec<Expr> = schema
        .fields()
        .iter()
        .filter(|f| !hidden.contains(f.name()))
        .map(|f| ident(f.name()))
        .collect();
    frame.select(columns).map_err(internal)
}

impl Plan {
    /// Reads the body `map` (already checked against the subset).
    fn read(map: &Map<String, Value>, fields: &Fields) -> Result<Plan> {
        accept_total_hits(map.get("track_total_hits"))?;
        let filter = match map.get("query") {
            // An empty query, like none, matches everything.
            None => None,
            Some(Value::Object(query)) if query.is_empty() => None,
            Some(query) => Some(query::filter(query, fields)?),
        };
        let sort = match map.get("sort") {
            Some(sort) => read_sort(sort, fields)?,
            None => Vec::new(),
        };
        let (from, size) = window(map)?;
        let source = SourceFilter::read(map.get("_source"))?;
        let aggs = match map.get("aggs").or_else(|| map.get("aggregations")) {
            Some(aggs) => Some(aggs::read(aggs, fields)?),
            None => None,
        };
        let id_column = ["_id", "id"]
            .into_iter()
            .find(|name| fields.get(name).is_some())
            .map(str::to_string);
        let columns = page_columns(fields, &source, id_column.as_deref(), &sort);
        Ok(Plan {
            filter,
            sort,
            from,
            size,
            source,
            id_column,
            columns,
            aggs,
        })
    }
}

/// `track_total_hits` may be a boolean or a number; the total is exact either way.
fn accept_total_hits(value: Option<&Value>) -> Result<()> {
    match value {
        None | Some(Value::Bool(_)) => Ok(()),
        Some(Value::Number(n)) if n.is_i64() => Ok(()),
        Some(other) => Err(bad(format!(
            "[track_total_hits] must be a boolean or an integer, got {other}"
        ))),
    }
}

/// The `from` and `size` of the body, checked against the result window.
fn window(map: &Map<String, Value>) -> Result<(usize, usize)> {
    let from = count_param(map, "from", 0)?;
    let size = count_param(map, "size", 10)?;
    if from.saturating_add(size) > MAX_WINDOW {
        return Err(bad(format!(
            "[from] + [size] must be at most {MAX_WINDOW}, got {from} + {size}"
        )));
    }
    Ok((from, size))
}

/// The non-negative integer body key `key`, `default` when absent.
fn count_param(map: &Map<String, Value>, key: &str, default: usize) -> Result<usize> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => value
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| {
                bad(format!(
                    "[{key}] must be a non-negative integer, got {value}"
                ))
            }),
    }
}

/// One key of the hits' order.
#[derive(Debug, Clone, PartialEq)]
enum SortKey {
    /// A column, ascending or not, its missing values first or last.
    Field {
        name: String,
        asc: bool,
        nulls_first: bool,
    },
    /// A key that orders nothing and whose sort value is fixed (`_score`, or an unmapped field).
    Constant(Value),
    /// `_doc`: the source's order; its sort value is the hit's position.
    Position,
}

impl SortKey {
    /// The DataFusion sort expression of this key, if it orders anything.
    fn expr(&self) -> Option<SortExpr> {
        match self {
            SortKey::Field {
                name,
                asc,
                nulls_first,
            } => Some(ident(name).sort(*asc, *nulls_first)),
            SortKey::Constant(_) | SortKey::Position => None,
        }
    }
}

/// Reads `sort`: one entry or an array of `"field"`, `{field: "asc"}` or
/// `{field: {order, missing, unmapped_type}}`.
fn read_sort(sort: &Value, fields: &Fields) -> Result<Vec<SortKey>> {
    match sort {
        Value::Array(entries) => entries.iter().map(|e| sort_entry(e, fields)).collect(),
        entry => Ok(vec![sort_entry(entry, fields)?]),
    }
}

/// One entry of `sort`.
fn sort_entry(entry: &Value, fields: &Fields) -> Result<SortKey> {
    match entry {
        Value::String(name) => sort_key(name, &Map::new(), fields),
        Value::Object(map) if map.len() == 1 => {
            let Some((name, spec)) = map.iter().next() else {
                return Err(bad("[sort] entry is empty"));
            };
            match spec {
                Value::String(order) => {
                    let spec = Map::from_iter([("order".to_string(), json!(order))]);
                    sort_key(name, &spec, fields)
                }
                Value::Object(spec) => sort_key(name, spec, fields),
                other => Err(bad(format!(
                    "[sort] on [{name}]: expected an order, got {other}"
                ))),
            }
        }
        other => Err(bad(format!(
            "[sort] entries are \"field\" or {{\"field\": {{\"order\": \"asc\"}}}}, got {other}"
        ))),
    }
}

/// The sort key on `name` with options `spec` (`order`, `missing`, `unmapped_type`).
fn sort_key(name: &str, spec: &Map<String, Value>, fields: &Fields) -> Result<SortKey> {
    let allowed = ["order", "missing", "unmapped_type"];
    if let Some(key) = spec.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(format!("[sort] on [{name}] does not support [{key}]")));
    }
    let order = sort_option(name, spec, "order", &["asc", "desc"])?;
    let missing = sort_option(name, spec, "missing", &["_last", "_first"])?;
    match name {
        "_score" => Ok(SortKey::Constant(json!(1.0))),
        "_doc" => Ok(SortKey::Position),
        _ if fields.get(name).is_some() => Ok(SortKey::Field {
            name: name.to_string(),
            asc: order != Some("desc"),
            nulls_first: missing == Some("_first"),
        }),
        _ if spec.contains_key("unmapped_type") => Ok(SortKey::Constant(Value::Null)),
        _ => Err(bad(format!("no field [{name}]"))),
    }
}

/// Sort option `key` of the sort on `name`: absent, or one of `choices`.
fn sort_option<'a>(
    name: &str,
    spec: &'a Map<String, Value>,
    key: &str,
    choices: &[&str],
) -> Result<Option<&'a str>> {
    match spec.get(key) {
        None => Ok(None),
        Some(Value::String(choice)) if choices.contains(&choice.as_str()) => Ok(Some(choice)),
        Some(other) => Err(bad(format!(
            "[sort] on [{name}]: [{key}] must be one of {}, got {other}",
            choices.join(", ")
        ))),
    }
}

/// Which columns go into a hit's `_source`.
#[derive(Debug, Clone, PartialEq)]
struct SourceFilter {
    enabled: bool,
    includes: Vec<String>,
    excludes: Vec<String>,
}

impl SourceFilter {
    /// Reads `_source`: a boolean, a pattern, an array of patterns or `{includes, excludes}`.
    fn read(value: Option<&Value>) -> Result<SourceFilter> {
        let all = SourceFilter {
            enabled: true,
            includes: Vec::new(),
            excludes: Vec::new(),
        };
        match value {
            None | Some(Value::Bool(true)) => Ok(all),
            Some(Value::Bool(false)) => Ok(SourceFilter {
                enabled: false,
                ..all
            }),
            Some(Value::String(_) | Value::Array(_)) => Ok(SourceFilter {
                includes: patterns(value)?,
                ..all
            }),
            Some(Value::Object(map)) => {
                if let Some(key) = map
                    .keys()
                    .find(|k| !["includes", "include", "excludes", "exclude"].contains(&k.as_str()))
                {
                    return Err(bad(format!("[_source] does not support [{key}]")));
                }
                let includes = patterns(map.get("includes").or_else(|| map.get("include")))?;
                let excludes = patterns(map.get("excludes").or_else(|| map.get("exclude")))?;
                Ok(SourceFilter {
                    enabled: true,
                    includes,
                    excludes,
                })
            }
            Some(other) => Err(bad(format!(
                "[_source] must be a boolean, a pattern, an array or an object, got {other}"
            ))),
        }
    }

    /// Whether column `name` goes into `_source`.
    fn wants(&self, name: &str) -> bool {
        self.enabled
            && (self.includes.is_empty() || self.includes.iter().any(|p| glob(p, name)))
            && !self.excludes.iter().any(|p| glob(p, name))
    }
}

/// The `_source` patterns of `value`: absent, one string or an array of strings.
fn patterns(value: Option<&Value>) -> Result<Vec<String>> {
    let one = |v: &Value| {
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| bad(format!("[_source] patterns are strings, got {v}")))
    };
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(one).collect(),
        Some(item) => Ok(vec![one(item)?]),
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
fn glob(pattern: &str, name: &str) -> bool {
    let Some((head, rest)) = pattern.split_once('*') else {
        return pattern == name;
    };
    let Some(mut tail) = name.strip_prefix(head) else {
        return false;
    };
    let mut parts: Vec<&str> = rest.split('*').collect();
    let last = parts.pop().unwrap_or_default();
    for part in parts {
        match tail.find(part) {
            Some(at) => tail = &tail[at + part.len()..],
            None => return false,
        }
    }
    tail.ends_with(last)
}

/// The columns the page of hits reads, in table order: those of `_source`, `_id` and sorts.
fn page_columns(
    fields: &Fields,
    source: &SourceFilter,
    id_column: Option<&str>,
    sort: &[SortKey],
) -> Vec<String> {
    let sorted = |name: &str| {
        sort.iter()
            .any(|k| matches!(k, SortKey::Field { name: n, .. } if n == name))
    };
    fields
        .schema
        .fields()
        .iter()
        .map(|f| f.name())
        .filter(|name| source.wants(name) || id_column == Some(name.as_str()) || sorted(name))
        .cloned()
        .collect()
}

/// Runs the page of hits (`from`, `size`, sort) over the filtered `frame`.
async fn page(frame: DataFrame, plan: &Plan, index: &str) -> Result<Vec<Value>> {
    if plan.size == 0 {
        return Ok(Vec::new());
    }
    let order: Vec<SortExpr> = plan.sort.iter().filter_map(SortKey::expr).collect();
    let mut frame = frame;
    if !order.is_empty() {
        frame = frame.sort(order).map_err(internal)?;
    }
    frame = frame.limit(plan.from, Some(plan.size)).map_err(internal)?;
    if !plan.columns.is_empty() {
        frame = frame
            .select(plan.columns.iter().map(ident))
            .map_err(internal)?;
    }
    let batches = frame.collect().await.map_err(internal)?;
    let rows = batches
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(move |row| (b, row)));
    Ok(rows
        .enumerate()
        .map(|(i, (batch, row))| hit(batch, row, plan.from + i, plan, index))
        .collect())
}

/// The hit of `row` of `batch`, at `position` in the whole result.
fn hit(batch: &RecordBatch, row: usize, position: usize, plan: &Plan, index: &str) -> Value {
    let schema = batch.schema();
    let source: Map<String, Value> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(field, _)| plan.source.wants(field.name()))
        .map(|(field, column)| (field.name().clone(), cells::json(column, row)))
        .collect();
    let id = plan
        .id_column
        .as_deref()
        .and_then(|name| batch.column_by_name(name))
        .and_then(|column| cells::id(column, row))
        .unwrap_or_else(|| position.to_string());
    let mut hit = Map::new();
    hit.insert("_index".into(), json!(index));
    hit.insert("_id".into(), json!(id));
    hit.insert("_score".into(), json!(1.0));
    hit.insert("_source".into(), Value::Object(source));
    if !plan.sort.is_empty() {
        let values = plan.sort.iter().map(|key| match key {
            SortKey::Field { name, .. } => batch
                .column_by_name(name)
                .map_or(Value::Null, |column| cells::sort_value(column, row)),
            SortKey::Constant(value) => value.clone(),
            SortKey::Position => json!(position),
        });
        hit.insert("sort".into(), Value::Array(values.collect()));
    }
    Value::Object(hit)
}

/// The search engine's response.
fn response(
    started: Instant,
    total: usize,
    hits: Vec<Value>,
    aggregations: Option<Map<String, Value>>,
) -> Value {
    let max_score = if hits.is_empty() {
        Value::Null
    } else {
        json!(1.0)
    };
    let took = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut response = json!({
        "took": took,
        "timed_out": false,
        "hits": {
            "total": {"value": total, "relation": "eq"},
            "max_score": max_score,
            "hits": hits,
        },
    });
    if let (Some(aggregations), Some(map)) = (aggregations, response.as_object_mut()) {
        map.insert("aggregations".into(), Value::Object(aggregations));
    }
    response
}
