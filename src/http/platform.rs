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
    Json, Router,
    body::{Body, Bytes},
    extract::{DefaultBodyLimit, Request, State},
    http::{HeaderName, HeaderValue, Method, Uri},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::MethodRouter,
};
use serde_json::{Value, json};

use super::{
    AppState, Signed, alerting, aliases, assistant, body::PathName, connections, console,
    documents, error::PlatformError, forward, governance, health, promql, samples, sql, tasks,
};
use crate::{
    engine::{Action, DEFAULT_DATABASE, PlatformPrincipal, database_key},
    error::Error,
    sigv4,
};

/// The one API version there is; `x-api-version` or `?api-version=` may name it.
pub const API_VERSION: &str = "2025-06-30";

static ELASTIC_PRODUCT: HeaderName = HeaderName::from_static("x-elastic-product");

/// Every platform route: its path, and each method with its handler. The router is built from
/// it, and [`ROUTES`] lists it for the test that walks every route (a route added without an
/// authorization check fails it).
macro_rules! route_table {
    ($($path:literal => { $($method:ident: $handler:expr),+ $(,)? }),+ $(,)?) => {
        /// Every route of the platform API, with its methods.
        pub const ROUTES: &[(&str, &[&str])] = &[$(($path, &[$(stringify!($method)),+])),+];

        fn table() -> Router<AppState> {
            Router::new()$(.route($path, MethodRouter::new()$(.$method($handler))+))+
        }
    };
}

route_table! {
    "/health" => {get: health, put: reserved_name},
    "/" => {get: cluster_info},
    "/{name}" => {
        get: list_datasets,
        put: create_dataset,
        delete: delete_dataset,
        patch: documents::delete_by_query,
    },
    "/{name}/metadata" => {get: dataset_info},
    "/{name}/json" => {post: documents::dataset_bulk},
    "/{name}/metrics" => {post: samples::post_metrics},
    "/api/v1/write" => {post: samples::remote_write},
    "/{name}/_bulk" => {post: documents::dataset_bulk, put: documents::dataset_bulk},
    "/_bulk" => {post: documents::bulk, put: documents::bulk},
    "/_mapping" => {get: mappings, put: create_reserved},
    "/_search" => {
        get: documents::search_all,
        post: documents::search_all,
        put: create_reserved,
    },
    "/_msearch" => {get: documents::msearch, post: documents::msearch, put: create_reserved},
    "/{name}/_msearch" => {get: documents::msearch, post: documents::msearch},
    "/{name}/_search" => {get: documents::search, post: documents::search},
    "/{name}/querydsl" => {get: documents::search},
    "/{name}/enrich_dataset" => {post: documents::enrich},
    "/{name}/_doc" => {post: documents::post_doc},
    "/{name}/_doc/{id}" => {
        get: documents::get_doc,
        put: documents::put_doc,
        post: documents::put_doc,
        delete: documents::delete_doc,
    },
    "/{name}/_update/{id}" => {post: documents::put_doc},
    "/{name}/_create/{id}" => {put: documents::put_doc, post: documents::put_doc},
    "/{name}/_delete_by_query" => {post: documents::es_delete_by_query},
    "/_delete_by_query/{id}/_rethrottle" => {post: tasks::rethrottle},
    "/_update_by_query/{id}/_rethrottle" => {post: tasks::rethrottle},
    "/_reindex/{id}/_rethrottle" => {post: tasks::rethrottle},
    "/_tasks/{id}" => {get: tasks::get_task},
    "/{name}/_count" => {get: documents::count, post: documents::count},
    "/{name}/_mapping" => {get: mappings, put: put_mapping, post: put_mapping},
    "/{name}/_settings" => {get: settings, put: put_settings},
    "/_cluster/health" => {get: cluster_health},
    "/_cluster/health/{pattern}" => {get: cluster_health},
    "/_stats" => {get: indices_stats},
    "/_stats/{metric}" => {get: indices_stats},
    "/{index}/_stats" => {get: indices_stats},
    "/{index}/_stats/{metric}" => {get: indices_stats},
    "/_cat/indices" => {get: cat_indices},
    "/_cat/indices/{pattern}" => {get: cat_indices},
    "/sql" => {get: sql::sql, post: sql::sql, put: create_reserved},
    "/_sql" => {post: sql::sql, put: create_reserved},
    "/{name}/sql" => {post: sql::dataset_sql},
    // Prometheus' query API, at /promql and at /api/v1.
    "/promql/query" => {get: promql::query, post: promql::query},
    "/promql/query_range" => {get: promql::query_range, post: promql::query_range},
    "/promql/labels" => {get: promql::labels, post: promql::labels},
    "/promql/label/{name}/values" => {get: promql::label_values},
    "/promql/series" => {get: promql::series, post: promql::series},
    "/promql/status/buildinfo" => {get: promql::buildinfo},
    "/api/v1/query" => {get: promql::query, post: promql::query},
    "/api/v1/query_range" => {get: promql::query_range, post: promql::query_range},
    "/api/v1/labels" => {get: promql::labels, post: promql::labels},
    "/api/v1/label/{name}/values" => {get: promql::label_values},
    "/api/v1/series" => {get: promql::series, post: promql::series},
    "/api/v1/status/buildinfo" => {get: promql::buildinfo},
    "/{name}/promql" => {get: promql::dataset_query},
    "/api/v1/metadata" => {get: promql::metadata},
    "/api/v1/query_exemplars" => {get: promql::exemplars, post: promql::exemplars},
    "/_cat/aliases" => {get: aliases::cat_aliases},
    "/_cat/aliases/{name}" => {get: aliases::cat_aliases},
    "/_aliases" => {get: aliases::get_aliases, post: aliases::post_aliases},
    "/_alias" => {get: aliases::get_aliases},
    "/_alias/{name}" => {get: aliases::get_aliases},
    "/{index}/_alias" => {get: aliases::get_aliases},
    "/{index}/_aliases" => {get: aliases::get_aliases},
    "/{index}/_alias/{name}" => {
        get: aliases::get_aliases,
        put: aliases::put_alias,
        post: aliases::put_alias,
        delete: aliases::delete_alias,
    },
    "/{index}/_aliases/{name}" => {
        get: aliases::get_aliases,
        put: aliases::put_alias,
        post: aliases::put_alias,
        delete: aliases::delete_alias,
    },
    // Governance (YAML).
    "/user/{name}" => {
        get: governance::get_user,
        put: governance::put_user,
        patch: governance::patch_user,
        delete: governance::delete_user,
    },
    "/user/{name}/keys" => {patch: governance::rotate_keys},
    "/users" => {get: governance::list_users, put: create_reserved},
    "/role/{name}" => {
        get: governance::get_role,
        put: governance::put_role,
        patch: governance::patch_role,
        delete: governance::delete_role,
    },
    "/roles" => {get: governance::list_roles, put: create_reserved},
    // Channels and monitors (YAML).
    "/alert" => {post: alerting::create_channel, put: create_reserved},
    "/alert/{id}" => {
        get: alerting::get_channel,
        patch: alerting::patch_channel,
        delete: alerting::delete_channel,
    },
    "/alerts" => {get: alerting::list_channels, put: create_reserved},
    "/alerts/config" => {post: alerting::import_config},
    "/monitor" => {post: alerting::create_monitor, put: create_reserved},
    "/monitor/{id}" => {
        get: alerting::get_monitor,
        patch: alerting::patch_monitor,
        delete: alerting::delete_monitor,
    },
    "/monitor/{id}/execute" => {post: alerting::execute_monitor},
    "/monitor/_execute" => {post: alerting::execute_draft},
    "/monitor/{id}/runs" => {get: alerting::monitor_runs},
    "/monitors" => {get: alerting::list_monitors, put: create_reserved},
    // Connections.
    "/sources" => {get: connections::connectors, put: create_reserved},
    "/_connector/connectors" => {get: connections::connectors},
    "/sources/connections" => {get: connections::list},
    "/source/{id}" => {
        post: connections::create,
        get: connections::get,
        patch: connections::patch,
        delete: connections::delete,
    },
    "/source/{id}/test" => {post: connections::test},
    "/source/{id}/{name}/metadata" => {get: connections::metadata, head: connections::metadata},
    "/source/{id}/{name}/dsl" => {get: connections::dsl, post: connections::dsl},
    "/import/jobs" => {get: connections::list_imports},
    "/import/jobs/{id}" => {delete: connections::delete_import},
    "/import/{id}" => {put: connections::start_import},
    // Conversation.
    "/assistant/threads" => {get: assistant::list_threads, post: assistant::create_thread},
    "/assistant/threads/{id}" => {
        get: assistant::get_thread,
        put: assistant::update_thread,
        patch: assistant::update_thread,
        delete: assistant::delete_thread,
    },
    "/assistant/threads/{id}/messages" => {
        get: assistant::list_messages,
        post: assistant::post_thread_message,
        delete: assistant::clear_messages,
    },
    "/assistant/message" => {post: assistant::post_message},
    "/assistant/nl" => {get: assistant::nl},
    "/console" => {get: console::page, put: reserved_name},
    "/console/" => {get: console::page},
    "/console/a/{version}/{*path}" => {get: console::file},
    "/console/session" => {
        post: console::sign_in,
        get: console::current,
        delete: console::sign_out,
    },
}

pub fn routes(state: AppState) -> Router {
    table()
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // `signed` reads the body within `server.max_body_bytes` (answering 413 in the
        // platform's shape above it); the handlers' extractors take what it read.
        .layer(DefaultBodyLimit::max(
            state.engine.config().server.max_body_bytes,
        ))
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
    if request.uri().path() == UNSIGNED || console::is_open(request.method(), request.uri().path())
    {
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
    let (parts, body) = request.into_parts();
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
    // A console request: its session cookie (and CSRF token) instead of a signature.
    let mut session = None;
    let principal = if console::is_session_request(&parts.headers, parts.uri.query().unwrap_or(""))
    {
        match console::session_principal(&state, &parts.method, &parts.headers).await {
            Ok((principal, found)) => {
                session = Some(found);
                principal
            }
            Err(error) => return refuse(error),
        }
    } else {
        match signature_principal(&state, &parts, &bytes).await {
            Ok(principal) => principal,
            Err(error) => return refuse(error),
        }
    };
    tracing::debug!(account = %principal.account, user = %principal.user, "signed request");
    // In a cluster, what touches datasets is served by the owner of the account's `default`
    // database; the owner checks the signature again.
    let owner = (parts.uri.path() != "/" && !parts.headers.contains_key(&forward::FORWARDED_BY))
        .then(|| {
            state
                .engine
                .owner_elsewhere(&database_key(&principal.account, DEFAULT_DATABASE))
        })
        .flatten();
    let mut request = Request::from_parts(parts, Body::from(bytes));
    match owner {
        Some(owner) => {
            let to = owner.platform_addr.clone();
            forward::forward(&state, &owner, &to, request, forward::Listener::Platform).await
        }
        None => {
            request.extensions_mut().insert(principal);
            if let Some(session) = session {
                request.extensions_mut().insert(session);
            }
            next.run(request).await
        }
    }
}

/// The principal whose signature (SigV4, in the headers or presigned in the query) the request
/// carries; a 401 when it has none that holds.
async fn signature_principal(
    state: &AppState,
    parts: &axum::http::request::Parts,
    bytes: &Bytes,
) -> Result<PlatformPrincipal, Error> {
    let body_sha256 = sigv4::sha256_hex(bytes);
    let mut headers: Vec<(&str, &str)> = parts
        .headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
        .collect();
    // HTTP/2 carries the host as the `:authority` pseudo-header, which signers sign as `host`.
    if !parts.headers.contains_key(axum::http::header::HOST)
        && let Some(authority) = parts.uri.authority()
    {
        headers.push(("host", authority.as_str()));
    }
    let signed = sigv4::Request {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query().unwrap_or(""),
        headers,
        body_sha256: &body_sha256,
    };
    state.engine.authenticate_signed(&signed).await
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
async fn cluster_info(Signed { state, .. }: Signed) -> Response {
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

/// GET /_cluster/health[/{index}]: green, as tools that wait for a cluster expect; its counts
/// are the account's datasets (one primary shard each, no replicas) and the cluster's nodes.
async fn cluster_health(
    Signed {
        state, principal, ..
    }: Signed,
) -> Result<Response, PlatformError> {
    let operation = "cluster health";
    let datasets = state
        .engine
        .datasets(&principal)
        .await
        .map_err(PlatformError::of(operation))?
        .len();
    let nodes = state.engine.members().len().max(1);
    Ok(Json(json!({
        "cluster_name": "strata",
        "status": "green",
        "timed_out": false,
        "number_of_nodes": nodes,
        "number_of_data_nodes": nodes,
        "active_primary_shards": datasets,
        "active_shards": datasets,
        "relocating_shards": 0,
        "initializing_shards": 0,
        "unassigned_shards": 0,
        "delayed_unassigned_shards": 0,
        "number_of_pending_tasks": 0,
        "number_of_in_flight_fetch": 0,
        "task_max_waiting_in_queue_millis": 0,
        "active_shards_percent_as_number": 100.0,
    }))
    .into_response())
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

/// PUT on a path the platform serves itself (`/sql`, `/_search`, `/health`, ...): a dataset of
/// that name could never be reached, so creating it is refused as any reserved name is (400).
/// `PUT /_bulk` stays Elasticsearch's bulk API.
async fn create_reserved(_signed: Signed, uri: Uri) -> PlatformError {
    reserved_name(uri).await
}

/// PUT /health: the one reserved path that is not signed.
async fn reserved_name(uri: Uri) -> PlatformError {
    let name = uri.path().trim_start_matches('/');
    let error = match crate::engine::check_name(name) {
        Err(error) => error,
        Ok(()) => Error::InvalidName(format!(
            "invalid dataset name {name:?}: it is reserved by the platform"
        )),
    };
    PlatformError {
        operation: "create dataset",
        error,
    }
}

/// GET /metadata: every dataset's info record. GET (and HEAD) /{index}, as Elasticsearch's
/// get index API: each dataset the path names (by name, pattern or alias) with its aliases,
/// mappings and settings; a 404 when a name names none.
async fn list_datasets(
    Signed {
        state, principal, ..
    }: Signed,
    name: Result<PathName, Error>,
) -> Result<Response, PlatformError> {
    let PathName(name) = name.map_err(PlatformError::of("request"))?;
    if name != "metadata" {
        return get_index(&state, &principal, &name)
            .await
            .map_err(PlatformError::of("get index"));
    }
    let datasets = state
        .engine
        .datasets(&principal)
        .await
        .map_err(PlatformError::of("list datasets"))?;
    Ok(Json(datasets).into_response())
}

async fn get_index(
    state: &AppState,
    principal: &PlatformPrincipal,
    names: &str,
) -> Result<Response, Error> {
    let defs = state.engine.dataset_defs(principal, Some(names)).await?;
    let aliases = state.engine.aliases(principal, Some(names), None).await;
    let mut body = serde_json::Map::new();
    for def in defs {
        let mut entry = crate::documents::mapping::of(&def);
        let aliases = match &aliases {
            Ok(listing) => listing.get(&def.name).cloned().unwrap_or_default(),
            Err(_) => Default::default(),
        };
        entry["aliases"] = Value::Object(aliases);
        entry["settings"] = index_settings(&def);
        body.insert(def.name.clone(), entry);
    }
    Ok(Json(body).into_response())
}

/// PUT /{dataset}: creates an empty dataset. The optional body is an Elasticsearch-style index
/// configuration: its `mappings` declare columns, its `aliases` are made with it; of its
/// `settings`, the dataset keeps the search limits (`crate::documents::settings`), and the
/// others are accepted and ignored (one shard, no replicas, always).
async fn create_dataset(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: Result<PathName, Error>,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let operation = "create dataset";
    let PathName(name) = name.map_err(PlatformError::of(operation))?;
    let (declared, aliases) = check_configuration(&body).map_err(PlatformError::of(operation))?;
    state
        .engine
        .create_dataset(
            &principal,
            &name,
            declared,
            &aliases,
            &principal.origin(&request_id.0),
        )
        .await
        .map_err(PlatformError::of(operation))?;
    Ok(
        Json(json!({"acknowledged": true, "shards_acknowledged": true, "index": name}))
            .into_response(),
    )
}

/// The body of PUT /{dataset}: nothing, or a JSON object with `settings`, `aliases` and
/// `mappings`; what the mappings declare, and the aliases.
fn check_configuration(
    body: &[u8],
) -> Result<
    (
        crate::documents::mapping::Declared,
        Vec<(String, crate::engine::AliasSpec)>,
    ),
    Error,
> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Default::default());
    }
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| Error::BadRequest(format!("invalid configuration: {error}")))?;
    let Some(object) = value.as_object() else {
        return Err(Error::BadRequest(
            "the configuration must be a JSON object".to_owned(),
        ));
    };
    if let Some(key) = object
        .keys()
        .find(|key| !matches!(key.as_str(), "settings" | "aliases" | "mappings"))
    {
        return Err(Error::BadRequest(format!(
            "unsupported configuration key {key:?} (settings, aliases and mappings are accepted)"
        )));
    }
    let mut declared = match object.get("mappings") {
        Some(mappings) => {
            let declared = crate::documents::mapping::declared_columns(
                mappings,
                crate::documents::mapping::ignores_malformed(object.get("settings"))?,
            )?;
            crate::documents::mapping::check_aliases(&declared, |_| false)?;
            declared
        }
        None => crate::documents::mapping::Declared::default(),
    };
    declared.settings = crate::documents::settings::kept(object.get("settings"))?;
    let aliases = match object.get("aliases") {
        Some(aliases) => aliases::creation_aliases(aliases)?,
        None => Vec::new(),
    };
    Ok((declared, aliases))
}

/// DELETE /{dataset}: the dataset and all its records, for good.
async fn delete_dataset(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: Result<PathName, Error>,
) -> Result<Response, PlatformError> {
    let operation = "delete dataset";
    let PathName(name) = name.map_err(PlatformError::of(operation))?;
    state
        .engine
        .delete_dataset(&principal, &name, &principal.origin(&request_id.0))
        .await
        .map_err(PlatformError::of(operation))?;
    Ok(Json(json!({"acknowledged": true})).into_response())
}

/// GET and HEAD /{dataset}/metadata: one dataset's info record (HEAD: 200 or 404, no body).
async fn dataset_info(
    Signed {
        state, principal, ..
    }: Signed,
    name: Result<PathName, Error>,
) -> Result<Response, PlatformError> {
    let operation = "dataset metadata";
    let PathName(name) = name.map_err(PlatformError::of(operation))?;
    let info = state
        .engine
        .dataset_info(&principal, &name)
        .await
        .map_err(PlatformError::of(operation))?;
    Ok(Json(info).into_response())
}

/// GET /_mapping and /{dataset}/_mapping: each dataset's columns as an Elasticsearch mapping,
/// `{"<dataset>": {"mappings": {"properties": ...}}}`.
async fn mappings(
    Signed {
        state, principal, ..
    }: Signed,
    name: Option<axum::extract::Path<String>>,
) -> Result<Response, PlatformError> {
    let operation = "mapping";
    let name = name.map(|axum::extract::Path(name)| name);
    let defs = state
        .engine
        .dataset_defs(&principal, name.as_deref())
        .await
        .map_err(PlatformError::of(operation))?;
    let body: serde_json::Map<String, serde_json::Value> = defs
        .iter()
        .map(|def| (def.name.clone(), crate::documents::mapping::of(def)))
        .collect();
    Ok(Json(body).into_response())
}

/// PUT|POST /{index}/_mapping: declares fields on the datasets the path names (see
/// `Engine::put_mapping`); the body is a mapping, `{"properties": {...}}`.
async fn put_mapping(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    axum::extract::Path(names): axum::extract::Path<String>,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let operation = "put mapping";
    let mappings: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| Error::BadRequest(format!("[parsing_exception] the body is not JSON: {e}")))
        .map_err(PlatformError::of(operation))?;
    state
        .engine
        .put_mapping(
            &principal,
            &names,
            &mappings,
            &principal.origin(&request_id.0),
        )
        .await
        .map_err(PlatformError::of(operation))?;
    Ok(Json(json!({"acknowledged": true})).into_response())
}

/// Index settings a request may set that mean nothing here, and are accepted as such: a
/// dataset has one shard and no replicas, an acknowledged write is visible at once and durable
/// in the log, and segments are searched as they are.
const NO_OP_SETTINGS: &[&str] = &[
    "number_of_replicas",
    "auto_expand_replicas",
    "refresh_interval",
    "search.idle.after",
    "search.concurrent_segment_search.enabled",
    "search.concurrent_segment_search.mode",
    "translog.durability",
    "translog.sync_interval",
    "translog.flush_threshold_size",
    "max_refresh_listeners",
];

/// PUT /{index}/_settings: index settings that mean nothing here ([`NO_OP_SETTINGS`]) are
/// acknowledged for the datasets the path names; any other is a 400 that names it (a setting
/// is never silently dropped).
async fn put_settings(
    Signed {
        state, principal, ..
    }: Signed,
    axum::extract::Path(names): axum::extract::Path<String>,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let operation = "put settings";
    let settings: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| Error::BadRequest(format!("[parsing_exception] the body is not JSON: {e}")))
        .map_err(PlatformError::of(operation))?;
    let settings = settings.get("settings").unwrap_or(&settings);
    if let Some((other, _)) = crate::documents::settings::flat(settings)
        .into_iter()
        .find(|(name, _)| !NO_OP_SETTINGS.contains(&name.as_str()))
    {
        return Err(PlatformError::of(operation)(Error::BadRequest(format!(
            "[illegal_argument_exception] setting [index.{other}] cannot be changed here (a dataset's search limits, such as index.max_result_window, are set when it is created; accepted here, without effect: {})",
            NO_OP_SETTINGS.join(", ")
        ))));
    }
    // The datasets must exist (and the user may change them).
    for def in state
        .engine
        .dataset_defs(&principal, Some(&names))
        .await
        .map_err(PlatformError::of(operation))?
    {
        state
            .engine
            .authorize(&principal, Action::DatasetCreate, &def.name)
            .map_err(PlatformError::of(operation))?;
    }
    Ok(Json(json!({"acknowledged": true})).into_response())
}

/// GET /{index}/_settings: each dataset's settings, as the get index API shows them.
async fn settings(
    Signed {
        state, principal, ..
    }: Signed,
    axum::extract::Path(names): axum::extract::Path<String>,
) -> Result<Response, PlatformError> {
    let operation = "get settings";
    let defs = state
        .engine
        .dataset_defs(&principal, Some(&names))
        .await
        .map_err(PlatformError::of(operation))?;
    let body: serde_json::Map<String, serde_json::Value> = defs
        .iter()
        .map(|def| (def.name.clone(), json!({"settings": index_settings(def)})))
        .collect();
    Ok(Json(body).into_response())
}

/// A dataset's settings as Elasticsearch shows an index's.
fn index_settings(def: &strata_projections::catalog::TableDef) -> serde_json::Value {
    let mut index = crate::documents::settings::Limits::shown(def);
    for (name, value) in [
        ("number_of_shards", "1".to_owned()),
        ("number_of_replicas", "0".to_owned()),
        ("uuid", def.id.clone()),
        ("provided_name", def.name.clone()),
        ("creation_date", (def.created_at_micros / 1000).to_string()),
    ] {
        index.insert(name.to_owned(), Value::String(value));
    }
    json!({ "index": index })
}

/// What `GET /_cat/indices` takes: `format=json` (else a text table), `v` (a header line), and
/// `pattern` in the path (comma-separated names or globs with `*`).
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct CatParams {
    #[serde(default)]
    pub(super) format: Option<String>,
    #[serde(default)]
    pub(super) v: Option<String>,
}

/// GET /_cat/indices[/{pattern}]: the datasets' info records, as Elasticsearch's cat API lists
/// indices: JSON with `format=json`, otherwise a text table with aligned columns.
async fn cat_indices(
    Signed {
        state, principal, ..
    }: Signed,
    pattern: Option<axum::extract::Path<String>>,
    uri: Uri,
) -> Result<Response, PlatformError> {
    let operation = "cat indices";
    let params: CatParams = serde_urlencoded::from_str(uri.query().unwrap_or(""))
        .map_err(|e| Error::BadRequest(format!("invalid query parameters: {e}")))
        .map_err(PlatformError::of(operation))?;
    let mut datasets = state
        .engine
        .datasets(&principal)
        .await
        .map_err(PlatformError::of(operation))?;
    if let Some(axum::extract::Path(pattern)) = pattern {
        let patterns: Vec<&str> = pattern.split(',').map(str::trim).collect();
        datasets.retain(|d| {
            patterns
                .iter()
                .any(|p| crate::keys::pattern_matches(p, &d.index))
        });
    }
    match params.format.as_deref() {
        Some("json") => Ok(Json(datasets).into_response()),
        None | Some("txt") | Some("text") => {
            let header = params.v.is_some_and(|v| v != "false");
            Ok(cat_table(&datasets, header).into_response())
        }
        Some(other) => Err(PlatformError::of(operation)(Error::BadRequest(format!(
            "unsupported format {other:?}; use json or txt"
        )))),
    }
}

/// GET /[{index}/]_stats[/{metric}]: Elasticsearch's index statistics of the datasets the user
/// may see (`index`: comma-separated names or globs), one shard each: `docs` (records),
/// `store` (bytes in segments and in memory) and `fielddata` (always 0: aggregations read
/// columns from the segments, none is loaded onto the heap). Other metrics are refused.
async fn indices_stats(
    Signed {
        state, principal, ..
    }: Signed,
    axum::extract::Path(path): axum::extract::Path<std::collections::HashMap<String, String>>,
) -> Result<Response, PlatformError> {
    let failed = PlatformError::of("indices stats");
    const SERVED: [&str; 3] = ["docs", "store", "fielddata"];
    let metrics: Vec<&str> = match path.get("metric").map(String::as_str) {
        None | Some("_all") => SERVED.to_vec(),
        Some(listed) => listed.split(',').map(str::trim).collect(),
    };
    if let Some(other) = metrics.iter().find(|m| !SERVED.contains(m)) {
        return Err(failed(Error::BadRequest(format!(
            "[illegal_argument_exception] the index statistic [{other}] is not served; served: {}",
            SERVED.join(", ")
        ))));
    }
    let mut datasets = state.engine.datasets(&principal).await.map_err(failed)?;
    if let Some(pattern) = path.get("index").filter(|p| *p != "_all") {
        let patterns: Vec<&str> = pattern.split(',').map(str::trim).collect();
        for name in patterns.iter().filter(|p| !p.contains('*')) {
            if !datasets.iter().any(|d| d.index == *name) {
                return Err(failed(Error::DatasetNotFound(format!(
                    "[index_not_found_exception] no such index [{name}]"
                ))));
            }
        }
        datasets.retain(|d| {
            patterns
                .iter()
                .any(|p| crate::keys::pattern_matches(p, &d.index))
        });
    }
    let section = |docs: u64, bytes: u64| {
        let mut out = serde_json::Map::new();
        for metric in &metrics {
            let value = match *metric {
                "docs" => json!({"count": docs, "deleted": 0}),
                "store" => json!({"size_in_bytes": bytes, "reserved_in_bytes": 0}),
                _ => json!({"memory_size_in_bytes": 0, "evictions": 0}),
            };
            out.insert((*metric).to_owned(), value);
        }
        Value::Object(out)
    };
    let (docs, bytes) = datasets
        .iter()
        .fold((0, 0), |(d, b), info| (d + info.docs, b + info.bytes));
    let indices: serde_json::Map<String, Value> = datasets
        .iter()
        .map(|info| {
            let stats = section(info.docs, info.bytes);
            let body = json!({
                "uuid": info.uuid,
                "health": info.health,
                "status": info.status,
                "primaries": stats,
                "total": stats,
            });
            (info.index.clone(), body)
        })
        .collect();
    let shards = datasets.len();
    Ok(Json(json!({
        "_shards": {"total": shards, "successful": shards, "failed": 0},
        "_all": {"primaries": section(docs, bytes), "total": section(docs, bytes)},
        "indices": indices,
    }))
    .into_response())
}

/// The cat API's text table: one line per dataset.
fn cat_table(datasets: &[crate::engine::DatasetInfo], header: bool) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    if header {
        rows.push(
            [
                "health",
                "status",
                "index",
                "uuid",
                "pri",
                "rep",
                "docs.count",
                "docs.deleted",
                "store.size",
                "pri.store.size",
            ]
            .map(str::to_owned)
            .to_vec(),
        );
    }
    for d in datasets {
        rows.push(vec![
            d.health.clone(),
            d.status.clone(),
            d.index.clone(),
            d.uuid.clone(),
            d.pri.clone(),
            d.rep.clone(),
            d.docs_count.clone(),
            d.docs_deleted.clone(),
            d.store_size.clone(),
            d.pri_store_size.clone(),
        ]);
    }
    text_table(&rows)
}

/// A cat API text table: a line per row, columns padded to their widest value.
pub(super) fn text_table(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join(" ").trim_end());
        out.push('\n');
    }
    out
}
