//! Questions about a metrics dataset, planned as PromQL: a metric named in the question (its
//! name, or its name's words: "http requests" names `http_requests_total`), label filters
//! ("for job api", "on instance b", or a known label value alone), an operation (rate,
//! increase, sum, average, maximum, minimum, count), a grouping ("by job"), top-N ("top 3
//! instances by cpu") and a time window (then a range query).

use chrono::{DateTime, Utc};

use super::{
    Cmp, Filter, Measure, Op, Plan, Refusal, Schema,
    lexicon::{Token, is_stop_word, name_parts, name_score, names_value, singular},
    refuse, time,
};

/// The PromQL aggregation of a word, and whether it is a rate.
enum Fn {
    Rate,
    Increase,
    Agg(&'static str),
}

fn function(word: &str, next: &str) -> Option<(Fn, usize)> {
    Some(match (word, next) {
        ("rate", _) | ("throughput", _) => (Fn::Rate, 1),
        ("per", "second") => (Fn::Rate, 2),
        ("increase", _) | ("growth", _) => (Fn::Increase, 1),
        ("sum", _) | ("total", _) => (Fn::Agg("sum"), 1),
        ("average", _) | ("avg", _) | ("mean", _) => (Fn::Agg("avg"), 1),
        ("maximum", _) | ("max", _) | ("highest", _) | ("peak", _) => (Fn::Agg("max"), 1),
        ("minimum", _) | ("min", _) | ("lowest", _) => (Fn::Agg("min"), 1),
        ("how", "many") => (Fn::Agg("count"), 2),
        _ => return None,
    })
}

const FILLER: &[&str] = &[
    "series",
    "metric",
    "metrics",
    "value",
    "values",
    "current",
    "currently",
    "now",
    "right",
    "what",
    "is",
    "the",
    "of",
    "for",
    "on",
    "in",
    "at",
    "by",
    "show",
    "me",
    "graph",
    "chart",
    "plot",
    "over",
    "time",
    "trend",
    "and",
    "only",
    "just",
    "how",
    "about",
    "are",
    "there",
];

pub(super) fn plan(
    tokens: &[Token],
    schema: &Schema,
    previous: Option<&Plan>,
    now: DateTime<Utc>,
) -> Result<Plan, Refusal> {
    let Some(metrics) = &schema.metrics else {
        return Err(refuse(schema, "not a metrics dataset".to_owned()));
    };
    let mut used = vec![false; tokens.len()];
    let word = |i: usize| {
        tokens
            .get(i)
            .filter(|t| !t.quoted)
            .map_or("", |t| t.text.as_str())
    };
    let window = time::window(tokens, now).map(|(w, at)| {
        for i in at {
            used[i] = true;
        }
        w
    });

    // The metric: its exact name, else the most words of its name in a row.
    let mut metric: Option<(String, usize, usize)> = None;
    for (i, token) in tokens.iter().enumerate() {
        if let Some(name) = metrics
            .names
            .iter()
            .find(|n| n.eq_ignore_ascii_case(&token.text))
        {
            metric = Some((name.clone(), i, 1));
            break;
        }
    }
    if metric.is_none() {
        // The most words of a name in a row, at least those before its unit suffix
        // ("http requests" names `http_requests_total`, "memory bytes" `memory_bytes`).
        let mut best = 0;
        for name in &metrics.names {
            let parts = name_parts(name);
            let needed = parts
                .iter()
                .rposition(|p| {
                    !matches!(
                        p.as_str(),
                        "total" | "count" | "sum" | "seconds" | "bytes" | "ratio"
                    )
                })
                .map_or(parts.len(), |last| last + 1);
            for i in 0..tokens.len() {
                let mut len = 0;
                while i + len < tokens.len()
                    && len < parts.len()
                    && singular(word(i + len)) == singular(&parts[len])
                {
                    len += 1;
                }
                if len >= needed && len > best {
                    best = len;
                    metric = Some((name.clone(), i, len));
                }
            }
        }
    }
    let follow_up = metric.is_none() && previous.is_some_and(|p| p.promql.is_some());
    let (name, at, len) = match (metric, previous) {
        (Some(m), _) => m,
        (None, Some(p)) if follow_up => {
            (p.measure.field.clone().unwrap_or_default(), usize::MAX, 0)
        }
        _ => {
            return Err(refuse(
                schema,
                format!(
                    "I found no metric of {} in the question; it has {}",
                    schema.dataset,
                    metrics
                        .names
                        .iter()
                        .take(8)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    };
    if at != usize::MAX {
        for u in used.iter_mut().skip(at).take(len) {
            *u = true;
        }
    }

    // Operations, grouping, top-N.
    let mut rate: Option<Fn> = None;
    let mut agg: Option<&'static str> = None;
    let mut by: Option<String> = None;
    let mut top: Option<u32> = None;
    let label_named = |i: usize| -> Option<(String, usize)> {
        for len in [2, 1] {
            let words: Vec<&str> = (i..i + len).map(word).collect();
            if words.iter().any(|w| w.is_empty()) {
                continue;
            }
            if let Some(l) = metrics
                .labels
                .iter()
                .find(|l| name_score(&words, &l.name) >= 5)
            {
                return Some((l.name.clone(), len));
            }
        }
        None
    };
    let mut i = 0;
    while i < tokens.len() {
        if used[i] {
            i += 1;
            continue;
        }
        let w = word(i);
        if matches!(w, "by" | "per")
            && let Some((label, len)) = label_named(i + 1)
        {
            by = Some(label);
            for u in used.iter_mut().skip(i).take(len + 1) {
                *u = true;
            }
            i += len + 1;
            continue;
        }
        if w == "top" {
            let n = word(i + 1).parse::<u32>().ok().filter(|n| *n > 0);
            let take = if n.is_some() { 2 } else { 1 };
            top = Some(n.unwrap_or(5));
            for u in used.iter_mut().skip(i).take(take) {
                *u = true;
            }
            if let Some((label, len)) = label_named(i + take) {
                by = Some(label);
                for u in used.iter_mut().skip(i + take).take(len) {
                    *u = true;
                }
            }
            i += take;
            continue;
        }
        if let Some((f, take)) = function(w, word(i + 1)) {
            match f {
                Fn::Agg(a) => agg = agg.or(Some(a)),
                other => rate = Some(other),
            }
            for u in used.iter_mut().skip(i).take(take) {
                *u = true;
            }
            i += take;
            continue;
        }
        i += 1;
    }

    // Label filters: "for job api", "job is api", a known value alone.
    let mut filters: Vec<Filter> = Vec::new();
    for i in 0..tokens.len() {
        if used[i] {
            continue;
        }
        if let Some((label, len)) = label_named(i) {
            let mut k = i + len;
            let mut negate = false;
            while matches!(word(k), "is" | "=" | ":" | "not" | "!=") {
                negate |= matches!(word(k), "not" | "!=");
                k += 1;
            }
            if let Some(token) = tokens
                .get(k)
                .filter(|_| !used.get(k).copied().unwrap_or(true))
            {
                let values = &metrics
                    .labels
                    .iter()
                    .find(|l| l.name == label)
                    .map(|l| l.values.clone())
                    .unwrap_or_default();
                let value = values
                    .iter()
                    .find(|v| names_value(&token.text, v))
                    .cloned()
                    .or_else(|| (token.quoted || k > i + len).then(|| token.text.clone()));
                if let Some(value) = value {
                    filters.push(Filter {
                        field: label,
                        op: if negate { Cmp::Ne } else { Cmp::Eq },
                        value: value.into(),
                    });
                    for u in used.iter_mut().skip(i).take(k + 1 - i) {
                        *u = true;
                    }
                }
            }
        }
    }
    for i in 0..tokens.len() {
        if used[i] || is_stop_word(&tokens[i].text) {
            continue;
        }
        let owner = metrics.labels.iter().find_map(|l| {
            l.values
                .iter()
                .find(|v| names_value(&tokens[i].text, v))
                .map(|v| (l.name.clone(), v.clone()))
        });
        if let Some((label, value)) = owner {
            let negate = i > 0 && matches!(word(i - 1), "not" | "except" | "excluding");
            filters.push(Filter {
                field: label,
                op: if negate { Cmp::Ne } else { Cmp::Eq },
                value: value.into(),
            });
            used[i] = true;
            if negate {
                used[i - 1] = true;
            }
        }
    }
    let unknown: Vec<String> = tokens
        .iter()
        .enumerate()
        .filter(|(i, t)| {
            !used[*i] && (t.quoted || !(is_stop_word(&t.text) || FILLER.contains(&t.text.as_str())))
        })
        .map(|(_, t)| format!("{:?}", t.text))
        .collect();
    if !unknown.is_empty() {
        return Err(refuse(
            schema,
            format!(
                "I did not understand {} in this question about {name}",
                unknown.join(", ")
            ),
        ));
    }

    // A follow-up keeps what the previous plan asked and changes what this one says.
    let mut previous_filters = Vec::new();
    if follow_up && let Some(p) = previous {
        previous_filters = p.filters.clone();
        if rate.is_none() && agg.is_none() && by.is_none() && top.is_none() {
            // Only filters or a window change: keep the previous expression's shape.
            let mut plan = p.clone();
            for f in &filters {
                plan.filters.retain(|g| g.field != f.field);
            }
            plan.filters.extend(filters);
            if window.is_some() {
                plan.window = window;
            }
            plan.promql = Some(expression(&plan));
            return Ok(plan);
        }
    }
    for f in &filters {
        previous_filters.retain(|g: &Filter| g.field != f.field);
    }
    previous_filters.extend(filters);
    let op = match (&rate, agg) {
        (Some(Fn::Rate), _) => "rate",
        (Some(Fn::Increase), _) => "increase",
        _ => "",
    };
    let measure = Measure {
        op: match agg {
            Some("avg") => Op::Avg,
            Some("max") => Op::Max,
            Some("min") => Op::Min,
            Some("count") => Op::Count,
            Some(_) => Op::Sum,
            None if by.is_some() || top.is_some() => Op::Sum,
            None => Op::List,
        },
        field: Some(name),
        percentile: None,
    };
    let mut plan = Plan {
        dataset: schema.dataset.clone(),
        connection: None,
        measure,
        filters: previous_filters,
        window,
        time_field: None,
        group_by: by,
        interval: None,
        function: (!op.is_empty()).then(|| op.to_owned()),
        limit: top,
        ascending: false,
        promql: None,
    };
    plan.promql = Some(expression(&plan));
    Ok(plan)
}

/// A label value in a PromQL string literal.
fn quoted(value: &serde_json::Value) -> String {
    let text = match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The PromQL of a metrics plan.
pub fn expression(plan: &Plan) -> String {
    let measure = &plan.measure;
    let filters = &plan.filters;
    let by = plan.group_by.as_deref();
    let top = plan.limit;
    let range_fn = plan.function.as_deref();
    let name = measure.field.clone().unwrap_or_default();
    let mut matchers: Vec<String> = Vec::new();
    for (i, f) in filters.iter().enumerate() {
        let same: Vec<&Filter> = filters
            .iter()
            .filter(|g| g.op == Cmp::Eq && f.op == Cmp::Eq && g.field == f.field)
            .collect();
        if same.len() > 1 {
            if filters.iter().position(|g| std::ptr::eq(g, same[0])) == Some(i) {
                let values: Vec<String> = same
                    .iter()
                    .map(|g| regex_escape(g.value.as_str().unwrap_or_default()))
                    .collect();
                matchers.push(format!("{}=~{}", f.field, quoted(&values.join("|").into())));
            }
            continue;
        }
        let op = if f.op == Cmp::Ne { "!=" } else { "=" };
        matchers.push(format!("{}{op}{}", f.field, quoted(&f.value)));
    }
    let mut selector = match matchers.is_empty() {
        true => name,
        false => format!("{name}{{{}}}", matchers.join(",")),
    };
    if let Some(f) = range_fn {
        selector = format!("{f}({selector}[5m])");
    }
    let agg = match measure.op {
        Op::Avg => Some("avg"),
        Op::Max => Some("max"),
        Op::Min => Some("min"),
        Op::Count => Some("count"),
        Op::Sum => Some("sum"),
        _ => None,
    };
    let mut expr = match (agg, by) {
        (Some(a), Some(by)) => format!("{a} by ({by}) ({selector})"),
        (Some(a), None) => format!("{a}({selector})"),
        (None, _) => selector,
    };
    if let Some(n) = top {
        expr = format!("topk({n}, {expr})");
    }
    expr
}

/// A label value as a literal in a PromQL regular expression.
fn regex_escape(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
