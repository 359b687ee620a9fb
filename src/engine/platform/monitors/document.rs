//! Channel and monitor documents as clients write them (spec 001 section 2, API.md "Monitors
//! and channels"): read, checked field by field, and written back normalized.
//!
//! A document that cannot be read is refused as a whole with the path of the first field at
//! fault (`[triggers[0].actions[1].destination_id] no channel "ops"`); nothing is half-saved.
//! What is stored is the normalized document: defaults filled in, ids generated, schedules and
//! conditions in their canonical form, so that a run never has to guess.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::{
    condition::Condition,
    schedule::Schedule,
    template::{self, TemplateError},
};
use crate::error::{Error, Result};

/// The longest id of a channel, monitor, trigger action or template.
const MAX_ID: usize = 256;

/// A field at fault and why: a 400 naming it.
pub(super) fn invalid(field: &str, reason: impl std::fmt::Display) -> Error {
    Error::BadRequest(format!("[{field}] {reason}"))
}

/// An id a client gave, or a new UUID.
pub(super) fn id_or_new(given: Option<&Value>, field: &str) -> Result<String> {
    match given {
        None | Some(Value::Null) => Ok(uuid::Uuid::new_v4().to_string()),
        Some(Value::String(id)) => {
            check_id(field, id)?;
            Ok(id.clone())
        }
        Some(_) => Err(invalid(field, "must be a string")),
    }
}

/// Ids are names in paths and permission patterns: printable, no `/`, `*` or whitespace.
pub(super) fn check_id(field: &str, id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_ID {
        return Err(invalid(field, format!("must be 1 to {MAX_ID} characters")));
    }
    if id
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || matches!(c, '/' | '*' | '?' | '#'))
    {
        return Err(invalid(
            field,
            format!("{id:?} may not hold whitespace, /, *, ? or #"),
        ));
    }
    Ok(())
}

fn object<'a>(value: &'a Value, field: &str) -> Result<&'a Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| invalid(field, "must be an object"))
}

fn string<'a>(fields: &'a Map<String, Value>, key: &str, at: &str) -> Result<&'a str> {
    match fields.get(key) {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text),
        Some(Value::String(_)) => Err(invalid(&join(at, key), "must not be empty")),
        Some(_) => Err(invalid(&join(at, key), "must be a string")),
        None => Err(invalid(&join(at, key), "is required")),
    }
}

fn optional_string(fields: &Map<String, Value>, key: &str, at: &str) -> Result<Option<String>> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(invalid(&join(at, key), "must be a string")),
    }
}

fn boolean(fields: &Map<String, Value>, key: &str, at: &str, default: bool) -> Result<bool> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(&join(at, key), "must be true or false")),
    }
}

fn no_other_keys(fields: &Map<String, Value>, known: &[&str], at: &str) -> Result<()> {
    match fields.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(invalid(
            &join(at, key),
            format!("is not a field here (known: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

fn join(at: &str, key: &str) -> String {
    match at {
        "" => key.to_owned(),
        _ => format!("{at}.{key}"),
    }
}

/// The kinds of channel.
pub const CHANNEL_TYPES: &[&str] = &["webhook", "slack", "email"];

/// What a channel document must satisfy beyond its own fields.
pub(in crate::engine) struct ChannelContext<'a> {
    /// The SMTP accounts of the configuration, by id.
    pub smtp_accounts: &'a BTreeSet<String>,
}

/// Reads a channel's `config`; the normalized config.
pub(in crate::engine) fn channel_config(
    config: &Value,
    context: &ChannelContext<'_>,
) -> Result<Value> {
    let at = "config";
    let fields = object(config, at)?;
    no_other_keys(
        fields,
        &[
            "name",
            "description",
            "channel_type",
            "config_type",
            "is_enabled",
            "webhook",
            "slack",
            "email",
        ],
        at,
    )?;
    let name = string(fields, "name", at)?;
    let description = optional_string(fields, "description", at)?.unwrap_or_default();
    let kind = match (fields.get("channel_type"), fields.get("config_type")) {
        (Some(kind), _) | (None, Some(kind)) => kind,
        (None, None) => return Err(invalid("config.channel_type", "is required")),
    };
    let kind = match kind.as_str() {
        Some(kind) if CHANNEL_TYPES.contains(&kind) => kind,
        _ => {
            return Err(invalid(
                "config.channel_type",
                format!("{kind} is not a channel type (webhook, slack, email)"),
            ));
        }
    };
    let is_enabled = boolean(fields, "is_enabled", at, true)?;
    let block_at = format!("config.{kind}");
    let block = fields
        .get(kind)
        .ok_or_else(|| invalid(&block_at, format!("is required for a {kind} channel")))?;
    let block = object(block, &block_at)?;
    let settings = match kind {
        "webhook" => {
            no_other_keys(block, &["url", "headers"], &block_at)?;
            let url = http_url(block, &block_at)?;
            let headers = match block.get("headers") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(headers)) => {
                    for (name, value) in headers {
                        let field = format!("{block_at}.headers.{name}");
                        if !value.is_string() {
                            return Err(invalid(&field, "must be a string"));
                        }
                        if axum::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                            return Err(invalid(&field, "is not a valid header name"));
                        }
                    }
                    headers.clone()
                }
                Some(_) => return Err(invalid(&format!("{block_at}.headers"), "must be a map")),
            };
            json!({"url": url, "headers": headers})
        }
        "slack" => {
            no_other_keys(block, &["url"], &block_at)?;
            json!({"url": http_url(block, &block_at)?})
        }
        _ => {
            no_other_keys(block, &["smtp_account_id", "recipients"], &block_at)?;
            let account = string(block, "smtp_account_id", &block_at)?;
            if !context.smtp_accounts.contains(account) {
                return Err(invalid(
                    &format!("{block_at}.smtp_account_id"),
                    format!(
                        "no SMTP account {account:?} in the configuration ([smtp_accounts.<id>])"
                    ),
                ));
            }
            let recipients_at = format!("{block_at}.recipients");
            let recipients = block
                .get("recipients")
                .and_then(Value::as_array)
                .filter(|list| !list.is_empty())
                .ok_or_else(|| invalid(&recipients_at, "must be a list of addresses"))?;
            for (i, recipient) in recipients.iter().enumerate() {
                let ok = recipient
                    .as_str()
                    .is_some_and(|r| r.parse::<lettre::Address>().is_ok());
                if !ok {
                    return Err(invalid(
                        &format!("{recipients_at}[{i}]"),
                        format!("{recipient} is not an email address"),
                    ));
                }
            }
            json!({"smtp_account_id": account, "recipients": recipients})
        }
    };
    Ok(json!({
        "name": name,
        "description": description,
        "channel_type": kind,
        "is_enabled": is_enabled,
        kind: settings,
    }))
}

fn http_url(block: &Map<String, Value>, at: &str) -> Result<String> {
    let url = string(block, "url", at)?;
    match reqwest::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => {
            Ok(url.to_owned())
        }
        _ => Err(invalid(
            &join(at, "url"),
            format!("{url:?} is not an http or https URL"),
        )),
    }
}

/// The query kinds a monitor may run.
pub const QUERY_TYPES: &[&str] = &["querydsl", "sql", "promql", "assistant"];

/// What a monitor document must satisfy beyond its own fields: the channels and templates it
/// may name.
pub(in crate::engine) struct MonitorContext<'a> {
    pub channels: &'a BTreeSet<String>,
    /// Templates by name, usable as partials.
    pub partials: &'a BTreeMap<String, String>,
}

/// Reads a monitor document; the normalized monitor (without `_id`).
pub(in crate::engine) fn monitor(doc: &Value, context: &MonitorContext<'_>) -> Result<Value> {
    let fields = object(doc, "monitor")?;
    no_other_keys(
        fields,
        &[
            "_id",
            "monitor_id",
            "_version",
            "name",
            "type",
            "monitor_type",
            "enabled",
            "schedule",
            "query",
            "triggers",
            "last_update_time",
            "enabled_time",
        ],
        "",
    )?;
    let name = string(fields, "name", "")?;
    match fields.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind == "monitor" => {}
        Some(other) => return Err(invalid("type", format!("{other} is not monitor"))),
    }
    let monitor_type = match fields.get("monitor_type") {
        None | Some(Value::Null) => "native",
        Some(Value::String(kind)) if kind == "native" || kind == "query_level_monitor" => {
            kind.as_str()
        }
        Some(other) => {
            return Err(invalid(
                "monitor_type",
                format!("{other} is not served (native, query_level_monitor)"),
            ));
        }
    };
    let enabled = boolean(fields, "enabled", "", true)?;
    let schedule = fields
        .get("schedule")
        .ok_or_else(|| invalid("schedule", "is required"))?;
    let schedule = Schedule::parse(schedule)
        .map_err(|e| invalid(&e.field, e.reason))?
        .to_json();
    let query = query(
        fields
            .get("query")
            .ok_or_else(|| invalid("query", "is required"))?,
    )?;
    let triggers = match fields.get("triggers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list.clone(),
        Some(_) => return Err(invalid("triggers", "must be a list")),
    };
    let mut names = BTreeSet::new();
    let mut action_ids = BTreeSet::new();
    let mut normalized = Vec::with_capacity(triggers.len());
    for (i, trigger_doc) in triggers.iter().enumerate() {
        let at = format!("triggers[{i}]");
        let trigger = trigger(trigger_doc, &at, context, &mut action_ids)?;
        let name = trigger["name"].as_str().unwrap_or_default().to_owned();
        if !names.insert(name.clone()) {
            return Err(invalid(
                &format!("{at}.name"),
                format!("another trigger is named {name:?}"),
            ));
        }
        normalized.push(trigger);
    }
    Ok(json!({
        "name": name,
        "type": "monitor",
        "monitor_type": monitor_type,
        "enabled": enabled,
        "schedule": schedule,
        "query": query,
        "triggers": normalized,
    }))
}

fn query(doc: &Value) -> Result<Value> {
    let at = "query";
    let fields = object(doc, at)?;
    let kind = string(fields, "type", at)?;
    match kind {
        "querydsl" => {
            no_other_keys(fields, &["type", "datasets", "body"], at)?;
            let datasets = match fields.get("datasets") {
                Some(Value::Array(list))
                    if !list.is_empty()
                        && list
                            .iter()
                            .all(|d| d.as_str().is_some_and(|d| !d.is_empty())) =>
                {
                    list.clone()
                }
                _ => {
                    return Err(invalid(
                        "query.datasets",
                        "must be a list of dataset names, aliases or patterns",
                    ));
                }
            };
            let body = match fields.get("body") {
                None | Some(Value::Null) => json!({"query": {"match_all": {}}}),
                Some(Value::Object(body)) => Value::Object(body.clone()),
                Some(_) => return Err(invalid("query.body", "must be a Query DSL object")),
            };
            crate::engine::query_dsl::check_search(&body)
                .map_err(|reason| invalid("query.body", reason))?;
            Ok(json!({"type": "querydsl", "datasets": datasets, "body": body}))
        }
        "sql" => {
            no_other_keys(fields, &["type", "statement"], at)?;
            let statement = string(fields, "statement", at)?;
            check_read_only(statement).map_err(|reason| invalid("query.statement", reason))?;
            Ok(json!({"type": "sql", "statement": statement}))
        }
        "promql" => {
            no_other_keys(
                fields,
                &["type", "index", "query", "start", "end", "step"],
                at,
            )?;
            let query = string(fields, "query", at)?;
            let index = optional_string(fields, "index", at)?;
            let number = |key: &str| match fields.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Number(n)) => n
                    .as_i64()
                    .map(Some)
                    .ok_or_else(|| invalid(&join(at, key), "must be an integer")),
                Some(_) => Err(invalid(&join(at, key), "must be an integer")),
            };
            let (start, end, step) = (number("start")?, number("end")?, number("step")?);
            if start.is_some() != end.is_some() {
                return Err(invalid(
                    "query.end",
                    "start and end go together (epoch milliseconds); neither: an instant query",
                ));
            }
            if let (Some(start), Some(end)) = (start, end)
                && end < start
            {
                return Err(invalid("query.end", "must not be before start"));
            }
            if step.is_some_and(|s| s <= 0) {
                return Err(invalid(
                    "query.step",
                    "must be a positive number of seconds",
                ));
            }
            if crate::promql::parser::parse(query).is_err() {
                return Err(invalid("query.query", format!("{query:?} is not PromQL")));
            }
            let mut out = json!({"type": "promql", "query": query});
            for (key, value) in [
                ("index", index.map(Value::from)),
                ("start", start.map(Value::from)),
                ("end", end.map(Value::from)),
                ("step", step.map(Value::from)),
            ] {
                if let Some(value) = value {
                    out[key] = value;
                }
            }
            Ok(out)
        }
        "assistant" => {
            // The plan is the server's: made from the question when the monitor is saved
            // (`assistant::plan_monitor`), so that every run runs the same query.
            no_other_keys(fields, &["type", "datasets", "body", "plan"], at)?;
            let dataset = match fields.get("datasets") {
                Some(Value::Array(list))
                    if list.len() == 1 && list[0].as_str().is_some_and(|d| !d.is_empty()) =>
                {
                    list[0].as_str().unwrap_or_default().to_owned()
                }
                _ => {
                    return Err(invalid(
                        "query.datasets",
                        "must name one dataset, the one the question is about",
                    ));
                }
            };
            let question = match fields.get("body").and_then(|b| b.get("query")) {
                Some(Value::String(q)) if !q.trim().is_empty() => q.clone(),
                _ => {
                    return Err(invalid(
                        "query.body.query",
                        "must be the question, in words",
                    ));
                }
            };
            let plan = fields.get("plan").ok_or_else(|| {
                invalid(
                    "query.plan",
                    "is made by the server when the monitor is saved",
                )
            })?;
            let parsed: crate::engine::assistant::planner::Plan =
                serde_json::from_value(plan.clone())
                    .map_err(|e| invalid("query.plan", format!("is not a plan: {e}")))?;
            if parsed.dataset != dataset {
                return Err(invalid(
                    "query.plan",
                    "plans another dataset than query.datasets names",
                ));
            }
            Ok(
                json!({"type": "assistant", "datasets": [dataset], "body": {"query": question}, "plan": plan}),
            )
        }
        other => Err(invalid(
            "query.type",
            format!("{other:?} is not a query type (querydsl, sql, promql, assistant)"),
        )),
    }
}

fn trigger(
    doc: &Value,
    at: &str,
    context: &MonitorContext<'_>,
    action_ids: &mut BTreeSet<String>,
) -> Result<Value> {
    let fields = object(doc, at)?;
    no_other_keys(
        fields,
        &["id", "name", "severity", "condition", "actions"],
        at,
    )?;
    let name = string(fields, "name", at)?;
    let id = id_or_new(fields.get("id"), &join(at, "id"))?;
    let severity = match fields.get("severity") {
        None | Some(Value::Null) => Value::from(1),
        Some(Value::Number(n)) if n.as_u64().is_some() => Value::Number(n.clone()),
        Some(Value::String(s)) if s.parse::<u64>().is_ok() => {
            Value::from(s.parse::<u64>().unwrap_or(1))
        }
        Some(_) => {
            return Err(invalid(
                &join(at, "severity"),
                "must be an integer (1 is the highest)",
            ));
        }
    };
    let condition_at = join(at, "condition");
    let condition = fields
        .get("condition")
        .ok_or_else(|| invalid(&condition_at, "is required"))?;
    let condition = Condition::parse(condition)
        .map_err(|e| invalid(&join(&condition_at, &e.field), e.reason))?
        .to_json();
    let actions = match fields.get("actions") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list.clone(),
        Some(_) => return Err(invalid(&join(at, "actions"), "must be a list")),
    };
    let mut normalized = Vec::with_capacity(actions.len());
    for (i, action_doc) in actions.iter().enumerate() {
        let action_at = format!("{at}.actions[{i}]");
        let action = action(action_doc, &action_at, context)?;
        let id = action["id"].as_str().unwrap_or_default().to_owned();
        if !action_ids.insert(id.clone()) {
            return Err(invalid(
                &format!("{action_at}.id"),
                format!("another action of the monitor has the id {id:?}"),
            ));
        }
        normalized.push(action);
    }
    Ok(json!({
        "id": id,
        "name": name,
        "severity": severity,
        "condition": condition,
        "actions": normalized,
    }))
}

fn action(doc: &Value, at: &str, context: &MonitorContext<'_>) -> Result<Value> {
    let fields = object(doc, at)?;
    no_other_keys(
        fields,
        &[
            "id",
            "name",
            "destination_id",
            "subject_template",
            "message_template",
            "throttle_enabled",
            "throttle",
        ],
        at,
    )?;
    let id = id_or_new(fields.get("id"), &join(at, "id"))?;
    let name = string(fields, "name", at)?;
    let destination = string(fields, "destination_id", at)?;
    if !context.channels.contains(destination) {
        return Err(invalid(
            &join(at, "destination_id"),
            format!("no channel {destination:?}"),
        ));
    }
    let subject = template_of(fields, "subject_template", at, context, false)?;
    let message = template_of(fields, "message_template", at, context, true)?;
    let throttle = match fields.get("throttle") {
        None | Some(Value::Null) => None,
        Some(throttle) => Some(throttle_of(throttle, &join(at, "throttle"))?),
    };
    let throttle_enabled = boolean(fields, "throttle_enabled", at, throttle.is_some())?;
    if throttle_enabled && throttle.is_none() {
        return Err(invalid(
            &join(at, "throttle"),
            "is required when throttle_enabled is true",
        ));
    }
    let mut out = json!({
        "id": id,
        "name": name,
        "destination_id": destination,
        "subject_template": subject,
        "message_template": message,
        "throttle_enabled": throttle_enabled,
    });
    if let Some(throttle) = throttle {
        out["throttle"] = throttle;
    }
    Ok(out)
}

fn template_of(
    fields: &Map<String, Value>,
    key: &str,
    at: &str,
    context: &MonitorContext<'_>,
    required: bool,
) -> Result<Value> {
    let field = join(at, key);
    let doc = match fields.get(key) {
        None | Some(Value::Null) if !required => {
            return Ok(json!({"source": "", "lang": "mustache"}));
        }
        None | Some(Value::Null) => return Err(invalid(&field, "is required")),
        Some(Value::String(source)) => json!({"source": source}),
        Some(doc) => doc.clone(),
    };
    let parts = object(&doc, &field)?;
    no_other_keys(parts, &["source", "lang"], &field)?;
    let source = match parts.get("source") {
        Some(Value::String(source)) => source,
        _ => return Err(invalid(&join(&field, "source"), "must be a string")),
    };
    match parts.get("lang") {
        None | Some(Value::Null) => {}
        Some(Value::String(lang)) if lang == "mustache" => {}
        Some(other) => {
            return Err(invalid(
                &join(&field, "lang"),
                format!("{other} is not served (mustache)"),
            ));
        }
    }
    template::check(source, context.partials)
        .map_err(|e: TemplateError| invalid(&join(&field, "source"), e))?;
    Ok(json!({"source": source, "lang": "mustache"}))
}

/// The units of a throttle, and their length in seconds.
const THROTTLE_UNITS: &[(&str, i64)] = &[
    ("SECONDS", 1),
    ("MINUTES", 60),
    ("HOURS", 3600),
    ("DAYS", 86_400),
];

fn throttle_of(doc: &Value, at: &str) -> Result<Value> {
    let fields = object(doc, at)?;
    no_other_keys(fields, &["value", "unit"], at)?;
    let value = fields
        .get("value")
        .and_then(Value::as_u64)
        .filter(|v| *v > 0)
        .ok_or_else(|| invalid(&join(at, "value"), "must be a positive integer"))?;
    let unit = match fields.get("unit") {
        None | Some(Value::Null) => "MINUTES".to_owned(),
        Some(Value::String(unit)) => unit.to_ascii_uppercase(),
        Some(_) => return Err(invalid(&join(at, "unit"), "must be a string")),
    };
    if !THROTTLE_UNITS.iter().any(|(u, _)| *u == unit) {
        return Err(invalid(
            &join(at, "unit"),
            format!("{unit:?} is not a unit (SECONDS, MINUTES, HOURS, DAYS)"),
        ));
    }
    Ok(json!({"value": value, "unit": unit}))
}

/// How long a normalized action's throttle lasts, in microseconds; `None` without one.
pub fn throttle_micros(action: &Value) -> Option<i64> {
    if action["throttle_enabled"] != Value::Bool(true) {
        return None;
    }
    let value = i64::try_from(action["throttle"]["value"].as_u64()?).ok()?;
    let unit = action["throttle"]["unit"].as_str()?;
    let seconds = THROTTLE_UNITS.iter().find(|(u, _)| *u == unit)?.1;
    value.checked_mul(seconds)?.checked_mul(1_000_000)
}

/// A JSON merge of `patch` into `base` at the top level: the fields given replace those there
/// (how PATCH changes a channel's config or a monitor).
pub(super) fn merged(base: &Value, patch: &Map<String, Value>) -> Value {
    let mut out = base.as_object().cloned().unwrap_or_default();
    for (key, value) in patch {
        out.insert(key.clone(), value.clone());
    }
    Value::Object(out)
}

/// A monitor's SQL must read: a query, SHOW or DESCRIBE, never a write.
pub fn check_read_only(statement: &str) -> std::result::Result<(), String> {
    let first = statement
        .trim_start_matches(|c: char| c.is_whitespace() || c == '(')
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match first.as_str() {
        "select" | "with" | "show" | "describe" | "desc" | "explain" | "values" => Ok(()),
        _ => Err(format!(
            "a monitor's statement must read (SELECT, WITH, SHOW, DESCRIBE), not {:?}",
            statement.split_whitespace().next().unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests;
