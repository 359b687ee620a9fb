//! Saved queries run on someone's behalf: a monitor's query on each run, the query the
//! assistant planned for a question. One runner for both, reading through the engine's access
//! door with the rights of the user it runs as, and rendering results as the HTTP API does:
//! Query DSL hits as a search answers them, SQL as `{columns, rows, size}`, PromQL as
//! Prometheus' `{status, data}`.
//!
//! A query is JSON: `{"type": "querydsl", "datasets": [...], "body": {...}}`, `{"type": "sql",
//! "statement": "...", "connection"?: "..."}` (it must read; with a connection, it runs in
//! place over that connection's datasets), `{"type": "promql", "query": "...", "index"?, "start"?,
//! "end"?, "step"?}` (a range query when start and end are given, in milliseconds; step in
//! seconds), or `{"type": "assistant", ..., "plan": {...}}` (the plan of a question, run as
//! the SQL or PromQL it renders to at the time it runs).

use std::time::Duration;

use chrono::Utc;
use serde_json::{Value, json};

use crate::{
    engine::{
        Engine, PlatformPrincipal, SearchOptions, SqlOutcome, TimeBounds,
        assistant::planner::{Plan, render},
        monitors::document::check_read_only,
        promql::Evaluation,
    },
    error::Error,
    http::{
        search::{Shown, answer},
        sql::rows,
    },
};

/// How long a PromQL query may take.
const PROMQL_TIMEOUT: Duration = Duration::from_secs(30);

/// A query's rendered result and its count (see API.md: hits.total.value, `size`, series).
#[derive(Clone, Debug)]
pub struct Answered {
    pub rendered: Value,
    pub count: u64,
}

/// An error as a run records it: the status a request would have had, and the message.
pub fn failure(error: &Error) -> String {
    let status = crate::http::error::status(error.code()).as_u16();
    format!("{status}: {}", error.public_message())
}

/// Runs `query` as `author`: its rendered result and count, or the error as a run records it
/// (`<status>: <message>`).
pub async fn run(
    engine: &Engine,
    author: &PlatformPrincipal,
    query: &Value,
) -> Result<Answered, String> {
    // An assistant query runs its plan, made when it was saved, at this time.
    let planned;
    let query = match query["type"].as_str() {
        Some("assistant") => {
            let plan: Plan = serde_json::from_value(query["plan"].clone())
                .map_err(|e| format!("400: the monitor's plan is not a plan: {e}"))?;
            planned = render::query(&plan, Utc::now()).map_err(|e| format!("400: {e}"))?;
            &planned
        }
        _ => query,
    };
    match query["type"].as_str() {
        Some("querydsl") => {
            let names: Vec<&str> = query["datasets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let result = engine
                .search_dataset(
                    author,
                    Some(&names.join(",")),
                    &query["body"],
                    &SearchOptions::default(),
                )
                .await
                .map_err(|e| failure(&e))?;
            Ok(Answered {
                count: result.total.map_or(0, |t| t.value),
                rendered: answer(&result, Shown::default()),
            })
        }
        Some("sql") => {
            let statement = query["statement"].as_str().unwrap_or_default();
            check_read_only(statement)?;
            let origin = author.origin(&uuid::Uuid::now_v7().to_string());
            let outcome = engine
                .platform_sql_via(
                    author,
                    statement,
                    TimeBounds::default(),
                    None,
                    query["connection"].as_str(),
                    &origin,
                )
                .await
                .map_err(|e| failure(&e))?;
            let SqlOutcome::Rows(result) = outcome else {
                return Err("a monitor's statement must read, not write".to_owned());
            };
            let rows = rows(&result);
            let columns: Vec<Value> = result
                .schema
                .fields()
                .iter()
                .map(|f| {
                    json!({"name": f.name(), "type": crate::engine::sql_type_name(f.data_type())})
                })
                .collect();
            Ok(Answered {
                count: rows.len() as u64,
                rendered: json!({"columns": columns, "rows": rows, "size": rows.len()}),
            })
        }
        Some("promql") => {
            let text = query["query"].as_str().unwrap_or_default();
            let at = match (query["start"].as_i64(), query["end"].as_i64()) {
                (Some(start), Some(end)) => Evaluation::Range {
                    start,
                    end,
                    step: query["step"].as_i64().unwrap_or(60).saturating_mul(1000),
                },
                _ => Evaluation::Instant {
                    time: Utc::now().timestamp_millis(),
                },
            };
            let output = engine
                .promql_query(author, query["index"].as_str(), text, at, PROMQL_TIMEOUT)
                .await
                .map_err(|e| format!("{}: {}", e.kind.as_str(), e.message))?;
            let data: Value =
                serde_json::from_slice(&crate::http::promql::render::result(&output.value))
                    .map_err(|e| format!("the PromQL result does not render: {e}"))?;
            let count = match data["resultType"].as_str() {
                Some("vector") | Some("matrix") => {
                    data["result"].as_array().map_or(0, |r| r.len() as u64)
                }
                _ => 1,
            };
            Ok(Answered {
                count,
                rendered: json!({"status": "success", "data": data}),
            })
        }
        other => Err(format!("{other:?} is not a query type this server runs")),
    }
}
