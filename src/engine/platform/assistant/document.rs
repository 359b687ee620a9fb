//! The bodies of the conversation endpoints, checked field by field: a thread to create, a
//! change to a thread, a message. Nothing here touches the log.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The workflow a thread gets when its creator names none.
pub const DEFAULT_WORKFLOW: &str = "alpha_v1";

/// Thread statuses (spec 001 section 3).
pub const STATUSES: &[&str] = &["ongoing", "completed", "paused", "archived"];

/// The statuses a thread may be created with.
const CREATE_STATUSES: &[&str] = &["ongoing", "completed", "paused"];

/// The longest thread name, index name and workflow name, in characters.
const MAX_NAME_CHARS: usize = 255;

/// The longest question, in characters.
pub const MAX_QUERY_CHARS: usize = 8_192;

/// A thread to create (POST /assistant/threads).
#[derive(Clone, Debug, PartialEq)]
pub struct NewThread {
    pub name: String,
    pub index_name: String,
    pub status: String,
    pub viz_context: Value,
    pub workflow_name: String,
}

/// A change to a thread (PUT or PATCH /assistant/threads/{id}): the fields given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadChange {
    pub name: Option<String>,
    pub status: Option<String>,
    pub viz_context: Option<Value>,
}

/// A message to add: its thread (when the body names one), role and content.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMessage {
    pub thread_id: Option<String>,
    pub role: String,
    /// The content as given, `user_query` checked.
    pub content: Map<String, Value>,
}

impl NewMessage {
    /// The question it asks.
    pub fn user_query(&self) -> &str {
        self.content
            .get("user_query")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

fn object<'a>(doc: &'a Value, what: &str) -> Result<&'a Map<String, Value>> {
    doc.as_object()
        .ok_or_else(|| Error::BadRequest(format!("the body must be a JSON object ({what})")))
}

fn refuse_unknown(map: &Map<String, Value>, known: &[&str], what: &str) -> Result<()> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(Error::BadRequest(format!(
            "unknown field {key:?} in {what}; known: {}",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

fn text(map: &Map<String, Value>, field: &str, max: usize) -> Result<Option<String>> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err(Error::BadRequest(format!("{field} must not be empty")))
        }
        Some(Value::String(s)) if s.chars().count() > max => Err(Error::BadRequest(format!(
            "{field} is longer than {max} characters"
        ))),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(Error::BadRequest(format!(
            "{field} must be a string, not {other}"
        ))),
    }
}

fn required(map: &Map<String, Value>, field: &str, max: usize) -> Result<String> {
    text(map, field, max)?.ok_or_else(|| Error::BadRequest(format!("{field} is required")))
}

fn status(value: Option<String>, allowed: &[&str]) -> Result<Option<String>> {
    match value {
        Some(s) if !allowed.contains(&s.as_str()) => Err(Error::BadRequest(format!(
            "status {s:?} is not one of {}",
            allowed.join(", ")
        ))),
        other => Ok(other),
    }
}

fn viz_context(map: &Map<String, Value>) -> Result<Option<Value>> {
    match map.get("viz_context") {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v.clone())),
        Some(other) => Err(Error::BadRequest(format!(
            "viz_context must be an object, not {other}"
        ))),
    }
}

/// The body of POST /assistant/threads.
pub fn new_thread(doc: &Value) -> Result<NewThread> {
    let map = object(doc, "a thread")?;
    refuse_unknown(
        map,
        &[
            "name",
            "index_name",
            "status",
            "viz_context",
            "workflow_name",
        ],
        "a thread",
    )?;
    Ok(NewThread {
        name: required(map, "name", MAX_NAME_CHARS)?,
        index_name: required(map, "index_name", MAX_NAME_CHARS)?,
        status: status(text(map, "status", MAX_NAME_CHARS)?, CREATE_STATUSES)?
            .unwrap_or_else(|| "ongoing".to_owned()),
        viz_context: viz_context(map)?.unwrap_or_else(|| Value::Object(Map::new())),
        workflow_name: text(map, "workflow_name", MAX_NAME_CHARS)?
            .unwrap_or_else(|| DEFAULT_WORKFLOW.to_owned()),
    })
}

/// The body of PUT or PATCH /assistant/threads/{id}.
pub fn thread_change(doc: &Value) -> Result<ThreadChange> {
    let map = object(doc, "a change to a thread")?;
    for fixed in [
        "id",
        "index_name",
        "workflow_name",
        "created_at",
        "updated_at",
    ] {
        if map.contains_key(fixed) {
            return Err(Error::BadRequest(format!(
                "{fixed} of a thread cannot be changed; a change names any of name, status, \
                 viz_context"
            )));
        }
    }
    refuse_unknown(
        map,
        &["name", "status", "viz_context"],
        "a change to a thread",
    )?;
    let change = ThreadChange {
        name: text(map, "name", MAX_NAME_CHARS)?,
        status: status(text(map, "status", MAX_NAME_CHARS)?, STATUSES)?,
        viz_context: viz_context(map)?,
    };
    if change == ThreadChange::default() {
        return Err(Error::BadRequest(
            "a change names at least one of name, status, viz_context".to_owned(),
        ));
    }
    Ok(change)
}

/// Whether a thread in status `from` may be put in status `to`: ongoing and paused move
/// between each other and to completed or archived; a completed thread may only be archived;
/// an archived one stays so.
pub fn transition(from: &str, to: &str) -> Result<()> {
    let allowed = from == to
        || match from {
            "ongoing" | "paused" => true,
            "completed" => to == "archived",
            _ => false,
        };
    match allowed {
        true => Ok(()),
        false => Err(Error::Conflict(format!(
            "a thread that is {from} cannot become {to}"
        ))),
    }
}

/// The body of POST /assistant/message (`thread_id` required) or POST
/// /assistant/threads/{id}/messages (`path_thread`; a `thread_id` in the body must name it).
pub fn new_message(doc: &Value, path_thread: Option<&str>) -> Result<NewMessage> {
    let map = object(doc, "a message")?;
    refuse_unknown(map, &["thread_id", "content", "role"], "a message")?;
    let thread_id = text(map, "thread_id", MAX_NAME_CHARS)?;
    let thread_id = match (path_thread, thread_id) {
        (None, None) => return Err(Error::BadRequest("thread_id is required".to_owned())),
        (Some(path), Some(body)) if path != body => {
            return Err(Error::BadRequest(format!(
                "thread_id {body:?} differs from the thread of the path, {path:?}"
            )));
        }
        (path, body) => body.or(path.map(str::to_owned)),
    };
    let role = required(map, "role", MAX_NAME_CHARS)?;
    if role != "user" && role != "assistant" {
        return Err(Error::BadRequest(format!(
            "role {role:?} is not one of user, assistant"
        )));
    }
    let content = match map.get("content") {
        Some(Value::Object(content)) => content.clone(),
        None | Some(Value::Null) => {
            return Err(Error::BadRequest("content is required".to_owned()));
        }
        Some(other) => {
            return Err(Error::BadRequest(format!(
                "content must be an object, not {other}"
            )));
        }
    };
    refuse_unknown(
        &content,
        &["user_query", "context", "filters", "parameters"],
        "a message's content",
    )?;
    required(&content, "user_query", MAX_QUERY_CHARS).map_err(|e| match e {
        Error::BadRequest(m) => Error::BadRequest(format!("content.{m}")),
        other => other,
    })?;
    text(&content, "context", MAX_QUERY_CHARS)?;
    for field in ["filters", "parameters"] {
        if let Some(value) = content.get(field)
            && !value.is_object()
            && !value.is_null()
        {
            return Err(Error::BadRequest(format!(
                "content.{field} must be an object, not {value}"
            )));
        }
    }
    Ok(NewMessage {
        thread_id,
        role,
        content,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refused(result: Result<impl std::fmt::Debug>) -> String {
        match result {
            Err(Error::BadRequest(message)) => message,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn a_new_thread_has_the_spec_defaults() {
        let thread = new_thread(&json!({"name": "n", "index_name": "logs"})).expect("valid");
        assert_eq!(thread.status, "ongoing");
        assert_eq!(thread.workflow_name, "alpha_v1");
        assert_eq!(thread.viz_context, json!({}));
        let thread = new_thread(&json!({
            "name": "n", "index_name": "logs", "status": "paused",
            "viz_context": {"chart": "bar"}, "workflow_name": "beta",
        }))
        .expect("valid");
        assert_eq!(
            (thread.status.as_str(), thread.workflow_name.as_str()),
            ("paused", "beta")
        );
    }

    #[test]
    fn a_new_thread_is_checked_field_by_field() {
        assert!(refused(new_thread(&json!({"index_name": "logs"}))).contains("name is required"));
        assert!(refused(new_thread(&json!({"name": "n"}))).contains("index_name is required"));
        assert!(
            refused(new_thread(
                &json!({"name": "n", "index_name": "l", "status": "archived"})
            ))
            .contains("not one of ongoing, completed, paused")
        );
        assert!(
            refused(new_thread(
                &json!({"name": "n", "index_name": "l", "viz_context": 3})
            ))
            .contains("viz_context must be an object")
        );
        assert!(
            refused(new_thread(
                &json!({"name": "n", "index_name": "l", "nmae": 1})
            ))
            .contains("unknown field \"nmae\"")
        );
        assert!(refused(new_thread(&json!([]))).contains("JSON object"));
        assert!(refused(new_thread(&json!({"name": " ", "index_name": "l"}))).contains("empty"));
    }

    #[test]
    fn a_change_names_what_may_change() {
        let change = thread_change(&json!({"status": "completed"})).expect("valid");
        assert_eq!(change.status.as_deref(), Some("completed"));
        assert!(refused(thread_change(&json!({}))).contains("at least one"));
        assert!(
            refused(thread_change(&json!({"status": "done"})))
                .contains("not one of ongoing, completed, paused, archived")
        );
        assert!(refused(thread_change(&json!({"index_name": "x"}))).contains("cannot be changed"));
    }

    #[test]
    fn statuses_move_as_the_states_allow() {
        for (from, to) in [
            ("ongoing", "completed"),
            ("ongoing", "paused"),
            ("paused", "ongoing"),
            ("paused", "archived"),
            ("completed", "archived"),
            ("archived", "archived"),
        ] {
            assert!(transition(from, to).is_ok(), "{from} -> {to}");
        }
        for (from, to) in [
            ("completed", "ongoing"),
            ("completed", "paused"),
            ("archived", "ongoing"),
        ] {
            assert!(
                matches!(transition(from, to), Err(Error::Conflict(_))),
                "{from} -> {to}"
            );
        }
    }

    #[test]
    fn a_message_needs_a_thread_a_role_and_a_question() {
        let message = new_message(
            &json!({"thread_id": "t", "role": "user", "content": {"user_query": "how many?"}}),
            None,
        )
        .expect("valid");
        assert_eq!(message.thread_id.as_deref(), Some("t"));
        assert_eq!(message.user_query(), "how many?");
        let message = new_message(
            &json!({"role": "user", "content": {"user_query": "q", "parameters": {"k": 1}}}),
            Some("t"),
        )
        .expect("valid");
        assert_eq!(message.thread_id.as_deref(), Some("t"));

        let ask = |doc: Value| refused(new_message(&doc, None));
        assert!(
            ask(json!({"role": "user", "content": {"user_query": "q"}}))
                .contains("thread_id is required")
        );
        assert!(
            ask(json!({"thread_id": "t", "role": "user", "content": {}}))
                .contains("content.user_query is required")
        );
        assert!(ask(json!({"thread_id": "t", "role": "user"})).contains("content is required"));
        assert!(
            ask(json!({"thread_id": "t", "role": "bot", "content": {"user_query": "q"}}))
                .contains("role \"bot\"")
        );
        assert!(
            ask(json!({"thread_id": "t", "content": {"user_query": "q"}}))
                .contains("role is required")
        );
        assert!(
            ask(json!({"thread_id": "t", "role": "user",
                "content": {"user_query": "q", "filters": "x"}}))
            .contains("content.filters must be an object")
        );
        assert!(
            refused(new_message(
                &json!({"thread_id": "u", "role": "user", "content": {"user_query": "q"}}),
                Some("t"),
            ))
            .contains("differs")
        );
    }
}
