//! Prometheus' HTTP query API, at /promql/* and /api/v1/* alike (API.md): query, query_range,
//! labels, label/{name}/values, series, status/buildinfo, and GET /{dataset}/promql; plus the
//! metadata and exemplar listings Grafana asks for, answered empty.
//!
//! Parameters come from the query string or a form body (POST), as Prometheus takes them:
//! times as Unix seconds (fractions allowed) or RFC 3339, steps and timeouts as seconds or
//! durations (`15s`). `index` limits a request to one metrics dataset. Answers are
//! `{"status": "success", "data": ...}` (with `warnings` and `infos` when a query has them),
//! errors `{"status": "error", "errorType": ..., "error": ...}` with Prometheus' statuses.

mod params;
pub(crate) mod render;

use std::time::Duration;

use axum::{
    Json,
    body::Bytes,
    extract::Path,
    http::{HeaderMap, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{AppState, Signed};
use crate::engine::{
    PlatformPrincipal,
    promql::{Evaluation, PromqlError, PromqlErrorKind},
};
use params::Params;

/// The longest a query may run when it names no `timeout` (Prometheus' default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// At most this many points per series in a range query (Prometheus' limit).
const MAX_POINTS: i64 = 11_000;

/// The earliest and latest times a listing covers when it names none.
const MIN_TIME: i64 = i64::MIN / 2;
const MAX_TIME: i64 = i64::MAX / 2;

/// What a successful answer carries: a JSON value, or a query result already written as JSON
/// text (see [`render`]).
enum Data {
    Value(Value),
    Written(Vec<u8>),
}

/// An answer of the API: success with `data`, or an error.
struct Answer(Result<(Data, Vec<String>, Vec<String>), PromqlError>);

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        match self.0 {
            Ok((data, warnings, infos)) => {
                // Writing to a Vec cannot fail.
                let mut body = Vec::new();
                body.extend_from_slice(br#"{"status":"success","data":"#);
                match data {
                    Data::Value(value) => {
                        let _ = serde_json::to_writer(&mut body, &value);
                    }
                    Data::Written(written) => body.extend_from_slice(&written),
                }
                for (name, notes) in [("warnings", &warnings), ("infos", &infos)] {
                    if !notes.is_empty() {
                        body.extend_from_slice(format!(",\"{name}\":").as_bytes());
                        let _ = serde_json::to_writer(&mut body, notes);
                    }
                }
                body.push(b'}');
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    body,
                )
                    .into_response()
            }
            Err(error) => {
                let status = match error.kind {
                    PromqlErrorKind::BadData => StatusCode::BAD_REQUEST,
                    PromqlErrorKind::Execution => StatusCode::UNPROCESSABLE_ENTITY,
                    PromqlErrorKind::Timeout | PromqlErrorKind::Unavailable => {
                        StatusCode::SERVICE_UNAVAILABLE
                    }
                    PromqlErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
                    PromqlErrorKind::NotFound => StatusCode::NOT_FOUND,
                    PromqlErrorKind::Forbidden => StatusCode::FORBIDDEN,
                };
                let body = json!({
                    "status": "error",
                    "errorType": error.kind.as_str(),
                    "error": error.message,
                });
                (status, Json(body)).into_response()
            }
        }
    }
}

fn data(value: Value) -> Answer {
    Answer(Ok((Data::Value(value), Vec::new(), Vec::new())))
}

/// A query's result, written as JSON.
fn written(value: &crate::promql::engine::QueryValue) -> Data {
    Data::Written(render::result(value))
}

/// GET|POST /promql/query and /api/v1/query: an instant query.
pub async fn query(
    Signed {
        state, principal, ..
    }: Signed,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    Answer(instant(&state, &principal, None, &headers, &uri, &body).await).into_response()
}

async fn instant(
    state: &AppState,
    principal: &PlatformPrincipal,
    dataset: Option<&str>,
    headers: &HeaderMap,
    uri: &Uri,
    body: &Bytes,
) -> Result<(Data, Vec<String>, Vec<String>), PromqlError> {
    let params = Params::read(headers, uri, body)?;
    let query = params.required("query")?;
    let time = params.time("time")?.unwrap_or_else(now);
    let timeout = params.timeout(DEFAULT_TIMEOUT)?;
    let index = dataset.or(params.get("index"));
    let output = state
        .engine
        .promql_query(
            principal,
            index,
            query,
            Evaluation::Instant { time },
            timeout,
        )
        .await?;
    Ok((written(&output.value), output.warnings, output.infos))
}

/// GET|POST /promql/query_range and /api/v1/query_range: a range query.
pub async fn query_range(
    Signed {
        state, principal, ..
    }: Signed,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    Answer(ranged(&state, &principal, None, &headers, &uri, &body).await).into_response()
}

async fn ranged(
    state: &AppState,
    principal: &PlatformPrincipal,
    dataset: Option<&str>,
    headers: &HeaderMap,
    uri: &Uri,
    body: &Bytes,
) -> Result<(Data, Vec<String>, Vec<String>), PromqlError> {
    let params = Params::read(headers, uri, body)?;
    let query = params.required("query")?;
    let start = params
        .time("start")?
        .ok_or_else(|| PromqlError::bad_data("invalid parameter \"start\": missing"))?;
    let end = params
        .time("end")?
        .ok_or_else(|| PromqlError::bad_data("invalid parameter \"end\": missing"))?;
    if end < start {
        return Err(PromqlError::bad_data(
            "invalid parameter \"end\": end timestamp must not be before start time",
        ));
    }
    let step = params
        .duration("step")?
        .ok_or_else(|| PromqlError::bad_data("invalid parameter \"step\": missing"))?;
    if step <= 0 {
        return Err(PromqlError::bad_data(
            "invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer",
        ));
    }
    if (end - start) / step > MAX_POINTS {
        return Err(PromqlError::bad_data(
            "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)",
        ));
    }
    let timeout = params.timeout(DEFAULT_TIMEOUT)?;
    let index = dataset.or(params.get("index"));
    let output = state
        .engine
        .promql_query(
            principal,
            index,
            query,
            Evaluation::Range { start, end, step },
            timeout,
        )
        .await?;
    Ok((written(&output.value), output.warnings, output.infos))
}

/// GET /{dataset}/promql: a query of one dataset's metrics; a range query when `start` and
/// `end` are given, an instant query otherwise.
pub async fn dataset_query(
    Signed {
        state, principal, ..
    }: Signed,
    Path(name): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    let ranged_request = Params::read(&headers, &uri, &body)
        .map(|p| p.get("start").is_some() || p.get("end").is_some());
    let answer = match ranged_request {
        Err(error) => Err(error),
        Ok(true) => ranged(&state, &principal, Some(&name), &headers, &uri, &body).await,
        Ok(false) => instant(&state, &principal, Some(&name), &headers, &uri, &body).await,
    };
    Answer(answer).into_response()
}

/// The series a listing covers: its `match[]` selectors, `start` and `end`.
async fn listed(
    state: &AppState,
    principal: &PlatformPrincipal,
    params: &Params,
) -> Result<Vec<crate::promql::value::Labels>, PromqlError> {
    let start = params.time("start")?.unwrap_or(MIN_TIME);
    let end = params.time("end")?.unwrap_or(MAX_TIME);
    state
        .engine
        .promql_series(
            principal,
            params.get("index"),
            &params.all("match[]"),
            start,
            end,
        )
        .await
}

/// The `limit` of a listing (0 or none: no limit), and a warning when it cut the listing.
fn limited<T>(params: &Params, mut items: Vec<T>) -> Result<(Vec<T>, Vec<String>), PromqlError> {
    let limit = match params.get("limit") {
        None => 0,
        Some(text) => text.parse::<usize>().map_err(|_| {
            PromqlError::bad_data(format!(
                "invalid parameter \"limit\": cannot parse \"{text}\" to a valid limit"
            ))
        })?,
    };
    let mut warnings = Vec::new();
    if limit > 0 && items.len() > limit {
        items.truncate(limit);
        warnings.push("results truncated due to limit".to_owned());
    }
    Ok((items, warnings))
}

/// GET|POST /promql/labels and /api/v1/labels: the label names of the series.
pub async fn labels(
    Signed {
        state, principal, ..
    }: Signed,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    let answer = async {
        let params = Params::read(&headers, &uri, &body)?;
        let series = listed(&state, &principal, &params).await?;
        let names: std::collections::BTreeSet<String> = series
            .iter()
            .flat_map(|labels| labels.iter().map(|(name, _)| name.to_owned()))
            .collect();
        let (names, warnings) = limited(&params, names.into_iter().collect())?;
        Ok((Data::Value(json!(names)), warnings, Vec::new()))
    };
    Answer(answer.await).into_response()
}

/// GET /promql/label/{name}/values and /api/v1/label/{name}/values.
pub async fn label_values(
    Signed {
        state, principal, ..
    }: Signed,
    Path(name): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    let answer = async {
        let params = Params::read(&headers, &uri, &body)?;
        // Prometheus 3 takes a UTF-8 name escaped as `U__...`; plain names are the common case.
        let series = listed(&state, &principal, &params).await?;
        let values: std::collections::BTreeSet<String> = series
            .iter()
            .filter_map(|labels| labels.get(&name).map(str::to_owned))
            .collect();
        let (values, warnings) = limited(&params, values.into_iter().collect())?;
        Ok((Data::Value(json!(values)), warnings, Vec::new()))
    };
    Answer(answer.await).into_response()
}

/// GET|POST /promql/series and /api/v1/series: the label sets of the matching series.
pub async fn series(
    Signed {
        state, principal, ..
    }: Signed,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    let answer = async {
        let params = Params::read(&headers, &uri, &body)?;
        if params.all("match[]").is_empty() {
            return Err(PromqlError::bad_data("no match[] parameter provided"));
        }
        let series = listed(&state, &principal, &params).await?;
        let (series, warnings) = limited(&params, series)?;
        let listed: Vec<Value> = series.iter().map(render::labels).collect();
        Ok((Data::Value(Value::Array(listed)), warnings, Vec::new()))
    };
    Answer(answer.await).into_response()
}

/// GET /promql/status/buildinfo and /api/v1/status/buildinfo.
pub async fn buildinfo(_signed: Signed) -> Response {
    data(json!({
        "application": "strata",
        "version": env!("CARGO_PKG_VERSION"),
        "revision": "",
        "branch": "",
        "buildUser": "",
        "buildDate": "",
        "goVersion": "",
    }))
    .into_response()
}

/// GET /api/v1/metadata: no metric metadata is kept (HELP and TYPE are read, not stored).
pub async fn metadata(_signed: Signed) -> Response {
    data(json!({})).into_response()
}

/// GET|POST /api/v1/query_exemplars: no exemplars are kept.
pub async fn exemplars(_signed: Signed) -> Response {
    data(json!([])).into_response()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
