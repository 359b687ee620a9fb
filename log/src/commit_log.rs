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

use std::{fmt::Debug, ops::Range, sync::Arc, time::Duration};

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

/// The first pause before a tail reads again after its backend failed; each further failure in a
/// row doubles it, up to [`TAIL_RETRY_MAX`].
const TAIL_RETRY_FIRST: Duration = Duration::from_millis(100);
const TAIL_RETRY_MAX: Duration = Duration::from_secs(5);

/// Follows `partition` from `from` on: yields every event in order, then waits for new ones.
///
/// A tail outlives a backend that fails for a while (a broker restarting, a network gone): a read
/// or a wait that fails with [`crate::Error::Backend`] is tried again from the same offset, after
/// a pause that grows from 100 ms to 5 s, as a Kafka consumer retries. Any other error ends the
/// stream, as does [`crate::Error::Closed`]: the stream ends only with an error.
pub fn tail(log: Arc<dyn CommitLog>, partition: PartitionId, from: u64) -> EventStream {
    Box::pin(futures::stream::try_unfold(
        (log, partition, from, Vec::<Envelope>::new().into_iter()),
        |(log, partition, mut next, mut buffered)| async move {
            let mut pause = TAIL_RETRY_FIRST;
            loop {
                if let Some(event) = buffered.next() {
                    next = event.offset + 1;
                    return Ok(Some((event, (log, partition, next, buffered))));
                }
                let step = match log.read(&partition, next, TAIL_BATCH).await {
                    Ok(batch) if batch.is_empty() => log.wait_for(&partition, next).await,
                    Ok(batch) => {
                        buffered = batch.into_iter();
                        Ok(())
                    }
                    Err(error) => Err(error),
                };
                match step {
                    Ok(()) => pause = TAIL_RETRY_FIRST,
                    Err(crate::Error::Backend(cause)) => {
                        tracing::warn!(%partition, offset = next, %cause, retry_in = ?pause, "the log's backend failed; reading again");
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(TAIL_RETRY_MAX);
                    }
                    Err(error) => return Err(error),
                }
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::StreamExt;

    use super::*;
    use crate::{MemoryLog, conformance::event};

    /// A log whose reads fail with a backend error while `failures` lasts, as a Kafka log's do
    /// while its brokers are unreachable.
    #[derive(Debug)]
    struct Failing {
        log: MemoryLog,
        failures: AtomicUsize,
    }

    #[async_trait]
    impl CommitLog for Failing {
        async fn append(&self, p: &PartitionId, events: Vec<Envelope>) -> Result<Range<u64>> {
            self.log.append(p, events).await
        }
        async fn read(&self, p: &PartitionId, from: u64, max: usize) -> Result<Vec<Envelope>> {
            let left = self.failures.load(Ordering::SeqCst);
            if left > 0 {
                self.failures.store(left - 1, Ordering::SeqCst);
                return Err(crate::Error::Backend("kafka: all brokers are down".into()));
            }
            self.log.read(p, from, max).await
        }
        async fn high_water_mark(&self, p: &PartitionId) -> Result<u64> {
            self.log.high_water_mark(p).await
        }
        async fn wait_for(&self, p: &PartitionId, offset: u64) -> Result<()> {
            self.log.wait_for(p, offset).await
        }
        async fn partitions(&self) -> Result<Vec<PartitionId>> {
            self.log.partitions().await
        }
        async fn delete_partition(&self, p: &PartitionId) -> Result<()> {
            self.log.delete_partition(p).await
        }
    }

    #[tokio::test]
    async fn a_tail_reads_again_after_its_backend_failed() {
        let partition = PartitionId::table("acme", "db", "t");
        let log = Arc::new(Failing {
            log: MemoryLog::default(),
            failures: AtomicUsize::new(0),
        });
        log.append(&partition, vec![event("e0", 0), event("e1", 0)])
            .await
            .unwrap();
        log.failures.store(3, Ordering::SeqCst);
        let mut tail = tail(log.clone(), partition.clone(), 0);
        let first: Vec<String> = (&mut tail)
            .take(2)
            .map(|e| e.unwrap().event_id)
            .collect()
            .await;
        assert_eq!(first, ["e0", "e1"]);
        assert_eq!(log.failures.load(Ordering::SeqCst), 0);

        // Failing again while it waits at the end: the next event still comes.
        log.failures.store(2, Ordering::SeqCst);
        log.append(&partition, vec![event("e2", 0)]).await.unwrap();
        let next = tail.next().await.unwrap().unwrap();
        assert_eq!(next.event_id, "e2");
    }

    #[tokio::test]
    async fn a_tail_ends_on_an_error_that_is_not_the_backends() {
        let partition = PartitionId::table("acme", "db", "t");
        let log = Arc::new(MemoryLog::default());
        let mut tail = tail(log, partition, 5);
        assert!(matches!(
            tail.next().await,
            Some(Err(crate::Error::OffsetOutOfRange { .. }))
        ));
    }
}
