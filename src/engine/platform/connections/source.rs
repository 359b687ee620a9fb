//! A connection's source, opened: the datasets it holds and each as a DataFusion table, read in
//! place (filters, projections and limits go to the source where it can take them).
//!
//! Failures are classified as the specification's table of connection errors wants them: the
//! source refusing the credentials is a 401, refusing a right a 403, anything else (network,
//! host, the source's own error) a 500 whose message names the stage that failed.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use datafusion::{catalog::TableProvider, execution::SessionState};
use serde_json::{Map, Value};

use super::{
    amqp::Amqp,
    catalogue::{Connector, Family},
    files::Files,
    http_json::HttpJson,
    kafka::Kafka,
    messages::Messages,
    mqtt::Mqtt,
    nats::Nats,
    prometheus::PromApi,
    redis_keys::RedisKeys,
    search_engine::SearchEngine,
    wire::Wire,
};
use crate::{
    engine::sql_type_name as type_name,
    error::{Error, Result},
};

/// How long opening a source (its first connection) may take before it counts as failed.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// An opened source.
#[async_trait]
pub trait Source: Send + Sync {
    /// The names of the datasets it holds, sorted.
    async fn datasets(&self) -> Result<Vec<String>>;

    /// Dataset `name` as a table; `Error::DatasetNotFound` when the source has no such dataset.
    async fn table(&self, state: &SessionState, name: &str) -> Result<Arc<dyn TableProvider>>;

    /// The fields of dataset `name` and their types (as SQL answers name types, or as the
    /// source's mapping does).
    async fn describe(&self, state: &SessionState, name: &str) -> Result<Vec<(String, String)>> {
        let table = self.table(state, name).await?;
        Ok(table
            .schema()
            .fields()
            .iter()
            .map(|f| (f.name().clone(), type_name(f.data_type()).to_owned()))
            .collect())
    }

    /// The source as a search engine, when it is one (searches are forwarded to it).
    fn search_engine(&self) -> Option<&SearchEngine> {
        None
    }

    /// The source as messages read by a cursor, when it is one (imports read its topics,
    /// streams, queues or key sets that way).
    fn messages(&self) -> Option<&dyn Messages> {
        None
    }
}

/// Opens the source of a connection of type `connector` with its whole `config` (secrets
/// included). `key` names the connection uniquely on this node (its id and version).
pub async fn open(
    connector: &Connector,
    config: &Map<String, Value>,
    key: &str,
    runtime: &datafusion::execution::runtime_env::RuntimeEnv,
) -> Result<Arc<dyn Source>> {
    let opening = async {
        Ok::<Arc<dyn Source>, Error>(match connector.family {
            Family::Postgres | Family::Mysql | Family::Sqlite => {
                Arc::new(Wire::open(connector, config).await?)
            }
            Family::ObjectStore => Arc::new(Files::open(config, key, runtime).await?),
            Family::SearchEngine => Arc::new(SearchEngine::open(config, connector.service).await?),
            Family::HttpJson => Arc::new(HttpJson::open(config)?),
            Family::Kafka => Arc::new(Kafka::open(config).await?),
            Family::Prometheus => Arc::new(PromApi::open(config).await?),
            Family::Nats => Arc::new(Nats::open(config).await?),
            Family::Redis => Arc::new(RedisKeys::open(config).await?),
            Family::Amqp => Arc::new(Amqp::open(connector, config).await?),
            Family::Mqtt => Arc::new(Mqtt::open(connector, config, key).await?),
        })
    };
    match tokio::time::timeout(OPEN_TIMEOUT, opening).await {
        Ok(opened) => opened,
        Err(_) => Err(Error::SourceFailed(format!(
            "connect: the source did not answer within {} s",
            OPEN_TIMEOUT.as_secs()
        ))),
    }
}

/// The text of an error and of every error beneath it, each said once.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(error) = next {
        let text = error.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = error.source();
    }
    parts.join(": ")
}

/// What a failure of the source at `stage` means to the client (see the module documentation).
pub fn failure(stage: &str, error: &(dyn std::error::Error + 'static)) -> Error {
    failure_text(stage, &chain(error))
}

/// What an HTTP source's refusal means: 401 the credentials, 403 the right; `None` for any
/// other status.
pub fn refused(stage: &str, status: reqwest::StatusCode) -> Option<Error> {
    match status.as_u16() {
        401 => Some(Error::NotAuthenticated(format!(
            "{stage}: the source refused the credentials ({status})"
        ))),
        403 => Some(Error::Forbidden(format!(
            "{stage}: the source refused the right ({status})"
        ))),
        _ => None,
    }
}

/// [`failure`] of an error already turned to text.
pub fn failure_text(stage: &str, text: &str) -> Error {
    let lower = text.to_ascii_lowercase();
    let refused_credentials = [
        "password authentication failed",
        "authentication failed",
        "access denied for user",
        "no password supplied",
        "invalid authorization specification",
        "invalidaccesskeyid",
        "signaturedoesnotmatch",
    ];
    let refused_right = [
        "permission denied",
        "command denied",
        "access denied to database",
        "accessdenied",
        "insufficient privilege",
        "lack rights",
    ];
    if refused_credentials.iter().any(|p| lower.contains(p)) {
        return Error::NotAuthenticated(format!(
            "{stage}: the source refused the credentials: {text}"
        ));
    }
    if refused_right.iter().any(|p| lower.contains(p)) {
        return Error::Forbidden(format!("{stage}: the source refused the right: {text}"));
    }
    Error::SourceFailed(format!("{stage}: {text}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn failures_are_classified_by_what_the_source_said() {
        let code = |text: &str| failure_text("connect", text).code();
        assert_eq!(
            code("db error: FATAL: password authentication failed for user \"x\""),
            ErrorCode::Unauthorized
        );
        assert_eq!(
            code("Access denied for user 'x'@'localhost' (using password: YES)"),
            ErrorCode::Unauthorized
        );
        assert_eq!(
            code("ERROR: permission denied for table secrets"),
            ErrorCode::Forbidden
        );
        assert_eq!(
            code("error connecting to server: Connection refused (os error 111)"),
            ErrorCode::SourceFailed
        );
        let message = failure_text("list tables", "boom").to_string();
        assert_eq!(message, "list tables: boom");
    }
}
