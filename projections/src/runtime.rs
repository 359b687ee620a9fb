//! The projector runtime: drives one projection from its checkpoint along its partition.
//!
//! [`Projector::start`] replays the log from the projection's checkpoint up to the partition's
//! current end before it returns, so a node never serves state older than its log. A task then
//! follows the partition's tail, applies each batch (fenced by leader epoch) on a blocking
//! thread, and publishes the new snapshot. Writers wait with [`Projector::wait_for`] until their
//! own event is applied, which gives read-your-writes.

use std::sync::Arc;

use futures::StreamExt;
use strata_log::{
    CommitLog, Envelope, PartitionId,
    fence::{EpochFence, Verdict},
};
use tokio::{sync::watch, task::JoinHandle};

use crate::{
    error::{Error, Result},
    projection::{Checkpoint, Projection},
};

/// Events applied per batch while catching up.
const CATCH_UP_BATCH: usize = 1024;
/// Events applied per batch while following the tail.
const TAIL_BATCH: usize = 256;

#[derive(Clone)]
struct Applied<S> {
    checkpoint: Checkpoint,
    snapshot: S,
    failure: Option<Arc<str>>,
    /// When the projection stopped: the events of the batch it could not apply, as (offset,
    /// epoch of the leader that wrote it), so that a writer waiting for an event behind them
    /// can tell whether a newer leader wrote in front of it (see [`Projector::epoch_before`]).
    unapplied: Arc<[(u64, u64)]>,
    /// The offset of the leader-epoch marker that set `checkpoint.epoch`, when this projector
    /// applied it (see [`Projector::epoch_marker`]).
    marker: Option<u64>,
}

/// A running projection: its latest snapshot, and a task following its partition.
pub struct Projector<S> {
    partition: PartitionId,
    applied: watch::Receiver<Applied<S>>,
    publish: Arc<watch::Sender<Applied<S>>>,
    task: JoinHandle<()>,
}

/// Republishes a projection's snapshot when the projection's own background work (a flush, a
/// compaction) changed how its state is stored, not what it holds: readers then get the new
/// layout, and the old one (files a compaction replaced, say) can be let go without waiting
/// for the next event.
#[derive(Clone)]
pub struct Refresher<S> {
    publish: Arc<watch::Sender<Applied<S>>>,
}

impl<S: Clone> Refresher<S> {
    /// The snapshot readers get now.
    pub fn published(&self) -> S {
        self.publish.borrow().snapshot.clone()
    }

    /// Replaces the published snapshot by `current()`, called while no event can be published,
    /// so it must return a snapshot holding at least every event applied so far (the
    /// projection's latest state).
    pub fn refresh(&self, current: impl FnOnce() -> S) {
        self.publish
            .send_modify(|applied| applied.snapshot = current());
    }
}

impl<S> std::fmt::Debug for Projector<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Projector")
            .field("partition", &self.partition)
            .field("checkpoint", &self.applied.borrow().checkpoint)
            .finish()
    }
}

impl<S> Drop for Projector<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<S: Clone + Send + Sync + 'static> Projector<S> {
    /// Catches `projection` up with the end of its partition, then follows it in the background.
    pub async fn start<P>(log: Arc<dyn CommitLog>, projection: P) -> Result<Self>
    where
        P: Projection<Snapshot = S>,
    {
        let partition = projection.partition().clone();
        let mut checkpoint = projection.checkpoint();
        let mut projection = projection;
        let end = log.high_water_mark(&partition).await?;
        if checkpoint.next_offset > end {
            return Err(Error::Corrupt {
                key: partition.to_string(),
                reason: format!(
                    "projection checkpoint {} is beyond the end of the log ({end}); rebuild it",
                    checkpoint.next_offset
                ),
            });
        }
        let mut marker = None;
        while checkpoint.next_offset < end {
            let events = log
                .read(&partition, checkpoint.next_offset, CATCH_UP_BATCH)
                .await?;
            if events.is_empty() {
                break;
            }
            let batch_marker;
            (projection, checkpoint, batch_marker) =
                apply_batch(projection, checkpoint, events).await?;
            marker = batch_marker.or(marker);
        }
        tracing::debug!(%partition, next_offset = checkpoint.next_offset, "projection caught up");
        let (publish, applied) = watch::channel(Applied {
            checkpoint,
            snapshot: projection.snapshot(),
            failure: None,
            unapplied: Arc::default(),
            marker,
        });
        let publish = Arc::new(publish);
        let task = tokio::spawn(follow(log, projection, checkpoint, marker, publish.clone()));
        Ok(Projector {
            partition,
            applied,
            publish,
            task,
        })
    }

    pub fn partition(&self) -> &PartitionId {
        &self.partition
    }

    pub fn refresher(&self) -> Refresher<S> {
        Refresher {
            publish: self.publish.clone(),
        }
    }

    /// The latest applied state.
    pub fn snapshot(&self) -> S {
        self.applied.borrow().snapshot.clone()
    }

    pub fn checkpoint(&self) -> Checkpoint {
        self.applied.borrow().checkpoint
    }

    /// The offset of the leader-epoch marker that set the newest epoch, if this projector
    /// applied it: a leader that appended a marker at offset `o` holds the partition exactly
    /// when this is `Some(o)` once `o` is applied. A marker of the same epoch appended by
    /// another leader just before it, or a newer one after it, makes it differ.
    pub fn epoch_marker(&self) -> Option<u64> {
        self.applied.borrow().marker
    }

    /// The newest leader epoch among the events before `offset` that this projector read:
    /// those it applied, and, once it stopped, those of the batch it could not apply. A
    /// writer whose event at `offset` was not applied (`offset` is at or past the
    /// checkpoint) learns so whether a newer leader wrote in front of it (its event is then
    /// void for every reader of the partition).
    pub fn epoch_before(&self, offset: u64) -> u64 {
        let applied = self.applied.borrow();
        let unapplied = applied.unapplied.iter().filter(|(at, _)| *at < offset);
        unapplied
            .map(|(_, epoch)| *epoch)
            .fold(applied.checkpoint.epoch, u64::max)
    }

    /// The latest applied state with the checkpoint it is at, read together.
    pub fn applied(&self) -> (Checkpoint, S) {
        let applied = self.applied.borrow();
        (applied.checkpoint, applied.snapshot.clone())
    }

    /// Waits until the event at `offset` is applied (or fenced), and returns the checkpoint and
    /// snapshot right after it (or after later events). An error only when the projection
    /// stopped before it.
    pub async fn wait_for(&self, offset: u64) -> Result<(Checkpoint, S)> {
        let mut applied = self.applied.clone();
        loop {
            {
                let current = applied.borrow_and_update();
                // Applied before the projection stopped on a later event (a successor's rows in
                // a definition this projection lacks, say): it is applied, as the caller asked.
                if current.checkpoint.next_offset > offset {
                    return Ok((current.checkpoint, current.snapshot.clone()));
                }
                if let Some(cause) = &current.failure {
                    return Err(Error::Stopped {
                        partition: self.partition.to_string(),
                        cause: cause.to_string(),
                    });
                }
            }
            if applied.changed().await.is_err() {
                return Err(Error::Stopped {
                    partition: self.partition.to_string(),
                    cause: "the projector stopped".to_owned(),
                });
            }
        }
    }
}

async fn follow<P: Projection>(
    log: Arc<dyn CommitLog>,
    mut projection: P,
    mut checkpoint: Checkpoint,
    mut marker: Option<u64>,
    publish: Arc<watch::Sender<Applied<P::Snapshot>>>,
) {
    let partition = projection.partition().clone();
    let mut tail =
        strata_log::tail(log, partition.clone(), checkpoint.next_offset).ready_chunks(TAIL_BATCH);
    while let Some(chunk) = tail.next().await {
        let events: Result<Vec<Envelope>, _> = chunk.into_iter().collect();
        let mut written_by = Vec::new();
        let outcome = match events {
            Ok(events) => {
                written_by = events.iter().map(|e| (e.offset, e.epoch)).collect();
                apply_batch(projection, checkpoint, events).await
            }
            Err(strata_log::Error::Closed) => return,
            Err(error) => Err(error.into()),
        };
        match outcome {
            Ok((applied, next, batch_marker)) => {
                projection = applied;
                checkpoint = next;
                marker = batch_marker.or(marker);
                publish.send_replace(Applied {
                    checkpoint,
                    snapshot: projection.snapshot(),
                    failure: None,
                    unapplied: Arc::default(),
                    marker,
                });
            }
            Err(error) => {
                tracing::error!(%partition, %error, "projection stopped");
                publish.send_modify(|applied| {
                    applied.failure = Some(error.to_string().into());
                    applied.unapplied = written_by.into();
                });
                return;
            }
        }
    }
}

/// Fences `events` (consecutive, from `checkpoint.next_offset`) and applies the admitted ones on
/// a blocking thread; also returns the offset of the last marker that moved the fence.
async fn apply_batch<P: Projection>(
    mut projection: P,
    checkpoint: Checkpoint,
    events: Vec<Envelope>,
) -> Result<(P, Checkpoint, Option<u64>)> {
    let Some(last) = events.last().map(|e| e.offset) else {
        return Ok((projection, checkpoint, None));
    };
    let first = events.first().map_or(last, |e| e.offset);
    if first != checkpoint.next_offset || last + 1 - first != events.len() as u64 {
        return Err(Error::Corrupt {
            key: projection.partition().to_string(),
            reason: format!(
                "expected events from offset {}, got {first}..={last}",
                checkpoint.next_offset
            ),
        });
    }
    let mut fence = EpochFence::at(checkpoint.epoch);
    let mut marker = None;
    let admitted: Vec<Envelope> = events
        .into_iter()
        .filter(|event| match fence.judge(event) {
            Verdict::Admit => true,
            Verdict::Marker => {
                marker = Some(event.offset);
                false
            }
            Verdict::Fenced => false,
        })
        .collect();
    let next = Checkpoint {
        next_offset: last + 1,
        epoch: fence.newest(),
    };
    tokio::task::spawn_blocking(move || {
        projection.apply(&admitted, next)?;
        Ok((projection, next, marker))
    })
    .await
    .map_err(|join| Error::Stopped {
        partition: "?".to_owned(),
        cause: join.to_string(),
    })?
}
