//! Query DSL searches of a dataset (GET|POST /{dataset}/_search, GET /{dataset}/querydsl) and
//! counts (/{dataset}/_count): the query compiled once, run over every segment's document index
//! and the memtable's, the best hits read back from the segment store by row id.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Map, Value, json};
use strata_projections::table::{
    TableSnapshot,
    docs::{Deadline, DocsHits, DocsSchema, SortBy, SortMode, SortSpec, SortValue, SortedHit},
    dsl::{self, DslQuery},
};

mod aggregate;
mod result;

use aggregate::aggregate;
pub use result::{Aggregation, Aggregations, Bucket, Hit, SearchResult, TotalHits};

use super::access::FieldPolicy;
use super::{
    Action, Engine, PlatformPrincipal,
    access::{DatasetView, Target},
    aliases, blocking,
};
use crate::{
    documents::{
        columns::Formats,
        source::{self, FieldRequest, SourceFilter},
    },
    error::{Error, Result},
};

/// The largest `from + size` (Elasticsearch's `index.max_result_window`).
pub const MAX_RESULT_WINDOW: usize = 10_000;

/// How many hits are counted exactly unless `track_total_hits` says otherwise.
const DEFAULT_TRACK_TOTAL_HITS: u64 = 10_000;

/// Keys of a search body this server reads.
const SEARCH_KEYS: &[&str] = &[
    "query",
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

fn bad(kind: &str, reason: impl std::fmt::Display) -> Error {
    Error::BadRequest(format!("[{kind}] {reason}"))
}

/// What a search's parameters say beside its body.
#[derive(Clone, Copy, Debug, Default)]
pub struct SearchOptions {
    /// Names of no dataset or alias are left out, not a 404 (`ignore_unavailable`).
    pub ignore_unavailable: bool,
}

/// A search body, read.
struct Search {
    query: Value,
    from: usize,
    size: usize,
    source: SourceFilter,
    /// Count exactly up to this many; `None`: do not report a total.
    track_total_hits: Option<u64>,
    /// Empty: by relevance.
    sort: Vec<SortSpec>,
    search_after: Option<Vec<Option<SortValue>>>,
    /// The body's `aggs` (or `aggregations`).
    aggs: Option<Value>,
    /// Count at most this many matches, the first in write order.
    terminate_after: Option<usize>,
    /// Fields each hit lists under `fields` (`docvalue_fields` and `fields`).
    fields: Vec<FieldRequest>,
    /// `indices_boost`: a dataset's scores are multiplied by the boost of the first entry that
    /// names it (by its name, a pattern, or an alias).
    indices_boost: Vec<(String, f32)>,
    /// `timeout`: past it, no further segment is searched, and the answer is `timed_out` with
    /// the hits found so far.
    timeout: Option<Duration>,
}

/// One dataset's part of a search.
struct Found {
    name: String,
    snapshot: Arc<TableSnapshot>,
    /// Its fields as the searcher sees them.
    fields: FieldPolicy,
    /// Its document index schema as the searcher may search it.
    docs: DocsSchema,
    /// The search's query, compiled for this dataset (its alias filter and boost with it).
    query: DslQuery,
    /// Its parts named with `_name`.
    named: dsl::NamedQueries,
    /// Best first, each keyed by the search's sort (by score when it has none).
    hits: Vec<SortedHit>,
    total: u64,
    /// The search's deadline passed before every index of it was searched.
    timed_out: bool,
}

impl Search {
    /// The sort a sorted search runs: the body's, or by score.
    fn effective_sort(&self) -> Vec<SortSpec> {
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
fn dates_after(
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
                let ms = match formats.get(field) {
                    Some(format) => format.read(&json!(text)),
                    None => strata_projections::table::dates::parse_date_millis(text),
                };
                match ms {
                    Some(ms) => Some(SortValue::Number(ms as f64)),
                    None => value.clone(),
                }
            }
            _ => value.clone(),
        })
        .collect()
}

/// A sort value as a hit's `sort` shows it (whole numbers as integers: dates are milliseconds).
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
    fn parse(body: &Value) -> Result<Search> {
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
        if from + size > MAX_RESULT_WINDOW {
            return Err(bad(
                "illegal_argument_exception",
                format!(
                    "Result window is too large, from + size must be less than or equal to: [{MAX_RESULT_WINDOW}] but was [{}]. See the scroll api for a more efficient way to request large data sets.",
                    from + size
                ),
            ));
        }
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
        fields.extend(FieldRequest::parse_list("fields", body.get("fields"))?);
        for field in &fields {
            field.check()?;
        }
        Ok(Search {
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

/// For each dataset of a search, the named parts of its query (`_name`) that match each of its
/// page's rows, with their scores: `(row id, (name, score))`, in the query's order.
async fn matched_queries(
    found: &[Found],
    sources: &[Option<(arrow::array::RecordBatch, Vec<u64>)>],
) -> Result<Vec<Vec<(u64, (String, f32))>>> {
    let mut out = Vec::with_capacity(found.len());
    for (dataset, source) in found.iter().zip(sources) {
        let mut matched = Vec::new();
        if let (Some((_, ids)), false) = (source, dataset.named.is_empty()) {
            let rows: std::collections::HashSet<u64> = ids.iter().copied().collect();
            let snapshot = dataset.snapshot.clone();
            let named: Vec<(String, DslQuery)> = dataset
                .named
                .iter()
                .map(|(name, query)| (name.clone(), query.box_clone()))
                .collect();
            matched = blocking(move || {
                let mut matched = Vec::new();
                for (name, query) in &named {
                    for (row_id, score) in snapshot.scores_among(query.as_ref(), &rows)? {
                        matched.push((row_id, (name.clone(), score)));
                    }
                }
                Ok::<_, strata_projections::Error>(matched)
            })
            .await??;
        }
        out.push(matched);
    }
    Ok(out)
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

/// The document index schema of dataset `view` as its reader may search it; a metrics
/// dataset has none.
pub(super) fn searchable(view: &DatasetView) -> Result<DocsSchema> {
    let name = &view.name;
    if view.def.metrics {
        return Err(Error::BadRequest(format!(
            "dataset {name:?} holds metrics, not documents: query it with PromQL or SQL"
        )));
    }
    view.docs()
        .ok_or_else(|| Error::Internal(format!("dataset {name:?} has no document index")))
}

/// `query` compiled for dataset `view`, limited to the records its reader may see: the
/// compiled query, its named parts, and the schema it was compiled with.
pub(super) async fn prepare(
    view: &DatasetView,
    query: &Value,
) -> Result<(DslQuery, dsl::NamedQueries, DocsSchema)> {
    let schema = searchable(view)?;
    let filter = view.record_filter()?;
    let query = query.clone();
    let now = chrono::Utc::now().timestamp_millis();
    // A knn query searches the vector index while it compiles: off the async threads.
    let compiled = {
        let (snapshot, schema) = (view.snapshot.clone(), schema.clone());
        blocking(move || dsl::compile_named(&schema, &query, now, Some(snapshot.as_ref()))).await?
    };
    let (query, named) = compiled.map_err(|error| bad(error.kind, error.reason))?;
    let query = match filter {
        Some(filter) => dsl::within(query, filter),
        None => query,
    };
    Ok((query, named, schema))
}

impl Engine {
    /// Runs `query` on a blocking thread: the best `top` hits and the count.
    async fn run_query(
        snapshot: Arc<TableSnapshot>,
        query: DslQuery,
        top: usize,
        deadline: Deadline,
    ) -> Result<DocsHits> {
        Ok(blocking(move || snapshot.search_documents(query.as_ref(), top, deadline)).await??)
    }

    /// What one dataset contributes to a search: its snapshot, its best `from + size` hits (in
    /// the search's order), and how many records match. Its scores are multiplied by `boost`.
    async fn search_one(
        view: &DatasetView,
        search: &Search,
        boost: f32,
        deadline: Deadline,
    ) -> Result<Found> {
        let snapshot = view.snapshot.clone();
        let (query, named, docs) = prepare(view, &search.query).await?;
        let query = match boost == 1.0 {
            true => query,
            false => dsl::scaled(query, boost),
        };
        let top = search.from + search.size;
        let plain = search.sort.is_empty()
            && search.search_after.is_none()
            && search.terminate_after.is_none();
        let (hits, total, timed_out) = match plain {
            true => {
                let found =
                    Self::run_query(snapshot.clone(), query.box_clone(), top, deadline).await?;
                let hits = found
                    .hits
                    .iter()
                    .map(|h| SortedHit {
                        row_id: h.row_id,
                        score: h.score,
                        keys: vec![Some(SortValue::Number(f64::from(h.score)))],
                    })
                    .collect();
                (hits, found.total, found.timed_out)
            }
            false => {
                // A field alias (or multi-field) sorts by the field whose values it reads; a
                // field the searcher may not search, as one that is not mapped.
                let sort: Vec<SortSpec> = search
                    .effective_sort()
                    .into_iter()
                    .map(|mut spec| {
                        if let SortBy::Field(name) = &spec.by {
                            spec.by = SortBy::Field(docs.path(name).to_owned());
                        }
                        spec
                    })
                    .collect();
                let limit = search.terminate_after;
                let after = search
                    .search_after
                    .as_ref()
                    .map(|after| dates_after(&snapshot.table, &sort, after));
                let snapshot = snapshot.clone();
                let query = query.box_clone();
                blocking(move || {
                    snapshot.search_sorted(
                        query.as_ref(),
                        &sort,
                        after.as_deref(),
                        top,
                        limit,
                        deadline,
                    )
                })
                .await??
            }
        };
        Ok(Found {
            name: view.name.clone(),
            snapshot,
            fields: view.fields.clone(),
            docs,
            query,
            named,
            hits,
            total,
            timed_out,
        })
    }

    /// The boost `indices_boost` gives each of `datasets`: the first entry that names it (see
    /// [`aliases::names_dataset`]), else 1. An entry without a pattern that names neither a
    /// dataset nor an alias is a 404, unless `ignore_unavailable`.
    async fn boosts(
        &self,
        principal: &PlatformPrincipal,
        search: &Search,
        datasets: &[DatasetView],
        ignore_unavailable: bool,
    ) -> Result<Vec<f32>> {
        if search.indices_boost.is_empty() {
            return Ok(vec![1.0; datasets.len()]);
        }
        let state = self
            .datasets_catalog(&principal.account)
            .await?
            .unwrap_or_default();
        for (name, _) in &search.indices_boost {
            let known = name.contains('*')
                || state.tables.get(name).is_some_and(|t| t.dataset)
                || state.aliases.contains_key(name);
            if !known && !ignore_unavailable {
                return Err(Error::NotFound(format!("no such index [{name}]")));
            }
        }
        Ok(datasets
            .iter()
            .map(|dataset| {
                search
                    .indices_boost
                    .iter()
                    .find(|(name, _)| aliases::names_dataset(&state, name, &dataset.name))
                    .map_or(1.0, |(_, boost)| *boost)
            })
            .collect())
    }

    /// A Query DSL search of the datasets `names` names (see [`aliases::resolve_read`]), as
    /// the principal sees them. Hits of several datasets merge in the search's order.
    pub async fn search_dataset(
        &self,
        principal: &PlatformPrincipal,
        names: Option<&str>,
        body: &Value,
        options: &SearchOptions,
    ) -> Result<SearchResult> {
        let started = Instant::now();
        let search = Search::parse(body)?;
        let datasets = self
            .read(
                principal,
                Action::RecordRead,
                Target::Names(names),
                options.ignore_unavailable,
            )
            .await?
            .datasets;
        let boosts = self
            .boosts(principal, &search, &datasets, options.ignore_unavailable)
            .await?;
        let deadline = Deadline(search.timeout.map(|timeout| started + timeout));
        let mut found = Vec::with_capacity(datasets.len());
        for (view, boost) in datasets.iter().zip(boosts) {
            found.push(Self::search_one(view, &search, boost, deadline).await?);
        }
        let aggregations = match &search.aggs {
            None => None,
            Some(request) => {
                let parts: Vec<aggregate::Part> = found
                    .iter()
                    .map(|f| aggregate::Part {
                        snapshot: f.snapshot.clone(),
                        docs: f.docs.clone(),
                        query: f.query.box_clone(),
                    })
                    .collect();
                let request = request.clone();
                let now = chrono::Utc::now().timestamp_millis();
                Some(blocking(move || aggregate(&parts, &request, now)).await??)
            }
        };
        let sort = search.effective_sort();
        let mut merged: Vec<(usize, &SortedHit)> = found
            .iter()
            .enumerate()
            .flat_map(|(i, f)| f.hits.iter().map(move |h| (i, h)))
            .collect();
        merged.sort_by(|(ia, a), (ib, b)| {
            strata_projections::table::docs::compare_keys(&sort, &a.keys, &b.keys)
                .then_with(|| ia.cmp(ib))
                .then_with(|| a.row_id.cmp(&b.row_id))
        });
        let page: Vec<(usize, &SortedHit)> = merged
            .iter()
            .skip(search.from)
            .take(search.size)
            .copied()
            .collect();
        // Each dataset's rows of the page, read at once.
        let mut sources: Vec<Option<(arrow::array::RecordBatch, Vec<u64>)>> =
            (0..found.len()).map(|_| None).collect();
        for (i, dataset) in found.iter().enumerate() {
            let ids: Vec<u64> = page
                .iter()
                .filter(|(j, _)| *j == i)
                .map(|(_, h)| h.row_id)
                .collect();
            if !ids.is_empty() {
                let rows = dataset.snapshot.rows_by_id(&ids, None).await?;
                sources[i] = Some((rows, ids));
            }
        }
        let formats: Vec<Formats> = found
            .iter()
            .map(|dataset| Formats::of(&dataset.snapshot.table))
            .collect();
        let matched = matched_queries(&found, &sources).await?;
        let scored = search.sort.is_empty() || search.sort.iter().any(|s| s.by == SortBy::Score);
        let mut hits = Vec::with_capacity(page.len());
        for (i, hit) in &page {
            let Some((rows, ids)) = &sources[*i] else {
                continue;
            };
            // A row deleted since the search is not there.
            let Some(row) = ids.iter().position(|id| *id == hit.row_id) else {
                continue;
            };
            if row >= rows.num_rows() {
                continue;
            }
            let (id, source) = source::record(rows, row, &search.source, &formats[*i]);
            let fields_seen = &found[*i].fields;
            let source = match (search.source.none, source) {
                (false, Value::Object(mut object)) => {
                    fields_seen.apply_to_source(&mut object);
                    Some(object)
                }
                _ => None,
            };
            let ignored = match source::ignored(rows, row) {
                Some(Value::Array(names)) => names
                    .into_iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .filter(|n| fields_seen.lists(n))
                    .collect(),
                _ => Vec::new(),
            };
            let matched_queries = matched[*i]
                .iter()
                .filter(|(row_id, _)| *row_id == hit.row_id)
                .map(|(_, named)| named.clone())
                .collect();
            let mut fields = Map::new();
            for field in &search.fields {
                let name = field.name.strip_suffix(".keyword").unwrap_or(&field.name);
                let read = FieldRequest {
                    name: found[*i].snapshot.table.resolve_field(name).to_owned(),
                    ..field.clone()
                };
                if !fields_seen.lists(name) || !fields_seen.lists(&read.name) {
                    continue;
                }
                if let Some(values) = read.values(rows, row) {
                    fields.insert(field.name.clone(), Value::Array(values));
                }
            }
            fields_seen.apply_to_source(&mut fields);
            hits.push(Hit {
                index: found[*i].name.clone(),
                id,
                score: scored.then_some(hit.score),
                source,
                ignored,
                matched_queries,
                fields,
                sort: (!search.sort.is_empty()).then(|| hit.keys.clone()),
            });
        }
        let total: u64 = found.iter().map(|f| f.total).sum();
        // As in Elasticsearch, the top score is known when hits are ranked by score first.
        let ranked_by_score = search
            .sort
            .first()
            .is_none_or(|s| s.by == SortBy::Score && s.descending);
        let max_score = match ranked_by_score {
            true => merged.iter().map(|(_, h)| h.score).reduce(f32::max),
            false => None,
        };
        Ok(SearchResult {
            took_ms: started.elapsed().as_millis() as u64,
            timed_out: found.iter().any(|f| f.timed_out),
            shards: found.len(),
            total: search.track_total_hits.map(|limit| TotalHits {
                value: total.min(limit),
                at_least: total > limit,
            }),
            max_score,
            hits,
            terminated_early: search.terminate_after.map(|limit| total >= limit as u64),
            aggregations: aggregations.map(Aggregations::from_json),
        })
    }

    /// /{dataset}/_count: the live records `body`'s query (all without one) matches, in the
    /// datasets `names` names (see [`aliases::resolve_read`]).
    pub async fn count_dataset(
        &self,
        principal: &PlatformPrincipal,
        names: Option<&str>,
        body: &Value,
    ) -> Result<u64> {
        let query = match body {
            Value::Null => json!({"match_all": {}}),
            Value::Object(object) => {
                if let Some(key) = object.keys().find(|k| *k != "query") {
                    return Err(bad(
                        "parsing_exception",
                        format!("request does not support [{key}]"),
                    ));
                }
                object
                    .get("query")
                    .cloned()
                    .unwrap_or_else(|| json!({"match_all": {}}))
            }
            other => {
                return Err(bad(
                    "parsing_exception",
                    format!("a count body must be a JSON object, not {other}"),
                ));
            }
        };
        let mut total = 0;
        let view = self
            .read(principal, Action::RecordRead, Target::Names(names), false)
            .await?;
        for dataset in &view.datasets {
            let (query, ..) = prepare(dataset, &query).await?;
            total += Self::run_query(dataset.snapshot.clone(), query, 0, Deadline::default())
                .await?
                .total;
        }
        Ok(total)
    }
}
