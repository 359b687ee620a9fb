//! [`Prefix`]: a read-only view of a log that ends, per partition, at a chosen offset.
//!
//! What a projection rebuilt over a prefix holds is what a live projection held when it had
//! applied exactly that prefix, so the two can be compared while the live one keeps moving
//! (`strata-replay verify` through a running server does that). Waiting past the end of the
//! prefix never resolves: the prefix has no future.

use std::{collections::HashMap, ops::Range, sync::Arc};

use async_trait::async_trait;

use crate::{CommitLog, Envelope, PartitionId, error::Result};

#[derive(Debug, Clone)]
pub struct Prefix {
    log: Arc<dyn CommitLog>,
    /// One past the last visible offset, per partition; partitions not named are empty.
    ends: HashMap<PartitionId, u64>,
}

impl Prefix {
    /// A view of `log` in which each partition of `ends` ends at its offset (at most its
    /// high-water mark), and every other partition is empty.
    pub fn new(
        log: Arc<dyn CommitLog>,
        ends: impl IntoIterator<Item = (PartitionId, u64)>,
    ) -> Self {
        Prefix {
            log,
            ends: ends.into_iter().collect(),
        }
    }

    fn end(&self, partition: &PartitionId) -> u64 {
        self.ends.get(partition).copied().unwrap_or(0)
    }
}

#[async_trait]
impl CommitLog for Prefix {
    async fn append(&self, partition: &PartitionId, _events: Vec<Envelope>) -> Result<Range<u64>> {
        Err(crate::Error::ReadOnly {
            path: format!("a prefix of the log, at {partition}").into(),
        })
    }

    async fn read(
        &self,
        partition: &PartitionId,
        from: u64,
        max_events: usize,
    ) -> Result<Vec<Envelope>> {
        let end = self.high_water_mark(partition).await?;
        let wanted = crate::commit_log::events_to_read(partition, from, max_events, end)?;
        if wanted == 0 {
            return Ok(Vec::new());
        }
        let mut events = self.log.read(partition, from, wanted).await?;
        events.retain(|event| event.offset < end);
        Ok(events)
    }

    async fn high_water_mark(&self, partition: &PartitionId) -> Result<u64> {
        let end = self.end(partition);
        if end == 0 {
            return Ok(0);
        }
        Ok(end.min(self.log.high_water_mark(partition).await?))
    }

    async fn wait_for(&self, partition: &PartitionId, offset: u64) -> Result<()> {
        if offset < self.high_water_mark(partition).await? {
            return Ok(());
        }
        std::future::pending().await
    }

    async fn partitions(&self) -> Result<Vec<PartitionId>> {
        let mut ids: Vec<PartitionId> = self
            .ends
            .iter()
            .filter(|(_, end)| **end > 0)
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        Ok(ids)
    }

    async fn delete_partition(&self, partition: &PartitionId) -> Result<()> {
        Err(crate::Error::ReadOnly {
            path: format!("a prefix of the log, at {partition}").into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemoryLog, conformance::event};

    #[tokio::test]
    async fn reads_stop_at_the_prefix_end_while_the_log_grows() {
        let log: Arc<dyn CommitLog> = Arc::new(MemoryLog::default());
        let table = PartitionId::new("a/db/t").unwrap();
        let other = PartitionId::new("a/db/u").unwrap();
        for i in 0..10 {
            log.append(&table, vec![event(&format!("e{i}"), 0)])
                .await
                .unwrap();
        }
        log.append(&other, vec![event("u", 0)]).await.unwrap();
        let prefix = Prefix::new(log.clone(), [(table.clone(), 6)]);
        log.append(&table, vec![event("later", 0)]).await.unwrap();

        assert_eq!(prefix.high_water_mark(&table).await.unwrap(), 6);
        assert_eq!(prefix.high_water_mark(&other).await.unwrap(), 0);
        assert_eq!(prefix.partitions().await.unwrap(), vec![table.clone()]);
        let read = prefix.read(&table, 4, 100).await.unwrap();
        assert_eq!(
            read.iter().map(|e| e.offset).collect::<Vec<_>>(),
            vec![4, 5]
        );
        assert!(prefix.read(&table, 6, 100).await.unwrap().is_empty());
        assert!(matches!(
            prefix.read(&table, 7, 1).await,
            Err(crate::Error::OffsetOutOfRange { .. })
        ));
        prefix.wait_for(&table, 5).await.unwrap();
        assert!(
            tokio::time::timeout(
                std::time::Duration::from_millis(50),
                prefix.wait_for(&table, 6)
            )
            .await
            .is_err()
        );
        assert!(matches!(
            prefix.append(&table, vec![event("x", 0)]).await,
            Err(crate::Error::ReadOnly { .. })
        ));
    }
}
