//! Aliases of platform datasets, as Elasticsearch's index aliases work: another name under which
//! searches read one or more datasets (each through an optional filter query), and under which
//! writes reach the alias's write index.
//!
//! Aliases live in the catalog of the account's `default` database (`AliasesChanged`, and
//! `aliases` in `TableCreated`); a change of several aliases is one event, applied all at once
//! or not at all. Alias and dataset names share one namespace. What a name or pattern in a
//! request means is decided here, on one catalog snapshot:
//! - [`resolve_read`]: the datasets a search, count or delete by query reads, each with the
//!   filter its aliases add;
//! - [`CatalogState::write_index`]: the dataset a write to an alias reaches (see
//!   [`no_write_index`] for when there is none).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use strata_log::{
    envelope::Body,
    event::{AliasesChanged, DatasetAlias},
};
use strata_projections::catalog::{AliasTarget, CatalogState, WriteIndex};

use crate::engine::{Action, Engine, Origin, PlatformPrincipal, datasets::check_name};
use crate::error::{Error, Result};
use crate::keys::pattern_matches;

/// A dataset a read reaches, and the filter its aliases add (`None`: none, the dataset was
/// named itself or through an alias without a filter).
#[derive(Clone, Debug, PartialEq)]
pub struct Searched {
    pub name: String,
    pub filter: Option<Value>,
}

/// What an alias adds to the datasets it names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AliasSpec {
    pub filter: Option<Value>,
    pub is_write_index: Option<bool>,
}

/// One action of POST /_aliases (or of PUT and DELETE /{index}/_alias/{name}).
#[derive(Clone, Debug, PartialEq)]
pub enum AliasAction {
    /// Each alias of `aliases` names each dataset `indices` matches.
    Add {
        indices: Vec<String>,
        aliases: Vec<String>,
        spec: AliasSpec,
    },
    /// The aliases `aliases` matches no longer name the datasets `indices` matches.
    /// `must_exist`: a missing alias fails the request (Elasticsearch's default for DELETE).
    Remove {
        indices: Vec<String>,
        aliases: Vec<String>,
        must_exist: bool,
    },
}

/// Names in a request's list: comma-separated names or patterns, `_all` and `*` for all.
pub fn split_names(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s == "_all" {
                "*".to_owned()
            } else {
                s.to_owned()
            }
        })
        .collect()
}

/// The datasets of `state` that `patterns` name, each once, by name; a name without `*` that
/// names no dataset is an error, unless `ignore_unavailable`.
fn matching_datasets(
    state: &CatalogState,
    patterns: &[String],
    ignore_unavailable: bool,
) -> Result<Vec<String>> {
    let mut chosen: Vec<String> = Vec::new();
    for pattern in patterns {
        let before = chosen.len();
        for (name, def) in &state.tables {
            if def.dataset && pattern_matches(pattern, name) && !chosen.contains(name) {
                chosen.push(name.clone());
            }
        }
        if chosen.len() == before
            && !pattern.contains('*')
            && !state.tables.get(pattern).is_some_and(|t| t.dataset)
            && !ignore_unavailable
        {
            return Err(Error::NotFound(format!("no such index [{pattern}]")));
        }
    }
    Ok(chosen)
}

/// The datasets a read of `patterns` reaches (comma-separated, see [`split_names`]): a
/// dataset by its name, by a pattern that matches its name, or through an alias (named, or
/// matched by a pattern) that names it. As in Elasticsearch, a dataset reached by its own name,
/// or through an alias without a filter, is read whole; otherwise through the filters of the
/// aliases that reach it, any of which may match. A name that is neither a dataset nor an alias
/// is a 404 (`DatasetNotFound`), unless `ignore_unavailable` says to leave it out.
pub fn resolve_read(
    state: &CatalogState,
    patterns: &[String],
    ignore_unavailable: bool,
) -> Result<Vec<Searched>> {
    // dataset -> None (read whole) or Some(filters of the aliases that reach it).
    let mut reached: Vec<(String, Option<Vec<Value>>)> = Vec::new();
    let mut reach = |name: &str, filter: Option<Option<Value>>| {
        let at = match reached.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None => {
                reached.push((name.to_owned(), Some(Vec::new())));
                reached.len() - 1
            }
        };
        let entry = &mut reached[at].1;
        match (filter, entry.as_mut()) {
            // By its own name, or through an alias without a filter: whole.
            (None, _) | (Some(None), _) => *entry = None,
            (Some(Some(filter)), Some(filters)) => filters.push(filter),
            (Some(Some(_)), None) => {}
        }
    };
    for pattern in patterns {
        let mut found = false;
        for (name, def) in &state.tables {
            // A wildcard does not reach metrics datasets: they have no documents to search.
            let skipped = def.metrics && pattern.contains('*');
            if def.dataset && !skipped && pattern_matches(pattern, name) {
                reach(name, None);
                found = true;
            }
        }
        for (alias, targets) in &state.aliases {
            if !pattern_matches(pattern, alias) {
                continue;
            }
            for (dataset, target) in targets {
                if state.tables.get(dataset).is_some_and(|t| {
                    t.dataset && t.id == target.table_id && !(t.metrics && pattern.contains('*'))
                }) {
                    let filter = target
                        .filter
                        .as_deref()
                        .map(|text| serde_json::from_str(text).unwrap_or(Value::Null));
                    reach(dataset, Some(filter));
                    found = true;
                }
            }
        }
        if !found && !pattern.contains('*') && !ignore_unavailable {
            return Err(Error::DatasetNotFound(pattern.clone()));
        }
    }
    Ok(reached
        .into_iter()
        .map(|(name, filters)| Searched {
            name,
            filter: filters.map(|mut filters| match filters.len() {
                1 => filters.remove(0),
                _ => json!({"bool": {"should": filters, "minimum_should_match": 1}}),
            }),
        })
        .collect())
}

/// Whether `pattern` names dataset `dataset` of `state`: by its name, or through an alias
/// (named, or matched by the pattern) that names it.
pub fn names_dataset(state: &CatalogState, pattern: &str, dataset: &str) -> bool {
    pattern_matches(pattern, dataset)
        || state.aliases.iter().any(|(alias, targets)| {
            pattern_matches(pattern, alias) && targets.contains_key(dataset)
        })
}

/// The refusal of a write to an alias with no write index, in Elasticsearch's words.
pub fn no_write_index(alias: &str) -> String {
    format!(
        "no write index is defined for alias [{alias}]. The write index may be explicitly disabled using is_write_index=false or the alias points to multiple indices without one being designated as a write index"
    )
}

/// Checks an alias's filter: a query object the Query DSL compiles.
fn check_filter(filter: &Value) -> Result<String> {
    if !filter.is_object() {
        return Err(Error::BadRequest(format!(
            "[parsing_exception] an alias filter must be a query object, not {filter}"
        )));
    }
    let schema = strata_projections::table::docs::DocsSchema::new();
    let now = chrono::Utc::now().timestamp_millis();
    crate::engine::query_dsl::compile::compile(&schema, filter, now).map_err(|error| {
        Error::BadRequest(format!(
            "[{}] failed to parse filter for alias: {}",
            error.kind, error.reason
        ))
    })?;
    Ok(filter.to_string())
}

/// What an alias's definition is in a request body: `filter`, `is_write_index`, and routing
/// (one shard: accepted, without effect).
pub fn parse_spec(body: &Map<String, Value>) -> Result<AliasSpec> {
    let mut spec = AliasSpec::default();
    for (key, value) in body {
        match key.as_str() {
            "filter" => spec.filter = Some(value.clone()),
            "is_write_index" => spec.is_write_index = Some(value.as_bool().ok_or_else(|| {
                Error::BadRequest(format!(
                    "[x_content_parse_exception] [is_write_index] must be a boolean, not {value}"
                ))
            })?),
            "routing" | "index_routing" | "search_routing" | "is_hidden" => {}
            other => {
                return Err(Error::BadRequest(format!(
                    "[x_content_parse_exception] unknown field [{other}] in an alias"
                )));
            }
        }
    }
    Ok(spec)
}

/// The event of `aliases` made with a new dataset (its `aliases` at creation): checked, in
/// the order given.
pub fn creation_aliases(
    state: &CatalogState,
    dataset: &str,
    aliases: &[(String, AliasSpec)],
) -> Result<Vec<DatasetAlias>> {
    let mut out = Vec::with_capacity(aliases.len());
    for (alias, spec) in aliases {
        check_alias_name(state, alias)?;
        if alias == dataset {
            return Err(Error::BadRequest(format!(
                "[invalid_alias_name_exception] Invalid alias name [{alias}]: an index or data stream exists with the same name as the alias"
            )));
        }
        if spec.is_write_index == Some(true)
            && let WriteIndex::Dataset(other) = state.write_index(alias)
            && state.aliases[alias][other].is_write_index == Some(true)
        {
            return Err(more_than_one_write_index(alias, &[other, dataset]));
        }
        out.push(DatasetAlias {
            alias: alias.clone(),
            dataset: dataset.to_owned(),
            table_id: String::new(),
            filter: spec
                .filter
                .as_ref()
                .map(check_filter)
                .transpose()?
                .unwrap_or_default(),
            is_write_index: spec.is_write_index,
        });
    }
    Ok(out)
}

fn check_alias_name(state: &CatalogState, alias: &str) -> Result<()> {
    check_name(alias).map_err(|error| {
        Error::InvalidName(format!(
            "[invalid_alias_name_exception] Invalid alias name [{alias}]: {}",
            error.to_string().replace("dataset name", "alias name")
        ))
    })?;
    if state.tables.contains_key(alias) {
        return Err(Error::BadRequest(format!(
            "[invalid_alias_name_exception] Invalid alias name [{alias}]: an index or data stream exists with the same name as the alias"
        )));
    }
    Ok(())
}

fn more_than_one_write_index(alias: &str, datasets: &[&str]) -> Error {
    Error::BadRequest(format!(
        "[illegal_state_exception] alias [{alias}] has more than one write index [{}]",
        datasets.join(",")
    ))
}

/// The event `actions` come to on `state`, checked as a whole: every dataset and alias they
/// name exists (or is a pattern), alias names are free, and no alias ends with two write
/// indexes. `None` when they change nothing.
pub fn plan_actions(
    state: &CatalogState,
    actions: &[AliasAction],
) -> Result<Option<AliasesChanged>> {
    let mut next = state.aliases.clone();
    let mut added: Vec<DatasetAlias> = Vec::new();
    let mut removed: Vec<DatasetAlias> = Vec::new();
    let pair = |alias: &str, dataset: &str| DatasetAlias {
        alias: alias.to_owned(),
        dataset: dataset.to_owned(),
        table_id: state.tables[dataset].id.clone(),
        ..Default::default()
    };
    for action in actions {
        match action {
            AliasAction::Add {
                indices,
                aliases,
                spec,
            } => {
                let datasets = matching_datasets(state, indices, false)?;
                if datasets.is_empty() {
                    return Err(Error::NotFound(format!(
                        "no such index [{}]",
                        indices.join(",")
                    )));
                }
                let filter = spec.filter.as_ref().map(check_filter).transpose()?;
                for alias in aliases {
                    if alias.contains('*') {
                        return Err(Error::InvalidName(format!(
                            "[invalid_alias_name_exception] Invalid alias name [{alias}]: must not contain '*'"
                        )));
                    }
                    check_alias_name(state, alias)?;
                    for dataset in &datasets {
                        let target = AliasTarget {
                            table_id: state.tables[dataset].id.clone(),
                            filter: filter.clone(),
                            is_write_index: spec.is_write_index,
                        };
                        next.entry(alias.clone())
                            .or_default()
                            .insert(dataset.clone(), target);
                        removed.retain(|r| !(r.alias == *alias && r.dataset == *dataset));
                        added.retain(|a| !(a.alias == *alias && a.dataset == *dataset));
                        added.push(DatasetAlias {
                            filter: filter.clone().unwrap_or_default(),
                            is_write_index: spec.is_write_index,
                            ..pair(alias, dataset)
                        });
                    }
                }
            }
            AliasAction::Remove {
                indices,
                aliases,
                must_exist,
            } => {
                let datasets = matching_datasets(state, indices, false)?;
                let mut any = false;
                for alias_pattern in aliases {
                    let names: Vec<String> = next
                        .keys()
                        .filter(|a| pattern_matches(alias_pattern, a))
                        .cloned()
                        .collect();
                    for alias in names {
                        for dataset in &datasets {
                            let Some(targets) = next.get_mut(&alias) else {
                                continue;
                            };
                            if targets.remove(dataset).is_none() {
                                continue;
                            }
                            any = true;
                            if targets.is_empty() {
                                next.remove(&alias);
                            }
                            added.retain(|a| !(a.alias == alias && a.dataset == *dataset));
                            if state
                                .aliases
                                .get(&alias)
                                .is_some_and(|t| t.contains_key(dataset))
                            {
                                removed.push(pair(&alias, dataset));
                            }
                        }
                    }
                }
                if !any && *must_exist {
                    return Err(Error::NotFound(format!(
                        "[aliases_not_found_exception] aliases [{}] missing",
                        aliases.join(",")
                    )));
                }
            }
        }
    }
    for (alias, targets) in &next {
        let writers: Vec<&str> = targets
            .iter()
            .filter(|(_, t)| t.is_write_index == Some(true))
            .map(|(name, _)| name.as_str())
            .collect();
        if writers.len() > 1 {
            return Err(more_than_one_write_index(alias, &writers));
        }
    }
    if added.is_empty() && removed.is_empty() {
        return Ok(None);
    }
    Ok(Some(AliasesChanged {
        database_id: String::new(),
        added,
        removed,
    }))
}

/// The aliases of `state` as GET /_alias shows them: dataset -> alias -> its definition, for
/// the datasets `indices` names and the aliases `names` matches.
pub fn listing(
    state: &CatalogState,
    indices: &[String],
    names: Option<&[String]>,
) -> Result<BTreeMap<String, Map<String, Value>>> {
    let datasets = matching_datasets(state, indices, false)?;
    let mut out: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for dataset in &datasets {
        out.insert(dataset.clone(), Map::new());
    }
    for (alias, targets) in &state.aliases {
        if names.is_some_and(|names| !names.iter().any(|n| pattern_matches(n, alias))) {
            continue;
        }
        for (dataset, target) in targets {
            if let Some(entry) = out.get_mut(dataset) {
                let mut body = Map::new();
                if let Some(filter) = &target.filter {
                    body.insert(
                        "filter".into(),
                        serde_json::from_str(filter).unwrap_or(Value::Null),
                    );
                }
                if let Some(write) = target.is_write_index {
                    body.insert("is_write_index".into(), json!(write));
                }
                entry.insert(alias.clone(), Value::Object(body));
            }
        }
    }
    if let Some(names) = names {
        // Datasets without a matching alias are left out when aliases are named.
        out.retain(|_, aliases| !aliases.is_empty());
        let missing: Vec<&str> = names
            .iter()
            .filter(|n| !n.contains('*') && !out.values().any(|a| a.contains_key(n.as_str())))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(Error::NotFound(format!(
                "alias [{}] missing",
                missing.join(",")
            )));
        }
    }
    Ok(out)
}

impl Engine {
    /// The catalog of the account's datasets; `None` before its first dataset.
    pub(in crate::engine) async fn datasets_catalog(
        &self,
        account: &str,
    ) -> Result<Option<std::sync::Arc<CatalogState>>> {
        let origin = Origin::system();
        let Some(database) = self.default_database(account, false, &origin).await? else {
            return Ok(None);
        };
        let runtime = self.runtime(&database).await?;
        Ok(Some(runtime.catalog.snapshot()))
    }

    /// POST /_aliases, PUT and DELETE /{index}/_alias/{name}: `actions`, as one catalog change.
    pub async fn update_aliases(
        &self,
        principal: &PlatformPrincipal,
        actions: &[AliasAction],
        origin: &Origin,
    ) -> Result<()> {
        for action in actions {
            let (AliasAction::Add {
                indices, aliases, ..
            }
            | AliasAction::Remove {
                indices, aliases, ..
            }) = action;
            for name in indices.iter().chain(aliases) {
                self.authorize(principal, Action::DatasetCreate, name)?;
            }
        }
        let Some(database) = self
            .default_database(&principal.account, false, origin)
            .await?
        else {
            let name = actions
                .iter()
                .find_map(|a| match a {
                    AliasAction::Add { indices, .. } | AliasAction::Remove { indices, .. } => {
                        indices.first().cloned()
                    }
                })
                .unwrap_or_default();
            return Err(Error::NotFound(format!("no such index [{name}]")));
        };
        let runtime = self.runtime(&database).await?;
        let mut permit = self
            .catalog_permit(&runtime, self.write_wait(), || {
                crate::engine::datasets::busy(&principal.account)
            })
            .await?;
        let Some(mut changed) = plan_actions(&permit.snapshot(), actions)? else {
            return Ok(());
        };
        changed.database_id = runtime.id.clone();
        permit.write(Body::AliasesChanged(changed), origin).await?;
        Ok(())
    }

    /// GET /_alias and the like: dataset -> alias -> definition (see [`listing`]).
    pub async fn aliases(
        &self,
        principal: &PlatformPrincipal,
        indices: Option<&str>,
        names: Option<&str>,
    ) -> Result<BTreeMap<String, Map<String, Value>>> {
        self.authorize(principal, Action::MetadataRead, indices.unwrap_or("*"))?;
        let indices = indices.map(split_names).unwrap_or_else(|| vec!["*".into()]);
        let names = names.map(split_names);
        match self.datasets_catalog(&principal.account).await? {
            Some(state) => listing(&state, &indices, names.as_deref()),
            None => listing(&CatalogState::default(), &indices, names.as_deref()),
        }
    }
}

#[cfg(test)]
mod tests;
