//! Two leaders racing on one partition, on MemoryLog and on KafkaLog: seeded random schedules of
//! concurrent writes and restarts (a restarted node takes the partition over at its next write).
//!
//! A write is *deposed* when a marker of a newer epoch precedes it in the log: its leader had
//! been replaced before it landed. The test finds those writes from the log by that definition,
//! independently of `EpochFence`, and checks that none was acknowledged, none is admitted by the
//! fence, and none is in either node's projection; that every acknowledged write is in all
//! of them; and that every admitted write is by the node whose marker the fence accepted last
//! (two leaders that chose the same epoch at once do not both write).

#![allow(clippy::unwrap_used, clippy::panic)]

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use rand::{Rng, SeedableRng, rngs::StdRng};
use strata_log::{
    CommitLog, Envelope, MemoryLog, PartitionId,
    envelope::Body,
    event::AccountCreated,
    fence::{EpochFence, Verdict},
};
use strata_projections::{Checkpoint, Projection, Projector};

use super::{Leader, Origin};
use crate::metrics::Metrics;

/// The names of the accounts created on the partition, as admitted.
struct Names {
    partition: PartitionId,
    checkpoint: Checkpoint,
    names: Vec<String>,
}

impl Projection for Names {
    type Snapshot = Arc<Vec<String>>;

    fn partition(&self) -> &PartitionId {
        &self.partition
    }

    fn checkpoint(&self) -> Checkpoint {
        self.checkpoint
    }

    fn apply(
        &mut self,
        events: &[Envelope],
        checkpoint: Checkpoint,
    ) -> strata_projections::Result<()> {
        for event in events {
            if let Some(Body::AccountCreated(created)) = &event.body {
                self.names.push(created.name.clone());
            }
        }
        self.checkpoint = checkpoint;
        Ok(())
    }

    fn snapshot(&self) -> Arc<Vec<String>> {
        Arc::new(self.names.clone())
    }
}

type Node = Leader<Arc<Vec<String>>>;

fn partition() -> PartitionId {
    PartitionId::table("race", "db", "t")
}

/// A node starting up: its projection replays the log; it takes over at its first write.
async fn start(log: &Arc<dyn CommitLog>, name: &str) -> Node {
    let names = Names {
        partition: partition(),
        checkpoint: Checkpoint::default(),
        names: Vec::new(),
    };
    let projector = Projector::start(log.clone(), names).await.unwrap();
    Leader::new(
        log.clone(),
        projector,
        name.to_owned(),
        Duration::ZERO,
        Arc::new(Metrics::new()),
    )
}

/// `count` writes, one after the other; the ids of those acknowledged.
async fn writes(node: &Node, prefix: String, count: usize) -> Vec<String> {
    let mut acknowledged = Vec::new();
    for i in 0..count {
        let name = format!("{prefix}-{i}");
        let body = Body::AccountCreated(AccountCreated {
            name: name.clone(),
            enterprise: false,
        });
        let Ok(mut permit) = node.permit().await else {
            continue;
        };
        if permit.write(body, &Origin::system()).await.is_ok() {
            acknowledged.push(name);
        }
    }
    acknowledged
}

/// One schedule; returns how many writes were deposed.
async fn race(log: Arc<dyn CommitLog>, seed: u64, steps: usize) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut nodes = [
        Arc::new(start(&log, "a").await),
        Arc::new(start(&log, "b").await),
    ];
    let mut acknowledged = BTreeSet::new();
    for step in 0..steps {
        if rng.random_range(0..5) == 0 {
            let i = rng.random_range(0..2);
            nodes[i] = Arc::new(start(&log, ["a", "b"][i]).await);
            continue;
        }
        let (a, b) = (rng.random_range(0..4), rng.random_range(0..4));
        // On threads of their own, so that both can take the partition over at once.
        let (a, b) = tokio::join!(
            tokio::spawn({
                let node = nodes[0].clone();
                async move { writes(&node, format!("a{step}"), a).await }
            }),
            tokio::spawn({
                let node = nodes[1].clone();
                async move { writes(&node, format!("b{step}"), b).await }
            })
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        acknowledged.extend(a.into_iter().chain(b));
    }

    // Every write, and which were deposed, read from the log by the definition above.
    let end = log.high_water_mark(&partition()).await.unwrap();
    let events = log.read(&partition(), 0, end as usize).await.unwrap();
    let mut newest_marker = 0;
    let mut deposed = BTreeSet::new();
    let mut fence = EpochFence::default();
    let mut admitted = BTreeSet::new();
    let mut leader = String::new();
    for event in &events {
        let verdict = fence.judge(event);
        match &event.body {
            Some(Body::LeaderEpoch(marker)) => {
                newest_marker = newest_marker.max(marker.epoch);
                if verdict == Verdict::Marker {
                    leader = marker.node.clone();
                }
            }
            Some(Body::AccountCreated(created)) => {
                if event.epoch < newest_marker {
                    deposed.insert(created.name.clone());
                }
                if verdict == Verdict::Admit {
                    // One writer: every admitted write is the current leader's.
                    assert!(
                        created.name.starts_with(leader.as_str()),
                        "seed {seed}: {} admitted while {leader} leads",
                        created.name
                    );
                    admitted.insert(created.name.clone());
                }
            }
            _ => {}
        }
    }
    let context = format!("seed {seed}: acknowledged {acknowledged:?}, deposed {deposed:?}");
    assert!(acknowledged.is_disjoint(&deposed), "{context}");
    assert!(admitted.is_disjoint(&deposed), "{context}");
    assert!(acknowledged.is_subset(&admitted), "{context}");
    for node in &nodes {
        let (_, applied) = node.projector().wait_for(end - 1).await.unwrap();
        let applied: BTreeSet<String> = applied.iter().cloned().collect();
        assert_eq!(applied, admitted, "{context}");
    }
    deposed.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_deposed_write_is_acknowledged_or_applied_on_memory_log() {
    let mut deposed = 0;
    for seed in 0..64 {
        deposed += race(Arc::new(MemoryLog::default()), seed, 40).await;
    }
    // The schedules do make leaders race: many writes landed behind a newer marker.
    assert!(deposed > 50, "only {deposed} deposed writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_deposed_write_is_acknowledged_or_applied_on_kafka_log() {
    let brokers = std::env::var("STRATA_TEST_KAFKA").unwrap_or_else(|_| {
        panic!("STRATA_TEST_KAFKA is not set: run the tests with scripts/test, which starts a Kafka-protocol broker")
    });
    let mut deposed = 0;
    for seed in 0..4 {
        let prefix = format!(
            "race-{}-{seed}-{}",
            std::process::id(),
            chrono::Utc::now().timestamp_micros()
        );
        let log = strata_log::KafkaLog::connect(strata_log::KafkaOptions::new(&brokers, prefix))
            .await
            .unwrap();
        deposed += race(Arc::new(log), seed, 20).await;
    }
    assert!(deposed > 0, "no write was deposed");
}
