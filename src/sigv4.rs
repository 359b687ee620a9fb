//! AWS Signature Version 4 (`AWS4-HMAC-SHA256`), verified the way AWS services verify it, so that
//! any SigV4 signer (botocore, the AWS SDKs, opensearch-py's AWSV4SignerAuth) is a client.
//!
//! A request carries its signature either in the `Authorization` header
//! (`AWS4-HMAC-SHA256 Credential=<key>/<yyyymmdd>/<region>/<service>/aws4_request,
//! SignedHeaders=<h1;h2;...>, Signature=<hex>`, with the time in `x-amz-date`) or, presigned, in
//! the query (`X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`,
//! `X-Amz-SignedHeaders`, `X-Amz-Signature`). The verifier rebuilds the canonical request from
//! what arrived:
//!
//! ```text
//! METHOD \n canonical URI \n canonical query \n canonical headers \n signed headers \n payload hash
//! ```
//!
//! - the URI: the path as sent, dot segments removed and `//` merged, each segment URI-encoded
//!   (so a `%20` the client sent is `%2520`, as AWS signers encode it: "double encoding");
//! - the query: every parameter but `X-Amz-Signature`, decoded and re-encoded (RFC 3986
//!   unreserved characters kept, everything else `%XX`), sorted by name, then value;
//! - the headers named in SignedHeaders, lower-cased, values trimmed with inner runs of spaces
//!   collapsed, repeated headers joined by `,`; `host` and the date must be among them;
//! - the payload hash: `x-amz-content-sha256` when sent, which must then be the SHA-256 of the
//!   body; otherwise the SHA-256 of the body.
//!
//! then the string to sign (`AWS4-HMAC-SHA256 \n <x-amz-date> \n <scope> \n hex(sha256(canonical
//! request))`) and the signature with the key derived from the secret, date, region and service;
//! the two signatures are compared in constant time. The time must lie within the allowed skew of
//! the server's clock (header signing) or the presigned window (query signing).

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use ring::{digest, hmac};

pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";
/// The SHA-256 of the empty string, the payload hash of a request without a body.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/// The longest validity of a presigned request, as AWS allows: seven days.
const MAX_EXPIRES_SECS: i64 = 7 * 24 * 3600;

/// Why a request's signature was not accepted: the reason the 401 gives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigV4Error {
    #[error("the request is not signed: send an AWS Signature Version 4 Authorization header")]
    Unsigned,
    #[error("malformed Authorization header: {0}")]
    Malformed(String),
    #[error("unsupported signing algorithm {0:?}: use AWS4-HMAC-SHA256")]
    Algorithm(String),
    #[error("the credential scope {0:?} does not match this service ({1})")]
    Scope(String, String),
    #[error("the signed headers must include host and x-amz-date")]
    UnsignedHeader,
    #[error("bad x-amz-date {0:?}: expected YYYYMMDDTHHMMSSZ")]
    Date(String),
    #[error("the request time {0} is more than {1} seconds away from the server's time")]
    Skew(String, i64),
    #[error("the presigned request expired at {0}")]
    Expired(String),
    #[error("unknown access key {0:?}")]
    UnknownKey(String),
    #[error("x-amz-content-sha256 does not match the body")]
    PayloadHash,
    #[error(
        "the signature does not match: check the secret key, and that the request was not changed after signing"
    )]
    Mismatch,
}

/// What arrived, as the verifier needs it.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The path as sent (percent-encoded as it was on the wire).
    pub path: &'a str,
    /// The raw query string, without `?`.
    pub query: &'a str,
    /// Every header, in the order received; names in any case.
    pub headers: Vec<(&'a str, &'a str)>,
    /// Hex SHA-256 of the body.
    pub body_sha256: &'a str,
}

/// What the verifier is configured with.
#[derive(Debug, Clone)]
pub struct Service<'a> {
    pub region: &'a str,
    pub service: &'a str,
    /// The allowed difference between the request's time and the server's, in seconds.
    pub max_skew_secs: i64,
    /// Remove dot segments and merge `//` in the path before encoding (AWS services do; the
    /// test suite's `*-unnormalized` cases do not).
    pub normalize: bool,
}

/// A signature, parsed from the header or the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub access_key: String,
    /// `yyyymmdd/region/service/aws4_request`.
    pub scope: String,
    pub amz_date: String,
    pub signed_headers: Vec<String>,
    pub signature: String,
    /// Query signing: the presigned validity in seconds.
    pub expires: Option<i64>,
}

/// The intermediate products of a verification, which the test suite compares.
#[derive(Debug, Clone)]
pub struct Computed {
    pub canonical_request: String,
    pub string_to_sign: String,
    pub signature: String,
}

/// Verifies `request`: its access key, once the signature over it checks out with that key's
/// secret (`secret_of`), the time and the scope.
pub fn verify(
    request: &Request<'_>,
    service: &Service<'_>,
    now: DateTime<Utc>,
    secret_of: impl FnOnce(&str) -> Option<String>,
) -> Result<String, SigV4Error> {
    let signature = parse(request)?;
    let (date, _) = signature.scope.split_once('/').unwrap_or_default();
    let expected_scope = format!("{date}/{}/{}/aws4_request", service.region, service.service);
    if signature.scope != expected_scope || !signature.amz_date.starts_with(date) {
        return Err(SigV4Error::Scope(
            signature.scope.clone(),
            format!("region {}, service {}", service.region, service.service),
        ));
    }
    let at = parse_amz_date(&signature.amz_date)?;
    let skew = service.max_skew_secs;
    match signature.expires {
        None => {
            if (now - at).num_seconds().abs() > skew {
                return Err(SigV4Error::Skew(signature.amz_date.clone(), skew));
            }
        }
        Some(expires) => {
            if (at - now).num_seconds() > skew {
                return Err(SigV4Error::Skew(signature.amz_date.clone(), skew));
            }
            let until = at + chrono::Duration::seconds(expires);
            if now > until {
                return Err(SigV4Error::Expired(until.to_rfc3339()));
            }
        }
    }
    check_payload_hash(request)?;
    let secret = secret_of(&signature.access_key)
        .ok_or_else(|| SigV4Error::UnknownKey(signature.access_key.clone()))?;
    let computed = compute(request, &signature, &secret, service.normalize);
    if constant_time_eq(
        computed.signature.as_bytes(),
        signature.signature.as_bytes(),
    ) {
        Ok(signature.access_key)
    } else {
        Err(SigV4Error::Mismatch)
    }
}

/// The canonical request, string to sign and signature of `request` under `signature`'s scope,
/// date and signed headers, with `secret`.
pub fn compute(
    request: &Request<'_>,
    signature: &Signature,
    secret: &str,
    normalize: bool,
) -> Computed {
    let canonical_request = [
        request.method.to_owned(),
        canonical_uri(request.path, normalize),
        canonical_query(request.query),
        canonical_headers(&request.headers, &signature.signed_headers),
        signature.signed_headers.join(";"),
        payload_hash(request).to_owned(),
    ]
    .join("\n");
    let string_to_sign = format!(
        "{ALGORITHM}\n{}\n{}\n{}",
        signature.amz_date,
        signature.scope,
        hex::encode(digest::digest(
            &digest::SHA256,
            canonical_request.as_bytes()
        ))
    );
    let mut parts = signature.scope.split('/');
    let (date, region, service) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let key = signing_key(secret, date, region, service);
    let signature = hex::encode(hmac::sign(&key, string_to_sign.as_bytes()).as_ref());
    Computed {
        canonical_request,
        string_to_sign,
        signature,
    }
}

/// A request to sign, as a client sends it (`sign`).
#[derive(Debug, Clone)]
pub struct Outgoing<'a> {
    pub method: &'a str,
    /// `host[:port]` as the request's Host header carries it.
    pub host: &'a str,
    /// The path and query, as sent.
    pub path_and_query: &'a str,
    /// Headers to sign besides `host` and `x-amz-date` (names in any case).
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

/// Signs `request` at `at` with the key pair: the headers to send with it (`x-amz-date`,
/// `authorization` and the extra ones, lower-cased; `host` is left to the HTTP client). The
/// client side of [`verify`], used by strata's own tests and benchmarks.
pub fn sign(
    request: &Outgoing<'_>,
    (access_key, secret_key): (&str, &str),
    (region, service): (&str, &str),
    at: DateTime<Utc>,
) -> Vec<(String, String)> {
    let amz_date = at.format("%Y%m%dT%H%M%SZ").to_string();
    let (path, query) = request
        .path_and_query
        .split_once('?')
        .unwrap_or((request.path_and_query, ""));
    let mut headers: Vec<(String, String)> = vec![
        ("host".to_owned(), request.host.to_owned()),
        ("x-amz-date".to_owned(), amz_date.clone()),
    ];
    headers.extend(
        request
            .headers
            .iter()
            .map(|(n, v)| (n.to_lowercase(), (*v).to_owned())),
    );
    let mut signed_headers: Vec<String> = headers.iter().map(|(n, _)| n.clone()).collect();
    signed_headers.sort();
    let signature = Signature {
        access_key: access_key.to_owned(),
        scope: format!("{}/{region}/{service}/aws4_request", &amz_date[..8]),
        amz_date,
        signed_headers,
        signature: String::new(),
        expires: None,
    };
    let body_sha256 = sha256_hex(request.body);
    let computed = compute(
        &Request {
            method: request.method,
            path,
            query,
            headers: headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect(),
            body_sha256: &body_sha256,
        },
        &signature,
        secret_key,
        true,
    );
    headers.retain(|(name, _)| name != "host");
    headers.push((
        "authorization".to_owned(),
        format!(
            "{ALGORITHM} Credential={}/{}, SignedHeaders={}, Signature={}",
            signature.access_key,
            signature.scope,
            signature.signed_headers.join(";"),
            computed.signature
        ),
    ));
    headers
}

/// Presigns `request` at `at` for `expires_secs` seconds: its path and query with the
/// signature in the query parameters (`X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`,
/// `X-Amz-Expires`, `X-Amz-SignedHeaders` = host, `X-Amz-Signature`), as a browser sends it
/// where it cannot set headers (a WebSocket). The body's hash is that of `request.body`.
pub fn presign(
    request: &Outgoing<'_>,
    (access_key, secret_key): (&str, &str),
    (region, service): (&str, &str),
    at: DateTime<Utc>,
    expires_secs: i64,
) -> String {
    let amz_date = at.format("%Y%m%dT%H%M%SZ").to_string();
    let scope = format!("{}/{region}/{service}/aws4_request", &amz_date[..8]);
    let (path, query) = request
        .path_and_query
        .split_once('?')
        .unwrap_or((request.path_and_query, ""));
    let mut params: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    for (name, value) in [
        ("X-Amz-Algorithm", ALGORITHM.to_owned()),
        ("X-Amz-Credential", format!("{access_key}/{scope}")),
        ("X-Amz-Date", amz_date.clone()),
        ("X-Amz-Expires", expires_secs.to_string()),
        ("X-Amz-SignedHeaders", "host".to_owned()),
    ] {
        params.push(format!("{name}={}", encode(&value)));
    }
    let query = params.join("&");
    let signature = Signature {
        access_key: access_key.to_owned(),
        scope,
        amz_date,
        signed_headers: vec!["host".to_owned()],
        signature: String::new(),
        expires: Some(expires_secs),
    };
    let body_sha256 = sha256_hex(request.body);
    let computed = compute(
        &Request {
            method: request.method,
            path,
            query: &query,
            headers: vec![("host", request.host)],
            body_sha256: &body_sha256,
        },
        &signature,
        secret_key,
        true,
    );
    format!("{path}?{query}&X-Amz-Signature={}", computed.signature)
}

/// The key that signs requests of one day, region and service.
pub fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> hmac::Key {
    let step = |key: &[u8], data: &str| {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
    };
    let k_date = step(format!("AWS4{secret}").as_bytes(), date);
    let k_region = step(k_date.as_ref(), region);
    let k_service = step(k_region.as_ref(), service);
    let k_signing = step(k_service.as_ref(), "aws4_request");
    hmac::Key::new(hmac::HMAC_SHA256, k_signing.as_ref())
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(digest::digest(&digest::SHA256, bytes))
}

/// The signature of a request, from its Authorization header or its query.
pub fn parse(request: &Request<'_>) -> Result<Signature, SigV4Error> {
    if let Some(value) = header(request, "authorization") {
        return parse_header(request, value);
    }
    let query = decoded_query(request.query);
    if query.iter().any(|(k, _)| k == "X-Amz-Signature") {
        return parse_query(&query);
    }
    Err(SigV4Error::Unsigned)
}

fn parse_header(request: &Request<'_>, value: &str) -> Result<Signature, SigV4Error> {
    let value = value.trim();
    let (algorithm, rest) = value
        .split_once(' ')
        .ok_or_else(|| SigV4Error::Malformed("expected an algorithm and its fields".into()))?;
    if algorithm != ALGORITHM {
        return Err(SigV4Error::Algorithm(algorithm.to_owned()));
    }
    let mut fields = BTreeMap::new();
    for field in rest.split(',') {
        let (name, value) = field
            .trim()
            .split_once('=')
            .ok_or_else(|| SigV4Error::Malformed(format!("bad field {:?}", field.trim())))?;
        fields.insert(name.trim(), value.trim());
    }
    let field = |name: &str| {
        fields
            .get(name)
            .copied()
            .ok_or_else(|| SigV4Error::Malformed(format!("missing {name}=")))
    };
    let (access_key, scope) = split_credential(field("Credential")?)?;
    let signed_headers = signed_headers(field("SignedHeaders")?)?;
    let amz_date = header(request, "x-amz-date")
        .ok_or_else(|| SigV4Error::Malformed("missing x-amz-date header".into()))?
        .trim()
        .to_owned();
    Ok(Signature {
        access_key,
        scope,
        amz_date,
        signed_headers,
        signature: field("Signature")?.to_owned(),
        expires: None,
    })
}

fn parse_query(query: &[(String, String)]) -> Result<Signature, SigV4Error> {
    let param = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| SigV4Error::Malformed(format!("missing query parameter {name}")))
    };
    let algorithm = param("X-Amz-Algorithm")?;
    if algorithm != ALGORITHM {
        return Err(SigV4Error::Algorithm(algorithm.to_owned()));
    }
    let (access_key, scope) = split_credential(param("X-Amz-Credential")?)?;
    let expires: i64 = param("X-Amz-Expires")?
        .parse()
        .ok()
        .filter(|e| (0..=MAX_EXPIRES_SECS).contains(e))
        .ok_or_else(|| {
            SigV4Error::Malformed(format!(
                "X-Amz-Expires must be 0 to {MAX_EXPIRES_SECS} seconds"
            ))
        })?;
    Ok(Signature {
        access_key,
        scope,
        amz_date: param("X-Amz-Date")?.to_owned(),
        signed_headers: signed_headers(param("X-Amz-SignedHeaders")?)?,
        signature: param("X-Amz-Signature")?.to_owned(),
        expires: Some(expires),
    })
}

fn split_credential(credential: &str) -> Result<(String, String), SigV4Error> {
    let (key, scope) = credential
        .split_once('/')
        .filter(|(key, scope)| {
            !key.is_empty() && scope.split('/').count() == 4 && scope.ends_with("/aws4_request")
        })
        .ok_or_else(|| {
            SigV4Error::Malformed(format!(
                "Credential {credential:?} is not <key>/<date>/<region>/<service>/aws4_request"
            ))
        })?;
    Ok((key.to_owned(), scope.to_owned()))
}

fn signed_headers(list: &str) -> Result<Vec<String>, SigV4Error> {
    let names: Vec<String> = list.split(';').map(str::to_ascii_lowercase).collect();
    if !names.iter().any(|n| n == "host") {
        return Err(SigV4Error::UnsignedHeader);
    }
    Ok(names)
}

fn header<'a>(request: &Request<'a>, name: &str) -> Option<&'a str> {
    request
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

fn payload_hash<'a>(request: &Request<'a>) -> &'a str {
    header(request, "x-amz-content-sha256")
        .map(str::trim)
        .unwrap_or(request.body_sha256)
}

fn check_payload_hash(request: &Request<'_>) -> Result<(), SigV4Error> {
    match header(request, "x-amz-content-sha256").map(str::trim) {
        Some(sent) if !sent.eq_ignore_ascii_case(request.body_sha256) => {
            Err(SigV4Error::PayloadHash)
        }
        _ => Ok(()),
    }
}

fn parse_amz_date(text: &str) -> Result<DateTime<Utc>, SigV4Error> {
    NaiveDateTime::parse_from_str(text, "%Y%m%dT%H%M%SZ")
        .map(|naive| Utc.from_utc_datetime(&naive))
        .map_err(|_| SigV4Error::Date(text.to_owned()))
}

/// The canonical URI of a path as sent.
pub fn canonical_uri(path: &str, normalize: bool) -> String {
    let path = if path.is_empty() { "/" } else { path };
    let normalized = if normalize {
        let mut segments: Vec<&str> = Vec::new();
        for segment in path.split('/') {
            match segment {
                "" | "." => {}
                ".." => {
                    segments.pop();
                }
                other => segments.push(other),
            }
        }
        let mut out = format!("/{}", segments.join("/"));
        if path.ends_with('/') && !segments.is_empty() {
            out.push('/');
        }
        out
    } else {
        path.to_owned()
    };
    normalized
        .split('/')
        .map(encode)
        .collect::<Vec<_>>()
        .join("/")
}

/// The canonical query: every parameter but the signature, decoded, re-encoded and sorted.
pub fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = decoded_query(query)
        .into_iter()
        .filter(|(k, _)| k != "X-Amz-Signature")
        .map(|(k, v)| (encode(&k), encode(&v)))
        .collect();
    pairs.sort();
    pairs
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// The query's parameters as the handlers read them (form decoding, where a `+` is a space),
/// so that the signature covers what they mean: `q=a+b` and `q=a%2Bb` are two requests, and
/// one's signature never passes for the other. AWS's SDKs send a space as `%20` and a plus as
/// `%2B`, which read the same either way.
fn decoded_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(&k.replace('+', " ")), decode(&v.replace('+', " ")))
        })
        .collect()
}

/// The canonical headers: one `name:value\n` line per signed header.
fn canonical_headers(headers: &[(&str, &str)], signed: &[String]) -> String {
    let mut out = String::new();
    for name in signed {
        let values: Vec<String> = headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        out.push_str(name);
        out.push(':');
        out.push_str(&values.join(","));
        out.push('\n');
    }
    out
}

/// RFC 3986 encoding as SigV4 wants it: unreserved characters as they are, every other byte
/// as `%XX` in upper case.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char);
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// Percent-decoding (a `+` stays a `+`: a query's are spaces by then); invalid escapes are kept
/// as they are.
fn decode(text: &str) -> String {
    let hex = |byte: u8| (byte as char).to_digit(16);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((high * 16 + low) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests;
