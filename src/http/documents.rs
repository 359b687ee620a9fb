//! Records on the platform API: ingestion (POST /{dataset}/json, and the same NDJSON bulk body at
//! POST|PUT /_bulk and /{dataset}/_bulk, where Elasticsearch clients send it), and Query DSL
//! searches and counts (/{dataset}/_search, /{dataset}/querydsl, /{dataset}/_count, /_msearch).

use std::time::Instant;

use axum::{
    Json,
    body::Bytes,
    extract::Path,
    http::{HeaderMap, Uri, header::CONTENT_TYPE},
    response::{IntoResponse, Response},
};
use serde_json::{Map, Value, json};

use super::{AppState, RequestId, Signed, body::PathName, error::PlatformError, search, tasks};
use crate::{
    documents::bulk,
    engine::{
        BulkItem, DeleteLimits, Deleted, EnrichPolicy, Outcome, PlatformPrincipal, SearchOptions,
    },
    error::Error,
};

/// Query parameters a bulk request may carry. Those Elasticsearch uses to wait for visibility
/// or for shards mean nothing here: every acknowledged record is visible at once.
const BULK_PARAMETERS: &[&str] = &[
    "refresh",
    "timeout",
    "wait_for_active_shards",
    "routing",
    "require_alias",
    "pretty",
    "human",
    "error_trace",
    "filter_path",
    "api-version",
    "_source",
    "_source_includes",
    "_source_excludes",
];

/// POST /{dataset}/json and /{dataset}/_bulk.
pub async fn dataset_bulk(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: Result<PathName, Error>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let PathName(name) = name.map_err(PlatformError::of("bulk"))?;
    run(
        &state,
        &principal,
        &request_id,
        Some(&name),
        &headers,
        &uri,
        body,
    )
    .await
}

/// POST /_bulk: every action line names its dataset.
pub async fn bulk(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    run(&state, &principal, &request_id, None, &headers, &uri, body).await
}

async fn run(
    state: &AppState,
    principal: &PlatformPrincipal,
    request_id: &RequestId,
    path_index: Option<&str>,
    headers: &HeaderMap,
    uri: &Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let started = Instant::now();
    check_content_type(headers).map_err(PlatformError::of("bulk"))?;
    let params = check_parameters(uri).map_err(PlatformError::of("bulk"))?;
    // Reading every line of a body of thousands is CPU work: off the runtime's few workers,
    // which every request of both listeners shares.
    let mut operations = crate::engine::blocking(move || bulk::parse(&body))
        .await
        .and_then(|parsed| parsed)
        .map_err(PlatformError::of("bulk"))?;
    for operation in &mut operations {
        operation.require_alias.get_or_insert(params.require_alias);
        if operation.action == bulk::Action::Update && operation.source.is_none() {
            operation.source = params.source.clone();
        }
    }
    let items = state
        .engine
        .bulk(
            principal,
            path_index,
            operations,
            &principal.origin(&request_id.0),
        )
        .await;
    let errors = items
        .iter()
        .any(|item| matches!(item.outcome, Outcome::Failed(_)));
    // Written straight to bytes: built as `serde_json::Value`s first (a map per item, then a
    // copy of them all), the answer took about a fifth of the server's CPU during a bulk load
    // (issue 28).
    let answer = BulkAnswer {
        took: started.elapsed().as_millis() as u64,
        errors,
        items: items.iter().map(ItemJson).collect(),
    };
    let bytes = serde_json::to_vec(&answer).map_err(|error| {
        PlatformError::of("bulk")(Error::Internal(format!("the answer: {error}")))
    })?;
    Ok(([(CONTENT_TYPE, "application/json")], bytes).into_response())
}

/// A bulk request's answer, as Elasticsearch gives it.
#[derive(serde::Serialize)]
struct BulkAnswer<'a> {
    took: u64,
    errors: bool,
    items: Vec<ItemJson<'a>>,
}

/// A bulk item, as Elasticsearch answers it: `{"<action>": {...}}`.
struct ItemJson<'a>(&'a BulkItem);

impl serde::Serialize for ItemJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let item = self.0;
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(item.action.as_str(), &ItemBody::of(item))?;
        map.end()
    }
}

/// The body of a bulk item: what became of its operation.
#[derive(serde::Serialize)]
struct ItemBody<'a> {
    #[serde(rename = "_index")]
    index: &'a str,
    #[serde(rename = "_id")]
    id: Option<&'a str>,
    #[serde(rename = "_version", skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a str>,
    #[serde(rename = "_shards", skip_serializing_if = "Option::is_none")]
    shards: Option<Shards>,
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    get: Option<ItemGet<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ItemError<'a>>,
}

#[derive(serde::Serialize)]
struct Shards {
    total: u32,
    successful: u32,
    failed: u32,
}

/// An update's record after it, as its `_source` asks.
#[derive(serde::Serialize)]
struct ItemGet<'a> {
    #[serde(rename = "_seq_no")]
    seq_no: u64,
    #[serde(rename = "_primary_term")]
    primary_term: u64,
    found: bool,
    #[serde(rename = "_source")]
    source: &'a Value,
}

#[derive(serde::Serialize)]
struct ItemError<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    reason: &'a str,
    index: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    caused_by: Option<Cause<'a>>,
}

#[derive(serde::Serialize)]
struct Cause<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    reason: &'a str,
}

impl<'a> ItemBody<'a> {
    fn of(item: &'a BulkItem) -> ItemBody<'a> {
        let mut body = ItemBody {
            index: &item.index,
            id: item.id.as_deref(),
            version: None,
            result: None,
            shards: None,
            status: 0,
            get: None,
            error: None,
        };
        match &item.outcome {
            Outcome::Done { result, status } => {
                body.version = Some(1);
                body.result = Some(result);
                if item.action != bulk::Action::Delete {
                    body.shards = Some(Shards {
                        total: 1,
                        successful: 1,
                        failed: 0,
                    });
                }
                body.status = *status;
                body.get = item.get.as_ref().map(|source| ItemGet {
                    seq_no: 0,
                    primary_term: 1,
                    found: true,
                    source,
                });
            }
            Outcome::Failed(refusal) => {
                body.status = refusal.status;
                body.error = Some(ItemError {
                    kind: refusal.kind,
                    reason: &refusal.reason,
                    index: &item.index,
                    caused_by: (refusal.caused_by.as_ref())
                        .map(|(kind, reason)| Cause { kind, reason }),
                });
            }
        }
        body
    }
}

/// NDJSON, or JSON as clients label it; a body in another format is refused.
fn check_content_type(headers: &HeaderMap) -> Result<(), Error> {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Ok(());
    };
    let text = value.to_str().unwrap_or("").to_ascii_lowercase();
    let essence = text.split(';').next().unwrap_or("").trim();
    if essence.ends_with("json") || essence == "text/plain" {
        return Ok(());
    }
    Err(Error::BadRequest(format!(
        "Content-Type {essence:?} is not supported: send the records as application/x-ndjson"
    )))
}

/// What a bulk request's parameters say.
#[derive(Debug, Default)]
struct BulkParams {
    /// Every item's target must be an alias, unless its action line says otherwise.
    require_alias: bool,
    /// What of each updated record its item shows, unless its action says otherwise:
    /// `_source`, `_source_includes` and `_source_excludes` as one `_source` value.
    source: Option<Value>,
}

/// Folds a `_source`, `_source_includes` or `_source_excludes` parameter into one `_source`
/// value (`true`, `false`, a list, or `{includes, excludes}`).
fn source_param(name: &str, value: &str, source: &mut Option<Value>) {
    let list = |value: &str| json!(value.split(',').collect::<Vec<_>>());
    match name {
        "_source" => {
            *source = Some(match value {
                "true" => json!(true),
                "false" => json!(false),
                _ => list(value),
            })
        }
        _ => {
            let key = &name["_source_".len()..];
            let mut spec = match source.take() {
                Some(Value::Object(spec)) => spec,
                _ => Map::new(),
            };
            spec.insert(key.to_owned(), list(value));
            *source = Some(Value::Object(spec));
        }
    }
}

/// Refuses parameters bulk does not know; what the others say.
fn check_parameters(uri: &Uri) -> Result<BulkParams, Error> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(uri.query().unwrap_or(""))
        .map_err(|e| Error::BadRequest(format!("invalid query parameters: {e}")))?;
    let mut params = BulkParams::default();
    for (name, value) in pairs {
        match name.as_str() {
            "pipeline" => {
                return Err(Error::BadRequest(format!(
                    "pipeline with id [{value}] does not exist"
                )));
            }
            "require_alias" => params.require_alias = value != "false",
            "_source" | "_source_includes" | "_source_excludes" => {
                source_param(&name, &value, &mut params.source)
            }
            name if BULK_PARAMETERS.contains(&name) => {}
            other => {
                return Err(Error::BadRequest(format!(
                    "request [{}] contains unrecognized parameter: [{other}]",
                    uri.path()
                )));
            }
        }
    }
    Ok(params)
}

/// One item of the response, keyed by its action.
fn item_json(item: &BulkItem) -> Value {
    serde_json::to_value(ItemJson(item)).unwrap_or(Value::Null)
}

/// A JSON request body; an empty one is `null`.
pub(super) fn json_body(body: &Bytes) -> Result<Value, Error> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).map_err(|error| {
        Error::BadRequest(format!("[parsing_exception] the body is not JSON: {error}"))
    })
}

/// The dataset of the path and the JSON body of a search or count, or the error of `operation`.
fn dataset_request(
    operation: &'static str,
    name: Result<PathName, Error>,
    body: &Bytes,
) -> Result<(String, Value), PlatformError> {
    let failed = PlatformError::of(operation);
    let PathName(name) = name.map_err(failed)?;
    Ok((name, json_body(body).map_err(failed)?))
}

/// What a search's query parameters say beside its body.
#[derive(Clone, Copy, Debug, Default)]
struct SearchFlags {
    /// `ignore_unavailable`.
    options: SearchOptions,
    /// `rest_total_hits_as_int` and `include_named_queries_score`.
    shown: search::Shown,
}

/// Query parameters of a search: Elasticsearch's URI search, merged into the body (the body
/// wins where both say something).
fn search_params(uri: &Uri, body: Value) -> Result<(Value, SearchFlags), Error> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(uri.query().unwrap_or(""))
        .map_err(|e| Error::BadRequest(format!("invalid query parameters: {e}")))?;
    let mut body = match body {
        Value::Null => Map::new(),
        Value::Object(object) => object,
        other => {
            return Err(Error::BadRequest(format!(
                "[parsing_exception] a search body must be a JSON object, not {other}"
            )));
        }
    };
    let mut flags = SearchFlags::default();
    let mut url_source_filter = false;
    for (name, value) in pairs {
        let number = || {
            value.parse::<i64>().map(Value::from).map_err(|_| {
                Error::BadRequest(format!(
                    "[illegal_argument_exception] Failed to parse int parameter [{name}] with value [{value}]"
                ))
            })
        };
        let parsed = match name.as_str() {
            "rest_total_hits_as_int" => {
                flags.shown.total_as_int = value != "false";
                continue;
            }
            "ignore_unavailable" => {
                flags.options.ignore_unavailable = value != "false";
                continue;
            }
            "include_named_queries_score" => {
                flags.shown.named_scores = value != "false";
                continue;
            }
            "size" | "from" | "terminate_after" => number()?,
            "q" => json!({"query_string": {"query": value}}),
            "track_total_hits" => match value.as_str() {
                "true" => json!(true),
                "false" => json!(false),
                _ => number()?,
            },
            "_source" => match value.as_str() {
                "true" => json!(true),
                "false" => json!(false),
                _ => json!(value.split(',').collect::<Vec<_>>()),
            },
            // These win over the body's `_source`, as in Elasticsearch.
            "_source_includes" | "_source_excludes" => {
                let key = if name == "_source_includes" {
                    "includes"
                } else {
                    "excludes"
                };
                let entry = body.entry("_source").or_insert_with(|| json!({}));
                if !url_source_filter || !entry.is_object() {
                    *entry = json!({});
                }
                url_source_filter = true;
                entry[key] = json!(value.split(',').collect::<Vec<_>>());
                continue;
            }
            "timeout" => json!(value),
            "docvalue_fields" | "stored_fields" => json!(value.split(',').collect::<Vec<_>>()),
            "sort" => json!(
                value
                    .split(',')
                    .map(|s| match s.split_once(':') {
                        Some((field, order)) => json!({ field: order }),
                        None => json!(s),
                    })
                    .collect::<Vec<_>>()
            ),
            // Accepted, and without effect here (one shard, nothing cached, no scrolls).
            "api-version"
            | "pretty"
            | "human"
            | "error_trace"
            | "filter_path"
            | "preference"
            | "routing"
            | "request_cache"
            | "allow_partial_search_results"
            | "allow_no_indices"
            | "expand_wildcards"
            | "search_type"
            | "typed_keys"
            | "batched_reduce_size" => continue,
            other => {
                return Err(Error::BadRequest(format!(
                    "request [{}] contains unrecognized parameter: [{other}]",
                    uri.path()
                )));
            }
        };
        let key = if name == "q" { "query" } else { name.as_str() };
        body.entry(key.to_owned()).or_insert(parsed);
    }
    Ok((Value::Object(body), flags))
}

/// GET|POST /{dataset}/_search and GET /{dataset}/querydsl: a Query DSL search (the path may
/// name several datasets, comma-separated, or globs).
pub async fn search(
    Signed {
        state, principal, ..
    }: Signed,
    name: Result<PathName, Error>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    // With `connection_id` (or x-svc-connection-id): a dataset of that connection.
    if let Some(connection) =
        super::connections::connection_param(&uri, &headers).map_err(PlatformError::of("search"))?
    {
        let PathName(name) = name.map_err(PlatformError::of("search"))?;
        return super::connections::search_in_place(&state, &principal, &connection, &name, &body)
            .await;
    }
    let (name, body) = dataset_request("search", name, &body)?;
    run_search(&state, &principal, Some(&name), &uri, body).await
}

/// GET|POST /_search: a Query DSL search of every dataset.
pub async fn search_all(
    Signed {
        state, principal, ..
    }: Signed,
    uri: Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let body = json_body(&body).map_err(|error| PlatformError {
        operation: "search",
        error,
    })?;
    run_search(&state, &principal, None, &uri, body).await
}

async fn run_search(
    state: &AppState,
    principal: &PlatformPrincipal,
    names: Option<&str>,
    uri: &Uri,
    body: Value,
) -> Result<Response, PlatformError> {
    let operation = "search";
    let failed = PlatformError::of(operation);
    let (body, flags) = search_params(uri, body).map_err(failed)?;
    if flags.shown.total_as_int {
        check_total_as_int(&body).map_err(failed)?;
    }
    let result = state
        .engine
        .search_dataset(principal, names, &body, &flags.options)
        .await
        .map_err(failed)?;
    Ok(Json(search::answer(&result, flags.shown)).into_response())
}

/// `rest_total_hits_as_int` prints a total as a number, so it must be exact: a
/// `track_total_hits` bound other than -1 is refused, as Elasticsearch refuses it.
fn check_total_as_int(body: &Value) -> Result<(), Error> {
    match body.get("track_total_hits") {
        Some(Value::Number(n)) if n.as_i64() != Some(-1) && n.as_i64().is_some_and(|n| n >= 0) => {
            Err(Error::BadRequest(format!(
                "[illegal_argument_exception] [rest_total_hits_as_int] cannot be used if the \
                 tracking of total hits is not accurate, got {n}"
            )))
        }
        _ => Ok(()),
    }
}

/// GET|POST /{dataset}/_count: how many records the query matches.
pub async fn count(
    Signed {
        state, principal, ..
    }: Signed,
    name: Result<PathName, Error>,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let operation = "count";
    let (name, body) = dataset_request(operation, name, &body)?;
    let count = state
        .engine
        .count_dataset(&principal, Some(&name), &body)
        .await
        .map_err(|error| PlatformError { operation, error })?;
    Ok(Json(json!({
        "count": count,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
    }))
    .into_response())
}

/// POST /_msearch and /{dataset}/_msearch: header and body line pairs, each a search; the
/// answers in request order, a failed one as `{error: {type, reason}, status}` beside the others.
pub async fn msearch(
    Signed {
        state, principal, ..
    }: Signed,
    name: Option<Path<String>>,
    uri: Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let started = Instant::now();
    let failed = |error| PlatformError {
        operation: "msearch",
        error,
    };
    let params: Vec<(String, String)> = serde_urlencoded::from_str(uri.query().unwrap_or(""))
        .map_err(|e| failed(Error::BadRequest(format!("invalid query parameters: {e}"))))?;
    let total_as_int = params
        .iter()
        .any(|(k, v)| k == "rest_total_hits_as_int" && v != "false");
    let searches = msearch_pairs(&body).map_err(failed)?;
    if total_as_int {
        for (_, body) in searches.iter().flatten() {
            check_total_as_int(body).map_err(failed)?;
        }
    }
    let path_index = name.map(|Path(name)| name);
    let answers = searches.into_iter().map(|search| {
        let state = state.clone();
        let principal = principal.clone();
        let path_index = path_index.clone();
        async move {
            let (header, body) = search?;
            let index = match header.get("index") {
                Some(Value::String(index)) => index.clone(),
                Some(Value::Array(indexes)) => indexes
                    .iter()
                    .map(|i| i.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .map(|names| names.join(","))
                    .ok_or_else(|| Error::BadRequest("[index] must be strings".to_owned()))?,
                // As in Elasticsearch: no index in the header or the path searches them all.
                None => path_index.unwrap_or_else(|| "_all".to_owned()),
                Some(other) => {
                    return Err(Error::BadRequest(format!(
                        "[index] must be a string, not {other}"
                    )));
                }
            };
            if total_as_int {
                check_total_as_int(&body)?;
            }
            let ignore_unavailable = match header.get("ignore_unavailable") {
                Some(Value::Bool(flag)) => *flag,
                Some(Value::String(flag)) => flag != "false",
                _ => false,
            };
            let result = state
                .engine
                .search_dataset(
                    &principal,
                    Some(&index),
                    &body,
                    &SearchOptions { ignore_unavailable },
                )
                .await?;
            let shown = search::Shown {
                total_as_int,
                ..search::Shown::default()
            };
            Ok(search::answer(&result, shown))
        }
    });
    let responses: Vec<Value> = futures::future::join_all(answers)
        .await
        .into_iter()
        .map(|answer| match answer {
            Ok(mut result) => {
                result["status"] = json!(200);
                result
            }
            Err(error) => error_entry(&error),
        })
        .collect();
    Ok(Json(json!({
        "took": started.elapsed().as_millis() as u64,
        "responses": responses,
    }))
    .into_response())
}

/// A failed search of an msearch: `{error: {type, reason}, status}`.
fn error_entry(error: &Error) -> Value {
    let status = super::error::status(error.code()).as_u16();
    if let Error::DatasetNotFound(name) = error {
        let cause = json!({
            "type": "index_not_found_exception",
            "reason": format!("no such index [{name}]"),
            "index": name,
            "resource.type": "index_or_alias",
            "resource.id": name,
        });
        return json!({"error": {"root_cause": [cause.clone()], "type": cause["type"], "reason": cause["reason"], "index": name}, "status": status});
    }
    let message = error.public_message();
    // "[type] reason" where the engine names Elasticsearch's type.
    let (kind, reason) = match message.strip_prefix('[').and_then(|m| m.split_once("] ")) {
        Some((kind, reason)) => (kind.to_owned(), reason.to_owned()),
        None => (
            match status {
                404 => "index_not_found_exception",
                403 => "security_exception",
                400 => "illegal_argument_exception",
                _ => "exception",
            }
            .to_owned(),
            message.clone(),
        ),
    };
    json!({"error": {"type": kind, "reason": reason, "root_cause": [{"type": kind, "reason": reason}]}, "status": status})
}

/// One search of an msearch body: its header and its body, or why the pair cannot be read.
type SearchPair = Result<(Map<String, Value>, Value), Error>;

/// The header and body of each search of an msearch body; a malformed pair fails alone.
fn msearch_pairs(body: &Bytes) -> Result<Vec<SearchPair>, Error> {
    let text = std::str::from_utf8(body)
        .map_err(|_| Error::BadRequest("the msearch body is not UTF-8".to_owned()))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return Err(Error::BadRequest(
            "the msearch body has no searches (request body is required)".to_owned(),
        ));
    }
    if !lines.len().is_multiple_of(2) {
        return Err(Error::BadRequest(format!(
            "the msearch body has {} lines: each search is a header line and a body line",
            lines.len()
        )));
    }
    Ok(lines
        .chunks(2)
        .map(|pair| {
            let header: Value = serde_json::from_str(pair[0]).map_err(|e| {
                Error::BadRequest(format!("[parsing_exception] the header is not JSON: {e}"))
            })?;
            let Value::Object(header) = header else {
                return Err(Error::BadRequest(
                    "[parsing_exception] the header must be a JSON object".to_owned(),
                ));
            };
            let body: Value = serde_json::from_str(pair[1]).map_err(|e| {
                Error::BadRequest(format!(
                    "[parsing_exception] the search body is not JSON: {e}"
                ))
            })?;
            Ok((header, body))
        })
        .collect())
}

/// What PATCH /{dataset} takes in its query string (and, the same names, in its body).
#[derive(Debug, Default, serde::Deserialize)]
struct DeleteParams {
    q: Option<String>,
    start_time: Option<String>,
    end_time: Option<String>,
}

/// The Query DSL query of a delete by query: every criterion given, all to hold. `q` is a
/// query string (`field:value`); `start_time` and `end_time` (RFC 3339) bound `@timestamp`,
/// `end_time` defaulting to now once either is given.
fn delete_criteria(params: DeleteParams, body: &Value) -> Result<Value, Error> {
    let text = |key: &str| -> Result<Option<String>, Error> {
        match body.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(Error::BadRequest(format!(
                "[{key}] must be a string, not {other}"
            ))),
        }
    };
    if let Value::Object(object) = body
        && let Some(key) = object
            .keys()
            .find(|k| !matches!(k.as_str(), "query" | "start_time" | "end_time"))
    {
        return Err(Error::BadRequest(format!(
            "unknown key [{key}]: a delete by query body has query, start_time and end_time"
        )));
    }
    let mut must = Vec::new();
    if let Some(q) = params.q {
        must.push(json!({"query_string": {"query": q}}));
    }
    if let Some(query) = body.get("query").filter(|q| !q.is_null()) {
        must.push(query.clone());
    }
    let start = text("start_time")?.or(params.start_time);
    let end = text("end_time")?.or(params.end_time);
    for (name, time) in [("start_time", &start), ("end_time", &end)] {
        if let Some(time) = time
            && chrono::DateTime::parse_from_rfc3339(time).is_err()
        {
            return Err(Error::BadRequest(format!(
                "{name} {time:?} is not an RFC 3339 time (such as 2026-11-23T10:00:00Z)"
            )));
        }
    }
    if start.is_some() || end.is_some() {
        let mut range = json!({"lte": end.unwrap_or_else(|| "now".to_owned())});
        if let Some(start) = start {
            range["gte"] = json!(start);
        }
        must.push(json!({"range": {"@timestamp": range}}));
    }
    if must.is_empty() {
        return Err(Error::BadRequest(
            "a delete by query needs a criterion: q, a query, start_time or end_time".to_owned(),
        ));
    }
    Ok(json!({"bool": {"filter": must}}))
}

/// PATCH /{dataset}: deletes the records the criteria match, for good: `{"deleted": n}`.
pub async fn delete_by_query(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: Result<PathName, Error>,
    uri: Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let operation = "delete by query";
    let failed = PlatformError::of(operation);
    let (name, body) = dataset_request(operation, name, &body)?;
    let params: DeleteParams = serde_urlencoded::from_str(uri.query().unwrap_or(""))
        .map_err(|e| failed(Error::BadRequest(format!("invalid query parameters: {e}"))))?;
    let query = delete_criteria(params, &body).map_err(failed)?;
    let done = state
        .engine
        .delete_by_query(
            &principal,
            &name,
            &query,
            DeleteLimits::default(),
            &principal.origin(&request_id.0),
        )
        .await
        .map_err(failed)?;
    Ok(Json(json!({ "deleted": done.deleted })).into_response())
}

/// Elasticsearch's delete by query parameters, checked as Elasticsearch checks them (before
/// the index is looked up), with its wording.
#[derive(Debug, PartialEq)]
struct EsDeleteParams {
    limits: DeleteLimits,
    /// `wait_for_completion=false`: answer with a task at once, and run on.
    background: bool,
    requests_per_second: f64,
    /// `wait_for_active_shards` asked for more copies than a dataset has: why.
    unmet_copies: Option<String>,
}

fn es_delete_params(query: &str, body: &Value) -> Result<EsDeleteParams, Error> {
    let bad = |reason: String| Error::BadRequest(format!("[illegal_argument_exception] {reason}"));
    let params: Vec<(String, String)> = serde_urlencoded::from_str(query)
        .map_err(|e| bad(format!("invalid query parameters: {e}")))?;
    let get = |key: &str| params.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v);
    let int = |key: &str, value: &str| {
        value.parse::<i64>().map_err(|_| {
            bad(format!(
                "Failed to parse int parameter [{key}] with value [{value}]"
            ))
        })
    };
    if let Some(conflicts) = get("conflicts")
        && !matches!(conflicts.as_str(), "abort" | "proceed")
    {
        return Err(bad(format!(
            "conflicts may only be \"proceed\" or \"abort\" but was [{conflicts}]"
        )));
    }
    let mut max_docs = None;
    let from_body = body.get("max_docs").map(|v| match v.as_i64() {
        Some(n) => Ok(n),
        None => Err(bad(format!("[max_docs] must be an integer, not {v}"))),
    });
    let candidates = [
        get("size").map(|v| int("size", v)),
        get("max_docs").map(|v| int("max_docs", v)),
        from_body,
    ];
    for candidate in candidates.into_iter().flatten() {
        let n = candidate?;
        if n < 0 {
            return Err(bad(format!(
                "[max_docs] parameter cannot be negative, found [{n}]"
            )));
        }
        match max_docs {
            Some(m) if m != n => {
                return Err(bad(format!(
                    "[max_docs] set to two different values [{m}] and [{n}]"
                )));
            }
            _ => max_docs = Some(n),
        }
    }
    let slices = match get("slices").map(String::as_str) {
        None | Some("auto") => 1,
        Some(text) => match text.parse::<i64>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(bad(format!(
                    "[slices] must be a positive integer or the string \"auto\", but was [{text}]"
                )));
            }
        },
    };
    if let Some(max) = max_docs
        && max < slices
    {
        return Err(bad(format!(
            "[max_docs] should be >= [slices]: {max} < {slices}"
        )));
    }
    let batch = match get("scroll_size") {
        Some(v) => match int("scroll_size", v)? {
            n if n > 0 => Some(n as usize),
            n => {
                return Err(bad(format!(
                    "[scroll_size] must be greater than 0, found [{n}]"
                )));
            }
        },
        None => Some(1000),
    };
    let requests_per_second = match get("requests_per_second") {
        None => -1.0,
        Some(text) => match text.parse::<f64>() {
            Ok(r) if r == -1.0 || r > 0.0 => r,
            _ => {
                return Err(bad(format!(
                    "[requests_per_second] must be a float greater than 0. Use -1 to disable \
                     throttling. Found [{text}]"
                )));
            }
        },
    };
    for key in [
        "stored_fields",
        "docvalue_fields",
        "_source",
        "script_fields",
    ] {
        if body.get(key).is_some() {
            return Err(Error::BadRequest(format!(
                "[action_request_validation_exception] {key} is not supported in this context"
            )));
        }
    }
    // One copy of each dataset is active: asking for more cannot be met.
    let unmet_copies = get("wait_for_active_shards")
        .and_then(|wanted| wanted.parse::<u64>().ok())
        .filter(|n| *n > 1)
        .map(|n| {
            let timeout = get("timeout").map_or("1m", String::as_str);
            format!(
                "Not enough active copies to meet shard count of [{n}] (have 1, needed {n}). Timeout: [{timeout}]"
            )
        });
    let background = match get("wait_for_completion").map(String::as_str) {
        None | Some("true") | Some("") => false,
        Some("false") => true,
        Some(other) => {
            return Err(bad(format!(
                "Failed to parse value [{other}] as only [true] or [false] are allowed."
            )));
        }
    };
    Ok(EsDeleteParams {
        background,
        unmet_copies,
        limits: DeleteLimits {
            max_docs: max_docs.map(|n| n as u64),
            batch,
            slices: slices as usize,
        },
        requests_per_second,
    })
}

/// The counts of a delete by query (or of one of its slices), as Elasticsearch reports them.
fn by_query_status(part: &Deleted, requests_per_second: f64) -> Value {
    json!({
        "total": part.deleted,
        "deleted": part.deleted,
        "batches": part.batches,
        "version_conflicts": 0,
        "noops": 0,
        "retries": {"bulk": 0, "search": 0},
        "throttled_millis": 0,
        "requests_per_second": requests_per_second,
        "throttled_until_millis": 0,
    })
}

/// POST /{dataset}/_delete_by_query: the same, with a Query DSL body, answered as Elasticsearch
/// answers: at most `max_docs` records (or `size`), tombstoned `scroll_size` (1000) to an
/// event, each event a batch.
pub async fn es_delete_by_query(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: Result<PathName, Error>,
    uri: Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let started = Instant::now();
    let operation = "delete by query";
    let failed = PlatformError::of(operation);
    let parsed: Value = match body.is_empty() {
        true => Value::Null,
        false => serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let params = es_delete_params(uri.query().unwrap_or(""), &parsed).map_err(failed)?;
    let (name, body) = dataset_request(operation, name, &body)?;
    let query = body.get("query").cloned().ok_or_else(|| {
        failed(Error::BadRequest(
            "[action_request_validation_exception] query is missing".to_owned(),
        ))
    })?;
    if let Some(reason) = &params.unmet_copies {
        // Nothing is deleted; the answer says why, as Elasticsearch's does.
        state
            .engine
            .dataset_defs(&principal, Some(&name))
            .await
            .map_err(failed)?;
        let cause = json!({
            "type": "unavailable_shards_exception",
            "reason": format!("[{name}][0] {reason}"),
        });
        let mut answer = by_query_status(&Deleted::default(), params.requests_per_second);
        answer["took"] = json!(started.elapsed().as_millis() as u64);
        answer["timed_out"] = json!(false);
        answer["failures"] =
            json!([{"index": name, "shard": 0, "id": null, "cause": cause, "status": 503}]);
        return Ok((axum::http::StatusCode::SERVICE_UNAVAILABLE, Json(answer)).into_response());
    }
    let run = {
        let (state, principal) = (state.clone(), principal.clone());
        let (name, origin) = (name.clone(), principal.origin(&request_id.0));
        let (limits, rate) = (params.limits, params.requests_per_second);
        async move {
            let done = state
                .engine
                .delete_by_query(&principal, &name, &query, limits, &origin)
                .await
                .map_err(failed)?;
            Ok::<Value, PlatformError>(by_query_answer(&done, rate, started))
        }
    };
    if !params.background {
        return Ok(Json(run.await?).into_response());
    }
    // As Elasticsearch does, what can be checked at once is: the dataset exists, and its
    // records may be read and written by this user.
    state
        .engine
        .dataset_info(&principal, &name)
        .await
        .map_err(failed)?;
    state
        .engine
        .authorize(&principal, crate::engine::Action::RecordWrite, &name)
        .map_err(failed)?;
    let task = state.tasks.start(
        &principal,
        "indices:data/write/delete/byquery",
        format!("delete-by-query [{name}]"),
        json!({"requests_per_second": params.requests_per_second}),
    );
    let answer = tasks::Task::started_answer(&state.tasks, &task);
    tokio::spawn(async move {
        match run.await {
            Ok(response) => {
                // The task's status: the counts of the response, without its timing.
                let mut status = response.clone();
                if let Value::Object(fields) = &mut status {
                    for key in ["took", "timed_out", "failures"] {
                        fields.remove(key);
                    }
                }
                task.finish(tasks::Outcome::Done(response), Some(status));
            }
            Err(error) => {
                let (status, body) = error.answer();
                task.finish(
                    tasks::Outcome::Failed {
                        status: status.as_u16(),
                        error: body,
                    },
                    None,
                );
            }
        }
    });
    Ok(answer)
}

/// Elasticsearch's answer to a delete by query that did `done`.
fn by_query_answer(done: &Deleted, requests_per_second: f64, started: Instant) -> Value {
    let status = |part: &Deleted| by_query_status(part, requests_per_second);
    let mut answer = status(done);
    answer["took"] = json!(started.elapsed().as_millis() as u64);
    answer["timed_out"] = json!(false);
    answer["failures"] = json!([]);
    if !done.slices.is_empty() {
        let slices: Vec<Value> = done
            .slices
            .iter()
            .enumerate()
            .map(|(id, part)| {
                let mut slice = status(part);
                slice["slice_id"] = json!(id);
                slice
            })
            .collect();
        answer["slices"] = json!(slices);
    }
    answer
}

/// The answer of a single-record write: the bulk item's body, with its status as the HTTP
/// status (a failure as `{"error": {type, reason, index}, "status": n}`, as Elasticsearch
/// answers it).
fn single_answer(item: &BulkItem) -> Response {
    let Value::Object(mut by_action) = item_json(item) else {
        return Json(Value::Null).into_response();
    };
    let body = by_action
        .remove(item.action.as_str())
        .unwrap_or(Value::Null);
    let status = body["status"].as_u64().unwrap_or(500) as u16;
    let code = axum::http::StatusCode::from_u16(status)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    let body = match &item.outcome {
        Outcome::Failed(_) => json!({"error": body["error"], "status": status}),
        Outcome::Done { .. } => body,
    };
    (code, Json(body)).into_response()
}

/// PUT|POST /{dataset}/_doc/{id}, POST /{dataset}/_doc, PUT|POST /{dataset}/_create/{id} and
/// DELETE /{dataset}/_doc/{id}: one operation, as a bulk request of one.
async fn single(
    state: &AppState,
    principal: &PlatformPrincipal,
    request_id: &RequestId,
    operation: bulk::Operation,
    dataset: &str,
) -> Response {
    let items = state
        .engine
        .bulk(
            principal,
            Some(dataset),
            vec![operation],
            &principal.origin(&request_id.0),
        )
        .await;
    match items.first() {
        Some(item) => single_answer(item),
        None => Json(Value::Null).into_response(),
    }
}

/// The action of a single-record write: `create` for /_create, or with `op_type=create`.
fn single_operation(
    action: bulk::Action,
    id: Option<String>,
    record: Option<Bytes>,
    uri: &Uri,
) -> Result<bulk::Operation, Error> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(uri.query().unwrap_or(""))
        .map_err(|e| Error::BadRequest(format!("invalid query parameters: {e}")))?;
    let mut action = action;
    let mut source = None;
    for (name, value) in pairs {
        match name.as_str() {
            "op_type" if value == "create" && action == bulk::Action::Index => {
                action = bulk::Action::Create
            }
            "op_type" if value == "index" && action == bulk::Action::Index => {}
            "_source" | "_source_includes" | "_source_excludes"
                if action == bulk::Action::Update =>
            {
                source_param(&name, &value, &mut source)
            }
            "retry_on_conflict" if action == bulk::Action::Update => {}
            "refresh"
            | "timeout"
            | "wait_for_active_shards"
            | "routing"
            | "pretty"
            | "api-version"
            | "human"
            | "error_trace"
            | "filter_path" => {}
            other => {
                return Err(Error::BadRequest(format!(
                    "request [{}] contains unrecognized parameter: [{other}]",
                    uri.path()
                )));
            }
        }
    }
    if id.as_deref() == Some("") {
        return Err(Error::BadRequest(
            "if _id is specified it must not be empty".to_owned(),
        ));
    }
    Ok(bulk::Operation {
        action,
        index: None,
        id,
        record,
        refusal: None,
        require_alias: None,
        source,
    })
}

/// PUT|POST /{dataset}/_doc/{id} creates or replaces the record with this id; PUT|POST
/// /{dataset}/_create/{id} creates it only if no record has this id; POST
/// /{dataset}/_update/{id} merges the body's `doc` into it (or creates its `upsert`).
pub async fn put_doc(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    Path((dataset, id)): Path<(String, String)>,
    uri: Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let path = uri.path();
    let action = if path.contains("/_create/") {
        bulk::Action::Create
    } else if path.contains("/_update/") {
        bulk::Action::Update
    } else {
        bulk::Action::Index
    };
    let operation =
        single_operation(action, Some(id), Some(body), &uri).map_err(PlatformError::of("bulk"))?;
    Ok(single(&state, &principal, &request_id, operation, &dataset).await)
}

/// POST /{dataset}/_doc: creates a record with a generated id.
pub async fn post_doc(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    Path(dataset): Path<String>,
    uri: Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let operation = single_operation(bulk::Action::Index, None, Some(body), &uri)
        .map_err(PlatformError::of("bulk"))?;
    Ok(single(&state, &principal, &request_id, operation, &dataset).await)
}

/// DELETE /{dataset}/_doc/{id}.
pub async fn delete_doc(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    Path((dataset, id)): Path<(String, String)>,
    uri: Uri,
) -> Result<Response, PlatformError> {
    let operation = single_operation(bulk::Action::Delete, Some(id), None, &uri)
        .map_err(PlatformError::of("bulk"))?;
    Ok(single(&state, &principal, &request_id, operation, &dataset).await)
}

/// GET /{dataset}/_doc/{id}: the record, `{"_index", "_id", "_version", "found": true,
/// "_source"}`, or a 404 with `"found": false`.
pub async fn get_doc(
    Signed {
        state, principal, ..
    }: Signed,
    Path((dataset, id)): Path<(String, String)>,
) -> Result<Response, PlatformError> {
    let operation = "get";
    let body = json!({"query": {"term": {"_id": id}}, "size": 1});
    let result = state
        .engine
        .search_dataset(&principal, Some(&dataset), &body, &SearchOptions::default())
        .await
        .map_err(|error| PlatformError { operation, error })?;
    Ok(match result.hits.first() {
        Some(hit) => Json(json!({
            "_index": hit.index,
            "_id": id,
            "_version": 1,
            "_seq_no": 0,
            "_primary_term": 1,
            "found": true,
            "_source": hit.source,
        }))
        .into_response(),
        None => (
            axum::http::StatusCode::NOT_FOUND,
            Json(json!({"_index": dataset, "_id": id, "found": false})),
        )
            .into_response(),
    })
}

/// Reads the body of POST /{dataset}/enrich_dataset: `{"enrich_policy": {"match_field",
/// "enrich_fields", "indices"}}` (`indices`, Elasticsearch's name, a dataset or a list of one:
/// the source; without it, the dataset itself).
fn enrich_policy(body: &Value) -> Result<EnrichPolicy, Error> {
    let bad = |reason: &str| Error::BadRequest(format!("invalid enrich policy: {reason}"));
    let policy = body
        .get("enrich_policy")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("the body must be {\"enrich_policy\": {match_field, enrich_fields}}"))?;
    if let Some(key) = policy
        .keys()
        .find(|k| !matches!(k.as_str(), "match_field" | "enrich_fields" | "indices"))
    {
        return Err(bad(&format!("unknown key [{key}]")));
    }
    let match_field = policy
        .get("match_field")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("[match_field] must be a field name"))?
        .to_owned();
    let enrich_fields = match policy.get("enrich_fields") {
        Some(Value::Array(fields)) => fields
            .iter()
            .map(|f| f.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("[enrich_fields] must be field names"))?,
        Some(Value::String(one)) => vec![one.clone()],
        _ => return Err(bad("[enrich_fields] must be a list of field names")),
    };
    let source = match policy.get("indices") {
        None | Some(Value::Null) => None,
        Some(Value::String(one)) => Some(one.clone()),
        Some(Value::Array(list)) if list.len() == 1 && list[0].is_string() => {
            list[0].as_str().map(str::to_owned)
        }
        Some(_) => return Err(bad("[indices] must name one source dataset")),
    };
    Ok(EnrichPolicy {
        source,
        match_field,
        enrich_fields,
    })
}

/// POST /{dataset}/enrich_dataset: the dataset's records gain the policy's fields from the
/// source's records with the same match field: `{"acknowledged": true, "enriched": n}`.
pub async fn enrich(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: Result<PathName, Error>,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let operation = "enrich dataset";
    let failed = PlatformError::of(operation);
    let (name, body) = dataset_request(operation, name, &body)?;
    let policy = enrich_policy(&body).map_err(failed)?;
    let enriched = state
        .engine
        .enrich_dataset(&principal, &name, &policy, &principal.origin(&request_id.0))
        .await
        .map_err(failed)?;
    Ok(Json(json!({"acknowledged": true, "enriched": enriched})).into_response())
}
