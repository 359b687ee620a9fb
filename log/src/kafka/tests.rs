//! The CommitLog conformance suite on KafkaLog, against the Kafka-protocol broker that
//! scripts/test starts on loopback (its address in STRATA_TEST_KAFKA). Each case gets a log of
//! its own: a fresh topic prefix on the shared broker.
//!
//! These tests never skip: without a broker they fail, saying how to get one.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{SystemTime, UNIX_EPOCH},
};

use super::{KafkaLog, KafkaOptions};

/// The broker scripts/test started.
fn brokers() -> String {
    std::env::var("STRATA_TEST_KAFKA").unwrap_or_else(|_| {
        panic!(
            "STRATA_TEST_KAFKA is not set: run the tests with scripts/test, which starts a Kafka-protocol broker (tansu) on 127.0.0.1"
        )
    })
}

/// A topic prefix no other test uses.
fn fresh_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "conf-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

async fn fresh_log() -> KafkaLog {
    KafkaLog::connect(KafkaOptions::new(brokers(), fresh_prefix()))
        .await
        .expect("cannot reach the broker in STRATA_TEST_KAFKA")
}

mod conformance {
    use super::*;
    crate::commit_log_conformance!(fresh_log);
}

/// Two logs on one prefix, as two nodes have: a partition one of them creates after the other
/// looked for it (and found nothing, without creating it) is seen by the other, end and events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_another_log_creates_is_seen() {
    use crate::{CommitLog, PartitionId, conformance::event};

    let prefix = fresh_prefix();
    let connect = || KafkaLog::connect(KafkaOptions::new(brokers(), prefix.clone()));
    let (a, b) = (connect().await.unwrap(), connect().await.unwrap());
    let partition = PartitionId::table("acme", "db", "t");
    assert_eq!(b.high_water_mark(&partition).await.unwrap(), 0);
    assert!(b.read(&partition, 0, 10).await.unwrap().is_empty());
    assert!(!a.partitions().await.unwrap().contains(&partition));
    a.append(&partition, vec![event("e1", 0), event("e2", 0)])
        .await
        .unwrap();
    assert_eq!(b.high_water_mark(&partition).await.unwrap(), 2);
    let read: Vec<String> = b
        .read(&partition, 0, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_id)
        .collect();
    assert_eq!(read, ["e1", "e2"]);
}

/// Tails of six partitions with room for two readers: each sees its own events, in order, while
/// readers are closed and made again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_partitions_are_read_through_a_few_readers() {
    use futures::StreamExt;

    use crate::{CommitLog, PartitionId, conformance::event};

    let options = KafkaOptions {
        readers: 2,
        ..KafkaOptions::new(brokers(), fresh_prefix())
    };
    let log: std::sync::Arc<dyn CommitLog> =
        std::sync::Arc::new(KafkaLog::connect(options).await.unwrap());
    let partitions: Vec<PartitionId> = (0..6)
        .map(|i| PartitionId::table("a", "db", &format!("t{i}")))
        .collect();
    let tails: Vec<_> = partitions
        .iter()
        .map(|p| {
            let tail = crate::tail(log.clone(), p.clone(), 0);
            tokio::spawn(async move {
                tail.take(5)
                    .map(|e| e.unwrap().event_id)
                    .collect::<Vec<_>>()
                    .await
            })
        })
        .collect();
    for round in 0..5 {
        for (i, p) in partitions.iter().enumerate() {
            log.append(p, vec![event(&format!("p{i}-{round}"), 0)])
                .await
                .unwrap();
        }
    }
    for (i, tail) in tails.into_iter().enumerate() {
        let seen = tokio::time::timeout(std::time::Duration::from_secs(30), tail)
            .await
            .expect("a tail fell behind")
            .unwrap();
        assert_eq!(
            seen,
            (0..5).map(|r| format!("p{i}-{r}")).collect::<Vec<_>>()
        );
    }
}
