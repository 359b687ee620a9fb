//! Samples in: POST /{dataset}/metrics (the Prometheus text exposition format) and Prometheus
//! remote write at POST /api/v1/write (snappy-compressed protobuf, version 1 of the protocol).
//!
//! Both write one metrics dataset all at once or not at all (the engine's
//! [`write_samples`](crate::engine::Engine::write_samples)). Remote write names its dataset with
//! the query parameter `index` (default [`REMOTE_WRITE_DATASET`]).

use axum::{
    Json,
    body::Bytes,
    extract::Path,
    http::{HeaderMap, StatusCode, Uri, header::CONTENT_TYPE},
    response::{IntoResponse, Response},
};
use serde_json::json;

use super::{Signed, error::PlatformError};
use crate::{engine::SampleRow, error::Error, exposition, remote_write};

/// The dataset remote write writes when its URL names none.
pub const REMOTE_WRITE_DATASET: &str = "prometheus";

/// The largest remote-write body, decompressed (Prometheus sends a few MiB at most).
const MAX_REMOTE_WRITE_BYTES: usize = 64 << 20;

/// POST /{dataset}/metrics: `{acknowledged: true, indexed: n}`.
pub async fn post_metrics(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let failed = |error| PlatformError {
        operation: "metrics",
        error,
    };
    let text = std::str::from_utf8(&body)
        .map_err(|e| failed(Error::BadRequest(format!("the body is not UTF-8: {e}"))))?;
    let parsed = exposition::parse(text).map_err(|e| failed(Error::BadRequest(e.to_string())))?;
    let now = chrono::Utc::now().timestamp_millis();
    let samples: Vec<SampleRow> = parsed
        .samples
        .into_iter()
        .map(|sample| {
            let mut labels = sample.labels;
            labels.push(("__name__".to_owned(), sample.name));
            SampleRow::new(labels, sample.timestamp.unwrap_or(now), sample.value)
        })
        .collect();
    let indexed = state
        .engine
        .write_samples(
            &principal,
            &name,
            &samples,
            &principal.origin(&request_id.0),
        )
        .await
        .map_err(failed)?;
    Ok(Json(json!({"acknowledged": true, "indexed": indexed})).into_response())
}

/// POST /api/v1/write: 204 when written, as Prometheus answers.
pub async fn remote_write(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let failed = |error| PlatformError {
        operation: "remote write",
        error,
    };
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/x-protobuf");
    if let Some(proto) = content_type
        .split(';')
        .filter_map(|part| part.trim().strip_prefix("proto="))
        .next()
        && proto != "prometheus.WriteRequest"
    {
        // Prometheus falls back to version 1 when a receiver answers 415.
        return Ok((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("remote write: {proto} is not served; send prometheus.WriteRequest (remote write 1.0)"),
        )
            .into_response());
    }
    let params: Vec<(String, String)> = serde_urlencoded::from_str(uri.query().unwrap_or(""))
        .map_err(|e| failed(Error::BadRequest(format!("invalid query parameters: {e}"))))?;
    let mut dataset = REMOTE_WRITE_DATASET.to_owned();
    for (name, value) in params {
        match name.as_str() {
            "index" => dataset = value,
            other => {
                return Err(failed(Error::BadRequest(format!(
                    "unknown query parameter [{other}] (index)"
                ))));
            }
        }
    }
    let samples = remote_write::decode(&body, MAX_REMOTE_WRITE_BYTES).map_err(failed)?;
    state
        .engine
        .write_samples(
            &principal,
            &dataset,
            &samples,
            &principal.origin(&request_id.0),
        )
        .await
        .map_err(failed)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
