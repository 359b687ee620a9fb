//! Channels and monitors (spec 001 section 4.7, API.md "Monitors and channels"): YAML documents
//! in and out, JSON when `Content-Type` (in) or `Accept` (out) asks for it, as users and roles.
//! The engine decides and keeps them; runs go through the node's [`crate::alerting::Alerting`].

use axum::{
    body::Bytes,
    http::{HeaderMap, Uri},
    response::Response,
};
use serde_json::{Value, json};

use super::{
    Signed,
    body::PathName,
    error::PlatformError,
    governance::{answer, document},
};
use crate::error::Error;

pub(super) fn id_of(
    id: std::result::Result<PathName, Error>,
    operation: &'static str,
) -> Result<String, PlatformError> {
    id.map(|PathName(id)| id)
        .map_err(PlatformError::of(operation))
}

/// POST /alert: `{channel_id, config}`.
pub async fn create_channel(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "create channel";
    let doc: Value = document(&headers, &body).map_err(PlatformError::of(OP))?;
    let origin = principal.origin(&request_id.0);
    let channel = state
        .engine
        .create_channel(&principal, &doc, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(&headers, &channel))
}

/// GET /alert/{id}: `{channel_id, config, delivery}`.
pub async fn get_channel(
    Signed {
        state, principal, ..
    }: Signed,
    id: std::result::Result<PathName, Error>,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "get channel";
    let id = id_of(id, OP)?;
    let channel = state
        .engine
        .get_channel(&principal, &id)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(&headers, &channel))
}

/// GET /alerts: `{channels: [...], total}`, the channels the caller may read.
pub async fn list_channels(
    Signed {
        state, principal, ..
    }: Signed,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "list channels";
    let channels = state
        .engine
        .list_channels(&principal)
        .await
        .map_err(PlatformError::of(OP))?;
    let total = channels.len();
    Ok(answer(
        &headers,
        &json!({"channels": channels, "total": total}),
    ))
}

/// PATCH /alert/{id}: the config fields given replace those there.
pub async fn patch_channel(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    id: std::result::Result<PathName, Error>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "update channel";
    let id = id_of(id, OP)?;
    let doc: Value = document(&headers, &body).map_err(PlatformError::of(OP))?;
    let origin = principal.origin(&request_id.0);
    let channel = state
        .engine
        .patch_channel(&principal, &id, &doc, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(&headers, &channel))
}

/// DELETE /alert/{id}: `{channel_id, result: deleted}`.
pub async fn delete_channel(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    id: std::result::Result<PathName, Error>,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "delete channel";
    let id = id_of(id, OP)?;
    let origin = principal.origin(&request_id.0);
    state
        .engine
        .delete_channel(&principal, &id, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(
        &headers,
        &json!({"channel_id": id, "result": "deleted"}),
    ))
}

/// A request's monitor document, its assistant question (if it asks one) planned as the
/// caller sees the dataset.
async fn monitor_document(
    state: &super::AppState,
    principal: &crate::engine::PlatformPrincipal,
    headers: &HeaderMap,
    body: &Bytes,
    op: &'static str,
) -> Result<Value, PlatformError> {
    let mut doc: Value = document(headers, body).map_err(PlatformError::of(op))?;
    state
        .assistant
        .plan_monitor_document(principal, &mut doc)
        .await
        .map_err(PlatformError::of(op))?;
    Ok(doc)
}

/// POST /monitor: `{_id, _version, monitor}`.
pub async fn create_monitor(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "create monitor";
    let doc = monitor_document(&state, &principal, &headers, &body, OP).await?;
    let origin = principal.origin(&request_id.0);
    let monitor = state
        .engine
        .create_monitor(&principal, &doc, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(&headers, &monitor))
}

/// GET /monitor/{id}.
pub async fn get_monitor(
    Signed {
        state, principal, ..
    }: Signed,
    id: std::result::Result<PathName, Error>,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "get monitor";
    let id = id_of(id, OP)?;
    let monitor = state
        .engine
        .get_monitor(&principal, &id)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(&headers, &monitor))
}

/// GET /monitors: `{monitors: [...], total}`, the monitors the caller may read.
pub async fn list_monitors(
    Signed {
        state, principal, ..
    }: Signed,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "list monitors";
    let monitors = state
        .engine
        .list_monitors(&principal)
        .await
        .map_err(PlatformError::of(OP))?;
    let total = monitors.len();
    Ok(answer(
        &headers,
        &json!({"monitors": monitors, "total": total}),
    ))
}

/// PATCH /monitor/{id}: the fields given replace those there; `_version` goes up by one.
pub async fn patch_monitor(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    id: std::result::Result<PathName, Error>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "update monitor";
    let id = id_of(id, OP)?;
    let doc = monitor_document(&state, &principal, &headers, &body, OP).await?;
    let origin = principal.origin(&request_id.0);
    let monitor = state
        .engine
        .patch_monitor(&principal, &id, &doc, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(&headers, &monitor))
}

/// DELETE /monitor/{id}: `{_id, result: deleted}`.
pub async fn delete_monitor(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    id: std::result::Result<PathName, Error>,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "delete monitor";
    let id = id_of(id, OP)?;
    let origin = principal.origin(&request_id.0);
    state
        .engine
        .delete_monitor(&principal, &id, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(&headers, &json!({"_id": id, "result": "deleted"})))
}

/// POST /monitor/{id}/execute: runs it now. Body (optional): `{trigger_ids: [names], dryrun}`;
/// `?dryrun=true` too. Answers the execution result.
pub async fn execute_monitor(
    Signed {
        state, principal, ..
    }: Signed,
    id: std::result::Result<PathName, Error>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "execute monitor";
    let id = id_of(id, OP)?;
    let doc: Value = match body.iter().all(u8::is_ascii_whitespace) {
        true => json!({}),
        false => document(&headers, &body).map_err(PlatformError::of(OP))?,
    };
    let refuse = |message: String| PlatformError::of(OP)(Error::BadRequest(message));
    let mut dryrun = false;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(uri.query().unwrap_or(""))
        .map_err(|e| refuse(format!("invalid query parameters: {e}")))?;
    for (name, value) in pairs {
        match (name.as_str(), value.as_str()) {
            ("dryrun", "true" | "") => dryrun = true,
            ("dryrun", "false") => dryrun = false,
            ("dryrun", other) => {
                return Err(refuse(format!("[dryrun] {other:?} is not true or false")));
            }
            ("api-version" | "pretty", _) => {}
            (other, _) => {
                return Err(refuse(format!(
                    "unknown query parameter [{other}] (dryrun)"
                )));
            }
        }
    }
    let fields = doc
        .as_object()
        .ok_or_else(|| refuse("the body must be an object".to_owned()))?;
    let mut triggers = None;
    for (key, value) in fields {
        match (key.as_str(), value) {
            ("dryrun", Value::Bool(b)) => dryrun = *b,
            ("trigger_ids", Value::Array(list)) => {
                let names: Option<Vec<String>> =
                    list.iter().map(|t| t.as_str().map(str::to_owned)).collect();
                triggers = Some(names.ok_or_else(|| {
                    refuse("[trigger_ids] must be a list of trigger names".to_owned())
                })?);
            }
            (other, _) => {
                return Err(refuse(format!(
                    "[{other}] is not a field here (trigger_ids, dryrun)"
                )));
            }
        }
    }
    let result = state
        .alerting
        .execute(&principal, &id, triggers, dryrun)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(&headers, &result))
}

/// POST /monitor/_execute: a test run of the monitor document in the body, not saved (a dry
/// run), with its next five run times.
pub async fn execute_draft(
    Signed {
        state, principal, ..
    }: Signed,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "execute monitor";
    let doc = monitor_document(&state, &principal, &headers, &body, OP).await?;
    let result = state
        .alerting
        .execute_draft(&principal, &doc)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(&headers, &result))
}

/// GET /monitor/{id}/runs: its recent runs, newest first.
pub async fn monitor_runs(
    Signed {
        state, principal, ..
    }: Signed,
    id: std::result::Result<PathName, Error>,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "monitor runs";
    let id = id_of(id, OP)?;
    let runs = state
        .engine
        .list_monitor_runs(&principal, &id)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(&headers, &runs))
}

/// POST /alerts/config: channels, templates and monitors, all or nothing.
pub async fn import_config(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "import alerting config";
    let doc: Value = document(&headers, &body).map_err(PlatformError::of(OP))?;
    let origin = principal.origin(&request_id.0);
    let summary = state
        .engine
        .import_alerting(&principal, &doc, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(&headers, &summary))
}
