//! Trigger conditions for alerting monitors.
//!
//! A monitor runs a query on a schedule; each of its triggers carries a
//! `condition` document that decides, from the query's result, whether the
//! trigger fires. The document is one of:
//!
//! - `{"type": "always"}`
//! - `{"type": "count_greater_than" | "count_less_than" | "count_equals", "threshold": <number>}`
//! - `{"type": "field_<op>", "path": "<RFC 6901 pointer>", "value": <any JSON>}` where `<op>` is
//!   `contains`, `equals`, `not_equals`, `starts_with`, `ends_with`, `matches`, `greater_than`
//!   or `less_than`
//! - `{"script": {"source": "<expression>", "lang": "painless" | "cel"}}` (`lang` optional;
//!   `"type": "script"` may be given too). OpenSearch users write Painless one-liners such as
//!   `return ctx.results[0].hits.total.value > 0;`; we evaluate them as CEL, after stripping a
//!   leading `return ` and a trailing `;`.
//!
//! [`Condition::parse`] validates everything it can up front (pointer syntax, regexes, script
//! compilation) so that a bad monitor is rejected when it is saved, not when it first runs.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr, IdedEntryExpr};
use cel::common::types::{CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull};
use cel::common::types::{CelString, CelUInt};
use cel::common::value::Val;
use cel::{Context, Env, IdedExpr, Program};
use regex::{Regex, RegexBuilder};
use serde_json::{Map, Number, Value, json};

use compare::{compare_count, evaluate_field, is_orderable, kind_of};

mod compare;
#[cfg(test)]
mod tests;

/// Longest script source accepted, in bytes.
pub const MAX_SCRIPT_BYTES: usize = 4096;
/// Deepest expression tree accepted (the parser itself stops at 96 nested brackets, but not
/// at long operator chains such as `a + a + ...`, which nest just as deep when evaluated).
pub const MAX_EXPR_DEPTH: usize = 100;
/// Stack of the thread that compiles and evaluates scripts. cel's parser and evaluator recurse
/// and, unoptimized, use tens of KiB per level: 15 nested brackets overflow a 2 MiB stack in a
/// debug build. On its own thread with this stack, a script within the limits cannot overflow
/// the caller's (async worker, test) stack. Pages are only committed as they are touched.
const CEL_STACK_BYTES: usize = 64 << 20;
/// Compiled-size limit for `field_matches` regexes (the `regex` crate's default is 10 MiB).
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Deepest JSON nesting converted into a CEL value for `ctx`.
const MAX_CTX_DEPTH: usize = 128;
/// Longest error or value text put into an evaluation error.
const MAX_MESSAGE_CHARS: usize = 300;

/// The standard CEL environment (operators, `size`, `has`, `all`, `exists`, `map`, `filter`,
/// string functions, `matches`). It has no function that reads files, the network or the clock,
/// and we register none: a script sees only `ctx`.
static CEL_ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// A condition document that [`Condition::parse`] rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("condition{sep}{field}: {reason}", sep = if .field.is_empty() { "" } else { "." })]
pub struct ConditionError {
    /// The offending field, relative to the condition: `type`, `threshold`, `path`, `value`,
    /// `script.source`, ...; empty when the document as a whole is wrong.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

fn error(field: &str, reason: impl Into<String>) -> ConditionError {
    ConditionError {
        field: field.to_string(),
        reason: reason.into(),
    }
}

/// How a `count_*` condition compares the result's count with its threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountOp {
    GreaterThan,
    LessThan,
    Equals,
}

const COUNT_OPS: [(&str, CountOp); 3] = [
    ("count_greater_than", CountOp::GreaterThan),
    ("count_less_than", CountOp::LessThan),
    ("count_equals", CountOp::Equals),
];

/// How a `field_*` condition compares the value at its path with its `value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOp {
    Contains,
    Equals,
    NotEquals,
    StartsWith,
    EndsWith,
    Matches,
    GreaterThan,
    LessThan,
}

const FIELD_OPS: [(&str, FieldOp); 8] = [
    ("field_contains", FieldOp::Contains),
    ("field_equals", FieldOp::Equals),
    ("field_not_equals", FieldOp::NotEquals),
    ("field_starts_with", FieldOp::StartsWith),
    ("field_ends_with", FieldOp::EndsWith),
    ("field_matches", FieldOp::Matches),
    ("field_greater_than", FieldOp::GreaterThan),
    ("field_less_than", FieldOp::LessThan),
];

/// The language a script was declared in; both are evaluated as CEL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptLang {
    Painless,
    Cel,
}

impl ScriptLang {
    fn name(self) -> &'static str {
        match self {
            ScriptLang::Painless => "painless",
            ScriptLang::Cel => "cel",
        }
    }
}

/// A parsed, validated trigger condition.
#[derive(Debug)]
pub enum Condition {
    /// Fires on every run.
    Always,
    /// Compares the result's count with `threshold` numerically (`count_equals` with a
    /// fractional threshold never fires; a negative threshold is below every count).
    Count { op: CountOp, threshold: Number },
    /// Looks `path` (an RFC 6901 pointer) up in the first query result and compares it with
    /// `value`. A path that does not resolve is an error, for every op (`not_equals` included),
    /// so a typo in the path shows in the run's record instead of silently never firing.
    ///
    /// - `equals` / `not_equals`: JSON equality where numbers compare numerically (`1 == 1.0`)
    ///   and a string equals a number when it parses as that number (`"200" == 200`), like a
    ///   term query on a numeric field; arrays and objects compare element by element.
    /// - `contains`: a substring for a string field (the value's JSON text when the value is
    ///   not a string), an element equal to the value (as `equals`) for an array field; any
    ///   other field type is an error.
    /// - `starts_with` / `ends_with`: on the field's string; a non-string field or value uses
    ///   its JSON text.
    /// - `matches`: an unanchored regex search (the regex is `value`, compiled at parse) on the
    ///   field's string, or its JSON text when it is not a string.
    /// - `greater_than` / `less_than`: numeric when both sides are numbers or strings that
    ///   parse as numbers; chronological when both are RFC 3339 timestamps; else an error
    ///   naming both types.
    Field {
        op: FieldOp,
        path: String,
        value: Value,
        /// The compiled `value`, for `FieldOp::Matches` only.
        regex: Option<Regex>,
    },
    /// A CEL expression over the variable `ctx` (the whole trigger context). It fires only
    /// when the expression yields boolean `true`; `false` does not fire; any other value, or
    /// an evaluation error, is an `Err` that says why.
    ///
    /// Evaluation is bounded: CEL has no loops, recursion, assignment or user functions; its
    /// only iteration is the comprehension macros (`all`, `exists`, `exists_one`, `map`,
    /// `filter`) over lists and maps that already exist, so every evaluation terminates, after
    /// at most about |list|^k steps for k nested comprehensions (k is limited by the 4 KiB
    /// source and [`MAX_EXPR_DEPTH`]; there is no time budget beyond that). The standard
    /// environment has no function that touches files, the network or the clock, and we add
    /// none. Compiling and evaluating run on a thread of their own (see `CEL_STACK_BYTES`).
    Script {
        /// The source as written (with any `return ` and `;`).
        source: String,
        lang: Option<ScriptLang>,
        program: Program,
    },
}

/// What a condition is evaluated against.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The result's count, as the caller computes it for the query kind.
    pub count: u64,
    /// The rendered JSON of the first query result; `field_*` pointers resolve into it.
    pub result: &'a Value,
    /// The whole trigger context (`results`, `monitor`, `trigger`, `periodStart`,
    /// `periodEnd`), bound to the CEL variable `ctx` for scripts.
    pub ctx: &'a Value,
}

impl Condition {
    /// Parses and validates a condition document; every error names the offending field.
    pub fn parse(doc: &Value) -> Result<Condition, ConditionError> {
        let doc = Fields::new(doc, "")?;
        let kind = match doc.obj.get("type") {
            None if doc.obj.contains_key("script") => "script",
            _ => doc.string("type")?,
        };
        if let Some(&(_, op)) = COUNT_OPS.iter().find(|(name, _)| *name == kind) {
            doc.only(&["type", "threshold"])?;
            let threshold = doc.get("threshold")?;
            let threshold = threshold.as_number().cloned();
            let threshold = threshold.ok_or_else(|| doc.mistyped("threshold", "a number"))?;
            return Ok(Condition::Count { op, threshold });
        }
        if let Some(&(_, op)) = FIELD_OPS.iter().find(|(name, _)| *name == kind) {
            return parse_field(op, &doc);
        }
        match kind {
            "always" => doc.only(&["type"]).map(|()| Condition::Always),
            "script" => parse_script(&doc),
            _ => {
                let names = COUNT_OPS
                    .iter()
                    .map(|op| op.0)
                    .chain(FIELD_OPS.iter().map(|op| op.0));
                let names = names.collect::<Vec<_>>().join(", ");
                let reason = format!("unknown type {kind:?}; expected always, script, {names}");
                Err(error("type", reason))
            }
        }
    }

    /// The normalized condition document; [`Condition::parse`] reads it back unchanged.
    pub fn to_json(&self) -> Value {
        match self {
            Condition::Always => json!({"type": "always"}),
            Condition::Count { op, threshold } => {
                let name = COUNT_OPS.iter().find(|o| o.1 == *op).map(|o| o.0);
                json!({"type": name, "threshold": threshold})
            }
            Condition::Field {
                op, path, value, ..
            } => {
                let name = FIELD_OPS.iter().find(|o| o.1 == *op).map(|o| o.0);
                json!({"type": name, "path": path, "value": value})
            }
            Condition::Script { source, lang, .. } => {
                let mut script = Map::from_iter([("source".to_string(), json!(source))]);
                if let Some(lang) = lang {
                    script.insert("lang".into(), json!(lang.name()));
                }
                json!({ "script": script })
            }
        }
    }

    /// Whether the trigger fires for `input`; `Err` says why it could not be decided.
    pub fn evaluate(&self, input: &Input<'_>) -> Result<bool, String> {
        match self {
            Condition::Always => Ok(true),
            Condition::Count { op, threshold } => {
                let ordering = compare_count(input.count, threshold);
                Ok(match op {
                    CountOp::GreaterThan => ordering.is_gt(),
                    CountOp::LessThan => ordering.is_lt(),
                    CountOp::Equals => ordering.is_eq(),
                })
            }
            Condition::Field {
                op,
                path,
                value,
                regex,
            } => {
                let found = input.result.pointer(path);
                let found = found.ok_or_else(|| format!("no value at {path}"))?;
                evaluate_field(*op, found, value, regex.as_ref(), path)
            }
            Condition::Script { program, .. } => evaluate_script(program, input.ctx),
        }
    }
}

/// One object of the condition document; `prefix` (`""` or `"script."`) names its fields.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    prefix: &'static str,
}

impl<'a> Fields<'a> {
    fn new(value: &'a Value, prefix: &'static str) -> Result<Self, ConditionError> {
        match value.as_object() {
            Some(obj) => Ok(Fields { obj, prefix }),
            None => Err(mistyped(prefix.trim_end_matches('.'), "an object", value)),
        }
    }

    /// Rejects any key not in `allowed`.
    fn only(&self, allowed: &[&str]) -> Result<(), ConditionError> {
        match self.obj.keys().find(|key| !allowed.contains(&key.as_str())) {
            Some(key) => Err(self.error(key, "unknown key")),
            None => Ok(()),
        }
    }

    fn get(&self, key: &str) -> Result<&'a Value, ConditionError> {
        self.obj.get(key).ok_or_else(|| self.error(key, "missing"))
    }

    fn string(&self, key: &str) -> Result<&'a str, ConditionError> {
        let value = self.get(key)?;
        value.as_str().ok_or_else(|| self.mistyped(key, "a string"))
    }

    fn error(&self, key: &str, reason: impl Into<String>) -> ConditionError {
        error(&format!("{}{key}", self.prefix), reason)
    }

    /// `key` is present but not of the `expected` type.
    fn mistyped(&self, key: &str, expected: &str) -> ConditionError {
        let found = self.obj.get(key).map_or("nothing", kind_of);
        self.error(key, format!("must be {expected}, not {found}"))
    }
}

fn mistyped(field: &str, expected: &str, found: &Value) -> ConditionError {
    error(field, format!("must be {expected}, not {}", kind_of(found)))
}

fn parse_field(op: FieldOp, doc: &Fields<'_>) -> Result<Condition, ConditionError> {
    doc.only(&["type", "path", "value"])?;
    let path = doc.string("path")?.to_string();
    check_pointer(&path).map_err(|reason| error("path", reason))?;
    let value = doc.get("value")?.clone();
    let mut regex = None;
    match op {
        FieldOp::Matches => {
            let pattern = value
                .as_str()
                .ok_or_else(|| doc.mistyped("value", "a regex"))?;
            let compiled = RegexBuilder::new(pattern)
                .size_limit(REGEX_SIZE_LIMIT)
                .build();
            regex = Some(compiled.map_err(|e| error("value", format!("invalid regex: {e}")))?);
        }
        FieldOp::GreaterThan | FieldOp::LessThan if !is_orderable(&value) => {
            let expected = "a number, a numeric string or an RFC 3339 timestamp";
            return Err(doc.mistyped("value", expected));
        }
        _ => {}
    }
    Ok(Condition::Field {
        op,
        path,
        value,
        regex,
    })
}

/// Checks RFC 6901 syntax: empty, or `/`-separated tokens where `~` is only `~0` or `~1`.
fn check_pointer(path: &str) -> Result<(), String> {
    let mut chars = path.chars();
    let mut valid = path.is_empty() || path.starts_with('/');
    while let Some(c) = chars.next() {
        valid &= c != '~' || matches!(chars.next(), Some('0' | '1'));
    }
    let hint = "empty or /a/b, with ~ written ~0 and / in a key ~1";
    valid
        .then_some(())
        .ok_or_else(|| format!("{path:?} is not a JSON pointer ({hint})"))
}

fn parse_script(doc: &Fields<'_>) -> Result<Condition, ConditionError> {
    doc.only(&["type", "script"])?;
    let script = Fields::new(doc.get("script")?, "script.")?;
    script.only(&["source", "lang"])?;
    let lang = match script.obj.get("lang").map(Value::as_str) {
        None => None,
        Some(Some("painless")) => Some(ScriptLang::Painless),
        Some(Some("cel")) => Some(ScriptLang::Cel),
        Some(_) => return Err(script.error("lang", "must be \"painless\" or \"cel\"")),
    };
    let source = script.string("source")?.to_string();
    let length = source.len();
    if length > MAX_SCRIPT_BYTES {
        let reason = format!("is {length} bytes, over the {MAX_SCRIPT_BYTES}-byte limit");
        return Err(script.error("source", reason));
    }
    let expression = strip_painless(&source);
    if expression.is_empty() {
        return Err(script.error("source", "is empty"));
    }
    let compiled = on_cel_stack(|| CEL_ENV.compile(expression).map_err(|e| e.to_string()));
    let program = compiled
        .and_then(|compiled| compiled)
        .map_err(|e| script.error("source", format!("does not compile: {e}")))?;
    if too_deep(program.expression(), MAX_EXPR_DEPTH) {
        let reason = format!("nests deeper than {MAX_EXPR_DEPTH} levels");
        return Err(script.error("source", reason));
    }
    Ok(Condition::Script {
        source,
        lang,
        program,
    })
}

/// Strips the Painless `return ` (or `return(`) prefix and `;` suffix of a one-liner.
fn strip_painless(source: &str) -> &str {
    let mut expression = source.trim();
    if let Some(rest) = expression.strip_prefix("return")
        && rest.starts_with(|c: char| c.is_whitespace() || c == '(')
    {
        expression = rest.trim_start();
    }
    expression
        .strip_suffix(';')
        .map_or(expression, str::trim_end)
}

/// Runs `work` on a thread with a [`CEL_STACK_BYTES`] stack; a panic in cel becomes an `Err`.
fn on_cel_stack<T: Send>(work: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new().name("cel-condition".into());
        let thread = thread.stack_size(CEL_STACK_BYTES).spawn_scoped(scope, work);
        let thread = thread.map_err(|e| format!("cannot start the script thread: {e}"))?;
        thread
            .join()
            .map_err(|_| "the script evaluator panicked".to_string())
    })
}

fn entry_children(entry: &IdedEntryExpr) -> Vec<&IdedExpr> {
    match &entry.expr {
        EntryExpr::StructField(field) => vec![&field.value],
        EntryExpr::MapEntry(entry) => vec![&entry.key, &entry.value],
    }
}

/// Whether the tree under `expr` is deeper than `budget` nodes.
fn too_deep(expr: &IdedExpr, budget: usize) -> bool {
    let Some(budget) = budget.checked_sub(1) else {
        return true;
    };
    let children: Vec<&IdedExpr> = match &expr.expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::Comprehension(c) => {
            vec![
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]
        }
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map.entries.iter().flat_map(entry_children).collect(),
        Expr::Struct(fields) => fields.entries.iter().flat_map(entry_children).collect(),
        Expr::Select(select) => vec![&select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    };
    children.into_iter().any(|child| too_deep(child, budget))
}

fn evaluate_script(program: &Program, ctx: &Value) -> Result<bool, String> {
    on_cel_stack(|| {
        let mut context = Context::with_env(Arc::clone(&CEL_ENV));
        context.add_variable_as_val("ctx", to_cel(ctx, 0)?);
        match program.execute(&context) {
            Ok(cel::Value::Bool(fired)) => Ok(fired),
            Ok(other) => Err(format!(
                "the condition gave {}, not a boolean",
                render(&other)
            )),
            Err(e) => Err(format!("the condition failed: {}", truncate(e.to_string()))),
        }
    })?
}

/// JSON to CEL: integers as `int` (`uint` beyond i64), other numbers as `double`, objects as
/// maps with string keys, arrays as lists. Strings are borrowed, not copied.
fn to_cel(value: &Value, depth: usize) -> Result<Box<dyn Val + '_>, String> {
    if depth > MAX_CTX_DEPTH {
        return Err(format!("ctx is nested deeper than {MAX_CTX_DEPTH} levels"));
    }
    Ok(match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            (None, None) => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => {
            let items: Result<Vec<_>, _> = items.iter().map(|v| to_cel(v, depth + 1)).collect();
            Box::new(CelList::from(items?))
        }
        Value::Object(fields) => {
            let mut entries = HashMap::with_capacity(fields.len());
            for (key, value) in fields {
                entries.insert(CelMapKey::from(key.as_str()), to_cel(value, depth + 1)?);
            }
            Box::new(CelMap::from(entries))
        }
    })
}

/// A short rendering of a CEL result for an error message.
fn render(value: &cel::Value) -> String {
    truncate(match value {
        cel::Value::Int(i) => i.to_string(),
        cel::Value::UInt(u) => format!("{u}u"),
        cel::Value::Float(f) => format!("{f:?}"),
        cel::Value::String(s) => format!("{:?}", s.as_str()),
        cel::Value::Null => "null".into(),
        cel::Value::List(items) => format!("a list of {} items", items.len()),
        cel::Value::Map(map) => format!("a map of {} entries", map.map.len()),
        other => format!("{other:?}"),
    })
}

fn truncate(mut text: String) -> String {
    if let Some((cut, _)) = text.char_indices().nth(MAX_MESSAGE_CHARS) {
        text.truncate(cut);
        text.push('…');
    }
    text
}
