//! The NDJSON bulk format: an action line (`{"index": {...}}`, `create`, `delete`, `update`),
//! then, for all but a delete, the record on the next line; every line ends with a newline.
//!
//! As in Elasticsearch, what cannot be read as a sequence of operations refuses the whole request
//! (a 400 that names the line): a line that is not a JSON object with one action, an unknown
//! action parameter, a missing last newline, a JSON array. A record line is not read here: a
//! malformed one fails its own item when the operation is applied.

use bytes::Bytes;
use serde_json::Value;

use super::{MAX_ID_BYTES, Refusal};
use crate::error::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create or replace.
    Index,
    /// Create only if absent.
    Create,
    Delete,
    /// Merge a partial record into a stored one (see [`super::update`]).
    Update,
}

impl Action {
    /// The key of the action's item in the response.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Index => "index",
            Action::Create => "create",
            Action::Delete => "delete",
            Action::Update => "update",
        }
    }

    fn has_record(self) -> bool {
        !matches!(self, Action::Delete)
    }
}

/// One operation of a bulk request.
#[derive(Clone, Debug)]
pub struct Operation {
    pub action: Action,
    /// `_index` of the action line; the path's dataset otherwise.
    pub index: Option<String>,
    /// `_id` of the action line, as text.
    pub id: Option<String>,
    /// The record line (index, create, update).
    pub record: Option<Bytes>,
    /// Why the operation fails whatever its record (an empty `_id`, an unsupported parameter).
    pub refusal: Option<Refusal>,
    /// The action line's `require_alias`: the index must be an alias (never auto-created).
    /// `None`: the request's parameter decides.
    pub require_alias: Option<bool>,
    /// An update's `_source` (on its action line, or the request's): what of the updated
    /// record its item shows.
    pub source: Option<Value>,
}

/// Action parameters read and not acted on: one shard, no routing, no retries needed.
const IGNORED_PARAMETERS: &[&str] = &[
    "routing",
    "retry_on_conflict",
    "dynamic_templates",
    "require_data_stream",
    "list_executed_pipelines",
    "_type",
];

/// Splits a bulk body into operations.
pub fn parse(body: &Bytes) -> Result<Vec<Operation>, Error> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::BadRequest(
            "the bulk request has no operations (request body is required)".to_owned(),
        ));
    }
    if body.last() != Some(&b'\n') {
        return Err(Error::BadRequest(
            "The bulk request must be terminated by a newline [\\n]".to_owned(),
        ));
    }
    let mut lines = split_lines(body).enumerate().map(|(i, line)| (i + 1, line));
    let mut operations = Vec::new();
    while let Some((number, line)) = lines.next() {
        let text = trim(&line[..]);
        if text.is_empty() {
            continue;
        }
        let mut operation = action_line(number, text)?;
        if operation.action.has_record() {
            match lines.next() {
                Some((_, record)) => operation.record = Some(record),
                None => {
                    return Err(Error::BadRequest(format!(
                        "the {} action on line [{number}] has no record line after it",
                        operation.action.as_str()
                    )));
                }
            }
        }
        operations.push(operation);
    }
    Ok(operations)
}

/// The lines of `body`, each without its newline (and carriage return).
fn split_lines(body: &Bytes) -> impl Iterator<Item = Bytes> + '_ {
    let mut start = 0;
    let end = body.len();
    std::iter::from_fn(move || {
        if start >= end {
            return None;
        }
        let stop = body[start..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(end, |at| start + at);
        let mut line_end = stop;
        if line_end > start && body[line_end - 1] == b'\r' {
            line_end -= 1;
        }
        let line = body.slice(start..line_end);
        start = stop + 1;
        Some(line)
    })
}

fn trim(line: &[u8]) -> &[u8] {
    let start = line.iter().position(|b| !b.is_ascii_whitespace());
    let end = line.iter().rposition(|b| !b.is_ascii_whitespace());
    match (start, end) {
        (Some(start), Some(end)) => &line[start..=end],
        _ => &[],
    }
}

/// The JSON token Elasticsearch's parser would name for a value.
fn token(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "START_OBJECT",
        Value::Array(_) => "START_ARRAY",
        Value::String(_) => "VALUE_STRING",
        Value::Number(_) => "VALUE_NUMBER",
        Value::Bool(_) => "VALUE_BOOLEAN",
        Value::Null => "VALUE_NULL",
    }
}

fn action_line(number: usize, text: &[u8]) -> Result<Operation, Error> {
    let malformed = |what: String| {
        Error::BadRequest(format!("Malformed action/metadata line [{number}], {what}"))
    };
    if text.first() == Some(&b'[') {
        return Err(malformed(
            "expected START_OBJECT or END_OBJECT but found [START_ARRAY]: the body must be NDJSON, one JSON object a line, not a JSON array".to_owned(),
        ));
    }
    let value: Value = serde_json::from_slice(text)
        .map_err(|error| malformed(format!("expected a JSON object: {error}")))?;
    let Value::Object(object) = value else {
        return Err(malformed(format!(
            "expected START_OBJECT but found [{}]",
            token(&value)
        )));
    };
    let mut entries = object.into_iter();
    let Some((key, parameters)) = entries.next() else {
        return Err(malformed(
            "expected FIELD_NAME but found [END_OBJECT]".to_owned(),
        ));
    };
    if entries.next().is_some() {
        return Err(malformed(
            "expected END_OBJECT but found [FIELD_NAME]".to_owned(),
        ));
    }
    let mut action = match key.as_str() {
        "index" => Action::Index,
        "create" => Action::Create,
        "delete" => Action::Delete,
        "update" => Action::Update,
        other => {
            return Err(malformed(format!(
                "expected field [create], [delete], [index] or [update] but found [{other}]"
            )));
        }
    };
    let Value::Object(parameters) = parameters else {
        return Err(malformed(format!(
            "expected START_OBJECT but found [{}]",
            token(&parameters)
        )));
    };
    let mut operation = Operation {
        action,
        index: None,
        id: None,
        record: None,
        refusal: None,
        require_alias: None,
        source: None,
    };
    let refuse = |refusal: Refusal, operation: &mut Operation| {
        operation.refusal.get_or_insert(refusal);
    };
    for (name, value) in parameters {
        let text = match &value {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        match name.as_str() {
            "_index" => {
                operation.index = Some(text.ok_or_else(|| {
                    malformed(format!(
                        "[_index] must be a string, not [{}]",
                        token(&value)
                    ))
                })?);
            }
            "_id" => match text {
                Some(id) if id.is_empty() => refuse(
                    Refusal::illegal("if _id is specified it must not be empty"),
                    &mut operation,
                ),
                Some(id) if id.len() > MAX_ID_BYTES => {
                    let length = id.len();
                    refuse(
                        Refusal::illegal(format!(
                            "id [{id}] is too long, must be no longer than {MAX_ID_BYTES} bytes but was: {length}"
                        )),
                        &mut operation,
                    );
                }
                Some(id) => operation.id = Some(id),
                None if value.is_null() => {}
                None => {
                    return Err(malformed(format!(
                        "[_id] must be a string, not [{}]",
                        token(&value)
                    )));
                }
            },
            "op_type" => match (action, text.as_deref()) {
                (Action::Index | Action::Create, Some("create")) => action = Action::Create,
                (Action::Index, Some("index")) => {}
                (_, op_type) => {
                    return Err(malformed(format!(
                        "[op_type] {op_type:?} is not valid for a {} action",
                        action.as_str()
                    )));
                }
            },
            // What an updated record's item shows; nothing for the other actions.
            "_source" => {
                if action == Action::Update {
                    operation.source = Some(value);
                }
            }
            "require_alias" => {
                operation.require_alias = Some(match &value {
                    Value::String(text) => text != "false",
                    other => other.as_bool() == Some(true),
                })
            }
            "pipeline" => refuse(
                Refusal::illegal(format!(
                    "pipeline with id [{}] does not exist",
                    text.unwrap_or_default()
                )),
                &mut operation,
            ),
            "version" | "version_type" | "if_seq_no" | "if_primary_term" => refuse(
                Refusal::illegal(format!(
                    "[{name}] is not supported: records carry no versions; send create to add a record only if it is absent"
                )),
                &mut operation,
            ),
            name if IGNORED_PARAMETERS.contains(&name) => {}
            other => {
                return Err(Error::BadRequest(format!(
                    "Action/metadata line [{number}] contains an unknown parameter [{other}]"
                )));
            }
        }
    }
    operation.action = action;
    Ok(operation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(body: &str) -> Result<Vec<Operation>, String> {
        parse(&Bytes::from(body.to_owned())).map_err(|e| e.to_string())
    }

    #[test]
    fn operations_in_order_with_their_records() {
        let ops = parsed(concat!(
            "{\"index\": {\"_index\": \"logs\", \"_id\": \"1\"}}\n",
            "{\"a\": 1}\n",
            "\n",
            "{\"delete\": {\"_id\": 7}}\r\n",
            "{\"create\": {}}\n",
            "this is not json\n",
            "{\"index\": {\"op_type\": \"create\"}}\n",
            "{}\n",
        ))
        .unwrap();
        let actions: Vec<Action> = ops.iter().map(|o| o.action).collect();
        assert_eq!(
            actions,
            [
                Action::Index,
                Action::Delete,
                Action::Create,
                Action::Create
            ]
        );
        assert_eq!(ops[0].index.as_deref(), Some("logs"));
        assert_eq!(ops[0].id.as_deref(), Some("1"));
        assert_eq!(ops[0].record.as_deref(), Some(&b"{\"a\": 1}"[..]));
        assert_eq!(ops[1].id.as_deref(), Some("7"));
        assert!(ops[1].record.is_none());
        // A malformed record is read as it is; it fails its own item later.
        assert_eq!(ops[2].record.as_deref(), Some(&b"this is not json"[..]));
        assert!(ops.iter().all(|o| o.refusal.is_none()));
    }

    #[test]
    fn what_is_not_a_sequence_of_operations_refuses_the_request() {
        for (body, needle) in [
            ("[{\"index\": {}}, {\"a\": 1}]\n", "not a JSON array"),
            ("{\"index\": {}}\n{\"a\": 1}", "terminated by a newline"),
            (
                "{\"index\": {\"_id\": \"1\"}}\n{\"f\": 1}\n{}\n",
                "line [3], expected FIELD_NAME but found [END_OBJECT]",
            ),
            (
                "{\"upsert\": {}}\n{}\n",
                "expected field [create], [delete], [index] or [update] but found [upsert]",
            ),
            ("{\"index\": {}, \"delete\": {}}\n", "expected END_OBJECT"),
            (
                "{\"index\": 5}\n{}\n",
                "expected START_OBJECT but found [VALUE_NUMBER]",
            ),
            (
                "{\"index\": {\"colour\": 1}}\n{}\n",
                "unknown parameter [colour]",
            ),
            ("{\n\"index\": {}\n}\n", "line [1]"),
            ("{\"index\": {}}\n", "no record line"),
            ("  \n", "no operations"),
        ] {
            let error = parsed(body).unwrap_err();
            assert!(error.contains(needle), "{body:?}: {error}");
        }
    }

    #[test]
    fn some_actions_fail_only_their_item() {
        let ops = parsed(concat!(
            "{\"index\": {\"_id\": \"\"}}\n{}\n",
            "{\"index\": {\"version\": 3}}\n{}\n",
            "{\"index\": {\"pipeline\": \"p\"}}\n{}\n",
        ))
        .unwrap();
        let reasons: Vec<String> = ops
            .iter()
            .map(|o| o.refusal.clone().unwrap().reason)
            .collect();
        assert_eq!(reasons[0], "if _id is specified it must not be empty");
        assert!(reasons[1].contains("[version] is not supported"));
        assert!(reasons[2].contains("pipeline with id [p] does not exist"));
        let long = format!(
            "{{\"index\": {{\"_id\": \"{}\"}}}}\n{{}}\n",
            "x".repeat(513)
        );
        assert!(
            parsed(&long).unwrap()[0]
                .refusal
                .as_ref()
                .unwrap()
                .reason
                .contains("too long")
        );
    }
}
