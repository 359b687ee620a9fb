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

    #[error("arrow: {0}")]
    Arrow(String),

    #[error("object store: {0}")]
    ObjectStore(#[from] object_store::Error),

    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),

    #[error("index: {0}")]
    Index(String),

    /// A request this crate cannot carry out as asked (the message says why and what to do).
    #[error("{0}")]
    Refused(String),

    #[error("query: {0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
}
