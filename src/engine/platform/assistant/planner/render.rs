//! A plan as the query it runs (SQL over a dataset, PromQL over a metrics dataset), the
//! visualization that suits its result, and the words that explain it. The answer's numbers
//! come from the result alone ([`answer_text`]).

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::{Cmp, Filter, Op, Plan, metrics};

/// A SQL identifier, quoted.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The table a plan's statement reads: the dataset, or a connection's dataset as its source
/// names it (`schema.table` for another schema of a PostgreSQL source), each part quoted.
pub fn table(dataset: &str, connection: Option<&str>) -> String {
    match connection {
        None => ident(dataset),
        Some(_) => dataset.split('.').map(ident).collect::<Vec<_>>().join("."),
    }
}

/// A SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn value_sql(value: &Value) -> String {
    match value {
        Value::String(s) => literal(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => literal(&other.to_string()),
    }
}

/// A date-math bound of a window as an instant, at `now`.
pub fn instant(math: &str, round_up: bool, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    crate::engine::platform::connections::dsl::date_math(math, round_up, now)
}

fn condition(filter: &Filter) -> String {
    let field = ident(&filter.field);
    let op = match filter.op {
        Cmp::Eq => "=",
        Cmp::Ne => "<>",
        Cmp::Gt => ">",
        Cmp::Gte => ">=",
        Cmp::Lt => "<",
        Cmp::Lte => "<=",
        Cmp::Contains => {
            let text = filter.value.as_str().unwrap_or_default();
            let escaped = text
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            return format!("{field} ILIKE {}", literal(&format!("%{escaped}%")));
        }
    };
    format!("{field} {op} {}", value_sql(&filter.value))
}

/// The WHERE clause of a plan at `now` (empty when it filters nothing).
fn where_clause(plan: &Plan, now: DateTime<Utc>) -> Result<String, String> {
    // Several values of one field are any of them ("errors or warnings"): `IN`.
    let mut parts: Vec<String> = Vec::new();
    for (i, filter) in plan.filters.iter().enumerate() {
        let same: Vec<&Filter> = plan
            .filters
            .iter()
            .filter(|f| f.op == Cmp::Eq && filter.op == Cmp::Eq && f.field == filter.field)
            .collect();
        if same.len() > 1 {
            let first = plan.filters.iter().position(|f| std::ptr::eq(f, same[0]));
            if first == Some(i) {
                let values: Vec<String> = same.iter().map(|f| value_sql(&f.value)).collect();
                parts.push(format!(
                    "{} IN ({})",
                    ident(&filter.field),
                    values.join(", ")
                ));
            }
            continue;
        }
        parts.push(condition(filter));
    }
    if let (Some(window), Some(field)) = (&plan.window, &plan.time_field) {
        let bound = |math: &str| {
            instant(math, false, now)
                .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
                .ok_or_else(|| format!("the time {math:?} is not a date"))
        };
        if let Some(from) = &window.from {
            parts.push(format!("{} >= {}", ident(field), literal(&bound(from)?)));
        }
        if let Some(to) = &window.to {
            parts.push(format!("{} < {}", ident(field), literal(&bound(to)?)));
        }
    }
    Ok(match parts.is_empty() {
        true => String::new(),
        false => format!(" WHERE {}", parts.join(" AND ")),
    })
}

/// The aggregate of a measure, and its column's name.
fn aggregate(plan: &Plan) -> (String, String) {
    let field = plan.measure.field.as_deref().map(ident).unwrap_or_default();
    let bare = plan.measure.field.clone().unwrap_or_default();
    match plan.measure.op {
        Op::Count | Op::List | Op::Values => ("COUNT(*)".to_owned(), "count".to_owned()),
        Op::CountDistinct => (
            format!("COUNT(DISTINCT {field})"),
            format!("distinct_{bare}"),
        ),
        Op::Avg => (format!("AVG({field})"), format!("avg_{bare}")),
        Op::Sum => (format!("SUM({field})"), format!("sum_{bare}")),
        Op::Min => (format!("MIN({field})"), format!("min_{bare}")),
        Op::Max => (format!("MAX({field})"), format!("max_{bare}")),
        Op::Percentile => {
            let p = plan.measure.percentile.unwrap_or(50.0);
            (
                format!("approx_percentile_cont({field}, {})", p / 100.0),
                format!("p{}_{bare}", p),
            )
        }
    }
}

/// A trend bucket as DataFusion's `date_trunc` unit.
fn trunc_unit(interval: &str) -> &'static str {
    match interval.chars().last() {
        Some('s') => "second",
        Some('m') => "minute",
        Some('h') => "hour",
        Some('w') => "week",
        Some('M') => "month",
        Some('y') => "year",
        _ => "day",
    }
}

/// The SQL statement of a dataset plan, with its window resolved at `now`.
pub fn sql(plan: &Plan, now: DateTime<Utc>) -> Result<String, String> {
    let from = table(&plan.dataset, plan.connection.as_deref());
    let filter = where_clause(plan, now)?;
    let (agg, name) = aggregate(plan);
    let order = if plan.ascending { "ASC" } else { "DESC" };
    Ok(match (plan.measure.op, &plan.interval, &plan.group_by) {
        (Op::List, _, _) => {
            let by_time = plan
                .time_field
                .as_deref()
                .map(|f| format!(" ORDER BY {} DESC", ident(f)))
                .unwrap_or_default();
            format!(
                "SELECT * FROM {from}{filter}{by_time} LIMIT {}",
                plan.limit.unwrap_or(10)
            )
        }
        (_, Some(interval), group) => {
            let time = ident(plan.time_field.as_deref().unwrap_or("@timestamp"));
            let unit = trunc_unit(interval);
            match group {
                Some(g) => format!(
                    "SELECT date_trunc('{unit}', {time}) AS \"time\", {g}, {agg} AS {n} FROM {from}{filter} GROUP BY 1, 2 ORDER BY 1, 2",
                    g = ident(g),
                    n = ident(&name)
                ),
                None => format!(
                    "SELECT date_trunc('{unit}', {time}) AS \"time\", {agg} AS {n} FROM {from}{filter} GROUP BY 1 ORDER BY 1",
                    n = ident(&name)
                ),
            }
        }
        (_, None, Some(g)) => {
            let limit = plan.limit.unwrap_or(match plan.measure.op {
                Op::Values => 100,
                _ => 10,
            });
            format!(
                "SELECT {g}, {agg} AS {n} FROM {from}{filter} GROUP BY {g} ORDER BY {n} {order}, {g} ASC LIMIT {limit}",
                g = ident(g),
                n = ident(&name)
            )
        }
        (_, None, None) => format!("SELECT {agg} AS {n} FROM {from}{filter}", n = ident(&name)),
    })
}

/// The query a plan runs, in the shape a monitor's query has (`{"type": "sql", "statement"}`
/// or `{"type": "promql", "query", "index", "start", "end", "step"}`), at `now`.
pub fn query(plan: &Plan, now: DateTime<Utc>) -> Result<Value, String> {
    match &plan.promql {
        None => {
            let mut query = json!({"type": "sql", "statement": sql(plan, now)?});
            if let Some(connection) = &plan.connection {
                query["connection"] = json!(connection);
            }
            Ok(query)
        }
        Some(_) => {
            let expr = metrics::expression(plan);
            let mut query = json!({"type": "promql", "query": expr, "index": plan.dataset});
            if let Some(window) = &plan.window {
                let start = window
                    .from
                    .as_deref()
                    .and_then(|m| instant(m, false, now))
                    .unwrap_or(now - chrono::TimeDelta::hours(1));
                let end = window
                    .to
                    .as_deref()
                    .and_then(|m| instant(m, false, now))
                    .unwrap_or(now);
                let span = (end - start).num_seconds().max(1);
                // About 60 points.
                let step = (span / 60).max(1);
                query["start"] = json!(start.timestamp_millis());
                query["end"] = json!(end.timestamp_millis());
                query["step"] = json!(step);
            }
            Ok(query)
        }
    }
}

/// The language and text of the query, as answers show it (and the connection it ran in).
pub fn shown(query: &Value) -> Value {
    match query["type"].as_str() {
        Some("promql") => json!({"language": "promql", "text": query["query"]}),
        _ => match query.get("connection") {
            Some(connection) => json!({
                "language": "sql", "text": query["statement"], "connection": connection,
            }),
            None => json!({"language": "sql", "text": query["statement"]}),
        },
    }
}

/// How the result is best shown.
pub fn visualization(plan: &Plan) -> &'static str {
    if plan.promql.is_some() {
        return match (&plan.window, &plan.group_by, plan.limit) {
            (Some(_), _, _) => "line",
            (None, Some(_), _) | (None, _, Some(_)) => "bar",
            _ => "number",
        };
    }
    match (plan.measure.op, &plan.interval, &plan.group_by) {
        (Op::List, _, _) => "table",
        (_, Some(_), _) => "line",
        (_, None, Some(_)) => "bar",
        _ => "number",
    }
}

fn filter_words(filter: &Filter) -> String {
    let value = match &filter.value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    format!("{} {} {value}", filter.field, filter.op.words())
}

/// What the plan does, in words: "the number of records of logs where level is "error", in
/// the last hour".
pub fn describe(plan: &Plan) -> String {
    let mut text = match plan.measure.op {
        Op::Count => format!("the number of records of {}", plan.dataset),
        Op::CountDistinct => format!(
            "the number of distinct {} values in {}",
            plan.measure.field.as_deref().unwrap_or("?"),
            plan.dataset
        ),
        Op::List => format!(
            "the latest {} records of {}",
            plan.limit.unwrap_or(10),
            plan.dataset
        ),
        Op::Values => format!(
            "the values of {} in {} with their counts",
            plan.group_by.as_deref().unwrap_or("?"),
            plan.dataset
        ),
        Op::Percentile => format!(
            "the {}th percentile of {} in {}",
            plan.measure.percentile.unwrap_or(50.0),
            plan.measure.field.as_deref().unwrap_or("?"),
            plan.dataset
        ),
        op => format!(
            "the {} of {} in {}",
            op.words(),
            plan.measure.field.as_deref().unwrap_or("?"),
            plan.dataset
        ),
    };
    if plan.promql.is_some() {
        let metric = plan.measure.field.as_deref().unwrap_or("?");
        text = match (&plan.function, plan.measure.op) {
            (Some(f), Op::List) => format!("the per-second {f} of {metric}"),
            (Some(f), op) => format!("the {} of the per-second {f} of {metric}", op.words()),
            (None, Op::List) => metric.to_owned(),
            (None, op) => format!("the {} of {metric}", op.words()),
        };
    }
    if !plan.filters.is_empty() {
        let words: Vec<String> = plan.filters.iter().map(filter_words).collect();
        text.push_str(&format!(" where {}", words.join(" and ")));
    }
    if let Some(by) = &plan.group_by
        && plan.measure.op != Op::Values
    {
        match plan.limit {
            Some(n) if plan.ascending => {
                text.push_str(&format!(", for the bottom {n} {by} values"))
            }
            Some(n) => text.push_str(&format!(", for the top {n} {by} values")),
            None => text.push_str(&format!(", by {by}")),
        }
    }
    if let Some(interval) = &plan.interval {
        text.push_str(&format!(", per {}", trunc_unit(interval)));
    }
    if let Some(window) = &plan.window {
        text.push_str(&format!(", {}", window.said));
    }
    text
}

/// A number as the answer's text shows it: integers whole, others with up to 4 decimals.
pub fn number_text(value: &Value) -> String {
    match value {
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or_default();
            let text = format!("{f:.4}");
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        }
        Value::Null => "none (no records matched)".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The answer's text from the plan and its SQL rows (objects by column) or PromQL data.
pub fn answer_text(plan: &Plan, result: &Value) -> String {
    let what = describe(plan);
    if plan.promql.is_some() {
        let series = result["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        return match (result["data"]["resultType"].as_str(), series.len()) {
            (_, 0) => format!("No series matched for {what}."),
            (Some("vector"), 1) => format!(
                "{} is {}.",
                capitalized(&what),
                number_text(&number_of(&series[0]["value"][1]))
            ),
            (Some("vector"), n) => {
                let shown: Vec<String> = series
                    .iter()
                    .take(10)
                    .map(|s| {
                        format!(
                            "{} {}",
                            labels_text(&s["metric"]),
                            number_text(&number_of(&s["value"][1]))
                        )
                    })
                    .collect();
                format!("{}: {n} series; {}.", capitalized(&what), shown.join(", "))
            }
            (Some("matrix"), n) => format!(
                "{}: {n} series over the window, drawn as a line.",
                capitalized(&what)
            ),
            (Some("scalar"), _) => format!(
                "{} is {}.",
                capitalized(&what),
                number_text(&number_of(&result["data"]["result"][1]))
            ),
            _ => format!("{}: see the result.", capitalized(&what)),
        };
    }
    let rows = result["rows"].as_array().cloned().unwrap_or_default();
    let (_, column) = aggregate(plan);
    match (plan.measure.op, &plan.interval, &plan.group_by) {
        (Op::List, _, _) => format!(
            "{}: {} shown.",
            capitalized(&what),
            plural(rows.len(), "record")
        ),
        (_, Some(_), _) => {
            let peak = rows.iter().max_by(|a, b| {
                let f = |r: &Value| r[&column].as_f64().unwrap_or(f64::MIN);
                f(a).total_cmp(&f(b))
            });
            match peak {
                Some(peak) => format!(
                    "{}: {}; the highest is {} at {}.",
                    capitalized(&what),
                    plural(rows.len(), "bucket"),
                    number_text(&peak[&column]),
                    number_text(&peak["time"])
                ),
                None => format!("{}: no records matched.", capitalized(&what)),
            }
        }
        (_, None, Some(g)) => {
            if rows.is_empty() {
                return format!("{}: no records matched.", capitalized(&what));
            }
            let shown: Vec<String> = rows
                .iter()
                .take(10)
                .map(|r| {
                    format!(
                        "{} ({})",
                        number_text(&r[g.as_str()]),
                        number_text(&r[&column])
                    )
                })
                .collect();
            let more = match rows.len() > 10 {
                true => format!(", and {} more", rows.len() - 10),
                false => String::new(),
            };
            format!("{}: {}{more}.", capitalized(&what), shown.join(", "))
        }
        (_, None, None) => match rows.first() {
            Some(row) => format!("{} is {}.", capitalized(&what), number_text(&row[&column])),
            None => format!("{}: no result.", capitalized(&what)),
        },
    }
}

fn number_of(value: &Value) -> Value {
    match value {
        Value::String(s) => s
            .parse::<f64>()
            .ok()
            .map(|f| {
                if f.fract() == 0.0 && f.abs() < 1e15 {
                    json!(f as i64)
                } else {
                    json!(f)
                }
            })
            .unwrap_or_else(|| value.clone()),
        other => other.clone(),
    }
}

fn labels_text(metric: &Value) -> String {
    let pairs: Vec<String> = metric
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| *k != "__name__")
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    format!("{{{}}}", pairs.join(","))
}

fn plural(n: usize, word: &str) -> String {
    match n {
        1 => format!("1 {word}"),
        n => format!("{n} {word}s"),
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
