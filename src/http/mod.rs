//! The two HTTP listeners: the data plane (/v1) and the platform API.
//!
//! Both are thin: a handler parses, authenticates, calls one engine method and renders. Every
//! request gets an id (the client's `x-request-id`, or a new UUIDv7), echoed in the response and
//! stamped on the events it causes, a tracing span, and a line in the request metrics.

mod alerting;
mod aliases;
mod assistant;
mod body;
mod connections;
pub mod console;
mod data_plane;
mod documents;
pub mod error;
mod forward;
mod governance;
mod inflight;
mod panics;
mod platform;

pub(crate) use governance::read_document;
pub use platform::ROUTES as PLATFORM_ROUTES;
pub(crate) mod promql;
mod samples;
pub(crate) mod search;
pub(crate) mod sql;
pub mod tasks;

use std::{
    sync::{Arc, OnceLock},
    time::Instant,
};

use axum::{
    Router,
    extract::{MatchedPath, Request, State},
    http::{HeaderName, HeaderValue},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use tracing::Instrument;

use crate::{
    engine::{Engine, PlatformPrincipal},
    http::error::Transient,
};

/// What every handler gets.
#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<Engine>,
    /// Runs monitors (POST execute; the scheduler holds the same).
    pub alerting: Arc<crate::alerting::Alerting>,
    /// Answers the questions added to threads.
    pub assistant: Arc<crate::assistant::Assistant>,
    /// Sends requests on to the node that serves them, in a cluster.
    forwarder: reqwest::Client,
    /// How the other nodes' listeners are reached: `http`, or `https` when this node serves
    /// TLS (the nodes of a cluster share one configuration).
    scheme: &'static str,
    /// The request bodies the node holds at once, both listeners together.
    bodies: Arc<inflight::BodyBudget>,
    /// Failed console sign-ins, by user name.
    sign_ins: Arc<console::SignIns>,
    /// Requests that run on after their answer (a delete by query's task).
    pub tasks: Arc<tasks::Tasks>,
}

impl AppState {
    /// The state of both listeners; with `tls`, requests are forwarded over HTTPS, trusting
    /// the certificate this node serves (and the system's roots).
    pub fn new(
        engine: Arc<Engine>,
        tls: Option<&crate::tls::Certificates>,
    ) -> anyhow::Result<AppState> {
        let server = &engine.config().server;
        let bodies =
            inflight::BodyBudget::new(server.max_in_flight_body_bytes, server.max_body_bytes);
        let trusted = match tls {
            Some(certificates) => certificates.chain()?,
            None => Vec::new(),
        };
        let tasks = Arc::new(tasks::Tasks::new(engine.node()));
        Ok(AppState {
            tasks,
            alerting: crate::alerting::Alerting::new(engine.clone())?,
            assistant: crate::assistant::Assistant::new(engine.clone())?,
            engine,
            forwarder: forward::client(&trusted)?,
            scheme: match tls {
                Some(_) => "https",
                None => "http",
            },
            bodies: Arc::new(bodies),
            sign_ins: Arc::default(),
        })
    }
}

/// The id of the request being handled.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// What every platform handler starts from: the server's state, who signed the request (its
/// signature checked by the platform's middleware), and the request's id. A user that holds no
/// grant at all is refused here, 403, whatever the route: no role, no access. Only the routes
/// such a user may still use (its own user, its own keys) take [`SignedUser`] instead.
pub struct Signed {
    pub state: AppState,
    pub principal: PlatformPrincipal,
    pub request_id: RequestId,
}

/// Who signed the request, whatever it may do.
pub struct SignedUser(pub Signed);

impl axum::extract::FromRequestParts<AppState> for SignedUser {
    type Rejection = error::PlatformError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<SignedUser, Self::Rejection> {
        let missing = |what: &str| error::PlatformError {
            operation: "request",
            error: crate::error::Error::Internal(format!("the request has no {what}")),
        };
        let principal = parts
            .extensions
            .get::<PlatformPrincipal>()
            .cloned()
            .ok_or_else(|| missing("signer"))?;
        let request_id = parts
            .extensions
            .get::<RequestId>()
            .cloned()
            .ok_or_else(|| missing("id"))?;
        Ok(SignedUser(Signed {
            state: state.clone(),
            principal,
            request_id,
        }))
    }
}

impl axum::extract::FromRequestParts<AppState> for Signed {
    type Rejection = error::PlatformError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Signed, Self::Rejection> {
        let SignedUser(signed) = SignedUser::from_request_parts(parts, state).await?;
        signed
            .state
            .engine
            .authorize_any(&signed.principal)
            .map_err(error::PlatformError::of("request"))?;
        Ok(signed)
    }
}

/// Filled by the inner route middleware with the matched route, read by the outer one.
#[derive(Clone, Default)]
struct RouteSlot(Arc<OnceLock<String>>);

static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The data-plane router.
pub fn data_plane(state: AppState) -> Router {
    let routes = data_plane::routes(state.clone())
        .layer(middleware::from_fn_with_state(
            state.clone(),
            forward::data_plane,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            inflight::data_plane,
        ));
    observe("data", routes, state)
}

/// The platform API router.
pub fn platform(state: AppState) -> Router {
    // Outside `signed`, which reads the body: a refused request's body is never read.
    let routes = platform::routes(state.clone()).layer(middleware::from_fn_with_state(
        state.clone(),
        inflight::platform,
    ));
    observe("platform", routes, state)
}

fn observe(listener: &'static str, routes: Router, state: AppState) -> Router {
    let routes = routes.route_layer(middleware::from_fn(record_route));
    #[cfg(debug_assertions)]
    let routes = if panics::failpoints::armed() {
        routes.layer(middleware::from_fn_with_state(
            listener,
            panics::failpoints::panic_on_request,
        ))
    } else {
        routes
    };
    routes
        // Inside the request's span and id, so a caught panic is logged and counted as a 500.
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panics::PanicAnswer { listener },
        ))
        .layer(middleware::from_fn_with_state(
            (listener, state),
            request_context,
        ))
}

async fn record_route(request: Request, next: Next) -> Response {
    if let (Some(slot), Some(path)) = (
        request.extensions().get::<RouteSlot>(),
        request.extensions().get::<MatchedPath>(),
    ) {
        let _ = slot.0.set(path.as_str().to_owned());
    }
    next.run(request).await
}

async fn request_context(
    State((listener, state)): State<(&'static str, AppState)>,
    mut request: Request,
    next: Next,
) -> Response {
    let request_id = request
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|id| !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let slot = RouteSlot::default();
    request
        .extensions_mut()
        .insert(RequestId(request_id.clone()));
    request.extensions_mut().insert(slot.clone());
    let span = tracing::info_span!(
        "request",
        listener,
        method = %request.method(),
        path = %request.uri().path(),
        request_id = %request_id,
    );
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let route = slot.0.get().map_or("unmatched", String::as_str);
    let status = response.status();
    let metrics = state.engine.metrics();
    metrics
        .http_requests
        .with_label_values(&[listener, route, status.as_str()])
        .inc();
    metrics
        .http_duration
        .with_label_values(&[listener, route])
        .observe(elapsed.as_secs_f64());
    span.in_scope(|| {
        tracing::info!(
            status = status.as_u16(),
            micros = elapsed.as_micros() as u64,
            route,
            "answered"
        );
    });
    let transient = response.extensions().get::<Transient>().is_some();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        headers.insert(REQUEST_ID.clone(), value);
    }
    if !headers.contains_key(&forward::SERVED_BY)
        && let Ok(node) = HeaderValue::from_str(state.engine.node())
    {
        headers.insert(forward::SERVED_BY.clone(), node);
    }
    if transient {
        let seconds = state.engine.config().server.retry_after_secs.max(1);
        headers.insert(axum::http::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// GET /health, on both listeners; in a cluster, with the members this node sees.
async fn health(State(state): State<AppState>) -> Response {
    let mut health = serde_json::json!({
        "status": "ok",
        "node": state.engine.node(),
        "version": env!("CARGO_PKG_VERSION"),
    });
    if state.engine.clustered() {
        let members: Vec<_> = state
            .engine
            .members()
            .into_iter()
            .map(|m| {
                serde_json::json!({
                    "node": m.node,
                    "data_addr": m.data_addr,
                    "platform_addr": m.platform_addr,
                })
            })
            .collect();
        health["members"] = serde_json::Value::Array(members);
    }
    axum::Json(health).into_response()
}
