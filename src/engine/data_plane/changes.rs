//! Change streams: the events of a database's partitions as they are appended, for
//! `GET /v1/changes/{database}` (docs/change-streams.md).
//!
//! A stream follows either one table's partition or the whole database (its catalog and every
//! table, including tables created while the stream runs). Each partition is followed by a task
//! of its own that reads the log's tail, drops what the leader-epoch fence voids (and the
//! markers themselves, which change nothing), and renders events as JSON; the stream interleaves
//! them, each partition in offset order.
//!
//! Every event has an id from which the stream resumes with no gap and no duplicate: for a table
//! stream its offset; for a database stream a cursor naming the last offset delivered from each
//! partition so far (`_catalog:4,orders:17`). Streams read only the log, so they hold no database
//! runtime and do not keep a database from hibernating. They end when the server shuts down.

use std::{
    collections::{BTreeMap, HashSet},
    sync::Arc,
};

use futures::StreamExt;
use serde_json::Value;
use strata_log::{CommitLog, Envelope, PartitionId, envelope::Body, fence::Verdict};
use tokio::{
    sync::{mpsc, watch},
    task::JoinSet,
};

use crate::engine::{Engine, Principal};
use crate::{
    error::{Error, Result},
    names,
};

/// The name a database's catalog partition has in cursors.
const CATALOG: &str = "_catalog";
/// Events buffered between the partitions' tasks and a slow client.
const BUFFER: usize = 256;

/// Where a stream starts.
#[derive(Clone, Debug, Default)]
pub struct StreamStart {
    /// `from_offset`: the first offset of a table stream.
    pub from_offset: Option<u64>,
    /// `Last-Event-ID`: the id of the last event the client has; wins over `from_offset`.
    pub last_event_id: Option<String>,
}

/// One event of a change stream.
#[derive(Debug)]
pub struct Change {
    /// The SSE id, to resume after this event.
    pub id: String,
    /// The event as docs/change-streams.md shows it.
    pub data: Value,
}

/// What a partition's task sends: one rendered event, or why it stopped.
struct Item {
    /// The partition's name in cursors: the table name, or `_catalog`.
    name: String,
    offset: u64,
    /// A table this event created (database streams follow it from now on).
    created: Option<String>,
    data: Value,
}

/// A running change stream.
pub struct ChangeStream {
    log: Arc<dyn CommitLog>,
    account: String,
    database: String,
    /// Followed partitions' names (table names and `_catalog`).
    followed: HashSet<String>,
    /// `None` for a table stream; the last offset delivered per partition for a database stream.
    cursor: Option<BTreeMap<String, u64>>,
    items: mpsc::Receiver<Result<Item>>,
    sender: mpsc::Sender<Result<Item>>,
    tasks: JoinSet<()>,
    stop: watch::Receiver<bool>,
}

impl Engine {
    /// Opens a change stream over `database`, or only over `table` of it.
    pub async fn changes(
        &self,
        principal: &Principal,
        database: &str,
        table: Option<&str>,
        start: StreamStart,
    ) -> Result<ChangeStream> {
        let database = self.ready_database(principal, database)?;
        let tables: Vec<String> = {
            let runtime = self.runtime(&database).await?;
            runtime.catalog.snapshot().tables.keys().cloned().collect()
        };
        let (sender, items) = mpsc::channel(BUFFER);
        let mut stream = ChangeStream {
            log: self.log.clone(),
            account: database.account.clone(),
            database: database.name.clone(),
            followed: HashSet::new(),
            cursor: None,
            items,
            sender,
            tasks: JoinSet::new(),
            stop: self.streams.subscribe(),
        };
        match table {
            Some(table) => {
                names::check_table(table)?;
                if !tables.iter().any(|t| t == table) {
                    return Err(Error::TableNotFound(table.to_owned()));
                }
                let from = match (&start.last_event_id, start.from_offset) {
                    (Some(id), _) => table_resume(id)?,
                    (None, from) => from.unwrap_or(0),
                };
                let partition = stream.partition(table);
                let end = self.log.high_water_mark(&partition).await?;
                if from > end {
                    return Err(Error::BadRequest(format!(
                        "from_offset {from} is beyond the end of table {table:?}'s log ({end})"
                    )));
                }
                stream.follow(table.to_owned(), from);
            }
            None => {
                if start.from_offset.is_some() && start.last_event_id.is_none() {
                    return Err(Error::BadRequest(
                        "from_offset needs a table; a database stream resumes from the id of its last event (Last-Event-ID)"
                            .to_owned(),
                    ));
                }
                let resumed = match &start.last_event_id {
                    Some(id) => database_resume(id)?,
                    None => BTreeMap::new(),
                };
                let prefix = PartitionId::database_prefix(&database.account, &database.name);
                let mut names: Vec<String> = self
                    .log
                    .partitions()
                    .await?
                    .iter()
                    .filter_map(|p| p.as_str().strip_prefix(&prefix).map(str::to_owned))
                    .collect();
                names.extend(tables);
                names.extend(resumed.keys().cloned());
                names.push(CATALOG.to_owned());
                for name in names {
                    let from = resumed.get(&name).map_or(0, |last| last + 1);
                    stream.follow(name, from);
                }
                stream.cursor = Some(resumed);
            }
        }
        Ok(stream)
    }

    /// Ends every change stream (the server is shutting down).
    pub fn stop_streams(&self) {
        self.streams.send_replace(true);
    }
}

impl ChangeStream {
    fn partition(&self, name: &str) -> PartitionId {
        match name {
            CATALOG => PartitionId::catalog(&self.account, &self.database),
            table => PartitionId::table(&self.account, &self.database, table),
        }
    }

    /// Starts following a partition (once) from `from`.
    fn follow(&mut self, name: String, from: u64) {
        if !self.followed.insert(name.clone()) {
            return;
        }
        let partition = self.partition(&name);
        let log = self.log.clone();
        let sender = self.sender.clone();
        let stop = self.stop.clone();
        self.tasks
            .spawn(follow(log, partition, name, from, sender, stop));
    }

    /// The next event; `None` once the server shuts down. An error ends the stream.
    pub async fn next(&mut self) -> Option<Result<Change>> {
        let item = tokio::select! {
            item = self.items.recv() => item?,
            () = stopped(&mut self.stop) => return None,
        };
        let item = match item {
            Ok(item) => item,
            Err(error) => return Some(Err(error)),
        };
        let id = match &mut self.cursor {
            None => item.offset.to_string(),
            Some(cursor) => {
                cursor.insert(item.name.clone(), item.offset);
                cursor
                    .iter()
                    .map(|(name, offset)| format!("{name}:{offset}"))
                    .collect::<Vec<_>>()
                    .join(",")
            }
        };
        if let (Some(table), Some(_)) = (item.created, &self.cursor) {
            self.follow(table, 0);
        }
        Some(Ok(Change {
            id,
            data: item.data,
        }))
    }
}

/// Follows one partition from `from`, sending its admitted events until the stream is dropped,
/// the server stops, or the log fails.
async fn follow(
    log: Arc<dyn CommitLog>,
    partition: PartitionId,
    name: String,
    from: u64,
    sender: mpsc::Sender<Result<Item>>,
    mut stop: watch::Receiver<bool>,
) {
    let run = async {
        let mut fence = strata_log::fence::fence_before(log.as_ref(), &partition, from).await?;
        let mut tail = strata_log::tail(log.clone(), partition.clone(), from);
        while let Some(event) = tail.next().await {
            let event = event?;
            if fence.judge(&event) != Verdict::Admit {
                continue;
            }
            let item = render(&name, &event)?;
            if sender.send(Ok(item)).await.is_err() {
                break;
            }
        }
        Ok::<(), Error>(())
    };
    tokio::select! {
        outcome = run => match outcome {
            Ok(()) | Err(Error::Log(strata_log::Error::Closed)) => {}
            Err(error) => {
                let _ = sender.send(Err(error)).await;
            }
        },
        () = stopped(&mut stop) => {}
    }
}

/// Resolves once the server stops (the guard `wait_for` returns is not held across awaits).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

fn render(name: &str, event: &Envelope) -> Result<Item> {
    let data = strata_projections::changes::event_json(event).map_err(|error| {
        Error::Internal(format!("cannot render event {}: {error}", event.offset))
    })?;
    let created = match &event.body {
        Some(Body::TableCreated(created)) => Some(created.name.clone()),
        _ => None,
    };
    Ok(Item {
        name: name.to_owned(),
        offset: event.offset,
        created,
        data,
    })
}

/// The offset after the Last-Event-ID of a table stream.
fn table_resume(id: &str) -> Result<u64> {
    id.trim().parse::<u64>().map(|last| last + 1).map_err(|_| {
        Error::BadRequest(format!(
            "Last-Event-ID {id:?} is not an event id of a table stream (an offset)"
        ))
    })
}

/// The last offsets a database stream's Last-Event-ID names, by partition name.
fn database_resume(id: &str) -> Result<BTreeMap<String, u64>> {
    let bad = || {
        Error::BadRequest(format!(
            "Last-Event-ID {id:?} is not an event id of a database stream (name:offset,...)"
        ))
    };
    let mut cursor = BTreeMap::new();
    for part in id.trim().split(',').filter(|p| !p.is_empty()) {
        let (name, offset) = part.split_once(':').ok_or_else(bad)?;
        let offset: u64 = offset.parse().map_err(|_| bad())?;
        if name != CATALOG && names::check_table(name).is_err() {
            return Err(bad());
        }
        cursor.insert(name.to_owned(), offset);
    }
    Ok(cursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_resume_after_the_event_they_name() {
        assert_eq!(table_resume("41").unwrap(), 42);
        assert!(table_resume("orders:41").is_err());
        let cursor = database_resume("_catalog:3,orders:41").unwrap();
        assert_eq!(cursor.get("_catalog"), Some(&3));
        assert_eq!(cursor.get("orders"), Some(&41));
        assert!(database_resume("orders").is_err());
        assert!(database_resume("../x:1").is_err());
        assert!(database_resume("").unwrap().is_empty());
    }
}
