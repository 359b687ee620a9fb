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

/// A broker that clients reach through a loopback proxy the test can cut: every connection is
/// dropped and new ones are refused while it is down, as when a broker restarts or the network
/// fails. The broker is tansu, started by scripts/kafka-broker and told to advertise the proxy.
struct FlakyBroker {
    address: String,
    down: std::sync::Arc<std::sync::atomic::AtomicBool>,
    connections: std::sync::Arc<parking_lot::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    broker_pid: u32,
    _dir: tempfile::TempDir,
}

impl FlakyBroker {
    async fn start() -> Self {
        use std::sync::{Arc, atomic::AtomicBool};

        let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = proxy.local_addr().unwrap().to_string();
        let broker_port = {
            let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            free.local_addr().unwrap().port()
        };
        let dir = tempfile::tempdir().unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/kafka-broker");
        let started = std::process::Command::new(script)
            .arg("start")
            .arg(broker_port.to_string())
            .arg(dir.path().join("tansu.log"))
            .arg(proxy.local_addr().unwrap().port().to_string())
            .output()
            .unwrap();
        assert!(
            started.status.success(),
            "scripts/kafka-broker start: {}",
            String::from_utf8_lossy(&started.stderr)
        );
        let broker_pid = String::from_utf8_lossy(&started.stdout)
            .trim()
            .parse()
            .unwrap();
        let down = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (accept_down, accept_connections) = (down.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = proxy.accept().await {
                if accept_down.load(Ordering::SeqCst) {
                    continue; // dropped: the connection is refused
                }
                accept_connections.lock().push(tokio::spawn(async move {
                    let Ok(mut broker) =
                        tokio::net::TcpStream::connect(("127.0.0.1", broker_port)).await
                    else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut broker).await;
                }));
            }
        });
        FlakyBroker {
            address,
            down,
            connections,
            broker_pid,
            _dir: dir,
        }
    }

    /// Drops every connection and refuses new ones until `up`.
    fn cut(&self) {
        self.down.store(true, Ordering::SeqCst);
        for connection in self.connections.lock().drain(..) {
            connection.abort();
        }
    }

    fn up(&self) {
        self.down.store(false, Ordering::SeqCst);
    }
}

impl Drop for FlakyBroker {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg(self.broker_pid.to_string())
            .status();
    }
}

/// A tail (what a projection follows) that meets a broker gone for a moment, which librdkafka
/// reports to the consumer as "all brokers are down", waits for it and goes on with every event,
/// instead of ending: a projection whose tail ended stayed stopped (a CI run saw it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_outlasts_a_broker_that_is_gone_for_a_moment() {
    use futures::StreamExt;

    use crate::{CommitLog, PartitionId, conformance::event};

    let broker = FlakyBroker::start().await;
    let log: std::sync::Arc<dyn CommitLog> = std::sync::Arc::new(
        KafkaLog::connect(KafkaOptions::new(broker.address.clone(), fresh_prefix()))
            .await
            .unwrap(),
    );
    let partition = PartitionId::table("acme", "db", "t");
    log.append(
        &partition,
        (0..3).map(|i| event(&format!("e{i}"), 0)).collect(),
    )
    .await
    .unwrap();
    let mut tail = crate::tail(log.clone(), partition.clone(), 0);
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(tail.next().await.unwrap().unwrap().event_id);
    }

    broker.cut();
    let follow = async {
        for _ in 0..2 {
            let event = tail.next().await.expect("the tail ended");
            seen.push(
                event
                    .expect("the tail failed on a broker that came back")
                    .event_id,
            );
        }
    };
    let outage = async {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        broker.up();
        log.append(&partition, vec![event("e3", 0), event("e4", 0)])
            .await
            .unwrap();
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        tokio::join!(follow, outage)
    })
    .await
    .expect("the tail did not recover within 60 s");
    assert_eq!(seen, ["e0", "e1", "e2", "e3", "e4"]);
}
