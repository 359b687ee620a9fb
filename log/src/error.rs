//! The one error type of the log crate.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid partition name {name:?}: {reason}")]
    InvalidPartition { name: String, reason: &'static str },

    #[error("log directory {} is in use by another process", path.display())]
    Locked { path: PathBuf },

    #[error("corrupt log file {} at byte {position}: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },

    #[error("offset {offset} of partition {partition} is beyond its end {high_water_mark}")]
    OffsetOutOfRange {
        partition: String,
        offset: u64,
        high_water_mark: u64,
    },

    #[error("batch of {bytes} bytes exceeds the largest the log accepts ({max})")]
    BatchTooLarge { bytes: usize, max: usize },

    /// A write to the partition failed; nothing of it was acknowledged, and the next write tries
    /// again (unless the partition was deleted).
    #[error("writing to partition {partition} failed: {cause}")]
    WriteFailed { partition: String, cause: String },

    /// The disk (or the quota) holding the partition is full: nothing of the write was
    /// acknowledged, and writes succeed again once there is room.
    #[error("no space left for partition {partition}: {cause}")]
    StorageFull { partition: String, cause: String },

    #[error("undecodable event at offset {offset} of partition {partition}: {source}")]
    Decode {
        partition: String,
        offset: u64,
        #[source]
        source: prost::DecodeError,
    },

    #[error("the log is closed")]
    Closed,

    /// A failure of the log's backend service (a Kafka broker), with what was being done.
    #[error("{0}")]
    Backend(String),

    #[error("log directory {} is open read-only", path.display())]
    ReadOnly { path: PathBuf },

    #[error("i/o error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}
