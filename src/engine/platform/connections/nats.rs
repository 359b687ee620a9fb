//! NATS JetStream sources (NATS JetStream, Synadia Cloud): a dataset is a stream.
//!
//! Read in place, a stream is a table of its messages as of the read: those of its newest
//! `max_records` sequences (default 100 000; a sequence whose message was deleted counts among
//! them), up to its last sequence when the read starts, oldest first. Columns: `_sequence` (the
//! stream sequence), `_subject`, `_timestamp` (when the server stored the message, in
//! milliseconds since the epoch) and the payload: its fields when every payload is a JSON object,
//! else `value` (text).
//!
//! Every read goes through an ephemeral ordered consumer (no durable consumer, no acks: the
//! server's state of the stream is left as it was; the consumer is deleted after a read in place
//! and, if left behind, by the server after 30 s without use).
//!
//! Imports read by stream sequence, never reused within a stream: the cursor is
//! `{"sequence": <last sequence read>, "created": <the stream's creation, ns since the epoch>}`
//! and a record's id `<job>-<sequence>`, so a batch read again after a crash replaces itself. A
//! batch ends when the consumer has no more (`pending == 0`: a deleted last message is never
//! waited for); a job that does not follow ends with a read that found nothing more. A stream
//! deleted and created again under the same name (its creation time changed) numbers its
//! messages from 1 again: the job fails (410) rather than take new messages for old ones.
//! Messages gone from the stream before the job read them (dropped by its limits, purged or
//! deleted; seen as a gap in the sequences after the job's first message) are skipped: the job
//! goes on, logs a warning with their count and the first gap, and counts them in its cursor
//! (`skipped`).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use arrow::datatypes::{DataType, Field, Schema};
use async_nats::{
    Client, ConnectErrorKind, ConnectOptions,
    connection::State,
    jetstream::{
        self, Context,
        consumer::{
            DeliverPolicy,
            pull::{Ordered, OrderedConfig},
        },
        response::Response,
        stream::{Info, Stream},
    },
};
use async_trait::async_trait;
use datafusion::{catalog::TableProvider, datasource::MemTable, execution::SessionState};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::{
    config::text,
    kafka::with_fields,
    messages::{Batch, Messages, Reader},
    source::{Source, chain, failure_text},
};
use crate::error::{Error, Result};

/// How long connecting to one server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a request to the server (JetStream API) may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a lost connection may take to come back before a read fails.
const RECONNECT_PATIENCE: Duration = Duration::from_secs(3);

/// How long a read waits for the next message it knows the stream holds.
const MESSAGE_PATIENCE: Duration = Duration::from_secs(10);

/// Messages a read in place takes at most, unless the config says otherwise.
const MAX_RECORDS: u64 = 100_000;

/// The JetStream error code of a stream that does not exist.
const STREAM_NOT_FOUND: usize = 10059;

/// An opened NATS server with JetStream.
pub struct Nats {
    /// The connection (it reconnects by itself after a loss).
    client: Client,
    /// The JetStream API over `client`.
    jetstream: Context,
    /// The servers as the config names them, for errors.
    servers: String,
    /// Messages a read in place takes at most.
    max_records: u64,
}

/// The servers of a `url`: one URL or several separated by commas.
fn servers(url: &str) -> Vec<String> {
    url.split(',')
        .map(str::trim)
        .filter(|server| !server.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What a failure of the server at `stage` means: credentials refused (an authorization
/// violation) 401, a right refused (a permissions violation) 403, else a 500 naming the stage.
fn failure_at(stage: &str, text: &str) -> Error {
    let lower = text.to_ascii_lowercase();
    if lower.contains("authorization violation") || lower.contains("failed signing nonce") {
        return Error::NotAuthenticated(format!(
            "{stage}: the source refused the credentials: {text}"
        ));
    }
    if lower.contains("permissions violation") {
        return Error::Forbidden(format!("{stage}: the source refused the right: {text}"));
    }
    failure_text(stage, text)
}

/// [`failure_at`] of an error of the client.
fn failed<E: std::error::Error + 'static>(stage: &str) -> impl Fn(E) -> Error + '_ {
    move |error| failure_at(stage, &chain(&error))
}

/// A moment of the server as nanoseconds since the epoch.
fn nanos(at: &async_nats::datetime::DateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos()).unwrap_or(i64::MAX)
}

/// Nanoseconds since the epoch as RFC 3339 text (for messages).
fn moment(nanos: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(nanos).to_rfc3339()
}

/// A message of a stream as a row of its table (its sequence, subject, time and payload), with
/// the number of messages the consumer still had to deliver after it.
fn row_of(message: &jetstream::Message) -> Result<(u64, u64, Value)> {
    let info = message
        .info()
        .map_err(|e| Error::SourceFailed(format!("read a message's metadata: {e}")))?;
    let row = json!({
        "_sequence": info.stream_sequence,
        "_subject": message.subject.as_str(),
        "_timestamp": i64::try_from(info.published.unix_timestamp_nanos() / 1_000_000)
            .unwrap_or(i64::MAX),
        "value": String::from_utf8_lossy(&message.payload),
    });
    Ok((info.stream_sequence, info.pending, row))
}

/// The table of no messages, with the columns a stream's table has.
fn empty_table() -> Result<Arc<dyn TableProvider>> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("_sequence", DataType::UInt64, true),
        Field::new("_subject", DataType::Utf8, true),
        Field::new("_timestamp", DataType::Int64, true),
        Field::new("value", DataType::Utf8, true),
    ]));
    let table =
        MemTable::try_new(schema, vec![vec![]]).map_err(|e| Error::Internal(e.to_string()))?;
    Ok(Arc::new(table))
}

impl Nats {
    /// Opens the source: connects (user and password, or a token) and asks for the account's
    /// JetStream information, which proves the server answers and has JetStream.
    pub async fn open(config: &Map<String, Value>) -> Result<Nats> {
        let url = text(config, "url").unwrap_or_default();
        let addresses = servers(url);
        let stage = format!("connect to {}", addresses.join(","));
        let mut options = ConnectOptions::new()
            .name("strata")
            .connection_timeout(CONNECT_TIMEOUT)
            .request_timeout(Some(REQUEST_TIMEOUT));
        match (text(config, "username"), text(config, "token")) {
            (Some(user), _) => {
                let password = text(config, "password").unwrap_or_default();
                options = options.user_and_password(user.to_owned(), password.to_owned());
            }
            (None, Some(token)) => options = options.token(token.to_owned()),
            (None, None) => {}
        }
        let client =
            options
                .connect(addresses.clone())
                .await
                .map_err(|error| match error.kind() {
                    ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => {
                        Error::NotAuthenticated(format!(
                            "{stage}: the source refused the credentials: {}",
                            chain(&error)
                        ))
                    }
                    _ => failure_at(&stage, &chain(&error)),
                })?;
        let mut jetstream = jetstream::new(client.clone());
        jetstream.set_timeout(REQUEST_TIMEOUT);
        // The account's JetStream information, read as JSON (its fields vary with the
        // server's version).
        let stage = "read the account's JetStream information";
        let answer: Response<Value> = jetstream
            .request("INFO", &())
            .await
            .map_err(failed(stage))?;
        if let Response::Err { error } = answer {
            return Err(failure_at(stage, &error.to_string()));
        }
        Ok(Nats {
            client,
            jetstream,
            servers: addresses.join(","),
            max_records: config
                .get("max_records")
                .and_then(Value::as_u64)
                .unwrap_or(MAX_RECORDS),
        })
    }

    /// Ok once the connection is up, waiting a little for a lost one to come back; an error
    /// at `stage` when it does not (the server is gone: requests would only time out).
    async fn ready(&self, stage: &str) -> Result<()> {
        let deadline = Instant::now() + RECONNECT_PATIENCE;
        loop {
            let state = self.client.connection_state();
            if state == State::Connected {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::SourceFailed(format!(
                    "{stage}: the connection to {} is lost ({state}) and did not come back \
                     within {} s",
                    self.servers,
                    RECONNECT_PATIENCE.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stream `name` with its information as of now; `Error::DatasetNotFound` when there is
    /// none.
    async fn stream(&self, name: &str) -> Result<Stream> {
        let stage = format!("read stream {name}");
        self.ready(&stage).await?;
        self.jetstream.get_stream(name).await.map_err(|error| {
            use async_nats::jetstream::context::GetStreamErrorKind as Kind;
            match error.kind() {
                Kind::JetStream(e) if e.code() == STREAM_NOT_FOUND => {
                    Error::DatasetNotFound(name.to_owned())
                }
                Kind::EmptyName | Kind::InvalidStreamName => {
                    Error::DatasetNotFound(name.to_owned())
                }
                _ => failure_at(&stage, &chain(&error)),
            }
        })
    }

    /// The names of the streams, sorted.
    async fn stream_names(&self) -> Result<Vec<String>> {
        let stage = "list the streams";
        self.ready(stage).await?;
        let mut names: Vec<String> = self
            .jetstream
            .stream_names()
            .map(|name| name.map_err(failed(stage)))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_>>()?;
        names.sort();
        Ok(names)
    }

    /// An ephemeral ordered consumer of `stream` from sequence `from`: its messages, its name
    /// (to delete it after) and how many messages it has to deliver now.
    async fn consumer(&self, stream: &Stream, from: u64) -> Result<(Ordered, String, u64)> {
        let stage = format!("read stream {}", stream.cached_info().config.name);
        let deliver_policy = match from {
            0 | 1 => DeliverPolicy::All,
            start_sequence => DeliverPolicy::ByStartSequence { start_sequence },
        };
        let consumer = stream
            .create_consumer(OrderedConfig {
                deliver_policy,
                description: Some("strata: a read of the stream (ephemeral, no acks)".to_owned()),
                ..OrderedConfig::default()
            })
            .await
            .map_err(failed(&stage))?;
        let (name, pending) = (
            consumer.cached_info().name.clone(),
            consumer.cached_info().num_pending,
        );
        let messages = consumer.messages().await.map_err(failed(&stage))?;
        Ok((messages, name, pending))
    }

    /// Deletes consumer `name` of stream `stream` (best effort: the server deletes it after
    /// 30 s unused anyway).
    fn forget(&self, stream: &str, name: String) {
        let (jetstream, stream) = (self.jetstream.clone(), stream.to_owned());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = jetstream.delete_consumer_from_stream(name, stream).await;
            });
        }
    }

    /// The messages of stream `name` as rows, those of its newest `max_records` sequences up
    /// to its last as of now, oldest first.
    async fn read(&self, name: &str) -> Result<Vec<Value>> {
        let stage = format!("read stream {name}");
        let stream = self.stream(name).await?;
        let state = &stream.cached_info().state;
        if state.messages == 0 || self.max_records == 0 {
            return Ok(Vec::new());
        }
        let last = state.last_sequence;
        let from = state
            .first_sequence
            .max(last.saturating_sub(self.max_records - 1));
        let (mut messages, consumer, mut pending) = self.consumer(&stream, from).await?;
        let mut rows = Vec::new();
        let deadline = Instant::now() + MESSAGE_PATIENCE * 6;
        let read = async {
            while pending > 0 && (rows.len() as u64) < self.max_records {
                if Instant::now() > deadline {
                    return Err(Error::SourceFailed(format!(
                        "{stage}: the server did not send the messages within {} s",
                        (MESSAGE_PATIENCE * 6).as_secs()
                    )));
                }
                let next = tokio::time::timeout(MESSAGE_PATIENCE, messages.next()).await;
                let message = match next {
                    Err(_) => {
                        self.ready(&stage).await?;
                        return Err(Error::SourceFailed(format!(
                            "{stage}: the server sent no message within {} s ({pending} to come)",
                            MESSAGE_PATIENCE.as_secs()
                        )));
                    }
                    Ok(None) => {
                        return Err(Error::SourceFailed(format!(
                            "{stage}: the consumer ended before the stream's end"
                        )));
                    }
                    Ok(Some(message)) => message.map_err(failed(&stage))?,
                };
                let (sequence, left, row) = row_of(&message)?;
                rows.push(row);
                pending = left;
                if sequence >= last {
                    break;
                }
            }
            Ok(())
        };
        let result = read.await;
        drop(messages);
        // Deleted before the answer (best effort: the server deletes it after 30 s unused).
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            self.jetstream.delete_consumer_from_stream(consumer, name),
        )
        .await;
        result.map(|()| rows)
    }
}

#[async_trait]
impl Source for Nats {
    async fn datasets(&self) -> Result<Vec<String>> {
        self.stream_names().await
    }

    fn messages(&self) -> Option<&dyn Messages> {
        Some(self)
    }

    async fn table(&self, _state: &SessionState, name: &str) -> Result<Arc<dyn TableProvider>> {
        let rows = self.read(name).await?;
        if rows.is_empty() {
            return empty_table();
        }
        super::http_json::table_of(name, &with_fields(rows))
    }
}

/// Where an import's reading of a stream is, as its cursor says.
#[derive(Debug, Default, PartialEq)]
struct Cursor {
    /// The last sequence read (0: none).
    sequence: u64,
    /// When the stream read was created (ns since the epoch), once known.
    created: Option<i64>,
    /// How many messages were skipped: gone from the stream (its limits, a purge, deletes)
    /// before the job read them.
    skipped: u64,
}

impl Cursor {
    /// The cursor a job recorded (null: the start).
    fn of(value: &Value) -> Cursor {
        Cursor {
            sequence: value["sequence"].as_u64().unwrap_or(0),
            created: value["created"].as_i64(),
            skipped: value["skipped"].as_u64().unwrap_or(0),
        }
    }

    /// The cursor as the job records it.
    fn value(&self) -> Value {
        let mut value = json!({"sequence": self.sequence, "created": self.created});
        if self.skipped > 0 {
            value["skipped"] = json!(self.skipped);
        }
        value
    }

    /// Checks that stream `name`, as `info` says it is now, is the stream the job read (else
    /// a `Gone` error: a stream created again numbers its messages from 1 again).
    fn same_stream(&mut self, name: &str, info: &Info) -> Result<()> {
        let created = nanos(&info.created);
        match self.created {
            Some(read) if read != created => Err(Error::Gone(format!(
                "read stream {name}: the stream was created again at {} (this job read the one \
                 created at {}): its sequences start again, so the job cannot go on from \
                 sequence {}; start a new import",
                moment(created),
                moment(read),
                self.sequence
            ))),
            _ => {
                self.created = Some(created);
                Ok(())
            }
        }
    }

    /// Moves the cursor to message `sequence`, just read: the messages skipped on the way
    /// (none before the first message a job reads: it starts at the stream's first).
    fn read(&mut self, sequence: u64) -> u64 {
        let skipped = match self.sequence {
            0 => 0,
            last => sequence.saturating_sub(last + 1),
        };
        self.skipped += skipped;
        self.sequence = self.sequence.max(sequence);
        skipped
    }
}

/// An import's reading of a stream from the sequence after its cursor's, through one
/// ephemeral ordered consumer made at the first read and kept while the reader lives.
struct StreamReader<'a> {
    /// The source.
    nats: &'a Nats,
    /// The stream's name.
    stream: String,
    /// The import job's id (the records' ids begin with it).
    job: String,
    /// Where the reading is.
    cursor: Cursor,
    /// The consumer, its name, and how many messages it still had to deliver at its last one.
    consumer: Option<(Ordered, String, u64)>,
}

impl Drop for StreamReader<'_> {
    fn drop(&mut self) {
        if let Some((messages, name, _)) = self.consumer.take() {
            drop(messages);
            self.nats.forget(&self.stream, name);
        }
    }
}

#[async_trait]
impl Messages for Nats {
    fn prefix(&self) -> &'static str {
        "nats"
    }

    async fn reader(&self, name: &str, job: &str, cursor: &Value) -> Result<Box<dyn Reader + '_>> {
        let stream = self.stream(name).await?;
        let mut cursor = Cursor::of(cursor);
        cursor.same_stream(name, stream.cached_info())?;
        Ok(Box::new(StreamReader {
            nats: self,
            stream: name.to_owned(),
            job: job.to_owned(),
            cursor,
            consumer: None,
        }))
    }
}

#[async_trait]
impl Reader for StreamReader<'_> {
    async fn next(&mut self, max: usize, wait: Duration) -> Result<Batch> {
        let stage = format!("read stream {}", self.stream);
        // Each read asks for the stream's state first: a server gone or a stream created
        // again shows here.
        let stream = self.nats.stream(&self.stream).await?;
        self.cursor
            .same_stream(&self.stream, stream.cached_info())?;
        if self.consumer.is_none() {
            self.consumer = Some(
                self.nats
                    .consumer(&stream, self.cursor.sequence + 1)
                    .await?,
            );
        }
        let Some((messages, _, pending)) = self.consumer.as_mut() else {
            return Err(Error::Internal(format!("{stage}: no consumer")));
        };
        let mut rows = Vec::new();
        let (mut skipped, mut first_gap) = (0, None);
        let started = Instant::now();
        while rows.len() < max {
            // The first message may take `wait`; the next ones come at once while the server
            // has more, and the batch ends when it has none.
            let patience = match (rows.is_empty(), *pending > 0) {
                (true, _) => wait.saturating_sub(started.elapsed()),
                (false, true) => MESSAGE_PATIENCE,
                (false, false) => break,
            };
            if patience.is_zero() {
                break;
            }
            let message = match tokio::time::timeout(patience, messages.next()).await {
                Err(_) => break,
                Ok(None) => {
                    return Err(Error::SourceFailed(format!("{stage}: the consumer ended")));
                }
                Ok(Some(message)) => message.map_err(failed(&stage))?,
            };
            let (sequence, left, mut row) = row_of(&message)?;
            *pending = left;
            if sequence <= self.cursor.sequence {
                continue;
            }
            let (before, gap) = (self.cursor.sequence, self.cursor.read(sequence));
            if gap > 0 {
                skipped += gap;
                first_gap.get_or_insert((before + 1, sequence - 1));
            }
            row["_id"] = json!(format!("{}-{sequence}", self.job));
            rows.push(row);
        }
        if !rows.is_empty() {
            // The stream read is still the one the job read: messages of a stream created
            // again while this batch was read are not taken for the old one's.
            let stream = self.nats.stream(&self.stream).await?;
            self.cursor
                .same_stream(&self.stream, stream.cached_info())?;
        }
        if let Some((from, to)) = first_gap {
            tracing::warn!(
                job = %self.job,
                stream = %self.stream,
                skipped,
                first_from = from,
                first_to = to,
                "messages were gone from the stream (its limits, a purge or deletes) before the \
                 import read them: skipped"
            );
        }
        Ok(Batch {
            at_end: rows.is_empty() && *pending == 0,
            rows,
            cursor: self.cursor.value(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn a_url_names_one_server_or_several() {
        assert_eq!(
            servers("nats://127.0.0.1:4222"),
            vec!["nats://127.0.0.1:4222"]
        );
        assert_eq!(
            servers("nats://a:4222, tls://b:4222,"),
            vec!["nats://a:4222", "tls://b:4222"]
        );
    }

    #[test]
    fn refusals_are_told_apart_from_failures() {
        let code = |text: &str| failure_at("connect to x", text).code();
        assert_eq!(
            code("authorization violation: nats: authorization violation"),
            ErrorCode::Unauthorized
        );
        assert_eq!(
            code("nats: permissions violation for subscription to \"$JS.API.>\""),
            ErrorCode::Forbidden
        );
        assert_eq!(
            code("IO error: Connection refused (os error 111)"),
            ErrorCode::SourceFailed
        );
        assert!(
            failure_at("read stream s", "timed out")
                .to_string()
                .starts_with("read stream s: ")
        );
    }

    #[test]
    fn cursors_keep_the_sequence_and_the_streams_creation() {
        assert_eq!(Cursor::of(&Value::Null), Cursor::default());
        let cursor = Cursor {
            sequence: 41,
            created: Some(1_700_000_000_000_000_000),
            skipped: 0,
        };
        assert_eq!(
            cursor.value(),
            json!({"sequence": 41, "created": 1_700_000_000_000_000_000_i64})
        );
        assert_eq!(Cursor::of(&cursor.value()), cursor);
        let skipped = Cursor {
            skipped: 3,
            ..cursor
        };
        assert_eq!(Cursor::of(&skipped.value()).skipped, 3);
    }

    #[test]
    fn messages_gone_before_they_were_read_are_counted_as_skipped() {
        let mut cursor = Cursor::default();
        // A job's first message is where the stream starts: nothing skipped before it.
        assert_eq!(cursor.read(9), 0);
        assert_eq!(cursor.read(10), 0);
        assert_eq!(cursor.read(14), 3);
        assert_eq!((cursor.sequence, cursor.skipped), (14, 3));
    }

    /// Stream information as the server sends it, created at `created`.
    fn info(created: &str) -> Info {
        serde_json::from_value(json!({
            "config": {"name": "s", "subjects": ["s.>"], "retention": "limits",
                       "max_consumers": -1, "max_msgs": -1, "max_bytes": -1, "max_age": 0,
                       "max_msgs_per_subject": -1, "max_msg_size": -1, "storage": "file",
                       "num_replicas": 1, "discard": "old", "duplicate_window": 0},
            "created": created,
            "state": {"messages": 1, "bytes": 0, "first_seq": 1, "first_ts": created,
                      "last_seq": 1, "last_ts": created, "consumer_count": 0},
        }))
        .unwrap()
    }

    #[test]
    fn a_stream_created_again_fails_the_job() {
        let first = info("2026-11-27T10:00:00Z");
        let mut cursor = Cursor::default();
        cursor.same_stream("s", &first).unwrap();
        assert_eq!(cursor.created, Some(nanos(&first.created)));
        cursor.read(10);
        cursor.same_stream("s", &first).unwrap();
        let error = cursor
            .same_stream("s", &info("2026-11-27T11:00:00Z"))
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::Gone, "{error}");
        assert!(error.to_string().contains("created again"), "{error}");
        assert_eq!(cursor.created, Some(nanos(&first.created)));
    }
}
