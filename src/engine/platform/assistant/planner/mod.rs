//! The planner: a question in English and the schema of a dataset (field names, types, known
//! values) in, a [`Plan`] out, or a [`Refusal`] that says what it did not understand and which
//! questions it can answer. Deterministic: the same question, schema, previous plan and time
//! give the same plan. It never guesses a field or a value it cannot match: an unknown word
//! where a field, a value or a number belongs is a refusal, so an answer is never a number about
//! something the question did not ask.
//!
//! The grammar (docs/api.md, "Conversation"): counts ("how many records are in logs", "count
//! errors"), distinct counts, averages, sums, minimums, maximums, medians and percentiles of a
//! numeric field, top-N ("top 5 hosts", "most common status", "top 3 hosts by average
//! latency"), lists ("show the latest 10 records"), filters by value ("errors", "for host b",
//! "where level is warn", "not errors"), by comparison ("latency above 500", "status >= 500")
//! and by text ("containing 'disk full'"), time windows ([`time`]), grouping ("by host"),
//! trends ("per hour", "over time", "daily"), metrics questions over metrics datasets (rates,
//! sums by a label, top-N by a label: PromQL), and follow-ups that change the previous
//! question's plan ("and for host b?", "only errors", "what about yesterday?", "by service").

pub mod check;
pub mod lexicon;
pub mod render;
pub mod time;

#[cfg(test)]
mod tests;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use self::{
    lexicon::{Token, is_stop_word, name_score, names_value, singular, tokens},
    time::Window,
};

/// How a field can be asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Full text (also matched as a whole value).
    Text,
    Keyword,
    Number,
    Date,
    Bool,
}

/// A field of the dataset as the asker sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    pub kind: Kind,
    /// Its most frequent values (text and keyword fields), for matching words to values.
    #[serde(default)]
    pub values: Vec<String>,
}

/// What the planner knows of the dataset a thread is about.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    pub dataset: String,
    /// The connection whose dataset it is (queried in place), by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
    pub fields: Vec<Field>,
    /// The field time windows and trends use (`@timestamp`, or the first date field).
    pub time_field: Option<String>,
    /// A metrics dataset: its metric names and labels (then plans are PromQL).
    pub metrics: Option<MetricsSchema>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsSchema {
    pub names: Vec<String>,
    /// Label names with their known values.
    pub labels: Vec<Field>,
}

impl Schema {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// What a plan computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Count,
    CountDistinct,
    Avg,
    Sum,
    Min,
    Max,
    Percentile,
    /// The records themselves.
    List,
    /// The distinct values of a field, with their counts.
    Values,
}

impl Op {
    /// How the answer's text names it.
    pub fn words(self) -> &'static str {
        match self {
            Op::Count => "number of records",
            Op::CountDistinct => "number of distinct values",
            Op::Avg => "average",
            Op::Sum => "sum",
            Op::Min => "minimum",
            Op::Max => "maximum",
            Op::Percentile => "percentile",
            Op::List => "records",
            Op::Values => "values",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    pub op: Op,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// For [`Op::Percentile`]: 0 to 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cmp {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    /// The text contains the value (case-insensitive).
    Contains,
}

impl Cmp {
    pub fn words(self) -> &'static str {
        match self {
            Cmp::Eq => "is",
            Cmp::Ne => "is not",
            Cmp::Gt => "is above",
            Cmp::Gte => "is at least",
            Cmp::Lt => "is below",
            Cmp::Lte => "is at most",
            Cmp::Contains => "contains",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Filter {
    pub field: String,
    pub op: Cmp,
    pub value: Value,
}

/// A question's plan: the JSON plan format a model provider is also asked for (point 5), and
/// what a monitor of kind `assistant` keeps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub dataset: String,
    /// The connection whose dataset it is: the SQL runs in place there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
    pub measure: Measure,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<Filter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    /// The field of time windows and trends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_field: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_by: Option<String>,
    /// A trend's bucket, date-math style: `1m`, `1h`, `1d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// How many groups (top-N) or records (lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Smallest first (bottom-N, least common).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ascending: bool,
    /// A metrics plan's range function: `rate` or `increase` (over 5 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// A metrics plan: the PromQL expression (a range query when `window` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promql: Option<String>,
}

/// The planner could not plan: what it did not understand, and questions it can answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub reason: String,
    pub suggestions: Vec<String>,
}

/// Words that name records in general, never a field or a value.
const GENERIC_NOUNS: &[&str] = &[
    "orders",
    "order",
    "transactions",
    "transaction",
    "purchases",
    "purchase",
    "sold",
    "bought",
    "ordered",
    "placed",
    "made",
    "through",
    "via",
    "has",
    "had",
    "got",
    "records",
    "record",
    "rows",
    "row",
    "logs",
    "log",
    "lines",
    "line",
    "entries",
    "entry",
    "events",
    "event",
    "documents",
    "document",
    "docs",
    "doc",
    "items",
    "hits",
    "hit",
    "data",
    "requests",
    "request",
    "results",
    "things",
    "values",
    "value",
    "ones",
    "dataset",
    "index",
    "table",
    "it",
    "them",
    "happened",
    "occurred",
    "recorded",
    "seen",
    "logged",
    "received",
    "stored",
    "exist",
    "exists",
    "total",
    "overall",
    "altogether",
    "so",
    "far",
    "ever",
    "here",
    "please",
    "currently",
    "right",
    "now",
    "out",
    "up",
    "got",
    "we've",
    "i've",
    "what's",
    "there's",
    "times",
    "time",
    "during",
    "within",
    "whole",
    "entire",
    "breakdown",
    "broken",
    "down",
    "grouped",
    "split",
    "each",
    "every",
    "into",
    "their",
    "them",
    "top",
    "with",
    "latest",
    "recent",
    "newest",
    "most",
    "common",
    "frequent",
    "often",
    "appears",
    "appear",
    "show",
    "list",
    "give",
    "display",
    "see",
    "trend",
    "over",
    "histogram",
    "per",
    "by",
    "and",
    "only",
    "just",
    "also",
    "what",
    "about",
    "how",
    "instead",
    "then",
    "same",
];

/// A field named in the question: where, which, how well.
#[derive(Clone, Debug)]
struct Mention {
    at: usize,
    len: usize,
    field: String,
    score: u32,
}

/// The question being read: its tokens and which are accounted for.
struct Reading<'a> {
    tokens: Vec<Token>,
    used: Vec<bool>,
    schema: &'a Schema,
    mentions: Vec<Mention>,
}

impl<'a> Reading<'a> {
    fn word(&self, i: usize) -> &str {
        match self.tokens.get(i) {
            Some(t) if !t.quoted => t.text.as_str(),
            _ => "",
        }
    }

    fn is(&self, i: usize, words: &[&str]) -> bool {
        words.contains(&self.word(i))
    }

    fn use_(&mut self, range: std::ops::Range<usize>) {
        for i in range {
            if let Some(u) = self.used.get_mut(i) {
                *u = true;
            }
        }
    }

    fn mention_at(&self, i: usize) -> Option<&Mention> {
        self.mentions.iter().find(|m| m.at == i)
    }

    fn field(&self, name: &str) -> Option<&'a Field> {
        self.schema.field(name)
    }

    /// Finds the fields the question names: for each place, the best match of one to three
    /// words; longer spans win over their parts.
    fn find_mentions(&mut self) {
        let n = self.tokens.len();
        let mut i = 0;
        while i < n {
            let mut best: Option<Mention> = None;
            for len in (1..=3).rev() {
                if i + len > n || (i..i + len).any(|j| self.used[j] || self.tokens[j].quoted) {
                    continue;
                }
                let words: Vec<&str> = (i..i + len).map(|j| self.tokens[j].text.as_str()).collect();
                if len == 1 && (is_stop_word(words[0]) && !self.exact_field(words[0])) {
                    continue;
                }
                for field in &self.schema.fields {
                    let score = name_score(&words, &field.name);
                    if score >= 4 && best.as_ref().is_none_or(|b| score > b.score) {
                        best = Some(Mention {
                            at: i,
                            len,
                            field: field.name.clone(),
                            score,
                        });
                    }
                }
                if best.as_ref().is_some_and(|b| b.len == len) {
                    break;
                }
            }
            match best {
                Some(m) => {
                    i += m.len;
                    self.mentions.push(m);
                }
                None => i += 1,
            }
        }
    }

    /// Whether `word` is a field's whole name (then even a stop word like `count` names it).
    fn exact_field(&self, word: &str) -> bool {
        self.schema
            .fields
            .iter()
            .any(|f| f.name.eq_ignore_ascii_case(word))
    }
}

fn number(text: &str) -> Option<f64> {
    text.trim_end_matches('%')
        .replace(',', "")
        .parse::<f64>()
        .ok()
}

fn json_number(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        Value::from(value as i64)
    } else {
        Value::from(value)
    }
}

/// Comparison words before a number: how many tokens they take, and the comparison.
fn comparison(reading: &Reading, i: usize) -> Option<(usize, Cmp)> {
    let w = reading.word(i);
    let next = reading.word(i + 1);
    Some(match (w, next) {
        (">", _) => (1, Cmp::Gt),
        (">=", _) => (1, Cmp::Gte),
        ("<", _) => (1, Cmp::Lt),
        ("<=", _) => (1, Cmp::Lte),
        ("=", _) | ("==", _) => (1, Cmp::Eq),
        ("!=", _) => (1, Cmp::Ne),
        ("above" | "over" | "exceeding" | "exceeds" | "beyond", _) => (1, Cmp::Gt),
        ("below" | "under" | "beneath", _) => (1, Cmp::Lt),
        ("more" | "greater" | "higher" | "larger" | "bigger", "than") => (2, Cmp::Gt),
        ("less" | "lower" | "smaller" | "fewer", "than") => (2, Cmp::Lt),
        ("at", "least") => (2, Cmp::Gte),
        ("at", "most") => (2, Cmp::Lte),
        ("equal" | "equals", "to") => (2, Cmp::Eq),
        ("equals" | "equal", _) => (1, Cmp::Eq),
        ("is" | "of" | "was", _) if number(next).is_some() => (1, Cmp::Eq),
        ("not", _) if number(next).is_some() => (1, Cmp::Ne),
        _ => return None,
    })
}

/// Reads `question` over `schema`; `previous` is the thread's previous plan (for follow-ups).
pub fn plan(
    question: &str,
    schema: &Schema,
    previous: Option<&Plan>,
    now: DateTime<Utc>,
) -> Result<Plan, Refusal> {
    let tokens = tokens(question);
    if tokens.is_empty() {
        return Err(refuse(schema, "the question is empty".to_owned()));
    }
    if schema.metrics.is_some() {
        return metrics::plan(&tokens, schema, previous, now);
    }
    let mut reading = Reading {
        used: vec![false; tokens.len()],
        tokens,
        schema,
        mentions: Vec::new(),
    };
    let follow_up = previous.is_some()
        && (reading.is(
            0,
            &["and", "only", "just", "also", "now", "but", "then", "same"],
        ) || (reading.is(0, &["what", "how"]) && reading.is(1, &["about"])));
    if reading.is(
        0,
        &["and", "only", "just", "also", "now", "but", "then", "same"],
    ) {
        reading.use_(0..1);
    }
    if reading.is(0, &["what", "how"]) && reading.is(1, &["about"]) {
        reading.use_(0..2);
    }

    // The dataset's own name (and its parts) is no field and no value.
    let dataset_words: Vec<String> = lexicon::name_parts(&schema.dataset)
        .into_iter()
        .chain([schema.dataset.to_lowercase()])
        .collect();
    for i in 0..reading.tokens.len() {
        let w = reading.word(i).to_owned();
        if dataset_words.contains(&w) || dataset_words.contains(&singular(&w)) {
            reading.use_(i..i + 1);
        }
    }

    let window = match time::window(&reading.tokens, now) {
        Some((window, used)) => {
            for i in used {
                reading.use_(i..i + 1);
            }
            Some(window)
        }
        None => None,
    };

    // Trend words: "per hour", "by day", "hourly", "over time", "trend".
    let mut interval: Option<String> = None;
    for i in 0..reading.tokens.len() {
        if reading.used[i] {
            continue;
        }
        let w = reading.word(i).to_owned();
        let unit_after = |r: &Reading, j: usize| time::unit(r.word(j)).map(|(u, _)| u);
        if matches!(w.as_str(), "per" | "by" | "each" | "every")
            && let Some(u) = unit_after(&reading, i + 1)
        {
            interval = Some(format!("1{u}"));
            reading.use_(i..i + 2);
        } else if let Some(u) = match w.as_str() {
            "hourly" => Some('h'),
            "daily" => Some('d'),
            "weekly" => Some('w'),
            "minutely" => Some('m'),
            _ => None,
        } {
            interval = Some(format!("1{u}"));
            reading.use_(i..i + 1);
        } else if w == "over" && reading.word(i + 1) == "time" {
            interval = Some(String::new());
            reading.use_(i..i + 2);
        } else if matches!(w.as_str(), "trend" | "histogram" | "timeline") {
            interval = Some(String::new());
            reading.use_(i..i + 1);
        }
    }

    reading.find_mentions();

    // "which host has the most errors", "what service has the highest average latency": the
    // top one of that field.
    let mut which = false;
    for i in 0..reading.tokens.len() {
        if reading.is(i, &["which", "what"])
            && !reading.used[i]
            && reading.mention_at(i + 1).is_some()
        {
            which = true;
            reading.use_(i..i + 1);
            break;
        }
    }

    // The measure.
    let mut measure: Option<Measure> = None;
    let mut top: Option<(u32, bool)> = None;
    let mut agg_at: Option<usize> = None;
    let mut values_of: Option<usize> = None;
    let n = reading.tokens.len();
    let mut i = 0;
    while i < n {
        if reading.used[i] || reading.mention_at(i).is_some() {
            i += 1;
            continue;
        }
        let w = reading.word(i).to_owned();
        let next = reading.word(i + 1).to_owned();
        if which && top.is_none() {
            let ascending = match w.as_str() {
                "most" | "highest" | "largest" | "biggest" | "greatest" | "top" => Some(false),
                "least" | "lowest" | "smallest" | "fewest" => Some(true),
                _ => None,
            };
            if let Some(ascending) = ascending {
                top = Some((1, ascending));
                reading.use_(i..i + 1);
                i += 1;
                continue;
            }
        }
        let op = match w.as_str() {
            "how" if next == "many" => {
                reading.use_(i..i + 2);
                if reading.is(i + 2, &["distinct", "unique", "different"]) {
                    reading.use_(i + 2..i + 3);
                    agg_at = Some(i + 3);
                    Some(Op::CountDistinct)
                } else {
                    Some(Op::Count)
                }
            }
            "count" | "number" => {
                reading.use_(i..i + 1);
                if w == "number" && next == "of" {
                    reading.use_(i + 1..i + 2);
                }
                let after = if w == "number" { i + 2 } else { i + 1 };
                let after = if reading.is(after, &["of"]) {
                    reading.use_(after..after + 1);
                    after + 1
                } else {
                    after
                };
                if reading.is(after, &["distinct", "unique", "different"]) {
                    reading.use_(after..after + 1);
                    agg_at = Some(after + 1);
                    Some(Op::CountDistinct)
                } else {
                    Some(Op::Count)
                }
            }
            "average" | "avg" | "mean" => Some(Op::Avg),
            "sum" => Some(Op::Sum),
            "total" if next != "number" => Some(Op::Sum),
            "minimum" | "min" | "lowest" | "smallest" => Some(Op::Min),
            "maximum" | "max" | "highest" | "largest" | "biggest" | "peak" => Some(Op::Max),
            "median" => Some(Op::Percentile),
            w if percentile_of(w, &next).is_some() => Some(Op::Percentile),
            "distinct" | "unique" | "different" => {
                values_of = Some(i + 1);
                reading.use_(i..i + 1);
                None
            }
            "top" | "bottom" => {
                let ascending = w == "bottom";
                let (count, take) = match number(&next) {
                    Some(n) if n >= 1.0 && n.fract() == 0.0 => (n as u32, 2),
                    _ => (10, 1),
                };
                top = Some((count, ascending));
                reading.use_(i..i + take);
                i += take;
                continue;
            }
            "most" | "least"
                if matches!(next.as_str(), "common" | "frequent" | "often" | "seen") =>
            {
                top = Some((10, w == "least"));
                reading.use_(i..i + 2);
                i += 2;
                continue;
            }
            "show" | "list" | "display" | "latest" | "recent" | "newest" => {
                reading.use_(i..i + 1);
                // "list the hosts" asks for values; "show the latest 5 records" for records.
                let mut j = i + 1;
                while reading.is(
                    j,
                    &["me", "the", "all", "latest", "recent", "newest", "last"],
                ) {
                    reading.use_(j..j + 1);
                    j += 1;
                }
                let limit = number(reading.word(j)).filter(|n| *n >= 1.0 && n.fract() == 0.0);
                if limit.is_some() {
                    reading.use_(j..j + 1);
                    j += 1;
                }
                match reading.mention_at(j).cloned() {
                    Some(m)
                        if !reading.is(
                            j + m.len,
                            &[
                                "is", "=", ">", "<", ">=", "<=", "above", "below", "over", "under",
                            ],
                        ) && limit.is_none() =>
                    {
                        values_of = Some(j);
                        None
                    }
                    _ => {
                        top = top.or(limit.map(|l| (l as u32, false)));
                        Some(Op::List)
                    }
                }
            }
            _ => None,
        };
        if let Some(op) = op {
            let percentile = match op {
                Op::Percentile if w == "median" => Some(50.0),
                Op::Percentile => percentile_of(&w, &next),
                _ => None,
            };
            if measure.is_none()
                || measure.as_ref().is_some_and(|m| m.op == Op::Count) && op != Op::Count
            {
                measure = Some(Measure {
                    op,
                    field: None,
                    percentile,
                });
                if !matches!(op, Op::Count | Op::List | Op::CountDistinct) {
                    agg_at = Some(i + 1);
                }
            }
            if !reading.used[i] {
                reading.use_(i..i + 1);
            }
            if op == Op::Percentile && w != "median" {
                // "95th percentile", "p95", "percentile 95".
                let take = if w.starts_with('p') && w.len() > 1 && w[1..].parse::<f64>().is_ok() {
                    1
                } else {
                    2
                };
                reading.use_(i..i + take);
                agg_at = Some(i + take);
            }
        }
        i += 1;
    }

    // The field of the measure: the first numeric field named after the measure word (any
    // field for distinct counts).
    if let (Some(m), Some(at)) = (measure.as_mut(), agg_at) {
        let wanted_number = m.op != Op::CountDistinct;
        let mut j = at;
        while reading.is(j, &["the", "of", "a", "all"]) {
            reading.use_(j..j + 1);
            j += 1;
        }
        let mention = reading
            .mentions
            .iter()
            .filter(|mm| mm.at >= j && !reading.used[mm.at])
            .find(|mm| {
                !wanted_number
                    || reading
                        .field(&mm.field)
                        .is_some_and(|f| f.kind == Kind::Number)
            })
            .cloned();
        match mention {
            Some(mm) if mm.at <= j + 1 => {
                m.field = Some(mm.field.clone());
                reading.use_(mm.at..mm.at + mm.len);
            }
            _ => {
                let said = reading.word(j).to_owned();
                let what = match said.is_empty() {
                    true => "nothing".to_owned(),
                    false => format!("{said:?}"),
                };
                let fields = numeric_fields(schema);
                let reason = match wanted_number {
                    true => format!(
                        "the {} of what? I found {what} where a numeric field belongs; the numeric fields of {} are {}",
                        m.op.words(),
                        schema.dataset,
                        if fields.is_empty() {
                            "none".to_owned()
                        } else {
                            fields.join(", ")
                        }
                    ),
                    false => {
                        format!("distinct values of what? I found {what} where a field belongs")
                    }
                };
                return Err(refuse(schema, reason));
            }
        }
    }

    // Values of a field ("distinct hosts", "list the hosts").
    let mut group_by: Option<String> = None;
    if let Some(at) = values_of {
        let mut j = at;
        while reading.is(j, &["the", "all"]) {
            reading.use_(j..j + 1);
            j += 1;
        }
        match reading.mention_at(j).cloned() {
            Some(m) => {
                reading.use_(m.at..m.at + m.len);
                group_by = Some(m.field.clone());
                if measure.is_none() {
                    measure = Some(Measure {
                        op: Op::Values,
                        field: Some(m.field),
                        percentile: None,
                    });
                }
            }
            None => {
                return Err(refuse(
                    schema,
                    format!(
                        "values of what? I found {:?} where a field belongs",
                        reading.word(j)
                    ),
                ));
            }
        }
    }

    // Grouping: "by host", "per host", "for each host", "grouped by host", "which host".
    for i in 0..n {
        if reading.used[i] {
            continue;
        }
        let w = reading.word(i).to_owned();
        let target = match w.as_str() {
            "by" | "per" | "across" => Some(i + 1),
            "for" | "in" if reading.is(i + 1, &["each", "every"]) => Some(i + 2),
            "each" | "every" => Some(i + 1),
            _ => None,
        };
        let Some(mut j) = target else { continue };
        while reading.is(j, &["the", "each", "every"]) {
            j += 1;
        }
        // "top 3 hosts by average latency": the measure, not a grouping.
        if let Some(m) = reading.mention_at(j).cloned() {
            if reading.used[m.at] {
                continue;
            }
            reading.use_(i..j);
            reading.use_(m.at..m.at + m.len);
            group_by = Some(m.field);
        } else if top.is_some()
            && reading.is(
                j,
                &[
                    "average", "avg", "mean", "sum", "total", "max", "maximum", "min", "minimum",
                    "count",
                ],
            )
        {
            reading.use_(i..i + 1);
        } else if matches!(w.as_str(), "by" | "per") {
            return Err(refuse(
                schema,
                format!(
                    "grouped by what? I know no field {:?} in {}",
                    reading.word(j),
                    schema.dataset
                ),
            ));
        }
    }

    // Top-N: the field right after "top N" / "most common" is what is ranked.
    if top.is_some() && measure.as_ref().is_none_or(|m| m.op != Op::List) && group_by.is_none() {
        let ranked = reading
            .mentions
            .iter()
            .find(|m| !reading.used[m.at])
            .cloned();
        match ranked {
            Some(m) => {
                reading.use_(m.at..m.at + m.len);
                group_by = Some(m.field);
            }
            None => {
                return Err(refuse(
                    schema,
                    "the top of what? name a field to rank, for example \"top 5 hosts\"".to_owned(),
                ));
            }
        }
    }

    // Filters.
    let mut filters: Vec<Filter> = Vec::new();
    let mentions = reading.mentions.clone();
    // Comparisons and values after a named field: "latency above 500", "host b", "level is
    // error", "status 500", "host = 'web-1'".
    for m in &mentions {
        if reading.used[m.at] {
            continue;
        }
        let Some(field) = reading.field(&m.field) else {
            continue;
        };
        let j = m.at + m.len;
        let mut negate = false;
        // "not on host a", "except host a".
        let before = |k: usize| m.at.checked_sub(k).map_or("", |at| reading.word(at));
        if matches!(before(1), "not" | "except" | "excluding") {
            negate = true;
            reading.use_(m.at - 1..m.at);
        } else if matches!(before(1), "on" | "for" | "from" | "in" | "with" | "of")
            && matches!(before(2), "not" | "except" | "excluding")
        {
            negate = true;
            reading.use_(m.at - 2..m.at);
        }
        if reading.is(j, &["not", "isn't", "wasn't"])
            || (reading.is(j, &["is", "was"]) && reading.is(j + 1, &["not"]))
        {
            negate = true;
        }
        // "latency is at least 250": the verb before a comparison.
        let j = match reading.is(j, &["is", "was", "are", "were"])
            && comparison(&reading, j + 1)
                .is_some_and(|(take, _)| number(reading.word(j + 1 + take)).is_some())
        {
            true => j + 1,
            false => j,
        };
        if let Some((take, cmp)) = comparison(&reading, j)
            && number(reading.word(j + take)).is_some()
            && field.kind == Kind::Number
        {
            let value = number(reading.word(j + take)).unwrap_or_default();
            // "between 100 and 200".
            filters.push(Filter {
                field: field.name.clone(),
                op: cmp,
                value: json_number(value),
            });
            reading.use_(m.at..j + take + 1);
            continue;
        }
        if field.kind == Kind::Number
            && reading.is(j, &["between"])
            && let (Some(lo), true, Some(hi)) = (
                number(reading.word(j + 1)),
                reading.is(j + 2, &["and"]),
                number(reading.word(j + 3)),
            )
        {
            filters.push(Filter {
                field: field.name.clone(),
                op: Cmp::Gte,
                value: json_number(lo),
            });
            filters.push(Filter {
                field: field.name.clone(),
                op: Cmp::Lte,
                value: json_number(hi),
            });
            reading.use_(m.at..j + 4);
            continue;
        }
        if field.kind == Kind::Number
            && let Some(value) = number(reading.word(j))
        {
            filters.push(Filter {
                field: field.name.clone(),
                op: Cmp::Eq,
                value: json_number(value),
            });
            reading.use_(m.at..j + 1);
            continue;
        }
        if matches!(field.kind, Kind::Keyword | Kind::Text | Kind::Bool) {
            let mut k = j;
            while reading.is(
                k,
                &[
                    "is", "was", "=", "==", ":", "of", "equals", "equal", "to", "not", "!=",
                    "isn't",
                ],
            ) {
                if reading.is(k, &["not", "!=", "isn't"]) {
                    negate = true;
                }
                k += 1;
            }
            let explicit = k > j;
            if let Some(token) = reading.tokens.get(k).cloned()
                && !reading.used[k]
                && reading.mention_at(k).is_none()
            {
                let known = field
                    .values
                    .iter()
                    .find(|v| names_value(&token.text, v))
                    .cloned();
                let value = match known {
                    Some(v) => Some(v),
                    None if token.quoted => Some(token.text.clone()),
                    None if explicit && !is_stop_word(&token.text) => Some(token.text.clone()),
                    None => None,
                };
                if let Some(value) = value {
                    let value = match field.kind {
                        Kind::Bool => Value::Bool(value == "true"),
                        _ => Value::String(value),
                    };
                    filters.push(Filter {
                        field: field.name.clone(),
                        op: if negate { Cmp::Ne } else { Cmp::Eq },
                        value,
                    });
                    reading.use_(m.at..k + 1);
                    continue;
                }
            }
        }
    }

    // Text: "containing X", "that mention X", "with the word X", "matching X".
    for i in 0..n {
        if reading.used[i] {
            continue;
        }
        let w = reading.word(i).to_owned();
        if !matches!(
            w.as_str(),
            "containing"
                | "contain"
                | "contains"
                | "mentioning"
                | "mention"
                | "mentions"
                | "matching"
                | "including"
                | "word"
                | "phrase"
        ) {
            continue;
        }
        let j = i + 1;
        let Some(token) = reading.tokens.get(j).cloned() else {
            continue;
        };
        // The field: one named right before ("message containing ..."), else the text field.
        let before = reading
            .mentions
            .iter()
            .find(|m| {
                m.at + m.len == i
                    && reading
                        .field(&m.field)
                        .is_some_and(|f| f.kind == Kind::Text)
            })
            .cloned();
        let field = match &before {
            Some(m) => Some(m.field.clone()),
            None => main_text_field(schema),
        };
        let Some(field) = field else {
            return Err(refuse(
                schema,
                format!(
                    "{} has no text field to search for {:?}",
                    schema.dataset, token.text
                ),
            ));
        };
        if let Some(m) = before {
            reading.use_(m.at..m.at + m.len);
        }
        filters.push(Filter {
            field,
            op: Cmp::Contains,
            value: Value::String(token.text.clone()),
        });
        reading.use_(i..j + 1);
        // "with the word", "the phrase".
        let mut k = i;
        while k > 0 && reading.is(k - 1, &["the", "with", "that", "which", "a"]) {
            reading.use_(k - 1..k);
            k -= 1;
        }
    }

    // Bare values: a word that is a known value of one field ("errors", "not warnings").
    for i in 0..n {
        if reading.used[i] || reading.mention_at(i).is_some() {
            continue;
        }
        let token = reading.tokens[i].clone();
        if !token.quoted && (is_stop_word(&token.text) || token.text.len() < 2) {
            continue;
        }
        let mut owners: Vec<(&Field, String)> = schema
            .fields
            .iter()
            .filter(|f| matches!(f.kind, Kind::Keyword | Kind::Text))
            .filter_map(|f| {
                f.values
                    .iter()
                    .find(|v| names_value(&token.text, v))
                    .map(|v| (f, v.clone()))
            })
            .collect();
        if owners.is_empty() {
            continue;
        }
        // A value of several fields: the one named in the question, else the field with the
        // fewest known values (a level before a message).
        owners.sort_by_key(|(f, _)| {
            let named = mentions.iter().any(|m| m.field == f.name);
            (!named, f.values.len())
        });
        let (field, value) = owners.swap_remove(0);
        let negate = i > 0
            && reading.is(
                i - 1,
                &["not", "non", "except", "excluding", "without", "no"],
            );
        if negate {
            reading.use_(i - 1..i);
        }
        filters.push(Filter {
            field: field.name.clone(),
            op: if negate { Cmp::Ne } else { Cmp::Eq },
            value: Value::String(value),
        });
        reading.use_(i..i + 1);
    }

    // What is left must be words that carry nothing: otherwise the question asks something
    // this planner did not understand, and answering the rest would state a wrong number.
    let mut unknown: Vec<String> = Vec::new();
    for i in 0..n {
        if reading.used[i] {
            continue;
        }
        let token = &reading.tokens[i];
        if token.quoted {
            unknown.push(format!("\"{}\"", token.text));
            continue;
        }
        let w = token.text.as_str();
        if is_stop_word(w) || GENERIC_NOUNS.contains(&w) || matches!(w, "?" | "," | "!") {
            continue;
        }
        if let Some(m) = reading.mention_at(i) {
            // A field named for nothing ("how many hosts"): counting records that have it.
            if measure.as_ref().is_some_and(|mm| mm.op == Op::Count)
                && group_by.is_none()
                && filters.is_empty()
            {
                let field = m.field.clone();
                if reading
                    .field(&field)
                    .is_some_and(|f| matches!(f.kind, Kind::Keyword | Kind::Text))
                {
                    measure = Some(Measure {
                        op: Op::CountDistinct,
                        field: Some(field),
                        percentile: None,
                    });
                    let (at, len) = (m.at, m.len);
                    reading.use_(at..at + len);
                    continue;
                }
            }
            if reading.used[i] {
                continue;
            }
            // The field of a value the question gave ("the north region").
            if filters.iter().any(|f| f.field == m.field) {
                continue;
            }
            unknown.push(w.to_owned());
            continue;
        }
        if i > 0
            && reading
                .mentions
                .iter()
                .any(|m| m.at < i && i < m.at + m.len)
        {
            continue;
        }
        unknown.push(w.to_owned());
    }
    if !unknown.is_empty() {
        return Err(refuse(
            schema,
            format!(
                "I did not understand {} in this question about {}",
                unknown
                    .iter()
                    .map(|w| format!("{w:?}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                schema.dataset
            ),
        ));
    }

    let asked_something =
        measure.is_some() || top.is_some() || interval.is_some() || group_by.is_some();
    let changes_something = !filters.is_empty() || window.is_some();
    // A short question that asks for no measure changes the previous one ("by region").
    let short = measure.is_none() && top.is_none() && reading.tokens.len() <= 4;
    let mut plan = match (
        follow_up || ((!asked_something || short) && previous.is_some()),
        previous,
    ) {
        (true, Some(previous)) if previous.promql.is_none() => {
            let mut plan = previous.clone();
            if let Some(measure) = measure.clone() {
                plan.measure = measure;
            }
            for filter in &filters {
                plan.filters.retain(|f| {
                    f.field != filter.field || f.op != filter.op && filter.op != Cmp::Eq
                });
            }
            plan.filters.extend(filters.iter().cloned());
            if window.is_some() {
                plan.window = window.clone();
            }
            if group_by.is_some() {
                plan.group_by = group_by.clone();
            }
            if let Some(interval) = &interval {
                plan.interval = Some(interval.clone());
            }
            if !asked_something && !changes_something {
                return Err(refuse(
                    schema,
                    "a follow-up that changes nothing of the previous question".to_owned(),
                ));
            }
            plan
        }
        _ => {
            if !asked_something && !changes_something {
                return Err(refuse(
                    schema,
                    "I found no question I can answer in it".to_owned(),
                ));
            }
            Plan {
                dataset: schema.dataset.clone(),
                connection: schema.connection.clone(),
                measure: measure.clone().unwrap_or(Measure {
                    op: Op::Count,
                    field: None,
                    percentile: None,
                }),
                filters,
                window,
                time_field: None,
                group_by: group_by.clone(),
                interval: interval.clone(),
                function: None,
                limit: None,
                ascending: false,
                promql: None,
            }
        }
    };
    if plan.measure.op == Op::Values && plan.measure.field.is_none() {
        plan.measure.field = plan.group_by.clone();
    }
    if let Some((limit, ascending)) = top {
        plan.limit = Some(limit);
        plan.ascending = ascending;
    }
    if plan.measure.op == Op::List {
        plan.limit = plan.limit.or(Some(10));
        // The latest first.
        plan.time_field = schema.time_field.clone();
    }
    // Trends and windows need a time field.
    if plan.window.is_some() || plan.interval.is_some() {
        match &schema.time_field {
            Some(field) => plan.time_field = Some(field.clone()),
            None => {
                return Err(refuse(
                    schema,
                    format!(
                        "{} has no time field, so I cannot place its records in time",
                        schema.dataset
                    ),
                ));
            }
        }
    }
    if plan.interval.as_deref() == Some("") {
        plan.interval = Some(auto_interval(plan.window.as_ref()));
    }
    if plan.interval.is_some()
        && plan.group_by.as_ref() == plan.measure.field.as_ref()
        && plan.measure.op == Op::Values
    {
        plan.measure = Measure {
            op: Op::Count,
            field: None,
            percentile: None,
        };
    }
    if plan.interval.is_some() && plan.measure.op == Op::Values {
        plan.measure = Measure {
            op: Op::Count,
            field: None,
            percentile: None,
        };
        plan.group_by = None;
    }
    Ok(plan)
}

/// The bucket of a trend the question gave no unit for: about 20 to 60 buckets over its window.
fn auto_interval(window: Option<&Window>) -> String {
    let from = window.and_then(|w| w.from.as_deref()).unwrap_or("");
    let span = from
        .strip_prefix("now-")
        .and_then(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let unit = rest.chars().nth(digits.len())?.to_string();
            Some(
                digits.parse::<i64>().ok()?
                    * time::unit(match unit.as_str() {
                        "m" => "minute",
                        "h" => "hour",
                        "d" => "day",
                        "w" => "week",
                        "M" => "month",
                        "y" => "year",
                        _ => "second",
                    })?
                    .1,
            )
        })
        .unwrap_or(86_400 * 7);
    match span {
        s if s <= 3_600 => "1m",
        s if s <= 86_400 => "1h",
        s if s <= 86_400 * 62 => "1d",
        _ => "1w",
    }
    .to_owned()
}

/// "p95" → 95, "95th percentile" → 95, "percentile 99" → 99.
fn percentile_of(word: &str, next: &str) -> Option<f64> {
    let in_range = |p: f64| (p > 0.0 && p < 100.0).then_some(p);
    if let Some(digits) = word.strip_prefix('p')
        && let Ok(p) = digits.parse::<f64>()
    {
        return in_range(p);
    }
    if next == "percentile" {
        let digits = word.trim_end_matches(|c: char| c.is_alphabetic());
        return digits.parse::<f64>().ok().and_then(in_range);
    }
    if word == "percentile" {
        return number(next).and_then(in_range);
    }
    None
}

/// The field "containing ..." searches when the question names none: `message`-like first.
fn main_text_field(schema: &Schema) -> Option<String> {
    let texts: Vec<&Field> = schema
        .fields
        .iter()
        .filter(|f| f.kind == Kind::Text)
        .collect();
    texts
        .iter()
        .find(|f| name_score(&["message"], &f.name) >= 6)
        .or_else(|| texts.first())
        .map(|f| f.name.clone())
}

fn numeric_fields(schema: &Schema) -> Vec<String> {
    schema
        .fields
        .iter()
        .filter(|f| f.kind == Kind::Number)
        .map(|f| f.name.clone())
        .collect()
}

/// A refusal with questions built from the schema.
pub fn refuse(schema: &Schema, reason: String) -> Refusal {
    Refusal {
        reason,
        suggestions: suggestions(schema),
    }
}

/// Questions this planner answers about `schema`, built from its fields.
pub fn suggestions(schema: &Schema) -> Vec<String> {
    let ds = &schema.dataset;
    if let Some(metrics) = &schema.metrics {
        let mut out = Vec::new();
        if let Some(name) = metrics.names.first() {
            out.push(format!("what is the rate of {name} over the last hour?"));
            if let Some(label) = metrics.labels.first() {
                out.push(format!("sum of {name} by {}", label.name));
                out.push(format!("top 3 {} by {name}", label.name));
            }
        }
        return out;
    }
    let mut out = vec![format!("how many records are in {ds}?")];
    let keyword = schema
        .fields
        .iter()
        .find(|f| matches!(f.kind, Kind::Keyword | Kind::Text) && !f.values.is_empty());
    let numeric = schema.fields.iter().find(|f| f.kind == Kind::Number);
    if let Some(k) = keyword {
        out.push(format!("top 5 {} in {ds}", k.name));
        if let Some(v) = k.values.first() {
            out.push(format!("how many records have {} {v}?", k.name));
        }
    }
    if let Some(n) = numeric {
        out.push(format!("average {} in {ds}", n.name));
        if let Some(k) = keyword {
            out.push(format!("maximum {} by {}", n.name, k.name));
        }
    }
    if schema.time_field.is_some() {
        out.push("how many records per hour in the last day?".to_owned());
    }
    out
}

mod metrics;
