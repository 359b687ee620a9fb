//! The platform API listener. Its datasets, queries and governance are built on the same engine
//! in later work; today it serves its health check and answers everything else with a 404 in
//! the platform's error shape.

use axum::{
    Router,
    http::{Method, Uri},
    response::{IntoResponse, Response},
    routing::get,
};

use super::{AppState, error::PlatformError, health};
use crate::error::Error;

pub fn routes(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

async fn not_found(method: Method, uri: Uri) -> Response {
    PlatformError {
        operation: "request",
        error: Error::NotFound(format!("no endpoint {method} {}", uri.path())),
    }
    .into_response()
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    PlatformError {
        operation: "request",
        error: Error::MethodNotAllowed(format!("{method} is not allowed on {}", uri.path())),
    }
    .into_response()
}
