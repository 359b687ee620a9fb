//! The projector runtime over an in-memory log, with a projection that records what it sees.

use std::sync::{Arc, Mutex};

use strata_log::{
    CommitLog, Envelope, LeaderEpoch, MemoryLog, PartitionId, conformance::event, envelope::Body,
};

use crate::{Checkpoint, Projection, Projector, Result};

/// Keeps the ids of applied events; shares them with the test through `seen`.
struct Recorder {
    partition: PartitionId,
    checkpoint: Checkpoint,
    applied: Vec<String>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn new(checkpoint: Checkpoint, seen: Arc<Mutex<Vec<String>>>) -> Self {
        Recorder {
            partition: PartitionId::control(),
            checkpoint,
            applied: Vec::new(),
            seen,
        }
    }
}

impl Projection for Recorder {
    type Snapshot = Arc<Vec<String>>;

    fn partition(&self) -> &PartitionId {
        &self.partition
    }

    fn checkpoint(&self) -> Checkpoint {
        self.checkpoint
    }

    fn apply(&mut self, events: &[Envelope], checkpoint: Checkpoint) -> Result<()> {
        for event in events {
            self.applied.push(event.event_id.clone());
            self.seen.lock().unwrap().push(event.event_id.clone());
        }
        self.checkpoint = checkpoint;
        Ok(())
    }

    fn snapshot(&self) -> Arc<Vec<String>> {
        Arc::new(self.applied.clone())
    }
}

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

#[tokio::test]
async fn catches_up_before_start_returns_then_follows_the_tail() {
    let log: Arc<dyn CommitLog> = Arc::new(MemoryLog::new());
    let p = PartitionId::control();
    log.append(&p, vec![event("a", 0), event("b", 0)])
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let projector = Projector::start(log.clone(), Recorder::new(Checkpoint::default(), seen))
        .await
        .unwrap();
    assert_eq!(*projector.snapshot(), vec!["a", "b"]);
    assert_eq!(projector.checkpoint().next_offset, 2);

    let range = log.append(&p, vec![event("c", 0)]).await.unwrap();
    let (checkpoint, snapshot) = projector.wait_for(range.start).await.unwrap();
    assert_eq!(checkpoint.next_offset, 3);
    assert_eq!(*snapshot, vec!["a", "b", "c"]);
}

#[tokio::test]
async fn restarts_replay_only_what_follows_the_checkpoint() {
    let log: Arc<dyn CommitLog> = Arc::new(MemoryLog::new());
    let p = PartitionId::control();
    log.append(&p, vec![event("a", 0), event("b", 0), event("c", 0)])
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let checkpoint = Checkpoint {
        next_offset: 2,
        epoch: 0,
    };
    let projector = Projector::start(log.clone(), Recorder::new(checkpoint, seen.clone()))
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), vec!["c"]);
    assert_eq!(projector.checkpoint().next_offset, 3);
}

#[tokio::test]
async fn a_checkpoint_beyond_the_log_is_refused() {
    let log: Arc<dyn CommitLog> = Arc::new(MemoryLog::new());
    let checkpoint = Checkpoint {
        next_offset: 9,
        epoch: 0,
    };
    let started = Projector::start(log, Recorder::new(checkpoint, Arc::default())).await;
    assert!(matches!(started, Err(crate::Error::Corrupt { .. })));
}

#[tokio::test]
async fn fenced_events_are_skipped_and_the_epoch_is_checkpointed() {
    let log: Arc<dyn CommitLog> = Arc::new(MemoryLog::new());
    let p = PartitionId::control();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let projector = Projector::start(log.clone(), Recorder::new(Checkpoint::default(), seen))
        .await
        .unwrap();
    log.append(&p, vec![marker(1), event("old", 1), marker(2)])
        .await
        .unwrap();
    log.append(&p, vec![event("late", 1), event("new", 2)])
        .await
        .unwrap();
    let (checkpoint, snapshot) = projector.wait_for(4).await.unwrap();
    assert_eq!(*snapshot, vec!["old", "new"]);
    assert_eq!(
        checkpoint,
        Checkpoint {
            next_offset: 5,
            epoch: 2
        }
    );
}
