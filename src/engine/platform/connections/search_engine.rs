//! Sources that speak the Elasticsearch API (Elasticsearch, OpenSearch, another strata): a
//! dataset is an index; a Query DSL search is forwarded to the source as the reader may send
//! it, and its answer passed back through the reader's field policy (see
//! [`Engine::connection_search`](crate::engine::Engine::connection_search)).
//!
//! Requests carry the connection's credentials: HTTP basic (`username`, `password`), an API key
//! (`api_key`, sent as `Authorization: ApiKey ...`), or AWS Signature Version 4
//! (`access_key_id`, `secret_access_key`, `region`, `service`: `es` for Amazon OpenSearch
//! Service, `strata` for another strata).

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use datafusion::{catalog::TableProvider, execution::SessionState};
use serde_json::{Map, Value};

use super::source::{Source, failure_text};
use crate::error::{Error, Result};

/// An opened search engine.
pub struct SearchEngine {
    http: reqwest::Client,
    /// `http(s)://host:port`, without a trailing slash.
    url: String,
    auth: Auth,
}

enum Auth {
    None,
    Basic(String, Option<String>),
    ApiKey(String),
    SigV4 {
        access_key: String,
        secret_key: String,
        region: String,
        service: String,
    },
}

fn text(config: &Map<String, Value>, key: &str) -> Option<String> {
    config.get(key).and_then(Value::as_str).map(str::to_owned)
}

impl SearchEngine {
    /// Opens the source (one GET / proves the address and the credentials).
    pub async fn open(config: &Map<String, Value>, default_service: &str) -> Result<SearchEngine> {
        let url = text(config, "url")
            .unwrap_or_default()
            .trim_end_matches('/')
            .to_owned();
        let verify = config
            .get("ssl_verify")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(60))
            .danger_accept_invalid_certs(!verify)
            .build()
            .map_err(|e| Error::Internal(format!("an HTTP client: {e}")))?;
        let auth = match (
            text(config, "access_key_id"),
            text(config, "secret_access_key"),
            text(config, "api_key"),
            text(config, "username"),
        ) {
            (Some(access_key), Some(secret_key), _, _) => Auth::SigV4 {
                access_key,
                secret_key,
                region: text(config, "region").unwrap_or_else(|| "us-east-1".to_owned()),
                service: text(config, "service").unwrap_or_else(|| default_service.to_owned()),
            },
            (_, _, Some(key), _) => Auth::ApiKey(key),
            (_, _, _, Some(user)) => Auth::Basic(user, text(config, "password")),
            _ => Auth::None,
        };
        let engine = SearchEngine { http, url, auth };
        engine.call("GET", "/", None, "connect").await?;
        Ok(engine)
    }

    /// Sends a request to the source; its JSON answer, or the failure of `stage`.
    async fn call(
        &self,
        method: &str,
        path_and_query: &str,
        body: Option<&Value>,
        stage: &str,
    ) -> Result<Value> {
        let bytes = body.map(Value::to_string).unwrap_or_default().into_bytes();
        let method_name = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|e| Error::Internal(e.to_string()))?;
        let mut request = self
            .http
            .request(method_name, format!("{}{path_and_query}", self.url));
        // SigV4 signs the content type and sends it with its own headers.
        if body.is_some() && !matches!(self.auth, Auth::SigV4 { .. }) {
            request = request.header("content-type", "application/json");
        }
        request = match &self.auth {
            Auth::None => request,
            Auth::Basic(user, password) => request.basic_auth(user, password.as_ref()),
            Auth::ApiKey(key) => request.header("authorization", format!("ApiKey {key}")),
            Auth::SigV4 {
                access_key,
                secret_key,
                region,
                service,
            } => {
                let host = self
                    .url
                    .trim_start_matches("https://")
                    .trim_start_matches("http://");
                let extra: &[(&str, &str)] = match body.is_some() {
                    true => &[("content-type", "application/json")],
                    false => &[],
                };
                let signed = crate::sigv4::sign(
                    &crate::sigv4::Outgoing {
                        method,
                        host,
                        path_and_query,
                        headers: extra,
                        body: &bytes,
                    },
                    (access_key, secret_key),
                    (region, service),
                    chrono::Utc::now(),
                );
                signed.into_iter().fold(request, |request, (name, value)| {
                    request.header(name, value)
                })
            }
        };
        let stage = format!("{stage} ({method} {path_and_query})");
        let response = request
            .body(bytes)
            .send()
            .await
            .map_err(|e| failure_text(&stage, &super::source::chain(&e)))?;
        let status = response.status();
        let answer: Value = response
            .json()
            .await
            .map_err(|e| failure_text(&stage, &format!("the answer is not JSON: {e}")))?;
        if status.is_success() {
            return Ok(answer);
        }
        let reason = error_reason(&answer);
        Err(match status.as_u16() {
            401 => Error::NotAuthenticated(format!(
                "{stage}: the source refused the credentials: {reason}"
            )),
            403 => Error::Forbidden(format!("{stage}: the source refused the right: {reason}")),
            404 => Error::NotFound(format!("{stage}: {reason}")),
            400 => Error::BadRequest(format!("the source refused the search: {reason}")),
            _ => Error::SourceFailed(format!("{stage}: {status}: {reason}")),
        })
    }

    /// Forwards a search of index `index`; the source's answer.
    pub async fn search(&self, index: &str, body: &Value) -> Result<Value> {
        let path = format!("/{}/_search", encode(index));
        self.call("POST", &path, Some(body), "search").await
    }

    /// The fields of index `index` (dotted names) and their types, from its mapping.
    pub async fn fields(&self, index: &str) -> Result<Vec<(String, String)>> {
        let path = format!("/{}/_mapping", encode(index));
        let answer = self.call("GET", &path, None, "read the mapping").await?;
        let mut fields = Vec::new();
        for mapping in answer.as_object().into_iter().flat_map(Map::values) {
            if let Some(properties) = mapping["mappings"]["properties"].as_object() {
                flatten("", properties, &mut fields);
            }
        }
        fields.sort();
        fields.dedup();
        Ok(fields)
    }
}

/// An index name as a path segment.
fn encode(index: &str) -> String {
    percent_encoding::utf8_percent_encode(index, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// What a search engine's error answer says.
fn error_reason(answer: &Value) -> String {
    let error = &answer["error"];
    match (error["type"].as_str(), error["reason"].as_str()) {
        (Some(kind), Some(reason)) => format!("[{kind}] {reason}"),
        _ => match (error.as_str(), answer["message"].as_str()) {
            (Some(text), _) | (None, Some(text)) => text.to_owned(),
            _ => answer.to_string(),
        },
    }
}

/// The fields of a mapping's `properties`, with their sub-fields, as dotted names.
fn flatten(prefix: &str, properties: &Map<String, Value>, out: &mut Vec<(String, String)>) {
    for (name, field) in properties {
        let path = format!("{prefix}{name}");
        match field["properties"].as_object() {
            Some(inner) => flatten(&format!("{path}."), inner, out),
            None => out.push((path, field["type"].as_str().unwrap_or("object").to_owned())),
        }
    }
}

#[async_trait]
impl Source for SearchEngine {
    async fn datasets(&self) -> Result<Vec<String>> {
        let answer = self
            .call("GET", "/_cat/indices?format=json", None, "list indices")
            .await?;
        let mut names: Vec<String> = answer
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|index| index["index"].as_str())
            .filter(|name| !name.starts_with('.'))
            .map(str::to_owned)
            .collect();
        names.sort();
        Ok(names)
    }

    async fn table(&self, _state: &SessionState, name: &str) -> Result<Arc<dyn TableProvider>> {
        Err(Error::BadRequest(format!(
            "[{name}] is an index of a search engine: query it with the Query DSL \
             (POST /source/{{id}}/{name}/dsl), not SQL"
        )))
    }

    async fn describe(&self, _state: &SessionState, name: &str) -> Result<Vec<(String, String)>> {
        self.fields(name).await
    }

    fn search_engine(&self) -> Option<&SearchEngine> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn mappings_flatten_to_dotted_fields() {
        let properties = json!({
            "user": {"properties": {"name": {"type": "keyword"}, "age": {"type": "long"}}},
            "msg": {"type": "text"}
        });
        let mut out = Vec::new();
        flatten("", properties.as_object().unwrap_or(&Map::new()), &mut out);
        out.sort();
        assert_eq!(
            out,
            [
                ("msg".to_owned(), "text".to_owned()),
                ("user.age".to_owned(), "long".to_owned()),
                ("user.name".to_owned(), "keyword".to_owned()),
            ]
        );
    }

    #[test]
    fn error_answers_are_read() {
        let answer = json!({"error": {"type": "index_not_found_exception", "reason": "no such index [x]"}, "status": 404});
        assert_eq!(
            error_reason(&answer),
            "[index_not_found_exception] no such index [x]"
        );
        assert_eq!(
            error_reason(&json!({"status": "error", "message": "search: no"})),
            "search: no"
        );
    }
}
