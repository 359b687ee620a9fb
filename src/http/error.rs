//! The one place where errors become HTTP statuses and bodies.
//!
//! Data plane: `{"code": "<snake_case>", "message": "..."}`, plus the plan-limit fields for a
//! limit reached. Platform API: `{"status": "error", "message": "<operation>: <reason>"}`.
//! Transient answers (busy 409, 503) are marked here; the listener's middleware adds the
//! configured `Retry-After` to them. 5xx are logged at error, 4xx at debug.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::json;

use crate::error::{Error, ErrorCode};

/// The status of every code.
pub fn status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::BadRequest | ErrorCode::InvalidName => StatusCode::BAD_REQUEST,
        ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden | ErrorCode::LimitReached => StatusCode::FORBIDDEN,
        ErrorCode::DatabaseNotFound
        | ErrorCode::TableNotFound
        | ErrorCode::AccountNotFound
        | ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::DatabaseExists
        | ErrorCode::TableExists
        | ErrorCode::AccountExists
        | ErrorCode::UserExists
        | ErrorCode::Exists
        | ErrorCode::Conflict
        | ErrorCode::Busy => StatusCode::CONFLICT,
        ErrorCode::ConcurrentChange => StatusCode::PRECONDITION_FAILED,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::InsufficientStorage => StatusCode::INSUFFICIENT_STORAGE,
        ErrorCode::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::Gone => StatusCode::GONE,
        ErrorCode::Unavailable | ErrorCode::PendingVerification => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Internal | ErrorCode::SourceFailed => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Whether a client should retry the identical request after `Retry-After`.
pub fn is_transient(code: ErrorCode) -> bool {
    matches!(code, ErrorCode::Busy | ErrorCode::Unavailable)
}

/// Marks a response that must carry `Retry-After`.
#[derive(Clone, Copy, Debug)]
pub struct Transient;

fn log(error: &Error, status: StatusCode) {
    if status.is_server_error() {
        tracing::error!(%error, "request failed");
    } else {
        tracing::debug!(%error, status = status.as_u16(), "request refused");
    }
}

/// An error answered on the data plane.
impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let code = self.code();
        let status = status(code);
        log(&self, status);
        let mut body = json!({"code": code.as_str(), "message": self.public_message()});
        if let (Error::LimitReached { details, .. }, Some(body)) = (&self, body.as_object_mut())
            && let Ok(serde_json::Value::Object(extra)) = serde_json::to_value(details)
        {
            body.extend(extra);
        }
        let mut response = (status, Json(body)).into_response();
        if is_transient(code) {
            response.extensions_mut().insert(Transient);
        }
        response
    }
}

/// An error answered on the platform API, for `operation`.
pub struct PlatformError {
    pub operation: &'static str,
    pub error: Error,
}

impl PlatformError {
    /// The error of `operation`, in the platform's shape (for `map_err`).
    pub fn of(operation: &'static str) -> impl Fn(Error) -> PlatformError + Copy {
        move |error| PlatformError { operation, error }
    }
}

impl PlatformError {
    /// The status and body the error is answered with.
    pub fn answer(&self) -> (StatusCode, serde_json::Value) {
        let body = json!({
            "status": "error",
            "message": format!("{}: {}", self.operation, self.error.public_message()),
        });
        (status(self.error.code()), body)
    }
}

impl IntoResponse for PlatformError {
    fn into_response(self) -> Response {
        let code = self.error.code();
        let (status, body) = self.answer();
        log(&self.error, status);
        let mut response = (status, Json(body)).into_response();
        if is_transient(code) {
            response.extensions_mut().insert(Transient);
        }
        if let Error::TooManyRequests {
            retry_after_secs, ..
        } = &self.error
        {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(*retry_after_secs),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_name_and_a_client_or_server_status() {
        let codes = [
            ErrorCode::BadRequest,
            ErrorCode::InvalidName,
            ErrorCode::Unauthorized,
            ErrorCode::Forbidden,
            ErrorCode::LimitReached,
            ErrorCode::DatabaseNotFound,
            ErrorCode::TableNotFound,
            ErrorCode::AccountNotFound,
            ErrorCode::DatabaseExists,
            ErrorCode::TableExists,
            ErrorCode::AccountExists,
            ErrorCode::UserExists,
            ErrorCode::Exists,
            ErrorCode::Conflict,
            ErrorCode::Busy,
            ErrorCode::ConcurrentChange,
            ErrorCode::Unavailable,
            ErrorCode::PendingVerification,
            ErrorCode::PayloadTooLarge,
            ErrorCode::InsufficientStorage,
            ErrorCode::TooManyRequests,
            ErrorCode::NotFound,
            ErrorCode::MethodNotAllowed,
            ErrorCode::SourceFailed,
            ErrorCode::Gone,
            ErrorCode::Internal,
        ];
        let names: std::collections::HashSet<_> = codes.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), codes.len());
        for code in codes {
            let status = status(code);
            assert!(status.is_client_error() || status.is_server_error());
        }
    }

    #[test]
    fn internal_details_do_not_leak() {
        let error = Error::Internal("disk /secret/path failed".to_owned());
        assert!(!error.public_message().contains("/secret"));
    }
}
