//! Sources that speak the Redis protocol (Redis, Valkey, KeyDB, Dragonfly and the clouds'
//! managed ones): a dataset is a key pattern, read in place as a table of the keys it matches
//! (at most `max_records`, default 100 000) and imported by SCAN cursor.
//!
//! A dataset's name is a SCAN MATCH pattern (`user:*`, `session:2026-*`, `*`). A name without
//! glob characters (`*`, `?`, `[`, `\`) is the key of that name and the keys below it: `user`
//! reads the key `user` and the keys `user:*`. The datasets listed are those a bounded SCAN
//! (the first 10 000 keys) finds: `<prefix>:*` for the keys with a `:` (the part before the
//! first one), and a key without `:` under its own name (glob characters escaped).
//!
//! Columns: `_key`, `_type` (string, hash, list, set, zset, or another type whose value is not
//! read), `_ttl` (milliseconds the key has left, null when it does not expire) and its value:
//! a string as `value` (text; when every string of a read is a JSON object, their fields are
//! columns instead), a hash as its fields (one column each), a list or a set as `value`, the
//! JSON text of an array of its members (a set's sorted), a sorted set as `value`, the JSON
//! text of `[[member, score], ...]`. Fields whose name is empty or begins with `_` are left
//! out, and a column whose values mix kinds (text and numbers) holds them all as text.
//!
//! A read is SCAN MATCH/COUNT, then for each page of keys one pipeline of TYPE and one of the
//! reads by type (GET, HGETALL, LRANGE, SMEMBERS, ZRANGE WITHSCORES, and PTTL), whose errors
//! are kept apart: a key whose type changed between the two is read once more, a key gone is
//! skipped. Nothing is atomic: a read is a snapshot of each key as it was when read.
//!
//! An import reads the pattern by SCAN cursor (`{"scan": <cursor>}`, `"done": true` once SCAN
//! came back to 0; a batch holds at most the keys the job asks for, so a page may span batches,
//! which carry the cursor it began at until its last). Record ids are `<db>:<key>`, so a key
//! SCAN returns twice, a page read again after a restart, or an import run again replaces its
//! record: at least once from the source, exactly once in the dataset. An import is a
//! snapshot, never atomic: each key is read as it is when its page is read; a key there for
//! the whole import is read, one added or deleted meanwhile may or may not be; a key deleted
//! after an import stays in the dataset. The cursor holds on the same server without a
//! failover in between (a cursor another server does not know starts the scan again, or ends
//! it).

use std::{
    collections::{BTreeSet, HashSet, VecDeque},
    sync::Arc,
    time::{Duration, Instant},
};

use arrow::{
    array::{ArrayRef, RecordBatch, new_null_array},
    datatypes::{DataType, Field, Schema},
};
use async_trait::async_trait;
use datafusion::{catalog::TableProvider, datasource::MemTable, execution::SessionState};
use redis::{
    AsyncConnectionConfig, Client, IntoConnectionInfo, RedisError, Value as Reply,
    aio::MultiplexedConnection,
};
use serde_json::{Map, Value, json};

use super::{
    config::text,
    messages::{Batch, Messages, Reader},
    source::{Source, chain, failure_text},
};
use crate::error::{Error, Result};

/// Keys one SQL read takes at most, unless the config says otherwise.
const MAX_RECORDS: u64 = 100_000;

/// Keys the SCAN that lists the datasets looks at, at most.
const LISTED_KEYS: usize = 10_000;

/// The COUNT hint of each SCAN.
const SCAN_COUNT: usize = 1_000;

/// Keys whose types and values one pair of pipelines reads, at most.
const PIPELINE_KEYS: usize = 1_000;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the server may take to answer a command or a pipeline.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// The least time a reader keeps scanning for keys before it answers (a sparse pattern may
/// leave many SCAN pages empty).
const LEAST_SCAN: Duration = Duration::from_millis(200);

/// The characters that make a SCAN MATCH pattern more than a literal.
const GLOB: &[char] = &['*', '?', '[', '\\'];

/// An opened Redis-protocol server: a client and one multiplexed connection, opened again when
/// it breaks (a server restarted is found again).
pub struct RedisKeys {
    /// The server's address, credentials and database.
    client: Client,
    /// The connection every read shares (none until the first, or after one found it broken).
    connection: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    /// `host:port`, as stages name it.
    address: String,
    /// The database number, as record ids name it.
    db: i64,
    /// Keys one SQL read takes at most.
    max_records: usize,
}

/// What a failure of the server at `stage` means: the credentials refused (WRONGPASS, NOAUTH)
/// a 401, a command refused by the ACL (NOPERM) a 403, anything else a 500 naming the stage.
fn failed(stage: &str, error: &RedisError) -> Error {
    refusal(stage, &chain(error))
}

/// [`failed`] of a failure already turned to text.
fn refusal(stage: &str, text: &str) -> Error {
    let upper = text.to_ascii_uppercase();
    let credentials = [
        "WRONGPASS",
        "NOAUTH",
        "INVALID PASSWORD",
        "INVALID USERNAME-PASSWORD",
        "CALLED WITHOUT ANY PASSWORD CONFIGURED",
        "NO PASSWORD IS SET",
    ];
    if credentials.iter().any(|c| upper.contains(c)) {
        return Error::NotAuthenticated(format!(
            "{stage}: the source refused the credentials: {text}"
        ));
    }
    if upper.contains("NOPERM") {
        return Error::Forbidden(format!("{stage}: the source refused the right: {text}"));
    }
    failure_text(stage, text)
}

/// Whether the connection is no longer usable after `error` (opened again on the next use).
fn broken(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_unrecoverable_error()
        || error.is_connection_refusal()
        || error.is_timeout()
}

impl RedisKeys {
    /// Opens the source: connects (TLS for `rediss://`), authenticates with `username` and
    /// `password` when given, selects the URL's database and sends PING.
    pub async fn open(config: &Map<String, Value>) -> Result<RedisKeys> {
        let url = text(config, "url").unwrap_or_default();
        let stage = "connect";
        let info = url
            .into_connection_info()
            .map_err(|e| failed(&format!("{stage} to {url}"), &e))?;
        let address = info.addr().to_string();
        let mut settings = info.redis_settings().clone();
        if let Some(username) = text(config, "username") {
            settings = settings.set_username(username);
        }
        if let Some(password) = text(config, "password") {
            settings = settings.set_password(password);
        }
        let db = settings.db();
        let client = Client::open(info.set_redis_settings(settings))
            .map_err(|e| failed(&format!("{stage} to {address}"), &e))?;
        let max_records = config
            .get("max_records")
            .and_then(Value::as_u64)
            .unwrap_or(MAX_RECORDS)
            .clamp(1, usize::MAX as u64) as usize;
        let keys = RedisKeys {
            client,
            connection: tokio::sync::Mutex::new(None),
            address,
            db,
            max_records,
        };
        let ping = redis::cmd("PING");
        keys.ask(&format!("{stage} to {}", keys.address), Asked::One(&ping))
            .await?;
        Ok(keys)
    }

    /// The connection, opened when there is none.
    async fn connection(&self, stage: &str) -> Result<MultiplexedConnection> {
        let mut held = self.connection.lock().await;
        if let Some(connection) = held.as_ref() {
            return Ok(connection.clone());
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        let connection = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| match stage.starts_with("connect") {
                true => failed(stage, &e),
                false => refusal(stage, &format!("connect: {}", chain(&e))),
            })?;
        *held = Some(connection.clone());
        Ok(connection)
    }

    /// The replies to `asked` (a server error in a pipeline's command is its reply when the
    /// pipeline ignores errors, else the failure of it all). A connection found broken is
    /// opened again and the pipeline sent once more (every pipeline here only reads).
    async fn ask(&self, stage: &str, asked: Asked<'_>) -> Result<Vec<Reply>> {
        let mut again = true;
        loop {
            let mut connection = self.connection(stage).await?;
            let replies = match asked {
                Asked::One(command) => command
                    .query_async::<Reply>(&mut connection)
                    .await
                    .map(|reply| vec![reply]),
                Asked::Many(pipeline) => pipeline.query_async::<Vec<Reply>>(&mut connection).await,
            };
            match replies {
                Ok(replies) => return Ok(replies),
                Err(error) if broken(&error) => {
                    *self.connection.lock().await = None;
                    if !again || error.is_timeout() {
                        return Err(failed(stage, &error));
                    }
                    again = false;
                }
                Err(error) => return Err(failed(stage, &error)),
            }
        }
    }

    /// One SCAN page from `cursor`: the next cursor (0 at the end) and the keys found.
    async fn scan(
        &self,
        stage: &str,
        cursor: u64,
        pattern: Option<&[u8]>,
    ) -> Result<(u64, Vec<Vec<u8>>)> {
        let mut command = redis::cmd("SCAN");
        command.arg(cursor);
        if let Some(pattern) = pattern {
            command.arg("MATCH").arg(pattern);
        }
        command.arg("COUNT").arg(SCAN_COUNT);
        let replies = self.ask(stage, Asked::One(&command)).await?;
        let page = match replies.into_iter().next() {
            Some(Reply::Array(page)) => page,
            other => {
                return Err(Error::SourceFailed(format!(
                    "{stage}: SCAN answered {other:?}"
                )));
            }
        };
        let mut page = page.into_iter();
        let next = page
            .next()
            .and_then(|c| reply_text(&c))
            .and_then(|c| c.parse::<u64>().ok())
            .ok_or_else(|| Error::SourceFailed(format!("{stage}: SCAN answered no cursor")))?;
        let keys = match page.next() {
            Some(Reply::Array(keys) | Reply::Set(keys)) => {
                keys.into_iter().filter_map(reply_bytes).collect()
            }
            _ => Vec::new(),
        };
        Ok((next, keys))
    }

    /// The keys of `target` from the start, each once, at most `max`.
    async fn keys_of(&self, stage: &str, target: &Target, max: usize) -> Result<Vec<Vec<u8>>> {
        let mut keys: Vec<Vec<u8>> = target.exact.iter().cloned().collect();
        let mut seen: HashSet<Vec<u8>> = keys.iter().cloned().collect();
        let mut cursor = 0;
        loop {
            let (next, page) = self.scan(stage, cursor, Some(&target.pattern)).await?;
            for key in page {
                if keys.len() < max && seen.insert(key.clone()) {
                    keys.push(key);
                }
            }
            if next == 0 || keys.len() >= max {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    /// The rows of `keys` (see the module documentation), in their order; keys gone are
    /// skipped, and a key whose type changed between its TYPE and its read is read again
    /// once (skipped if it changes again).
    async fn rows_of(&self, stage: &str, keys: &[Vec<u8>]) -> Result<Vec<Value>> {
        let mut rows = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(PIPELINE_KEYS) {
            let mut todo: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
            for _ in 0..2 {
                if todo.is_empty() {
                    break;
                }
                let mut types = redis::pipe();
                for key in &todo {
                    types.cmd("TYPE").arg(*key);
                }
                let types = self.ask(stage, Asked::Many(&types)).await?;
                let kinds: Vec<String> = types
                    .iter()
                    .map(|t| reply_text(t).unwrap_or_default())
                    .collect();
                let mut reads = redis::pipe();
                reads.ignore_errors();
                let mut asked: Vec<(&[u8], &str, bool)> = Vec::new();
                for (key, kind) in todo.iter().zip(&kinds) {
                    let read = match kind.as_str() {
                        "none" | "" => continue,
                        "string" => Some(redis::cmd("GET").arg(*key).clone()),
                        "hash" => Some(redis::cmd("HGETALL").arg(*key).clone()),
                        "list" => Some(redis::cmd("LRANGE").arg(*key).arg(0).arg(-1).clone()),
                        "set" => Some(redis::cmd("SMEMBERS").arg(*key).clone()),
                        "zset" => Some(
                            redis::cmd("ZRANGE")
                                .arg(*key)
                                .arg(0)
                                .arg(-1)
                                .arg("WITHSCORES")
                                .clone(),
                        ),
                        _ => None,
                    };
                    let reads_value = read.is_some();
                    if let Some(read) = read {
                        reads.add_command(read);
                    }
                    reads.cmd("PTTL").arg(*key);
                    asked.push((key, kind.as_str(), reads_value));
                }
                if asked.is_empty() {
                    break;
                }
                let mut replies = self.ask(stage, Asked::Many(&reads)).await?.into_iter();
                let mut changed = Vec::new();
                for (key, kind, reads_value) in asked {
                    let value = match reads_value {
                        true => replies.next().unwrap_or(Reply::Nil),
                        false => Reply::Nil,
                    };
                    let ttl = replies.next().unwrap_or(Reply::Nil);
                    match row_of(key, kind, value, &ttl) {
                        Read::Row(row) => rows.push(row),
                        Read::Gone => {}
                        Read::Changed => changed.push(key),
                    }
                }
                todo = changed;
            }
        }
        Ok(rows)
    }
}

/// What [`RedisKeys::ask`] sends: a command, or a pipeline of them.
#[derive(Clone, Copy)]
enum Asked<'a> {
    /// One command: its reply, or its error as the failure.
    One(&'a redis::Cmd),
    /// A pipeline: a reply each.
    Many(&'a redis::Pipeline),
}

/// What a dataset's name reads: the keys SCAN MATCH `pattern` finds, and key `exact` (a name
/// without glob characters is the key of that name and the keys below it).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Target {
    /// The SCAN MATCH pattern.
    pattern: Vec<u8>,
    /// The key read beside those the pattern matches.
    exact: Option<Vec<u8>>,
}

impl Target {
    /// What dataset `name` reads.
    fn of(name: &str) -> Target {
        match name.contains(GLOB) {
            true => Target {
                pattern: name.as_bytes().to_vec(),
                exact: None,
            },
            false => Target {
                pattern: format!("{}:*", escaped(name)).into_bytes(),
                exact: Some(name.as_bytes().to_vec()),
            },
        }
    }
}

/// `text` as a SCAN MATCH pattern that matches it alone.
fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if GLOB.contains(&c) || c == ']' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The dataset key `key` is listed under: `<prefix>:*` for a key with a `:`, else the key
/// itself (as a pattern matching it alone when it has glob characters).
fn dataset_of(key: &str) -> String {
    match key.split_once(':') {
        Some((prefix, _)) => format!("{}:*", escaped(prefix)),
        None => match key.contains(GLOB) {
            true => escaped(key),
            false => key.to_owned(),
        },
    }
}

/// A reply as text (a bulk string read as UTF-8, lossily).
fn reply_text(reply: &Reply) -> Option<String> {
    match reply {
        Reply::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Reply::SimpleString(text) => Some(text.clone()),
        Reply::VerbatimString { text, .. } => Some(text.clone()),
        Reply::Int(n) => Some(n.to_string()),
        Reply::Double(x) => Some(x.to_string()),
        Reply::Boolean(b) => Some(b.to_string()),
        Reply::Okay => Some("OK".to_owned()),
        _ => None,
    }
}

/// A reply's bytes (a key as SCAN gives it).
fn reply_bytes(reply: Reply) -> Option<Vec<u8>> {
    match reply {
        Reply::BulkString(bytes) => Some(bytes),
        Reply::SimpleString(text) => Some(text.into_bytes()),
        _ => None,
    }
}

/// The members of a collection's reply (an array, a RESP3 set, or a RESP3 map's pairs
/// flattened).
fn members(reply: Reply) -> Vec<Reply> {
    match reply {
        Reply::Array(items) | Reply::Set(items) => items,
        Reply::Map(pairs) => pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        _ => Vec::new(),
    }
}

/// A number as JSON (text for what JSON cannot hold: infinities).
fn number(x: f64) -> Value {
    serde_json::Number::from_f64(x)
        .map(Value::Number)
        .unwrap_or_else(|| json!(x.to_string()))
}

/// What the read of a key found.
#[derive(Debug, PartialEq)]
enum Read {
    /// Its row.
    Row(Value),
    /// The key is gone (no value, or an empty collection: Redis keeps none).
    Gone,
    /// Its type is no longer the one TYPE said (the read was refused).
    Changed,
}

/// The row of `key`, of type `kind`, read as `value`, with `ttl` the PTTL reply.
fn row_of(key: &[u8], kind: &str, value: Reply, ttl: &Reply) -> Read {
    if matches!(value, Reply::ServerError(_)) {
        return Read::Changed;
    }
    let ttl = match ttl {
        Reply::Int(ms) if *ms >= 0 => json!(ms),
        Reply::Int(-2) => return Read::Gone,
        _ => Value::Null,
    };
    let mut row = Map::new();
    row.insert(
        "_key".to_owned(),
        json!(String::from_utf8_lossy(key).into_owned()),
    );
    row.insert("_type".to_owned(), json!(kind));
    row.insert("_ttl".to_owned(), ttl);
    match kind {
        "string" => match reply_text(&value) {
            Some(text) => {
                row.insert("value".to_owned(), json!(text));
            }
            None => return Read::Gone,
        },
        "hash" => {
            let fields = members(value);
            if fields.is_empty() {
                return Read::Gone;
            }
            let mut fields = fields.into_iter();
            while let (Some(name), Some(value)) = (fields.next(), fields.next()) {
                let Some(name) = reply_text(&name).filter(|n| !n.is_empty() && !n.starts_with('_'))
                else {
                    continue;
                };
                row.insert(name, reply_text(&value).map_or(Value::Null, Value::String));
            }
        }
        "list" | "set" => {
            let mut items: Vec<String> = members(value).iter().filter_map(reply_text).collect();
            if items.is_empty() {
                return Read::Gone;
            }
            if kind == "set" {
                items.sort();
            }
            row.insert("value".to_owned(), json!(json!(items).to_string()));
        }
        "zset" => {
            let items = members(value);
            if items.is_empty() {
                return Read::Gone;
            }
            // RESP2: member, score, member, score, ...; RESP3: [member, score] pairs.
            let flat: Vec<Reply> = items
                .into_iter()
                .flat_map(|item| match item {
                    Reply::Array(pair) => pair,
                    other => vec![other],
                })
                .collect();
            let scored: Vec<Value> = flat
                .chunks(2)
                .filter_map(|pair| {
                    let member = reply_text(pair.first()?)?;
                    let score = match pair.get(1)? {
                        Reply::Double(x) => *x,
                        other => reply_text(other)?.parse::<f64>().ok()?,
                    };
                    Some(json!([member, number(score)]))
                })
                .collect();
            row.insert("value".to_owned(), json!(Value::Array(scored).to_string()));
        }
        _ => {
            row.insert("value".to_owned(), Value::Null);
        }
    }
    Read::Row(Value::Object(row))
}

/// The rows as a table shows them: the strings' JSON-object values as columns when every
/// string is one (fields empty or beginning with `_` left out), and the values of a column
/// that mixes kinds (text, numbers, booleans, arrays, objects) all as text.
fn shaped(mut rows: Vec<Value>) -> Vec<Value> {
    let strings = rows.iter().filter(|row| row["_type"] == "string");
    let objects = strings.clone().count() > 0
        && strings.clone().all(|row| {
            row["value"]
                .as_str()
                .is_some_and(|text| serde_json::from_str::<Map<String, Value>>(text).is_ok())
        });
    if objects {
        for row in rows.iter_mut().filter(|row| row["_type"] == "string") {
            let fields: Map<String, Value> = row["value"]
                .as_str()
                .and_then(|text| serde_json::from_str(text).ok())
                .unwrap_or_default();
            if let Some(row) = row.as_object_mut() {
                row.remove("value");
                for (name, value) in fields {
                    if !name.is_empty() && !name.starts_with('_') {
                        row.insert(name, value);
                    }
                }
            }
        }
    }
    uniform(rows)
}

/// The rows with each column's values of one kind: a column that mixes them holds each
/// value that is not text as its JSON text.
fn uniform(mut rows: Vec<Value>) -> Vec<Value> {
    fn kind(value: &Value) -> Option<u8> {
        match value {
            Value::Null => None,
            Value::Bool(_) => Some(0),
            Value::Number(_) => Some(1),
            Value::String(_) => Some(2),
            Value::Array(_) => Some(3),
            Value::Object(_) => Some(4),
        }
    }
    let mut kinds: std::collections::HashMap<String, BTreeSet<u8>> = Default::default();
    for row in rows.iter().filter_map(Value::as_object) {
        for (name, value) in row {
            if let Some(k) = kind(value) {
                kinds.entry(name.clone()).or_default().insert(k);
            }
        }
    }
    let mixed: HashSet<&String> = kinds
        .iter()
        .filter(|(_, k)| k.len() > 1)
        .map(|(name, _)| name)
        .collect();
    if mixed.is_empty() {
        return rows;
    }
    for row in rows.iter_mut().filter_map(Value::as_object_mut) {
        for (name, value) in row.iter_mut() {
            if mixed.contains(name) && !matches!(value, Value::Null | Value::String(_)) {
                *value = Value::String(value.to_string());
            }
        }
    }
    rows
}

/// The table of `rows`: `_ttl` a BIGINT and a column of nulls only text, even when no value
/// says so (a pattern that matches no key: no rows, the place columns only).
fn table_of(name: &str, rows: &[Value]) -> Result<Arc<dyn TableProvider>> {
    let batch = match rows.is_empty() {
        true => RecordBatch::new_empty(Arc::new(Schema::new(vec![
            Field::new("_key", DataType::Utf8, true),
            Field::new("_type", DataType::Utf8, true),
            Field::new("_ttl", DataType::Int64, true),
        ]))),
        false => {
            let batch = super::http_json::batch_of(name, rows)?;
            let (fields, columns): (Vec<Arc<Field>>, Vec<ArrayRef>) = batch
                .schema()
                .fields()
                .iter()
                .zip(batch.columns())
                .map(|(field, column)| match field.data_type() {
                    DataType::Null => {
                        let kind = match field.name().as_str() {
                            "_ttl" => DataType::Int64,
                            _ => DataType::Utf8,
                        };
                        (
                            Arc::new(Field::new(field.name(), kind.clone(), true)),
                            new_null_array(&kind, column.len()),
                        )
                    }
                    _ => (field.clone(), column.clone()),
                })
                .unzip();
            RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
                .map_err(|e| Error::Internal(format!("read {name}: {e}")))?
        }
    };
    let table = MemTable::try_new(batch.schema(), vec![vec![batch]])
        .map_err(|e| Error::Internal(e.to_string()))?;
    Ok(Arc::new(table))
}

#[async_trait]
impl Source for RedisKeys {
    async fn datasets(&self) -> Result<Vec<String>> {
        let stage = format!("list the keys of {}", self.address);
        let mut names = BTreeSet::new();
        let (mut cursor, mut seen) = (0, 0);
        loop {
            let (next, keys) = self.scan(&stage, cursor, None).await?;
            seen += keys.len();
            for key in keys {
                names.insert(dataset_of(&String::from_utf8_lossy(&key)));
            }
            if next == 0 || seen >= LISTED_KEYS {
                return Ok(names.into_iter().collect());
            }
            cursor = next;
        }
    }

    fn messages(&self) -> Option<&dyn Messages> {
        Some(self)
    }

    async fn table(&self, _state: &SessionState, name: &str) -> Result<Arc<dyn TableProvider>> {
        let target = Target::of(name);
        let stage = format!("read the keys {name} of {}", self.address);
        let keys = self.keys_of(&stage, &target, self.max_records).await?;
        let rows = shaped(self.rows_of(&stage, &keys).await?);
        table_of(name, &rows)
    }
}

/// An import's reading of a key pattern, page by SCAN page (see the module documentation).
/// A batch holds at most the keys asked for: a page is split over batches when it has more,
/// and its batches carry the cursor it began at until its last (a resumed read reads it again).
struct KeyReader<'a> {
    /// The source.
    redis: &'a RedisKeys,
    /// What the dataset's name reads.
    target: Target,
    /// The stage failures name.
    stage: String,
    /// The cursor of the next SCAN page.
    next: u64,
    /// The cursor the page in `pending` began at.
    page: u64,
    /// Keys of the last page not given yet.
    pending: VecDeque<Vec<u8>>,
    /// Whether a page was read since the start (cursor 0 begins the scan only at first).
    started: bool,
    /// Whether SCAN came back to 0.
    done: bool,
}

impl KeyReader<'_> {
    /// The cursor a job keeps after the keys given so far.
    fn cursor(&self) -> Value {
        match (self.pending.is_empty(), self.done) {
            (false, _) => json!({"scan": self.page}),
            (true, true) => json!({"scan": 0, "done": true}),
            (true, false) => json!({"scan": self.next}),
        }
    }

    /// Reads the next SCAN page into `pending` (the first page of a scan begins with the
    /// exact key, when the name has one).
    async fn page(&mut self) -> Result<()> {
        let (next, keys) = self
            .redis
            .scan(&self.stage, self.next, Some(&self.target.pattern))
            .await?;
        if !self.started && self.next == 0 {
            self.pending.extend(self.target.exact.iter().cloned());
        }
        let mut seen: HashSet<&[u8]> = HashSet::new();
        let fresh: Vec<Vec<u8>> = keys
            .iter()
            .filter(|key| seen.insert(key.as_slice()))
            .cloned()
            .collect();
        self.pending.extend(fresh);
        self.page = self.next;
        self.next = next;
        self.started = true;
        self.done = next == 0;
        Ok(())
    }
}

#[async_trait]
impl Messages for RedisKeys {
    fn prefix(&self) -> &'static str {
        "redis"
    }

    async fn reader(&self, name: &str, _job: &str, cursor: &Value) -> Result<Box<dyn Reader + '_>> {
        let next = cursor["scan"].as_u64().unwrap_or(0);
        Ok(Box::new(KeyReader {
            redis: self,
            target: Target::of(name),
            stage: format!("read the keys {name} of {}", self.address),
            next,
            page: next,
            pending: VecDeque::new(),
            started: next != 0,
            done: cursor["done"].as_bool().unwrap_or(false),
        }))
    }
}

#[async_trait]
impl Reader for KeyReader<'_> {
    async fn next(&mut self, max: usize, wait: Duration) -> Result<Batch> {
        let began = Instant::now();
        let max = max.max(1);
        let mut keys = Vec::new();
        loop {
            while keys.len() < max {
                match self.pending.pop_front() {
                    Some(key) => keys.push(key),
                    None => break,
                }
            }
            if keys.len() >= max || self.done {
                break;
            }
            // Pages without a key may follow each other: an empty batch (its cursor moved on)
            // after a while, and the job asks again.
            if began.elapsed() >= wait.max(LEAST_SCAN) {
                break;
            }
            self.page().await?;
        }
        let mut rows = self.redis.rows_of(&self.stage, &keys).await?;
        for row in &mut rows {
            let key = row["_key"].as_str().unwrap_or_default().to_owned();
            row["_id"] = json!(format!("{}:{key}", self.redis.db));
        }
        Ok(Batch {
            rows: shaped(rows),
            cursor: self.cursor(),
            at_end: self.done && self.pending.is_empty(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_patterns_or_a_key_and_those_below_it() {
        assert_eq!(
            Target::of("user:*"),
            Target {
                pattern: b"user:*".to_vec(),
                exact: None
            }
        );
        assert_eq!(
            Target::of("user"),
            Target {
                pattern: b"user:*".to_vec(),
                exact: Some(b"user".to_vec())
            }
        );
        assert_eq!(Target::of("a]b").pattern, b"a\\]b:*".to_vec());
        assert_eq!(dataset_of("user:1:name"), "user:*");
        assert_eq!(dataset_of("counter"), "counter");
        assert_eq!(dataset_of("odd*key"), "odd\\*key");
        assert_eq!(dataset_of("a?b:1"), "a\\?b:*");
        assert_eq!(Target::of(&dataset_of("odd*key")).exact, None);
    }

    #[test]
    fn keys_become_rows_by_type() {
        let bulk = |t: &str| Reply::BulkString(t.as_bytes().to_vec());
        let Read::Row(row) = row_of(b"k", "string", bulk("hi"), &Reply::Int(-1)) else {
            panic!("no row");
        };
        assert_eq!(
            row,
            json!({"_key": "k", "_type": "string", "_ttl": null, "value": "hi"})
        );
        let hash = Reply::Array(vec![bulk("a"), bulk("1"), bulk("_x"), bulk("2")]);
        let Read::Row(row) = row_of(b"h", "hash", hash, &Reply::Int(5000)) else {
            panic!("no row");
        };
        assert_eq!(
            row,
            json!({"_key": "h", "_type": "hash", "_ttl": 5000, "a": "1"})
        );
        let set = Reply::Set(vec![bulk("b"), bulk("a")]);
        let Read::Row(row) = row_of(b"s", "set", set, &Reply::Int(-1)) else {
            panic!("no row");
        };
        assert_eq!(row["value"], r#"["a","b"]"#);
        let zset = Reply::Array(vec![bulk("m"), bulk("1.5"), bulk("n"), bulk("inf")]);
        let Read::Row(row) = row_of(b"z", "zset", zset, &Reply::Int(-1)) else {
            panic!("no row");
        };
        assert_eq!(row["value"], r#"[["m",1.5],["n","inf"]]"#);
        assert_eq!(
            row_of(b"g", "string", Reply::Nil, &Reply::Int(-2)),
            Read::Gone
        );
        assert_eq!(
            row_of(b"g", "list", Reply::Array(vec![]), &Reply::Int(-1)),
            Read::Gone
        );
    }

    #[test]
    fn json_strings_become_columns_and_mixed_columns_text() {
        let rows = vec![
            json!({"_key": "a", "_type": "string", "value": "{\"n\": 1, \"_k\": 2, \"\": 3}"}),
            json!({"_key": "b", "_type": "hash", "n": "two"}),
            json!({"_key": "c", "_type": "list", "value": "[\"x\"]"}),
        ];
        let shaped = shaped(rows);
        assert_eq!(shaped[0], json!({"_key": "a", "_type": "string", "n": "1"}));
        assert_eq!(shaped[1]["n"], "two");
        assert_eq!(shaped[2]["value"], "[\"x\"]");
        super::super::http_json::batch_of("t", &shaped).unwrap();
        let plain = vec![
            json!({"_key": "a", "_type": "string", "value": "{\"n\": 1}"}),
            json!({"_key": "b", "_type": "string", "value": "plain"}),
        ];
        assert_eq!(super::shaped(plain.clone()), plain);
    }

    #[test]
    fn refusals_are_classified() {
        use crate::error::ErrorCode;
        let code = |text: &str| refusal("connect to x", text).code();
        assert_eq!(
            code("WRONGPASS: invalid username-password pair or user is disabled."),
            ErrorCode::Unauthorized
        );
        assert_eq!(
            code("NOAUTH: Authentication required."),
            ErrorCode::Unauthorized
        );
        assert_eq!(
            code("NOPERM: this user has no permissions to run the 'scan' command"),
            ErrorCode::Forbidden
        );
        assert_eq!(
            code("Connection refused (os error 111)"),
            ErrorCode::SourceFailed
        );
    }

    /// The local server (127.0.0.1:6379, which scripts/test starts) with keys under a prefix
    /// of this test's own; removed on drop.
    struct Keys {
        prefix: String,
    }

    impl Keys {
        fn new(name: &str) -> Keys {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos();
            Keys {
                prefix: format!("strata_unit_{name}_{}_{nanos}", std::process::id()),
            }
        }

        fn cli(&self, args: &[&str]) {
            let out = std::process::Command::new("redis-cli")
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        }
    }

    impl Drop for Keys {
        fn drop(&mut self) {
            let _ = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "redis-cli --scan --pattern '{}:*' | xargs -r redis-cli del",
                    self.prefix
                ))
                .output();
        }
    }

    async fn local() -> RedisKeys {
        let config = json!({"url": "redis://127.0.0.1:6379/0"});
        RedisKeys::open(config.as_object().unwrap()).await.unwrap()
    }

    #[tokio::test]
    async fn a_reader_splits_pages_and_resumes_at_the_page_it_was_in() {
        const KEYS: usize = 3000;
        const BATCH: usize = 400;
        let keys = Keys::new("pages");
        let mut script = String::new();
        for n in 0..KEYS {
            script.push_str(&format!("SET {}:{n} {n}\n", keys.prefix));
        }
        let mut cli = std::process::Command::new("redis-cli")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut cli.stdin.take().unwrap(), script.as_bytes()).unwrap();
        assert!(cli.wait().unwrap().success());
        let redis = local().await;
        let name = format!("{}:*", keys.prefix);
        let mut reader = redis.reader(&name, "job", &Value::Null).await.unwrap();
        let mut ids = BTreeSet::new();
        let mut cursors = Vec::new();
        let mut batches = 0;
        loop {
            let batch = reader.next(BATCH, Duration::from_secs(1)).await.unwrap();
            assert!(batch.rows.len() <= BATCH);
            for row in &batch.rows {
                assert!(ids.insert(row["_id"].as_str().unwrap().to_owned()));
                assert_eq!(row["_type"], "string");
            }
            cursors.push(batch.cursor.clone());
            batches += 1;
            if batch.at_end {
                assert_eq!(batch.cursor, json!({"scan": 0, "done": true}));
                break;
            }
            assert!(batches < 1000);
        }
        assert_eq!(ids.len(), KEYS);
        assert!(ids.contains(&format!("0:{}:7", keys.prefix)));
        // Resumed at any recorded cursor, the rest of the keys come (some again).
        // (Several SCAN pages: a cursor within the scan.)
        let middle = cursors
            .iter()
            .find(|c| c["scan"].as_u64().is_some_and(|n| n > 0))
            .unwrap();
        let mut resumed = redis.reader(&name, "job", middle).await.unwrap();
        let mut again = BTreeSet::new();
        loop {
            let batch = resumed.next(BATCH, Duration::from_secs(1)).await.unwrap();
            again.extend(
                batch
                    .rows
                    .iter()
                    .map(|r| r["_id"].as_str().unwrap().to_owned()),
            );
            if batch.at_end {
                break;
            }
        }
        assert!(!again.is_empty() && again.len() < KEYS, "{}", again.len());
        let done = redis
            .reader(&name, "job", &json!({"scan": 0, "done": true}))
            .await
            .unwrap()
            .next(40, Duration::from_secs(1))
            .await
            .unwrap();
        assert!(done.at_end && done.rows.is_empty());
    }

    #[tokio::test]
    async fn a_name_without_glob_reads_its_key_and_those_below_it() {
        let keys = Keys::new("exact");
        let p = &keys.prefix;
        keys.cli(&["SET", p, "top"]);
        keys.cli(&["HSET", &format!("{p}:1"), "name", "ann", "age", "7"]);
        keys.cli(&["RPUSH", &format!("{p}:list"), "a", "b"]);
        keys.cli(&["ZADD", &format!("{p}:z"), "2", "two", "1", "one"]);
        let redis = local().await;
        let found = redis.keys_of("t", &Target::of(p), 100).await.unwrap().len();
        assert_eq!(found, 4);
        let mut rows = redis
            .rows_of("t", &redis.keys_of("t", &Target::of(p), 100).await.unwrap())
            .await
            .unwrap();
        rows.sort_by_key(|r| r["_key"].as_str().unwrap().to_owned());
        assert_eq!(rows[0]["value"], "top");
        assert_eq!(rows[1]["name"], "ann");
        assert_eq!(rows[2]["value"], r#"["a","b"]"#);
        assert_eq!(rows[3]["value"], r#"[["one",1.0],["two",2.0]]"#);
        // A key gone is skipped; a read refused for a changed type is told apart.
        let gone = redis
            .rows_of("t", &[format!("{p}:gone").into_bytes()])
            .await
            .unwrap();
        assert!(gone.is_empty());
        let mut wrong = redis::pipe();
        wrong.ignore_errors().cmd("HGETALL").arg(p.as_str());
        let reply = redis.ask("t", Asked::Many(&wrong)).await.unwrap().remove(0);
        assert!(matches!(reply, Reply::ServerError(_)), "{reply:?}");
        assert_eq!(row_of(b"x", "hash", reply, &Reply::Int(-1)), Read::Changed);
        keys.cli(&["DEL", p]);
        let names = redis.datasets().await.unwrap();
        assert!(names.contains(&format!("{p}:*")), "{names:?}");
        assert!(!names.contains(p));
    }
}
