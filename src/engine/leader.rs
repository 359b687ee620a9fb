//! The leader of a partition: its single writer.
//!
//! A write takes the leader's permit (one write at a time; refused as busy when another is in
//! flight, after an optional short wait), validates against the projection, which is caught up
//! with everything this leader wrote, appends exactly one event, and returns only once that event
//! is durable and applied to the projection (read-your-writes).
//!
//! A leader takes the partition over when it hands out its first permit, and again whenever its
//! projection shows that another node took the partition since: it appends a `LeaderEpoch` marker
//! with an epoch above every epoch its projection has seen, waits until that marker is applied,
//! and stamps its epoch on its events. So the state a permit shows (the next row id, the tables
//! there are) holds every event admitted before the marker, and no event of an older leader after
//! it counts. If after applying its event the projection's epoch is newer than the leader's,
//! another node took the partition over meanwhile: the write is not acknowledged (see
//! `strata_log::fence`), and the next permit takes the partition back.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use strata_log::{CommitLog, Envelope, LeaderEpoch, PartitionId, envelope::Body};
use strata_projections::Projector;
use tokio::sync::{Mutex, MutexGuard};

use crate::{
    error::{Error, Result},
    metrics::Metrics,
};

/// Who caused a write and in which request: stamped on its event, for audits.
#[derive(Clone, Debug)]
pub struct Origin {
    /// "key:<id>", "admin" or "system".
    pub principal: String,
    pub request_id: String,
}

impl Origin {
    pub fn admin() -> Origin {
        Origin {
            principal: "admin".to_owned(),
            request_id: uuid::Uuid::now_v7().to_string(),
        }
    }

    pub fn system() -> Origin {
        Origin {
            principal: "system".to_owned(),
            request_id: uuid::Uuid::now_v7().to_string(),
        }
    }
}

pub struct Leader<S> {
    log: Arc<dyn CommitLog>,
    projector: Projector<S>,
    node: String,
    /// The epoch this leader writes with, once it has taken the partition over.
    permit: Mutex<Option<u64>>,
    /// Test aid: how long the permit is kept after each write.
    hold: Duration,
    metrics: Arc<Metrics>,
    /// Set when another leader of the same partition on this node replaced this one: it hands
    /// out no more permits (taking the partition back would fence its successor).
    retired: AtomicBool,
}

/// The right to write to a partition, held for the duration of one write.
pub struct Permit<'a, S> {
    leader: &'a Leader<S>,
    epoch: MutexGuard<'a, Option<u64>>,
}

impl<S: Clone + Send + Sync + 'static> Leader<S> {
    pub fn new(
        log: Arc<dyn CommitLog>,
        projector: Projector<S>,
        node: String,
        hold: Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        Leader {
            log,
            projector,
            node,
            permit: Mutex::new(None),
            hold,
            metrics,
            retired: AtomicBool::new(false),
        }
    }

    /// Hands out no more permits: a successor on this node writes the partition from now on.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }

    /// Waits, at most `wait`, for the write in flight (if any) to end; false when it did not.
    /// A retired leader's successor on this node waits so before it writes: otherwise the
    /// successor's first events (rows in columns this leader's definition lacks) could land
    /// in the same read of the log as this leader's last event, and this leader's projection,
    /// stopping on them, could not tell its writer that its own event was applied.
    pub async fn drain(&self, wait: Duration) -> bool {
        tokio::time::timeout(wait, self.permit.lock()).await.is_ok()
    }

    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    fn check_retired(&self) -> Result<()> {
        match self.is_retired() {
            false => Ok(()),
            true => Err(Error::Unavailable(format!(
                "the writer of {} was replaced while this write waited; retry it",
                self.partition()
            ))),
        }
    }

    pub fn partition(&self) -> &PartitionId {
        self.projector.partition()
    }

    /// The latest applied state, for reads.
    pub fn snapshot(&self) -> S {
        self.projector.snapshot()
    }

    pub fn projector(&self) -> &Projector<S> {
        &self.projector
    }

    /// Takes the permit, waiting at most `wait` for a write in flight; `None` when it stays busy.
    /// Takes the partition over first when this leader does not hold it.
    pub async fn try_permit(&self, wait: Duration) -> Result<Option<Permit<'_, S>>> {
        let epoch = match self.permit.try_lock() {
            Ok(epoch) => epoch,
            Err(_) if wait.is_zero() => return Ok(None),
            Err(_) => match tokio::time::timeout(wait, self.permit.lock()).await {
                Ok(epoch) => epoch,
                Err(_) => return Ok(None),
            },
        };
        self.check_retired()?;
        let mut permit = Permit {
            leader: self,
            epoch,
        };
        permit.hold_partition().await?;
        Ok(Some(permit))
    }

    /// Takes the permit, queueing behind writes in flight, and the partition if needed.
    pub async fn permit(&self) -> Result<Permit<'_, S>> {
        let mut permit = Permit {
            leader: self,
            epoch: self.permit.lock().await,
        };
        self.check_retired()?;
        permit.hold_partition().await?;
        Ok(permit)
    }
}

impl<S: Clone + Send + Sync + 'static> Permit<'_, S> {
    /// The state every write before this one produced.
    pub fn snapshot(&self) -> S {
        self.leader.projector.snapshot()
    }

    /// Appends one event with `body`, and returns the state right after it was applied.
    pub async fn write(&mut self, body: Body, origin: &Origin) -> Result<S> {
        let epoch = self.hold_partition().await?;
        let event = Envelope {
            event_id: uuid::Uuid::now_v7().to_string(),
            timestamp_micros: chrono::Utc::now().timestamp_micros(),
            principal: origin.principal.clone(),
            request_id: origin.request_id.clone(),
            epoch,
            body: Some(body),
            ..Default::default()
        };
        let kind = event.kind();
        let (_, state) = self.append(event).await?;
        tracing::debug!(partition = %self.leader.partition(), kind, "write applied");
        if !self.leader.hold.is_zero() {
            tokio::time::sleep(self.leader.hold).await;
        }
        Ok(state)
    }

    /// This leader's epoch, taking the partition over first if it does not hold it: it never
    /// did, or its projection has applied a newer leader's marker since.
    async fn hold_partition(&mut self) -> Result<u64> {
        let newest = self.leader.projector.checkpoint().epoch;
        if let Some(epoch) = *self.epoch
            && epoch >= newest
        {
            return Ok(epoch);
        }
        *self.epoch = None;
        // A retired leader never takes the partition back from the successor that replaced it.
        self.leader.check_retired()?;
        // Above every epoch in the log now, not only those the projection has applied yet.
        let partition = self.leader.partition().clone();
        let end = self.leader.log.high_water_mark(&partition).await?;
        let newest = match end {
            0 => newest,
            end => self.leader.projector.wait_for(end - 1).await?.0.epoch,
        };
        let epoch = newest + 1;
        let marker = Envelope {
            event_id: uuid::Uuid::now_v7().to_string(),
            timestamp_micros: chrono::Utc::now().timestamp_micros(),
            principal: "system".to_owned(),
            epoch,
            body: Some(Body::LeaderEpoch(LeaderEpoch {
                epoch,
                node: self.leader.node.clone(),
            })),
            ..Default::default()
        };
        *self.epoch = Some(epoch);
        let at = match self.append(marker).await {
            Ok((at, _)) => at,
            Err(error) => {
                *self.epoch = None;
                return Err(error);
            }
        };
        // Another leader's marker of the same epoch may have landed first, voiding ours.
        if self.leader.projector.epoch_marker() != Some(at) {
            *self.epoch = None;
            return Err(Error::Unavailable(format!(
                "another node took {partition} over at the same moment; retry the request"
            )));
        }
        tracing::info!(%partition, epoch, node = %self.leader.node, "took over partition");
        Ok(epoch)
    }

    /// Appends `event` and waits until it is applied: its offset and the state right after it.
    async fn append(&mut self, event: Envelope) -> Result<(u64, S)> {
        let partition = self.leader.partition().clone();
        let range = self
            .leader
            .metrics
            .timed_append(&*self.leader.log, &partition, event)
            .await?;
        let mine = self.epoch.unwrap_or_default();
        let (checkpoint, state) = match self.leader.projector.wait_for(range.start).await {
            Ok(applied) => applied,
            // The projection stopped before our event, behind a newer leader's: ours is void
            // for every reader, as below (a retired runtime's projection stops so when its
            // successor writes columns the retired definition lacks).
            Err(_) if self.leader.projector.epoch_before(range.start) > mine => {
                *self.epoch = None;
                return Err(Error::Unavailable(format!(
                    "leadership of {partition} moved to a newer leader; retry the request"
                )));
            }
            Err(error) => return Err(error.into()),
        };
        if checkpoint.epoch > mine {
            // Another leader's marker reached the log: our write may be void. Never acknowledge.
            *self.epoch = None;
            return Err(Error::Unavailable(format!(
                "leadership of {partition} moved to another node; retry the request"
            )));
        }
        Ok((range.start, state))
    }
}

#[cfg(test)]
mod race_tests;

/// The leaders of one kind of per-account partition (`<account>/_monitors`,
/// `<account>/_assistant`) this node has opened, by account.
pub(in crate::engine) type AccountLeaders<S> = parking_lot::Mutex<
    std::collections::HashMap<String, Arc<tokio::sync::OnceCell<Arc<Leader<S>>>>>,
>;

impl super::Engine {
    /// The leader of `account`'s partition of the kind `leaders` holds, opened on first use:
    /// its projection (`open`, from the node's state store) caught up with the log.
    pub(in crate::engine) async fn account_leader<P: strata_projections::Projection>(
        &self,
        leaders: &AccountLeaders<P::Snapshot>,
        account: &str,
        open: fn(&strata_projections::StateStore, &str) -> strata_projections::Result<P>,
    ) -> Result<Arc<Leader<P::Snapshot>>> {
        let cell = leaders
            .lock()
            .entry(account.to_owned())
            .or_default()
            .clone();
        let leader = cell
            .get_or_try_init(|| async {
                let store = self.store.clone();
                let owner = account.to_owned();
                let projection = super::blocking(move || open(&store, &owner)).await??;
                let projector = Projector::start(self.log.clone(), projection).await?;
                Ok::<_, Error>(Arc::new(Leader::new(
                    self.log.clone(),
                    projector,
                    self.config.cluster.node_id.clone(),
                    Duration::ZERO,
                    self.metrics.clone(),
                )))
            })
            .await?;
        Ok(leader.clone())
    }
}
