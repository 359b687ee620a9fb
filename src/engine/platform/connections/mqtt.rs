//! MQTT brokers (Mosquitto, EMQX, HiveMQ, VerneMQ, NanoMQ), spoken to as MQTT 3.1.1 through
//! rumqttc: a dataset is a topic filter (`plant/+/temperature`, `site-1/#`).
//!
//! A broker keeps no history of a topic, only each topic's retained message and what it queues
//! for a persistent session: nothing is queried in place (a table is a 400), a filter is imported
//! or followed by an import job. The datasets a connection lists are the topics of the retained
//! messages the broker sends at a subscription to `#` within a short window (none where the
//! broker refuses `#` or holds no retained message).
//!
//! An import job reads a filter in a persistent session of its own (client id
//! `<client_id or "strata">-<job id>`, `clean_session = false`), subscribed with QoS 1 and with
//! manual acknowledgements: a batch's messages are acknowledged, in the order they arrived,
//! once the batch is written. The broker sends again what was not acknowledged when the job
//! resumes (with `dup` set) and queues what arrives while the job is stopped (Mosquitto: up to
//! its `max_queued_messages`; its `max_inflight_messages`, 20 by default, caps a batch). The
//! cursor is null: the broker keeps the session. Messages published with QoS 0 are delivered
//! with QoS 0 and are not sent again. A job that is over (it does not follow and a read found
//! nothing, or it was cancelled or removed) ends its session on the broker (a connection with
//! `clean_session = true`); a job whose node stops disconnects cleanly and its session stays
//! on the broker for the node that takes the job up again.
//!
//! Columns: `_topic`, `_qos`, `_retained`, `_timestamp` (arrival on this node, milliseconds
//! since the epoch) and `value` (the payload as text; JSON objects become columns). Record ids:
//! the `id` or `_id` a JSON payload gives itself, else a hash of topic and payload (identical
//! payloads on one topic without an id are one record); a retained message (sent again at every
//! subscription, the topic's current state) is named by its topic alone, so it replaces the
//! topic's previous state.

use std::{
    collections::{BTreeSet, VecDeque},
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use async_trait::async_trait;
use datafusion::{catalog::TableProvider, execution::SessionState};
use rumqttc::{
    AsyncClient, ConnectReturnCode, ConnectionError, Event, EventLoop, MqttOptions, Outgoing,
    Packet, Publish, QoS, SubscribeReasonCode, TlsConfiguration, Transport,
};
use rustls_pki_types::{CertificateDer, pem::PemObject};
use serde_json::{Map, Value, json};
use tokio_rustls::rustls::{ClientConfig, RootCertStore, crypto::ring};

use super::{
    catalogue::Connector,
    config::text,
    messages::{Batch, Messages, Reader, content_id, payload_id},
    source::{Source, failure},
};
use crate::error::{Error, Result};

/// The port of `mqtt://` URLs that name none.
const PORT: u16 = 1883;

/// The port of `mqtts://` URLs that name none.
const TLS_PORT: u16 = 8883;

/// The largest packet taken from a broker (rumqttc's default, 10 KiB, is far below what
/// brokers accept: Mosquitto's own limit is 256 MiB).
const MAX_INCOMING_PACKET: usize = 16 * 1024 * 1024;

/// The largest packet sent to a broker (subscriptions and acknowledgements only).
const MAX_OUTGOING_PACKET: usize = 1024 * 1024;

/// The keep-alive interval the sessions ask for.
const KEEP_ALIVE: Duration = Duration::from_secs(30);

/// Requests (subscriptions, acknowledgements) the client queues before they are sent.
const REQUESTS: usize = 64;

/// How long one step with the broker (a subscription, sending a batch's acknowledgements) may
/// take.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a read goes on waiting for more once a message arrived.
const LINGER: Duration = Duration::from_millis(20);

/// How long a session's clean disconnection may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The listing of retained topics ends after this long without a new one...
const LISTING_QUIET: Duration = Duration::from_millis(300);

/// ... or after this long in all ...
const LISTING_TIMEOUT: Duration = Duration::from_secs(2);

/// ... or at this many topics.
const MAX_LISTED: usize = 10_000;

/// Where the system's trusted certificates are, by distribution (after `SSL_CERT_FILE`).
const ROOT_FILES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// An opened MQTT broker.
pub struct Mqtt {
    /// How to reach it.
    broker: Broker,
}

/// How to reach a broker: its address, TLS, credentials, and the prefix of client ids.
#[derive(Clone)]
struct Broker {
    /// The host as the URL names it (an IPv6 address in brackets).
    host: String,
    /// The port the URL names, else 1883 (`mqtt://`) or 8883 (`mqtts://`).
    port: u16,
    /// The rustls client configuration of `mqtts://` (the ring provider), none for `mqtt://`.
    tls: Option<Arc<ClientConfig>>,
    /// User name and password, when given.
    credentials: Option<(String, String)>,
    /// The prefix of the client ids (`client_id`, else `strata`).
    client_prefix: String,
}

/// Milliseconds since the epoch, now.
fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A TLS client configuration with the ring provider, trusting the system's certificates
/// (`SSL_CERT_FILE`, else the distribution's bundle).
fn tls_config() -> Result<Arc<ClientConfig>> {
    let stage = "connect: TLS";
    let file = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .or_else(|| {
            ROOT_FILES
                .iter()
                .map(PathBuf::from)
                .find(|path| path.is_file())
        })
        .ok_or_else(|| {
            Error::SourceFailed(format!(
                "{stage}: no trusted certificates found (set SSL_CERT_FILE or install the \
                 system's CA bundle)"
            ))
        })?;
    let mut roots = RootCertStore::empty();
    let certificates = CertificateDer::pem_file_iter(&file)
        .map_err(|e| {
            Error::SourceFailed(format!(
                "{stage}: cannot read certificates from {}: {e}",
                file.display()
            ))
        })?
        .filter_map(|certificate| certificate.ok());
    roots.add_parsable_certificates(certificates);
    if roots.is_empty() {
        return Err(Error::SourceFailed(format!(
            "{stage}: {} holds no certificate",
            file.display()
        )));
    }
    let config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::SourceFailed(format!("{stage}: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The text of a CONNACK refusal.
fn refusal(code: ConnectReturnCode) -> &'static str {
    match code {
        ConnectReturnCode::Success => "accepted",
        ConnectReturnCode::RefusedProtocolVersion => "unacceptable protocol version (CONNACK 1)",
        ConnectReturnCode::BadClientId => "client id rejected (CONNACK 2)",
        ConnectReturnCode::ServiceUnavailable => "server unavailable (CONNACK 3)",
        ConnectReturnCode::BadUserNamePassword => "bad user name or password (CONNACK 4)",
        ConnectReturnCode::NotAuthorized => "not authorized (CONNACK 5)",
    }
}

/// What a failed connection to `address` means: a refusal of the credentials is a 401 (MQTT
/// 3.1.1 brokers, Mosquitto among them, answer a wrong password with "not authorized"); any
/// other failure a 500 naming the stage.
fn connect_failed(address: &str, error: ConnectionError) -> Error {
    let stage = format!("connect to {address}");
    match error {
        ConnectionError::ConnectionRefused(
            code @ (ConnectReturnCode::BadUserNamePassword | ConnectReturnCode::NotAuthorized),
        ) => Error::NotAuthenticated(format!(
            "{stage}: the source refused the credentials: {}",
            refusal(code)
        )),
        ConnectionError::ConnectionRefused(code) => Error::SourceFailed(format!(
            "{stage}: the broker refused the connection: {}",
            refusal(code)
        )),
        ConnectionError::NetworkTimeout => {
            Error::SourceFailed(format!("{stage}: the broker did not answer in time"))
        }
        other => failure(&stage, &other),
    }
}

impl Broker {
    /// The broker of `config`: `url` (`mqtt://` or `mqtts://host[:port]`), `username`,
    /// `password`, `client_id`.
    fn of(config: &Map<String, Value>) -> Result<Broker> {
        let url = text(config, "url").unwrap_or_default();
        let (tls, rest) = match url.split_once("://") {
            Some(("mqtt", rest)) => (false, rest),
            Some(("mqtts", rest)) => (true, rest),
            _ => {
                return Err(Error::BadRequest(format!(
                    "url {url:?} must be an mqtt:// or mqtts:// URL"
                )));
            }
        };
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        let default_port = if tls { TLS_PORT } else { PORT };
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => {
                let port = port
                    .parse()
                    .map_err(|_| Error::BadRequest(format!("url {url:?} has no valid port")))?;
                (host, port)
            }
            _ => (authority, default_port),
        };
        if host.is_empty() {
            return Err(Error::BadRequest(format!("url {url:?} names no host")));
        }
        Ok(Broker {
            host: host.to_owned(),
            port,
            tls: match tls {
                true => Some(tls_config()?),
                false => None,
            },
            credentials: text(config, "username").map(|user| {
                (
                    user.to_owned(),
                    text(config, "password").unwrap_or_default().to_owned(),
                )
            }),
            client_prefix: text(config, "client_id").unwrap_or("strata").to_owned(),
        })
    }

    /// `host:port`, as messages name the broker.
    fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// A client id used once (listing, testing): the prefix and 12 random hex digits.
    fn passing_id(&self) -> String {
        let random = uuid::Uuid::new_v4().simple().to_string();
        format!("{}-{}", self.client_prefix, &random[..12])
    }

    /// The options of a session of `client_id`.
    fn options(&self, client_id: &str, clean_session: bool) -> MqttOptions {
        let mut options = MqttOptions::new(client_id, self.host.clone(), self.port);
        options
            .set_keep_alive(KEEP_ALIVE)
            .set_max_packet_size(MAX_INCOMING_PACKET, MAX_OUTGOING_PACKET)
            .set_request_channel_capacity(REQUESTS)
            .set_clean_session(clean_session)
            .set_manual_acks(true);
        if let Some((user, password)) = &self.credentials {
            options.set_credentials(user.clone(), password.clone());
        }
        if let Some(tls) = &self.tls {
            options.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(
                tls.clone(),
            )));
        }
        options
    }

    /// Connects as `client_id` (until the broker's CONNACK).
    async fn connect(&self, client_id: &str, clean_session: bool) -> Result<Session> {
        let (client, mut events) =
            AsyncClient::new(self.options(client_id, clean_session), REQUESTS);
        match events.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(_))) => Ok(Session { client, events }),
            Ok(other) => Err(Error::SourceFailed(format!(
                "connect to {}: the broker answered {other:?} instead of CONNACK",
                self.address()
            ))),
            Err(error) => Err(connect_failed(&self.address(), error)),
        }
    }

    /// Ends the persistent session of `client_id` on the broker (what it queued for it
    /// included): a connection with `clean_session = true`, then a clean disconnection.
    async fn drop_session(&self, client_id: &str) -> Result<()> {
        self.connect(client_id, true).await?.close().await;
        Ok(())
    }

    /// The topics of the retained messages the broker sends at a subscription to `#`, sorted
    /// (see the module documentation); none when the broker refuses the subscription.
    async fn retained_topics(&self) -> Result<Vec<String>> {
        let mut session = self.connect(&self.passing_id(), true).await?;
        let stage = format!("list the retained topics of {}", self.address());
        session
            .client
            .subscribe("#", QoS::AtMostOnce)
            .await
            .map_err(|e| failure(&stage, &e))?;
        let started = Instant::now();
        let mut last = started;
        let mut topics = BTreeSet::new();
        while topics.len() < MAX_LISTED {
            let until = (last + LISTING_QUIET).min(started + LISTING_TIMEOUT);
            let left = until.saturating_duration_since(Instant::now());
            let Ok(event) = tokio::time::timeout(left, session.events.poll()).await else {
                break;
            };
            match event.map_err(|e| failure(&stage, &e))? {
                Event::Incoming(Packet::Publish(publish)) if publish.retain => {
                    topics.insert(publish.topic);
                    last = Instant::now();
                }
                Event::Incoming(Packet::SubAck(ack)) => {
                    if ack
                        .return_codes
                        .iter()
                        .any(|code| matches!(code, SubscribeReasonCode::Failure))
                    {
                        break;
                    }
                    last = Instant::now();
                }
                _ => {}
            }
        }
        session.close().await;
        Ok(topics.into_iter().collect())
    }
}

/// One connection to a broker: the client that queues requests, and the event loop that sends
/// them and receives packets (it moves only while polled).
struct Session {
    /// Queues requests (subscriptions, acknowledgements, the disconnection).
    client: AsyncClient,
    /// Sends the requests and yields what the broker sent.
    events: EventLoop,
}

impl Session {
    /// Disconnects cleanly (a DISCONNECT sent; a persistent session stays on the broker);
    /// failures are of no consequence.
    async fn close(mut self) {
        if self.client.try_disconnect().is_err() {
            return;
        }
        let closing = async {
            while let Ok(event) = self.events.poll().await {
                if matches!(event, Event::Outgoing(Outgoing::Disconnect)) {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, closing).await;
    }
}

impl Mqtt {
    /// Opens the source: one connection proves the broker answers and takes the credentials.
    pub async fn open(
        _connector: &Connector,
        config: &Map<String, Value>,
        _key: &str,
    ) -> Result<Mqtt> {
        let broker = Broker::of(config)?;
        broker
            .connect(&broker.passing_id(), true)
            .await?
            .close()
            .await;
        Ok(Mqtt { broker })
    }
}

/// A message as a row of a batch (see the module documentation for its columns and id).
fn row(publish: &Publish, arrived_millis: i64) -> Value {
    let topic = publish.topic.as_bytes();
    let payload = publish.payload.as_ref();
    let id = match publish.retain {
        true => content_id(&[topic]),
        false => payload_id(payload).unwrap_or_else(|| content_id(&[topic, payload])),
    };
    json!({
        "_topic": publish.topic,
        "_qos": publish.qos as u8,
        "_retained": publish.retain,
        "_timestamp": arrived_millis,
        "value": String::from_utf8_lossy(payload),
        "_id": id,
    })
}

/// An import job's reading of a topic filter in its persistent session (see the module
/// documentation).
struct FilterReader {
    /// The broker (to end the session when the job ended).
    broker: Broker,
    /// The topic filter subscribed to.
    filter: String,
    /// The session's client id: `<prefix>-<job id>`.
    client_id: String,
    /// The connection; taken when the reader is dropped.
    session: Option<Session>,
    /// Messages received while waiting for something else (a subscription's answer, the
    /// sending of acknowledgements), with their arrival time: the next batch's first.
    early: VecDeque<(Publish, i64)>,
    /// The messages read and not acknowledged yet, in arrival order.
    unacked: Vec<Publish>,
}

/// Polls `session` once, waiting until `deadline`: a message received is queued on `early`, an
/// acknowledgement sent counted in `acks`. `Ok(false)` when the deadline passed.
async fn step(
    session: &mut Session,
    early: &mut VecDeque<(Publish, i64)>,
    acks: &mut usize,
    deadline: Instant,
    stage: &str,
) -> Result<bool> {
    let left = deadline.saturating_duration_since(Instant::now());
    let Ok(event) = tokio::time::timeout(left, session.events.poll()).await else {
        return Ok(false);
    };
    match event.map_err(|e| failure(stage, &e))? {
        Event::Incoming(Packet::Publish(publish)) => early.push_back((publish, now_millis())),
        Event::Outgoing(Outgoing::PubAck(_)) => *acks += 1,
        _ => {}
    }
    Ok(true)
}

impl FilterReader {
    /// The stage a failure of reading names.
    fn stage(&self, doing: &str) -> String {
        let address = self.broker.address();
        format!("{doing} topic filter {} on {address}", self.filter)
    }

    /// Subscribes to the filter with QoS 1, until the broker's SUBACK (what the session had
    /// queued arrives meanwhile); a refused subscription is a 403.
    async fn subscribe(&mut self) -> Result<()> {
        let stage = self.stage("subscribe to");
        let session = self
            .session
            .as_mut()
            .ok_or_else(|| Error::Internal(format!("{stage}: no session")))?;
        session
            .client
            .subscribe(self.filter.clone(), QoS::AtLeastOnce)
            .await
            .map_err(|e| failure(&stage, &e))?;
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(event) = tokio::time::timeout(left, session.events.poll()).await else {
                return Err(Error::SourceFailed(format!(
                    "{stage}: the broker did not answer within {} s",
                    STEP_TIMEOUT.as_secs()
                )));
            };
            match event.map_err(|e| failure(&stage, &e))? {
                Event::Incoming(Packet::Publish(publish)) => {
                    self.early.push_back((publish, now_millis()))
                }
                Event::Incoming(Packet::SubAck(ack)) => {
                    return match ack
                        .return_codes
                        .iter()
                        .any(|code| matches!(code, SubscribeReasonCode::Failure))
                    {
                        true => Err(Error::Forbidden(format!(
                            "{stage}: the source refused the right (the broker refused the \
                             subscription)"
                        ))),
                        false => Ok(()),
                    };
                }
                _ => {}
            }
        }
    }
}

#[async_trait]
impl Messages for Mqtt {
    fn prefix(&self) -> &'static str {
        "mqtt"
    }

    /// A reader of topic filter `name` in job `job`'s persistent session (the cursor is not
    /// used: the broker keeps the session). A 400 when `name` is no topic filter.
    async fn reader(&self, name: &str, job: &str, _cursor: &Value) -> Result<Box<dyn Reader + '_>> {
        if !rumqttc::valid_filter(name) {
            return Err(Error::BadRequest(format!(
                "{name:?} is not an MQTT topic filter (levels separated by /, + for one level, \
                 # last for the rest)"
            )));
        }
        let client_id = format!("{}-{job}", self.broker.client_prefix);
        let session = self.broker.connect(&client_id, false).await?;
        let mut reader = FilterReader {
            broker: self.broker.clone(),
            filter: name.to_owned(),
            client_id,
            session: Some(session),
            early: VecDeque::new(),
            unacked: Vec::new(),
        };
        reader.subscribe().await?;
        Ok(Box::new(reader))
    }
}

#[async_trait]
impl Reader for FilterReader {
    /// The messages that arrive within `wait` (at most `max`): once one arrived, those that
    /// follow it closely. `at_end` when none arrived.
    async fn next(&mut self, max: usize, wait: Duration) -> Result<Batch> {
        let stage = self.stage("read");
        let session = self
            .session
            .as_mut()
            .ok_or_else(|| Error::Internal(format!("{stage}: no session")))?;
        let started = Instant::now();
        let mut got: Vec<(Publish, i64)> = Vec::new();
        let mut acks = 0;
        while got.len() < max.max(1) {
            if let Some(early) = self.early.pop_front() {
                got.push(early);
                continue;
            }
            let deadline = match got.is_empty() {
                true => started + wait,
                false => (Instant::now() + LINGER).min(started + wait.max(LINGER)),
            };
            if !step(session, &mut self.early, &mut acks, deadline, &stage).await? {
                break;
            }
        }
        let rows: Vec<Value> = got
            .iter()
            .map(|(publish, arrived)| row(publish, *arrived))
            .collect();
        self.unacked
            .extend(got.into_iter().map(|(publish, _)| publish));
        let at_end = rows.is_empty();
        Ok(Batch {
            rows,
            cursor: Value::Null,
            at_end,
        })
    }

    /// Acknowledges the messages read, in the order they arrived, and waits until the
    /// acknowledgements are sent.
    async fn acknowledge(&mut self) -> Result<()> {
        let stage = self.stage("acknowledge the messages of");
        let session = self
            .session
            .as_mut()
            .ok_or_else(|| Error::Internal(format!("{stage}: no session")))?;
        let deadline = Instant::now() + STEP_TIMEOUT;
        let late = || {
            Error::SourceFailed(format!(
                "{stage}: the acknowledgements were not sent within {} s",
                STEP_TIMEOUT.as_secs()
            ))
        };
        let (mut expected, mut sent) = (0, 0);
        for publish in std::mem::take(&mut self.unacked) {
            if publish.qos == QoS::AtMostOnce {
                continue;
            }
            expected += 1;
            // A full request queue: the event loop sends some of it.
            while session.client.try_ack(&publish).is_err() {
                if !step(session, &mut self.early, &mut sent, deadline, &stage).await? {
                    return Err(late());
                }
            }
        }
        while sent < expected {
            if !step(session, &mut self.early, &mut sent, deadline, &stage).await? {
                return Err(late());
            }
        }
        Ok(())
    }

    /// The job is over (it reached the end of what the broker had, or was cancelled): its
    /// persistent session and what the broker queued for it are dropped.
    async fn end(&mut self) -> Result<()> {
        if let Some(session) = self.session.take() {
            session.close().await;
        }
        self.broker.drop_session(&self.client_id).await
    }
}

impl Drop for FilterReader {
    /// Disconnects cleanly. The persistent session stays on the broker: a node that stops
    /// must find it again ([`Reader::end`] ends it when the job is over).
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(session.close());
    }
}

#[async_trait]
impl Source for Mqtt {
    /// The topics of the broker's retained messages (see the module documentation).
    async fn datasets(&self) -> Result<Vec<String>> {
        self.broker.retained_topics().await
    }

    /// A 400: a topic filter keeps no history to query.
    async fn table(&self, _state: &SessionState, name: &str) -> Result<Arc<dyn TableProvider>> {
        Err(Error::BadRequest(format!(
            "MQTT topic filter {name:?} is imported or followed (PUT /import with source.topic), \
             not queried in place: a broker keeps no history of a topic"
        )))
    }

    fn messages(&self) -> Option<&dyn Messages> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn config(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn urls_give_host_port_and_credentials() {
        let broker = Broker::of(&config(json!({
            "url": "mqtt://broker.example:1884", "username": "u", "password": "p",
            "client_id": "plant"
        })))
        .unwrap();
        assert_eq!(broker.address(), "broker.example:1884");
        assert!(broker.tls.is_none());
        assert_eq!(broker.credentials, Some(("u".into(), "p".into())));
        assert!(broker.passing_id().starts_with("plant-"));
        let plain = Broker::of(&config(json!({"url": "mqtt://[::1]"}))).unwrap();
        assert_eq!(plain.address(), "[::1]:1883");
        assert_eq!(plain.client_prefix, "strata");
        assert!(plain.credentials.is_none());
        let tls = Broker::of(&config(json!({"url": "mqtts://broker.example/"}))).unwrap();
        assert_eq!(tls.address(), "broker.example:8883");
        assert!(tls.tls.is_some());
        for bad in ["http://x", "mqtt://", "mqtt://x:port"] {
            let refused = Broker::of(&config(json!({ "url": bad })));
            assert!(refused.is_err(), "{bad}");
        }
    }

    #[test]
    fn rows_name_their_place_and_ids_follow_the_payload_or_the_topic() {
        let mut publish = Publish::new("plant/1", QoS::AtLeastOnce, r#"{"id": "m-7", "t": 20}"#);
        let first = row(&publish, 5);
        assert_eq!(first["_topic"], "plant/1");
        assert_eq!(first["_qos"], 1);
        assert_eq!(first["_retained"], false);
        assert_eq!(first["_timestamp"], 5);
        assert_eq!(first["value"], r#"{"id": "m-7", "t": 20}"#);
        assert_eq!(first["_id"], "m-7");
        // Sent again (dup, another packet id, later): the same record.
        publish.dup = true;
        publish.pkid = 9;
        assert_eq!(row(&publish, 6)["_id"], "m-7");
        // No id: topic and payload.
        let plain = Publish::new("plant/1", QoS::AtMostOnce, "21.5");
        let other = Publish::new("plant/2", QoS::AtMostOnce, "21.5");
        assert_eq!(row(&plain, 1)["_id"], row(&plain, 2)["_id"]);
        assert_ne!(row(&plain, 1)["_id"], row(&other, 1)["_id"]);
        // Retained: the topic's state, whatever it says.
        let mut retained = Publish::new("plant/1", QoS::AtLeastOnce, r#"{"id": 1}"#);
        retained.retain = true;
        let mut newer = Publish::new("plant/1", QoS::AtLeastOnce, r#"{"id": 2}"#);
        newer.retain = true;
        assert_eq!(row(&retained, 1)["_id"], row(&newer, 2)["_id"]);
        assert_eq!(row(&retained, 1)["_id"], content_id(&[b"plant/1"]));
    }

    #[test]
    fn refusals_of_the_credentials_are_401s() {
        let code = |error| connect_failed("h:1", error).code();
        assert_eq!(
            code(ConnectionError::ConnectionRefused(
                ConnectReturnCode::NotAuthorized
            )),
            ErrorCode::Unauthorized
        );
        assert_eq!(
            code(ConnectionError::ConnectionRefused(
                ConnectReturnCode::BadUserNamePassword
            )),
            ErrorCode::Unauthorized
        );
        assert_eq!(
            code(ConnectionError::ConnectionRefused(
                ConnectReturnCode::ServiceUnavailable
            )),
            ErrorCode::SourceFailed
        );
        let refused = connect_failed(
            "h:1",
            ConnectionError::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
        );
        assert_eq!(refused.code(), ErrorCode::SourceFailed);
        assert!(
            refused.to_string().starts_with("connect to h:1: "),
            "{refused}"
        );
    }

    /// A client of the machine's Mosquitto (127.0.0.1:1883) that publishes, its event loop
    /// polled by a task of its own.
    async fn publisher() -> AsyncClient {
        let id = format!(
            "strata-unit-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let (client, mut events) = AsyncClient::new(MqttOptions::new(id, "127.0.0.1", 1883), 64);
        tokio::spawn(async move { while events.poll().await.is_ok() {} });
        client
    }

    /// Rows read by `reader` until `n` arrived (or 10 s passed).
    async fn read_n(reader: &mut dyn Reader, n: usize) -> Vec<Value> {
        let mut rows = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while rows.len() < n && Instant::now() < deadline {
            let batch = reader.next(100, Duration::from_millis(500)).await.unwrap();
            assert!(batch.cursor.is_null());
            rows.extend(batch.rows);
        }
        rows
    }

    fn ids(rows: &[Value]) -> Vec<String> {
        let mut ids: Vec<String> = rows
            .iter()
            .map(|r| r["_id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    }

    #[tokio::test]
    async fn a_filter_is_read_in_a_session_that_keeps_what_was_not_acknowledged() {
        let prefix = format!("strata-unit/{}", uuid::Uuid::new_v4().simple());
        let filter = format!("{prefix}/#");
        let job = format!("unit-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let config = config(json!({"url": "mqtt://127.0.0.1:1883"}));
        let connector = super::super::catalogue::connector("mosquitto").unwrap();
        let mqtt = Mqtt::open(connector, &config, "k").await.unwrap();
        let publisher = publisher().await;
        let publish = |n: u32, retain: bool| {
            let publisher = publisher.clone();
            let topic = format!("{prefix}/{}", if retain { "state" } else { "events" });
            async move {
                let payload = json!({"id": format!("m-{n}"), "n": n}).to_string();
                publisher
                    .publish(topic, QoS::AtLeastOnce, retain, payload)
                    .await
                    .unwrap();
            }
        };

        // Subscribed, then three messages and a retained one; read, not acknowledged.
        let mut reader = mqtt.reader(&filter, &job, &Value::Null).await.unwrap();
        for n in 1..=3 {
            publish(n, false).await;
        }
        let rows = read_n(reader.as_mut(), 3).await;
        assert_eq!(ids(&rows), vec!["m-1", "m-2", "m-3"]);
        assert_eq!(rows[0]["_topic"], format!("{prefix}/events"));
        assert_eq!(rows[0]["_qos"], 1);
        drop(reader);
        tokio::time::sleep(Duration::from_millis(300)).await;

        // The session sends them again, with what arrived meanwhile; acknowledged this time.
        publish(4, false).await;
        publish(5, true).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut reader = mqtt.reader(&filter, &job, &Value::Null).await.unwrap();
        // The retained message published meanwhile came as a message of the subscription,
        // then again as the topic's state at the new subscription.
        let rows = read_n(reader.as_mut(), 6).await;
        assert_eq!(rows.len(), 6, "{rows:?}");
        let live: Vec<Value> = rows
            .iter()
            .filter(|r| r["_retained"] == false)
            .cloned()
            .collect();
        assert_eq!(ids(&live), ["m-1", "m-2", "m-3", "m-4", "m-5"]);
        let retained: Vec<&Value> = rows.iter().filter(|r| r["_retained"] == true).collect();
        assert_eq!(retained.len(), 1, "{rows:?}");
        assert_eq!(
            retained[0]["_id"],
            content_id(&[format!("{prefix}/state").as_bytes()])
        );
        reader.acknowledge().await.unwrap();
        drop(reader);
        tokio::time::sleep(Duration::from_millis(300)).await;

        // Acknowledged messages are gone from the session; the retained one comes at each
        // subscription.
        publish(6, false).await;
        let mut reader = mqtt.reader(&filter, &job, &Value::Null).await.unwrap();
        let rows = read_n(reader.as_mut(), 2).await;
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(rows.iter().any(|r| r["_id"] == "m-6"), "{rows:?}");
        assert!(rows.iter().any(|r| r["_retained"] == true), "{rows:?}");
        reader.acknowledge().await.unwrap();

        // The retained topic is listed.
        let listed = mqtt.datasets().await.unwrap();
        assert!(listed.contains(&format!("{prefix}/state")), "{listed:?}");

        // Nothing more: at the end; the job then over ends the session.
        let last = reader.next(100, Duration::from_millis(300)).await.unwrap();
        assert!(last.at_end && last.rows.is_empty());
        reader.end().await.unwrap();
        drop(reader);
        let mut options = MqttOptions::new(format!("strata-{job}"), "127.0.0.1", 1883);
        options.set_clean_session(false);
        let (_client, mut events) = AsyncClient::new(options, 10);
        match events.poll().await.unwrap() {
            Event::Incoming(Packet::ConnAck(ack)) => assert!(!ack.session_present),
            other => panic!("{other:?}"),
        }
        // Clean up: the test's session and retained message.
        let mut options = MqttOptions::new(format!("strata-{job}"), "127.0.0.1", 1883);
        options.set_clean_session(true);
        let (_client, mut events) = AsyncClient::new(options, 10);
        events.poll().await.unwrap();
        publisher
            .publish(
                format!("{prefix}/state"),
                QoS::AtLeastOnce,
                true,
                Vec::new(),
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    #[tokio::test]
    async fn a_filter_that_is_none_and_a_table_are_400s() {
        let config = config(json!({"url": "mqtt://127.0.0.1:1883"}));
        let connector = super::super::catalogue::connector("mosquitto").unwrap();
        let mqtt = Mqtt::open(connector, &config, "k").await.unwrap();
        let bad = mqtt.reader("a/#/b", "j", &Value::Null).await.err().unwrap();
        assert_eq!(bad.code(), ErrorCode::BadRequest);
        let nowhere = config_of_port(1);
        let failed = Mqtt::open(connector, &nowhere, "k").await.err().unwrap();
        assert_eq!(failed.code(), ErrorCode::SourceFailed);
        assert!(
            failed.to_string().starts_with("connect to 127.0.0.1:1: "),
            "{failed}"
        );
    }

    fn config_of_port(port: u16) -> Map<String, Value> {
        config(json!({ "url": format!("mqtt://127.0.0.1:{port}") }))
    }
}
