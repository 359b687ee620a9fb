//! Platform SQL at POST (and GET) /sql, POST /{dataset}/sql and POST /_sql: the statement as
//! `{"query": "..."}` (JSON) or the body's text; `start_time` and `end_time` (RFC 3339) bound
//! `@timestamp`; the answer `{"columns": [{"name", "type"}], "rows": [[...]], "size": n}`, or
//! CSV with `response_type=csv`.

use axum::{
    Json,
    body::Bytes,
    http::{HeaderMap, Uri, header::CONTENT_TYPE},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{
    AppState, RequestId, Signed, body::PathName, connections::CONNECTION_HEADER,
    error::PlatformError,
};
use crate::{
    documents::source::json_value,
    engine::{PlatformPrincipal, SqlOutcome, TimeBounds, sql_type_name},
    error::Error,
    query::QueryResult,
};

/// How the answer is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Json,
    Csv,
}

/// The statement, its time bounds and the answer's format, from the query string and the body.
/// A statement as a request gives it.
struct Request {
    statement: String,
    bounds: TimeBounds,
    format: Format,
    /// `connection_id` (query parameter) or `x-svc-connection-id` (header): SQL in place.
    connection: Option<String>,
}

fn read_request(uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Result<Request, Error> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(uri.query().unwrap_or(""))
        .map_err(|e| Error::BadRequest(format!("invalid query parameters: {e}")))?;
    let mut bounds = TimeBounds::default();
    let mut format = Format::Json;
    let mut from_query = None;
    let mut connection = headers
        .get(CONNECTION_HEADER)
        .map(|v| {
            v.to_str()
                .map(str::to_owned)
                .map_err(|_| Error::BadRequest(format!("{CONNECTION_HEADER} is not text")))
        })
        .transpose()?;
    let time = |name: &str, value: &str| {
        chrono::DateTime::parse_from_rfc3339(value)
            .map(|at| at.timestamp_millis())
            .map_err(|_| {
                Error::BadRequest(format!(
                    "[{name}] must be an RFC 3339 time such as 2026-11-24T10:00:00Z, not {value:?}"
                ))
            })
    };
    for (name, value) in &pairs {
        match name.as_str() {
            "start_time" => bounds.start = Some(time(name, value)?),
            "end_time" => bounds.end = Some(time(name, value)?),
            "response_type" | "format" => {
                format = match value.as_str() {
                    "json" => Format::Json,
                    "csv" => Format::Csv,
                    other => {
                        return Err(Error::BadRequest(format!(
                            "[{name}] {other:?} is not served: json (the default) or csv"
                        )));
                    }
                }
            }
            "query" => from_query = Some(value.clone()),
            "connection_id" => connection = Some(value.clone()),
            "api-version" | "pretty" => {}
            other => {
                return Err(Error::BadRequest(format!(
                    "unknown query parameter [{other}] (start_time, end_time, response_type, \
                     query, connection_id)"
                )));
            }
        }
    }
    let is_json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.to_ascii_lowercase().contains("json"));
    let text = std::str::from_utf8(body)
        .map_err(|_| Error::BadRequest("the body is not UTF-8".to_owned()))?
        .trim();
    // A JSON object with `query`, whatever the type says; other text is the statement itself.
    let statement = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => match object.get("query") {
            Some(Value::String(query)) => query.clone(),
            _ => {
                return Err(Error::BadRequest(
                    "the body must be {\"query\": \"<statement>\"} or the statement as text"
                        .to_owned(),
                ));
            }
        },
        _ if is_json && !text.is_empty() => {
            return Err(Error::BadRequest(
                "the body must be {\"query\": \"<statement>\"}".to_owned(),
            ));
        }
        _ if text.is_empty() => from_query.ok_or_else(|| {
            Error::BadRequest(
                "no statement: send {\"query\": \"...\"} or the statement as text".to_owned(),
            )
        })?,
        _ => text.to_owned(),
    };
    Ok(Request {
        statement,
        bounds,
        format,
        connection: connection.filter(|c| !c.is_empty()),
    })
}

/// The answer's rows, each a list of JSON values in column order.
pub(crate) fn rows(result: &QueryResult) -> Vec<Value> {
    let mut rows = Vec::new();
    for batch in &result.batches {
        for row in 0..batch.num_rows() {
            rows.push(Value::Array(
                batch
                    .columns()
                    .iter()
                    .map(|column| json_value(column.as_ref(), row).unwrap_or(Value::Null))
                    .collect(),
            ));
        }
    }
    rows
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(value: &Value) -> String {
    let text = match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match text.contains([',', '"', '\n', '\r']) {
        true => format!("\"{}\"", text.replace('"', "\"\"")),
        false => text,
    }
}

/// POST|GET /sql, POST /_sql.
pub async fn sql(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Result<Response, PlatformError> {
    run(&state, &principal, &request_id, &headers, &uri, &body, None).await
}

/// POST /{dataset}/sql: the same, but an INSERT may write that dataset only.
pub async fn dataset_sql(
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
    let PathName(name) = name.map_err(PlatformError::of("sql"))?;
    run(
        &state,
        &principal,
        &request_id,
        &headers,
        &uri,
        &body,
        Some(&name),
    )
    .await
}

async fn run(
    state: &AppState,
    principal: &PlatformPrincipal,
    request_id: &RequestId,
    headers: &HeaderMap,
    uri: &Uri,
    body: &Bytes,
    scope: Option<&str>,
) -> Result<Response, PlatformError> {
    let Request {
        statement,
        bounds,
        format,
        connection,
    } = read_request(uri, headers, body).map_err(PlatformError::of("sql"))?;
    let outcome = state
        .engine
        .platform_sql_via(
            principal,
            &statement,
            bounds,
            scope,
            connection.as_deref(),
            &principal.origin(&request_id.0),
        )
        .await
        .map_err(PlatformError::of("sql"))?;
    let result = match outcome {
        SqlOutcome::Rows(result) => result,
        SqlOutcome::Affected(n) => return Ok(Json(json!({"rows_affected": n})).into_response()),
    };
    let rows = rows(&result);
    let columns: Vec<Value> = result
        .schema
        .fields()
        .iter()
        .map(|f| json!({"name": f.name(), "type": sql_type_name(f.data_type())}))
        .collect();
    Ok(match format {
        Format::Json => {
            Json(json!({"columns": columns, "rows": rows, "size": rows.len()})).into_response()
        }
        Format::Csv => {
            let mut out = String::new();
            let header: Vec<String> = columns.iter().map(|c| csv_field(&c["name"])).collect();
            out.push_str(&header.join(","));
            out.push('\n');
            for row in &rows {
                let fields: Vec<String> = row
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(csv_field)
                    .collect();
                out.push_str(&fields.join(","));
                out.push('\n');
            }
            ([(CONTENT_TYPE, "text/csv; charset=utf-8")], out).into_response()
        }
    })
}
