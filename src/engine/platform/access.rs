//! The one door every platform read and write of a dataset passes, with the caller's grant.
//!
//! A read names its target ([`Target`]: datasets, aliases and patterns as a request gives them,
//! or every metrics dataset) and gets a [`ReadView`]: the datasets it reaches, a snapshot of
//! each, and how the caller sees each one ([`DatasetView`]): the records it may see (a Query DSL
//! filter: its aliases' filters and its grant's record filter) and its fields (hidden, or
//! masked with redact, nullify or remove). Every read path renders what it reads through the
//! view: the Query DSL (search, count, aggregations, msearch entries), SQL (every table a
//! statement touches, `KNN_SEARCH` included, `DESCRIBE`, `SHOW TABLES`), PromQL (series, label
//! names and values), mappings, metadata lists, delete by query (what it may match) and enrich
//! (what it copies). A write to a dataset is authorized by [`Engine::authorize_write`].
//!
//! What a principal may do is its [`Grant`]: everything for the root user; for other users what
//! their roles grant, the union of their [`Permission`]s (filled from roles by governance). A
//! hidden or masked field is not searchable, sortable or aggregatable by its real value: for
//! that reader it acts as unmapped ([`DocsSchema::restricted`]).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use serde_json::{Map, Value, json};
use strata_projections::{
    catalog::{CatalogState, TableDef},
    schema::ColumnType,
    table::{
        RowsWithin, TableSnapshot,
        cached::{CachedFilter, FilterKey},
        docs::DocsSchema,
    },
};

use crate::engine::{
    Action, Engine, ID_FIELD, PlatformPrincipal, TIMESTAMP_FIELD,
    aliases::{self, Searched},
    query_dsl::compile::{self as dsl, DslQuery},
};
use crate::{
    error::{Error, Result},
    keys::pattern_matches,
};

/// How a masked field shows: least restrictive first (the order in which several roles'
/// masks of one field give way to each other).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mask {
    /// Every character of its text form replaced with `*` (at most 16 of them).
    Redact,
    /// Shown as null.
    Nullify,
    /// Left out, as a hidden field is (but named by mappings).
    Remove,
}

/// The most characters a redacted value shows.
const REDACTED_CHARS: usize = 16;

/// A value's text form redacted: a `*` for each character, at most [`REDACTED_CHARS`].
pub fn redact(text: &str) -> String {
    "*".repeat(text.chars().count().min(REDACTED_CHARS))
}

/// Which fields a record permission shows, and how (see API.md, "Governance").
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldRule {
    /// Only these (patterns; with `_id` and `@timestamp`), and their sub-fields; `None`: all.
    pub allow: Option<Vec<String>>,
    /// Not these (patterns), nor their sub-fields.
    pub deny: Vec<String>,
    /// Shown masked: field pattern and mask.
    pub mask: Vec<(String, Mask)>,
}

/// Whether `pattern` names `field` or a field it is a sub-field of (`user` names `user.name`).
fn names_field(pattern: &str, field: &str) -> bool {
    let mut prefix = field;
    loop {
        if pattern_matches(pattern, prefix) {
            return true;
        }
        match prefix.rfind('.') {
            Some(at) => prefix = &prefix[..at],
            None => return false,
        }
    }
}

impl FieldRule {
    /// How this rule shows `field`: `None` hidden, `Some(None)` as it is, `Some(Some(mask))`
    /// masked.
    fn shows(&self, field: &str) -> Option<Option<Mask>> {
        let always = field == ID_FIELD || field == TIMESTAMP_FIELD;
        let allowed = always
            || self
                .allow
                .as_ref()
                .is_none_or(|allow| allow.iter().any(|p| names_field(p, field)));
        if !allowed || (!always && self.deny.iter().any(|p| names_field(p, field))) {
            return None;
        }
        Some(
            self.mask
                .iter()
                .find(|(pattern, _)| names_field(pattern, field))
                .map(|(_, mask)| *mask),
        )
    }
}

/// One entry of a role: actions on datasets (and aliases) whose names match `resources`, and,
/// for reads, the records and fields they show.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Permission {
    pub actions: Vec<Action>,
    /// Name patterns (`*` the only wildcard, over the whole name).
    pub resources: Vec<String>,
    /// Only the records this Query DSL query matches; `None`: all.
    pub filter: Option<Value>,
    pub fields: FieldRule,
}

impl Permission {
    fn grants(&self, action: Action, name: &str) -> bool {
        self.actions.contains(&action) && self.resources.iter().any(|p| pattern_matches(p, name))
    }
}

/// What a role's Notifications entry grants: `actions` ("read", "write", "delete", "execute")
/// on the monitors, channels or configuration (`kind`: "Monitor", "Channel", "Config") whose
/// ids match `resources`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NotificationGrant {
    pub kind: String,
    pub actions: Vec<String>,
    pub resources: Vec<String>,
}

/// What a principal may do: everything (the root user), or the union of its permissions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Grant {
    pub all: bool,
    pub permissions: Vec<Permission>,
    pub notifications: Vec<NotificationGrant>,
}

impl Grant {
    /// The root user's: everything, every record, every field.
    pub fn everything() -> Grant {
        Grant {
            all: true,
            permissions: Vec::new(),
            notifications: Vec::new(),
        }
    }

    /// Whether it allows `action` on the monitor, channel or configuration (`kind`) `id`.
    pub fn allows_notification(&self, kind: &str, action: &str, id: &str) -> bool {
        self.all
            || self.notifications.iter().any(|n| {
                n.kind == kind
                    && n.actions.iter().any(|a| a == action)
                    && n.resources.iter().any(|p| pattern_matches(p, id))
            })
    }

    /// Whether it grants nothing at all: no role, no access (every dataset read, list
    /// included, is a 403).
    pub fn is_nothing(&self) -> bool {
        !self.all && self.permissions.is_empty() && self.notifications.is_empty()
    }

    /// Whether it allows `action` on `name` (a dataset or an alias).
    pub fn allows(&self, action: Action, name: &str) -> bool {
        self.all || self.permissions.iter().any(|p| p.grants(action, name))
    }

    /// How a reader with this grant sees dataset `def` for `action`, reached by its name or
    /// through the aliases `via`: `None` when no permission grants it.
    fn visibility(&self, action: Action, def: &TableDef, via: &[String]) -> Option<Visibility> {
        let names = def
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .chain(def.declared.keys().map(String::as_str));
        self.visibility_of(action, &def.name, via, names)
    }

    /// [`Grant::visibility`] of anything read by `name` with the fields `names`: a dataset, or
    /// a connected source's dataset (`<connection>/<dataset>`).
    fn visibility_of<'a>(
        &self,
        action: Action,
        name: &str,
        via: &[String],
        names: impl Iterator<Item = &'a str>,
    ) -> Option<Visibility> {
        if self.all {
            return Some(Visibility::default());
        }
        let applicable: Vec<&Permission> = self
            .permissions
            .iter()
            .filter(|p| p.grants(action, name) || via.iter().any(|alias| p.grants(action, alias)))
            .collect();
        if applicable.is_empty() {
            return None;
        }
        // Several filtered entries are ORed; an entry without a filter lifts them.
        let filter = match applicable.iter().any(|p| p.filter.is_none()) {
            true => None,
            false => {
                let filters: Vec<Value> =
                    applicable.iter().filter_map(|p| p.filter.clone()).collect();
                Some(any_of(filters))
            }
        };
        // A metadata read shows the fields the reader's record entries of the dataset show,
        // when it has any: field-level security holds in mappings and DESCRIBE too.
        let readers: Vec<&Permission> = match action {
            Action::MetadataRead => self
                .permissions
                .iter()
                .filter(|p| {
                    p.grants(Action::RecordRead, name)
                        || via.iter().any(|alias| p.grants(Action::RecordRead, alias))
                })
                .collect(),
            _ => Vec::new(),
        };
        let shaping = match readers.is_empty() {
            true => &applicable,
            false => &readers,
        };
        let mut fields = FieldPolicy::default();
        for name in names {
            // Shown if any entry shows it; unmasked if any entry that shows it leaves it so,
            // else the least restrictive mask of those entries.
            let shown: Vec<Option<Mask>> = shaping
                .iter()
                .filter_map(|p| p.fields.shows(name))
                .collect();
            if shown.is_empty() {
                fields.hidden.insert(name.to_owned());
            } else if !shown.contains(&None)
                && let Some(mask) = shown.into_iter().flatten().min()
            {
                fields.masked.insert(name.to_owned(), mask);
            }
        }
        Some(Visibility { filter, fields })
    }
}

impl Grant {
    /// How a reader with this grant sees dataset `dataset` of connection `connection` (the
    /// name `<connection>/<dataset>` roles grant) whose fields are `columns`, for `action`:
    /// `None` when no permission grants it.
    pub fn source_view(
        &self,
        action: Action,
        connection: &str,
        dataset: &str,
        columns: &[String],
    ) -> Option<SourceView> {
        let name = format!("{connection}/{dataset}");
        self.visibility_of(action, &name, &[], columns.iter().map(String::as_str))
            .map(|v| SourceView {
                filter: v.filter,
                fields: v.fields,
            })
    }

    /// Whether one of its permissions (any action) may reach a dataset of connection
    /// `connection`: who may see that the connection exists.
    pub fn reaches_connection(&self, connection: &str) -> bool {
        let prefix = format!("{connection}/");
        self.all
            || self.permissions.iter().any(|p| {
                p.resources.iter().any(|pattern| {
                    let head = pattern.split('*').next().unwrap_or_default();
                    match pattern.contains('*') {
                        true => prefix.starts_with(head) || head.starts_with(&prefix),
                        false => pattern.starts_with(&prefix),
                    }
                })
            })
    }
}

/// A connected source's dataset as its reader sees it: the records it may see (a Query DSL
/// query of its record entries' filters; `None`: all) and its fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceView {
    pub filter: Option<Value>,
    pub fields: FieldPolicy,
}

/// Queries any of which may match, as one.
fn any_of(mut queries: Vec<Value>) -> Value {
    match queries.len() {
        1 => queries.remove(0),
        _ => json!({"bool": {"should": queries, "minimum_should_match": 1}}),
    }
}

/// Queries all of which must match, as one (`None` for none).
fn all_of(queries: impl IntoIterator<Item = Option<Value>>) -> Option<Value> {
    let mut queries: Vec<Value> = queries.into_iter().flatten().collect();
    match queries.len() {
        0 => None,
        1 => Some(queries.remove(0)),
        _ => Some(json!({"bool": {"filter": queries}})),
    }
}

/// How a grant shows a dataset: which records, and how its fields.
#[derive(Clone, Debug, Default, PartialEq)]
struct Visibility {
    filter: Option<Value>,
    fields: FieldPolicy,
}

/// How a reader sees a dataset's fields: those hidden from it (with their sub-fields), and
/// those it sees masked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldPolicy {
    pub hidden: BTreeSet<String>,
    pub masked: BTreeMap<String, Mask>,
}

impl FieldPolicy {
    /// Whether every field shows as it is.
    pub fn is_open(&self) -> bool {
        self.hidden.is_empty() && self.masked.is_empty()
    }

    /// The policy entry of `field` or of the field it is a sub-field of.
    fn entry<'a, T>(map: impl Fn(&str) -> Option<&'a T>, field: &str) -> Option<&'a T> {
        let mut prefix = field;
        loop {
            if let Some(found) = map(prefix) {
                return Some(found);
            }
            prefix = &prefix[..prefix.rfind('.')?];
        }
    }

    /// How `field` shows: `None` hidden, `Some(None)` as it is, `Some(Some(mask))` masked.
    pub fn shows(&self, field: &str) -> Option<Option<Mask>> {
        if self.is_open() {
            return Some(None);
        }
        if Self::entry(|f| self.hidden.get(f), field).is_some() {
            return None;
        }
        Some(Self::entry(|f| self.masked.get(f), field).copied())
    }

    /// Whether `field` shows, whatever its mask (a removed field does not).
    pub fn lists(&self, field: &str) -> bool {
        !matches!(self.shows(field), None | Some(Some(Mask::Remove)))
    }

    /// The fields a query may not search (hidden or masked: they act as unmapped).
    pub fn unsearchable(&self) -> BTreeSet<String> {
        self.hidden
            .iter()
            .chain(self.masked.keys())
            .cloned()
            .collect()
    }

    /// A record's `_source` (or a hit's `fields`) as the reader sees it: hidden and removed
    /// fields gone, redacted ones starred, nullified ones null.
    pub fn apply_to_source(&self, source: &mut Map<String, Value>) {
        if self.is_open() {
            return;
        }
        self.apply_at(source, "");
    }

    fn apply_at(&self, object: &mut Map<String, Value>, prefix: &str) {
        let keys: Vec<String> = object.keys().cloned().collect();
        for key in keys {
            let path = match prefix.is_empty() {
                true => key.clone(),
                false => format!("{prefix}.{key}"),
            };
            match self.shows(&path) {
                None | Some(Some(Mask::Remove)) => {
                    object.remove(&key);
                }
                Some(Some(Mask::Nullify)) => {
                    object.insert(key, Value::Null);
                }
                Some(Some(Mask::Redact)) => {
                    if let Some(value) = object.get_mut(&key) {
                        *value = redact_json(value);
                    }
                }
                Some(None) => {
                    if let Some(Value::Object(inner)) = object.get_mut(&key) {
                        self.apply_at(inner, &path);
                    }
                }
            }
        }
    }

    /// A label of a series as the reader sees it: `None` when it is not shown.
    pub fn label(&self, name: &str, value: &str) -> Option<String> {
        match self.shows(name)? {
            None => Some(value.to_owned()),
            Some(Mask::Redact) => Some(redact(value)),
            Some(Mask::Nullify | Mask::Remove) => None,
        }
    }
}

/// A JSON value redacted: strings by their text, arrays item by item, other values by their
/// JSON text.
fn redact_json(value: &Value) -> Value {
    match value {
        Value::Null => Value::Null,
        Value::String(text) => Value::String(redact(text)),
        Value::Array(items) => Value::Array(items.iter().map(redact_json).collect()),
        other => Value::String(redact(&other.to_string())),
    }
}

/// What a read reaches.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// Datasets, aliases and patterns as a request names them (comma-separated; `None`, `""`,
    /// `_all` and `*`: every dataset).
    Names(Option<&'a str>),
    /// Every metrics dataset (PromQL without a dataset).
    Metrics,
    /// Every dataset, metrics datasets too (metadata lists).
    Every,
}

/// One dataset as a reader sees it.
#[derive(Clone, Debug)]
pub struct DatasetView {
    pub name: String,
    /// Its definition as stored.
    pub def: Arc<TableDef>,
    pub snapshot: Arc<TableSnapshot>,
    /// The records the reader may see: its aliases' filters and its grant's record filter, all
    /// of which must match; `None`: all.
    pub filter: Option<Value>,
    pub fields: FieldPolicy,
}

impl DatasetView {
    /// Its definition with the fields the reader may not see left out (for mappings,
    /// `DESCRIBE` and SQL's columns).
    pub fn visible_def(&self) -> Arc<TableDef> {
        visible_def(&self.def, &self.fields)
    }

    /// Its document index schema as the reader may search it; `None` for a dataset without
    /// one (a metrics dataset).
    pub fn docs(&self) -> Option<DocsSchema> {
        let docs = self.snapshot.index.as_ref()?.docs.clone()?;
        if self.fields.is_open() {
            return Some(docs);
        }
        let unsearchable = self.fields.unsearchable();
        let strings = self
            .def
            .columns
            .iter()
            .filter(|c| is_text(&c.data_type) && self.fields.shows(&c.name) == Some(None))
            // A keyword-only field (`_id`) is not in `all` either.
            .filter(|c| !docs.is_keyword_only(&c.name))
            .map(|c| c.name.clone())
            .collect();
        Some(docs.restricted(unsearchable, strings))
    }

    /// The records the reader may see as a query over the dataset's document index (`None`:
    /// all). The filters are its aliases' and its grant's, not the reader's: they read every
    /// field. A filter that does not read the clock has its matches kept per segment, for the
    /// reader's next reads (see [`CachedFilter`]).
    pub fn record_filter(&self) -> Result<Option<DslQuery>> {
        let Some(filter) = &self.filter else {
            return Ok(None);
        };
        let docs = self
            .snapshot
            .index
            .as_ref()
            .and_then(|i| i.docs.clone())
            .ok_or_else(|| {
                Error::Internal(format!("dataset {:?} has no document index", self.name))
            })?;
        let now = chrono::Utc::now().timestamp_millis();
        let compiled = dsl::compile(&docs, filter, now)
            .map_err(|e| Error::BadRequest(format!("[{}] {}", e.kind, e.reason)))?;
        Ok(Some(
            match FilterKey::of(&filter.to_string(), docs.fingerprint()) {
                Some(key) => Box::new(CachedFilter::new(key, compiled)),
                None => compiled,
            },
        ))
    }

    /// The records the reader may see, by the document index, as a scan reads them (`None`:
    /// all).
    pub async fn visible_rows(&self) -> Result<Option<Arc<RowsWithin>>> {
        let Some(filter) = self.record_filter()? else {
            return Ok(None);
        };
        let snapshot = self.snapshot.clone();
        let rows = crate::engine::blocking(move || match filter.downcast_ref::<CachedFilter>() {
            Some(cached) => snapshot.kept_within(cached),
            None => snapshot
                .matching_rows(filter.as_ref())
                .map(|rows| Arc::new(RowsWithin::new(&snapshot, Arc::new(rows)))),
        })
        .await??;
        Ok(Some(rows))
    }

    /// The series filter of a metrics dataset's records (`None`: all).
    pub fn series_filter(&self) -> Result<Option<LabelFilter>> {
        self.filter
            .as_ref()
            .map(|filter| LabelFilter::parse(filter, &self.name))
            .transpose()
    }
}

/// A record filter over a metrics dataset, whose records are samples of series: what a Query
/// DSL filter says of their labels. Served: `term`, `terms`, `prefix`, `exists`, `match_all`,
/// `match_none`, and `bool` of them.
#[derive(Clone, Debug, PartialEq)]
pub enum LabelFilter {
    All,
    Nothing,
    /// The label has one of these values.
    Equals(String, Vec<String>),
    Prefix(String, String),
    Exists(String),
    And(Vec<LabelFilter>),
    Or(Vec<LabelFilter>),
    Not(Box<LabelFilter>),
}

impl LabelFilter {
    /// Reads the Query DSL `filter` of metrics dataset `dataset`.
    pub fn parse(filter: &Value, dataset: &str) -> Result<LabelFilter> {
        let refuse = |what: &str| {
            Error::BadRequest(format!(
                "a record filter of metrics dataset {dataset:?} reads series labels: term, terms, prefix, exists, match_all, match_none and bool serve it, not {what}"
            ))
        };
        let Some((kind, body)) = filter.as_object().and_then(|o| {
            let mut entries = o.iter();
            match (entries.next(), entries.next()) {
                (Some(entry), None) => Some(entry),
                _ => None,
            }
        }) else {
            return Err(refuse(&filter.to_string()));
        };
        // `{label: value}` or `{label: {value: ...}}`.
        let field_value = |key: &str| -> Result<(String, Value)> {
            let (label, spec) = body
                .as_object()
                .and_then(|o| o.iter().find(|(k, _)| *k != "boost" && *k != "_name"))
                .ok_or_else(|| refuse(kind))?;
            let value = match spec {
                Value::Object(options) => options.get(key).cloned().ok_or_else(|| refuse(kind))?,
                value => value.clone(),
            };
            Ok((label.clone(), value))
        };
        let text = |value: &Value| match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let list = |key: &str| -> Result<Vec<LabelFilter>> {
            match body.get(key) {
                None => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| LabelFilter::parse(item, dataset))
                    .collect(),
                Some(one) => Ok(vec![LabelFilter::parse(one, dataset)?]),
            }
        };
        Ok(match kind.as_str() {
            "match_all" => LabelFilter::All,
            "match_none" => LabelFilter::Nothing,
            "term" => {
                let (label, value) = field_value("value")?;
                LabelFilter::Equals(label, vec![text(&value)])
            }
            "terms" => {
                let (label, values) = field_value("value")?;
                let values = values.as_array().ok_or_else(|| refuse(kind))?;
                LabelFilter::Equals(label, values.iter().map(text).collect())
            }
            "prefix" => {
                let (label, value) = field_value("value")?;
                LabelFilter::Prefix(label, text(&value))
            }
            "exists" => LabelFilter::Exists(
                body.get("field")
                    .and_then(Value::as_str)
                    .ok_or_else(|| refuse(kind))?
                    .to_owned(),
            ),
            "bool" => {
                let mut all = list("must")?;
                all.extend(list("filter")?);
                all.extend(
                    list("must_not")?
                        .into_iter()
                        .map(|f| LabelFilter::Not(Box::new(f))),
                );
                let should = list("should")?;
                if !should.is_empty() {
                    all.push(LabelFilter::Or(should));
                }
                LabelFilter::And(all)
            }
            other => return Err(refuse(&format!("[{other}]"))),
        })
    }

    /// Whether a series with labels `label` (name to value) passes.
    pub fn matches<'a>(&self, label: &impl Fn(&str) -> Option<&'a str>) -> bool {
        match self {
            LabelFilter::All => true,
            LabelFilter::Nothing => false,
            LabelFilter::Equals(name, values) => {
                label(name).is_some_and(|v| values.iter().any(|x| x == v))
            }
            LabelFilter::Prefix(name, prefix) => label(name).is_some_and(|v| v.starts_with(prefix)),
            LabelFilter::Exists(name) => label(name).is_some_and(|v| !v.is_empty()),
            LabelFilter::And(all) => all.iter().all(|f| f.matches(label)),
            LabelFilter::Or(any) => any.iter().any(|f| f.matches(label)),
            LabelFilter::Not(inner) => !inner.matches(label),
        }
    }
}

/// Whether a column holds text (and so goes to the catch-all field of the document index).
fn is_text(data_type: &ColumnType) -> bool {
    match data_type {
        ColumnType::Utf8 => true,
        ColumnType::List(item) => is_text(item),
        _ => false,
    }
}

/// `def` without the fields `fields` does not list.
fn visible_def(def: &Arc<TableDef>, fields: &FieldPolicy) -> Arc<TableDef> {
    if fields.is_open() {
        return def.clone();
    }
    let mut visible = TableDef::clone(def);
    visible.columns.retain(|c| fields.lists(&c.name));
    visible.fts_columns.retain(|c| fields.lists(c));
    visible.exact_columns.retain(|c| fields.lists(c));
    visible.date_formats.retain(|c, _| fields.lists(c));
    visible.declared.retain(|name, declared| {
        fields.lists(name)
            && declared
                .path
                .as_deref()
                .is_none_or(|path| fields.lists(path))
    });
    if visible
        .vector_column
        .as_deref()
        .is_some_and(|c| !fields.lists(c))
    {
        visible.vector_column = None;
        visible.vector_metric = None;
    }
    Arc::new(visible)
}

/// A dataset a read reaches, as its reader sees it, before its snapshot is taken.
pub(in crate::engine) struct Seen {
    pub name: String,
    pub def: Arc<TableDef>,
    pub filter: Option<Value>,
    pub fields: FieldPolicy,
}

/// What a read reaches, as its reader sees it.
#[derive(Clone, Debug, Default)]
pub struct ReadView {
    pub datasets: Vec<DatasetView>,
}

/// The datasets `target` reaches in `state` (see [`aliases::resolve_read`]), each with the
/// aliases (named or matched by the request) it was reached through, and whether a name
/// without a wildcard reached it.
fn reached(
    state: &CatalogState,
    target: Target<'_>,
    ignore_unavailable: bool,
) -> Result<Vec<(Searched, Vec<String>, bool)>> {
    let patterns = match target {
        Target::Metrics | Target::Every => {
            let metrics_only = matches!(target, Target::Metrics);
            return Ok(state
                .tables
                .values()
                .filter(|def| def.dataset && (def.metrics || !metrics_only))
                .map(|def| {
                    let searched = Searched {
                        name: def.name.clone(),
                        filter: None,
                    };
                    (searched, Vec::new(), false)
                })
                .collect());
        }
        Target::Names(names) => patterns_of(names),
    };
    let found = aliases::resolve_read(state, &patterns, ignore_unavailable)?;
    Ok(found
        .into_iter()
        .map(|searched| {
            let via: Vec<String> = state
                .aliases
                .iter()
                .filter(|(alias, targets)| {
                    targets.contains_key(&searched.name)
                        && patterns.iter().any(|p| pattern_matches(p, alias))
                })
                .map(|(alias, _)| alias.clone())
                .collect();
            let named = patterns.iter().any(|p| {
                !p.contains('*') && (p == &searched.name || via.iter().any(|alias| alias == p))
            });
            (searched, via, named)
        })
        .collect())
}

/// The patterns of a request's names: every dataset for `None`, `""`, `_all` and `*`.
fn patterns_of(names: Option<&str>) -> Vec<String> {
    match names.map(aliases::split_names) {
        Some(list) if !list.is_empty() => list,
        _ => vec!["*".to_owned()],
    }
}

/// The refusal of every read of a user that holds no grants.
pub(in crate::engine) fn no_grants(principal: &PlatformPrincipal) -> Error {
    Error::Forbidden(format!(
        "user {} holds no role that grants anything: no role, no access",
        principal.user
    ))
}

fn forbidden(principal: &PlatformPrincipal, action: Action, name: &str) -> Error {
    Error::Forbidden(format!(
        "user {} may not {} on {name:?}: no role grants it",
        principal.user,
        action.as_str()
    ))
}

impl Engine {
    /// The door of reads of a connected source: how `principal` sees dataset `dataset` of
    /// connection `connection` (fields `columns`) for `action`, or a 403.
    pub(in crate::engine) fn read_source(
        &self,
        principal: &PlatformPrincipal,
        action: Action,
        connection: &str,
        dataset: &str,
        columns: &[String],
    ) -> Result<SourceView> {
        if principal.grant.is_nothing() {
            return Err(no_grants(principal));
        }
        principal
            .grant
            .source_view(action, connection, dataset, columns)
            .ok_or_else(|| {
                Error::Forbidden(format!(
                    "user {} may not {} {connection}/{dataset}: no role grants it",
                    principal.user,
                    action.as_str()
                ))
            })
    }

    /// The one door of platform reads: the datasets `target` reaches for `action` (record or
    /// metadata read), a snapshot of each, and how `principal` sees each. A dataset a wildcard
    /// reaches that the principal may not read is left out; one it names is a 403. A name of
    /// no dataset or alias is a 404, unless `ignore_unavailable`.
    pub(in crate::engine) async fn read(
        &self,
        principal: &PlatformPrincipal,
        action: Action,
        target: Target<'_>,
        ignore_unavailable: bool,
    ) -> Result<ReadView> {
        let mut datasets = Vec::new();
        for seen in self
            .reach(principal, action, target, ignore_unavailable)
            .await?
        {
            let (def, snapshot) = self
                .dataset_snapshot(&principal.account, &seen.name)
                .await?;
            datasets.push(DatasetView {
                name: seen.name,
                def,
                snapshot,
                filter: seen.filter,
                fields: seen.fields,
            });
        }
        Ok(ReadView { datasets })
    }

    /// What a metadata read of `target` reaches: the definitions of its datasets, without the
    /// fields the principal may not see (see [`Engine::read`]).
    pub(in crate::engine) async fn metadata(
        &self,
        principal: &PlatformPrincipal,
        target: Target<'_>,
        ignore_unavailable: bool,
    ) -> Result<Vec<Arc<TableDef>>> {
        let seen = self
            .reach(principal, Action::MetadataRead, target, ignore_unavailable)
            .await?;
        Ok(seen
            .iter()
            .map(|seen| visible_def(&seen.def, &seen.fields))
            .collect())
    }

    /// The datasets `target` reaches for `action`, as `principal` sees each (see
    /// [`Engine::read`]), without their snapshots.
    pub(in crate::engine) async fn reach(
        &self,
        principal: &PlatformPrincipal,
        action: Action,
        target: Target<'_>,
        ignore_unavailable: bool,
    ) -> Result<Vec<Seen>> {
        if principal.grant.is_nothing() {
            return Err(no_grants(principal));
        }
        let Some(state) = self.datasets_catalog(&principal.account).await? else {
            return match target {
                Target::Names(names) => {
                    match patterns_of(names).iter().find(|p| !p.contains('*')) {
                        Some(name) if !ignore_unavailable => {
                            Err(Error::DatasetNotFound(name.clone()))
                        }
                        _ => Ok(Vec::new()),
                    }
                }
                Target::Metrics | Target::Every => Ok(Vec::new()),
            };
        };
        let mut seen = Vec::new();
        for (searched, via, named) in reached(&state, target, ignore_unavailable)? {
            let Some(def) = state.tables.get(&searched.name).cloned() else {
                continue;
            };
            let Some(visibility) = principal.grant.visibility(action, &def, &via) else {
                if named {
                    return Err(forbidden(principal, action, &searched.name));
                }
                continue;
            };
            seen.push(Seen {
                name: searched.name,
                def,
                filter: all_of([searched.filter, visibility.filter]),
                fields: visibility.fields,
            });
        }
        Ok(seen)
    }

    /// One dataset, read by its own name, as `principal` sees it.
    pub(in crate::engine) async fn read_one(
        &self,
        principal: &PlatformPrincipal,
        action: Action,
        name: &str,
    ) -> Result<DatasetView> {
        let (def, snapshot) = self.dataset_snapshot(&principal.account, name).await?;
        let visibility = principal
            .grant
            .visibility(action, &def, &[])
            .ok_or_else(|| forbidden(principal, action, name))?;
        Ok(DatasetView {
            name: name.to_owned(),
            filter: visibility.filter,
            fields: visibility.fields,
            def,
            snapshot,
        })
    }

    /// The one door of platform writes: may `principal` write records to dataset `name`?
    pub(in crate::engine) fn authorize_write(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
    ) -> Result<()> {
        self.authorize(principal, Action::RecordWrite, name)
    }
}

#[cfg(test)]
mod tests;
