//! Dataset aliases on the platform API, at Elasticsearch's paths: PUT and DELETE
//! /{index}/_alias/{name} (also `_aliases`), POST /_aliases (several actions at once), GET
//! /_alias[/{name}] and /{index}/_alias[/{name}] (HEAD: whether they exist), GET
//! /_cat/aliases, and GET /{index} (an index's aliases, mappings and settings).

use axum::{
    Json,
    body::Bytes,
    extract::Path,
    http::Uri,
    response::{IntoResponse, Response},
};
use serde_json::{Map, Value, json};

use super::{AppState, RequestId, Signed, error::PlatformError};
use crate::{
    engine::{AliasAction, AliasSpec, PlatformPrincipal, parse_alias_spec, split_names},
    error::Error,
};

/// A JSON object body; nothing is an empty one.
fn object_body(body: &Bytes) -> Result<Map<String, Value>, Error> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(other) => Err(Error::BadRequest(format!(
            "[parsing_exception] the body must be a JSON object, not {other}"
        ))),
        Err(error) => Err(Error::BadRequest(format!(
            "[parsing_exception] the body is not JSON: {error}"
        ))),
    }
}

/// Applies `actions` as the principal's request: `{"acknowledged": true}`.
async fn apply(
    state: &AppState,
    principal: &PlatformPrincipal,
    request_id: &RequestId,
    actions: &[AliasAction],
) -> Result<Response, Error> {
    state
        .engine
        .update_aliases(principal, actions, &principal.origin(&request_id.0))
        .await?;
    Ok(Json(json!({"acknowledged": true})).into_response())
}

/// PUT|POST /{index}/_alias/{name}: alias `name` (or each of a list) names the datasets
/// `index` names; the body may give its `filter` and `is_write_index`.
pub async fn put_alias(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    Path((index, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let failed = PlatformError::of("put alias");
    let spec = parse_alias_spec(&object_body(&body).map_err(&failed)?).map_err(&failed)?;
    let action = AliasAction::Add {
        indices: split_names(&index),
        aliases: split_names(&name),
        spec,
    };
    apply(&state, &principal, &request_id, &[action])
        .await
        .map_err(&failed)
}

/// DELETE /{index}/_alias/{name}: the aliases `name` matches no longer name the datasets
/// `index` names; a 404 when there is no such alias.
pub async fn delete_alias(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    Path((index, name)): Path<(String, String)>,
) -> Result<Response, PlatformError> {
    let failed = PlatformError::of("delete alias");
    let action = AliasAction::Remove {
        indices: split_names(&index),
        aliases: split_names(&name),
        must_exist: true,
    };
    apply(&state, &principal, &request_id, &[action])
        .await
        .map_err(&failed)
}

/// Names of one action: `key` (one name) or its plural (a list), as Elasticsearch reads them.
fn action_names(body: &Map<String, Value>, key: &str, plural: &str) -> Result<Vec<String>, Error> {
    let mut names = Vec::new();
    for value in [body.get(key), body.get(plural)].into_iter().flatten() {
        match value {
            Value::String(name) => names.extend(split_names(name)),
            Value::Array(items) => {
                for item in items {
                    let name = item.as_str().ok_or_else(|| {
                        Error::BadRequest(format!(
                            "[x_content_parse_exception] [{plural}] must be names, not {item}"
                        ))
                    })?;
                    names.extend(split_names(name));
                }
            }
            other => {
                return Err(Error::BadRequest(format!(
                    "[x_content_parse_exception] [{key}] must be a name or a list of names, not {other}"
                )));
            }
        }
    }
    if names.is_empty() {
        return Err(Error::BadRequest(format!(
            "[action_request_validation_exception] Validation Failed: 1: One of [{key}] or [{plural}] is required;"
        )));
    }
    Ok(names)
}

/// The actions of a POST /_aliases body, `{"actions": [{"add" | "remove": {...}}, ...]}`.
fn parse_actions(body: &Map<String, Value>) -> Result<Vec<AliasAction>, Error> {
    let Some(Value::Array(list)) = body.get("actions") else {
        return Err(Error::BadRequest(
            "[action_request_validation_exception] Validation Failed: 1: no actions specified;"
                .to_owned(),
        ));
    };
    let mut actions = Vec::with_capacity(list.len());
    for entry in list {
        let Some((kind, Value::Object(args))) = entry
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.iter().next())
        else {
            return Err(Error::BadRequest(format!(
                "[parsing_exception] an alias action is one of add or remove with its arguments, not {entry}"
            )));
        };
        match kind.as_str() {
            "add" | "remove" => {}
            "remove_index" => {
                return Err(Error::BadRequest(
                    "[illegal_argument_exception] the remove_index action is not supported: delete the dataset with DELETE /{index}".to_owned(),
                ));
            }
            other => {
                return Err(Error::BadRequest(format!(
                    "[parsing_exception] unknown alias action [{other}]: add and remove are served"
                )));
            }
        }
        let indices = action_names(args, "index", "indices")?;
        let aliases = action_names(args, "alias", "aliases")?;
        let rest: Map<String, Value> = args
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "index" | "indices" | "alias" | "aliases"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        actions.push(match kind.as_str() {
            "add" => AliasAction::Add {
                indices,
                aliases,
                spec: parse_alias_spec(&rest)?,
            },
            _ => {
                let must_exist = match rest.get("must_exist") {
                    None => false,
                    Some(value) => value.as_bool().ok_or_else(|| {
                        Error::BadRequest(format!(
                            "[x_content_parse_exception] [must_exist] must be a boolean, not {value}"
                        ))
                    })?,
                };
                if let Some(key) = rest.keys().find(|k| *k != "must_exist") {
                    return Err(Error::BadRequest(format!(
                        "[x_content_parse_exception] unknown field [{key}] in a remove action"
                    )));
                }
                AliasAction::Remove {
                    indices,
                    aliases,
                    must_exist,
                }
            }
        });
    }
    Ok(actions)
}

/// POST /_aliases: several alias actions, applied all at once or not at all.
pub async fn post_aliases(
    Signed {
        state,
        principal,
        request_id,
    }: Signed,
    body: Bytes,
) -> Result<Response, PlatformError> {
    let failed = PlatformError::of("update aliases");
    let actions = parse_actions(&object_body(&body).map_err(&failed)?).map_err(&failed)?;
    apply(&state, &principal, &request_id, &actions)
        .await
        .map_err(&failed)
}

/// GET (and HEAD) /_alias, /_alias/{name}, /{index}/_alias, /{index}/_alias/{name}:
/// `{"<dataset>": {"aliases": {"<alias>": {...}}}}`; a named alias that does not exist is a 404.
pub async fn get_aliases(
    Signed {
        state, principal, ..
    }: Signed,
    path: Option<Path<Vec<(String, String)>>>,
) -> Result<Response, PlatformError> {
    let failed = PlatformError::of("get aliases");
    let params: Vec<(String, String)> = path.map(|Path(p)| p).unwrap_or_default();
    let get = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let listing = state
        .engine
        .aliases(&principal, get("index"), get("name"))
        .await
        .map_err(&failed)?;
    let body: Map<String, Value> = listing
        .into_iter()
        .map(|(dataset, aliases)| (dataset, json!({"aliases": aliases})))
        .collect();
    Ok(Json(body).into_response())
}

/// GET /_cat/aliases[/{name}]: one line per alias and dataset, as Elasticsearch's cat API.
pub async fn cat_aliases(
    Signed {
        state, principal, ..
    }: Signed,
    name: Option<Path<String>>,
    uri: Uri,
) -> Result<Response, PlatformError> {
    let failed = PlatformError::of("cat aliases");
    let params: super::platform::CatParams = serde_urlencoded::from_str(uri.query().unwrap_or(""))
        .map_err(|e| failed(Error::BadRequest(format!("invalid query parameters: {e}"))))?;
    let listing = state
        .engine
        .aliases(&principal, None, None)
        .await
        .map_err(&failed)?;
    let patterns = name.map(|Path(name)| split_names(&name));
    let mut rows: Vec<Value> = Vec::new();
    for (dataset, aliases) in listing {
        for (alias, def) in aliases {
            if patterns
                .as_ref()
                .is_some_and(|p| !p.iter().any(|p| crate::keys::pattern_matches(p, &alias)))
            {
                continue;
            }
            let write = match def.get("is_write_index") {
                Some(Value::Bool(write)) => write.to_string(),
                _ => "-".to_owned(),
            };
            rows.push(json!({
                "alias": alias,
                "index": dataset,
                "filter": if def.get("filter").is_some() { "*" } else { "-" },
                "routing.index": "-",
                "routing.search": "-",
                "is_write_index": write,
            }));
        }
    }
    rows.sort_by(|a, b| a["alias"].as_str().cmp(&b["alias"].as_str()));
    match params.format.as_deref() {
        Some("json") => Ok(Json(rows).into_response()),
        None | Some("txt") | Some("text") => {
            let columns = [
                "alias",
                "index",
                "filter",
                "routing.index",
                "routing.search",
                "is_write_index",
            ];
            let mut table: Vec<Vec<String>> = Vec::new();
            if params.v.as_deref().is_some_and(|v| v != "false") {
                table.push(columns.iter().map(|c| c.to_string()).collect());
            }
            for row in &rows {
                table.push(
                    columns
                        .iter()
                        .map(|c| row[*c].as_str().unwrap_or_default().to_owned())
                        .collect(),
                );
            }
            Ok(super::platform::text_table(&table).into_response())
        }
        Some(other) => Err(failed(Error::BadRequest(format!(
            "unsupported format {other:?}; use json or txt"
        )))),
    }
}

/// The aliases of the datasets each `AliasSpec` names, for a dataset's creation: the `aliases`
/// object of an index configuration, `{"<alias>": {"filter", "is_write_index"}}`.
pub fn creation_aliases(value: &Value) -> Result<Vec<(String, AliasSpec)>, Error> {
    let Some(object) = value.as_object() else {
        return Err(Error::BadRequest(format!(
            "[parsing_exception] [aliases] must be an object of alias names, not {value}"
        )));
    };
    object
        .iter()
        .map(|(alias, spec)| {
            let spec = match spec {
                Value::Object(spec) => parse_alias_spec(spec)?,
                Value::Null => AliasSpec::default(),
                other => {
                    return Err(Error::BadRequest(format!(
                        "[parsing_exception] the alias [{alias}] must be an object, not {other}"
                    )));
                }
            };
            Ok((alias.clone(), spec))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actions(body: Value) -> Result<Vec<AliasAction>, Error> {
        parse_actions(body.as_object().unwrap())
    }

    #[test]
    fn actions_read_as_elasticsearch_writes_them() {
        let read = actions(json!({"actions": [
            {"add": {"index": "logs-1", "alias": "logs", "is_write_index": true}},
            {"add": {"indices": ["a", "b"], "aliases": ["x", "y"], "filter": {"term": {"f": 1}}}},
            {"remove": {"index": "old", "alias": "logs", "must_exist": true}},
        ]}))
        .unwrap();
        assert_eq!(read.len(), 3);
        assert_eq!(
            read[0],
            AliasAction::Add {
                indices: vec!["logs-1".into()],
                aliases: vec!["logs".into()],
                spec: AliasSpec {
                    filter: None,
                    is_write_index: Some(true)
                },
            }
        );
        let AliasAction::Add {
            indices,
            aliases,
            spec,
        } = &read[1]
        else {
            panic!("{:?}", read[1]);
        };
        assert_eq!((indices.len(), aliases.len()), (2, 2));
        assert_eq!(spec.filter, Some(json!({"term": {"f": 1}})));
        assert_eq!(
            read[2],
            AliasAction::Remove {
                indices: vec!["old".into()],
                aliases: vec!["logs".into()],
                must_exist: true,
            }
        );
    }

    #[test]
    fn malformed_actions_are_400s_that_say_why() {
        for (body, needle) in [
            (json!({}), "no actions specified"),
            (
                json!({"actions": [{"add": {"alias": "x"}}]}),
                "One of [index] or [indices]",
            ),
            (
                json!({"actions": [{"add": {"index": "x"}}]}),
                "One of [alias] or [aliases]",
            ),
            (
                json!({"actions": [{"rename": {"index": "x", "alias": "y"}}]}),
                "unknown alias action [rename]",
            ),
            (
                json!({"actions": [{"add": {"index": "x", "alias": "y", "size": 3}}]}),
                "unknown field [size]",
            ),
            (
                json!({"actions": [{"remove_index": {"index": "x"}}]}),
                "remove_index action is not supported",
            ),
        ] {
            let error = actions(body).unwrap_err().to_string();
            assert!(error.contains(needle), "{error}");
        }
    }
}
