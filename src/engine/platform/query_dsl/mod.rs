//! The Query DSL, in one module tree: searches of datasets (GET|POST /{dataset}/_search, GET
//! /{dataset}/querydsl, msearch entries) and counts (/{dataset}/_count).
//!
//! - [`request`]: a search body, read and checked;
//! - [`compile`]: a query compiled into a tantivy query over a dataset's document index (the
//!   index itself, and the primitives that search it, are a projection:
//!   `strata_projections::table::docs`);
//! - this module: each dataset the search reaches through the access layer, searched with the
//!   query compiled once for it, the best hits merged and read back by row id into a typed
//!   [`SearchResult`] ([`result`]);
//! - [`aggs`] (what tantivy computes, and Elasticsearch's shape of it) and [`aggregate`] (over
//!   every searched dataset, with the aggregations tantivy has not: `filters`, `ip_range`,
//!   sibling pipelines).
//!
//! The HTTP layer renders the result as Elasticsearch's JSON (`src/http/search.rs`).

use std::{sync::Arc, time::Instant};

use serde_json::{Map, Value, json};
use strata_projections::table::{
    TableSnapshot,
    docs::{Deadline, DocsHits, DocsSchema, SortBy, SortSpec, SortValue, SortedHit},
};

mod aggregate;
pub mod aggs;
pub mod compile;
mod request;
mod result;
pub mod zone;

use aggregate::aggregate;
use compile::{self as dsl, DslQuery};
pub use request::SearchOptions;
use request::{Search, dates_after};
pub use result::{Aggregation, Aggregations, Bucket, Hit, SearchResult, TotalHits};

use crate::engine::access::FieldPolicy;
use crate::engine::{
    Action, Engine, PlatformPrincipal,
    access::{DatasetView, Target},
    aliases, blocking,
};
use crate::{
    documents::{
        columns::Formats,
        source::{self, FieldRequest},
    },
    error::{Error, Result},
};

fn bad(kind: &str, reason: impl std::fmt::Display) -> Error {
    Error::BadRequest(format!("[{kind}] {reason}"))
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
    /// How long its query took (matching, counting, ranking).
    took: std::time::Duration,
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

/// The document index schema of dataset `view` as its reader may search it; a metrics
/// dataset has none.
pub(in crate::engine) fn searchable(view: &DatasetView) -> Result<DocsSchema> {
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
pub(in crate::engine) async fn prepare(
    view: &DatasetView,
    query: &Value,
) -> Result<(DslQuery, dsl::NamedQueries, DocsSchema)> {
    let schema = searchable(view)?;
    let filter = view.record_filter()?;
    let query = query.clone();
    let now = chrono::Utc::now().timestamp_millis();
    // A knn query searches the vector index while it compiles: off the async threads. Any
    // other compiles in microseconds, here, without a hand-off to a blocking thread.
    let compiled = match mentions_knn(&query) {
        true => {
            let (snapshot, schema) = (view.snapshot.clone(), schema.clone());
            blocking(move || dsl::compile_named(&schema, &query, now, Some(snapshot.as_ref())))
                .await?
        }
        false => dsl::compile_named(&schema, &query, now, Some(view.snapshot.as_ref())),
    };
    let (query, named) = compiled.map_err(|error| bad(error.kind, error.reason))?;
    let query = match filter {
        Some(filter) => dsl::within(query, filter),
        None => query,
    };
    Ok((query, named, schema))
}

/// Whether a `knn` key is anywhere in `query` (a field of that name too: the check only
/// decides where the query compiles).
fn mentions_knn(query: &Value) -> bool {
    match query {
        Value::Object(object) => object
            .iter()
            .any(|(key, value)| key == "knn" || mentions_knn(value)),
        Value::Array(items) => items.iter().any(mentions_knn),
        _ => false,
    }
}

/// Whether `body` reads as a Query DSL search (a monitor's query, checked when it is saved);
/// why not, when it does not.
pub fn check_search(body: &Value) -> std::result::Result<(), String> {
    Search::parse(body).map(|_| ()).map_err(|e| match e {
        Error::BadRequest(reason) => reason,
        other => other.to_string(),
    })
}

/// A search body read as a request reads it, its query compiled for a dataset of `schema` and
/// its aggregations translated, where `@timestamp` is a date spanning 2026: the fuzz targets'
/// entry (nothing is searched).
pub(in crate::engine) fn check_search_body(body: &Value, schema: &DocsSchema) -> Result<()> {
    struct Fuzzed;
    impl aggs::Fields for Fuzzed {
        fn is_date(&self, field: &str) -> bool {
            field == crate::engine::TIMESTAMP_FIELD
        }
        fn date_bounds(&self, field: &str) -> Option<(i64, i64)> {
            self.is_date(field)
                .then_some((1_767_225_600_000, 1_798_761_599_999))
        }
    }
    let search = Search::parse(body)?;
    let now = 1_780_000_000_000;
    dsl::compile_named(schema, &search.query, now, None).map_err(|e| bad(e.kind, e.reason))?;
    if let Some(aggs) = &search.aggs {
        aggs::translate(aggs, &Fuzzed, now).map_err(|e| bad(e.kind, e.reason))?;
    }
    Ok(())
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
        let top = search.from.saturating_add(search.size);
        let started = Instant::now();
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
            took: started.elapsed(),
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
        // Each dataset's settings limit the search, as each index's do a search of several.
        let window = u64::try_from(search.from.saturating_add(search.size)).unwrap_or(u64::MAX);
        let docvalue_fields = u64::try_from(search.docvalue_fields).unwrap_or(u64::MAX);
        for view in &datasets {
            let limits = crate::documents::settings::Limits::of(&view.def);
            if let Some(reason) = limits.refusal(window, docvalue_fields) {
                return Err(bad("illegal_argument_exception", reason));
            }
        }
        let boosts = self
            .boosts(principal, &search, &datasets, options.ignore_unavailable)
            .await?;
        let deadline = Deadline(search.timeout.map(|timeout| started + timeout));
        let mut found = Vec::with_capacity(datasets.len());
        for (view, boost) in datasets.iter().zip(boosts) {
            found.push(Self::search_one(view, &search, boost, deadline).await?);
        }
        let parts = || -> Vec<aggregate::Part> {
            found
                .iter()
                .map(|f| aggregate::Part {
                    snapshot: f.snapshot.clone(),
                    docs: f.docs.clone(),
                    query: f.query.box_clone(),
                })
                .collect()
        };
        let now = chrono::Utc::now().timestamp_millis();
        let aggregations = match &search.aggs {
            None => None,
            Some(request) => {
                let (parts, request) = (parts(), request.clone());
                Some(blocking(move || aggregate(&parts, &request, now)).await??)
            }
        };
        let profile = match (search.profile, &search.aggs) {
            (false, _) => None,
            (true, None) => Some(self.profile(&found, vec![Vec::new(); found.len()])),
            (true, Some(request)) => {
                let (parts, request) = (parts(), request.clone());
                let measured =
                    blocking(move || aggregate::profile(&parts, &request, now)).await??;
                Some(self.profile(&found, measured))
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
                // A field asked for several times (in several formats) lists each answer.
                if let Some(values) = read.values(rows, row) {
                    match fields.get_mut(&field.name) {
                        Some(Value::Array(listed)) => listed.extend(values),
                        _ => {
                            fields.insert(field.name.clone(), Value::Array(values));
                        }
                    }
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
            profile,
        })
    }

    /// Elasticsearch's `profile` of a search: a shard per dataset, with its query (its compiled
    /// form and the time it took to match, count and rank) and its aggregations
    /// ([`aggregate::profile`]).
    fn profile(&self, found: &[Found], aggregations: Vec<Vec<Value>>) -> Value {
        let shards: Vec<Value> = found
            .iter()
            .zip(aggregations)
            .map(|(dataset, aggregations)| {
                let compiled = format!("{:?}", dataset.query);
                let type_name = compiled
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .next()
                    .unwrap_or("Query")
                    .to_owned();
                let description: String = compiled.chars().take(500).collect();
                let nanos = dataset.took.as_nanos() as u64;
                json!({
                    "id": format!("[{}][{}][0]", self.node(), dataset.name),
                    "inbound_network_time_in_millis": 0,
                    "outbound_network_time_in_millis": 0,
                    "searches": [{
                        "query": [{
                            "type": type_name,
                            "description": description,
                            "time_in_nanos": nanos,
                            "breakdown": {},
                        }],
                        "rewrite_time": 0,
                        "collector": [{
                            "name": "TopDocsCollector",
                            "reason": "search_top_hits",
                            "time_in_nanos": nanos,
                        }],
                    }],
                    "aggregations": aggregations,
                })
            })
            .collect();
        json!({ "shards": shards })
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
