//! The data-plane routes under /v1 (spec 000): databases and tables.
//!
//! Authentication: `Authorization: Bearer <key>` or `x-api-key: <key>`; every route but
//! /health and /metrics requires it.

use axum::{
    Extension, Json, Router,
    extract::{DefaultBodyLimit, State},
    http::{HeaderMap, Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
    routing::{MethodRouter, delete, get, post},
};
use serde::Deserialize;
use serde_json::{Value, json};
use strata_projections::{catalog::TableDef, schema::ColumnType};

use super::{
    AppState, RequestId,
    body::{JsonBody, Params, PathName, RawBody},
    health,
};
use crate::{
    engine::{CreateTable, Principal, StorageRequest, StreamStart, search},
    error::{Error, Result},
    rows::{self, ARROW_STREAM, RowsBody},
};

/// What makes a route's handler.
type Handler = fn() -> MethodRouter<AppState>;

/// The routes of one database, `/v1/<operation>/{database}`: the operation and its handler.
/// In a cluster they are forwarded to the database's owner (`super::forward`).
pub(super) const DATABASE_ROUTES: &[(&str, Handler)] = &[
    ("create_table", || post(create_table)),
    ("drop_table", || post(drop_table)),
    ("list_tables", || post(list_tables)),
    ("schema", || post(schema)),
    ("append", || post(append)),
    ("update", || post(update)),
    ("delete", || post(delete_rows)),
    ("query_sql", || post(query_sql)),
    ("bm25_search", || post(bm25_search)),
    ("token_match", || post(token_match)),
    ("exact_match", || post(exact_match)),
    ("hybrid_search", || post(hybrid_search)),
    ("count", || post(count)),
    ("changes", || get(changes)),
];

pub fn routes(state: AppState) -> Router {
    let max_body = state.engine.config().server.max_body_bytes;
    let mut router = Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/databases", get(list_databases).post(create_database))
        .route("/v1/databases/{name}", delete(delete_database))
        .route("/v1/databases/{name}/storage/verify", post(verify_storage));
    for (operation, handler) in DATABASE_ROUTES {
        router = router.route(&format!("/v1/{operation}/{{database}}"), handler());
    }
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
}

/// The API key a request carries: a bearer token, else the x-api-key header.
pub(super) fn api_key(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|value| value.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, key)| key.trim());
    bearer.or_else(|| {
        headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    })
}

fn principal(state: &AppState, headers: &HeaderMap) -> Result<Principal> {
    state.engine.authenticate(api_key(headers))
}

async fn metrics(State(state): State<AppState>) -> Response {
    state.engine.refresh_gauges().await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.engine.metrics().render(),
    )
        .into_response()
}

/// Unknown paths. Under /v1 the key is checked first, as on every operation.
async fn not_found(
    State(state): State<AppState>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
) -> Error {
    if uri.path().starts_with("/v1/")
        && let Err(error) = principal(&state, &headers)
    {
        return error;
    }
    Error::NotFound(format!("no endpoint {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> Error {
    Error::MethodNotAllowed(format!("{method} is not allowed on {}", uri.path()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateDatabaseRequest {
    name: String,
    #[serde(default)]
    storage: Option<StorageRequest>,
}

async fn create_database(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    body: Result<JsonBody<CreateDatabaseRequest>, Error>,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    let JsonBody(request) = body?;
    let created = state
        .engine
        .create_database(
            &principal,
            &request.name,
            request.storage.as_ref(),
            &principal.origin(&request_id.0),
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"name": created.name, "state": created.state})),
    )
        .into_response())
}

async fn list_databases(State(state): State<AppState>, headers: HeaderMap) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    let databases = state.engine.list_databases(&principal).await?;
    Ok(Json(json!({ "databases": databases })).into_response())
}

async fn delete_database(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    PathName(name): PathName,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    state
        .engine
        .delete_database(&principal, &name, &principal.origin(&request_id.0))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn create_table(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    PathName(database): PathName,
    body: Result<JsonBody<CreateTable>, Error>,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    let JsonBody(request) = body?;
    let table = state
        .engine
        .create_table(
            &principal,
            &database,
            request,
            &principal.origin(&request_id.0),
        )
        .await?;
    Ok(Json(json!({
        "name": table.name,
        "table_id": table.id,
        "schema": describe(&table),
    }))
    .into_response())
}

/// The body of drop_table and schema.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableName {
    name: String,
}

async fn drop_table(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    PathName(database): PathName,
    body: Result<JsonBody<TableName>, Error>,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    let JsonBody(request) = body?;
    state
        .engine
        .drop_table(
            &principal,
            &database,
            &request.name,
            &principal.origin(&request_id.0),
        )
        .await?;
    Ok(Json(json!({"name": request.name, "dropped": true})).into_response())
}

async fn list_tables(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathName(database): PathName,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    let tables = state.engine.list_tables(&principal, &database).await?;
    Ok(Json(tables).into_response())
}

async fn schema(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathName(database): PathName,
    body: Result<JsonBody<TableName>, Error>,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    let JsonBody(request) = body?;
    let table = state
        .engine
        .table(&principal, &database, &request.name)
        .await?;
    Ok(Json(describe(&table)).into_response())
}

/// The column descriptors of a table, as schema and create_table answer them.
fn describe(table: &TableDef) -> Vec<Value> {
    table
        .columns
        .iter()
        .map(|column| {
            let mut descriptor = json!({
                "name": column.name,
                "type": column.data_type.to_string(),
                "nullable": column.nullable,
                "fts": table.fts_columns.contains(&column.name),
                "exact": table.exact_columns.contains(&column.name),
            });
            if let (true, ColumnType::Vector { dim }) = (
                table.vector_column.as_deref() == Some(column.name.as_str()),
                &column.data_type,
            ) {
                descriptor["vector"] = json!({
                    "dim": dim,
                    "metric": table.vector_metric.map(|m| m.as_str()),
                });
            }
            descriptor
        })
        .collect()
}

/// The rows a write request carries, by its Content-Type: an Arrow IPC stream, or else JSON.
fn rows_body(headers: &HeaderMap, body: Vec<u8>) -> RowsBody {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.starts_with(ARROW_STREAM) {
        RowsBody::ArrowIpc(body)
    } else {
        RowsBody::Json(body)
    }
}

/// Whether the client asked for JSON (`Accept: application/json`); Arrow IPC otherwise.
fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| media.trim().starts_with("application/json"))
}

/// Rows as the client asked for them.
fn render_rows(
    headers: &HeaderMap,
    schema: &arrow_schema::SchemaRef,
    batches: &[arrow::array::RecordBatch],
) -> Result<Response> {
    if wants_json(headers) {
        let body = rows::to_json(batches)?;
        return Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response());
    }
    let body = rows::to_ipc(schema, batches)?;
    Ok(([(header::CONTENT_TYPE, ARROW_STREAM)], body).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableParam {
    table: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PredicateParams {
    table: String,
    predicate: String,
}

async fn append(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    PathName(database): PathName,
    params: Result<Params<TableParam>, Error>,
    body: Result<RawBody, Error>,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    let Params(params) = params?;
    let RawBody(body) = body?;
    let rows = state
        .engine
        .append(
            &principal,
            &database,
            &params.table,
            rows_body(&headers, body),
            &principal.origin(&request_id.0),
        )
        .await?;
    render_rows(&headers, &rows.schema(), &[rows])
}

async fn update(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    PathName(database): PathName,
    params: Result<Params<PredicateParams>, Error>,
    body: Result<RawBody, Error>,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    let Params(params) = params?;
    let RawBody(body) = body?;
    let count = state
        .engine
        .update(
            &principal,
            &database,
            &params.table,
            &params.predicate,
            rows_body(&headers, body),
            &principal.origin(&request_id.0),
        )
        .await?;
    Ok(Json(count).into_response())
}

async fn delete_rows(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    PathName(database): PathName,
    params: Result<Params<PredicateParams>, Error>,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    let Params(params) = params?;
    let count = state
        .engine
        .delete(
            &principal,
            &database,
            &params.table,
            &params.predicate,
            &principal.origin(&request_id.0),
        )
        .await?;
    Ok(Json(count).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlQueryRequest {
    sql: String,
}

async fn query_sql(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathName(database): PathName,
    body: Result<JsonBody<SqlQueryRequest>, Error>,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    let JsonBody(request) = body?;
    let result = state
        .engine
        .query_sql(&principal, &database, &request.sql)
        .await?;
    render_rows(&headers, &result.schema, &result.batches)
}

/// A search route: a JSON request in, the rows it found out.
macro_rules! search_route {
    ($name:ident, $request:ty) => {
        async fn $name(
            State(state): State<AppState>,
            headers: HeaderMap,
            PathName(database): PathName,
            body: Result<JsonBody<$request>, Error>,
        ) -> Result<Response> {
            let principal = principal(&state, &headers)?;
            let JsonBody(request) = body?;
            let rows = state.engine.$name(&principal, &database, request).await?;
            render_rows(&headers, &rows.schema(), &[rows])
        }
    };
}

search_route!(bm25_search, search::Bm25Search);
search_route!(token_match, search::TokenMatch);
search_route!(exact_match, search::ExactMatch);
search_route!(hybrid_search, search::HybridSearch);

async fn count(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathName(database): PathName,
    body: Result<JsonBody<search::CountRequest>, Error>,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    let JsonBody(request) = body?;
    let count = state.engine.count(&principal, &database, request).await?;
    Ok(Json(json!({ "count": count })).into_response())
}

async fn verify_storage(
    State(state): State<AppState>,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    PathName(name): PathName,
) -> Result<Response> {
    let principal = principal(&state, &headers)?;
    state
        .engine
        .verify_storage(&principal, &name, &principal.origin(&request_id.0))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangesParams {
    #[serde(default)]
    table: Option<String>,
    #[serde(default)]
    from_offset: Option<u64>,
}

/// A change stream as server-sent events (docs/change-streams.md): one `data:` JSON object per
/// event, with its `id:` to resume from; a failure mid-stream is an `event: error` with the
/// error body, and ends the stream.
async fn changes(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathName(database): PathName,
    params: Result<Params<ChangesParams>, Error>,
) -> Result<Response> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let principal = principal(&state, &headers)?;
    let Params(params) = params?;
    let last_event_id = match headers.get("last-event-id") {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| Error::BadRequest("Last-Event-ID is not text".to_owned()))?
                .to_owned(),
        ),
    };
    let start = StreamStart {
        from_offset: params.from_offset,
        last_event_id,
    };
    let stream = state
        .engine
        .changes(&principal, &database, params.table.as_deref(), start)
        .await?;
    let events = futures::stream::unfold(Some(stream), |stream| async move {
        let mut stream = stream?;
        let event = match stream.next().await? {
            Ok(change) => Event::default().id(change.id).data(change.data.to_string()),
            Err(error) => {
                tracing::warn!(%error, "change stream failed");
                let body =
                    json!({"code": error.code().as_str(), "message": error.public_message()});
                let event = Event::default().event("error").data(body.to_string());
                return Some((Ok::<_, std::convert::Infallible>(event), None));
            }
        };
        Some((Ok(event), Some(stream)))
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response())
}
