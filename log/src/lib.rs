//! `strata-log`: the commit log every strata write and catalog change is appended to.
//!
//! - [`event`]: the event schema (protobuf; public API for downstream consumers).
//! - [`CommitLog`]: the trait every backend implements, with the guarantees callers rely on.
//! - [`FileLog`]: the embedded default, a directory of CRC-framed segment files per partition
//!   with group commit (byte layout in FORMAT.md).
//! - [`KafkaLog`]: the log on a Kafka-protocol broker, for clusters: one single-partition topic
//!   per strata partition, idempotent producer with acks=all.
//! - [`MemoryLog`]: the same contract in memory, for unit tests.
//! - [`fence`]: the leader-epoch rule that makes a deposed leader's writes void on any backend.
//! - [`Prefix`]: a read-only view of any log that ends at chosen offsets.
//!
//! This crate knows nothing about tables' contents or HTTP.

mod commit_log;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod error;
pub mod event;
pub mod fence;
mod file;
#[doc(hidden)]
pub mod fuzz;
mod kafka;
mod memory;
mod partition;
mod prefix;
mod watermarks;

pub use commit_log::{CommitLog, EventStream, tail};
pub use error::{Error, Result};
pub use event::{Envelope, LeaderEpoch, envelope};
pub use file::{FileLog, FileLogOptions};
pub use kafka::{KafkaLog, KafkaOptions, topic_name};
pub use memory::MemoryLog;
pub use partition::{MAX_PARTITION_NAME, PartitionId};
pub use prefix::Prefix;
