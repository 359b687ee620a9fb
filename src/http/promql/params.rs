//! The parameters of a Prometheus API request: from the query string, and from the body when it
//! is a form (`application/x-www-form-urlencoded`, as Grafana POSTs queries).

use std::time::Duration;

use axum::{
    body::Bytes,
    http::{HeaderMap, Uri, header::CONTENT_TYPE},
};

use crate::{engine::promql::PromqlError, promql::parser::parse_duration};

/// A request's parameters, in the order given (a name may repeat: `match[]`).
pub(super) struct Params(Vec<(String, String)>);

fn invalid(name: &str, reason: impl std::fmt::Display) -> PromqlError {
    PromqlError::bad_data(format!("invalid parameter \"{name}\": {reason}"))
}

impl Params {
    pub(super) fn read(
        headers: &HeaderMap,
        uri: &Uri,
        body: &Bytes,
    ) -> Result<Params, PromqlError> {
        let mut pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(uri.query().unwrap_or(""))
                .map_err(|e| PromqlError::bad_data(format!("invalid query string: {e}")))?;
        let form = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
        if form && !body.is_empty() {
            let posted: Vec<(String, String)> = serde_urlencoded::from_bytes(body)
                .map_err(|e| PromqlError::bad_data(format!("invalid form body: {e}")))?;
            pairs.extend(posted);
        }
        Ok(Params(pairs))
    }

    /// The first value of `name`.
    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, in order.
    pub(super) fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub(super) fn required(&self, name: &str) -> Result<&str, PromqlError> {
        self.get(name).ok_or_else(|| invalid(name, "missing"))
    }

    /// A time, as Unix milliseconds.
    pub(super) fn time(&self, name: &str) -> Result<Option<i64>, PromqlError> {
        self.get(name)
            .map(|text| {
                parse_time(text).ok_or_else(|| {
                    invalid(
                        name,
                        format!("cannot parse \"{text}\" to a valid timestamp"),
                    )
                })
            })
            .transpose()
    }

    /// A duration, in milliseconds.
    pub(super) fn duration(&self, name: &str) -> Result<Option<i64>, PromqlError> {
        self.get(name)
            .map(|text| {
                parse_api_duration(text).ok_or_else(|| {
                    invalid(name, format!("cannot parse \"{text}\" to a valid duration"))
                })
            })
            .transpose()
    }

    /// `timeout`, or `default` when there is none (a longer one is cut to `default`).
    pub(super) fn timeout(&self, default: Duration) -> Result<Duration, PromqlError> {
        match self.duration("timeout")? {
            None => Ok(default),
            Some(ms) if ms <= 0 => Err(invalid("timeout", "timeout must be positive")),
            Some(ms) => Ok(Duration::from_millis(ms as u64).min(default)),
        }
    }
}

/// Prometheus' API times: Unix seconds with up to millisecond fractions, or RFC 3339.
pub(super) fn parse_time(text: &str) -> Option<i64> {
    if let Ok(seconds) = text.parse::<f64>() {
        if !seconds.is_finite() {
            return None;
        }
        let ms = (seconds * 1000.0).round();
        return (ms.abs() < 9.2e18).then_some(ms as i64);
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|at| at.timestamp_millis())
}

/// Prometheus' API durations: seconds (fractions allowed) or a duration such as `1m30s`.
pub(super) fn parse_api_duration(text: &str) -> Option<i64> {
    if let Ok(seconds) = text.parse::<f64>() {
        let ms = seconds * 1000.0;
        return (ms.is_finite() && ms.abs() < 9.2e18).then_some(ms.round() as i64);
    }
    parse_duration(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_seconds_or_rfc3339() {
        assert_eq!(parse_time("1435781451.781"), Some(1_435_781_451_781));
        assert_eq!(parse_time("1435781451"), Some(1_435_781_451_000));
        assert_eq!(
            parse_time("2015-07-01T20:10:51.781Z"),
            Some(1_435_781_451_781)
        );
        assert_eq!(parse_time("-1.5"), Some(-1500));
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(parse_time("NaN"), None);
    }

    #[test]
    fn durations_are_seconds_or_prometheus_durations() {
        assert_eq!(parse_api_duration("15"), Some(15_000));
        assert_eq!(parse_api_duration("0.5"), Some(500));
        assert_eq!(parse_api_duration("1m30s"), Some(90_000));
        assert_eq!(parse_api_duration("5x"), None);
    }
}
