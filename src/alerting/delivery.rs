//! Delivery of a monitor's alert to a channel: a webhook, Slack, or email over SMTP.
//!
//! Guarantees of [`deliver`]:
//! - At most `retry.attempts` tries per call (at least one), each bounded in time: HTTP by the
//!   client's timeout ([`client`] sets 10 s; [`HTTP_ATTEMPT_LIMIT`] bounds any client), SMTP by
//!   the account's `timeout_ms`. The whole call takes at most about
//!   `attempts × timeout + (attempts − 1) × max_delay`.
//! - Only transient failures are tried again, after an exponential backoff with jitter (or a
//!   receiver's `Retry-After` in seconds, capped at `max_delay`): HTTP 5xx and 429, timeouts,
//!   failed connections (refused, reset, DNS, TLS handshake), and SMTP 4xx replies. HTTP 4xx,
//!   SMTP 5xx and bad configuration (a bad URL, header or address, a missing password variable)
//!   fail at once; bad configuration fails before any try (`attempts` = 0).
//! - At least once, not exactly once: a try whose answer was lost (a timeout after the receiver
//!   took the alert) is tried again, so a receiver may see an alert twice.
//! - Nothing is recorded here: the caller records the returned [`Delivery`] (tries and outcome).
//! - Secrets stay out of errors and logs: the SMTP password (read from the environment variable
//!   the account names, never from the configuration) is never logged or returned, and
//!   webhook errors name only the receiver's host and port, not its URL (a Slack URL is a secret).
//!
//! Email security (`security` of an [`SmtpAccount`]): `"tls"` is implicit TLS (SMTPS, usually
//! port 465), `"starttls"` requires STARTTLS (usually port 587) and fails when the server does
//! not offer it, `"none"` is plain text, meant for a relay on loopback or a test server: with
//! `"none"` a username (so a password) is refused unless the host is loopback. Server
//! certificates are checked against the system's roots plus the account's `ca_file`. TLS is
//! rustls with the ring provider, chosen by lettre's and reqwest's features: nothing installs a
//! process-wide provider.

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use self::email::Email;
pub use self::http::HTTP_ATTEMPT_LIMIT;
use self::http::HttpPost;

mod email;
mod http;

/// An SMTP account, `[smtp_accounts.<id>]` in the service's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpAccount {
    pub host: String,
    pub port: u16,
    pub security: SmtpSecurity,
    pub username: Option<String>,
    /// The name of the environment variable that holds the password (never the password).
    pub password_env: Option<String>,
    pub from: String,
    /// A PEM file of extra roots to trust (a private relay's CA, a test's self-signed cert).
    pub ca_file: Option<PathBuf>,
    /// Bounds each try: connecting, each reply, and the whole exchange.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    10_000
}

/// How an SMTP connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpSecurity {
    /// STARTTLS required after connecting in plain text.
    Starttls,
    /// Implicit TLS from the first byte (SMTPS).
    Tls,
    /// Plain text: only for loopback or test relays.
    None,
}

/// Where an alert goes.
#[derive(Clone)]
pub enum Destination {
    Webhook {
        url: String,
        headers: BTreeMap<String, String>,
    },
    Slack {
        url: String,
    },
    Email {
        account: SmtpAccount,
        recipients: Vec<String>,
    },
}

impl fmt::Debug for Destination {
    /// URLs and header values may hold tokens: only their host and header names are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = |url: &str| {
            reqwest::Url::parse(url)
                .map(|u| authority(&u))
                .unwrap_or_default()
        };
        match self {
            Self::Webhook { url, headers } => f
                .debug_struct("Webhook")
                .field("host", &host(url))
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
            Self::Slack { url } => f.debug_struct("Slack").field("host", &host(url)).finish(),
            Self::Email {
                account,
                recipients,
            } => f
                .debug_struct("Email")
                .field("account", account)
                .field("recipients", recipients)
                .finish(),
        }
    }
}

/// A rendered alert. Its JSON form is the webhook body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    pub subject: String,
    pub message: String,
    pub monitor: serde_json::Value,
    pub trigger: serde_json::Value,
    pub timestamp: String,
}

/// How often and how patiently to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// Tries per delivery, the first included (0 counts as 1).
    pub attempts: u32,
    /// The wait after the first failed try, doubled after each further one.
    pub first_delay: Duration,
    /// The longest wait between two tries.
    pub max_delay: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: 4,
            first_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
        }
    }
}

impl Retry {
    /// The wait after failed try `attempt` (1-based): `first_delay × 2^(attempt−1)`, capped at
    /// `max_delay`, then drawn uniformly from its upper half (jitter).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        let full = self.first_delay.saturating_mul(factor).min(self.max_delay);
        let half = full / 2;
        half + full
            .saturating_sub(half)
            .mul_f64(rand::rng().random_range(0.0..=1.0))
    }
}

/// What one call of [`deliver`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Tries made (0 when the configuration was refused before any).
    pub attempts: u32,
    pub outcome: Result<(), DeliveryError>,
}

/// Why a delivery failed; the message says what failed, with the status or reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The channel's configuration is unusable (never tried again).
    #[error("{0}")]
    Config(String),
    /// The receiver refused the alert for good: HTTP 4xx but 429, SMTP 5xx.
    #[error("{0}")]
    Rejected(String),
    /// A failure that may pass: HTTP 5xx or 429, SMTP 4xx, timeouts, connections.
    #[error("{0}")]
    Transient(String),
}

impl DeliveryError {
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient(_))
    }
}

/// The HTTP client for webhooks and Slack: rustls (ring), the system's roots, 5 s to connect,
/// 10 s per request, at most 3 redirects, user agent `strata-alerting`. Build it once.
pub fn client() -> Result<reqwest::Client, DeliveryError> {
    reqwest::Client::builder()
        .use_rustls_tls()
        .user_agent("strata-alerting")
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::limited(3))
        .build()
        .map_err(|e| DeliveryError::Config(format!("alerting http client: {}", root_cause(&e))))
}

/// Delivers `alert` to `destination`, trying again on transient failures (see the module doc).
pub async fn deliver(
    client: &reqwest::Client,
    destination: &Destination,
    alert: &Alert,
    retry: &Retry,
) -> Delivery {
    deliver_with_env(client, destination, alert, retry, &|name| {
        std::env::var(name).ok()
    })
    .await
}

/// [`deliver`], reading the SMTP password variable through `env` (tests give their own).
pub(crate) async fn deliver_with_env(
    client: &reqwest::Client,
    destination: &Destination,
    alert: &Alert,
    retry: &Retry,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Delivery {
    let kind = destination.kind();
    let channel = match Channel::prepare(destination, alert, env) {
        Ok(channel) => channel,
        Err(error) => {
            tracing::warn!(channel = kind, %error, "alert not delivered: bad configuration");
            return Delivery {
                attempts: 0,
                outcome: Err(error),
            };
        }
    };
    let limit = retry.attempts.max(1);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let Err(failure) = channel.send(client).await else {
            tracing::info!(channel = kind, attempts, "alert delivered");
            return Delivery {
                attempts,
                outcome: Ok(()),
            };
        };
        let error = failure.error;
        if !error.is_transient() || attempts >= limit {
            tracing::warn!(channel = kind, attempts, %error, "alert not delivered");
            return Delivery {
                attempts,
                outcome: Err(error),
            };
        }
        let wait = match failure.retry_after {
            Some(asked) => asked.min(retry.max_delay),
            None => retry.backoff(attempts),
        };
        tracing::debug!(channel = kind, attempts, %error, ?wait, "alert to be sent again");
        tokio::time::sleep(wait).await;
    }
}

impl Destination {
    /// "webhook", "slack" or "email".
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Webhook { .. } => "webhook",
            Self::Slack { .. } => "slack",
            Self::Email { .. } => "email",
        }
    }
}

/// A failed try, with the receiver's `Retry-After` when it gave one.
struct Failure {
    error: DeliveryError,
    retry_after: Option<Duration>,
}

impl From<DeliveryError> for Failure {
    fn from(error: DeliveryError) -> Self {
        Self {
            error,
            retry_after: None,
        }
    }
}

/// A destination checked and its request built, ready to be sent as often as needed.
enum Channel {
    Http(HttpPost),
    Email(Email),
}

impl Channel {
    fn prepare(
        destination: &Destination,
        alert: &Alert,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<Self, DeliveryError> {
        match destination {
            Destination::Webhook { url, headers } => {
                let body = serde_json::to_vec(alert).map_err(|e| config("webhook body", &e))?;
                HttpPost::new("webhook", url, headers, body).map(Self::Http)
            }
            Destination::Slack { url } => {
                let text = format!("*{}*\n{}", alert.subject, alert.message);
                let body = serde_json::to_vec(&serde_json::json!({ "text": text }))
                    .map_err(|e| config("slack body", &e))?;
                HttpPost::new("slack", url, &BTreeMap::new(), body).map(Self::Http)
            }
            Destination::Email {
                account,
                recipients,
            } => Email::new(account, recipients, alert, env).map(Self::Email),
        }
    }

    async fn send(&self, client: &reqwest::Client) -> Result<(), Failure> {
        match self {
            Self::Http(post) => post.send(client).await,
            Self::Email(email) => email.send().await.map_err(Failure::from),
        }
    }
}

/// "connection refused to host:port", "connection reset by host:port", or else
/// "`what` connection to host:port failed: `innermost cause`".
fn connect_error(e: &(dyn StdError + 'static), what: &str, authority: &str) -> String {
    let mut source = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    return format!("connection refused to {authority}");
                }
                std::io::ErrorKind::ConnectionReset => {
                    return format!("connection reset by {authority}");
                }
                _ => {}
            }
        }
        source = err.source();
    }
    format!("{what} connection to {authority} failed: {}", root_cause(e))
}

/// The innermost error's message, starting in lowercase.
fn root_cause(e: &(dyn StdError + 'static)) -> String {
    let mut innermost = e;
    while let Some(source) = innermost.source() {
        innermost = source;
    }
    let text = innermost.to_string();
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_lowercase().chain(chars).collect())
        .unwrap_or_default()
}

fn config(what: &str, e: &(dyn StdError + 'static)) -> DeliveryError {
    DeliveryError::Config(format!("{what}: {}", root_cause(e)))
}

fn authority(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    url.port_or_known_default()
        .map_or_else(|| host.to_string(), |port| format!("{host}:{port}"))
}

#[cfg(test)]
mod tests;
