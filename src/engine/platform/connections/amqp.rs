//! AMQP 0-9-1 sources (RabbitMQ, Amazon MQ for RabbitMQ, CloudAMQP, LavinMQ): a dataset is a
//! queue. Reading a queue consumes it, so a queue is imported (PUT /import/<type>), never
//! queried in place: [`Source::table`] answers 400 saying so.
//!
//! The config: `url` (`amqp://host:port/vhost`, the vhost percent-encoded, `%2f` for `/`; no
//! vhost or an empty one is `/`), `username` and `password` (sealed), never in the URL, and
//! `queues`, the comma-separated queues the connection lists as its datasets (AMQP has no way
//! to list queues): those that exist are listed. Another queue of the vhost is imported all
//! the same when an import names it.
//!
//! An import consumes the queue on a channel of its own with a prefetch of one batch and manual
//! acknowledgements: a batch is written to the dataset, its cursor recorded, then its last
//! delivery tag acknowledged with `multiple` (the broker drops the batch's messages). A stop
//! anywhere before the acknowledgement (a crash, a cancel, a lost connection) leaves the
//! messages to the broker, which delivers them again, marked redelivered. Records are named by
//! the message's `message_id` property when the publisher set one, else by a hash of the queue,
//! the exchange and routing key, the properties and headers (but `x-delivery-count`, which
//! quorum queues change at each delivery) and the body: a message delivered again replaces
//! itself. Two identical messages published without a `message_id` are one record (the
//! second replaces the first): only a redelivered message can be a copy of one already read,
//! so a publisher that sends the same message twice on purpose must set `message_id`.
//!
//! Columns of a record: `_routing_key`, `_exchange`, `_timestamp` (the `timestamp` property in
//! milliseconds since the epoch, absent when the publisher set none), `_redelivered`,
//! `_message_id` (absent when unset), and `value`, the body as text (a JSON object's fields
//! become columns). A queue has no end: a job that does not follow ends when no message came
//! for the read's wait (the queue was empty); a following job waits for more. The cursor is
//! `{"acknowledged": <messages acknowledged by the job>}`, for the job's progress only: the
//! broker keeps the place (a message written but not acknowledged before a crash is counted
//! again when it comes back).

use std::{
    collections::BTreeMap,
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use arrow::datatypes::DataType;
use async_trait::async_trait;
use datafusion::{catalog::TableProvider, execution::SessionState};
use futures::StreamExt;
use lapin::{
    BasicProperties, Channel, Connection, ConnectionProperties, Consumer, ErrorKind,
    message::Delivery,
    options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions},
    types::{AMQPValue, FieldTable},
    uri::{AMQPScheme, AMQPUri},
};
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

use super::{
    catalogue::Connector,
    messages::{Batch, Messages, Reader, content_id},
    source::{Source, chain},
};
use crate::{
    engine::sql_type_name,
    error::{Error, Result},
};

/// How long one request to the broker (a channel, a declare, a consume) may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// How long a read waits for one more message once a batch has begun.
const MORE_WAIT: Duration = Duration::from_millis(100);

/// How long a read gathers a batch at most once its first message came.
const GATHER_LIMIT: Duration = Duration::from_secs(2);

/// The AMQP reply code of ACCESS_REFUSED (a login refused, or a right on a queue).
const ACCESS_REFUSED: u16 = 403;

/// The AMQP reply code of NOT_FOUND (no such queue).
const NOT_FOUND: u16 = 404;

/// The AMQP reply code of NOT_ALLOWED (a vhost the user may not open, or that is not there).
const NOT_ALLOWED: u16 = 530;

/// The header quorum queues set to the count of a message's deliveries: left out of its id.
const DELIVERY_COUNT: &str = "x-delivery-count";

/// An opened AMQP broker: where it is, the queues the connection lists, and one connection to
/// it (opened again when it was lost), each reader on a channel of its own.
pub struct Amqp {
    /// The broker's address with the credentials and vhost to use.
    uri: AMQPUri,
    /// `<service> at host:port` (RabbitMQ at 127.0.0.1:5672), for messages.
    address: String,
    /// The configured queues, in the order given, without duplicates.
    queues: Vec<String>,
    /// The connection, while it is open.
    connection: Mutex<Option<Arc<Connection>>>,
}

/// Where a failure happened, for its classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Opening the connection: ACCESS_REFUSED is the login refused.
    Connect,
    /// Any later request: ACCESS_REFUSED is a right refused.
    Request,
}

/// What a failure of the broker at `stage` (its text `what`) means to the client: credentials
/// refused -> 401, a right or a vhost refused -> 403, else a 500 naming the stage.
fn failed(stage: Stage, what: &str, error: &lapin::Error) -> Error {
    let code = match error.kind() {
        ErrorKind::ProtocolError(amqp) => Some(amqp.get_id()),
        _ => None,
    };
    let text = chain(error);
    match code {
        Some(ACCESS_REFUSED) if stage == Stage::Connect => Error::NotAuthenticated(format!(
            "{what}: the source refused the credentials: {text}"
        )),
        Some(ACCESS_REFUSED | NOT_ALLOWED) => {
            Error::Forbidden(format!("{what}: the source refused the right: {text}"))
        }
        _ => Error::SourceFailed(format!("{what}: {text}")),
    }
}

/// `request` to the broker, failed at `what` when it errs or takes longer than [`TIMEOUT`].
async fn asked<T>(
    what: &str,
    request: impl Future<Output = lapin::Result<T>>,
) -> Result<lapin::Result<T>> {
    tokio::time::timeout(TIMEOUT, request).await.map_err(|_| {
        Error::SourceFailed(format!(
            "{what}: the broker did not answer within {} s",
            TIMEOUT.as_secs()
        ))
    })
}

/// The queue names of config `queues`: separated by commas, trimmed, each once.
fn queue_names(queues: Option<&str>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in queues.unwrap_or_default().split(',').map(str::trim) {
        if !name.is_empty() && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// The broker's address from config `url` with the credentials beside it; an empty vhost is
/// `/`. A 400 for a URL that is no AMQP URL or asks for TLS (not built in yet).
fn uri_of(config: &Map<String, Value>) -> Result<AMQPUri> {
    let text = |key: &str| config.get(key).and_then(Value::as_str);
    let url = text("url").unwrap_or_default();
    let mut uri: AMQPUri = url
        .parse()
        .map_err(|e| Error::BadRequest(format!("url {url:?} is not an AMQP URL: {e}")))?;
    if uri.scheme == AMQPScheme::AMQPS {
        return Err(Error::BadRequest(
            "url: amqps:// (AMQP over TLS) is not supported by this build yet; use amqp://"
                .to_owned(),
        ));
    }
    if uri.vhost.is_empty() {
        uri.vhost = "/".to_owned();
    }
    // No default account: without a username the broker refuses the login, and says so.
    uri.authority.userinfo.username = text("username").unwrap_or_default().to_owned();
    uri.authority.userinfo.password = text("password").unwrap_or_default().to_owned();
    Ok(uri)
}

impl Amqp {
    /// Opens the source: connects and logs in to the vhost of the URL.
    pub async fn open(connector: &Connector, config: &Map<String, Value>) -> Result<Amqp> {
        let uri = uri_of(config)?;
        let address = format!(
            "{} at {}:{}",
            connector.name, uri.authority.host, uri.authority.port
        );
        let amqp = Amqp {
            uri,
            address,
            queues: queue_names(config.get("queues").and_then(Value::as_str)),
            connection: Mutex::new(None),
        };
        amqp.connection().await?;
        Ok(amqp)
    }

    /// The open connection, opened anew when there is none or it was lost.
    async fn connection(&self) -> Result<Arc<Connection>> {
        let mut held = self.connection.lock().await;
        if let Some(connection) = held.as_ref()
            && connection.status().connected()
        {
            return Ok(connection.clone());
        }
        *held = None;
        let userinfo = &self.uri.authority.userinfo;
        let what = format!(
            "connect to {} (vhost {:?}) as {:?}",
            self.address, self.uri.vhost, userinfo.username
        );
        let properties = ConnectionProperties::default().with_connection_name("strata".into());
        let connection = asked(&what, Connection::connect_uri(self.uri.clone(), properties))
            .await?
            .map_err(|error| {
                let failure = failed(Stage::Connect, &what, &error);
                match failure {
                    Error::NotAuthenticated(text) if userinfo.username.is_empty() => {
                        Error::NotAuthenticated(format!("{text} (no username was given)"))
                    }
                    other => other,
                }
            })?;
        let connection = Arc::new(connection);
        *held = Some(connection.clone());
        Ok(connection)
    }

    /// A new channel on the connection.
    async fn channel(&self, what: &str) -> Result<Channel> {
        let connection = self.connection().await?;
        asked(what, connection.create_channel())
            .await?
            .map_err(|error| failed(Stage::Request, what, &error))
    }

    /// Whether queue `name` exists, and the channel the check left open when it does (a
    /// passive declare of a missing queue closes its channel, so each check has its own).
    async fn queue(&self, name: &str) -> Result<Option<Channel>> {
        let what = format!("check queue {name} on {}", self.address);
        let channel = self.channel(&what).await?;
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declared = asked(
            &what,
            channel.queue_declare(name.into(), options, FieldTable::default()),
        )
        .await?;
        match declared {
            Ok(_) => Ok(Some(channel)),
            Err(error) => match error.kind() {
                ErrorKind::ProtocolError(amqp) if amqp.get_id() == NOT_FOUND => Ok(None),
                _ => Err(failed(Stage::Request, &what, &error)),
            },
        }
    }

    /// A channel on which queue `name` exists; `Error::DatasetNotFound` when it does not.
    async fn existing(&self, name: &str) -> Result<Channel> {
        self.queue(name)
            .await?
            .ok_or_else(|| Error::DatasetNotFound(name.to_owned()))
    }
}

/// The fields of an AMQP value as JSON, for ids (the same value gives the same text).
fn headers_json(headers: &FieldTable) -> Vec<u8> {
    let kept: BTreeMap<&str, &AMQPValue> = headers
        .inner()
        .iter()
        .filter(|(name, _)| name.as_str() != DELIVERY_COUNT)
        .map(|(name, value)| (name.as_str(), value))
        .collect();
    serde_json::to_vec(&kept).unwrap_or_default()
}

/// The properties a publisher sets, but the headers, as JSON, for ids.
fn properties_json(properties: &BasicProperties) -> Vec<u8> {
    let text =
        |value: &Option<lapin::types::ShortString>| value.as_ref().map(|v| v.as_str().to_owned());
    serde_json::to_vec(&json!({
        "content_type": text(properties.content_type()),
        "content_encoding": text(properties.content_encoding()),
        "correlation_id": text(properties.correlation_id()),
        "reply_to": text(properties.reply_to()),
        "timestamp": properties.timestamp(),
        "type": text(properties.kind()),
        "user_id": text(properties.user_id()),
        "app_id": text(properties.app_id()),
    }))
    .unwrap_or_default()
}

/// The record id of `delivery` read from `queue`: its `message_id`, else a hash of what it is
/// made of (see the module documentation).
fn record_id(queue: &str, delivery: &Delivery) -> String {
    if let Some(id) = delivery.properties.message_id()
        && !id.as_str().is_empty()
    {
        return id.as_str().to_owned();
    }
    let headers = delivery
        .properties
        .headers()
        .as_ref()
        .map(headers_json)
        .unwrap_or_default();
    content_id(&[
        queue.as_bytes(),
        delivery.exchange.as_str().as_bytes(),
        delivery.routing_key.as_str().as_bytes(),
        &properties_json(&delivery.properties),
        &headers,
        &delivery.data,
    ])
}

/// `delivery` from `queue` as a row of the queue's records (see the module documentation),
/// with its `_id`.
fn row_of(queue: &str, delivery: &Delivery) -> Value {
    let mut row = Map::new();
    row.insert("_routing_key".into(), json!(delivery.routing_key.as_str()));
    row.insert("_exchange".into(), json!(delivery.exchange.as_str()));
    if let Some(seconds) = *delivery.properties.timestamp() {
        row.insert(
            "_timestamp".into(),
            json!(seconds.saturating_mul(1000) as i64),
        );
    }
    row.insert("_redelivered".into(), json!(delivery.redelivered));
    if let Some(id) = delivery.properties.message_id() {
        row.insert("_message_id".into(), json!(id.as_str()));
    }
    row.insert(
        "value".into(),
        json!(String::from_utf8_lossy(&delivery.data)),
    );
    row.insert("_id".into(), json!(record_id(queue, delivery)));
    Value::Object(row)
}

/// `rows` with one row of each `_id`, the last (a batch names a record once: the same message
/// delivered twice in a batch, or two identical messages without a `message_id`).
fn last_of_each(rows: Vec<Value>) -> Vec<Value> {
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<Value> = rows
        .into_iter()
        .rev()
        .filter(|row| seen.insert(row["_id"].as_str().unwrap_or_default().to_owned()))
        .collect();
    kept.reverse();
    kept
}

/// The columns a queue's records always have, and their types.
fn place_columns() -> Vec<(&'static str, DataType)> {
    vec![
        ("_routing_key", DataType::Utf8),
        ("_exchange", DataType::Utf8),
        ("_timestamp", DataType::Int64),
        ("_redelivered", DataType::Boolean),
        ("_message_id", DataType::Utf8),
        ("value", DataType::Utf8),
    ]
}

#[async_trait]
impl Source for Amqp {
    async fn datasets(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for name in &self.queues {
            if self.queue(name).await?.is_some() {
                names.push(name.clone());
            }
        }
        names.sort();
        Ok(names)
    }

    async fn table(&self, _state: &SessionState, name: &str) -> Result<Arc<dyn TableProvider>> {
        self.existing(name).await?;
        Err(Error::BadRequest(format!(
            "queue {name:?} cannot be queried in place: an AMQP queue is consumed by reading \
             it, so it is imported (PUT /import/<type> with source.queue), not queried"
        )))
    }

    /// The columns every record of the queue has (its body's fields are known only by reading,
    /// which consumes it).
    async fn describe(&self, _state: &SessionState, name: &str) -> Result<Vec<(String, String)>> {
        self.existing(name).await?;
        Ok(place_columns()
            .into_iter()
            .map(|(name, kind)| (name.to_owned(), sql_type_name(&kind).to_owned()))
            .collect())
    }

    fn messages(&self) -> Option<&dyn Messages> {
        Some(self)
    }
}

#[async_trait]
impl Messages for Amqp {
    fn prefix(&self) -> &'static str {
        "amqp"
    }

    async fn reader(&self, name: &str, job: &str, cursor: &Value) -> Result<Box<dyn Reader + '_>> {
        let channel = self.existing(name).await?;
        Ok(Box::new(QueueReader {
            queue: name.to_owned(),
            address: self.address.clone(),
            tag: format!("strata-{job}"),
            channel,
            consumer: None,
            pending: Vec::new(),
            unacknowledged: None,
            acknowledged: cursor["acknowledged"].as_u64().unwrap_or(0),
            cursor: cursor.clone(),
        }))
    }
}

/// An import's consumption of a queue, on a channel of its own (closed when the reader is
/// dropped: the broker then delivers again what was not acknowledged).
struct QueueReader {
    queue: String,
    /// The broker's name and `host:port`, for messages.
    address: String,
    /// The consumer tag: `strata-<job>`.
    tag: String,
    channel: Channel,
    /// The consumer, from the first read on (its prefetch is the first read's batch size).
    consumer: Option<Consumer>,
    /// Deliveries taken for the batch being gathered (kept here should the read be dropped).
    pending: Vec<Delivery>,
    /// The delivery tag of the last batch's last message, until it is acknowledged, and the
    /// batch's size.
    unacknowledged: Option<(u64, u64)>,
    /// Messages the job had acknowledged.
    acknowledged: u64,
    /// The cursor as the job last recorded it.
    cursor: Value,
}

impl QueueReader {
    /// The text naming the read of the queue, for errors.
    fn what(&self) -> String {
        format!("read queue {} on {}", self.queue, self.address)
    }

    /// The consumer, started with a prefetch of `max` (at least one batch) the first time.
    async fn consumer(&mut self, max: usize) -> Result<&mut Consumer> {
        if self.consumer.is_none() {
            let what = self.what();
            let prefetch = u16::try_from(max.max(1)).unwrap_or(u16::MAX);
            asked(
                &what,
                self.channel.basic_qos(prefetch, BasicQosOptions::default()),
            )
            .await?
            .map_err(|error| failed(Stage::Request, &what, &error))?;
            let consumer = asked(
                &what,
                self.channel.basic_consume(
                    self.queue.as_str().into(),
                    self.tag.as_str().into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                ),
            )
            .await?
            .map_err(|error| match error.kind() {
                ErrorKind::ProtocolError(amqp) if amqp.get_id() == NOT_FOUND => {
                    Error::DatasetNotFound(self.queue.clone())
                }
                _ => failed(Stage::Request, &what, &error),
            })?;
            self.consumer = Some(consumer);
        }
        self.consumer
            .as_mut()
            .ok_or_else(|| Error::Internal("an AMQP consumer was not started".to_owned()))
    }
}

#[async_trait]
impl Reader for QueueReader {
    async fn next(&mut self, max: usize, wait: Duration) -> Result<Batch> {
        let max = max.max(1);
        let what = self.what();
        let started = Instant::now();
        let mut first: Option<Instant> = None;
        while self.pending.len() < max {
            let patience = match first {
                None => wait.saturating_sub(started.elapsed()),
                Some(at) if at.elapsed() >= GATHER_LIMIT => Duration::ZERO,
                Some(_) => MORE_WAIT,
            };
            if patience.is_zero() {
                break;
            }
            let consumer = self.consumer(max).await?;
            let delivery = match tokio::time::timeout(patience, consumer.next()).await {
                Err(_) => break,
                Ok(Some(delivery)) => delivery,
                Ok(None) => {
                    return Err(Error::SourceFailed(
                        match self.channel.status().connected() {
                            true => format!(
                                "{what}: the broker cancelled the consumer (was the queue deleted?)"
                            ),
                            false => format!("{what}: the connection to the broker was lost"),
                        },
                    ));
                }
            };
            let delivery = delivery.map_err(|error| failed(Stage::Request, &what, &error))?;
            first.get_or_insert_with(Instant::now);
            self.pending.push(delivery);
        }
        let deliveries = std::mem::take(&mut self.pending);
        let rows = last_of_each(deliveries.iter().map(|d| row_of(&self.queue, d)).collect());
        if let Some(last) = deliveries.last() {
            self.unacknowledged = Some((last.delivery_tag, deliveries.len() as u64));
        }
        let taken = self.unacknowledged.map_or(0, |(_, count)| count);
        let cursor = match self.acknowledged + taken {
            0 => self.cursor.clone(),
            count => json!({"acknowledged": count}),
        };
        self.cursor = cursor.clone();
        Ok(Batch {
            at_end: rows.is_empty(),
            rows,
            cursor,
        })
    }

    async fn acknowledge(&mut self) -> Result<()> {
        let Some((tag, count)) = self.unacknowledged else {
            return Ok(());
        };
        let what = format!(
            "acknowledge messages of queue {} on {}",
            self.queue, self.address
        );
        let options = BasicAckOptions { multiple: true };
        asked(&what, self.channel.basic_ack(tag, options))
            .await?
            .map_err(|error| failed(Stage::Request, &what, &error))?;
        self.unacknowledged = None;
        self.acknowledged += count;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use lapin::{
        protocol::{AMQPError, AMQPErrorKind, AMQPHardError, AMQPSoftError},
        types::ShortString,
    };

    use super::*;
    use crate::error::ErrorCode;

    fn delivery(body: &str, properties: BasicProperties) -> Delivery {
        let mut delivery = Delivery::mock(
            7,
            "events".into(),
            "orders.created".into(),
            false,
            body.as_bytes().to_vec(),
        );
        delivery.properties = properties;
        delivery
    }

    fn protocol(kind: AMQPErrorKind, text: &str) -> lapin::Error {
        ErrorKind::ProtocolError(AMQPError::new(kind, text.into())).into()
    }

    #[test]
    fn queues_are_listed_once_each() {
        assert_eq!(
            queue_names(Some(" orders, clicks,,orders ,")),
            vec!["orders".to_owned(), "clicks".to_owned()]
        );
        assert!(queue_names(None).is_empty());
    }

    #[test]
    fn the_url_takes_the_credentials_beside_it() {
        let config = |url: &str| {
            json!({"url": url, "username": "ann", "password": "pw"})
                .as_object()
                .cloned()
                .unwrap()
        };
        let uri = uri_of(&config("amqp://127.0.0.1:5672/%2f")).unwrap();
        assert_eq!(uri.vhost, "/");
        assert_eq!(uri.authority.userinfo.username, "ann");
        assert_eq!(uri.authority.userinfo.password, "pw");
        assert_eq!(uri_of(&config("amqp://h:5673/")).unwrap().vhost, "/");
        assert_eq!(uri_of(&config("amqp://h/sales")).unwrap().vhost, "sales");
        assert_eq!(
            uri_of(&config("amqp://h/sales")).unwrap().authority.port,
            5672
        );
        let tls = uri_of(&config("amqps://h:5671/"));
        assert_eq!(tls.err().map(|e| e.code()), Some(ErrorCode::BadRequest));
        let none = json!({"url": "amqp://h"}).as_object().cloned().unwrap();
        assert_eq!(uri_of(&none).unwrap().authority.userinfo.username, "");
    }

    #[test]
    fn refusals_are_told_apart() {
        let login = protocol(
            AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED),
            "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN",
        );
        assert_eq!(
            failed(Stage::Connect, "connect", &login).code(),
            ErrorCode::Unauthorized
        );
        assert_eq!(
            failed(Stage::Request, "read", &login).code(),
            ErrorCode::Forbidden
        );
        let vhost = protocol(
            AMQPErrorKind::Hard(AMQPHardError::NOTALLOWED),
            "NOT_ALLOWED - access to vhost 'x' refused for user 'ann'",
        );
        let refused = failed(Stage::Connect, "connect", &vhost);
        assert_eq!(refused.code(), ErrorCode::Forbidden);
        assert!(refused.to_string().contains("the source refused the right"));
        let io: lapin::Error =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused").into();
        let down = failed(Stage::Connect, "connect to 127.0.0.1:1", &io);
        assert_eq!(down.code(), ErrorCode::SourceFailed);
        assert!(down.to_string().starts_with("connect to 127.0.0.1:1: "));
    }

    #[test]
    fn a_message_is_named_by_its_message_id_else_by_what_it_is() {
        let named = delivery(
            "{\"n\": 1}",
            BasicProperties::default().with_message_id("m-1".into()),
        );
        assert_eq!(record_id("q", &named), "m-1");
        let plain = delivery("{\"n\": 1}", BasicProperties::default());
        let again = delivery("{\"n\": 1}", BasicProperties::default());
        assert_eq!(record_id("q", &plain), record_id("q", &again));
        assert_ne!(record_id("q", &plain), record_id("other", &plain));
        let other = delivery("{\"n\": 2}", BasicProperties::default());
        assert_ne!(record_id("q", &plain), record_id("q", &other));
        // A quorum queue's delivery count changes nothing; another header does.
        let header = |name: &str, value: i64| {
            let mut headers = FieldTable::default();
            headers.insert(ShortString::from(name), AMQPValue::LongLongInt(value));
            delivery(
                "{\"n\": 1}",
                BasicProperties::default().with_headers(headers),
            )
        };
        assert_eq!(
            record_id("q", &header(DELIVERY_COUNT, 1)),
            record_id("q", &header(DELIVERY_COUNT, 2))
        );
        assert_ne!(
            record_id("q", &header("tenant", 1)),
            record_id("q", &header("tenant", 2))
        );
    }

    #[test]
    fn a_batch_names_each_record_once() {
        let rows = vec![
            json!({"_id": "a", "value": "1"}),
            json!({"_id": "b", "value": "2"}),
            json!({"_id": "a", "value": "3"}),
        ];
        assert_eq!(
            last_of_each(rows),
            vec![
                json!({"_id": "b", "value": "2"}),
                json!({"_id": "a", "value": "3"})
            ]
        );
    }

    #[test]
    fn a_delivery_is_a_row_with_its_place() {
        let mut redelivered = delivery(
            "{\"n\": 1}",
            BasicProperties::default()
                .with_message_id("m-1".into())
                .with_timestamp(1_700_000_000),
        );
        redelivered.redelivered = true;
        let row = row_of("q", &redelivered);
        assert_eq!(row["_routing_key"], "orders.created");
        assert_eq!(row["_exchange"], "events");
        assert_eq!(row["_timestamp"], 1_700_000_000_000_i64);
        assert_eq!(row["_redelivered"], true);
        assert_eq!(row["_message_id"], "m-1");
        assert_eq!(row["value"], "{\"n\": 1}");
        assert_eq!(row["_id"], "m-1");
        let bare = row_of("q", &delivery("plain", BasicProperties::default()));
        assert!(bare.get("_timestamp").is_none());
        assert!(bare.get("_message_id").is_none());
        assert_eq!(bare["value"], "plain");
        assert_eq!(bare["_id"].as_str().map(str::len), Some(32));
    }
}
