//! The catalog projection of one database: its tables, from `<account>/<database>/_catalog`.
//!
//! Kept in the tree `catalog/<database id>`, so a database deleted and created again under the
//! same name starts from an empty catalog, and purging drops the tree whole.

use std::{collections::BTreeMap, sync::Arc};

use serde::{Deserialize, Serialize};
use strata_log::{Envelope, PartitionId, envelope::Body};

use crate::{
    error::{Error, Result},
    projection::{Checkpoint, Projection},
    schema::ColumnType,
    store::{self, StateStore, Writes},
};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    #[serde(rename = "type")]
    pub data_type: ColumnType,
    pub nullable: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VectorMetric {
    Cosine,
    L2,
    Dot,
}

impl VectorMetric {
    pub fn as_str(&self) -> &'static str {
        match self {
            VectorMetric::Cosine => "cosine",
            VectorMetric::L2 => "l2",
            VectorMetric::Dot => "dot",
        }
    }

    pub fn parse(text: &str) -> Option<VectorMetric> {
        match text {
            "cosine" => Some(VectorMetric::Cosine),
            "l2" => Some(VectorMetric::L2),
            "dot" => Some(VectorMetric::Dot),
            _ => None,
        }
    }
}

/// The declared fields an event lists.
fn declared_of(
    declared: &std::collections::HashMap<String, strata_log::event::DeclaredField>,
) -> BTreeMap<String, DeclaredField> {
    declared
        .iter()
        .map(|(name, field)| {
            let field = DeclaredField {
                es_type: field.r#type.clone(),
                ignore_malformed: field.ignore_malformed,
                path: (!field.path.is_empty()).then(|| field.path.clone()),
            };
            (name.clone(), field)
        })
        .collect()
}

/// The column definitions an event lists.
fn columns_of(columns: &[strata_log::event::Column]) -> Result<Vec<ColumnDef>> {
    columns
        .iter()
        .map(|column| {
            Ok(ColumnDef {
                name: column.name.clone(),
                data_type: column.r#type.parse()?,
                nullable: column.nullable,
            })
        })
        .collect()
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableDef {
    pub name: String,
    /// Unique per incarnation of the name.
    pub id: String,
    pub columns: Vec<ColumnDef>,
    pub fts_columns: Vec<String>,
    pub exact_columns: Vec<String>,
    pub vector_column: Option<String>,
    pub vector_metric: Option<VectorMetric>,
    /// The table's rows are the events of its partition from this offset on.
    pub start_offset: u64,
    pub created_at_micros: i64,
    /// A platform dataset (see `TableCreated.dataset`).
    #[serde(default)]
    pub dataset: bool,
    /// A dataset's date fields with a declared format (see `TableCreated.date_formats`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub date_formats: BTreeMap<String, String>,
    /// A dataset's fields its mapping declares (see `TableCreated.declared`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub declared: BTreeMap<String, DeclaredField>,
    /// A metrics dataset (see `TableCreated.metrics`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub metrics: bool,
    /// A dataset's index settings given at its creation that this server keeps (see
    /// `TableCreated.settings`): name without `index.` → value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
}

/// What a mapping declares of a dataset's field (see `DeclaredField` in events.proto).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredField {
    /// The Elasticsearch type: `long`, `half_float`, `ip`, `date_nanos`, ...
    #[serde(rename = "type")]
    pub es_type: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_malformed: bool,
    /// The field whose values this one reads: an alias's target, a multi-field's parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl DeclaredField {
    /// The field as events carry it.
    pub fn to_event(&self) -> strata_log::event::DeclaredField {
        strata_log::event::DeclaredField {
            r#type: self.es_type.clone(),
            ignore_malformed: self.ignore_malformed,
            path: self.path.clone().unwrap_or_default(),
        }
    }
}

impl TableDef {
    /// The Elasticsearch type field `name` was declared as, if it was.
    pub fn declared_type(&self, name: &str) -> Option<&str> {
        self.declared.get(name).map(|d| d.es_type.as_str())
    }

    /// The field whose values field `name` reads: itself, or the target of an alias or the
    /// parent of a multi-field.
    pub fn resolve_field<'a>(&'a self, name: &'a str) -> &'a str {
        self.declared
            .get(name)
            .and_then(|d| d.path.as_deref())
            .unwrap_or(name)
    }

    /// The fields that read another's values (aliases and multi-fields), and whose.
    pub fn field_aliases(&self) -> BTreeMap<String, String> {
        self.declared
            .iter()
            .filter_map(|(name, d)| Some((name.clone(), d.path.clone()?)))
            .collect()
    }
}

impl TableDef {
    /// The dimension of the table's vector column, if it has one.
    pub fn vector_dim(&self) -> Option<usize> {
        let name = self.vector_column.as_ref()?;
        self.columns
            .iter()
            .find(|c| &c.name == name)
            .and_then(|c| match c.data_type {
                ColumnType::Vector { dim } => Some(dim as usize),
                _ => None,
            })
    }

    /// The definition a `TableCreated` event describes.
    pub fn from_event(
        created: &strata_log::event::TableCreated,
        created_at_micros: i64,
    ) -> Result<TableDef> {
        let corrupt = |reason: String| Error::Corrupt {
            key: format!("table {}", created.name),
            reason,
        };
        let columns = columns_of(&created.columns)?;
        let vector_metric = match created.vector_metric.as_str() {
            "" => None,
            text => Some(
                VectorMetric::parse(text)
                    .ok_or_else(|| corrupt(format!("unknown vector metric {text:?}")))?,
            ),
        };
        Ok(TableDef {
            name: created.name.clone(),
            id: created.table_id.clone(),
            columns,
            fts_columns: created.fts_columns.clone(),
            exact_columns: created.exact_columns.clone(),
            vector_column: (!created.vector_column.is_empty())
                .then(|| created.vector_column.clone()),
            vector_metric,
            start_offset: created.start_offset,
            created_at_micros,
            dataset: created.dataset,
            metrics: created.metrics,
            date_formats: created
                .date_formats
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            declared: declared_of(&created.declared),
            settings: created
                .settings
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    }

    pub fn column(&self, name: &str) -> Option<&ColumnDef> {
        self.columns.iter().find(|c| c.name == name)
    }
}

/// One dataset an alias names (see `DatasetAlias` in events.proto).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AliasTarget {
    /// The dataset's incarnation.
    pub table_id: String,
    /// A Query DSL query (JSON text) that searches through the alias add to theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_write_index: Option<bool>,
}

impl AliasTarget {
    fn of(alias: &strata_log::event::DatasetAlias) -> AliasTarget {
        AliasTarget {
            table_id: alias.table_id.clone(),
            filter: (!alias.filter.is_empty()).then(|| alias.filter.clone()),
            is_write_index: alias.is_write_index,
        }
    }
}

/// Where writes to a name reach (see [`CatalogState::write_index`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteIndex<'a> {
    /// The name is not an alias.
    NotAnAlias,
    /// The alias's write index.
    Dataset(&'a str),
    /// The alias has none.
    None,
}

/// An alias: the datasets it names, by name.
pub type AliasDef = BTreeMap<String, AliasTarget>;

/// The tables of one database, as of some offset of its catalog partition, and the aliases of
/// its datasets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CatalogState {
    pub tables: BTreeMap<String, Arc<TableDef>>,
    pub aliases: BTreeMap<String, AliasDef>,
}

impl CatalogState {
    /// The dataset writes to `name` reach when it is an alias: its one dataset unless that says
    /// `is_write_index: false`, or else the one that says `is_write_index: true`.
    pub fn write_index(&self, name: &str) -> WriteIndex<'_> {
        let Some(targets) = self.aliases.get(name) else {
            return WriteIndex::NotAnAlias;
        };
        let chosen = match targets.iter().collect::<Vec<_>>().as_slice() {
            [(dataset, target)] => (target.is_write_index != Some(false)).then_some(*dataset),
            _ => targets
                .iter()
                .find(|(_, t)| t.is_write_index == Some(true))
                .map(|(dataset, _)| dataset),
        };
        match chosen {
            Some(dataset) => WriteIndex::Dataset(dataset),
            None => WriteIndex::None,
        }
    }

    /// Adds (or replaces) `alias`'s target `dataset`; returns the stored alias.
    fn add_alias(&mut self, alias: &strata_log::event::DatasetAlias) -> &AliasDef {
        let def = self.aliases.entry(alias.alias.clone()).or_default();
        def.insert(alias.dataset.clone(), AliasTarget::of(alias));
        def
    }

    /// Takes dataset `dataset` (incarnation `table_id`) out of `alias`; `alias` disappears with
    /// its last dataset. Whether `alias` is left.
    fn remove_alias(&mut self, alias: &str, dataset: &str, table_id: &str) -> bool {
        let Some(def) = self.aliases.get_mut(alias) else {
            return false;
        };
        if def.get(dataset).is_some_and(|t| t.table_id == table_id) {
            def.remove(dataset);
        }
        if def.is_empty() {
            self.aliases.remove(alias);
            return false;
        }
        true
    }
}

/// Stores alias `name` as `state` holds it (deleted when it is gone).
fn store_alias(writes: &mut Writes, state: &CatalogState, name: &str) -> Result<()> {
    match state.aliases.get(name) {
        Some(def) => writes.put(&format!("a/{name}"), def),
        None => {
            writes.delete(&format!("a/{name}"));
            Ok(())
        }
    }
}

/// The projection of one database's catalog partition.
pub struct CatalogProjection {
    partition: PartitionId,
    database_id: String,
    tree: sled::Tree,
    state: Arc<CatalogState>,
    checkpoint: Checkpoint,
}

impl CatalogProjection {
    /// The name of the store tree of a database incarnation.
    pub fn tree_name(database_id: &str) -> String {
        format!("catalog/{database_id}")
    }

    /// How many tables the stored state of a database's catalog holds, without loading it (for
    /// listing databases that are not active). Blocking.
    pub fn stored_table_count(store: &StateStore, database_id: &str) -> Result<usize> {
        let tree = store.tree(&Self::tree_name(database_id))?;
        Ok(tree.scan_prefix(b"t/").count())
    }

    /// The ids of the tables in the stored state of a database's catalog. Blocking.
    pub fn stored_table_ids(store: &StateStore, database_id: &str) -> Result<Vec<String>> {
        let tree = store.tree(&Self::tree_name(database_id))?;
        Ok(store::scan::<TableDef>(&tree, "t/")?
            .into_iter()
            .map(|t| t.id)
            .collect())
    }

    /// Loads the catalog of database `database_id` (`account`/`database`). Blocking.
    pub fn open(
        store: &StateStore,
        account: &str,
        database: &str,
        database_id: &str,
    ) -> Result<CatalogProjection> {
        let tree = store.tree(&Self::tree_name(database_id))?;
        let mut state = CatalogState::default();
        for table in store::scan::<TableDef>(&tree, "t/")? {
            state.tables.insert(table.name.clone(), Arc::new(table));
        }
        for (key, def) in store::scan_keyed::<AliasDef>(&tree, "a/")? {
            state.aliases.insert(key, def);
        }
        let checkpoint = store::load_checkpoint(&tree)?;
        Ok(CatalogProjection {
            partition: PartitionId::catalog(account, database),
            database_id: database_id.to_owned(),
            tree,
            state: Arc::new(state),
            checkpoint,
        })
    }
}

impl Projection for CatalogProjection {
    type Snapshot = Arc<CatalogState>;

    fn partition(&self) -> &PartitionId {
        &self.partition
    }

    fn checkpoint(&self) -> Checkpoint {
        self.checkpoint
    }

    fn apply(&mut self, events: &[Envelope], checkpoint: Checkpoint) -> Result<()> {
        let mut next = (*self.state).clone();
        let mut writes = Writes::default();
        for event in events {
            match &event.body {
                // Events of another incarnation of this database's name (a stale writer's) are
                // not this catalog's.
                Some(Body::TableCreated(created)) if created.database_id != self.database_id => {}
                Some(Body::TableDropped(dropped)) if dropped.database_id != self.database_id => {}
                Some(Body::TableCreated(created)) => {
                    let table = TableDef::from_event(created, event.timestamp_micros)?;
                    writes.put(&format!("t/{}", table.name), &table)?;
                    next.tables.insert(table.name.clone(), Arc::new(table));
                    for alias in &created.aliases {
                        next.add_alias(&strata_log::event::DatasetAlias {
                            dataset: created.name.clone(),
                            table_id: created.table_id.clone(),
                            ..alias.clone()
                        });
                        store_alias(&mut writes, &next, &alias.alias)?;
                    }
                }
                Some(Body::TableDropped(dropped))
                    if next
                        .tables
                        .get(&dropped.name)
                        .is_some_and(|t| t.id == dropped.table_id) =>
                {
                    next.tables.remove(&dropped.name);
                    writes.delete(&format!("t/{}", dropped.name));
                    // Its aliases go with it.
                    let names: Vec<String> = next
                        .aliases
                        .iter()
                        .filter(|(_, def)| def.contains_key(&dropped.name))
                        .map(|(name, _)| name.clone())
                        .collect();
                    for name in names {
                        next.remove_alias(&name, &dropped.name, &dropped.table_id);
                        store_alias(&mut writes, &next, &name)?;
                    }
                }
                Some(Body::AliasesChanged(changed)) if changed.database_id == self.database_id => {
                    for alias in &changed.removed {
                        next.remove_alias(&alias.alias, &alias.dataset, &alias.table_id);
                        store_alias(&mut writes, &next, &alias.alias)?;
                    }
                    // Only aliases of the datasets' current incarnations.
                    for alias in &changed.added {
                        if next
                            .tables
                            .get(&alias.dataset)
                            .is_some_and(|t| t.id == alias.table_id)
                        {
                            next.add_alias(alias);
                            store_alias(&mut writes, &next, &alias.alias)?;
                        }
                    }
                }
                Some(Body::TableColumnsChanged(changed))
                    if changed.database_id == self.database_id
                        && next
                            .tables
                            .get(&changed.name)
                            .is_some_and(|t| t.id == changed.table_id) =>
                {
                    let mut table = next.tables[&changed.name].as_ref().clone();
                    table.columns = columns_of(&changed.columns)?;
                    if let Some(metrics) = changed.metrics {
                        table.metrics = metrics;
                        table.exact_columns = changed.exact_columns.clone();
                    }
                    table.declared.extend(declared_of(&changed.declared));
                    table.date_formats.extend(
                        changed
                            .date_formats
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone())),
                    );
                    writes.put(&format!("t/{}", table.name), &table)?;
                    next.tables.insert(table.name.clone(), Arc::new(table));
                }
                _ => {}
            }
        }
        writes.commit(&self.tree, checkpoint)?;
        self.state = Arc::new(next);
        self.checkpoint = checkpoint;
        Ok(())
    }

    fn snapshot(&self) -> Arc<CatalogState> {
        self.state.clone()
    }
}

#[cfg(test)]
mod tests {
    use strata_log::event::{Column, TableColumnsChanged, TableCreated, TableDropped};

    use super::*;

    fn created(name: &str, id: &str) -> Envelope {
        Envelope {
            body: Some(Body::TableCreated(TableCreated {
                name: name.into(),
                table_id: id.into(),
                columns: vec![
                    Column {
                        name: "title".into(),
                        r#type: "utf8".into(),
                        nullable: false,
                    },
                    Column {
                        name: "embedding".into(),
                        r#type: "vector<float32,3>".into(),
                        nullable: true,
                    },
                ],
                fts_columns: vec!["title".into()],
                exact_columns: vec![],
                vector_column: "embedding".into(),
                vector_metric: "l2".into(),
                start_offset: 5,
                database_id: "dbid".into(),
                dataset: false,
                date_formats: [("at".to_owned(), "epoch_second".to_owned())].into(),
                aliases: vec![],
                declared: Default::default(),
                metrics: false,
                settings: [("max_result_window".to_owned(), "50".to_owned())].into(),
            })),
            ..Default::default()
        }
    }

    fn dropped(name: &str, id: &str) -> Envelope {
        Envelope {
            body: Some(Body::TableDropped(TableDropped {
                name: name.into(),
                table_id: id.into(),
                database_id: "dbid".into(),
            })),
            ..Default::default()
        }
    }

    #[test]
    fn tables_come_and_go_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = StateStore::open(dir.path()).unwrap();
            let mut catalog = CatalogProjection::open(&store, "a", "db", "dbid").unwrap();
            let events = [
                created("docs", "t1"),
                created("gone", "t2"),
                dropped("gone", "t2"),
                created("gone", "t3"),
                // A replayed drop of the first incarnation leaves the second alone.
                dropped("gone", "t2"),
                // So do events of another incarnation of the database.
                Envelope {
                    body: Some(Body::TableCreated(strata_log::event::TableCreated {
                        database_id: "old-dbid".into(),
                        ..match created("stale", "t9").body {
                            Some(Body::TableCreated(c)) => c,
                            _ => unreachable!(),
                        }
                    })),
                    ..Default::default()
                },
            ];
            catalog
                .apply(
                    &events,
                    Checkpoint {
                        next_offset: 6,
                        epoch: 0,
                    },
                )
                .unwrap();
            store.flush().unwrap();
        }
        let store = StateStore::open(dir.path()).unwrap();
        let catalog = CatalogProjection::open(&store, "a", "db", "dbid").unwrap();
        assert_eq!(catalog.checkpoint().next_offset, 6);
        let state = catalog.snapshot();
        assert_eq!(
            state.tables.keys().collect::<Vec<_>>(),
            vec!["docs", "gone"]
        );
        assert_eq!(state.tables["gone"].id, "t3");
        let docs = &state.tables["docs"];
        assert_eq!(docs.vector_metric, Some(VectorMetric::L2));
        assert_eq!(docs.date_formats["at"], "epoch_second");
        assert_eq!(docs.settings["max_result_window"], "50");
        assert_eq!(docs.start_offset, 5);
        assert_eq!(
            docs.column("embedding").unwrap().data_type,
            ColumnType::Vector { dim: 3 }
        );
        // Another incarnation of the database sees none of it.
        let other = CatalogProjection::open(&store, "a", "db", "dbid2").unwrap();
        assert!(other.snapshot().tables.is_empty());
    }

    fn columns_changed(name: &str, id: &str, database_id: &str) -> Envelope {
        let column = |name: &str, r#type: &str| Column {
            name: name.into(),
            r#type: r#type.into(),
            nullable: true,
        };
        Envelope {
            body: Some(Body::TableColumnsChanged(TableColumnsChanged {
                name: name.into(),
                table_id: id.into(),
                database_id: database_id.into(),
                columns: vec![
                    column("title", "utf8"),
                    column("embedding", "vector<float32,3>"),
                    column("extra", "int64"),
                ],
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    #[test]
    fn a_tables_columns_grow_and_stay_grown() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = StateStore::open(dir.path()).unwrap();
            let mut catalog = CatalogProjection::open(&store, "a", "db", "dbid").unwrap();
            let events = [
                created("docs", "t1"),
                created("other", "t2"),
                columns_changed("docs", "t1", "dbid"),
                // A change of a dropped incarnation, or of another database's, changes nothing.
                columns_changed("other", "t-old", "dbid"),
                columns_changed("other", "t2", "old-dbid"),
            ];
            let checkpoint = Checkpoint {
                next_offset: 5,
                epoch: 0,
            };
            catalog.apply(&events, checkpoint).unwrap();
            store.flush().unwrap();
        }
        let store = StateStore::open(dir.path()).unwrap();
        let state = CatalogProjection::open(&store, "a", "db", "dbid")
            .unwrap()
            .snapshot();
        let docs = &state.tables["docs"];
        let names: Vec<&str> = docs.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["title", "embedding", "extra"]);
        assert_eq!(docs.column("extra").unwrap().data_type, ColumnType::Int64);
        // The rest of its definition stays.
        assert_eq!(docs.id, "t1");
        assert_eq!(docs.fts_columns, ["title"]);
        assert_eq!(state.tables["other"].columns.len(), 2);
        // A change that names no kind keeps it.
        assert!(!docs.metrics);
    }

    /// A change with `metrics` set gives an empty dataset the other kind: its columns and
    /// exact-match columns whole, either way.
    #[test]
    fn a_change_of_kind_sets_the_kind_and_its_exact_columns() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        let mut catalog = CatalogProjection::open(&store, "a", "db", "dbid").unwrap();
        let kind = |metrics: bool, exact: &[&str]| {
            let mut event = columns_changed("docs", "t1", "dbid");
            if let Some(Body::TableColumnsChanged(changed)) = &mut event.body {
                changed.metrics = Some(metrics);
                changed.exact_columns = exact.iter().map(|c| c.to_string()).collect();
            }
            event
        };
        let mut offset = 0;
        let mut apply = |event: Envelope| {
            offset += 1;
            catalog
                .apply(
                    &[event],
                    Checkpoint {
                        next_offset: offset,
                        epoch: 0,
                    },
                )
                .unwrap();
            catalog.snapshot().tables["docs"].clone()
        };
        let made = apply(created("docs", "t1"));
        assert_eq!((made.metrics, made.exact_columns.len()), (false, 0));
        let metrics = apply(kind(true, &[]));
        assert!(metrics.metrics);
        assert!(metrics.exact_columns.is_empty());
        let records = apply(kind(false, &["title"]));
        assert!(!records.metrics);
        assert_eq!(records.exact_columns, ["title"]);
    }
}
