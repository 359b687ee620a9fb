//! Query DSL in place: a search of one dataset of a connection (GET|POST
//! /source/{id}/{dataset}/dsl, /{dataset}/_search with `connection_id`). SQL sources get the
//! documented subset translated by [`super::dsl`], over the dataset as its reader sees it;
//! search engines get the search forwarded, guarded by the reader's field policy: fields it
//! may not search act as unmapped (their names are changed to names no index has), scripts
//! are refused while a policy applies, a record filter is added to the query, and the hits'
//! `_source` and `fields` come back with hidden fields removed and masked ones masked.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};
use strata_projections::control::Connection;

use super::{dsl, search_engine::SearchEngine};
use crate::{
    engine::{Action, Engine, PlatformPrincipal, access::SourceView},
    error::{Error, Result},
    query,
};

/// What a field the reader may not search is renamed to: no index has such a field.
const UNMAPPED: &str = "strata_unmapped__";

/// Keys whose string values (or arrays of them) name fields.
const FIELD_VALUES: &[&str] = &[
    "field",
    "fields",
    "default_field",
    "docvalue_fields",
    "stored_fields",
];

/// Keys that run code over the records, refused while a field policy applies.
const SCRIPTS: &[&str] = &["script", "script_fields", "runtime_mappings", "highlight"];

/// Clauses that search every field unless told which: under a field policy they must name
/// their fields (`fields` or `default_field`), none with a wildcard.
const ANY_FIELD: &[&str] = &[
    "query_string",
    "simple_query_string",
    "multi_match",
    "combined_fields",
];

impl Engine {
    /// Runs the search `body` over dataset `dataset` of connection `id`; the search engine's
    /// answer.
    pub async fn connection_search(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        dataset: &str,
        body: &Value,
    ) -> Result<Value> {
        let connection = self.connection(principal, id).await?;
        let answer = async {
            let source = self.source_of(&connection).await?;
            if let Some(engine) = source.search_engine() {
                return self
                    .forward_search(principal, &connection, engine, dataset, body)
                    .await;
            }
            dsl::check(body)?;
            let ctx = query::session(&self.queries);
            let table = self
                .source_table(
                    &ctx,
                    principal,
                    &connection,
                    source.as_ref(),
                    dataset,
                    Action::RecordRead,
                )
                .await?;
            // The fields denied to the reader are no columns of `table` already.
            dsl::search(&ctx, table, dataset, body, &BTreeSet::new()).await
        }
        .await;
        self.record_use(&connection, answer.as_ref().err()).await;
        answer
    }

    /// A search of index `dataset` forwarded to `engine`, as the reader may see it.
    async fn forward_search(
        &self,
        principal: &PlatformPrincipal,
        connection: &Connection,
        engine: &SearchEngine,
        dataset: &str,
        body: &Value,
    ) -> Result<Value> {
        // The right first: a user who may not read it learns nothing of the source.
        self.read_source(
            principal,
            Action::RecordRead,
            &connection.name,
            dataset,
            &[],
        )?;
        let fields: Vec<String> = engine
            .fields(dataset)
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        let view = self.read_source(
            principal,
            Action::RecordRead,
            &connection.name,
            dataset,
            &fields,
        )?;
        let body = guarded(body, &view, &format!("{}/{dataset}", connection.name))?;
        let mut answer = engine.search(dataset, &body).await?;
        shown(&mut answer, &view);
        Ok(answer)
    }
}

/// `body` as it may be forwarded for a reader who sees the dataset as `view`.
fn guarded(body: &Value, view: &SourceView, name: &str) -> Result<Value> {
    let mut body = match body {
        Value::Null => Map::new(),
        Value::Object(body) => body.clone(),
        _ => {
            return Err(Error::BadRequest(
                "the search body must be a JSON object".to_owned(),
            ));
        }
    };
    if !view.fields.is_open() {
        let unsearchable = view.fields.unsearchable();
        let mut body_value = Value::Object(body);
        refuse_scripts(&body_value, name)?;
        unmap(&mut body_value, &unsearchable);
        body = match body_value {
            Value::Object(body) => body,
            _ => Map::new(),
        };
    }
    if let Some(filter) = &view.filter {
        let query = body.remove("query").unwrap_or(json!({"match_all": {}}));
        body.insert(
            "query".to_owned(),
            json!({"bool": {"must": [query], "filter": [filter]}}),
        );
    }
    Ok(Value::Object(body))
}

/// Refuses, under a field policy, what could read fields the reader may not see: scripts,
/// clauses that search every field, and field names with a wildcard.
fn refuse_scripts(value: &Value, name: &str) -> Result<()> {
    let refused = |what: &str| {
        Err(Error::BadRequest(format!(
            "{what} is not allowed on {name}: field-level security applies to it"
        )))
    };
    match value {
        Value::Object(object) => {
            if let Some(key) = object.keys().find(|k| SCRIPTS.contains(&k.as_str())) {
                return refused(&format!("[{key}]"));
            }
            for (key, inner) in object {
                if key.contains('*') {
                    return refused(&format!("the field pattern [{key}]"));
                }
                if FIELD_VALUES.contains(&key.as_str()) {
                    let names: Vec<&str> = match inner {
                        Value::String(field) => vec![field.as_str()],
                        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
                        _ => Vec::new(),
                    };
                    if let Some(pattern) = names.iter().find(|n| n.contains('*')) {
                        return refused(&format!("the field pattern [{pattern}]"));
                    }
                }
                if ANY_FIELD.contains(&key.as_str())
                    && !inner.as_object().is_some_and(|c| {
                        c.contains_key("fields") || c.contains_key("default_field")
                    })
                {
                    return refused(&format!("[{key}] without fields"));
                }
            }
            object.values().try_for_each(|v| refuse_scripts(v, name))
        }
        Value::Array(items) => items.iter().try_for_each(|v| refuse_scripts(v, name)),
        _ => Ok(()),
    }
}

/// Whether `field` is, or is under, a field of `unsearchable`.
fn names_unsearchable(field: &str, unsearchable: &BTreeSet<String>) -> bool {
    unsearchable.iter().any(|hidden| {
        field == hidden
            || field
                .strip_prefix(hidden.as_str())
                .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// Renames, throughout `value`, every field of `unsearchable` (as an object's key, or as the
/// value of a key that names fields) to a name no index has.
fn unmap(value: &mut Value, unsearchable: &BTreeSet<String>) {
    let rename = |field: &str| match names_unsearchable(field, unsearchable) {
        true => format!("{UNMAPPED}{field}"),
        false => field.to_owned(),
    };
    match value {
        Value::Object(object) => {
            let entries = std::mem::take(object);
            for (key, mut inner) in entries {
                if FIELD_VALUES.contains(&key.as_str()) {
                    match &mut inner {
                        Value::String(field) => *field = rename(field),
                        Value::Array(items) => {
                            for item in items.iter_mut() {
                                match item {
                                    Value::String(field) => *field = rename(field),
                                    other => unmap(other, unsearchable),
                                }
                            }
                        }
                        other => unmap(other, unsearchable),
                    }
                } else {
                    unmap(&mut inner, unsearchable);
                }
                object.insert(rename(&key), inner);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| unmap(v, unsearchable)),
        _ => {}
    }
}

/// The answer's hits as the reader may see them.
fn shown(answer: &mut Value, view: &SourceView) {
    if view.fields.is_open() {
        return;
    }
    let Some(hits) = answer["hits"]["hits"].as_array_mut() else {
        return;
    };
    for hit in hits {
        if let Some(source) = hit.get_mut("_source").and_then(Value::as_object_mut) {
            view.fields.apply_to_source(source);
        }
        if let Some(fields) = hit.get_mut("fields").and_then(Value::as_object_mut) {
            view.fields.apply_to_source(fields);
        }
        if let Some(hit) = hit.as_object_mut() {
            hit.remove("highlight");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::access::{FieldPolicy, Mask};

    fn view() -> SourceView {
        let mut fields = FieldPolicy::default();
        fields.hidden.insert("secret".to_owned());
        fields.masked.insert("email".to_owned(), Mask::Redact);
        SourceView {
            filter: Some(json!({"term": {"team": "a"}})),
            fields,
        }
    }

    #[test]
    fn hidden_and_masked_fields_act_as_unmapped_and_the_filter_is_added() {
        let body = json!({
            "query": {"bool": {"must": [{"term": {"secret": "x"}}, {"exists": {"field": "email"}}]}},
            "sort": [{"secret.raw": "asc"}, "n"],
            "aggs": {"by": {"terms": {"field": "email"}}},
        });
        let guarded = guarded(&body, &view(), "c/d").unwrap_or_else(|e| unreachable!("{e}"));
        let text = guarded.to_string();
        assert!(
            !text.contains("\"secret\"") && !text.contains("\"email\""),
            "{text}"
        );
        assert!(text.contains("strata_unmapped__secret.raw"), "{text}");
        assert_eq!(
            guarded["query"]["bool"]["filter"][0],
            json!({"term": {"team": "a"}})
        );
        assert_eq!(guarded["sort"][1], "n");
    }

    #[test]
    fn scripts_are_refused_under_a_field_policy() {
        let body = json!({"query": {"script": {"script": "doc['secret'].value == 'x'"}}});
        assert!(guarded(&body, &view(), "c/d").is_err());
        for unnamed in [
            json!({"query": {"query_string": {"query": "s1"}}}),
            json!({"query": {"multi_match": {"query": "s1", "fields": ["se*"]}}}),
            json!({"query": {"term": {"sec*": "s1"}}}),
        ] {
            assert!(guarded(&unnamed, &view(), "c/d").is_err(), "{unnamed}");
        }
        let named = json!({"query": {"query_string": {"query": "s1", "default_field": "msg"}}});
        assert!(guarded(&named, &view(), "c/d").is_ok());
        let open = SourceView::default();
        assert!(guarded(&body, &open, "c/d").is_ok());
    }

    #[test]
    fn hits_come_back_through_the_policy() {
        let mut answer = json!({"hits": {"hits": [{"_source": {
            "secret": "s", "email": "ann@example.com", "n": 1}, "highlight": {"secret": ["s"]}}]}});
        shown(&mut answer, &view());
        let hit = &answer["hits"]["hits"][0];
        assert_eq!(hit["_source"]["n"], 1);
        assert!(hit["_source"].get("secret").is_none());
        assert_ne!(hit["_source"]["email"], "ann@example.com");
        assert!(hit.get("highlight").is_none());
    }
}
