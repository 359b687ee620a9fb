//! The request bodies a node holds at once, both listeners together.
//!
//! `server.max_body_bytes` bounds one body; this bounds all of them: a request takes its body's
//! size (its Content-Length, or `max_body_bytes` for a chunked body, whose size is not known
//! before it is read) from a node-wide budget, `server.max_in_flight_body_bytes`, and gives it
//! back once its answer is made. A request that finds too little left is refused at once,
//! before its body is read, with 503 and Retry-After ("no capacity free", a transient answer
//! clients retry), as Elasticsearch refuses indexing past its indexing-pressure limit. Requests
//! without a body take nothing and are never refused here.

use std::sync::Arc;

use axum::{
    body::HttpBody as _,
    extract::{Request, State},
    middleware::Next,
    response::{IntoResponse, Response},
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{AppState, error::PlatformError};
use crate::error::Error;

/// The budget is counted in KiB: a semaphore takes at most `u32::MAX` permits at once.
const UNIT: usize = 1024;

/// The node's budget of request-body bytes in flight.
pub struct BodyBudget {
    permits: Arc<Semaphore>,
    total: usize,
    max_body: usize,
}

impl BodyBudget {
    pub fn new(total: usize, max_body: usize) -> BodyBudget {
        let units = total.div_ceil(UNIT).min(Semaphore::MAX_PERMITS);
        BodyBudget {
            permits: Arc::new(Semaphore::new(units)),
            total,
            max_body,
        }
    }

    /// Takes `request`'s share of the budget, held until the permit is dropped; `None` for a
    /// request without a body.
    fn take(&self, request: &Request) -> Result<Option<OwnedSemaphorePermit>, Error> {
        let hint = request.body().size_hint();
        let bytes = match hint.exact() {
            Some(0) => return Ok(None),
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => self.max_body,
        };
        // A body past `max_body_bytes` is refused with 413 once it is read; it holds no more.
        let bytes = bytes.min(self.max_body).min(self.total);
        let units = u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX);
        self.permits
            .clone()
            .try_acquire_many_owned(units)
            .map(Some)
            .map_err(|_| {
                Error::Unavailable(format!(
                    "the server holds as many request bodies as it takes at once ({} bytes, \
                     server.max_in_flight_body_bytes); retry later",
                    self.total
                ))
            })
    }
}

/// The data plane's door: refused requests get the data plane's error body.
pub async fn data_plane(State(state): State<AppState>, request: Request, next: Next) -> Response {
    admit(&state, request, next, IntoResponse::into_response).await
}

/// The platform's door: refused requests get the platform's error body.
pub async fn platform(State(state): State<AppState>, request: Request, next: Next) -> Response {
    admit(&state, request, next, |error| {
        PlatformError {
            operation: "request",
            error,
        }
        .into_response()
    })
    .await
}

/// Runs `request` holding its share of the budget, or answers `refuse` of why it may not run.
async fn admit(
    state: &AppState,
    request: Request,
    next: Next,
    refuse: impl FnOnce(Error) -> Response,
) -> Response {
    match state.bodies.take(&request) {
        Ok(share) => {
            let response = next.run(request).await;
            drop(share);
            response
        }
        Err(error) => refuse(error),
    }
}
