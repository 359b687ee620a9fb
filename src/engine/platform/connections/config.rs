//! A connection's `config`, checked against the keys its family takes: a key the family does
//! not take, a missing required key or a value of the wrong type is a 400 naming the key. The
//! secrets (passwords, secret keys) are split off to be sealed; the rest is kept in clear and
//! shown by GET /source/{id}.

use serde_json::{Map, Value};

use super::catalogue::{Connector, Family};
use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Port,
    Bool,
    /// An object of strings (HTTP headers).
    Strings,
    /// A positive whole number.
    Count,
}

/// One key a family's config takes.
#[derive(Clone, Copy, Debug)]
struct Key {
    name: &'static str,
    kind: Kind,
    required: bool,
    secret: bool,
}

const fn key(name: &'static str, kind: Kind, required: bool, secret: bool) -> Key {
    Key {
        name,
        kind,
        required,
        secret,
    }
}

const WIRE: &[Key] = &[
    key("host", Kind::Text, true, false),
    key("port", Kind::Port, false, false),
    key("username", Kind::Text, true, false),
    key("password", Kind::Text, false, true),
    key("database", Kind::Text, true, false),
    key("ssl", Kind::Bool, false, false),
    key("ssl_verify", Kind::Bool, false, false),
];

const POSTGRES: &[Key] = &[key("schema", Kind::Text, false, false)];

const SQLITE: &[Key] = &[key("path", Kind::Text, true, false)];

const FILES: &[Key] = &[
    key("url", Kind::Text, true, false),
    key("region", Kind::Text, false, false),
    key("endpoint", Kind::Text, false, false),
    key("access_key_id", Kind::Text, false, false),
    key("secret_access_key", Kind::Text, false, true),
    key("format", Kind::Text, false, false),
];

const SEARCH: &[Key] = &[
    key("url", Kind::Text, true, false),
    key("username", Kind::Text, false, false),
    key("password", Kind::Text, false, true),
    key("api_key", Kind::Text, false, true),
    key("access_key_id", Kind::Text, false, false),
    key("secret_access_key", Kind::Text, false, true),
    key("region", Kind::Text, false, false),
    key("service", Kind::Text, false, false),
    key("ssl_verify", Kind::Bool, false, false),
];

const HTTP: &[Key] = &[
    key("url", Kind::Text, true, false),
    key("headers", Kind::Strings, false, true),
    key("records_path", Kind::Text, false, false),
];

const KAFKA: &[Key] = &[
    key("url", Kind::Text, false, false),
    key("host", Kind::Text, false, false),
    key("port", Kind::Port, false, false),
    key("username", Kind::Text, false, false),
    key("password", Kind::Text, false, true),
    key("sasl_mechanism", Kind::Text, false, false),
    key("ssl", Kind::Bool, false, false),
    key("max_records", Kind::Count, false, false),
];

const PROMETHEUS: &[Key] = &[
    key("url", Kind::Text, true, false),
    key("username", Kind::Text, false, false),
    key("password", Kind::Text, false, true),
    key("bearer_token", Kind::Text, false, true),
    key("lookback", Kind::Text, false, false),
    key("step", Kind::Text, false, false),
];

/// NATS, Redis, AMQP and MQTT: a URL of the server, credentials beside it (never in it).
const BROKER: &[Key] = &[
    key("url", Kind::Text, true, false),
    key("username", Kind::Text, false, false),
    key("password", Kind::Text, false, true),
];

/// Messages (NATS) or keys (Redis) one SQL read in place takes at most.
const MAX_RECORDS: &[Key] = &[key("max_records", Kind::Count, false, false)];

const NATS: &[Key] = &[key("token", Kind::Text, false, true)];

/// The queues an AMQP connection lists as its datasets (AMQP itself cannot list them),
/// separated by commas.
const AMQP: &[Key] = &[key("queues", Kind::Text, false, false)];

/// The MQTT client id an import job's session is named by: `<client_id>-<job>`.
const MQTT: &[Key] = &[key("client_id", Kind::Text, false, false)];

/// The URL schemes the `url` of a broker family may have.
pub fn broker_schemes(family: Family) -> &'static [&'static str] {
    match family {
        Family::Nats => &["nats", "tls"],
        Family::Redis => &["redis", "rediss"],
        // lapin is built without TLS (docs/adr/0008): no amqps.
        Family::Amqp => &["amqp"],
        Family::Mqtt => &["mqtt", "mqtts"],
        _ => &[],
    }
}

/// The keys `family` takes.
fn keys(family: Family) -> Vec<Key> {
    match family {
        Family::Postgres => WIRE.iter().chain(POSTGRES).copied().collect(),
        Family::Mysql => WIRE.to_vec(),
        Family::Sqlite => SQLITE.to_vec(),
        Family::ObjectStore => FILES.to_vec(),
        Family::SearchEngine => SEARCH.to_vec(),
        Family::HttpJson => HTTP.to_vec(),
        Family::Kafka => KAFKA.to_vec(),
        Family::Prometheus => PROMETHEUS.to_vec(),
        Family::Nats => [BROKER, NATS, MAX_RECORDS].concat(),
        Family::Redis => [BROKER, MAX_RECORDS].concat(),
        Family::Amqp => [BROKER, AMQP].concat(),
        Family::Mqtt => [BROKER, MQTT].concat(),
    }
}

/// The names of the keys `family` takes, for docs and errors.
pub fn key_names(family: Family) -> Vec<&'static str> {
    keys(family).iter().map(|k| k.name).collect()
}

/// The names of the keys of `family` that are secrets.
pub fn secret_names(family: Family) -> Vec<&'static str> {
    keys(family)
        .iter()
        .filter(|k| k.secret)
        .map(|k| k.name)
        .collect()
}

/// A checked config: what is shown, and the secrets to seal.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checked {
    pub shown: Map<String, Value>,
    pub secrets: Map<String, Value>,
}

impl Checked {
    /// The whole config, secrets included (to open the source).
    pub fn whole(&self) -> Map<String, Value> {
        let mut all = self.shown.clone();
        all.extend(self.secrets.clone());
        all
    }
}

/// The text of a connection's config key `key`, when given and not empty.
pub fn text<'a>(config: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    config
        .get(key)
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

fn invalid(key: &str, message: &str) -> Error {
    Error::BadRequest(format!("config.{key} {message}"))
}

/// Checks `config` for a connection of type `connector`.
pub fn check(connector: &Connector, config: &Value) -> Result<Checked> {
    let Value::Object(config) = config else {
        return Err(Error::BadRequest(
            "config must be an object of the connector's settings".to_owned(),
        ));
    };
    let keys = keys(connector.family);
    let mut checked = Checked::default();
    for (name, value) in config {
        let Some(key) = keys.iter().find(|k| k.name == name) else {
            return Err(invalid(
                name,
                &format!(
                    "is not a setting of a {} connection (it takes {})",
                    connector.id,
                    key_names(connector.family).join(", ")
                ),
            ));
        };
        if value.is_null() {
            continue;
        }
        let value = typed(key, value)?;
        match key.secret {
            true => checked.secrets.insert(name.clone(), value),
            false => checked.shown.insert(name.clone(), value),
        };
    }
    for key in keys.iter().filter(|k| k.required) {
        if !checked.shown.contains_key(key.name) && !checked.secrets.contains_key(key.name) {
            return Err(invalid(key.name, "is required"));
        }
    }
    check_family(connector, &checked)?;
    Ok(checked)
}

/// `value` as `key` takes it: a port from a number or its text, a boolean from true/false or
/// their text.
fn typed(key: &Key, value: &Value) -> Result<Value> {
    match (key.kind, value) {
        (Kind::Text, Value::String(text)) if !text.trim().is_empty() => Ok(value.clone()),
        (Kind::Text, _) => Err(invalid(key.name, "must be a non-empty string")),
        (Kind::Port, Value::Number(n)) => port(key, n.as_u64()),
        (Kind::Port, Value::String(text)) => port(key, text.trim().parse().ok()),
        (Kind::Port, _) => Err(invalid(key.name, "must be a port number")),
        (Kind::Bool, Value::Bool(_)) => Ok(value.clone()),
        (Kind::Bool, Value::String(text)) => match text.as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(invalid(key.name, "must be true or false")),
        },
        (Kind::Bool, _) => Err(invalid(key.name, "must be true or false")),
        (Kind::Strings, Value::Object(entries)) if entries.values().all(Value::is_string) => {
            Ok(value.clone())
        }
        (Kind::Strings, _) => Err(invalid(key.name, "must be an object of strings")),
        (Kind::Count, Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => Ok(value.clone()),
        (Kind::Count, _) => Err(invalid(key.name, "must be a whole number above 0")),
    }
}

fn port(key: &Key, number: Option<u64>) -> Result<Value> {
    match number.filter(|n| (1..=65535).contains(n)) {
        Some(n) => Ok(Value::from(n)),
        None => Err(invalid(key.name, "must be a port number (1 to 65535)")),
    }
}

/// What a family checks beyond the keys' types.
fn check_family(connector: &Connector, checked: &Checked) -> Result<()> {
    let text = |name: &str| checked.shown.get(name).and_then(Value::as_str);
    match connector.family {
        Family::Postgres | Family::Mysql => Ok(()),
        Family::Kafka => match (text("url"), text("host")) {
            (None, None) => Err(invalid(
                "url",
                "is required (host:port,...), or host and port",
            )),
            _ => Ok(()),
        },
        Family::Prometheus => {
            for name in ["lookback", "step"] {
                if text(name).is_some_and(|t| super::prometheus::duration(t).is_none()) {
                    return Err(invalid(
                        name,
                        "must be a duration such as 90s, 15m, 1h or 7d",
                    ));
                }
            }
            let url = text("url").unwrap_or_default();
            match url.starts_with("http://") || url.starts_with("https://") {
                true => Ok(()),
                false => Err(invalid("url", "must be an http:// or https:// URL")),
            }
        }
        Family::SearchEngine | Family::HttpJson => {
            let url = text("url").unwrap_or_default();
            match url.starts_with("http://") || url.starts_with("https://") {
                true => Ok(()),
                false => Err(invalid("url", "must be an http:// or https:// URL")),
            }
        }
        Family::Nats | Family::Redis | Family::Amqp | Family::Mqtt => {
            let url = text("url").unwrap_or_default();
            let schemes = broker_schemes(connector.family);
            let Some((scheme, rest)) = url.split_once("://") else {
                return Err(invalid(
                    "url",
                    &format!("must be a URL ({}://host:port)", schemes.join(":// or ")),
                ));
            };
            if !schemes.contains(&scheme) {
                return Err(invalid(
                    "url",
                    &format!("must be a {} URL, not {scheme}://", schemes.join(" or ")),
                ));
            }
            // Credentials in the URL would be kept and shown in clear.
            let authority = rest.split(['/', '?']).next().unwrap_or_default();
            if authority.contains('@') {
                return Err(invalid(
                    "url",
                    "must not carry credentials: give username and password (sealed at rest)",
                ));
            }
            Ok(())
        }
        Family::Sqlite => match text("path") {
            Some(path) if path.starts_with('/') => Ok(()),
            _ => Err(invalid(
                "path",
                "must be the absolute path of the database file",
            )),
        },
        Family::ObjectStore => {
            let url = text("url").unwrap_or_default();
            let scheme = url.split_once("://").map(|(scheme, _)| scheme);
            if !scheme.is_some_and(|s| connector.schemes.contains(&s)) {
                return Err(invalid(
                    "url",
                    &format!(
                        "must be a {} URL ({}://...) for a {} connection",
                        connector.schemes.join(" or "),
                        connector.schemes.first().copied().unwrap_or("s3"),
                        connector.id
                    ),
                ));
            }
            if connector.needs_endpoint && text("endpoint").is_none() {
                return Err(invalid(
                    "endpoint",
                    &format!(
                        "is required for {} (the service's S3 API URL)",
                        connector.name
                    ),
                ));
            }
            if let Some(format) = text("format")
                && !super::files::FORMATS.contains(&format)
            {
                return Err(invalid(
                    "format",
                    &format!("must be one of {}", super::files::FORMATS.join(", ")),
                ));
            }
            // What the store's client refuses (a bucket missing, one key of two), before any
            // use; building a client touches nothing.
            let owned = |name: &str| {
                text(name)
                    .or_else(|| checked.secrets.get(name).and_then(Value::as_str))
                    .map(str::to_owned)
            };
            let binding = strata_projections::control::StorageBinding {
                url: url.to_owned(),
                region: owned("region"),
                endpoint: owned("endpoint"),
                access_key_id: owned("access_key_id"),
                secret_access_key: owned("secret_access_key"),
                sealed_secret: None,
                verified: false,
            };
            crate::storage::check(&binding).map_err(|error| {
                invalid("url", &error.to_string().replacen("storage url", "is", 1))
            })
        }
    }
}

/// Applies a PATCH's `config` to `current`: keys given replace theirs, a null removes one;
/// secrets not given are kept.
pub fn merge(current: &Checked, patch: &Value) -> Result<Value> {
    let Value::Object(patch) = patch else {
        return Err(Error::BadRequest(
            "config must be an object of the connector's settings".to_owned(),
        ));
    };
    let mut whole = current.whole();
    for (name, value) in patch {
        match value {
            Value::Null => whole.remove(name),
            other => whole.insert(name.clone(), other.clone()),
        };
    }
    Ok(Value::Object(whole))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::platform::connections::catalogue::connector;

    fn of(id: &str) -> &'static Connector {
        connector(id).unwrap_or_else(|| unreachable!("{id} is in the catalogue"))
    }

    fn message(result: Result<Checked>) -> String {
        match result {
            Err(Error::BadRequest(message)) => message,
            other => format!("not a 400: {other:?}"),
        }
    }

    #[test]
    fn secrets_are_split_off_and_types_read() {
        let checked = check(
            of("postgresql"),
            &json!({"host": "db", "port": "5433", "username": "u", "password": "p",
                    "database": "d", "ssl": "true"}),
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            checked.secrets,
            json!({"password": "p"})
                .as_object()
                .cloned()
                .unwrap_or_default()
        );
        assert_eq!(checked.shown["port"], json!(5433));
        assert_eq!(checked.shown["ssl"], json!(true));
        assert!(!checked.shown.contains_key("password"));
    }

    #[test]
    fn a_key_the_family_does_not_take_is_named() {
        let error = message(check(
            of("mariadb"),
            &json!({"host": "h", "username": "u", "database": "d", "schema": "s"}),
        ));
        assert!(
            error.starts_with("config.schema is not a setting of a mariadb connection"),
            "{error}"
        );
        let error = message(check(of("mysql"), &json!({"host": "h", "username": "u"})));
        assert_eq!(error, "config.database is required");
        let error = message(check(
            of("postgresql"),
            &json!({"host": "h", "username": "u", "database": "d", "port": 70000}),
        ));
        assert!(
            error.starts_with("config.port must be a port number"),
            "{error}"
        );
    }

    #[test]
    fn object_stores_check_their_scheme_and_endpoint() {
        let error = message(check(of("minio"), &json!({"url": "s3://b/p"})));
        assert!(error.starts_with("config.endpoint is required"), "{error}");
        let error = message(check(of("gcs"), &json!({"url": "s3://b/p"})));
        assert!(error.starts_with("config.url must be a gs URL"), "{error}");
        let error = message(check(of("s3"), &json!({"url": "s3://b", "format": "xls"})));
        assert!(error.starts_with("config.format must be one of"), "{error}");
        assert!(check(of("local_files"), &json!({"url": "file:///tmp/x"})).is_ok());
        let error = message(check(
            of("s3"),
            &json!({"url": "s3://b/p", "access_key_id": "only-one"}),
        ));
        assert!(error.starts_with("config.url is"), "{error}");
        assert!(
            error.contains("give both access_key_id and secret_access_key"),
            "{error}"
        );
    }

    #[test]
    fn a_patch_keeps_secrets_it_does_not_name() {
        let current = check(
            of("postgresql"),
            &json!({"host": "a", "username": "u", "password": "p", "database": "d"}),
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        let merged = merge(&current, &json!({"host": "b", "ssl": null}))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(merged["host"], "b");
        assert_eq!(merged["password"], "p");
    }
}
