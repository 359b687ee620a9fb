//! The error type of the strata crate, and the closed set of codes errors classify into.
//!
//! Every [`Error`] names one [`ErrorCode`]; `http::error` is the one place that turns codes into
//! HTTP statuses and bodies. Messages are lowercase and name the offending input; internal
//! details (paths, I/O errors) stay in the logs.

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The closed set of error classes clients can see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    BadRequest,
    InvalidName,
    Unauthorized,
    Forbidden,
    LimitReached,
    DatabaseNotFound,
    TableNotFound,
    AccountNotFound,
    DatabaseExists,
    TableExists,
    AccountExists,
    /// A user (the root user of an account) that exists already.
    UserExists,
    /// Something else created with an id that is taken (a channel, a monitor).
    Exists,
    /// The request conflicts with the resource's state (a message to a completed thread, a
    /// status it cannot move to).
    Conflict,
    /// Another write to the same partition was in flight: transient, retry after Retry-After.
    Busy,
    /// The resource changed while the request was being applied: retry.
    ConcurrentChange,
    /// Not ready (activating, leadership moving): transient, retry after Retry-After.
    Unavailable,
    /// A database bound to a bucket that was not verified yet: not transient, verify it.
    PendingVerification,
    PayloadTooLarge,
    /// The disk holding the log is full: nothing was written; writes succeed again once an
    /// operator made room.
    InsufficientStorage,
    /// Too many tries (failed console sign-ins of one user name): wait, then try again.
    TooManyRequests,
    NotFound,
    Gone,
    MethodNotAllowed,
    /// A connected source failed (network, host, the source's own error): a 500 whose message,
    /// naming the stage, is the client's to see.
    SourceFailed,
    Internal,
}

impl ErrorCode {
    /// The snake_case code of error bodies.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::InvalidName => "invalid_name",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::LimitReached => "limit_reached",
            ErrorCode::DatabaseNotFound => "database_not_found",
            ErrorCode::TableNotFound => "table_not_found",
            ErrorCode::AccountNotFound => "account_not_found",
            ErrorCode::DatabaseExists => "database_exists",
            ErrorCode::TableExists => "table_exists",
            ErrorCode::AccountExists => "account_exists",
            ErrorCode::UserExists => "user_exists",
            ErrorCode::Exists => "exists",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Busy => "busy",
            ErrorCode::ConcurrentChange => "concurrent_change",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::PendingVerification => "pending_verification",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::InsufficientStorage => "insufficient_storage",
            ErrorCode::TooManyRequests => "too_many_requests",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Gone => "gone",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::SourceFailed => "source_failed",
            ErrorCode::Internal => "internal",
        }
    }
}

/// A plan ceiling an account reached.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LimitDetails {
    /// "rows", "vectors" or "databases".
    pub limit: &'static str,
    pub used: u64,
    pub requested: u64,
    pub max: u64,
    pub payment_method_raises: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    BadRequest(String),

    #[error("{0}")]
    InvalidName(String),

    #[error("missing or invalid api key")]
    Unauthorized,

    /// A platform request whose signature was refused, and why.
    #[error("{0}")]
    NotAuthenticated(String),

    #[error("{0}")]
    Forbidden(String),

    #[error("{message}")]
    LimitReached {
        message: String,
        details: LimitDetails,
    },

    #[error("database {0:?} does not exist")]
    DatabaseNotFound(String),

    #[error("table {0:?} does not exist")]
    TableNotFound(String),

    #[error("account {0:?} does not exist")]
    AccountNotFound(String),

    #[error("database {name:?} already exists{note}")]
    DatabaseExists { name: String, note: &'static str },

    #[error("table {0:?} already exists")]
    TableExists(String),

    #[error("dataset {0:?} already exists")]
    DatasetExists(String),

    #[error("dataset {0:?} does not exist")]
    DatasetNotFound(String),

    #[error("account {0:?} already exists")]
    AccountExists(String),

    #[error("{0}")]
    UserExists(String),

    #[error("{0}")]
    Exists(String),

    #[error("{0}")]
    Conflict(String),

    #[error("{message}")]
    TooManyRequests {
        message: String,
        retry_after_secs: u64,
    },

    #[error("{0}")]
    Busy(String),

    #[error("{0}")]
    ConcurrentChange(String),

    #[error("{0}")]
    Unavailable(String),

    #[error("{0}")]
    PendingVerification(String),

    #[error("request body exceeds {max} bytes")]
    PayloadTooLarge { max: usize },

    #[error("{0}")]
    NotFound(String),

    #[error("{0}")]
    MethodNotAllowed(String),

    #[error("{0}")]
    Gone(String),

    #[error(transparent)]
    Log(#[from] strata_log::Error),

    #[error(transparent)]
    Projection(#[from] strata_projections::Error),

    /// A connected source failed: "<stage>: <what the source or the network said>".
    #[error("{0}")]
    SourceFailed(String),

    #[error("{0}")]
    Internal(String),
}

impl Error {
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::BadRequest(_) => ErrorCode::BadRequest,
            Error::InvalidName(_) => ErrorCode::InvalidName,
            Error::Unauthorized | Error::NotAuthenticated(_) => ErrorCode::Unauthorized,
            Error::Forbidden(_) => ErrorCode::Forbidden,
            Error::LimitReached { .. } => ErrorCode::LimitReached,
            Error::DatabaseNotFound(_) => ErrorCode::DatabaseNotFound,
            Error::TableNotFound(_) => ErrorCode::TableNotFound,
            Error::AccountNotFound(_) => ErrorCode::AccountNotFound,
            Error::DatabaseExists { .. } => ErrorCode::DatabaseExists,
            Error::TableExists(_) | Error::DatasetExists(_) => ErrorCode::TableExists,
            Error::DatasetNotFound(_) => ErrorCode::TableNotFound,
            Error::AccountExists(_) => ErrorCode::AccountExists,
            Error::UserExists(_) => ErrorCode::UserExists,
            Error::Exists(_) => ErrorCode::Exists,
            Error::Conflict(_) => ErrorCode::Conflict,
            Error::TooManyRequests { .. } => ErrorCode::TooManyRequests,
            Error::Busy(_) => ErrorCode::Busy,
            Error::ConcurrentChange(_) => ErrorCode::ConcurrentChange,
            Error::Unavailable(_) => ErrorCode::Unavailable,
            Error::PendingVerification(_) => ErrorCode::PendingVerification,
            Error::PayloadTooLarge { .. } => ErrorCode::PayloadTooLarge,
            Error::NotFound(_) => ErrorCode::NotFound,
            Error::MethodNotAllowed(_) => ErrorCode::MethodNotAllowed,
            Error::Gone(_) => ErrorCode::Gone,
            Error::SourceFailed(_) => ErrorCode::SourceFailed,
            Error::Projection(strata_projections::Error::InvalidType { .. }) => {
                ErrorCode::BadRequest
            }
            // The broker is unreachable or refuses (too few in-sync replicas): retry later.
            Error::Log(strata_log::Error::Backend(_)) => ErrorCode::Unavailable,
            // A write failed and nothing of it was acknowledged; the next one tries again.
            Error::Log(strata_log::Error::WriteFailed { .. }) => ErrorCode::Unavailable,
            Error::Log(strata_log::Error::StorageFull { .. }) => ErrorCode::InsufficientStorage,
            Error::Log(_) | Error::Projection(_) | Error::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The message a client may see: internal details are replaced by a generic text.
    pub fn public_message(&self) -> String {
        match self.code() {
            ErrorCode::Internal => "internal error; the server log has the details".to_owned(),
            _ => self.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_failure_is_transient_and_other_log_failures_are_internal() {
        let broker = Error::Log(strata_log::Error::Backend(
            "appending to strata._control: Message timed out".to_owned(),
        ));
        assert_eq!(broker.code(), ErrorCode::Unavailable);
        assert!(broker.public_message().contains("timed out"));
        assert_eq!(
            Error::Log(strata_log::Error::Closed).code(),
            ErrorCode::Internal
        );
        let full = Error::Log(strata_log::Error::StorageFull {
            partition: "t".to_owned(),
            cause: "No space left on device (os error 28)".to_owned(),
        });
        assert_eq!(full.code(), ErrorCode::InsufficientStorage);
        assert!(full.public_message().contains("No space left"));
    }
}
