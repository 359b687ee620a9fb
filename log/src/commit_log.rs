//! The `CommitLog` trait: the one seam between strata and where its facts are stored.
//!
//! Guarantees every implementation gives (and [`crate::conformance`] checks):
//! - Offsets are dense per partition: the n-th event ever appended to a partition has offset n-1.
//! - `append` returns only once the events are durable (fsync for `FileLog`, acks=all for Kafka).
//!   Its events get consecutive offsets, in order, and no other append interleaves with them.
//! - Readers see only durable events: a reader never observes an event that a crash could take
//!   back.
//! - After a crash, an append that was not acknowledged may be absent or present, but never
//!   partially present as a corrupt event. An acknowledged append is never lost.
//! - `read` returns events with their `offset` field filled in; appenders leave it 0.
//!
//! The log does not interpret bodies and does not fence: fencing is the readers' rule, applied
//! with [`crate::fence::EpochFence`] (see ARCHITECTURE.md, "The commit log").

use std::{fmt::Debug, ops::Range, sync::Arc};

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::{Envelope, PartitionId, error::Result};

/// A stream of events that waits for new ones at the end of the partition.
pub type EventStream = BoxStream<'static, Result<Envelope>>;

#[async_trait]
pub trait CommitLog: Send + Sync + Debug + 'static {
    /// Appends `events` to the end of `partition` (created on first append) and returns their
    /// offsets once they are durable.
    async fn append(&self, partition: &PartitionId, events: Vec<Envelope>) -> Result<Range<u64>>;

    /// Reads up to `max_events` durable events of `partition` from offset `from` on. Returns an
    /// empty vector at the end of the partition (and for a partition that does not exist), an
    /// error if `from` is beyond the end.
    async fn read(
        &self,
        partition: &PartitionId,
        from: u64,
        max_events: usize,
    ) -> Result<Vec<Envelope>>;

    /// The offset the next appended event will get: one past the last durable event.
    async fn high_water_mark(&self, partition: &PartitionId) -> Result<u64>;

    /// Resolves once the high-water mark of `partition` is above `offset`, or the log closes.
    async fn wait_for(&self, partition: &PartitionId, offset: u64) -> Result<()>;

    /// Every partition that holds or held events, in name order.
    async fn partitions(&self) -> Result<Vec<PartitionId>>;

    /// Removes a partition and its events (a purged database). Appending to it again starts a
    /// new partition at offset 0.
    async fn delete_partition(&self, partition: &PartitionId) -> Result<()>;
}

/// How many events a read of `max_events` from `from` returns from a partition ending at `end`:
/// an error past the end, none at it.
pub(crate) fn events_to_read(
    partition: &PartitionId,
    from: u64,
    max_events: usize,
    end: u64,
) -> Result<usize> {
    if from > end {
        return Err(crate::Error::OffsetOutOfRange {
            partition: partition.to_string(),
            offset: from,
            high_water_mark: end,
        });
    }
    Ok(max_events.min(usize::try_from(end - from).unwrap_or(usize::MAX)))
}

/// How many events a tail reads at a time.
const TAIL_BATCH: usize = 512;

/// Follows `partition` from `from` on: yields every event in order, then waits for new ones.
/// The stream ends only with an error (including [`crate::Error::Closed`]).
pub fn tail(log: Arc<dyn CommitLog>, partition: PartitionId, from: u64) -> EventStream {
    Box::pin(futures::stream::try_unfold(
        (log, partition, from, Vec::<Envelope>::new().into_iter()),
        |(log, partition, mut next, mut buffered)| async move {
            loop {
                if let Some(event) = buffered.next() {
                    next = event.offset + 1;
                    return Ok(Some((event, (log, partition, next, buffered))));
                }
                let batch = log.read(&partition, next, TAIL_BATCH).await?;
                if batch.is_empty() {
                    log.wait_for(&partition, next).await?;
                } else {
                    buffered = batch.into_iter();
                }
            }
        },
    ))
}
