use std::sync::Arc;

use serde_json::json;
use strata_projections::catalog::{AliasDef, TableDef};

use super::*;

fn dataset(name: &str) -> Arc<TableDef> {
    Arc::new(TableDef {
        name: name.to_owned(),
        id: format!("id-{name}"),
        columns: Vec::new(),
        dataset: true,
        ..Default::default()
    })
}

fn target(name: &str, filter: Option<Value>, write: Option<bool>) -> (String, AliasTarget) {
    (
        name.to_owned(),
        AliasTarget {
            table_id: format!("id-{name}"),
            filter: filter.map(|f| f.to_string()),
            is_write_index: write,
        },
    )
}

/// Datasets logs-1, logs-2 and users; alias `logs` (both logs, logs-2 the write index),
/// `errors` (logs-1 through a filter), `people` (users alone).
fn state() -> CatalogState {
    let mut state = CatalogState::default();
    for name in ["logs-1", "logs-2", "users"] {
        state.tables.insert(name.to_owned(), dataset(name));
    }
    let logs: AliasDef = [
        target("logs-1", None, None),
        target("logs-2", None, Some(true)),
    ]
    .into();
    let errors: AliasDef = [target(
        "logs-1",
        Some(json!({"term": {"level": "error"}})),
        None,
    )]
    .into();
    let people: AliasDef = [target("users", None, None)].into();
    state.aliases.insert("logs".into(), logs);
    state.aliases.insert("errors".into(), errors);
    state.aliases.insert("people".into(), people);
    state
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn reads_reach_datasets_by_name_pattern_and_alias() {
    let state = state();
    let read = |list: &[&str]| resolve_read(&state, &names(list), false).unwrap();
    assert_eq!(
        read(&["logs"]),
        vec![
            Searched {
                name: "logs-1".into(),
                filter: None
            },
            Searched {
                name: "logs-2".into(),
                filter: None
            },
        ]
    );
    assert_eq!(
        read(&["errors"]),
        vec![Searched {
            name: "logs-1".into(),
            filter: Some(json!({"term": {"level": "error"}})),
        }]
    );
    // Named itself as well: read whole.
    assert_eq!(read(&["errors", "logs-1"])[0].filter, None);
    // A pattern matches aliases too.
    let people: Vec<String> = read(&["peo*"]).into_iter().map(|s| s.name).collect();
    assert_eq!(people, ["users"]);
    assert_eq!(read(&["*"]).len(), 3);
    assert!(read(&["nothing-*"]).is_empty());
}

#[test]
fn a_missing_name_is_a_404_unless_unavailable_ones_are_ignored() {
    let state = state();
    let error = resolve_read(&state, &names(&["logs-1", "nope"]), false).unwrap_err();
    assert!(
        matches!(error, Error::DatasetNotFound(ref n) if n == "nope"),
        "{error}"
    );
    let read = resolve_read(&state, &names(&["logs-1", "nope"]), true).unwrap();
    assert_eq!(read.len(), 1);
}

#[test]
fn filters_of_several_aliases_any_of_which_may_match() {
    let mut state = state();
    state.aliases.insert(
        "warnings".into(),
        [target(
            "logs-1",
            Some(json!({"term": {"level": "warn"}})),
            None,
        )]
        .into(),
    );
    let read = resolve_read(&state, &names(&["errors", "warnings"]), false).unwrap();
    assert_eq!(
        read[0].filter,
        Some(json!({"bool": {"should": [
            {"term": {"level": "error"}},
            {"term": {"level": "warn"}},
        ], "minimum_should_match": 1}}))
    );
}

#[test]
fn writes_reach_the_write_index() {
    let mut state = state();
    assert_eq!(state.write_index("logs"), WriteIndex::Dataset("logs-2"));
    assert_eq!(state.write_index("people"), WriteIndex::Dataset("users"));
    assert_eq!(state.write_index("users"), WriteIndex::NotAnAlias);
    state
        .aliases
        .get_mut("logs")
        .unwrap()
        .get_mut("logs-2")
        .unwrap()
        .is_write_index = None;
    assert_eq!(state.write_index("logs"), WriteIndex::None);
    state
        .aliases
        .get_mut("people")
        .unwrap()
        .get_mut("users")
        .unwrap()
        .is_write_index = Some(false);
    assert_eq!(state.write_index("people"), WriteIndex::None);
}

fn add(indices: &[&str], aliases: &[&str], spec: AliasSpec) -> AliasAction {
    AliasAction::Add {
        indices: names(indices),
        aliases: names(aliases),
        spec,
    }
}

fn remove(indices: &[&str], aliases: &[&str], must_exist: bool) -> AliasAction {
    AliasAction::Remove {
        indices: names(indices),
        aliases: names(aliases),
        must_exist,
    }
}

#[test]
fn actions_become_one_change_or_none() {
    let state = state();
    let changed = plan_actions(
        &state,
        &[
            remove(&["users"], &["people"], true),
            add(&["logs-*"], &["all-logs"], AliasSpec::default()),
        ],
    )
    .unwrap()
    .unwrap();
    let pairs = |list: &[DatasetAlias]| {
        list.iter()
            .map(|a| format!("{}>{}:{}", a.alias, a.dataset, a.table_id))
            .collect::<Vec<_>>()
    };
    assert_eq!(pairs(&changed.removed), ["people>users:id-users"]);
    assert_eq!(
        pairs(&changed.added),
        ["all-logs>logs-1:id-logs-1", "all-logs>logs-2:id-logs-2"]
    );
    // Adding then removing the same pair changes nothing.
    let none = plan_actions(
        &state,
        &[
            add(&["users"], &["x"], AliasSpec::default()),
            remove(&["users"], &["x"], true),
        ],
    )
    .unwrap();
    assert_eq!(none, None);
}

#[test]
fn bad_actions_are_refused_whole() {
    let state = state();
    let refused = |actions: &[AliasAction]| plan_actions(&state, actions).unwrap_err().to_string();
    assert!(
        refused(&[add(&["nope"], &["a"], AliasSpec::default())]).contains("no such index [nope]")
    );
    assert!(
        refused(&[add(&["users"], &["logs-1"], AliasSpec::default())])
            .contains("an index or data stream exists with the same name as the alias")
    );
    assert!(refused(&[remove(&["users"], &["nope"], true)]).contains("aliases [nope] missing"));
    let write = AliasSpec {
        is_write_index: Some(true),
        ..Default::default()
    };
    assert!(
        refused(&[add(&["logs-1"], &["logs"], write)])
            .contains("alias [logs] has more than one write index [logs-1,logs-2]")
    );
    let bad_filter = AliasSpec {
        filter: Some(json!({"no_such_query": {}})),
        ..Default::default()
    };
    assert!(refused(&[add(&["users"], &["a"], bad_filter)]).contains("failed to parse filter"));
    // Without must_exist, a missing alias is no error.
    assert_eq!(
        plan_actions(&state, &[remove(&["users"], &["nope"], false)]).unwrap(),
        None
    );
}

#[test]
fn listings_show_each_datasets_aliases() {
    let state = state();
    let all = listing(&state, &names(&["*"]), None).unwrap();
    assert_eq!(
        Value::Object(
            all.into_iter()
                .map(|(k, v)| (k, Value::Object(v)))
                .collect()
        ),
        json!({
            "logs-1": {"errors": {"filter": {"term": {"level": "error"}}}, "logs": {}},
            "logs-2": {"logs": {"is_write_index": true}},
            "users": {"people": {}},
        })
    );
    let named = listing(&state, &names(&["*"]), Some(&names(&["people"]))).unwrap();
    assert_eq!(named.keys().collect::<Vec<_>>(), ["users"]);
    let missing = listing(&state, &names(&["*"]), Some(&names(&["nope"]))).unwrap_err();
    assert!(missing.to_string().contains("alias [nope] missing"));
}
