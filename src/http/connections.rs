//! Connections (spec 001 section 4.4, API.md "Connections and imports"): the catalogue of source
//! types, connections to them, and their datasets read in place. Bodies are JSON (or YAML);
//! answers JSON. SQL in place is POST /sql with `connection_id` ([`super::sql`]).

use axum::{
    Json,
    body::Bytes,
    extract::{Path, rejection::PathRejection},
    http::{HeaderMap, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{
    AppState, Signed, alerting::id_of, body::PathName, documents::json_body, error::PlatformError,
    governance::document,
};
use crate::{engine::PlatformPrincipal, error::Error};

/// GET /sources and GET /_connector/connectors: every source type.
pub async fn connectors(
    Signed {
        state, principal, ..
    }: Signed,
) -> Result<Response, PlatformError> {
    let records = state
        .engine
        .connectors(&principal)
        .map_err(PlatformError::of("list source types"))?;
    Ok(Json(records).into_response())
}

/// POST /source/{source_type}: `{connector_id?, name, config}` → 201 with the connection.
pub async fn create(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    source_type: std::result::Result<PathName, Error>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "create connection";
    let source_type = id_of(source_type, OP)?;
    let doc: Value = document(&headers, &body).map_err(PlatformError::of(OP))?;
    let created = state
        .engine
        .create_connection(
            &principal,
            &source_type,
            &doc,
            &principal.origin(&request_id.0),
        )
        .await
        .map_err(PlatformError::of(OP))?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// GET /sources/connections: the connections the caller may see.
pub async fn list(
    Signed {
        state, principal, ..
    }: Signed,
) -> Result<Response, PlatformError> {
    let connections = state
        .engine
        .list_connections(&principal)
        .await
        .map_err(PlatformError::of("list connections"))?;
    Ok(Json(connections).into_response())
}

/// GET /source/{id}: the connection with its config, without credentials.
pub async fn get(
    Signed {
        state, principal, ..
    }: Signed,
    id: std::result::Result<PathName, Error>,
) -> Result<Response, PlatformError> {
    const OP: &str = "get connection";
    let id = id_of(id, OP)?;
    let connection = state
        .engine
        .get_connection(&principal, &id)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(Json(connection).into_response())
}

/// PATCH /source/{id}: `{name?, config?}`.
pub async fn patch(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    id: std::result::Result<PathName, Error>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "change connection";
    let id = id_of(id, OP)?;
    let doc: Value = document(&headers, &body).map_err(PlatformError::of(OP))?;
    let connection = state
        .engine
        .patch_connection(&principal, &id, &doc, &principal.origin(&request_id.0))
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(Json(connection).into_response())
}

/// DELETE /source/{id}: `{acknowledged: true, connection_id}`.
pub async fn delete(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    id: std::result::Result<PathName, Error>,
) -> Result<Response, PlatformError> {
    const OP: &str = "delete connection";
    let id = id_of(id, OP)?;
    let deleted = state
        .engine
        .delete_connection(&principal, &id, &principal.origin(&request_id.0))
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(Json(deleted).into_response())
}

/// POST /source/{id}/test: `{status, message, datasets_available}`.
pub async fn test(
    Signed {
        state, principal, ..
    }: Signed,
    id: std::result::Result<PathName, Error>,
) -> Result<Response, PlatformError> {
    const OP: &str = "test connection";
    let id = id_of(id, OP)?;
    let tested = state
        .engine
        .test_connection(&principal, &id)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(Json(tested).into_response())
}

/// GET|HEAD /source/{id}/{dataset}/metadata: the dataset's fields as the caller sees them.
pub async fn metadata(
    Signed {
        state, principal, ..
    }: Signed,
    path: std::result::Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, PlatformError> {
    let Path((id, dataset)) = path.map_err(|rejection| {
        PlatformError::of("dataset metadata")(Error::BadRequest(format!(
            "invalid path: {}",
            rejection.body_text()
        )))
    })?;
    let metadata = state
        .engine
        .connection_dataset_metadata(&principal, &id, &dataset)
        .await
        .map_err(PlatformError::of("dataset metadata"))?;
    Ok(Json(metadata).into_response())
}

/// The connection a request names: the query parameter `connection_id`, or the header
/// `x-svc-connection-id`.
pub(super) fn connection_param(uri: &Uri, headers: &HeaderMap) -> Result<Option<String>, Error> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(uri.query().unwrap_or(""))
        .map_err(|e| Error::BadRequest(format!("invalid query parameters: {e}")))?;
    if let Some((_, id)) = pairs.into_iter().find(|(name, _)| name == "connection_id") {
        return Ok(Some(id).filter(|id| !id.is_empty()));
    }
    headers
        .get(CONNECTION_HEADER)
        .map(|value| {
            value
                .to_str()
                .map(str::to_owned)
                .map_err(|_| Error::BadRequest(format!("{CONNECTION_HEADER} is not text")))
        })
        .transpose()
}

/// The header that names a connection to query in place.
pub(super) const CONNECTION_HEADER: &str = "x-svc-connection-id";

/// A Query DSL search of dataset `dataset` of connection `connection`: the body (JSON, or
/// none for every record).
pub(super) async fn search_in_place(
    state: &AppState,
    principal: &PlatformPrincipal,
    connection: &str,
    dataset: &str,
    body: &Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "search";
    let body = match json_body(body).map_err(PlatformError::of(OP))? {
        Value::Null => json!({}),
        body => body,
    };
    let answer = state
        .engine
        .connection_search(principal, connection, dataset, &body)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(Json(answer).into_response())
}

/// GET|POST /source/{id}/{dataset}/dsl: a Query DSL search of one dataset of the connection.
pub async fn dsl(
    Signed {
        state, principal, ..
    }: Signed,
    path: std::result::Result<Path<(String, String)>, PathRejection>,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let Path((id, dataset)) = path.map_err(|rejection| {
        PlatformError::of("search")(Error::BadRequest(format!(
            "invalid path: {}",
            rejection.body_text()
        )))
    })?;
    search_in_place(&state, &principal, &id, &dataset, &body).await
}

/// PUT /import/{source_type}: `{connection_id, source, dataset, mode?, follow?}` → 201
/// `{job_id, state}`; the job runs in the background (GET /import/jobs).
pub async fn start_import(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    source_type: std::result::Result<PathName, Error>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "start import";
    let source_type = id_of(source_type, OP)?;
    let doc: Value = document(&headers, &body).map_err(PlatformError::of(OP))?;
    let started = state
        .engine
        .start_import(
            &principal,
            &source_type,
            &doc,
            &principal.origin(&request_id.0),
        )
        .await
        .map_err(PlatformError::of(OP))?;
    Ok((StatusCode::CREATED, Json(started)).into_response())
}

/// GET /import/jobs: the caller's import jobs (every job of the account for the root user).
pub async fn list_imports(
    Signed {
        state, principal, ..
    }: Signed,
) -> Result<Response, PlatformError> {
    let jobs = state
        .engine
        .list_imports(&principal)
        .await
        .map_err(PlatformError::of("list import jobs"))?;
    Ok(Json(jobs).into_response())
}

/// DELETE /import/jobs/{id}: cancels a running job, or removes a finished one.
pub async fn delete_import(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    id: std::result::Result<PathName, Error>,
) -> Result<Response, PlatformError> {
    const OP: &str = "delete import job";
    let id = id_of(id, OP)?;
    let deleted = state
        .engine
        .delete_import(&principal, &id, &principal.origin(&request_id.0))
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(Json(deleted).into_response())
}
