//! The one error type of the projections crate.

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Log(#[from] strata_log::Error),

    #[error("state store error: {0}")]
    Store(#[from] sled::Error),

    #[error("corrupt projection state {key:?}: {reason}")]
    Corrupt { key: String, reason: String },

    #[error("projection of {partition} stopped: {cause}")]
    Stopped { partition: String, cause: String },

    #[error("invalid column type {text:?}: {reason}")]
    InvalidType { text: String, reason: String },
}
