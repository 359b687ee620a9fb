//! Webhook and Slack: one JSON POST per try.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use super::{DeliveryError, Failure, authority, connect_error, root_cause};

/// A backstop on one HTTP try, whatever timeout the given client has.
pub const HTTP_ATTEMPT_LIMIT: Duration = Duration::from_secs(30);
const BODY_EXCERPT_CHARS: usize = 200;

pub(super) struct HttpPost {
    kind: &'static str,
    url: reqwest::Url,
    /// host:port, the only part of the URL that errors and logs show.
    authority: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl HttpPost {
    pub(super) fn new(
        kind: &'static str,
        url: &str,
        extra: &BTreeMap<String, String>,
        body: Vec<u8>,
    ) -> Result<Self, DeliveryError> {
        let url = reqwest::Url::parse(url)
            .map_err(|e| DeliveryError::Config(format!("{kind} url is invalid: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(DeliveryError::Config(format!(
                "{kind} url must be http(s)://host/..."
            )));
        }
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in extra {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                DeliveryError::Config(format!("{kind} header name {name:?} is invalid"))
            })?;
            // The value may be a token: the error names the header only.
            let value = HeaderValue::from_str(value).map_err(|_| {
                DeliveryError::Config(format!("{kind} header {name} has an invalid value"))
            })?;
            headers.insert(name, value);
        }
        Ok(Self {
            kind,
            authority: authority(&url),
            url,
            headers,
            body,
        })
    }

    pub(super) async fn send(&self, client: &reqwest::Client) -> Result<(), Failure> {
        let request = client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .body(self.body.clone());
        let response = match tokio::time::timeout(HTTP_ATTEMPT_LIMIT, request.send()).await {
            Err(_elapsed) => return Err(self.timed_out().into()),
            Ok(Err(e)) => return Err(self.request_error(&e).into()),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok()?.trim().parse().ok())
            .map(Duration::from_secs);
        let body = tokio::time::timeout(HTTP_ATTEMPT_LIMIT, response.text()).await;
        let body = body.ok().and_then(Result::ok).unwrap_or_default();
        let excerpt: String = body.trim().chars().take(BODY_EXCERPT_CHARS).collect();
        let mut message = format!("{} answered {status}", self.kind);
        if !excerpt.is_empty() {
            message = format!("{message}: {excerpt}");
        }
        let error = if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS
        {
            DeliveryError::Transient(message)
        } else {
            DeliveryError::Rejected(message)
        };
        Err(Failure { error, retry_after })
    }

    fn timed_out(&self) -> DeliveryError {
        DeliveryError::Transient(format!("{} to {} timed out", self.kind, self.authority))
    }

    fn request_error(&self, e: &reqwest::Error) -> DeliveryError {
        let (kind, authority) = (self.kind, &self.authority);
        if e.is_timeout() {
            self.timed_out()
        } else if e.is_builder() {
            DeliveryError::Config(format!("{kind} request is invalid: {}", root_cause(e)))
        } else if e.is_redirect() {
            DeliveryError::Rejected(format!("{kind} at {authority} redirected too often"))
        } else if e.is_connect() {
            DeliveryError::Transient(connect_error(e, kind, authority))
        } else {
            DeliveryError::Transient(format!(
                "{kind} request to {authority} failed: {}",
                root_cause(e)
            ))
        }
    }
}
