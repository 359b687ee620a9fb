//! Sources that serve the Prometheus query API (Prometheus, Thanos, Mimir, Cortex,
//! VictoriaMetrics): a dataset is a metric, read in place as a table of its samples over the
//! connection's `lookback` (default 1h) at its `step` (default 60s), one row per series and
//! step: its labels as columns, `timestamp` (milliseconds) and `value` (NaN and infinities as
//! null). The metric's name goes to the source as the query; filters run here.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use datafusion::{catalog::TableProvider, execution::SessionState};
use serde_json::{Map, Value, json};

use super::{
    config::text,
    source::{Source, failure_text, refused},
};
use crate::error::{Error, Result};

/// An opened Prometheus query API.
pub struct PromApi {
    http: reqwest::Client,
    url: String,
    auth: Option<Auth>,
    lookback: Duration,
    step: Duration,
}

enum Auth {
    Basic(String, Option<String>),
    Bearer(String),
}

/// A duration as Prometheus writes them: a number and one unit of `ms`, `s`, `m`, `h`, `d`,
/// `w` (`90s`, `1h`, `7d`).
pub fn duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let at = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(at);
    let number: u64 = number.parse().ok()?;
    let millis = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 604_800_000,
        _ => return None,
    };
    Some(Duration::from_millis(number.checked_mul(millis)?)).filter(|d| !d.is_zero())
}

/// Whether `name` is a metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

impl PromApi {
    /// Opens the source: one query (`vector(1)`) proves the address and the credentials.
    pub async fn open(config: &Map<String, Value>) -> Result<PromApi> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Error::Internal(format!("an HTTP client: {e}")))?;
        let auth = match (text(config, "bearer_token"), text(config, "username")) {
            (Some(token), _) => Some(Auth::Bearer(token.to_owned())),
            (None, Some(user)) => Some(Auth::Basic(
                user.to_owned(),
                text(config, "password").map(str::to_owned),
            )),
            (None, None) => None,
        };
        let api = PromApi {
            http,
            url: text(config, "url")
                .unwrap_or_default()
                .trim_end_matches('/')
                .to_owned(),
            auth,
            lookback: text(config, "lookback")
                .and_then(duration)
                .unwrap_or(Duration::from_secs(3600)),
            step: text(config, "step")
                .and_then(duration)
                .unwrap_or(Duration::from_secs(60)),
        };
        api.get(
            "/api/v1/query",
            &[("query", "vector(1)".to_owned())],
            "connect",
        )
        .await?;
        Ok(api)
    }

    /// A GET of the API; the answer's `data`.
    async fn get(&self, path: &str, params: &[(&str, String)], stage: &str) -> Result<Value> {
        let stage = format!("{stage} (GET {path})");
        let mut request = self.http.get(format!("{}{path}", self.url)).query(params);
        request = match &self.auth {
            Some(Auth::Basic(user, password)) => request.basic_auth(user, password.as_ref()),
            Some(Auth::Bearer(token)) => request.bearer_auth(token),
            None => request,
        };
        let response = request
            .send()
            .await
            .map_err(|e| failure_text(&stage, &super::source::chain(&e)))?;
        let status = response.status();
        if let Some(refusal) = refused(&stage, status) {
            return Err(refusal);
        }
        let answer: Value = response
            .json()
            .await
            .map_err(|e| failure_text(&stage, &format!("the answer is not JSON: {e}")))?;
        match answer["status"].as_str() {
            Some("success") => Ok(answer["data"].clone()),
            _ => Err(Error::SourceFailed(format!(
                "{stage}: {status}: {}",
                answer["error"].as_str().unwrap_or("no error given")
            ))),
        }
    }
}

/// A sample's value as JSON: a number, or null for NaN and the infinities.
fn sample_value(text: Option<&str>) -> Value {
    match text.and_then(|t| t.parse::<f64>().ok()) {
        Some(value) if value.is_finite() => json!(value),
        _ => Value::Null,
    }
}

/// The rows of a `matrix` result: one per series and step.
fn rows_of(result: &Value) -> Vec<Value> {
    let mut rows = Vec::new();
    for series in result.as_array().into_iter().flatten() {
        let labels: Map<String, Value> = series["metric"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(name, _)| name.as_str() != "__name__")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        for point in series["values"].as_array().into_iter().flatten() {
            let mut row = labels.clone();
            let seconds = point[0].as_f64().unwrap_or_default();
            row.insert(
                "timestamp".to_owned(),
                json!((seconds * 1000.0).round() as i64),
            );
            row.insert("value".to_owned(), sample_value(point[1].as_str()));
            rows.push(Value::Object(row));
        }
    }
    rows
}

#[async_trait]
impl Source for PromApi {
    async fn datasets(&self) -> Result<Vec<String>> {
        let names = self
            .get("/api/v1/label/__name__/values", &[], "list metrics")
            .await?;
        let mut names: Vec<String> = names
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        names.sort();
        Ok(names)
    }

    async fn table(&self, _state: &SessionState, name: &str) -> Result<Arc<dyn TableProvider>> {
        if !is_metric_name(name) {
            return Err(Error::BadRequest(format!(
                "[{name}] is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"
            )));
        }
        let end = chrono::Utc::now().timestamp_millis() as f64 / 1000.0;
        let start = end - self.lookback.as_secs_f64();
        let params = [
            ("query", name.to_owned()),
            ("start", format!("{start:.3}")),
            ("end", format!("{end:.3}")),
            ("step", format!("{}", self.step.as_secs_f64())),
        ];
        let data = self
            .get("/api/v1/query_range", &params, &format!("read {name}"))
            .await?;
        let rows = rows_of(&data["result"]);
        if rows.is_empty() {
            return Err(Error::DatasetNotFound(name.to_owned()));
        }
        super::http_json::table_of(name, &rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_prometheus_writes_them() {
        assert_eq!(duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(duration("7d"), Some(Duration::from_secs(7 * 86_400)));
        for bad in ["", "h", "1y", "0s", "1.5h"] {
            assert_eq!(duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_matrix_becomes_rows_of_labels_time_and_value() {
        let result = json!([{"metric": {"__name__": "up", "job": "a"},
                             "values": [[1700000000.5, "1"], [1700000060, "NaN"]]}]);
        let rows = rows_of(&result);
        assert_eq!(
            rows,
            vec![
                json!({"job": "a", "timestamp": 1_700_000_000_500_i64, "value": 1.0}),
                json!({"job": "a", "timestamp": 1_700_000_060_000_i64, "value": null}),
            ]
        );
        assert!(is_metric_name("node_cpu:rate5m") && !is_metric_name("1up"));
    }
}
