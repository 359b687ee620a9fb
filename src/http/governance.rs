//! Users and roles (spec 001, section 4.6): YAML documents in and out, JSON when the request's
//! `Content-Type` (in) or `Accept` (out) asks for it. The engine's governance module decides;
//! these handlers read documents and shape answers. Errors keep the platform's JSON shape.

use axum::{
    body::Bytes,
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Response},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value, json};

use super::{Signed, SignedUser, body::PathName, error::PlatformError};
use crate::{
    engine::{RoleDoc, UserDoc},
    error::{Error, Result},
};

/// How a document is written.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    Yaml,
    Json,
}

fn mentions(headers: &HeaderMap, name: header::HeaderName, what: &str) -> bool {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains(what))
}

/// The format of the request's body: JSON when its Content-Type says so, else YAML.
fn body_format(headers: &HeaderMap) -> Format {
    match mentions(headers, header::CONTENT_TYPE, "json") {
        true => Format::Json,
        false => Format::Yaml,
    }
}

/// The format of the answer: what Accept asks for, else the request body's.
fn answer_format(headers: &HeaderMap) -> Format {
    if mentions(headers, header::ACCEPT, "json") {
        Format::Json
    } else if mentions(headers, header::ACCEPT, "yaml") {
        Format::Yaml
    } else {
        body_format(headers)
    }
}

/// Reads a document; a malformed one is a 400 naming where it is wrong.
pub(super) fn document<T: DeserializeOwned>(headers: &HeaderMap, body: &Bytes) -> Result<T> {
    read_document(body, matches!(body_format(headers), Format::Json))
}

/// Reads a document, JSON when `json`, else YAML; a malformed one is a 400 naming where it is
/// wrong.
pub(crate) fn read_document<T: DeserializeOwned>(body: &Bytes, json: bool) -> Result<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::BadRequest(
            "the request needs a document (YAML, or JSON with Content-Type: application/json)"
                .to_owned(),
        ));
    }
    let at = |path: &serde_path_to_error::Path| match path.to_string().as_str() {
        "." | "" => String::new(),
        path => format!("{path}: "),
    };
    match json {
        true => {
            let mut reader = serde_json::Deserializer::from_slice(body);
            serde_path_to_error::deserialize(&mut reader).map_err(|e| {
                Error::BadRequest(format!("{}malformed JSON: {}", at(e.path()), e.inner()))
            })
        }
        false => {
            let reader = serde_norway::Deserializer::from_slice(body);
            serde_path_to_error::deserialize(reader).map_err(|e| {
                Error::BadRequest(format!("{}malformed YAML: {}", at(e.path()), e.inner()))
            })
        }
    }
}

/// `value` written as the request asked.
pub(super) fn answer(headers: &HeaderMap, value: &impl Serialize) -> Response {
    match answer_format(headers) {
        Format::Json => axum::Json(value).into_response(),
        Format::Yaml => match serde_norway::to_string(value) {
            Ok(text) => (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/yaml"),
                )],
                text,
            )
                .into_response(),
            Err(error) => PlatformError {
                operation: "governance",
                error: Error::Internal(format!("writing YAML: {error}")),
            }
            .into_response(),
        },
    }
}

fn ok(headers: &HeaderMap, message: String) -> Response {
    answer(headers, &json!({"status": "OK", "message": message}))
}

fn name_of(
    name: std::result::Result<PathName, Error>,
    operation: &'static str,
) -> Result<String, PlatformError> {
    name.map(|PathName(name)| name)
        .map_err(PlatformError::of(operation))
}

/// PUT /user/{name}: creates a user (answering its first key pair, once) or replaces one.
pub async fn put_user(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: std::result::Result<PathName, Error>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "put user";
    let name = name_of(name, OP)?;
    let doc: UserDoc = document(&headers, &body).map_err(PlatformError::of(OP))?;
    let origin = principal.origin(&request_id.0);
    let issued = state
        .engine
        .put_user(&principal, &name, doc, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(match issued {
        Some(keys) => answer(
            &headers,
            &json!({
                "status": "OK",
                "message": format!("user {name} created; its secret key is shown only now"),
                "access_key": keys.access_key,
                "secret_key": keys.secret_key,
            }),
        ),
        None => ok(&headers, format!("user {name} replaced")),
    })
}

/// PATCH /user/{name}: changes the fields given.
pub async fn patch_user(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: std::result::Result<PathName, Error>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "patch user";
    let name = name_of(name, OP)?;
    let doc: UserDoc = document(&headers, &body).map_err(PlatformError::of(OP))?;
    let origin = principal.origin(&request_id.0);
    state
        .engine
        .patch_user(&principal, &name, doc, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(ok(&headers, format!("user {name} updated")))
}

/// DELETE /user/{name}.
pub async fn delete_user(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: std::result::Result<PathName, Error>,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "delete user";
    let name = name_of(name, OP)?;
    let origin = principal.origin(&request_id.0);
    state
        .engine
        .delete_user(&principal, &name, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(ok(&headers, format!("user {name} deleted")))
}

/// GET /user/{name}: `{<name>: {Version, Roles, account_id}}`.
pub async fn get_user(
    SignedUser(Signed {
        state, principal, ..
    }): SignedUser,
    name: std::result::Result<PathName, Error>,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "get user";
    let name = name_of(name, OP)?;
    let user = state
        .engine
        .get_user(&principal, &name)
        .map_err(PlatformError::of(OP))?;
    let mut body = Map::new();
    body.insert(
        name,
        json!({"Version": user.version, "Roles": user.roles, "account_id": user.account_id}),
    );
    Ok(answer(&headers, &body))
}

/// GET /users: `[{username, Version, Roles, account_id}]`.
pub async fn list_users(
    Signed {
        state, principal, ..
    }: Signed,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    let users = state
        .engine
        .list_users(&principal)
        .map_err(PlatformError::of("list users"))?;
    Ok(answer(&headers, &users))
}

/// PATCH /user/{name}/keys: the caller's new key pair; the old one is refused from now on.
pub async fn rotate_keys(
    SignedUser(Signed {
        state,
        principal,
        request_id,
    }): SignedUser,
    name: std::result::Result<PathName, Error>,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "rotate keys";
    let name = name_of(name, OP)?;
    let origin = principal.origin(&request_id.0);
    let keys = state
        .engine
        .rotate_keys(&principal, &name, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(answer(
        &headers,
        &json!({"status": "OK", "access_key": keys.access_key, "secret_key": keys.secret_key}),
    ))
}

/// PUT /role/{name}: creates or replaces a role.
pub async fn put_role(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: std::result::Result<PathName, Error>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "put role";
    let name = name_of(name, OP)?;
    let doc: RoleDoc = document(&headers, &body).map_err(PlatformError::of(OP))?;
    let origin = principal.origin(&request_id.0);
    let created = state
        .engine
        .put_role(&principal, &name, doc, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    let done = match created {
        true => "created",
        false => "replaced",
    };
    Ok(ok(&headers, format!("role {name} {done}")))
}

/// PATCH /role/{name}: replaces its Permissions and/or Notifications.
pub async fn patch_role(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: std::result::Result<PathName, Error>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PlatformError> {
    const OP: &str = "patch role";
    let name = name_of(name, OP)?;
    let doc: RoleDoc = document(&headers, &body).map_err(PlatformError::of(OP))?;
    let origin = principal.origin(&request_id.0);
    state
        .engine
        .patch_role(&principal, &name, doc, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(ok(&headers, format!("role {name} updated")))
}

/// DELETE /role/{name}.
pub async fn delete_role(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    name: std::result::Result<PathName, Error>,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "delete role";
    let name = name_of(name, OP)?;
    let origin = principal.origin(&request_id.0);
    state
        .engine
        .delete_role(&principal, &name, &origin)
        .await
        .map_err(PlatformError::of(OP))?;
    Ok(ok(&headers, format!("role {name} deleted")))
}

/// GET /role/{name}: `{<name>: {Version, Permissions, Notifications?}}`.
pub async fn get_role(
    Signed {
        state, principal, ..
    }: Signed,
    name: std::result::Result<PathName, Error>,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "get role";
    let name = name_of(name, OP)?;
    let role = state
        .engine
        .get_role(&principal, &name)
        .map_err(PlatformError::of(OP))?;
    let mut body = Map::new();
    body.insert(name, to_value(&role)?);
    Ok(answer(&headers, &body))
}

/// GET /roles: `[{role, Version, Permissions, Notifications?}]`.
pub async fn list_roles(
    Signed {
        state, principal, ..
    }: Signed,
    headers: HeaderMap,
) -> Result<Response, PlatformError> {
    const OP: &str = "list roles";
    let roles = state
        .engine
        .list_roles(&principal)
        .map_err(PlatformError::of(OP))?;
    let mut list = Vec::new();
    for (name, doc) in roles {
        let mut entry = Map::new();
        entry.insert("role".to_owned(), Value::String(name));
        if let Value::Object(fields) = to_value(&doc)? {
            entry.extend(fields);
        }
        list.push(Value::Object(entry));
    }
    Ok(answer(&headers, &list))
}

fn to_value(doc: &RoleDoc) -> Result<Value, PlatformError> {
    serde_json::to_value(doc).map_err(|e| PlatformError {
        operation: "governance",
        error: Error::Internal(format!("writing a role: {e}")),
    })
}
