//! Forwarding in a cluster: a request for a partition another node owns is sent on to that
//! node, and its answer streamed back (see `crate::engine::placement`).
//!
//! The data-plane routes fall in three groups: those of one database (its tables, rows, searches
//! and change stream, and its deletion) go to the database's owner; those that write the control
//! partition (creating a database, verifying its storage) go to the control partition's owner;
//! the rest (health, metrics, listing databases) are answered by any node. A forwarded request
//! carries `x-strata-forwarded-by`, and the node it reaches serves it whatever its own view of the
//! cluster says, so views that differ for a moment never bounce a request back and forth. Every
//! answer names the node that served it in `x-strata-node`.

use axum::{
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, HeaderName, HeaderValue, Method, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{
    AppState, RequestId, RouteSlot,
    data_plane::{DATABASE_ROUTES, api_key},
};
use crate::{
    cluster::Member,
    engine::{CONTROL, database_key},
    error::Error,
};

/// Set on a request one node forwards to another: the sender's name.
pub static FORWARDED_BY: HeaderName = HeaderName::from_static("x-strata-forwarded-by");
/// Set on every answer: the node that served the request.
pub static SERVED_BY: HeaderName = HeaderName::from_static("x-strata-node");

/// Headers of one connection, not of the request or answer they carry.
const HOP_BY_HOP: &[HeaderName] = &[
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::HOST,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
];

/// The data plane's forwarding middleware.
pub(super) async fn data_plane(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let key = match placement(
        &state,
        request.method(),
        request.uri().path(),
        request.headers(),
    )
    .await
    {
        Ok(Some(key)) => key,
        Ok(None) => return next.run(request).await,
        Err(error) => return error.into_response(),
    };
    if request.headers().contains_key(&FORWARDED_BY) {
        return next.run(request).await;
    }
    match state.engine.owner_elsewhere(&key) {
        None => next.run(request).await,
        Some(owner) => {
            let to = owner.data_addr.clone();
            forward(&state, &owner, &to, request, Listener::Data).await
        }
    }
}

/// The ownership key of a data-plane request, or `None` when this node answers it whoever owns
/// what (it also answers, with the usual error, a request whose key it does not know). On the
/// way it catches up with the control partition when the key or the database is new to it, so
/// the node that serves the request knows them too.
async fn placement(
    state: &AppState,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Result<Option<String>, Error> {
    let engine = &state.engine;
    if !engine.clustered() {
        return Ok(None);
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let database = match segments.as_slice() {
        ["v1", "databases"] if method == Method::POST => None,
        ["v1", "databases", _, "storage", "verify"] => None,
        ["v1", "databases", name] if method == Method::DELETE => Some(*name),
        ["v1", operation, name] if DATABASE_ROUTES.iter().any(|(op, _)| op == operation) => {
            Some(*name)
        }
        _ => return Ok(None),
    };
    // Whoever serves it, the key must be known here: it may be a moment old.
    let Ok(principal) = engine.authenticate_current(api_key(headers)).await else {
        return Ok(None);
    };
    let Some(database) = database else {
        return Ok(Some(CONTROL.to_owned()));
    };
    engine.know_database(&principal, database).await?;
    Ok(Some(database_key(&principal.account, database)))
}

/// Which listener a request is forwarded to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Listener {
    Data,
    /// Platform requests keep their `Host` header: it is among the headers their SigV4
    /// signature covers, and the owner checks the signature again.
    Platform,
}

/// Sends the request on to `owner` at `addr` and streams its answer back.
pub(super) async fn forward(
    state: &AppState,
    owner: &Member,
    addr: &str,
    request: Request,
    listener: Listener,
) -> Response {
    let (parts, body) = request.into_parts();
    if let Some(slot) = parts.extensions.get::<RouteSlot>() {
        let _ = slot.0.set("forwarded".to_owned());
    }
    let target = format!(
        "{}://{addr}{}",
        state.scheme,
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut headers = parts.headers;
    for name in HOP_BY_HOP {
        if !(listener == Listener::Platform && name == header::HOST) {
            headers.remove(name);
        }
    }
    if let Ok(me) = HeaderValue::from_str(state.engine.node()) {
        headers.insert(FORWARDED_BY.clone(), me);
    }
    if let Some(RequestId(id)) = parts.extensions.get::<RequestId>()
        && let Ok(id) = HeaderValue::from_str(id)
    {
        headers.insert(super::REQUEST_ID.clone(), id);
    }
    tracing::debug!(node = %owner.node, %target, "forwarding to the owner");
    let sent = state
        .forwarder
        .request(parts.method, &target)
        .headers(headers)
        .body(reqwest::Body::wrap_stream(body.into_data_stream()))
        .send()
        .await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(error) => {
            tracing::warn!(node = %owner.node, %error, "the owner did not answer a forwarded request");
            return Error::Unavailable(format!(
                "node {} serves this and did not answer ({error}); retry after the Retry-After interval",
                owner.node
            ))
            .into_response();
        }
    };
    let mut response = Response::builder().status(answer.status().as_u16());
    if let Some(headers) = response.headers_mut() {
        for (name, value) in answer.headers() {
            if !HOP_BY_HOP.contains(name) {
                headers.append(name.clone(), value.clone());
            }
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap_or_else(|error| Error::Internal(error.to_string()).into_response())
}

/// The client that forwards: it connects quickly or gives up, and leaves answers (change
/// streams among them) as long as they last. It trusts `trusted` beside the system's roots.
pub(super) fn client(
    trusted: &[rustls_pki_types::CertificateDer<'static>],
) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder().connect_timeout(std::time::Duration::from_secs(1));
    for certificate in trusted {
        builder = builder.add_root_certificate(reqwest::Certificate::from_der(certificate)?);
    }
    Ok(builder.build()?)
}
