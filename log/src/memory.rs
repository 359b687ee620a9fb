//! `MemoryLog`: the `CommitLog` contract held in memory, for unit tests. Nothing is durable.

use std::{collections::BTreeMap, ops::Range};

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::{
    CommitLog, Envelope, PartitionId,
    error::{Error, Result},
    watermarks::Watermarks,
};

#[derive(Debug, Default)]
pub struct MemoryLog {
    partitions: Mutex<BTreeMap<PartitionId, Vec<Envelope>>>,
    watermarks: Watermarks,
}

impl MemoryLog {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Drop for MemoryLog {
    fn drop(&mut self) {
        self.watermarks.close();
    }
}

#[async_trait]
impl CommitLog for MemoryLog {
    async fn append(&self, partition: &PartitionId, events: Vec<Envelope>) -> Result<Range<u64>> {
        let mut partitions = self.partitions.lock();
        let stored = partitions.entry(partition.clone()).or_default();
        let start = stored.len() as u64;
        for (i, mut event) in events.into_iter().enumerate() {
            event.offset = start + i as u64;
            event.partition = partition.to_string();
            stored.push(event);
        }
        let end = stored.len() as u64;
        self.watermarks.publish(partition, end);
        Ok(start..end)
    }

    async fn read(
        &self,
        partition: &PartitionId,
        from: u64,
        max_events: usize,
    ) -> Result<Vec<Envelope>> {
        let partitions = self.partitions.lock();
        let stored = partitions.get(partition).map(Vec::as_slice).unwrap_or(&[]);
        let high_water_mark = stored.len() as u64;
        if from > high_water_mark {
            return Err(Error::OffsetOutOfRange {
                partition: partition.to_string(),
                offset: from,
                high_water_mark,
            });
        }
        Ok(stored
            .iter()
            .skip(from as usize)
            .take(max_events)
            .cloned()
            .collect())
    }

    async fn high_water_mark(&self, partition: &PartitionId) -> Result<u64> {
        Ok(self
            .partitions
            .lock()
            .get(partition)
            .map_or(0, |p| p.len() as u64))
    }

    async fn wait_for(&self, partition: &PartitionId, offset: u64) -> Result<()> {
        self.watermarks.wait_for(partition, offset).await
    }

    async fn partitions(&self) -> Result<Vec<PartitionId>> {
        Ok(self.partitions.lock().keys().cloned().collect())
    }

    async fn delete_partition(&self, partition: &PartitionId) -> Result<()> {
        self.partitions.lock().remove(partition);
        self.watermarks.publish(partition, 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::commit_log_conformance!(|| async { MemoryLog::new() });
}
