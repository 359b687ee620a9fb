//! Platform datasets: tables of the account's database `default`, created on the account's first
//! dataset, written through the log and read from the same projections as every table.
//!
//! A dataset starts with the two fields every record has, `_id` (its id, exact-match indexed)
//! and `@timestamp`; the fields its records bring are added as they come. Dataset names follow
//! the platform's rules ([`check_name`]); a table of `default` that was not created as a
//! dataset (through the data plane) is not one.

use std::sync::Arc;

use serde::Serialize;
use strata_log::{
    PartitionId,
    envelope::Body,
    event::{Column, TableColumnsChanged, TableCreated, TableDropped},
};
use strata_projections::{
    catalog::{ColumnDef, TableDef},
    control::{Database, DatabaseStatus},
    table::series,
};

use crate::documents::mapping::Declared;
use crate::engine::{
    Action, DatabaseGuard, Engine, Origin, PlatformPrincipal, Principal,
    access::{DatasetView, Target},
    aliases::AliasSpec,
};
use crate::error::{Error, Result};

impl Kind {
    /// The columns a dataset of this kind starts with, and its exact-match columns.
    fn first_columns(self) -> (Vec<Column>, Vec<String>) {
        let column = |name: &str, r#type: &str| Column {
            name: name.to_owned(),
            r#type: r#type.to_owned(),
            nullable: false,
        };
        match self {
            Kind::Records => (
                vec![
                    column(ID_FIELD, "utf8"),
                    column(TIMESTAMP_FIELD, "timestamp[ms,UTC]"),
                ],
                vec![ID_FIELD.to_owned()],
            ),
            // Label columns are added as samples bring them.
            Kind::Metrics => (
                vec![
                    column(TIMESTAMP_FIELD, "timestamp[ms,UTC]"),
                    column(series::SERIES_COLUMN, "uint64"),
                    column(series::VALUE_COLUMN, "float64"),
                ],
                Vec::new(),
            ),
        }
    }
}

/// The database of an account's datasets.
pub const DEFAULT_DATABASE: &str = "default";

/// The id of a record.
pub const ID_FIELD: &str = "_id";
/// The primary time of a record.
pub const TIMESTAMP_FIELD: &str = "@timestamp";

/// What a dataset holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// Records (JSON documents), written by bulk, SQL and the document API.
    #[default]
    Records,
    /// Samples of metrics (ADR 7), written by the metrics endpoints.
    Metrics,
}

/// What a new dataset is made with.
#[derive(Debug, Default)]
pub(in crate::engine) struct NewDataset<'a> {
    pub kind: Kind,
    /// The columns and fields its mappings declare.
    pub declared: Declared,
    /// The aliases its configuration names.
    pub aliases: &'a [(String, AliasSpec)],
}

/// Names the platform uses as the first segment of its paths (docs/api.md).
pub const RESERVED_NAMES: &[&str] = &[
    "metadata",
    "sql",
    "_sql",
    "promql",
    "assistant",
    "user",
    "users",
    "role",
    "roles",
    "alert",
    "alerts",
    "monitor",
    "monitors",
    "source",
    "sources",
    "import",
    "_msearch",
    "_connector",
    "_bulk",
    "_search",
    "_cat",
    "api",
    "metrics",
    "health",
    "console",
];

const MAX_NAME: usize = 255;

/// A dataset name: 1 to 255 ASCII letters, digits, `-`, `.` and `_`, not starting with `_` or
/// `.`, and not a reserved name.
pub fn check_name(name: &str) -> Result<()> {
    let invalid = |reason: String| {
        Err(Error::InvalidName(format!(
            "invalid dataset name {name:?}: {reason}"
        )))
    };
    if name.is_empty() || name.len() > MAX_NAME {
        return invalid(format!("it must have 1 to {MAX_NAME} characters"));
    }
    if name.starts_with('_') || name.starts_with('.') {
        return invalid("it must not start with an underscore or a dot".to_owned());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
    {
        return invalid(format!(
            "{c:?} is not allowed (letters, digits, hyphens, dots and underscores are)"
        ));
    }
    if RESERVED_NAMES.contains(&name) {
        return invalid("it is reserved by the platform".to_owned());
    }
    Ok(())
}

/// A dataset info record, as GET /metadata lists them: every value a string.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DatasetInfo {
    pub health: String,
    pub status: String,
    pub index: String,
    pub uuid: String,
    pub pri: String,
    pub rep: String,
    #[serde(rename = "docs.count")]
    pub docs_count: String,
    #[serde(rename = "docs.deleted")]
    pub docs_deleted: String,
    #[serde(rename = "store.size")]
    pub store_size: String,
    #[serde(rename = "pri.store.size")]
    pub pri_store_size: String,
    /// The records and bytes above as numbers (indices stats).
    #[serde(skip)]
    pub docs: u64,
    #[serde(skip)]
    pub bytes: u64,
}

/// A size with its unit, as Elasticsearch's `_cat` APIs print it: `512b`, `1.5kb`, `3mb`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["b", "kb", "mb", "gb", "tb", "pb"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        return format!("{bytes}b");
    }
    let text = format!("{value:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text}{}", UNITS[unit])
}

/// The refusal of a dataset change that meets another in flight.
pub(in crate::engine) fn busy(account: &str) -> Error {
    Error::Busy(format!(
        "another change to the datasets of account {account:?} is in flight; retry after the Retry-After interval"
    ))
}

impl Principal {
    /// The whole account: what the platform API acts as when it uses the data plane's
    /// operations for a signed user (whose own rights [`Engine::authorize`] checked).
    pub(in crate::engine) fn account_wide(account: &str) -> Principal {
        Principal {
            account: account.to_owned(),
            key_id: String::new(),
            databases_pattern: "*".to_owned(),
        }
    }
}

impl Engine {
    /// The account's `default` database, made when `create` says so and it does not exist.
    pub(in crate::engine) async fn default_database(
        &self,
        account: &str,
        create: bool,
        origin: &Origin,
    ) -> Result<Option<Database>> {
        let find = || {
            self.control_state()
                .database(account, DEFAULT_DATABASE)
                .cloned()
        };
        if find().is_none() && self.clustered() {
            // Another node may have made it a moment ago.
            self.catch_up_control().await?;
        }
        match find() {
            Some(database) if database.status == DatabaseStatus::Ready => {
                return Ok(Some(database));
            }
            Some(_) => {
                return Err(Error::Unavailable(format!(
                    "the database {DEFAULT_DATABASE:?} of account {account:?} is being deleted; retry once its purge ends"
                )));
            }
            None if !create => return Ok(None),
            None => {}
        }
        let principal = Principal::account_wide(account);
        match self
            .create_database(&principal, DEFAULT_DATABASE, None, origin)
            .await
        {
            // Made by a request running alongside: as good.
            Ok(_) | Err(Error::DatabaseExists { .. }) => {}
            Err(error) => return Err(error),
        }
        Ok(find().filter(|d| d.status == DatabaseStatus::Ready))
    }

    /// The runtime of the account's `default` database and the definition of dataset `name`.
    pub(in crate::engine) async fn dataset(
        &self,
        account: &str,
        name: &str,
    ) -> Result<(DatabaseGuard, Arc<TableDef>)> {
        let not_found = || Error::DatasetNotFound(name.to_owned());
        let origin = Origin::system();
        let database = self
            .default_database(account, false, &origin)
            .await?
            .ok_or_else(not_found)?;
        let runtime = self.runtime(&database).await?;
        let def = runtime
            .catalog
            .snapshot()
            .tables
            .get(name)
            .filter(|def| def.dataset)
            .cloned()
            .ok_or_else(not_found)?;
        Ok((runtime, def))
    }

    /// The definition of dataset `name` of `account` and a snapshot of its records.
    pub(in crate::engine) async fn dataset_snapshot(
        &self,
        account: &str,
        name: &str,
    ) -> Result<(Arc<TableDef>, Arc<strata_projections::table::TableSnapshot>)> {
        let (runtime, def) = self.dataset(account, name).await?;
        let snapshot = self.table_runtime(&runtime, &def).await?.snapshot();
        Ok((def, snapshot))
    }

    /// PUT /{dataset}: an empty dataset, with the columns its mappings declare and the aliases
    /// its configuration names.
    pub async fn create_dataset(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        declared: Declared,
        aliases: &[(String, AliasSpec)],
        origin: &Origin,
    ) -> Result<()> {
        self.make_dataset(
            principal,
            name,
            NewDataset {
                kind: Kind::Records,
                declared,
                aliases,
            },
            origin,
            self.write_wait(),
        )
        .await
    }

    /// Creates dataset `name`, waiting at most `wait` for another change to the account's
    /// datasets in flight.
    pub(in crate::engine) async fn make_dataset(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        new: NewDataset<'_>,
        origin: &Origin,
        wait: std::time::Duration,
    ) -> Result<()> {
        let NewDataset {
            kind,
            declared,
            aliases,
        } = new;
        check_name(name)?;
        self.authorize(principal, Action::DatasetCreate, name)?;
        for (alias, _) in aliases {
            self.authorize(principal, Action::DatasetCreate, alias)?;
        }
        let database = self
            .default_database(&principal.account, true, origin)
            .await?
            .ok_or_else(|| {
                Error::Unavailable(format!(
                    "the database {DEFAULT_DATABASE:?} is not ready yet; retry"
                ))
            })?;
        let runtime = self.runtime(&database).await?;
        let mut permit = self
            .catalog_permit(&runtime, wait, || busy(&principal.account))
            .await?;
        let catalog = permit.snapshot();
        if catalog.tables.contains_key(name) {
            return Err(Error::DatasetExists(name.to_owned()));
        }
        if catalog.aliases.contains_key(name) {
            return Err(Error::InvalidName(format!(
                "[invalid_index_name_exception] Invalid index name [{name}], already exists as alias"
            )));
        }
        let aliases = crate::engine::aliases::creation_aliases(&catalog, name, aliases)?;
        let partition = PartitionId::table(&database.account, &database.name, name);
        let (first, exact_columns) = kind.first_columns();
        let created = TableCreated {
            name: name.to_owned(),
            table_id: uuid::Uuid::now_v7().to_string(),
            columns: first
                .into_iter()
                .chain(declared.columns.iter().map(|c| Column {
                    name: c.name.clone(),
                    r#type: c.data_type.to_string(),
                    nullable: true,
                }))
                .collect(),
            exact_columns,
            vector_column: declared
                .vector
                .as_ref()
                .map(|(name, _)| name.clone())
                .unwrap_or_default(),
            vector_metric: declared
                .vector
                .as_ref()
                .map(|(_, metric)| metric.as_str().to_owned())
                .unwrap_or_default(),
            start_offset: self.log.high_water_mark(&partition).await?,
            database_id: database.id.clone(),
            dataset: true,
            date_formats: declared.date_formats.into_iter().collect(),
            declared: declared
                .fields
                .iter()
                .map(|(name, field)| (name.clone(), field.to_event()))
                .collect(),
            aliases,
            metrics: kind == Kind::Metrics,
            settings: declared.settings.into_iter().collect(),
            ..Default::default()
        };
        permit.write(Body::TableCreated(created), origin).await?;
        Ok(())
    }

    /// Makes dataset `def`, never written yet, a dataset of `kind`, as its first write asks:
    /// an empty dataset takes samples or records, whichever comes first (one made by
    /// `PUT /{name}` takes samples too). `false` when it keeps its kind: it holds writes, or its
    /// mapping declares fields. `true` when it changed, or the caller should look again (it
    /// changed meanwhile).
    pub(in crate::engine) async fn retype_empty(
        &self,
        runtime: &DatabaseGuard,
        def: &Arc<TableDef>,
        kind: Kind,
        origin: &Origin,
        wait: std::time::Duration,
    ) -> Result<bool> {
        if !def.declared.is_empty() || def.vector_column.is_some() {
            return Ok(false);
        }
        // With the dataset's write permit held, no write is in flight while its kind changes,
        // and every later one finds the catalog changed under its own permit and plans again.
        let table = self.table_runtime(runtime, def).await?;
        let Some(writes) = crate::engine::ingest::dataset_permit(&table, &def.name).await? else {
            return Ok(true);
        };
        // Row ids count every row ever written, deleted ones too.
        if writes.snapshot().next_row_id > 0 {
            return Ok(false);
        }
        let mut permit = self
            .catalog_permit(runtime, wait, || busy(&runtime.account))
            .await?;
        match permit.snapshot().tables.get(&def.name) {
            Some(current) if current.id == def.id && current == def => {}
            Some(current) if current.id == def.id => return Ok(true),
            _ => return Err(Error::DatasetNotFound(def.name.clone())),
        }
        let (columns, exact_columns) = kind.first_columns();
        let body = Body::TableColumnsChanged(TableColumnsChanged {
            name: def.name.clone(),
            table_id: def.id.clone(),
            database_id: runtime.id.clone(),
            columns,
            metrics: Some(kind == Kind::Metrics),
            exact_columns,
            ..Default::default()
        });
        permit.write(body, origin).await?;
        tracing::debug!(dataset = %def.name, ?kind, "an empty dataset took the kind of its first write");
        Ok(true)
    }

    /// Gives dataset `def` the columns `columns` (its own, some retyped, and new ones after them),
    /// as one catalog change (waiting at most `wait` for another change in flight); the dataset's
    /// table runtime reopens with them on its next use.
    pub(in crate::engine) async fn grow_dataset(
        &self,
        runtime: &DatabaseGuard,
        def: &TableDef,
        columns: &[ColumnDef],
        origin: &Origin,
        wait: std::time::Duration,
    ) -> Result<()> {
        let mut permit = self
            .catalog_permit(runtime, wait, || busy(&runtime.account))
            .await?;
        match permit.snapshot().tables.get(&def.name) {
            Some(current) if current.id == def.id => {
                // Another write grew them first: the caller plans again.
                if current.columns != def.columns {
                    return Ok(());
                }
            }
            _ => return Err(Error::DatasetNotFound(def.name.clone())),
        }
        let body = Body::TableColumnsChanged(TableColumnsChanged {
            name: def.name.clone(),
            table_id: def.id.clone(),
            database_id: runtime.id.clone(),
            columns: columns
                .iter()
                .map(|c| Column {
                    name: c.name.clone(),
                    r#type: c.data_type.to_string(),
                    nullable: c.nullable,
                })
                .collect(),
            ..Default::default()
        });
        permit.write(body, origin).await?;
        tracing::debug!(dataset = %def.name, columns = columns.len(), "dataset columns grew");
        Ok(())
    }

    /// DELETE /{dataset}: the dataset and its records, for good.
    pub async fn delete_dataset(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        origin: &Origin,
    ) -> Result<()> {
        self.authorize(principal, Action::DatasetDelete, name)?;
        let (runtime, def) = self.dataset(&principal.account, name).await?;
        let mut permit = self
            .catalog_permit(&runtime, self.write_wait(), || busy(&principal.account))
            .await?;
        if permit.snapshot().tables.get(name).map(|t| &t.id) != Some(&def.id) {
            return Err(Error::DatasetNotFound(name.to_owned()));
        }
        let body = Body::TableDropped(TableDropped {
            name: name.to_owned(),
            table_id: def.id.clone(),
            database_id: runtime.id.clone(),
        });
        permit.write(body, origin).await?;
        drop(permit);
        self.release_table(&runtime, &def);
        Ok(())
    }

    /// GET /metadata: the account's datasets the user may see, by name.
    pub async fn datasets(&self, principal: &PlatformPrincipal) -> Result<Vec<DatasetInfo>> {
        let view = self
            .read(principal, Action::MetadataRead, Target::Every, true)
            .await?;
        let mut infos = Vec::with_capacity(view.datasets.len());
        for dataset in &view.datasets {
            infos.push(self.dataset_info_of(dataset).await?);
        }
        Ok(infos)
    }

    /// GET /{dataset}/metadata.
    pub async fn dataset_info(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
    ) -> Result<DatasetInfo> {
        let view = self.read_one(principal, Action::MetadataRead, name).await?;
        self.dataset_info_of(&view).await
    }

    /// The definitions of the account's datasets (`names`: those it names, by name, pattern
    /// or alias), for their mappings, without the fields the user may not see.
    pub async fn dataset_defs(
        &self,
        principal: &PlatformPrincipal,
        names: Option<&str>,
    ) -> Result<Vec<Arc<TableDef>>> {
        match names {
            None => self.metadata(principal, Target::Every, true).await,
            Some(names) => {
                self.metadata(principal, Target::Names(Some(names)), false)
                    .await
            }
        }
    }

    async fn dataset_info_of(&self, view: &DatasetView) -> Result<DatasetInfo> {
        let snapshot = &view.snapshot;
        let def = &view.def;
        let bytes = snapshot
            .segments
            .iter()
            .map(|s| s.file.bytes)
            .chain(
                snapshot
                    .memtable
                    .iter()
                    .map(|m| m.batch.get_array_memory_size() as u64),
            )
            .sum();
        let docs_count = self.visible_count(view).await?;
        let size = human_size(bytes);
        Ok(DatasetInfo {
            health: "green".to_owned(),
            status: "open".to_owned(),
            index: def.name.clone(),
            uuid: def.id.clone(),
            pri: "1".to_owned(),
            rep: "0".to_owned(),
            docs_count: docs_count.to_string(),
            docs_deleted: "0".to_owned(),
            store_size: size.clone(),
            pri_store_size: size,
            docs: docs_count,
            bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dataset_names_follow_the_platform_rules() {
        for good in [
            "logs",
            "logs-2026.11",
            "a",
            "web_access",
            "A.b-C",
            &"x".repeat(255),
        ] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for (bad, needle) in [
            ("", "1 to 255"),
            (&"x".repeat(256), "1 to 255"),
            ("_logs", "underscore or a dot"),
            (".hidden", "underscore or a dot"),
            ("a b", "' ' is not allowed"),
            ("a/b", "'/' is not allowed"),
            ("café", "'é' is not allowed"),
            ("metadata", "reserved"),
            ("_bulk", "underscore"),
            ("health", "reserved"),
        ] {
            let error = check_name(bad).unwrap_err().to_string();
            assert!(error.contains(needle), "{bad:?}: {error}");
        }
    }

    #[test]
    fn sizes_read_as_the_cat_apis_print_them() {
        assert_eq!(human_size(0), "0b");
        assert_eq!(human_size(1023), "1023b");
        assert_eq!(human_size(1024), "1kb");
        assert_eq!(human_size(1536), "1.5kb");
        assert_eq!(human_size(5 * 1024 * 1024), "5mb");
        assert_eq!(human_size(3 * (1 << 30) + (1 << 29)), "3.5gb");
        assert_eq!(human_size(1 << 50), "1pb");
    }
}
