//! A panic never takes the server down, nor leaves a client without an answer.
//!
//! A panic in a handler (or one resumed from a task the handler awaited) is caught at the edge
//! by tower-http's `CatchPanicLayer` and answered as a 500 in the listener's documented error
//! body. Work sent to the blocking pool reports a panic as a `JoinError`, which the engine's
//! `blocking` helpers turn into an internal error, so it reaches the client the same way. The
//! panic itself is logged by [`crate::panics::install_hook`] on the thread where it happened,
//! inside the request's span when there is one, so the log line carries the request id.
//!
//! Tests reach both paths through a fail point: a debug build started with
//! `STRATA_TEST_FAILPOINTS=1` panics on purpose for a request carrying `x-strata-test-panic:
//! handler` (in the handler's task) or `blocking` (on the blocking pool). Release builds have
//! no such code.

use std::any::Any;

use axum::{body::Body, http::Response, response::IntoResponse};

use crate::{error::Error, http::error::PlatformError, panics::panic_message};

/// Answers a caught panic with a 500 in the listener's error body.
#[derive(Clone, Copy, Debug)]
pub struct PanicAnswer {
    pub listener: &'static str,
}

impl tower_http::catch_panic::ResponseForPanic for PanicAnswer {
    type ResponseBody = Body;

    fn response_for_panic(&mut self, panic: Box<dyn Any + Send + 'static>) -> Response<Body> {
        // The hook has logged the panic with its location, and the 500 is logged as every
        // internal error is: nothing more to log here.
        answer(
            self.listener,
            Error::Internal(format!(
                "a request handler panicked: {}",
                panic_message(panic.as_ref())
            )),
        )
    }
}

/// An error in the body of `listener` ("data" or "platform").
fn answer(listener: &'static str, error: Error) -> Response<Body> {
    if listener == "data" {
        error.into_response()
    } else {
        PlatformError {
            operation: "request",
            error,
        }
        .into_response()
    }
}

#[cfg(debug_assertions)]
pub mod failpoints {
    //! Deliberate panics for the tests of this module's guarantees; debug builds only, and only
    //! when the server was started with `STRATA_TEST_FAILPOINTS=1`.

    use axum::{
        extract::{Request, State},
        middleware::Next,
        response::Response,
    };

    const HEADER: &str = "x-strata-test-panic";

    /// Whether the fail points are armed for this process.
    pub fn armed() -> bool {
        std::env::var("STRATA_TEST_FAILPOINTS").is_ok_and(|v| v == "1")
    }

    #[allow(clippy::panic)] // the point of this fail point
    pub async fn panic_on_request(
        State(listener): State<&'static str>,
        request: Request,
        next: Next,
    ) -> Response {
        let kind = request
            .headers()
            .get(HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        match kind.as_deref() {
            Some("handler") => panic!("fail point: a panic in a handler"),
            Some("blocking") => {
                match crate::engine::blocking(|| panic!("fail point: a panic on the blocking pool"))
                    .await
                {
                    Ok(()) => next.run(request).await,
                    Err(error) => super::answer(listener, error),
                }
            }
            _ => next.run(request).await,
        }
    }
}
