//! Platform SQL semantics as sqllogictest files (tests/sql/*.slt), each run against a new
//! server over its real interface: every statement is a signed POST /sql.
//!
//! Beside SQL, a file may send a platform request as a statement, `PUT /<path> <json body>` or
//! `POST /<path> <json body>` (to create a dataset with a mapping before SQL reads it): it
//! succeeds when the answer is a 2xx.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Server, Signed, root_user};
use serde_json::{Value, json};
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType};

#[derive(Debug)]
struct SqlError(String);

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SqlError {}

struct Platform(Signed);

/// A value as the files write it: NULL, text as it is, whole numbers and booleans as JSON,
/// other numbers to 12 decimals without trailing zeros, arrays and objects as their JSON text.
fn text(value: &Value) -> String {
    match value {
        Value::Null => "NULL".to_owned(),
        Value::String(s) if s.is_empty() => "(empty)".to_owned(),
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_f64() => {
            let fixed = format!("{:.12}", n.as_f64().unwrap_or_default());
            let fixed = fixed.trim_end_matches('0').trim_end_matches('.');
            match fixed {
                "-0" => "0".to_owned(),
                other => other.to_owned(),
            }
        }
        other => other.to_string(),
    }
}

#[async_trait::async_trait]
impl AsyncDB for Platform {
    type Error = SqlError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SqlError> {
        let trimmed = sql.trim();
        for method in ["PUT", "POST"] {
            if let Some(rest) = trimmed
                .strip_prefix(method)
                .and_then(|r| r.strip_prefix(' '))
            {
                let (path, body) = rest.split_once(' ').unwrap_or((rest, "null"));
                let body: Value =
                    serde_json::from_str(body).map_err(|e| SqlError(e.to_string()))?;
                let answer = self.0.send(method, path, Some(&body)).await;
                return match answer.status {
                    200..=299 => Ok(DBOutput::StatementComplete(0)),
                    status => Err(SqlError(format!("{status}: {}", answer.body))),
                };
            }
        }
        let answer = self
            .0
            .send("POST", "/sql", Some(&json!({"query": sql})))
            .await;
        if answer.status != 200 {
            // A statement that fails is the client's: a 400, never a 500.
            assert_eq!(answer.status, 400, "{sql}: {answer:?}");
            return Err(SqlError(
                answer.body["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            ));
        }
        if let Some(n) = answer.body["rows_affected"].as_u64() {
            return Ok(DBOutput::StatementComplete(n));
        }
        let types = answer.body["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| match c["type"].as_str() {
                Some("long") => DefaultColumnType::Integer,
                Some("double") => DefaultColumnType::FloatingPoint,
                _ => DefaultColumnType::Text,
            })
            .collect();
        let rows = answer.body["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row.as_array().unwrap().iter().map(text).collect())
            .collect();
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "strata"
    }

    async fn sleep(duration: std::time::Duration) {
        tokio::time::sleep(duration).await;
    }
}

#[tokio::test]
async fn sqllogictest_files() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sql");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .slt files in {dir}");
    let mut failures = Vec::new();
    for file in &files {
        let data = tempfile::tempdir().unwrap();
        let server = Server::start(data.path(), &[]);
        let platform = Signed::new(&server, &root_user(data.path(), "acme"));
        let mut runner = sqllogictest::Runner::new(move || {
            let platform = platform.clone();
            async move { Ok(Platform(platform)) }
        });
        if let Err(error) = runner.run_file_async(file).await {
            failures.push(format!("{}: {error}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
