//! The `Projection` trait: state derived from one partition of the log.
//!
//! A projection applies batches of events in offset order and stores, atomically with its own
//! state, a [`Checkpoint`]: the next offset it needs and the newest leader epoch it has seen. On
//! start it reports its checkpoint and the runtime ([`crate::Projector`]) replays the log from
//! there. Applying an event twice must be harmless (a crash between the state write and the
//! runtime learning of it replays the batch).

use strata_log::{Envelope, PartitionId};

use crate::error::Result;

/// How far a projection has applied its partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    /// The offset of the next event to apply: every event before it has been applied.
    pub next_offset: u64,
    /// The newest leader epoch seen up to `next_offset` (see `strata_log::fence`).
    pub epoch: u64,
}

impl Checkpoint {
    /// Whichever of two checkpoints is further along the partition.
    pub fn max_by_offset(self, other: Checkpoint) -> Checkpoint {
        if other.next_offset > self.next_offset {
            other
        } else {
            self
        }
    }
}

pub trait Projection: Send + 'static {
    /// What readers get: an immutable view, cheap to clone.
    type Snapshot: Clone + Send + Sync + 'static;

    /// The partition this projection consumes.
    fn partition(&self) -> &PartitionId;

    /// The checkpoint stored with the current state.
    fn checkpoint(&self) -> Checkpoint;

    /// Applies `events` (already fenced: only admitted events, in offset order, all below
    /// `checkpoint.next_offset`). Whatever state the projection makes durable, now or later,
    /// is stored atomically with the checkpoint it reflects. Runs on a blocking thread.
    fn apply(&mut self, events: &[Envelope], checkpoint: Checkpoint) -> Result<()>;

    /// A read snapshot of the current state.
    fn snapshot(&self) -> Self::Snapshot;
}
