//! The platform API listener (spec 001), with the decisions of docs/api.md.
//!
//! Every route but `GET /health` takes a request signed with AWS Signature Version 4: the
//! [`signed`] middleware checks the API version, reads the body (the signature covers its hash),
//! checks the signature with [`crate::engine::Engine::authenticate_signed`] and hands the
//! [`PlatformPrincipal`] to the handler, which asks [`crate::engine::Engine::authorize`] before
//! it acts. Every answer carries `X-Elastic-Product: Elasticsearch`, without which official
//! Elasticsearch clients refuse a server. Errors have the platform's shape,
//! `{"status": "error", "message": "<operation>: <reason>"}`.

use axum::{
    Extension, Json, Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderName, HeaderValue, Method, Uri},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::get,
};
use serde_json::json;

use super::{AppState, error::PlatformError, health};
use crate::{
    engine::{Action, PlatformPrincipal},
    error::Error,
    sigv4,
};

/// The one API version there is; `x-api-version` or `?api-version=` may name it.
pub const API_VERSION: &str = "2025-06-30";

static ELASTIC_PRODUCT: HeaderName = HeaderName::from_static("x-elastic-product");

pub fn routes(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/", get(cluster_info))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), signed))
        .layer(middleware::map_response(elastic_product))
        .with_state(state)
}

/// The one path that needs no signature.
const UNSIGNED: &str = "/health";

async fn elastic_product(mut response: Response) -> Response {
    response.headers_mut().insert(
        ELASTIC_PRODUCT.clone(),
        HeaderValue::from_static("Elasticsearch"),
    );
    response
}

/// Checks the API version and the signature; the handler gets the principal.
async fn signed(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.uri().path() == UNSIGNED {
        return next.run(request).await;
    }
    let refuse = |error: Error| {
        PlatformError {
            operation: "authentication",
            error,
        }
        .into_response()
    };
    if let Err(error) = check_version(&request) {
        return PlatformError {
            operation: "request",
            error,
        }
        .into_response();
    }
    let (mut parts, body) = request.into_parts();
    let max = state.engine.config().server.max_body_bytes;
    let bytes = match axum::body::to_bytes(body, max).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return PlatformError {
                operation: "request",
                error: Error::PayloadTooLarge { max },
            }
            .into_response();
        }
    };
    let body_sha256 = sigv4::sha256_hex(&bytes);
    let headers: Vec<(&str, &str)> = parts
        .headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
        .collect();
    let signed = sigv4::Request {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query().unwrap_or(""),
        headers,
        body_sha256: &body_sha256,
    };
    let principal = match state.engine.authenticate_signed(&signed).await {
        Ok(principal) => principal,
        Err(error) => return refuse(error),
    };
    tracing::debug!(account = %principal.account, user = %principal.user, "signed request");
    parts.extensions.insert(principal);
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn check_version(request: &Request) -> Result<(), Error> {
    let from_header = request
        .headers()
        .get("x-api-version")
        .map(|v| v.to_str().unwrap_or("?").to_owned());
    let from_query = request.uri().query().and_then(|query| {
        serde_urlencoded::from_str::<Vec<(String, String)>>(query)
            .ok()?
            .into_iter()
            .find(|(k, _)| k == "api-version")
            .map(|(_, v)| v)
    });
    for version in [from_header, from_query].into_iter().flatten() {
        if version != API_VERSION {
            return Err(Error::BadRequest(format!(
                "unsupported API version {version:?}; this server speaks {API_VERSION}"
            )));
        }
    }
    Ok(())
}

/// GET /: who this is, in the shape Elasticsearch and OpenSearch clients read at connect time.
async fn cluster_info(
    State(state): State<AppState>,
    Extension(principal): Extension<PlatformPrincipal>,
) -> Response {
    if let Err(error) = state
        .engine
        .authorize(&principal, Action::MetadataRead, "*")
    {
        return PlatformError {
            operation: "cluster info",
            error,
        }
        .into_response();
    }
    let config = state.engine.config();
    Json(json!({
        "name": config.cluster.node_id,
        "cluster_name": "strata",
        "cluster_uuid": state.engine.cluster_uuid(),
        "version": {
            "number": "8.11.0",
            "build_flavor": "default",
            "build_type": "strata",
            "lucene_version": "9.8.0",
            "minimum_wire_compatibility_version": "7.17.0",
            "minimum_index_compatibility_version": "7.0.0",
            "strata_version": env!("CARGO_PKG_VERSION"),
            "api_version": API_VERSION,
        },
        "tagline": "You Know, for Search",
    }))
    .into_response()
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
