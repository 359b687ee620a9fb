//! The leader of a partition: its single writer.
//!
//! A write takes the leader's permit (one write at a time; refused as busy when another is in
//! flight, after an optional short wait), validates against the projection, which is caught up
//! with everything this leader wrote, appends exactly one event, and returns only once that event
//! is durable and applied to the projection (read-your-writes).
//!
//! Before its first write a leader takes the partition over: it appends a `LeaderEpoch` marker
//! with an epoch above every epoch its projection has seen, and stamps that epoch on its events.
//! If after applying its event the projection's epoch is newer than the leader's, another node
//! took the partition over: the write is not acknowledged (see `strata_log::fence`).

use std::{sync::Arc, time::Duration};

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
    pub async fn try_permit(&self, wait: Duration) -> Option<Permit<'_, S>> {
        let epoch = match self.permit.try_lock() {
            Ok(epoch) => epoch,
            Err(_) if wait.is_zero() => return None,
            Err(_) => tokio::time::timeout(wait, self.permit.lock()).await.ok()?,
        };
        Some(Permit {
            leader: self,
            epoch,
        })
    }

    /// Takes the permit, queueing behind writes in flight.
    pub async fn permit(&self) -> Permit<'_, S> {
        Permit {
            leader: self,
            epoch: self.permit.lock().await,
        }
    }
}

impl<S: Clone + Send + Sync + 'static> Permit<'_, S> {
    /// The state every write before this one produced.
    pub fn snapshot(&self) -> S {
        self.leader.projector.snapshot()
    }

    /// Appends one event with `body`, and returns the state right after it was applied.
    pub async fn write(&mut self, body: Body, origin: &Origin) -> Result<S> {
        let epoch = self.epoch().await?;
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
        let state = self.append(event).await?;
        tracing::debug!(partition = %self.leader.partition(), kind, "write applied");
        if !self.leader.hold.is_zero() {
            tokio::time::sleep(self.leader.hold).await;
        }
        Ok(state)
    }

    /// This leader's epoch, taking the partition over first if it has not yet.
    async fn epoch(&mut self) -> Result<u64> {
        if let Some(epoch) = *self.epoch {
            return Ok(epoch);
        }
        let epoch = self.leader.projector.checkpoint().epoch + 1;
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
        if let Err(error) = self.append(marker).await {
            *self.epoch = None;
            return Err(error);
        }
        tracing::info!(partition = %self.leader.partition(), epoch, node = %self.leader.node, "took over partition");
        Ok(epoch)
    }

    async fn append(&mut self, event: Envelope) -> Result<S> {
        let partition = self.leader.partition().clone();
        let range = self
            .leader
            .metrics
            .timed_append(&*self.leader.log, &partition, event)
            .await?;
        let (checkpoint, state) = self.leader.projector.wait_for(range.start).await?;
        let mine = self.epoch.unwrap_or_default();
        if checkpoint.epoch > mine {
            // Another leader's marker reached the log: our write may be void. Never acknowledge.
            *self.epoch = None;
            return Err(Error::Unavailable(format!(
                "leadership of {partition} moved to another node; retry the request"
            )));
        }
        Ok(state)
    }
}

#[cfg(test)]
mod race_tests;
