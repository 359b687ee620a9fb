//! Request bodies: JSON parsed with serde, every failure a 400 (or 413) in our error shape.

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Path, Request},
    http::{StatusCode, request::Parts},
};
use serde::de::DeserializeOwned;

use super::AppState;
use crate::error::{Error, Result};

/// A JSON request body. Unknown fields are refused where the request type says so
/// (`deny_unknown_fields`), and the message names what is wrong and where.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = Error;

    async fn from_request(request: Request, state: &AppState) -> Result<Self> {
        let bytes = read_bytes(request, state).await?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// A request body as bytes, within the size limit (413 past it).
pub struct RawBody(pub Vec<u8>);

impl FromRequest<AppState> for RawBody {
    type Rejection = Error;

    async fn from_request(request: Request, state: &AppState) -> Result<Self> {
        read_bytes(request, state)
            .await
            .map(|bytes| RawBody(bytes.to_vec()))
    }
}

async fn read_bytes(request: Request, state: &AppState) -> Result<Bytes> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => Error::PayloadTooLarge {
                max: state.engine.config().server.max_body_bytes,
            },
            _ => Error::BadRequest(format!(
                "cannot read the request body: {}",
                rejection.body_text()
            )),
        })
}

/// The one name a data-plane path carries (`{database}` or `{name}`); a segment that is not
/// valid UTF-8 once decoded is a 400 in the error shape, like every other bad input.
pub struct PathName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathName {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(name)| PathName(name))
            .map_err(|rejection| {
                Error::BadRequest(format!("invalid path: {}", rejection.body_text()))
            })
    }
}

/// Query parameters, deserialized; a missing or malformed one is a 400 naming it.
pub struct Params<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self> {
        let query = parts.uri.query().unwrap_or("");
        serde_urlencoded::from_str(query)
            .map(Params)
            .map_err(|error| Error::BadRequest(format!("invalid query parameters: {error}")))
    }
}

pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::BadRequest(
            "a JSON request body is required".to_owned(),
        ));
    }
    serde_json::from_slice(bytes)
        .map_err(|error| Error::BadRequest(format!("invalid request body: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Named {
        name: String,
    }

    #[test]
    fn failures_are_bad_requests_that_say_why() {
        for (body, needle) in [
            ("", "required"),
            ("  \n", "required"),
            ("{", "EOF"),
            ("{\"name\": 1}", "invalid type"),
            ("{\"name\": \"a\", \"extra\": 1}", "unknown field `extra`"),
            ("{}", "missing field `name`"),
            ("[]", "expected struct"),
        ] {
            let error = parse_json::<Named>(body.as_bytes()).unwrap_err();
            assert!(matches!(error, Error::BadRequest(_)));
            assert!(error.to_string().contains(needle), "{error}");
        }
        assert_eq!(parse_json::<Named>(b"{\"name\":\"a\"}").unwrap().name, "a");
    }
}
