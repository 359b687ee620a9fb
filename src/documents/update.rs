//! The record line of a bulk `update` (Elasticsearch's partial update): `doc`, a partial record
//! merged into the stored one; `upsert`, the record to create when there is none (or `doc` itself
//! with `doc_as_upsert`); `detect_noop`; and `_source`, what of the updated record the item shows.
//! Scripts are not served.

use serde_json::{Map, Value};

use super::Refusal;

/// An update's record line, read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Update {
    pub doc: Option<Map<String, Value>>,
    pub upsert: Option<Map<String, Value>>,
    pub doc_as_upsert: bool,
    /// An update that changes nothing writes nothing (result `noop`); default true.
    pub detect_noop: bool,
    /// `_source` of the record line: what of the updated record the item returns.
    pub source: Option<Value>,
}

fn object(key: &str, value: Value) -> Result<Map<String, Value>, Refusal> {
    match value {
        Value::Object(object) => Ok(object),
        other => Err(Refusal::parsing(format!(
            "failed to parse the update request: [{key}] must be an object, not {other}"
        ))),
    }
}

fn flag(key: &str, value: &Value) -> Result<bool, Refusal> {
    match value {
        Value::Bool(flag) => Ok(*flag),
        Value::String(text) if text == "true" || text == "false" => Ok(text == "true"),
        other => Err(Refusal::parsing(format!(
            "failed to parse the update request: [{key}] must be a boolean, not {other}"
        ))),
    }
}

impl Update {
    /// Reads an update's record line.
    pub fn parse(text: &[u8]) -> Result<Update, Refusal> {
        let value: Value = serde_json::from_slice(text).map_err(|error| {
            Refusal::parsing(format!("failed to parse the update request: {error}"))
        })?;
        let Value::Object(body) = value else {
            return Err(Refusal::parsing(
                "failed to parse the update request: it is not a JSON object",
            ));
        };
        let mut update = Update {
            detect_noop: true,
            ..Default::default()
        };
        for (key, value) in body {
            match key.as_str() {
                "doc" => update.doc = Some(object(&key, value)?),
                "upsert" => update.upsert = Some(object(&key, value)?),
                "doc_as_upsert" => update.doc_as_upsert = flag(&key, &value)?,
                "detect_noop" => update.detect_noop = flag(&key, &value)?,
                "_source" => update.source = Some(value),
                "script" | "scripted_upsert" => {
                    return Err(Refusal::illegal(
                        "scripts are not supported: send the fields to change as [doc]",
                    ));
                }
                other => {
                    return Err(Refusal::parsing(format!(
                        "failed to parse the update request: unknown field [{other}]"
                    )));
                }
            }
        }
        if update.doc.is_none() {
            return Err(Refusal::new(
                "action_request_validation_exception",
                400,
                "Validation Failed: 1: script or doc is missing;",
            ));
        }
        Ok(update)
    }

    /// The record to create when there is none to update: `upsert`, or `doc` with
    /// `doc_as_upsert`; `None`: the update fails with `document_missing_exception`.
    pub fn created(&self) -> Option<&Map<String, Value>> {
        self.upsert
            .as_ref()
            .or(self.doc.as_ref().filter(|_| self.doc_as_upsert))
    }
}

/// Merges `doc` into `source` as Elasticsearch merges a partial update: objects field by field,
/// recursively; any other value (arrays too) replaces what was there. Whether `source` changed.
pub fn merge(source: &mut Map<String, Value>, doc: &Map<String, Value>) -> bool {
    let mut changed = false;
    for (key, value) in doc {
        match (source.get_mut(key), value) {
            (Some(Value::Object(inner)), Value::Object(partial)) => {
                changed |= merge(inner, partial);
            }
            (Some(existing), value) if existing == value => {}
            _ => {
                source.insert(key.clone(), value.clone());
                changed = true;
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parsed(value: Value) -> Result<Update, Refusal> {
        Update::parse(value.to_string().as_bytes())
    }

    #[test]
    fn partial_documents_merge_as_elasticsearch_merges_them() {
        let mut source = json!({"a": 1, "o": {"x": 1, "y": {"z": 1}}, "list": [1, 2]})
            .as_object()
            .unwrap()
            .clone();
        let doc = json!({"b": 2, "o": {"y": {"w": 2}}, "list": [3]});
        assert!(merge(&mut source, doc.as_object().unwrap()));
        assert_eq!(
            Value::Object(source.clone()),
            json!({"a": 1, "b": 2, "o": {"x": 1, "y": {"z": 1, "w": 2}}, "list": [3]})
        );
        // The same partial again changes nothing.
        assert!(!merge(&mut source, doc.as_object().unwrap()));
        // A scalar replaces an object, and an object a scalar.
        assert!(merge(
            &mut source,
            json!({"o": 5, "a": {"k": 1}}).as_object().unwrap()
        ));
        assert_eq!(source["o"], json!(5));
        assert_eq!(source["a"], json!({"k": 1}));
    }

    #[test]
    fn record_lines_read_with_their_options() {
        let update =
            parsed(json!({"doc": {"a": 1}, "doc_as_upsert": true, "_source": true})).unwrap();
        assert_eq!(update.created(), update.doc.as_ref());
        assert_eq!(update.source, Some(json!(true)));
        assert!(update.detect_noop);
        let update =
            parsed(json!({"doc": {"a": 1}, "upsert": {"a": 0}, "detect_noop": false})).unwrap();
        assert_eq!(update.created(), Some(json!({"a": 0}).as_object().unwrap()));
        assert!(!update.detect_noop);
        assert_eq!(parsed(json!({"doc": {"a": 1}})).unwrap().created(), None);
    }

    #[test]
    fn what_cannot_be_served_fails_the_item_and_says_why() {
        for (body, kind, needle) in [
            (
                json!({"script": {"source": "ctx._source.a++"}}),
                "illegal_argument_exception",
                "scripts are not supported",
            ),
            (
                json!({}),
                "action_request_validation_exception",
                "script or doc is missing",
            ),
            (
                json!({"doc": 3}),
                "mapper_parsing_exception",
                "[doc] must be an object",
            ),
            (
                json!({"doc": {}, "colour": 1}),
                "mapper_parsing_exception",
                "unknown field [colour]",
            ),
        ] {
            let refusal = parsed(body).unwrap_err();
            assert_eq!(refusal.kind, kind);
            assert!(refusal.reason.contains(needle), "{}", refusal.reason);
        }
        assert_eq!(Update::parse(b"not json").unwrap_err().status, 400);
    }
}
