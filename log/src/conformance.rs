//! The conformance suite every [`CommitLog`] implementation runs.
//!
//! Each case is a public async function over a fresh log; [`commit_log_conformance!`] turns the
//! list into one `#[tokio::test]` per case for a backend:
//!
//! ```ignore
//! strata_log::commit_log_conformance!(|| async { MemoryLog::new() });
//! ```
//!
//! The factory returns any `CommitLog`; a backend that needs a directory wraps its log together
//! with the guard that keeps the directory alive (see `file/tests.rs`).

#![allow(clippy::unwrap_used, clippy::panic)]

use std::{collections::BTreeSet, sync::Arc};

use futures::StreamExt;

use crate::{
    CommitLog, Envelope, Error, LeaderEpoch, PartitionId,
    envelope::Body,
    event::AccountCreated,
    fence::{EpochFence, Verdict},
};

/// An event whose content identifies it: `id` goes in the event id and the body.
pub fn event(id: &str, epoch: u64) -> Envelope {
    Envelope {
        event_id: id.to_owned(),
        timestamp_micros: 1_700_000_000_000_000,
        principal: "test".to_owned(),
        epoch,
        body: Some(Body::AccountCreated(AccountCreated {
            name: id.to_owned(),
            enterprise: false,
        })),
        ..Default::default()
    }
}

fn ids(events: &[Envelope]) -> Vec<String> {
    events.iter().map(|e| e.event_id.clone()).collect()
}

fn batch(prefix: &str, n: usize) -> Vec<Envelope> {
    (0..n).map(|i| event(&format!("{prefix}{i}"), 0)).collect()
}

fn p(name: &str) -> PartitionId {
    PartitionId::table("acct", "db", name)
}

pub async fn empty_partition(log: Arc<dyn CommitLog>) {
    let t = p("empty");
    assert_eq!(log.high_water_mark(&t).await.unwrap(), 0);
    assert!(log.read(&t, 0, 10).await.unwrap().is_empty());
    assert!(matches!(
        log.read(&t, 1, 10).await,
        Err(Error::OffsetOutOfRange { .. })
    ));
    assert!(log.partitions().await.unwrap().is_empty());
}

pub async fn offsets_are_dense_and_reads_return_what_was_appended(log: Arc<dyn CommitLog>) {
    let t = p("dense");
    let mut expected = Vec::new();
    let mut next = 0;
    for (i, n) in [1usize, 3, 1, 7, 2].into_iter().enumerate() {
        let events = batch(&format!("b{i}-"), n);
        expected.extend(ids(&events));
        let range = log.append(&t, events).await.unwrap();
        assert_eq!(range, next..next + n as u64);
        next += n as u64;
        assert_eq!(log.high_water_mark(&t).await.unwrap(), next);
    }
    let all = log.read(&t, 0, 100).await.unwrap();
    assert_eq!(ids(&all), expected);
    for (i, event) in all.iter().enumerate() {
        assert_eq!(event.offset, i as u64);
        assert_eq!(event.partition, t.as_str());
        assert_eq!(
            event,
            &Envelope {
                offset: i as u64,
                partition: t.to_string(),
                ..event.clone()
            }
        );
    }
    // Bounded reads, from the middle of a batch.
    let some = log.read(&t, 5, 4).await.unwrap();
    assert_eq!(ids(&some), expected[5..9]);
    assert!(log.read(&t, next, 10).await.unwrap().is_empty());
    assert!(log.read(&t, next + 1, 10).await.is_err());
    // An empty append changes nothing.
    assert_eq!(log.append(&t, Vec::new()).await.unwrap(), next..next);
}

pub async fn bodies_round_trip_byte_for_byte(log: Arc<dyn CommitLog>) {
    let t = p("bodies");
    let mut big = event("big", 3);
    big.request_id = "r".repeat(1 << 20);
    let marker = Envelope {
        epoch: 4,
        body: Some(Body::LeaderEpoch(LeaderEpoch {
            epoch: 4,
            node: "n1".into(),
        })),
        ..Default::default()
    };
    let empty = Envelope::default();
    log.append(&t, vec![big.clone(), marker.clone(), empty.clone()])
        .await
        .unwrap();
    let read = log.read(&t, 0, 10).await.unwrap();
    let strip = |mut e: Envelope| {
        e.offset = 0;
        e.partition.clear();
        e
    };
    assert_eq!(
        read.into_iter().map(strip).collect::<Vec<_>>(),
        vec![big, marker, empty]
    );
}

pub async fn concurrent_appends_get_disjoint_dense_offsets(log: Arc<dyn CommitLog>) {
    let t = p("concurrent");
    let writers = 16;
    let per_writer = 25;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let log = log.clone();
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for i in 0..per_writer {
                let events = batch(&format!("w{w}-{i}-"), 1 + (i % 3));
                let range = log.append(&t, events.clone()).await.unwrap();
                acknowledged.push((range, ids(&events)));
            }
            acknowledged
        }));
    }
    let mut covered = BTreeSet::new();
    let mut acknowledged = Vec::new();
    for task in tasks {
        for (range, events) in task.await.unwrap() {
            assert_eq!(range.end - range.start, events.len() as u64);
            for offset in range.clone() {
                assert!(covered.insert(offset), "offset {offset} given twice");
            }
            acknowledged.push((range, events));
        }
    }
    let total = covered.len() as u64;
    assert_eq!(
        covered.into_iter().collect::<Vec<_>>(),
        (0..total).collect::<Vec<_>>()
    );
    assert_eq!(log.high_water_mark(&t).await.unwrap(), total);
    let all = log.read(&t, 0, total as usize).await.unwrap();
    for (range, events) in acknowledged {
        assert_eq!(ids(&all[range.start as usize..range.end as usize]), events);
    }
}

pub async fn partitions_are_independent(log: Arc<dyn CommitLog>) {
    let (a, b) = (p("a"), PartitionId::control());
    log.append(&a, batch("a", 3)).await.unwrap();
    assert_eq!(log.append(&b, batch("b", 2)).await.unwrap(), 0..2);
    assert_eq!(log.append(&a, batch("a", 1)).await.unwrap(), 3..4);
    assert_eq!(log.partitions().await.unwrap(), vec![b.clone(), a.clone()]);
    assert_eq!(ids(&log.read(&b, 0, 10).await.unwrap()), vec!["b0", "b1"]);
    // Names that need escaping on disk stay distinct.
    let odd = PartitionId::new("x/y.z/..%2F ü".to_owned()).unwrap();
    let long = PartitionId::new("l".repeat(1000)).unwrap();
    let long2 = PartitionId::new(format!("{}m", "l".repeat(999))).unwrap();
    for (i, id) in [&odd, &long, &long2].into_iter().enumerate() {
        log.append(id, batch(&format!("odd{i}-"), 1)).await.unwrap();
    }
    for (i, id) in [&odd, &long, &long2].into_iter().enumerate() {
        assert_eq!(
            ids(&log.read(id, 0, 10).await.unwrap()),
            vec![format!("odd{i}-0")]
        );
    }
    assert_eq!(log.partitions().await.unwrap().len(), 5);
}

pub async fn tails_follow_new_appends(log: Arc<dyn CommitLog>) {
    let t = p("tail");
    log.append(&t, batch("early", 2)).await.unwrap();
    let mut from_start = crate::tail(log.clone(), t.clone(), 0);
    let mut from_middle = crate::tail(log.clone(), t.clone(), 1);
    let writer = {
        let log = log.clone();
        let t = t.clone();
        tokio::spawn(async move {
            for i in 0..5 {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                log.append(&t, vec![event(&format!("late{i}"), 0)])
                    .await
                    .unwrap();
            }
        })
    };
    let mut seen = Vec::new();
    for _ in 0..7 {
        seen.push(from_start.next().await.unwrap().unwrap());
    }
    assert_eq!(
        seen.iter().map(|e| e.offset).collect::<Vec<_>>(),
        (0..7).collect::<Vec<_>>()
    );
    assert_eq!(
        ids(&seen[2..]),
        (0..5).map(|i| format!("late{i}")).collect::<Vec<_>>()
    );
    let first = from_middle.next().await.unwrap().unwrap();
    assert_eq!((first.offset, first.event_id.as_str()), (1, "early1"));
    writer.await.unwrap();
    let waited = tokio::time::timeout(std::time::Duration::from_secs(5), log.wait_for(&t, 6));
    waited.await.unwrap().unwrap();
}

pub async fn deleted_partitions_start_over(log: Arc<dyn CommitLog>) {
    let t = p("deleted");
    let keep = p("kept");
    log.append(&t, batch("old", 4)).await.unwrap();
    log.append(&keep, batch("keep", 1)).await.unwrap();
    log.delete_partition(&t).await.unwrap();
    log.delete_partition(&t).await.unwrap();
    assert_eq!(log.partitions().await.unwrap(), vec![keep.clone()]);
    assert_eq!(log.high_water_mark(&t).await.unwrap(), 0);
    assert_eq!(log.append(&t, batch("new", 1)).await.unwrap(), 0..1);
    assert_eq!(ids(&log.read(&t, 0, 10).await.unwrap()), vec!["new0"]);
    assert_eq!(ids(&log.read(&keep, 0, 10).await.unwrap()), vec!["keep0"]);
}

/// Two leaders race on one partition: through the fence, only the newer leader's writes after
/// its marker count, whatever order the log interleaved them in.
pub async fn deposed_leaders_writes_are_void_through_the_fence(log: Arc<dyn CommitLog>) {
    let t = p("fenced");
    let marker = |epoch: u64, node: &str| Envelope {
        epoch,
        body: Some(Body::LeaderEpoch(LeaderEpoch {
            epoch,
            node: node.into(),
        })),
        ..Default::default()
    };
    log.append(&t, vec![marker(1, "old")]).await.unwrap();
    log.append(&t, vec![event("old-a", 1)]).await.unwrap();
    log.append(&t, vec![marker(2, "new")]).await.unwrap();
    log.append(&t, vec![event("old-late", 1)]).await.unwrap();
    log.append(&t, vec![event("new-a", 2)]).await.unwrap();
    log.append(&t, vec![marker(1, "old")]).await.unwrap();
    log.append(&t, vec![event("new-b", 2), event("old-later", 1)])
        .await
        .unwrap();
    let mut fence = EpochFence::default();
    let admitted: Vec<String> = log
        .read(&t, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| fence.judge(e) == Verdict::Admit)
        .map(|e| e.event_id)
        .collect();
    assert_eq!(admitted, vec!["old-a", "new-a", "new-b"]);
    assert_eq!(fence.newest(), 2);
}

/// Generates one `#[tokio::test]` per conformance case for the log the factory builds.
#[macro_export]
macro_rules! commit_log_conformance {
    ($factory:expr) => {
        $crate::commit_log_conformance!(@cases $factory;
            empty_partition,
            offsets_are_dense_and_reads_return_what_was_appended,
            bodies_round_trip_byte_for_byte,
            concurrent_appends_get_disjoint_dense_offsets,
            partitions_are_independent,
            tails_follow_new_appends,
            deleted_partitions_start_over,
            deposed_leaders_writes_are_void_through_the_fence,
        );
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let log = ($factory)().await;
                $crate::conformance::$case(::std::sync::Arc::new(log)).await;
            }
        )*
    };
}
