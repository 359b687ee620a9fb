//! Query clauses as one DataFusion filter expression, built of what sources take: plain
//! `column op literal` comparisons, `IN` lists, `LIKE`, `IS NOT NULL`, joined by `AND`/`OR`.

use datafusion::{
    common::ScalarValue,
    functions::expr_fn::lower,
    logical_expr::{
        Like,
        utils::{conjunction, disjunction},
        when,
    },
    prelude::{Expr, ident, lit},
};
use serde_json::{Map, Value};

use super::{
    Fields, bad,
    coerce::{self, Dates, Op},
    internal, subset,
};
use crate::error::Result;

/// Keys every clause accepts and ignores.
const IGNORED: [&str; 2] = ["boost", "_name"];

/// The filter of `query`, a clause such as `{"term": {"host": "a"}}`.
pub(super) fn filter(query: &Value, fields: &Fields) -> Result<Expr> {
    let (name, body) = match query.as_object() {
        Some(map) if map.len() == 1 => map.iter().next().map(|(k, v)| (k.as_str(), v)),
        _ => None,
    }
    .ok_or_else(|| {
        bad(format!(
            "a query is an object naming one clause, got {query}"
        ))
    })?;
    match name {
        "match_all" => match_all(body),
        "bool" => boolean(body, fields),
        "term" => term(body, fields),
        "terms" => terms(body, fields),
        "range" => range(body, fields),
        "exists" => exists(body, fields),
        "prefix" => prefix(body, fields),
        "wildcard" => wildcard(body, fields),
        other => Err(subset::query_not_served(other)),
    }
}

/// `body` as the object that clause `clause` needs.
fn object<'a>(clause: &str, body: &'a Value) -> Result<&'a Map<String, Value>> {
    body.as_object()
        .ok_or_else(|| bad(format!("[{clause}] takes an object, got {body}")))
}

/// Refuses the keys of `map` that are neither in `allowed` nor ignored; `place` names where
/// (`[bool]`, `[term] on [host]`).
fn allow_keys(place: &str, map: &Map<String, Value>, allowed: &[&str]) -> Result<()> {
    match map
        .keys()
        .find(|k| !allowed.contains(&k.as_str()) && !IGNORED.contains(&k.as_str()))
    {
        Some(key) => Err(bad(format!("{place} does not support [{key}]"))),
        None => Ok(()),
    }
}

/// `match_all`: everything.
fn match_all(body: &Value) -> Result<Expr> {
    allow_keys("[match_all]", object("match_all", body)?, &[])?;
    Ok(lit(true))
}

/// `bool`: all of `must` and `filter`, at least `minimum_should_match` of `should`, none of
/// `must_not` (a record lacking the field of a `must_not` clause is kept).
fn boolean(body: &Value, fields: &Fields) -> Result<Expr> {
    let map = object("bool", body)?;
    allow_keys(
        "[bool]",
        map,
        &[
            "must",
            "filter",
            "should",
            "must_not",
            "minimum_should_match",
        ],
    )?;
    let mut parts = clauses(map.get("must"), fields)?;
    parts.extend(clauses(map.get("filter"), fields)?);
    let should = clauses(map.get("should"), fields)?;
    let default = usize::from(parts.is_empty());
    let wanted = minimum_should_match(map.get("minimum_should_match"), should.len(), default)?;
    parts.extend(at_least(should, wanted)?);
    let must_not = clauses(map.get("must_not"), fields)?;
    parts.extend(must_not.into_iter().map(Expr::is_not_true));
    Ok(conjunction(parts).unwrap_or_else(|| lit(true)))
}

/// The filters of an occurrence of `bool`: one clause or an array of them.
fn clauses(value: Option<&Value>, fields: &Fields) -> Result<Vec<Expr>> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(|q| filter(q, fields)).collect(),
        Some(query) => Ok(vec![filter(query, fields)?]),
    }
}

/// How many of `count` should clauses must match: an integer or a percentage string (`"50%"`)
/// of them, rounded down; a negative one tells how many may be missing. `default` when absent.
fn minimum_should_match(value: Option<&Value>, count: usize, default: usize) -> Result<usize> {
    let refuse = || {
        bad(format!(
            "[bool] minimum_should_match must be an integer or a percentage, got {}",
            value.unwrap_or(&Value::Null)
        ))
    };
    let (amount, percent) = match value {
        None => return Ok(default),
        Some(Value::Number(n)) => (n.as_i64().ok_or_else(refuse)?, false),
        Some(Value::String(s)) => {
            let (number, percent) = match s.trim().strip_suffix('%') {
                Some(number) => (number, true),
                None => (s.as_str(), false),
            };
            (number.trim().parse::<i64>().map_err(|_| refuse())?, percent)
        }
        Some(_) => return Err(refuse()),
    };
    let magnitude = usize::try_from(amount.unsigned_abs()).unwrap_or(usize::MAX);
    let share = if percent {
        count.saturating_mul(magnitude.min(100)) / 100
    } else {
        magnitude
    };
    Ok(if amount < 0 {
        count.saturating_sub(share)
    } else {
        share
    })
}

/// The filter "at least `wanted` of `clauses`", `None` when that asks nothing.
fn at_least(clauses: Vec<Expr>, wanted: usize) -> Result<Option<Expr>> {
    let count = clauses.len();
    Ok(match wanted {
        0 => None,
        _ if count == 0 => None,
        1 => disjunction(clauses),
        _ if wanted > count => Some(lit(false)),
        _ if wanted == count => conjunction(clauses),
        _ => {
            let ones = clauses
                .into_iter()
                .map(|c| when(c, lit(1i64)).otherwise(lit(0i64)))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(internal)?;
            let sum = ones.into_iter().reduce(|a, b| a + b);
            sum.map(|s| s.gt_eq(lit(i64::try_from(wanted).unwrap_or(i64::MAX))))
        }
    })
}

/// The one field a field clause (`term`, `range`, ...) names, and what it says of it.
fn field_entry<'a>(clause: &str, body: &'a Value) -> Result<(&'a str, &'a Value)> {
    let map = object(clause, body)?;
    let mut named = map.iter().filter(|(k, _)| !IGNORED.contains(&k.as_str()));
    match (named.next(), named.next()) {
        (Some((field, spec)), None) => Ok((field.as_str(), spec)),
        _ => Err(bad(format!(
            "[{clause}] names exactly one field, got {body}"
        ))),
    }
}

/// The value of a clause on `field` written `{field: value}` or `{field: {<value_key>: value,
/// case_insensitive?}}`, and whether it is case-insensitive.
fn value_spec<'a>(
    clause: &str,
    field: &str,
    spec: &'a Value,
    value_keys: &[&str],
) -> Result<(&'a Value, bool)> {
    let (value, insensitive) = match spec {
        Value::Object(map) => {
            let mut allowed = value_keys.to_vec();
            allowed.push("case_insensitive");
            allow_keys(&format!("[{clause}] on [{field}]"), map, &allowed)?;
            let value = value_keys.iter().find_map(|k| map.get(*k));
            let value = value.ok_or_else(|| {
                bad(format!(
                    "[{clause}] on [{field}] needs a [{}]",
                    value_keys.join("] or [")
                ))
            })?;
            let insensitive = match map.get("case_insensitive") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    return Err(bad(format!(
                        "[{clause}] on [{field}]: case_insensitive must be a boolean, got {other}"
                    )));
                }
            };
            (value, insensitive)
        }
        value => (value, false),
    };
    scalar(clause, field, value)?;
    Ok((value, insensitive))
}

/// Refuses a value that is not a string, a number or a boolean.
fn scalar(clause: &str, field: &str, value: &Value) -> Result<()> {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(()),
        other => Err(bad(format!(
            "[{clause}] on [{field}]: a value is a string, a number or a boolean, got {other}"
        ))),
    }
}

/// How dates are read in clauses, with numbers as epoch milliseconds.
fn dates(fields: &Fields) -> Dates {
    Dates {
        now: fields.now,
        epoch_seconds: false,
    }
}

/// `term`: the field equals the value (converted to the column's type; a value that does not
/// convert matches nothing).
fn term(body: &Value, fields: &Fields) -> Result<Expr> {
    let (field, spec) = field_entry("term", body)?;
    let (value, insensitive) = value_spec("term", field, spec, &["value"])?;
    let Some(data_type) = fields.get(field) else {
        return Ok(lit(false));
    };
    if insensitive && data_type.is_string() {
        return Ok(like(
            field,
            data_type,
            escape_like(&coerce::text(value)),
            true,
        ));
    }
    Ok(
        match coerce::literal(value, data_type, Op::Eq, dates(fields)) {
            Ok(literal) => ident(field).eq(lit(literal)),
            Err(_) => lit(false),
        },
    )
}

/// `terms`: the field equals one of the values (those that do not convert are dropped).
fn terms(body: &Value, fields: &Fields) -> Result<Expr> {
    let (field, spec) = field_entry("terms", body)?;
    let Value::Array(values) = spec else {
        return Err(bad(format!(
            "[terms] on [{field}] takes an array of values (a terms lookup is not served on a SQL source), got {spec}"
        )));
    };
    values.iter().try_for_each(|v| scalar("terms", field, v))?;
    let Some(data_type) = fields.get(field) else {
        return Ok(lit(false));
    };
    let literals: Vec<Expr> = values
        .iter()
        .filter_map(|v| coerce::literal(v, data_type, Op::Eq, dates(fields)).ok())
        .map(lit)
        .collect();
    // DataFusion simplifies an `IN` list of one value to `=`.
    Ok(if literals.is_empty() {
        lit(false)
    } else {
        ident(field).in_list(literals, false)
    })
}

/// `range`: the field within the bounds `gt`, `gte`, `lt`, `lte`; a bound that is no value of
/// the column's type is a client error.
fn range(body: &Value, fields: &Fields) -> Result<Expr> {
    let (field, spec) = field_entry("range", body)?;
    let map = spec.as_object().ok_or_else(|| {
        bad(format!(
            "[range] on [{field}] takes an object of bounds, got {spec}"
        ))
    })?;
    allow_keys(
        &format!("[range] on [{field}]"),
        map,
        &["gt", "gte", "lt", "lte", "format", "time_zone", "relation"],
    )?;
    let dates = range_dates(field, map, fields)?;
    let Some(data_type) = fields.get(field) else {
        return Ok(lit(false));
    };
    let mut parts = Vec::new();
    for (key, op) in [
        ("gt", Op::Gt),
        ("gte", Op::Gte),
        ("lt", Op::Lt),
        ("lte", Op::Lte),
    ] {
        let Some(value) = map.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let literal = coerce::literal(value, data_type, op, dates)
            .map_err(|why| bad(format!("[range] on [{field}]: {why}")))?;
        parts.push(compare(ident(field), op, lit(literal)));
    }
    Ok(conjunction(parts).unwrap_or_else(|| ident(field).is_not_null()))
}

/// How a `range` clause on `field` reads dates: its `format` (only `epoch_second` changes
/// anything) and its `time_zone` (only UTC is served).
fn range_dates(field: &str, map: &Map<String, Value>, fields: &Fields) -> Result<Dates> {
    let format = match map.get("format") {
        None => "",
        Some(Value::String(format)) => format,
        Some(other) => {
            return Err(bad(format!(
                "[range] on [{field}]: format must be a string, got {other}"
            )));
        }
    };
    match map.get("time_zone").map(|z| z.as_str()) {
        None | Some(Some("UTC" | "Z" | "+00:00" | "Etc/UTC" | "GMT")) => {}
        Some(_) => {
            return Err(bad(format!(
                "[range] on [{field}]: only the time_zone UTC is served on a SQL source"
            )));
        }
    }
    Ok(Dates {
        now: fields.now,
        epoch_seconds: format.contains("epoch_second"),
    })
}

/// `column op literal`.
pub(super) fn compare(column: Expr, op: Op, literal: Expr) -> Expr {
    match op {
        Op::Eq => column.eq(literal),
        Op::Gt => column.gt(literal),
        Op::Gte => column.gt_eq(literal),
        Op::Lt => column.lt(literal),
        Op::Lte => column.lt_eq(literal),
    }
}

/// `exists`: the field has a value.
fn exists(body: &Value, fields: &Fields) -> Result<Expr> {
    let map = object("exists", body)?;
    allow_keys("[exists]", map, &["field"])?;
    let Some(Value::String(field)) = map.get("field") else {
        return Err(bad(format!("[exists] needs a [field] name, got {body}")));
    };
    Ok(match fields.get(field) {
        Some(_) => ident(field).is_not_null(),
        None => lit(false),
    })
}

/// `prefix`: the (string) field starts with the value.
fn prefix(body: &Value, fields: &Fields) -> Result<Expr> {
    let (field, spec) = field_entry("prefix", body)?;
    let (value, insensitive) = value_spec("prefix", field, spec, &["value"])?;
    let pattern = escape_like(&coerce::text(value)) + "%";
    pattern_clause("prefix", field, pattern, insensitive, fields)
}

/// `wildcard`: the (string) field matches the pattern, where `*` is any run of characters and
/// `?` any one character.
fn wildcard(body: &Value, fields: &Fields) -> Result<Expr> {
    let (field, spec) = field_entry("wildcard", body)?;
    let (value, insensitive) = value_spec("wildcard", field, spec, &["value", "wildcard"])?;
    let pattern = wildcard_to_like(&coerce::text(value));
    pattern_clause("wildcard", field, pattern, insensitive, fields)
}

/// `field LIKE pattern` for `clause`: nothing when there is no such field, a client error when
/// it is no string.
fn pattern_clause(
    clause: &str,
    field: &str,
    pattern: String,
    insensitive: bool,
    fields: &Fields,
) -> Result<Expr> {
    match fields.get(field) {
        None => Ok(lit(false)),
        Some(data_type) if data_type.is_string() => {
            Ok(like(field, data_type, pattern, insensitive))
        }
        Some(data_type) => Err(bad(format!(
            "[{clause}] on [{field}]: the field is not a string (it is {data_type})"
        ))),
    }
}

/// `field LIKE pattern` (`lower(field) LIKE lower(pattern)` when case-insensitive, which every
/// SQL dialect has, unlike `ILIKE`). The escape character, a backslash, is named only when the
/// pattern uses it.
fn like(
    field: &str,
    data_type: &arrow::datatypes::DataType,
    pattern: String,
    insensitive: bool,
) -> Expr {
    let (column, pattern) = if insensitive {
        (lower(ident(field)), pattern.to_lowercase())
    } else {
        (ident(field), pattern)
    };
    let escape = pattern.contains('\\').then_some('\\');
    let pattern: ScalarValue = coerce::string(data_type, pattern);
    Expr::Like(Like::new(
        false,
        Box::new(column),
        Box::new(lit(pattern)),
        escape,
        false,
    ))
}

/// `text` with the LIKE wildcards `%` and `_` (and the escape `\`) escaped.
pub(super) fn escape_like(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A wildcard pattern (`*`, `?`, `\` escaping the next character) as a LIKE pattern.
pub(super) fn wildcard_to_like(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' => out.push('%'),
            '?' => out.push('_'),
            '\\' => out.push_str(&escape_like(&chars.next().unwrap_or('\\').to_string())),
            c => out.push_str(&escape_like(&c.to_string())),
        }
    }
    out
}
