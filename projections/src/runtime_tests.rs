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
    /// The id of an event this projection cannot apply (it stops there).
    fails_on: Option<&'static str>,
}

impl Recorder {
    fn new(checkpoint: Checkpoint, seen: Arc<Mutex<Vec<String>>>) -> Self {
        Recorder {
            partition: PartitionId::control(),
            checkpoint,
            applied: Vec::new(),
            seen,
            fails_on: None,
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
            if self.fails_on == Some(event.event_id.as_str()) {
                return Err(crate::Error::Corrupt {
                    key: event.event_id.clone(),
                    reason: "cannot be applied".to_owned(),
                });
            }
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

/// A projector that stopped at `poison`, after `before` and `batch` were appended (each in one
/// append): the epoch it reports for the events in front of offset `at`.
async fn stopped_at_poison(before: Vec<Envelope>, batch: Vec<Envelope>, at: u64) -> u64 {
    let log: Arc<dyn CommitLog> = Arc::new(MemoryLog::new());
    let p = PartitionId::control();
    let mut recorder = Recorder::new(Checkpoint::default(), Arc::default());
    recorder.fails_on = Some("poison");
    let projector = Projector::start(log.clone(), recorder).await.unwrap();
    let applied = before.len() as u64;
    log.append(&p, before).await.unwrap();
    projector.wait_for(applied - 1).await.unwrap();
    log.append(&p, batch).await.unwrap();
    let stopped = projector.wait_for(at).await.unwrap_err().to_string();
    assert!(stopped.contains("cannot be applied"), "{stopped}");
    projector.epoch_before(at)
}

#[tokio::test]
async fn a_stopped_projection_tells_whether_a_newer_leader_wrote_in_front_of_an_event() {
    // A newer leader's marker and write, then an event of the older leader: the projection
    // stops at the newer write, and the older event is behind epoch 2 (void).
    let newer = stopped_at_poison(
        vec![marker(1), event("a", 1)],
        vec![marker(2), event("poison", 2), event("late", 1)],
        4,
    )
    .await;
    assert_eq!(newer, 2);
    // A projection that stops at an event of the same leader: nothing newer in front.
    let same = stopped_at_poison(
        vec![marker(1), event("a", 1)],
        vec![event("poison", 1), event("mine", 1)],
        3,
    )
    .await;
    assert_eq!(same, 1);
}

#[tokio::test]
async fn an_event_applied_before_the_projection_stopped_stays_applied_to_its_writer() {
    // A writer's event is applied; before the writer looks, the projector reads a later
    // batch it cannot apply (a successor's rows in columns this projection lacks). The writer
    // learns that its event was applied, not that the projection stopped: an error there
    // failed a write that every reader sees.
    let log: Arc<dyn CommitLog> = Arc::new(MemoryLog::new());
    let p = PartitionId::control();
    let mut recorder = Recorder::new(Checkpoint::default(), Arc::default());
    recorder.fails_on = Some("poison");
    let projector = Projector::start(log.clone(), recorder).await.unwrap();
    log.append(&p, vec![marker(1), event("mine", 1)])
        .await
        .unwrap();
    projector.wait_for(1).await.unwrap();
    log.append(&p, vec![marker(2), event("poison", 2)])
        .await
        .unwrap();
    let stopped = projector.wait_for(3).await.unwrap_err().to_string();
    assert!(stopped.contains("cannot be applied"), "{stopped}");
    let (checkpoint, applied) = projector.wait_for(1).await.unwrap();
    assert_eq!(checkpoint.next_offset, 2);
    assert_eq!(*applied, ["mine".to_owned()]);
}
