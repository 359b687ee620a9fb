//! The engine: everything strata does, behind the two HTTP layers and the command line.
//!
//! It owns the commit log, the node's state store, the leader of the `_control` partition and
//! the runtimes of active databases (the leader and projection of each catalog). Every operation
//! is one method here; HTTP handlers and admin commands only parse, call, and render.
//!
//! The node core, in this folder: [`control`] (accounts, API keys, authentication, databases),
//! [`leader`] (the leader of a partition), [`registry`] (active databases), [`tables`] (active
//! tables, how catalog changes begin), [`quota`], [`purge`] (deleted databases), [`recovery`],
//! [`placement`] (which node of a cluster serves what). On it, the two API surfaces:
//! [`data_plane`] (/v1: tables, rows, searches, change streams) and [`platform`] (signed users,
//! the access layer, datasets, bulk, the Query DSL, SQL and PromQL).

mod control;
mod data_plane;
#[doc(hidden)]
pub mod fuzz;
mod leader;
mod placement;
mod platform;
mod purge;
mod quota;
mod recovery;
mod registry;
mod tables;

// The two API surfaces' modules, by their names (the node core above uses them too).
pub use data_plane::search;
use data_plane::{catalog, changes, table};
pub(crate) use platform::iso_time;
use platform::{access, aliases, datasets, governance, ingest, query_dsl, samples, sql, users};
pub use platform::{assistant, connections, imports, monitors, promql, sessions};

use std::{collections::HashMap, sync::Arc, time::Duration};

use datafusion::execution::object_store::ObjectStoreUrl;
use object_store::{ObjectStore, local::LocalFileSystem};
use strata_log::{CommitLog, FileLog, FileLogOptions, KafkaLog, KafkaOptions};
use strata_projections::{
    Projector, StateStore,
    catalog::{CatalogProjection, CatalogState},
    control::{ControlProjection, ControlState, Database},
};
use tokio::sync::OnceCell;

use self::leader::Leader;
pub use self::{
    access::{FieldPolicy, FieldRule, Grant, Mask, Permission},
    aliases::{AliasAction, AliasSpec, parse_spec as parse_alias_spec, split_names},
    catalog::{ColumnSpec, CreateTable},
    changes::{Change, ChangeStream, StreamStart},
    control::{DatabaseInfo, KeyInfo, Principal, StorageRequest},
    datasets::{DEFAULT_DATABASE, DatasetInfo, ID_FIELD, TIMESTAMP_FIELD, check_name},
    governance::{IssuedKeys, RoleDoc, UserDoc, UserInfo, verify_password},
    ingest::{BulkItem, DeleteLimits, Deleted, EnrichPolicy, Outcome},
    leader::Origin,
    placement::{CONTROL, database_key},
    query_dsl::{Aggregation, Aggregations, Bucket, Hit, SearchOptions, SearchResult, TotalHits},
    recovery::RestoreSummary,
    registry::DatabaseGuard,
    samples::SampleRow,
    sql::{SqlOutcome, TimeBounds, type_name as sql_type_name},
    table::RowCount,
    tables::TableRuntime,
    users::{Action, PlatformPrincipal, RootCredentials},
};
use crate::{
    config::{Config, LogBackend},
    error::{Error, Result},
    metrics::{Metrics, partition_kind},
};

/// The live parts of one active database: its catalog's projection and leader, where its
/// segments live, and its active tables.
pub struct DatabaseRuntime {
    pub account: String,
    pub name: String,
    pub id: String,
    catalog: Leader<Arc<CatalogState>>,
    /// The object store of the database's segments, the URL queries know it by, and the
    /// prefix its tables live under (`<table id>/` below it).
    store: Arc<dyn ObjectStore>,
    url: ObjectStoreUrl,
    root: object_store::path::Path,
    /// `store` itself when it is this machine's file system.
    local: Option<Arc<LocalFileSystem>>,
    /// Active tables, by table id.
    tables: parking_lot::Mutex<HashMap<String, Arc<OnceCell<Arc<TableRuntime>>>>>,
    /// Runtimes replaced by one with a newer definition, by table id, until the new one opens
    /// (it closes them first: one projection writes a table's files at a time).
    retiring: parking_lot::Mutex<HashMap<String, Arc<TableRuntime>>>,
    /// Set by the purge once the database is gone: writes that were waiting are refused.
    closed: std::sync::atomic::AtomicBool,
}

impl DatabaseRuntime {
    /// Takes an active table out of the runtime (it was dropped, or the database is going).
    fn take_table(&self, table_id: &str) -> Option<Arc<TableRuntime>> {
        let retiring = self.retiring.lock().remove(table_id);
        self.tables
            .lock()
            .remove(table_id)
            .and_then(|cell| cell.get().cloned())
            .or(retiring)
    }

    /// Takes every active table out of the runtime, and those being replaced.
    fn take_tables(&self) -> Vec<Arc<TableRuntime>> {
        let mut tables: Vec<Arc<TableRuntime>> = self
            .tables
            .lock()
            .drain()
            .filter_map(|(_, cell)| cell.get().cloned())
            .collect();
        tables.extend(self.retiring.lock().drain().map(|(_, table)| table));
        tables
    }
}

pub struct Engine {
    config: Arc<Config>,
    log: Arc<dyn CommitLog>,
    store: StateStore,
    /// Where table segments live unless a database is bound to its own bucket:
    /// `<data_dir>/tables/<database id>/<table id>/`.
    tables: Arc<LocalFileSystem>,
    control: Leader<Arc<ControlState>>,
    /// Active database runtimes.
    registry: registry::Registry,
    /// This engine, for the tasks it starts.
    me: std::sync::Weak<Engine>,
    /// Stored rows and vectors, by account.
    usage: parking_lot::Mutex<HashMap<String, quota::Ledger>>,
    /// The DataFusion runtime all queries share.
    queries: Arc<datafusion::execution::runtime_env::RuntimeEnv>,
    metrics: Arc<Metrics>,
    /// Set when the server shuts down: change streams end.
    streams: tokio::sync::watch::Sender<bool>,
    /// Seals the secrets the control partition holds (users' secret keys).
    seal: crate::seal::SealKey,
    /// This node's membership of the cluster of its log (Kafka logs only).
    cluster: std::sync::OnceLock<crate::cluster::Membership>,
    /// When the last completed catch-up with the control partition began (see
    /// [`Engine::control_current`]); its lock lets one catch-up serve the requests waiting.
    control_checked: tokio::sync::Mutex<Option<std::time::Instant>>,
    /// The writers of the accounts' monitor runs partitions this node has opened.
    monitor_runs: monitors::RunsLeaders,
    /// The writers of the accounts' conversation partitions this node has opened.
    assistant: platform::assistant::AssistantLeaders,
    /// The sources of connections this node has opened.
    sources: platform::connections::Sources,
    /// Told when an import job is started or deleted here, so that the runner looks at once.
    imports_changed: tokio::sync::Notify,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("data_dir", &self.config.data_dir)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Opens the log and the state store of `config.data_dir`, replays the control partition,
    /// and resumes the purge of databases whose deletion had begun.
    pub async fn open(config: Arc<Config>, metrics: Arc<Metrics>) -> Result<Arc<Engine>> {
        let log: Arc<dyn CommitLog> = match config.log.backend {
            LogBackend::File => {
                let dir = config.data_dir.join("log");
                let options = FileLogOptions {
                    segment_bytes: config.log.segment_bytes,
                    group_commit_max_wait: Duration::from_micros(
                        config.log.group_commit_max_wait_us,
                    ),
                };
                Arc::new(blocking(move || FileLog::open(dir, options)).await??)
            }
            LogBackend::Kafka => {
                let kafka = &config.log.kafka;
                let options = KafkaOptions {
                    replication_factor: i32::try_from(kafka.replication_factor).map_err(|_| {
                        Error::BadRequest("log.kafka.replication_factor is too large".to_owned())
                    })?,
                    ..KafkaOptions::new(&kafka.brokers, &kafka.topic_prefix)
                };
                Arc::new(KafkaLog::connect(options).await?)
            }
        };
        let seal = crate::seal::SealKey::load(&config.platform.seal_key, &config.data_dir)?;
        let state_dir = config.data_dir.join("state");
        let store = blocking(move || StateStore::open(state_dir)).await??;
        let tables_dir = config.data_dir.join("tables");
        std::fs::create_dir_all(&tables_dir)
            .map_err(|e| Error::Internal(format!("cannot create {}: {e}", tables_dir.display())))?;
        let tables = Arc::new(
            LocalFileSystem::new_with_prefix(&tables_dir)
                .map_err(|e| Error::Internal(e.to_string()))?,
        );
        let projection = {
            let store = store.clone();
            blocking(move || ControlProjection::open(&store)).await??
        };
        let projector = Projector::start(log.clone(), projection).await?;
        let control = Leader::new(
            log.clone(),
            projector,
            config.cluster.node_id.clone(),
            Duration::from_millis(config.debug.hold_write_permit_ms),
            metrics.clone(),
        );
        let queries = crate::query::runtime(config.server.query_memory_bytes);
        let engine = Arc::new_cyclic(|me| Engine {
            config,
            log,
            store,
            tables,
            control,
            registry: registry::Registry::default(),
            me: me.clone(),
            usage: parking_lot::Mutex::new(HashMap::new()),
            queries,
            metrics,
            streams: tokio::sync::watch::channel(false).0,
            cluster: std::sync::OnceLock::new(),
            control_checked: tokio::sync::Mutex::new(None),
            monitor_runs: Default::default(),
            assistant: Default::default(),
            sources: Default::default(),
            imports_changed: tokio::sync::Notify::new(),
            seal,
        });
        engine.resume_purges();
        engine.spawn_hibernator();
        Ok(engine)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// A stable id of this installation, the same on every node of a cluster (the
    /// Elasticsearch `cluster_uuid`): derived from where its log is.
    pub fn cluster_uuid(&self) -> String {
        use sha2::{Digest, Sha256};
        let seed = match self.config.log.backend {
            LogBackend::File => format!("file:{}", self.config.data_dir.display()),
            LogBackend::Kafka => format!(
                "kafka:{}/{}",
                self.config.log.kafka.brokers, self.config.log.kafka.topic_prefix
            ),
        };
        let digest = Sha256::digest(seed.as_bytes());
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string()
    }

    /// Makes projection state durable; call before the process exits.
    pub async fn shutdown(&self) -> Result<()> {
        let store = self.store.clone();
        blocking(move || store.flush()).await??;
        Ok(())
    }

    fn control_state(&self) -> Arc<ControlState> {
        self.control.snapshot()
    }

    /// How long a write waits for a busy partition before it is refused.
    fn write_wait(&self) -> Duration {
        Duration::from_millis(self.config.server.write_wait_ms)
    }

    async fn activate(&self, database: &Database) -> Result<Arc<DatabaseRuntime>> {
        let projection = {
            let store = self.store.clone();
            let (account, name, id) = (
                database.account.clone(),
                database.name.clone(),
                database.id.clone(),
            );
            blocking(move || CatalogProjection::open(&store, &account, &name, &id)).await??
        };
        let projector = Projector::start(self.log.clone(), projection).await?;
        tracing::info!(account = %database.account, database = %database.name, "database activated");
        let url = ObjectStoreUrl::parse(format!("strata://{}", database.id))
            .map_err(|e| Error::Internal(e.to_string()))?;
        let bound = self.database_store(database)?;
        let store = bound.store;
        crate::query::register_store(&self.queries, &url, store.clone());
        Ok(Arc::new(DatabaseRuntime {
            account: database.account.clone(),
            name: database.name.clone(),
            id: database.id.clone(),
            store,
            url,
            root: bound.prefix,
            local: bound.local,
            tables: parking_lot::Mutex::new(HashMap::new()),
            retiring: parking_lot::Mutex::new(HashMap::new()),
            catalog: Leader::new(
                self.log.clone(),
                projector,
                self.config.cluster.node_id.clone(),
                Duration::from_millis(self.config.debug.hold_write_permit_ms),
                self.metrics.clone(),
            ),
            closed: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Where a database's tables live: its own bucket when it has a binding, else
    /// `<data_dir>/tables/<database id>/`.
    fn database_store(&self, database: &Database) -> Result<crate::storage::BoundStore> {
        match &database.storage {
            Some(binding) => crate::storage::open(&self.unsealed(binding)?),
            None => Ok(crate::storage::BoundStore {
                store: self.tables.clone(),
                prefix: object_store::path::Path::from(database.id.as_str()),
                local: Some(self.tables.clone()),
            }),
        }
    }

    /// A storage binding with its secret unsealed, to open its bucket with.
    fn unsealed(
        &self,
        binding: &strata_projections::control::StorageBinding,
    ) -> Result<strata_projections::control::StorageBinding> {
        let mut binding = binding.clone();
        if let Some(sealed) = binding.sealed_secret.take() {
            let secret = self.seal.unseal(&sealed)?;
            binding.secret_access_key =
                Some(String::from_utf8(secret).map_err(|_| {
                    Error::Internal("a sealed storage secret is not UTF-8".to_owned())
                })?);
        }
        Ok(binding)
    }

    /// Updates the gauges that are computed rather than counted (before a scrape).
    pub async fn refresh_gauges(&self) {
        let mut lag: HashMap<&'static str, i64> = HashMap::new();
        let mut projectors = vec![(
            self.control.partition().clone(),
            self.control.projector().checkpoint().next_offset,
        )];
        for runtime in &self.active_runtimes() {
            projectors.push((
                runtime.catalog.partition().clone(),
                runtime.catalog.projector().checkpoint().next_offset,
            ));
            let tables: Vec<Arc<TableRuntime>> = runtime
                .tables
                .lock()
                .values()
                .filter_map(|cell| cell.get().cloned())
                .collect();
            projectors.extend(tables.iter().map(|table| table.progress()));
        }
        for (partition, applied) in projectors {
            let end = self
                .log
                .high_water_mark(&partition)
                .await
                .unwrap_or(applied);
            *lag.entry(partition_kind(&partition)).or_default() +=
                end.saturating_sub(applied) as i64;
        }
        for kind in ["control", "catalog", "table"] {
            self.metrics
                .projection_lag
                .with_label_values(&[kind])
                .set(lag.get(kind).copied().unwrap_or(0));
        }
    }
}

/// Deletes every object under `prefix` (a dropped table's files, a purged database's).
async fn remove_files(store: &Arc<dyn ObjectStore>, prefix: &str) -> Result<()> {
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;
    let prefix = object_store::path::Path::from(prefix);
    let listed: Vec<_> = store
        .list(Some(&prefix))
        .try_collect()
        .await
        .map_err(|e| Error::Internal(e.to_string()))?;
    for object in listed {
        match store.delete(&object.location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(error) => return Err(Error::Internal(error.to_string())),
        }
    }
    Ok(())
}

/// Removes a local directory and everything in it (a dropped table's indexes); a failure is
/// logged, as the directory holds only what can be rebuilt.
async fn remove_local_dir(dir: &std::path::Path) {
    match tokio::fs::remove_dir_all(dir).await {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => tracing::warn!(dir = %dir.display(), %error, "could not remove a directory"),
    }
}

/// Runs blocking work (file and sled I/O, index searches, evaluations) off the async runtime:
/// the one place the engine does.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| Error::Internal(format!("blocking task failed: {error}")))
}
