//! The web console (API.md "Console"): its page and files at /console on the platform
//! listener, served without a signature, and its sessions (POST, GET and DELETE
//! /console/session). The files are console/ of the repository, embedded in the binary; their
//! URLs carry a hash of them all (`/console/a/<version>/app.js`), so a browser keeps them for
//! good and fetches a new binary's anew, while the page itself is never cached. Every answer
//! carries a content security policy that allows no inline script and nothing from elsewhere.
//!
//! A signed-in browser calls the same platform routes as any client, with its session cookie
//! and, on every request that is not a GET or a HEAD, the session's CSRF token in
//! `x-csrf-token` ([`session_principal`], called by the platform's signature middleware).

use std::{
    collections::HashMap,
    sync::LazyLock,
    time::{Duration, Instant},
};

use axum::{
    Json,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use include_dir::{Dir, include_dir};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{AppState, RequestId, error::PlatformError};
use crate::{
    engine::{PlatformPrincipal, iso_time, sessions::Session},
    error::Error,
};

/// The console's files.
static FILES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/console");

/// The version of the console's files: the first 16 hex digits of a hash of them all.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    let mut files = Vec::new();
    collect(&FILES, &mut files);
    files.sort_by_key(|f| f.path());
    let mut hash = Sha256::new();
    for file in files {
        hash.update(file.path().to_string_lossy().as_bytes());
        hash.update([0]);
        hash.update(file.contents());
    }
    hex::encode(hash.finalize())[..16].to_owned()
});

fn collect<'a>(dir: &'a Dir<'a>, into: &mut Vec<&'a include_dir::File<'a>>) {
    into.extend(dir.files());
    for sub in dir.dirs() {
        collect(sub, into);
    }
}

/// The session cookie's name.
pub const COOKIE: &str = "strata_session";

/// The header a console request that changes something carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// What the console's page and files may load and run: their own files, nothing inline (no
/// script, no style attribute in markup), nothing from elsewhere, in no frame.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; \
                   form-action 'self'; frame-ancestors 'none'";

/// Whether a request to `path` is served without a signature or a session: the page, its
/// files, and the sign-in.
pub fn is_open(method: &Method, path: &str) -> bool {
    matches!(path, "/console" | "/console/")
        || path.starts_with("/console/a/")
        || (path == "/console/session" && method == Method::POST)
}

fn secured(mut response: Response, cache: &'static str) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// GET /console: the page, pointing at this binary's files.
pub async fn page() -> Response {
    let Some(page) = FILES.get_file("index.html").and_then(|f| f.contents_utf8()) else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the console is missing").into_response();
    };
    let page = page.replace("{{version}}", &VERSION);
    secured(
        ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response(),
        "no-cache",
    )
}

/// GET /console/a/{version}/{path}: a file of the console, cached for good; a 404 for a
/// version other than this binary's (a page of an older binary).
pub async fn file(Path((version, path)): Path<(String, String)>, headers: HeaderMap) -> Response {
    let found = (version == *VERSION)
        .then(|| FILES.get_file(&path))
        .flatten()
        .filter(|_| path != "index.html");
    let Some(found) = found else {
        return secured(
            (StatusCode::NOT_FOUND, "no such console file").into_response(),
            "no-cache",
        );
    };
    let kind = mime_guess::from_path(&path)
        .first_raw()
        .unwrap_or("application/octet-stream");
    let kind = match kind {
        "text/javascript" | "application/javascript" => "text/javascript; charset=utf-8",
        "text/css" => "text/css; charset=utf-8",
        other => other,
    };
    let gzipped = accepts_gzip(&headers)
        .then(|| GZIPPED.get(path.as_str()))
        .flatten();
    let mut response = match gzipped {
        Some(body) => (
            [
                (header::CONTENT_TYPE, kind),
                (header::CONTENT_ENCODING, "gzip"),
            ],
            body.as_slice(),
        )
            .into_response(),
        None => ([(header::CONTENT_TYPE, kind)], found.contents()).into_response(),
    };
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    secured(response, "public, max-age=31536000, immutable")
}

/// The console's text files compressed with gzip, by path, made once: those that shrink.
static GZIPPED: LazyLock<HashMap<String, Vec<u8>>> = LazyLock::new(|| {
    use std::io::Write;
    let mut files = Vec::new();
    collect(&FILES, &mut files);
    let mut gzipped = HashMap::new();
    for file in files {
        let path = file.path().to_string_lossy().into_owned();
        if !matches!(
            path.rsplit_once('.').map(|(_, extension)| extension),
            Some("js" | "css" | "svg" | "txt" | "json")
        ) {
            continue;
        }
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let body = encoder
            .write_all(file.contents())
            .and_then(|()| encoder.finish());
        if let Ok(body) = body
            && body.len() < file.contents().len()
        {
            gzipped.insert(path, body);
        }
    }
    gzipped
});

/// Whether a request's `Accept-Encoding` takes gzip (named, or `*`, without `q=0`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

/// Failed sign-ins by user name, on this node: after `console.sign_in_slow_after` in a row each
/// further try waits a second more (at most five) before it is checked, and after
/// `console.sign_in_refuse_after` within `console.sign_in_window_secs` tries are refused (429)
/// until the window has passed. A try counts as failed until it succeeds, so tries in parallel
/// are counted too.
#[derive(Debug, Default)]
pub struct SignIns {
    failures: parking_lot::Mutex<HashMap<String, Failures>>,
}

#[derive(Debug)]
struct Failures {
    count: u32,
    since: Instant,
}

/// The most user names whose failures are kept; past it, the oldest windows go first.
const MAX_TRACKED: usize = 10_000;

impl SignIns {
    /// Counts a try of `key`; how long it must wait first, or the 429 refusing it.
    fn begin(&self, key: &str, config: &crate::config::ConsoleConfig) -> Result<Duration, Error> {
        let window = Duration::from_secs(config.sign_in_window_secs);
        let mut failures = self.failures.lock();
        if failures.len() >= MAX_TRACKED {
            failures.retain(|_, f| f.since.elapsed() < window);
        }
        let entry = failures.entry(key.to_owned()).or_insert(Failures {
            count: 0,
            since: Instant::now(),
        });
        if entry.since.elapsed() >= window {
            *entry = Failures {
                count: 0,
                since: Instant::now(),
            };
        }
        if entry.count >= config.sign_in_refuse_after {
            let left = window
                .saturating_sub(entry.since.elapsed())
                .as_secs()
                .max(1);
            return Err(Error::TooManyRequests {
                message: format!(
                    "too many failed sign-ins for this user name: try again in {left} s"
                ),
                retry_after_secs: left,
            });
        }
        let wait = entry
            .count
            .saturating_sub(config.sign_in_slow_after.saturating_sub(1));
        entry.count += 1;
        Ok(Duration::from_secs(u64::from(wait.min(5))))
    }

    /// A successful sign-in of `key` forgets its failures.
    fn succeeded(&self, key: &str) {
        self.failures.lock().remove(key);
    }
}

fn set_cookie(state: &AppState, value: &str, max_age_secs: u64) -> HeaderValue {
    let secure = match state.scheme {
        "https" => "; Secure",
        _ => "",
    };
    let text = format!(
        "{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_secs}{secure}"
    );
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// POST /console/session `{username, password, account?}`: signs in; the answer holds the
/// CSRF token and sets the session cookie.
pub async fn sign_in(State(state): State<AppState>, body: Bytes) -> Response {
    let failed = PlatformError::of("sign in");
    let fields: serde_json::Map<String, Value> = match serde_json::from_slice(&body) {
        Ok(Value::Object(fields)) => fields,
        _ => {
            return failed(Error::BadRequest(
                "the body must be a JSON object {username, password, account?}".to_owned(),
            ))
            .into_response();
        }
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "username" | "password" | "account"))
    {
        return failed(Error::BadRequest(format!("unknown field {unknown:?}"))).into_response();
    }
    let text = |name: &str| fields.get(name).and_then(Value::as_str);
    let (Some(username), Some(password)) = (text("username"), text("password")) else {
        return failed(Error::BadRequest(
            "username and password are required (strings)".to_owned(),
        ))
        .into_response();
    };
    let account = text("account");
    let config = &state.engine.config().console;
    let key = format!("{}/{username}", account.unwrap_or_default());
    match state.sign_ins.begin(&key, config) {
        Ok(wait) => tokio::time::sleep(wait).await,
        Err(error) => return failed(error).into_response(),
    }
    let signed_in = match state.engine.sign_in(account, username, password).await {
        Ok(signed_in) => signed_in,
        Err(error) => return failed(error).into_response(),
    };
    state.sign_ins.succeeded(&key);
    let mut response = Json(json!({
        "account": signed_in.account,
        "user": signed_in.user,
        "root": signed_in.root,
        "csrf_token": signed_in.csrf_token,
        "expires_at": iso_time(Some(signed_in.expires_micros)),
    }))
    .into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie(&state, &signed_in.token, config.session_ttl_secs),
    );
    secured(response, "no-store")
}

/// The request's console session; a 400 for a request signed with keys.
fn session_of(session: Option<axum::Extension<Session>>) -> Result<Session, Error> {
    session.map(|s| s.0).ok_or_else(|| {
        Error::BadRequest("this request is signed with keys, not a console session".to_owned())
    })
}

/// GET /console/session: who the session is, and its CSRF token (a reloaded page reads it).
pub async fn current(session: Option<axum::Extension<Session>>) -> Response {
    match session_of(session) {
        Ok(session) => secured(
            Json(json!({
                "account": session.principal.account,
                "user": session.principal.user,
                "root": session.principal.root,
                "csrf_token": session.csrf_token,
                "expires_at": iso_time(Some(session.expires_micros)),
            }))
            .into_response(),
            "no-store",
        ),
        Err(error) => PlatformError::of("get session")(error).into_response(),
    }
}

/// DELETE /console/session: signs out; the cookie is cleared.
pub async fn sign_out(
    State(state): State<AppState>,
    session: Option<axum::Extension<Session>>,
    request_id: Option<axum::Extension<RequestId>>,
) -> Response {
    let failed = PlatformError::of("sign out");
    let session = match session_of(session) {
        Ok(session) => session,
        Err(error) => return failed(error).into_response(),
    };
    let request_id = request_id.map(|r| r.0.0).unwrap_or_default();
    let origin = session.principal.origin(&request_id);
    if let Err(error) = state.engine.sign_out(&session, &origin).await {
        return failed(error).into_response();
    }
    let mut response = Json(json!({"acknowledged": true})).into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, set_cookie(&state, "", 0));
    secured(response, "no-store")
}

/// The session cookie's value, if the request has one.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// Whether a request is a console request: it carries the session cookie and no signature.
pub fn is_session_request(headers: &HeaderMap, query: &str) -> bool {
    cookie(headers).is_some()
        && !headers.contains_key(header::AUTHORIZATION)
        && !query.contains("X-Amz-Signature=")
}

/// The principal of a console request: its session checked (a 401 when it has ended), its
/// CSRF token when it is not a GET or a HEAD (a 403 without it), and, when the browser says
/// where the request comes from (`Origin`), that it is the console's own origin (a 403
/// otherwise: another site's page, or its WebSocket).
pub async fn session_principal(
    state: &AppState,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(PlatformPrincipal, Session), Error> {
    let token = cookie(headers).unwrap_or_default();
    let session = state.engine.authenticate_session(token).await?;
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        let origin = origin.to_str().unwrap_or_default();
        let same = origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority == host);
        if !same {
            return Err(Error::Forbidden(format!(
                "a console request from {origin:?} is not from the console's origin"
            )));
        }
    }
    if !matches!(*method, Method::GET | Method::HEAD) {
        let given = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !session.csrf_matches(given) {
            return Err(Error::Forbidden(format!(
                "a console request that changes something must carry the session's {CSRF_HEADER}"
            )));
        }
    }
    Ok((session.principal.clone(), session))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_have_a_page_and_a_version() {
        assert_eq!(VERSION.len(), 16);
        let page = FILES
            .get_file("index.html")
            .unwrap()
            .contents_utf8()
            .unwrap();
        assert!(page.contains("{{version}}"), "{page}");
        assert!(!page.contains("<script>"), "no inline script: {page}");
    }

    #[test]
    fn failed_sign_ins_slow_down_then_are_refused_until_the_window_passes() {
        let config = crate::config::ConsoleConfig {
            sign_in_slow_after: 2,
            sign_in_refuse_after: 4,
            sign_in_window_secs: 900,
            ..Default::default()
        };
        let sign_ins = SignIns::default();
        let waits: Vec<u64> = (0..4)
            .map(|_| sign_ins.begin("acme/ann", &config).unwrap().as_secs())
            .collect();
        assert_eq!(waits, [0, 0, 1, 2]);
        assert!(matches!(
            sign_ins.begin("acme/ann", &config),
            Err(Error::TooManyRequests { retry_after_secs, .. }) if retry_after_secs > 800
        ));
        // Another name is not slowed; a success forgets the failures.
        assert_eq!(sign_ins.begin("acme/bob", &config).unwrap(), Duration::ZERO);
        sign_ins.succeeded("acme/ann");
        assert_eq!(sign_ins.begin("acme/ann", &config).unwrap(), Duration::ZERO);
    }

    #[test]
    fn the_session_cookie_is_read_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("theme=dark; strata_session=abc; x=y"),
        );
        assert_eq!(cookie(&headers), Some("abc"));
        assert!(is_session_request(&headers, ""));
        assert!(!is_session_request(&headers, "X-Amz-Signature=00"));
    }
}
