//! Configuration: one TOML file, every key overridable by a `STRATA_*` environment variable and
//! by a command-line flag.
//!
//! Layers, each overriding the one before: the embedded defaults ([`Config::default`]), the TOML
//! file (`--config` / `STRATA_CONFIG`), environment variables, flags. The environment variable of
//! a key is `STRATA_` followed by its dotted path in upper case with `.` replaced by `_`
//! (`plans.free.max_databases` → `STRATA_PLANS_FREE_MAX_DATABASES`); the generic flag is
//! `--set KEY=VALUE`, and the common keys have flags of their own (`--data-dir`, ...).
//! Unknown keys and values of the wrong type are refused with the key's name.

use std::{collections::BTreeMap, path::PathBuf};

use serde::{Deserialize, Serialize};
use toml::{Table, Value};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the log, the projections and the admin socket live.
    pub data_dir: PathBuf,
    pub server: ServerConfig,
    pub log: LogConfig,
    pub cluster: ClusterConfig,
    pub platform: PlatformConfig,
    pub plans: Plans,
    pub databases: DatabasesConfig,
    pub tables: TablesConfig,
    pub logging: LoggingConfig,
    pub debug: DebugConfig,
    pub alerting: AlertingConfig,
    pub imports: ImportsConfig,
    pub assistant: AssistantConfig,
    pub console: ConsoleConfig,
    /// The SMTP accounts email channels send through, `[smtp_accounts.<id>]` (file only).
    pub smtp_accounts: BTreeMap<String, crate::alerting::delivery::SmtpAccount>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The data-plane listener (/v1).
    pub data_addr: String,
    /// The platform API listener.
    pub platform_addr: String,
    /// How long a write waits for a busy partition before it is refused with 409.
    pub write_wait_ms: u64,
    /// The Retry-After of transient 409 and 503 answers, in seconds.
    pub retry_after_secs: u64,
    /// The largest request body accepted.
    pub max_body_bytes: usize,
    /// The request bodies held at once, every request of both listeners together; a request
    /// past it is refused with 503 before its body is read.
    pub max_in_flight_body_bytes: usize,
    /// The memory SQL queries may hold at once, all of them together (DataFusion's pool).
    pub query_memory_bytes: usize,
    /// TLS on both listeners; plain HTTP without a certificate.
    pub tls: TlsConfig,
}

/// Monitors' scheduler and alert delivery.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlertingConfig {
    /// Whether this node runs monitors on their schedules (POST execute works either way).
    pub scheduler: bool,
    /// How often the scheduler looks for due monitors, in milliseconds.
    pub tick_ms: u64,
    /// Monitor runs at once, on this node.
    pub max_concurrent_runs: usize,
    /// Tries per alert, the first included, for transient failures (5xx, timeouts, refused).
    pub attempts: u32,
    /// The wait after the first failed try, doubled after each further one (at most 8 s).
    pub first_retry_ms: u64,
}

impl Default for AlertingConfig {
    fn default() -> Self {
        AlertingConfig {
            scheduler: true,
            tick_ms: 100,
            max_concurrent_runs: 16,
            attempts: 4,
            first_retry_ms: 500,
        }
    }
}

/// Import jobs (PUT /import/{source_type}).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImportsConfig {
    /// Whether this node runs the import jobs of the accounts it serves.
    pub runner: bool,
    /// How often the runner looks for new and cancelled jobs, in milliseconds.
    pub tick_ms: u64,
    /// Records per batch written to the log, at most.
    pub batch_rows: usize,
    /// Batches of a table or a query written between two progress records, at most (progress
    /// is recorded at least once a second too). A job taken up again looks up the records
    /// written after its last record, up to this many batches, so that none is written twice.
    pub record_batches: usize,
    /// Import jobs running at once, on this node.
    pub max_concurrent_jobs: usize,
}

impl Default for ImportsConfig {
    fn default() -> Self {
        ImportsConfig {
            runner: true,
            tick_ms: 200,
            batch_rows: 8192,
            record_batches: 8,
            max_concurrent_jobs: 4,
        }
    }
}

/// The web console (/console) and its sign-in sessions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleConfig {
    /// How long a session lasts from its sign-in, in seconds.
    pub session_ttl_secs: u64,
    /// Failed sign-ins of one user name (in a row, within `sign_in_window_secs`) after which
    /// each further try waits a second more before it is checked.
    pub sign_in_slow_after: u32,
    /// Failed sign-ins of one user name within `sign_in_window_secs` after which further tries
    /// are refused (429) until the window has passed.
    pub sign_in_refuse_after: u32,
    pub sign_in_window_secs: u64,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            session_ttl_secs: 12 * 3600,
            sign_in_slow_after: 3,
            sign_in_refuse_after: 10,
            sign_in_window_secs: 900,
        }
    }
}

/// Conversation (GET /assistant/nl and the answering of questions).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AssistantConfig {
    /// How often an idle conversation socket is pinged, in milliseconds.
    pub ping_ms: u64,
    /// Who plans questions first: `none` (the built-in planner alone) or `openai-compatible`
    /// (a model behind an OpenAI-compatible chat completions API, whose plans are checked and
    /// which falls back to the built-in planner).
    pub provider: String,
    /// The API's base URL (`http://127.0.0.1:8000/v1`); `/chat/completions` is added.
    pub base_url: String,
    pub model: String,
    /// The name of the environment variable holding the API key (never the key itself);
    /// empty: no key is sent.
    pub api_key_env: String,
    /// How long a model may take to answer, in milliseconds, before the built-in planner
    /// answers instead.
    pub timeout_ms: u64,
}

impl Default for AssistantConfig {
    fn default() -> Self {
        AssistantConfig {
            ping_ms: 20_000,
            provider: "none".to_owned(),
            base_url: String::new(),
            model: String::new(),
            api_key_env: String::new(),
            timeout_ms: 10_000,
        }
    }
}

/// The certificate both listeners serve (PEM files, read again on SIGHUP).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// The certificate chain, the server's own certificate first; empty: no TLS.
    pub cert_file: String,
    /// The private key of the certificate (PKCS#8, PKCS#1 or SEC1).
    pub key_file: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogBackend {
    File,
    Kafka,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    pub backend: LogBackend,
    /// FileLog: segments roll past this size.
    pub segment_bytes: u64,
    /// FileLog: longest a group commit waits for writers to rejoin, in microseconds.
    pub group_commit_max_wait_us: u64,
    pub kafka: KafkaConfig,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaConfig {
    pub brokers: String,
    pub topic_prefix: String,
    pub replication_factor: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// This node's name: recorded in leader-epoch markers; unique in a cluster.
    pub node_id: String,
    /// Where the other nodes reach this one's listeners (host:port); empty: the bound
    /// addresses, which must then not be a wildcard such as 0.0.0.0.
    pub advertise_data_addr: String,
    pub advertise_platform_addr: String,
    /// With `log.backend = "kafka"`: how often this node says it is alive.
    pub heartbeat_ms: u64,
    /// How long the others count a node after its latest heartbeat; when it lapses, the node's
    /// databases move.
    pub lease_ms: u64,
}

/// The platform API: how its requests are signed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlatformConfig {
    /// The region of the SigV4 credential scope clients sign with.
    pub region: String,
    /// The service of the SigV4 credential scope.
    pub service: String,
    /// How far a signed request's x-amz-date may be from this node's clock, in seconds.
    pub max_skew_secs: u64,
    /// 64 hex digits: the AES-256 key that seals users' secret keys in the log. Every node of a
    /// cluster needs the same one. Empty: `<data_dir>/seal.key`, created on first use.
    pub seal_key: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Plans {
    /// Accounts without a payment method.
    pub free: Plan,
    /// Accounts with a payment method.
    pub paid: Plan,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub max_rows: u64,
    pub max_vectors: u64,
    pub max_databases: u64,
}

/// Database runtimes: activation on first use, hibernation when idle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabasesConfig {
    /// Most databases this node keeps active; past it, the least recently used idle one is
    /// hibernated, or requests get 503 when none is idle.
    pub max_active: usize,
    /// A database with no request for this long is hibernated.
    pub idle_ms: u64,
    /// How long a request waits for its database to activate before it gets 503.
    pub activation_wait_ms: u64,
}

impl Default for DatabasesConfig {
    fn default() -> Self {
        DatabasesConfig {
            max_active: 1000,
            idle_ms: 300_000,
            activation_wait_ms: 5_000,
        }
    }
}

/// The segment store of every table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TablesConfig {
    /// A table's memtable is flushed into a segment once it holds this many rows...
    pub flush_rows: usize,
    /// ...or this many bytes...
    pub flush_bytes: usize,
    /// ...or its oldest row is this old.
    pub flush_age_ms: u64,
    /// The memtable's batches are merged into one once it holds this many.
    pub memtable_batches: usize,
    /// A dataset nobody searches indexes its unflushed rows in the background, this many or
    /// more at a time, and its flush copies those indexes; 0: its flush indexes them all.
    pub index_rows: usize,
    /// A tier of small segments of about the same size is compacted once it has this many...
    pub compact_min_segments: usize,
    /// ...where small means fewer live rows than this.
    pub small_segment_rows: u64,
    /// About how large a segment's Parquet pages, data and dictionary, are (at least 1024). A
    /// search result decompresses a page per column for each row it returns; smaller pages make
    /// those reads cheaper and the files larger.
    pub segment_page_bytes: usize,
    /// A segment with fewer vectors than this is searched exactly instead of through a graph.
    pub vector_graph_min_rows: usize,
    /// Neighbours per node of a segment's HNSW graph (M).
    pub hnsw_m: usize,
    /// Candidates examined while building a graph.
    pub hnsw_ef_construction: usize,
    /// Candidates examined per vector search (at least the number of results asked for).
    pub hnsw_ef_search: usize,
}

impl Default for TablesConfig {
    fn default() -> Self {
        TablesConfig {
            flush_rows: 256 * 1024,
            flush_bytes: 64 << 20,
            flush_age_ms: 10_000,
            memtable_batches: 64,
            index_rows: 8192,
            compact_min_segments: 8,
            small_segment_rows: 1 << 20,
            segment_page_bytes: strata_projections::table::DEFAULT_PAGE_BYTES,
            vector_graph_min_rows: 2048,
            hnsw_m: 32,
            hnsw_ef_construction: 256,
            hnsw_ef_search: 256,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoggingConfig {
    /// A tracing filter: "info", "strata=debug,info", ... (RUST_LOG, when set, wins).
    pub level: String,
    /// "text" or "json".
    pub format: String,
}

/// Testing aids. Leave at their defaults in production.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DebugConfig {
    /// Every leader keeps its write permit this much longer after a write: widens the window in
    /// which concurrent writes meet a busy partition, so tests can see the 409 deterministically.
    pub hold_write_permit_ms: u64,
    /// Every database activation takes this much longer, so tests can see the 503 of a
    /// database that is activating.
    pub activation_delay_ms: u64,
    /// Every purge of a deleted database starts this much later, so tests can see a database
    /// while it is purged.
    pub purge_delay_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("./data"),
            server: ServerConfig::default(),
            log: LogConfig::default(),
            cluster: ClusterConfig::default(),
            platform: PlatformConfig::default(),
            plans: Plans::default(),
            databases: DatabasesConfig::default(),
            tables: TablesConfig::default(),
            logging: LoggingConfig::default(),
            debug: DebugConfig::default(),
            alerting: AlertingConfig::default(),
            imports: ImportsConfig::default(),
            assistant: AssistantConfig::default(),
            console: ConsoleConfig::default(),
            smtp_accounts: BTreeMap::new(),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            data_addr: "127.0.0.1:7070".to_owned(),
            platform_addr: "127.0.0.1:7080".to_owned(),
            write_wait_ms: 0,
            retry_after_secs: 1,
            max_body_bytes: 64 << 20,
            max_in_flight_body_bytes: 1 << 30,
            query_memory_bytes: 2 << 30,
            tls: TlsConfig::default(),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            backend: LogBackend::File,
            segment_bytes: 64 << 20,
            group_commit_max_wait_us: 2000,
            kafka: KafkaConfig::default(),
        }
    }
}

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig {
            brokers: "127.0.0.1:9092".to_owned(),
            topic_prefix: "strata".to_owned(),
            replication_factor: 1,
        }
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            node_id: "n1".to_owned(),
            advertise_data_addr: String::new(),
            advertise_platform_addr: String::new(),
            heartbeat_ms: 1_000,
            lease_ms: 5_000,
        }
    }
}

impl Default for PlatformConfig {
    fn default() -> Self {
        PlatformConfig {
            region: "us-east-1".to_owned(),
            service: "strata".to_owned(),
            max_skew_secs: 900,
            seal_key: String::new(),
        }
    }
}

impl Default for Plans {
    fn default() -> Self {
        Plans {
            free: Plan {
                max_rows: 1_000_000,
                max_vectors: 100_000,
                max_databases: 10,
            },
            paid: Plan {
                max_rows: 1_000_000_000,
                max_vectors: 100_000_000,
                max_databases: 1_000,
            },
        }
    }
}

impl Default for LoggingConfig {
    fn default() -> Self {
        LoggingConfig {
            level: "info".to_owned(),
            format: "text".to_owned(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read configuration file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid configuration file {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("unknown configuration key {key:?} (from {origin})")]
    UnknownKey { key: String, origin: String },
    #[error("invalid value {value:?} for configuration key {key:?} (from {origin}): {message}")]
    Value {
        key: String,
        value: String,
        origin: String,
        message: String,
    },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// Builds a [`Config`] from its layers.
#[derive(Debug, Default)]
pub struct ConfigLoader {
    /// The TOML file, if any.
    pub file: Option<PathBuf>,
    /// `(key, value)` overrides from flags, applied last, in order.
    pub overrides: Vec<(String, String)>,
}

impl ConfigLoader {
    /// Loads the configuration with `env` as the process environment.
    pub fn load_with_env(
        &self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let defaults =
            Value::try_from(Config::default()).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let mut keys = BTreeMap::new();
        flatten("", &defaults, &mut keys);
        let Value::Table(mut merged) = defaults else {
            return Err(ConfigError::Invalid("defaults are not a table".to_owned()));
        };
        if let Some(path) = &self.file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.clone(),
                source,
            })?;
            let file: Table = toml::from_str(&text).map_err(|e| ConfigError::File {
                path: path.clone(),
                message: e.to_string(),
            })?;
            let mut file_keys = BTreeMap::new();
            flatten("", &Value::Table(file), &mut file_keys);
            let origin = path.display().to_string();
            for (key, value) in file_keys {
                // SMTP accounts are named by the operator; their fields are checked when the
                // whole configuration is read below.
                if !keys.contains_key(&key) && !key.starts_with("smtp_accounts.") {
                    return Err(ConfigError::UnknownKey { key, origin });
                }
                set(&mut merged, &key, value);
            }
        }
        let by_env: BTreeMap<String, &String> =
            keys.keys().map(|key| (env_name(key), key)).collect();
        for (name, raw) in env {
            if name == "STRATA_CONFIG" || !name.starts_with("STRATA_") {
                continue;
            }
            // Other STRATA_ variables (of tests, wrappers) are not ours to refuse.
            if let Some(key) = by_env.get(&name) {
                let value = typed(key, &raw, &keys[*key], &name)?;
                set(&mut merged, key, value);
            }
        }
        for (key, raw) in &self.overrides {
            let Some(default) = keys.get(key) else {
                return Err(ConfigError::UnknownKey {
                    key: key.clone(),
                    origin: "command line".to_owned(),
                });
            };
            let value = typed(key, raw, default, "command line")?;
            set(&mut merged, key, value);
        }
        let config: Config = Value::Table(merged)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Loads the configuration from the real process environment.
    pub fn load(&self) -> Result<Config, ConfigError> {
        self.load_with_env(std::env::vars())
    }
}

impl Config {
    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |message: &str| Err(ConfigError::Invalid(message.to_owned()));
        if self.cluster.node_id.is_empty() {
            return invalid("cluster.node_id must not be empty");
        }
        if self.cluster.heartbeat_ms == 0 || self.cluster.lease_ms < 2 * self.cluster.heartbeat_ms {
            return invalid(
                "cluster.lease_ms must be at least twice cluster.heartbeat_ms, which must not be 0",
            );
        }
        if self.console.session_ttl_secs == 0 || self.console.sign_in_refuse_after == 0 {
            return invalid(
                "console.session_ttl_secs and console.sign_in_refuse_after must not be 0",
            );
        }
        if !matches!(self.logging.format.as_str(), "text" | "json") {
            return invalid("logging.format must be \"text\" or \"json\"");
        }
        if self.server.max_in_flight_body_bytes < self.server.max_body_bytes {
            return invalid(
                "server.max_in_flight_body_bytes must be at least server.max_body_bytes, or a body of the largest size could never be taken",
            );
        }
        if self.server.tls.cert_file.is_empty() != self.server.tls.key_file.is_empty() {
            return invalid(
                "server.tls.cert_file and server.tls.key_file go together: set both for TLS, or neither",
            );
        }
        if self.log.segment_bytes < 4096 {
            return invalid("log.segment_bytes must be at least 4096");
        }
        if self.tables.segment_page_bytes < strata_projections::table::MIN_PAGE_BYTES {
            return Err(ConfigError::Invalid(format!(
                "tables.segment_page_bytes must be at least {}",
                strata_projections::table::MIN_PAGE_BYTES
            )));
        }
        match self.assistant.provider.as_str() {
            "none" => {}
            "openai-compatible" => {
                if !(self.assistant.base_url.starts_with("http://")
                    || self.assistant.base_url.starts_with("https://"))
                    || self.assistant.model.is_empty()
                {
                    return invalid(
                        "assistant.provider = \"openai-compatible\" needs assistant.base_url (an http or https URL) and assistant.model",
                    );
                }
            }
            _ => return invalid("assistant.provider must be \"none\" or \"openai-compatible\""),
        }
        Ok(())
    }

    /// Every configuration key with its environment variable, for `--help` and docs.
    pub fn keys() -> Vec<(String, String)> {
        let mut keys = BTreeMap::new();
        if let Ok(defaults) = Value::try_from(Config::default()) {
            flatten("", &defaults, &mut keys);
        }
        keys.into_keys().map(|k| (env_name(&k), k)).collect()
    }
}

/// The environment variable that overrides `key`.
pub fn env_name(key: &str) -> String {
    format!("STRATA_{}", key.replace('.', "_").to_uppercase())
}

fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Table(table) => {
            for (name, value) in table {
                let key = match prefix {
                    "" => name.clone(),
                    _ => format!("{prefix}.{name}"),
                };
                flatten(&key, value, out);
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.clone());
        }
    }
}

fn set(root: &mut Table, key: &str, value: Value) {
    let mut table = root;
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            table.insert(part.to_owned(), value);
            return;
        }
        let entry = table
            .entry(part.to_owned())
            .or_insert_with(|| Value::Table(Table::new()));
        if !entry.is_table() {
            *entry = Value::Table(Table::new());
        }
        let Value::Table(next) = entry else {
            return;
        };
        table = next;
    }
}

/// Parses a text override as the type of the key's default value.
fn typed(key: &str, raw: &str, default: &Value, origin: &str) -> Result<Value, ConfigError> {
    let error = |message: &str| ConfigError::Value {
        key: key.to_owned(),
        value: raw.to_owned(),
        origin: origin.to_owned(),
        message: message.to_owned(),
    };
    match default {
        Value::Integer(_) => raw
            .trim()
            .parse::<i64>()
            .map(Value::Integer)
            .map_err(|_| error("expected an integer")),
        Value::Boolean(_) => match raw.trim() {
            "true" | "1" => Ok(Value::Boolean(true)),
            "false" | "0" => Ok(Value::Boolean(false)),
            _ => Err(error("expected true or false")),
        },
        Value::Float(_) => raw
            .trim()
            .parse::<f64>()
            .map(Value::Float)
            .map_err(|_| error("expected a number")),
        _ => Ok(Value::String(raw.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_embedded() {
        let config = ConfigLoader::default().load_with_env(env(&[])).unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.data_dir, PathBuf::from("./data"));
        assert_eq!(config.server.data_addr, "127.0.0.1:7070");
        assert_eq!(config.server.platform_addr, "127.0.0.1:7080");
    }

    #[test]
    fn layers_override_in_order_file_env_flags() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("strata.toml");
        std::fs::write(
            &file,
            "data_dir = \"/file\"\n[server]\ndata_addr = \"127.0.0.1:1\"\n\
             [plans.free]\nmax_databases = 3\n[log.kafka]\nbrokers = \"b:1\"\n",
        )
        .unwrap();
        let loader = ConfigLoader {
            file: Some(file),
            overrides: vec![("server.data_addr".into(), "127.0.0.1:3".into())],
        };
        let config = loader
            .load_with_env(env(&[
                ("STRATA_SERVER_DATA_ADDR", "127.0.0.1:2"),
                ("STRATA_PLANS_FREE_MAX_DATABASES", "4"),
                ("STRATA_LOG_KAFKA_TOPIC_PREFIX", "t"),
                ("STRATA_UNRELATED_THING", "x"),
            ]))
            .unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/file"));
        assert_eq!(config.server.data_addr, "127.0.0.1:3");
        assert_eq!(config.plans.free.max_databases, 4);
        assert_eq!(config.plans.free.max_rows, Plans::default().free.max_rows);
        assert_eq!(config.log.kafka.brokers, "b:1");
        assert_eq!(config.log.kafka.topic_prefix, "t");
    }

    #[test]
    fn every_key_has_a_distinct_environment_variable() {
        let keys = Config::keys();
        let names: std::collections::BTreeSet<_> = keys.iter().map(|(env, _)| env).collect();
        assert_eq!(names.len(), keys.len());
        assert!(keys.contains(&("STRATA_DATA_DIR".into(), "data_dir".into())));
        assert!(keys.contains(&("STRATA_LOG_BACKEND".into(), "log.backend".into())));
    }

    #[test]
    fn the_example_configuration_loads() {
        let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/strata.example.toml");
        let loader = ConfigLoader {
            file: Some(file),
            overrides: vec![],
        };
        let config = loader.load_with_env(env(&[])).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/var/lib/strata"));
        // Everything else in the example is the default.
        assert_eq!(
            Config {
                data_dir: Config::default().data_dir,
                ..config
            },
            Config::default()
        );
    }

    #[test]
    fn the_deployment_configurations_load() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy");
        let scratch = tempfile::tempdir().unwrap();
        // The compose file's, and the one in the Kubernetes ConfigMap (indented under
        // `strata.toml: |`).
        let compose = std::fs::read_to_string(root.join("compose/strata.toml")).unwrap();
        let manifest = std::fs::read_to_string(root.join("kubernetes/strata.yaml")).unwrap();
        let kubernetes: String = manifest
            .lines()
            .skip_while(|line| line.trim() != "strata.toml: |")
            .skip(1)
            .take_while(|line| line.is_empty() || line.starts_with("    "))
            .map(|line| format!("{}\n", line.trim_start()))
            .collect();
        for (name, text) in [("compose", compose), ("kubernetes", kubernetes)] {
            let file = scratch.path().join(format!("{name}.toml"));
            std::fs::write(&file, text).unwrap();
            let loader = ConfigLoader {
                file: Some(file),
                overrides: vec![],
            };
            let env = env(&[
                ("STRATA_CLUSTER_NODE_ID", "strata-1"),
                ("STRATA_CLUSTER_ADVERTISE_DATA_ADDR", "strata-1:7070"),
            ]);
            let config = loader.load_with_env(env).unwrap();
            assert_eq!(config.log.backend, LogBackend::Kafka, "{name}");
            assert_eq!(config.log.kafka.replication_factor, 3, "{name}");
            assert_eq!(config.cluster.node_id, "strata-1", "{name}");
            assert_eq!(config.server.data_addr, "0.0.0.0:7070", "{name}");
        }
    }

    #[test]
    fn bad_keys_and_values_are_named() {
        let loader = ConfigLoader {
            file: None,
            overrides: vec![("server.nope".into(), "1".into())],
        };
        let error = loader.load_with_env(env(&[])).unwrap_err().to_string();
        assert!(error.contains("server.nope"), "{error}");

        let error = ConfigLoader::default()
            .load_with_env(env(&[("STRATA_PLANS_PAID_MAX_ROWS", "lots")]))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("plans.paid.max_rows") && error.contains("lots"),
            "{error}"
        );

        let error = ConfigLoader::default()
            .load_with_env(env(&[("STRATA_LOG_BACKEND", "tape")]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("tape"), "{error}");

        // A model provider needs its URL and model; an unknown provider is refused.
        for (pairs, expected) in [
            (
                vec![("STRATA_ASSISTANT_PROVIDER", "gpt")],
                "assistant.provider must be",
            ),
            (
                vec![("STRATA_ASSISTANT_PROVIDER", "openai-compatible")],
                "needs assistant.base_url",
            ),
            (
                vec![("STRATA_TABLES_SEGMENT_PAGE_BYTES", "512")],
                "tables.segment_page_bytes must be at least 1024",
            ),
        ] {
            let error = ConfigLoader::default()
                .load_with_env(env(&pairs))
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{error}");
        }
        let config = ConfigLoader::default()
            .load_with_env(env(&[
                ("STRATA_ASSISTANT_PROVIDER", "openai-compatible"),
                ("STRATA_ASSISTANT_BASE_URL", "http://127.0.0.1:8000/v1"),
                ("STRATA_ASSISTANT_MODEL", "m"),
            ]))
            .unwrap();
        assert_eq!(config.assistant.model, "m");

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, "[server]\nport = 1\n").unwrap();
        let loader = ConfigLoader {
            file: Some(file),
            overrides: vec![],
        };
        let error = loader.load_with_env(env(&[])).unwrap_err().to_string();
        assert!(error.contains("server.port"), "{error}");
    }
}
