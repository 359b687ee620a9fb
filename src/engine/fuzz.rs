//! The entries of the fuzz targets (fuzz/, issue 28): each takes bytes a client can send and
//! runs them through what a request's handler runs them through, short of a server and its
//! log: it answers `Ok`, or the error the client would be answered with. A finding is a panic,
//! a hang, or an error a client would get as a 5xx ([`is_server_error`]).

// What the entries set up once (a runtime, a session, a batch) cannot fail on good inputs;
// were it to, the fuzzer's first run says so.
#![allow(clippy::expect_used)]

use std::sync::{Arc, LazyLock};

use arrow::{
    array::{Float64Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray},
    datatypes::{DataType, Field, Schema, TimeUnit},
};
use bytes::Bytes;
use datafusion::prelude::SessionContext;
use serde_json::Value;
use strata_projections::{catalog::ColumnDef, schema::ColumnType, table::docs::DocsSchema};

use super::platform::{governance, ingest, monitors::document, query_dsl, sql};
use crate::{
    documents::{Document, bulk, columns},
    error::{Error, Result},
};

/// Whether a client would get `error` as a 5xx.
pub fn is_server_error(error: &Error) -> bool {
    crate::http::error::status(error.code()).is_server_error()
}

/// A JSON request body as the platform reads one: empty is `null`.
fn json(body: &[u8]) -> Result<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body)
        .map_err(|error| Error::BadRequest(format!("the body is not JSON: {error}")))
}

/// A bulk body (`POST /_bulk`, NDJSON): its operations, each record read as a document or an
/// update, then the columns a dataset of none would grow to hold them and the batch of their
/// rows, as a bulk request plans its write. How many records became rows.
pub fn bulk(body: &[u8]) -> Result<usize> {
    let operations = bulk::parse(&Bytes::copy_from_slice(body))?;
    let now = 1_780_000_000_000;
    let mut documents = Vec::new();
    for (i, operation) in operations.iter().enumerate() {
        let Some(record) = &operation.record else {
            continue;
        };
        let id = operation.id.clone().unwrap_or_else(|| i.to_string());
        let read = match operation.action {
            bulk::Action::Update => ingest::resolve::read_update(record, &id, now)
                .map(|(_, partial, created)| created.unwrap_or(partial)),
            _ => Document::parse(record, id, now),
        };
        documents.push(read.ok());
    }
    let mut table = crate::documents::dataset("logs", Vec::new());
    let formats = columns::Formats::of(&table);
    for document in documents.iter_mut().flatten() {
        document.gather_points(&table.columns);
        columns::drop_malformed(&table.columns, &formats, document);
    }
    let candidates: Vec<Option<&Document>> = documents.iter().map(Option::as_ref).collect();
    let (grown, refusals) = columns::grow(&table.columns, &formats, &candidates);
    table.columns = grown;
    let candidates: Vec<Option<&Document>> = candidates
        .into_iter()
        .zip(refusals)
        .map(|(document, refusal)| document.filter(|_| refusal.is_none()))
        .collect();
    let (batch, _) =
        columns::rows(&table, &candidates).map_err(|refusal| Error::BadRequest(refusal.reason))?;
    Ok(batch.num_rows())
}

/// A search body (`POST /{dataset}/_search`): read, its query compiled for a dataset of the
/// usual fields (`@timestamp` a date), its aggregations translated.
pub fn search(body: &[u8]) -> Result<()> {
    static SCHEMA: LazyLock<DocsSchema> = LazyLock::new(|| {
        let text = |name: &str| ColumnDef {
            name: name.to_owned(),
            data_type: ColumnType::Utf8,
            nullable: true,
        };
        DocsSchema::of(&crate::documents::dataset(
            "logs",
            vec![text("host"), text("message")],
        ))
    });
    query_dsl::check_search_body(&json(body)?, &SCHEMA)
}

/// A platform SQL statement (`POST /sql`): read through the gates, an INSERT's upsert read, a
/// query planned over `logs` (`@timestamp`, `host`, `message`, `status`, `bytes`, `ratio`),
/// not run.
pub fn sql(text: &str) -> Result<()> {
    static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    });
    static SESSION: LazyLock<SessionContext> = LazyLock::new(|| {
        let schema = Arc::new(Schema::new(vec![
            Field::new(
                "@timestamp",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                true,
            ),
            Field::new("host", DataType::Utf8, true),
            Field::new("message", DataType::Utf8, true),
            Field::new("status", DataType::Int64, true),
            Field::new("bytes", DataType::Int64, true),
            Field::new("ratio", DataType::Float64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(TimestampMillisecondArray::from(vec![1_780_000_000_000, 0])),
                Arc::new(StringArray::from(vec!["a", "b"])),
                Arc::new(StringArray::from(vec!["disk full", "ok"])),
                Arc::new(Int64Array::from(vec![500, 200])),
                Arc::new(Int64Array::from(vec![10, 20])),
                Arc::new(Float64Array::from(vec![0.5, 1.5])),
            ],
        )
        .expect("a batch of its schema");
        sql::fuzz_session("logs", batch).expect("a session")
    });
    RUNTIME.block_on(sql::check_statement(&SESSION, text))
}

/// A document as the platform's YAML routes read one.
fn read<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T> {
    crate::http::read_document(&Bytes::copy_from_slice(body), false)
}

/// A role document (`PUT /role/{name}`), read and checked.
pub fn role(body: &[u8]) -> Result<()> {
    governance::check_role_doc(&read(body)?)
}

/// A user document (`PUT /user/{name}`), read and checked (its password is not hashed).
pub fn user(body: &[u8]) -> Result<()> {
    governance::check_user_doc(&read(body)?)
}

/// A monitor document (`POST /monitor`), read and checked with its schedule, query,
/// conditions and templates, naming the channel `ops` and the template `footer`.
pub fn monitor(body: &[u8]) -> Result<Value> {
    static CHANNELS: LazyLock<std::collections::BTreeSet<String>> =
        LazyLock::new(|| ["ops".to_owned()].into());
    static PARTIALS: LazyLock<std::collections::BTreeMap<String, String>> =
        LazyLock::new(|| [("footer".to_owned(), "-- {{monitor.name}}".to_owned())].into());
    let doc: Value = read(body)?;
    document::monitor(
        &doc,
        &document::MonitorContext {
            channels: &CHANNELS,
            partials: &PARTIALS,
        },
    )
}

/// A channel's config (`POST /alert`), read and checked, with the SMTP account `mail`.
pub fn channel(body: &[u8]) -> Result<Value> {
    static SMTP: LazyLock<std::collections::BTreeSet<String>> =
        LazyLock::new(|| ["mail".to_owned()].into());
    let doc: Value = read(body)?;
    document::channel_config(
        &doc,
        &document::ChannelContext {
            smtp_accounts: &SMTP,
        },
    )
}

/// A row body of the data plane (`POST /v1/.../rows`), JSON or, when `arrow`, Arrow IPC: read
/// into a batch of a table of the usual columns. How many rows it holds.
pub fn rows(body: &[u8], arrow: bool) -> Result<usize> {
    static SCHEMA: LazyLock<arrow::datatypes::SchemaRef> = LazyLock::new(|| {
        Arc::new(Schema::new(vec![
            Field::new("name", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
            Field::new("score", DataType::Float64, true),
            Field::new("ok", DataType::Boolean, true),
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new(
                "tags",
                DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
                true,
            ),
            Field::new(
                "embedding",
                DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), 3),
                true,
            ),
        ]))
    });
    let body = match arrow {
        true => crate::rows::RowsBody::ArrowIpc(body.to_vec()),
        false => crate::rows::RowsBody::Json(body.to_vec()),
    };
    Ok(body.into_batch(&SCHEMA)?.num_rows())
}

/// A signed request (SigV4, in its headers or presigned in its query), as lines: the method,
/// the path, the query, then headers as `name: value`; verified at a fixed time for the access
/// key `AKIDEXAMPLE`. Whether it verified.
pub fn sigv4(text: &str) -> bool {
    let mut lines = text.split('\n');
    let method = lines.next().unwrap_or_default();
    let path = lines.next().unwrap_or_default();
    let query = lines.next().unwrap_or_default();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name, value.trim()))
        .collect();
    let request = crate::sigv4::Request {
        method,
        path,
        query,
        headers,
        body_sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    };
    let service = crate::sigv4::Service {
        region: "us-east-1",
        service: "service",
        max_skew_secs: 900,
        normalize: true,
    };
    let now = chrono::DateTime::from_timestamp(1_440_938_160, 0).unwrap_or_default();
    crate::sigv4::verify(&request, &service, now, |key| {
        (key == "AKIDEXAMPLE").then(|| "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".to_owned())
    })
    .is_ok()
}

/// A monitor's schedule, `text` as a cron expression (a first line) in a time zone (a second
/// line), then as a period of `text` minutes: read, and its next five runs after a fixed time
/// found, as a test run shows them. How many runs were found.
pub fn schedule(text: &str) -> usize {
    use super::monitors::schedule::Schedule;
    let (expression, timezone) = text.split_once('\n').unwrap_or((text, "UTC"));
    let schedules = [
        serde_json::json!({"cron": {"expression": expression, "timezone": timezone}}),
        serde_json::json!({"period": {"interval": text.trim().parse::<i64>().unwrap_or(1), "unit": "MINUTES"}}),
    ];
    let start = chrono::DateTime::from_timestamp(1_780_000_000, 0).unwrap_or_default();
    let mut runs = 0;
    for schedule in schedules {
        let Ok(schedule) = Schedule::parse(&schedule) else {
            continue;
        };
        let mut after = start;
        for _ in 0..5 {
            match schedule.next_after(after) {
                Some(next) if next > after => {
                    after = next;
                    runs += 1;
                }
                _ => break,
            }
        }
    }
    runs
}

/// A mustache template of a monitor's action: `text` up to its first NUL is the template, up
/// to a second one a partial `footer`, and the rest a JSON context. Checked as a monitor's
/// templates are when it is saved, and rendered. Whether it rendered.
pub fn template(text: &str) -> bool {
    use super::monitors::template;
    let mut parts = text.splitn(3, '\0');
    let source = parts.next().unwrap_or_default();
    let partials = [(
        "footer".to_owned(),
        parts.next().unwrap_or_default().to_owned(),
    )]
    .into();
    let context = parts
        .next()
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_else(|| serde_json::json!({"monitor": {"name": "m"}, "results": [{"size": 2}]}));
    template::check(source, &partials).is_ok()
        && template::render(source, &partials, &context).is_ok()
}
