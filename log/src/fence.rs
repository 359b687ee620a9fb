//! Single-writer fencing by leader epochs, on any backend.
//!
//! A leader that takes a partition over first appends `LeaderEpoch { epoch, node }` with an epoch
//! above every epoch before it, and stamps its epoch on every event it appends. Every consumer of
//! the partition runs its events through an [`EpochFence`]: an event whose epoch is older than the
//! newest marker before it is void. A deposed leader's late write therefore lands in the log but is
//! ignored by everyone, and the deposed leader, which acknowledges a write only after reading it
//! back through the same rule, never acknowledges it.

use crate::{CommitLog, Envelope, PartitionId, envelope::Body, error::Result};

/// What the fence decided about one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// An ordinary event of the current leader: apply it.
    Admit,
    /// A leader-epoch marker that moved the fence forward (it carries no state to apply).
    Marker,
    /// Void: written by a leader older than the newest marker before it.
    Fenced,
}

/// The consumer-side fencing rule, fed the events of one partition in offset order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EpochFence {
    newest: u64,
}

impl EpochFence {
    /// A fence that has already seen markers up to `newest` (restored from a checkpoint).
    pub fn at(newest: u64) -> Self {
        EpochFence { newest }
    }

    /// The newest epoch seen so far: the epoch a new leader must exceed.
    pub fn newest(&self) -> u64 {
        self.newest
    }

    pub fn judge(&mut self, event: &Envelope) -> Verdict {
        if let Some(Body::LeaderEpoch(marker)) = &event.body {
            if marker.epoch > self.newest {
                self.newest = marker.epoch;
                return Verdict::Marker;
            }
            return Verdict::Fenced;
        }
        if event.epoch < self.newest {
            Verdict::Fenced
        } else {
            Verdict::Admit
        }
    }
}

/// Events read at a time by [`fence_before`].
const SCAN_BATCH: usize = 1024;

/// The fence of `partition` as it stands just before offset `until` (`u64::MAX`: after its last
/// event), found by judging every event below it: what a reader starting at `until` needs, and
/// the epoch (`newest`) a writer that is not the partition's leader must stamp on its events.
pub async fn fence_before(
    log: &dyn CommitLog,
    partition: &PartitionId,
    until: u64,
) -> Result<EpochFence> {
    let mut fence = EpochFence::default();
    let mut next = 0;
    while next < until {
        let wanted = SCAN_BATCH.min(usize::try_from(until - next).unwrap_or(SCAN_BATCH));
        let events = log.read(partition, next, wanted).await?;
        let Some(last) = events.last() else {
            break;
        };
        next = last.offset + 1;
        for event in events.iter().filter(|e| e.offset < until) {
            fence.judge(event);
        }
    }
    Ok(fence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LeaderEpoch;

    fn marker(epoch: u64) -> Envelope {
        Envelope {
            epoch,
            body: Some(Body::LeaderEpoch(LeaderEpoch {
                epoch,
                node: "n".into(),
            })),
            ..Default::default()
        }
    }

    fn write(epoch: u64) -> Envelope {
        Envelope {
            epoch,
            ..Default::default()
        }
    }

    #[test]
    fn a_deposed_leaders_late_writes_are_void() {
        let mut fence = EpochFence::default();
        assert_eq!(fence.judge(&marker(1)), Verdict::Marker);
        assert_eq!(fence.judge(&write(1)), Verdict::Admit);
        assert_eq!(fence.judge(&marker(2)), Verdict::Marker);
        assert_eq!(fence.judge(&write(1)), Verdict::Fenced);
        assert_eq!(fence.judge(&write(2)), Verdict::Admit);
        // A stale marker does not move the fence back.
        assert_eq!(fence.judge(&marker(1)), Verdict::Fenced);
        assert_eq!(fence.judge(&write(2)), Verdict::Admit);
        assert_eq!(fence.newest(), 2);
    }

    #[test]
    fn restored_fence_keeps_its_epoch() {
        let mut fence = EpochFence::at(5);
        assert_eq!(fence.judge(&write(4)), Verdict::Fenced);
        assert_eq!(fence.judge(&write(5)), Verdict::Admit);
    }

    #[tokio::test]
    async fn the_fence_before_an_offset_knows_only_the_markers_below_it() {
        let log = crate::MemoryLog::new();
        let partition = PartitionId::new("p").unwrap();
        log.append(
            &partition,
            vec![marker(1), write(1), marker(2), write(1), write(2)],
        )
        .await
        .unwrap();
        let at = |until| {
            let log = &log;
            let partition = &partition;
            async move { fence_before(log, partition, until).await.unwrap().newest() }
        };
        assert_eq!(at(0).await, 0);
        assert_eq!(at(2).await, 1);
        assert_eq!(at(3).await, 2);
        assert_eq!(at(u64::MAX).await, 2);
        // From offset 3 on, the deposed leader's write is void and the new one's admitted.
        let mut fence = fence_before(&log, &partition, 3).await.unwrap();
        let rest = log.read(&partition, 3, 10).await.unwrap();
        assert_eq!(fence.judge(&rest[0]), Verdict::Fenced);
        assert_eq!(fence.judge(&rest[1]), Verdict::Admit);
    }
}
