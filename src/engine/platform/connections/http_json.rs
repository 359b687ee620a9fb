//! Sources that are HTTP JSON APIs: the records of a JSON answer, read as a table.
//!
//! The dataset `records` is the answer of the connection's `url`; any other dataset name is a
//! path under it (`users` reads `<url>/users`, `users?active=true` keeps its query). The
//! records are the array at `records_path` (a JSON pointer, `/data/items`, or dotted,
//! `data.items`), or the answer itself when it is an array. Every request carries the
//! connection's `headers` (sealed: they often hold tokens). An API takes no SQL, so filters
//! run here over the records it answered; answers are read up to 64 MiB.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::{catalog::TableProvider, datasource::MemTable, execution::SessionState};
use serde_json::{Map, Value};

use super::source::{Source, failure_text, refused};
use crate::error::{Error, Result};

/// The largest answer read.
const MAX_ANSWER_BYTES: usize = 64 << 20;

/// The dataset that is the connection's URL itself.
pub const RECORDS: &str = "records";

/// An opened HTTP JSON API.
pub struct HttpJson {
    http: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
    records_path: Option<String>,
}

impl HttpJson {
    /// Opens the source (no request is made until a dataset is read).
    pub fn open(config: &Map<String, Value>) -> Result<HttpJson> {
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(5))
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|e| Error::Internal(format!("an HTTP client: {e}")))?;
        let headers = config
            .get("headers")
            .and_then(Value::as_object)
            .map(|headers| {
                headers
                    .iter()
                    .filter_map(|(name, value)| Some((name.clone(), value.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(HttpJson {
            http,
            url: config
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim_end_matches('/')
                .to_owned(),
            headers,
            records_path: config
                .get("records_path")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }

    /// The URL of dataset `name`.
    fn url_of(&self, name: &str) -> String {
        match name {
            RECORDS => self.url.clone(),
            path => format!("{}/{}", self.url, path.trim_start_matches('/')),
        }
    }

    /// The records dataset `name` answers.
    async fn records(&self, name: &str) -> Result<Vec<Value>> {
        let url = self.url_of(name);
        let stage = format!("GET {url}");
        let request = self
            .headers
            .iter()
            .fold(self.http.get(&url), |request, (name, value)| {
                request.header(name, value)
            });
        let mut response = request
            .send()
            .await
            .map_err(|e| failure_text(&stage, &super::source::chain(&e)))?;
        let status = response.status();
        if let Some(refusal) = refused(&stage, status) {
            return Err(refusal);
        }
        match status.as_u16() {
            404 => return Err(Error::DatasetNotFound(name.to_owned())),
            _ if !status.is_success() => {
                return Err(Error::SourceFailed(format!("{stage}: {status}")));
            }
            _ => {}
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| failure_text(&stage, &super::source::chain(&e)))?
        {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > MAX_ANSWER_BYTES {
                return Err(Error::SourceFailed(format!(
                    "{stage}: the answer is larger than {} MiB",
                    MAX_ANSWER_BYTES >> 20
                )));
            }
        }
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|e| Error::SourceFailed(format!("{stage}: the answer is not JSON: {e}")))?;
        records_at(answer, self.records_path.as_deref())
            .map_err(|message| Error::SourceFailed(format!("{stage}: {message}")))
    }
}

/// The array of records at `path` (a JSON pointer or a dotted path) of `answer`, or `answer`
/// itself when it is an array and no path is given.
fn records_at(answer: Value, path: Option<&str>) -> std::result::Result<Vec<Value>, String> {
    let found = match path {
        None => Some(answer),
        Some(pointer) if pointer.starts_with('/') => answer.pointer(pointer).cloned(),
        Some(dotted) => dotted
            .split('.')
            .try_fold(answer, |value, key| value.get(key).cloned()),
    };
    match found {
        Some(Value::Array(records)) => Ok(records),
        Some(_) => Err(format!(
            "no array of records at records_path {:?}",
            path.unwrap_or("")
        )),
        None => Err(format!(
            "the answer has nothing at records_path {:?}",
            path.unwrap_or("")
        )),
    }
}

#[async_trait]
impl Source for HttpJson {
    async fn datasets(&self) -> Result<Vec<String>> {
        // The URL answers: the one dataset an API lists.
        self.records(RECORDS).await?;
        Ok(vec![RECORDS.to_owned()])
    }

    async fn table(&self, _state: &SessionState, name: &str) -> Result<Arc<dyn TableProvider>> {
        table_of(name, &self.records(name).await?)
    }
}

/// The JSON objects of `records` as a table of dataset `name` (its schema inferred from them;
/// other values are left out).
pub fn table_of(name: &str, records: &[Value]) -> Result<Arc<dyn TableProvider>> {
    let batch = batch_of(name, records)?;
    let schema = batch.schema();
    let partitions = vec![vec![batch]];
    let table =
        MemTable::try_new(schema, partitions).map_err(|e| Error::Internal(e.to_string()))?;
    Ok(Arc::new(table))
}

/// The JSON objects of `records` as one record batch of dataset `name`, its schema inferred
/// from them.
pub fn batch_of(name: &str, records: &[Value]) -> Result<arrow::array::RecordBatch> {
    let objects: Vec<&Value> = records.iter().filter(|r| r.is_object()).collect();
    let schema = arrow::json::reader::infer_json_schema_from_iterator(
        objects.iter().map(|r| Ok((*r).clone())),
    )
    .map_err(|e| Error::SourceFailed(format!("read {name}: {e}")))?;
    let schema = Arc::new(schema);
    let mut decoder = arrow::json::ReaderBuilder::new(schema.clone())
        .build_decoder()
        .map_err(|e| Error::Internal(e.to_string()))?;
    decoder
        .serialize(&objects)
        .map_err(|e| Error::SourceFailed(format!("read {name}: {e}")))?;
    let batch = decoder
        .flush()
        .map_err(|e| Error::SourceFailed(format!("read {name}: {e}")))?;
    Ok(batch.unwrap_or_else(|| arrow::array::RecordBatch::new_empty(schema)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn records_are_found_by_pointer_or_dotted_path() {
        let answer = json!({"data": {"items": [{"a": 1}, {"a": 2}]}});
        assert_eq!(
            records_at(answer.clone(), Some("/data/items")).map(|r| r.len()),
            Ok(2)
        );
        assert_eq!(
            records_at(answer.clone(), Some("data.items")).map(|r| r.len()),
            Ok(2)
        );
        assert!(records_at(answer.clone(), None).is_err());
        assert!(records_at(answer, Some("data.none")).is_err());
        assert_eq!(records_at(json!([1, 2, 3]), None).map(|r| r.len()), Ok(3));
    }
}
