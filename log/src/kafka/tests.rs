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
