//! The Query DSL's queries, compiled into tantivy queries over a dataset's document index
//! ([`super::docs`]). One compiled query serves every index of the dataset: they share a schema.
//!
//! A field is searched as text (`match`, `match_phrase`, `query_string`: the `text` field) or as
//! a keyword or typed value (`term`, `terms`, `range`, `prefix`, `wildcard`, `exists`: the `kw`
//! field); `<name>.keyword` is `<name>` as a keyword. A value may sit under another type than the
//! query's (a column that changed type keeps its older values in their old type), so a term
//! looks for the value as text and, when it reads as one, as a number, boolean or date.

use std::ops::Bound;

use serde_json::{Map, Value};
use tantivy::columnar::NumericalValue;
use tantivy::{
    DateTime, Term,
    query::{
        AllQuery, BooleanQuery, BoostQuery, ConstScoreQuery, DisjunctionMaxQuery, EmptyQuery,
        ExistsQuery, FuzzyTermQuery, Occur, PhraseQuery, Query, QueryParser, RangeQuery,
        RegexQuery, TermQuery,
    },
    query_grammar::{UserInputAst, UserInputLeaf, UserInputLiteral},
    schema::IndexRecordOption,
    tokenizer::TokenizerManager,
};

use strata_projections::table::{
    cached::CachedFilter,
    dates::{self, date_math, parse_date_millis},
    docs::{ALL_FIELD, DocsSchema, KEYWORD_FIELD, TEXT_FIELD, UNMAPPED_PATH},
    ip, text,
};

mod ranges;
mod simple;
mod spatial;

pub use spatial::{Vectors, score as vector_score};

/// A query the DSL refuses: Elasticsearch's error type and reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct DslError {
    pub kind: &'static str,
    pub reason: String,
}

fn parsing(reason: impl Into<String>) -> DslError {
    DslError {
        kind: "parsing_exception",
        reason: reason.into(),
    }
}

/// A compiled query, ready to run over any of a dataset's document indexes.
pub type DslQuery = Box<dyn Query>;

type Compiled = Result<DslQuery, DslError>;

/// Compiles the Query DSL `query` (the value of a search body's `query`); `now` (Unix
/// milliseconds) anchors relative times such as `now-1h`. A `knn` query is refused: it needs
/// the dataset's vectors ([`compile_with`]).
pub fn compile(schema: &DocsSchema, query: &Value, now: i64) -> Compiled {
    compile_with(schema, query, now, None)
}

/// Compiles `query` for one dataset, whose `vectors` answer its `knn` queries.
pub fn compile_with(
    schema: &DocsSchema,
    query: &Value,
    now: i64,
    vectors: Option<&dyn Vectors>,
) -> Compiled {
    Ok(compile_named(schema, query, now, vectors)?.0)
}

/// A query's parts named with `_name`, each compiled alone, in the order they appear: a hit's
/// `matched_queries` are those that match it.
pub type NamedQueries = Vec<(String, DslQuery)>;

/// Compiles `query` as [`compile_with`] does, with its named parts.
pub fn compile_named(
    schema: &DocsSchema,
    query: &Value,
    now: i64,
    vectors: Option<&dyn Vectors>,
) -> Result<(DslQuery, NamedQueries), DslError> {
    let compiler = Compiler {
        schema,
        now,
        vectors,
        named: Default::default(),
    };
    let compiled = compiler.query(query)?;
    Ok((compiled, compiler.named.into_inner()))
}

struct Compiler<'a> {
    schema: &'a DocsSchema,
    now: i64,
    vectors: Option<&'a dyn Vectors>,
    /// The parts named with `_name` met so far.
    named: std::cell::RefCell<NamedQueries>,
}

/// The `_name` a query's body gives it: beside its options (`bool`, `query_string`, ...), or
/// among its field's (`{"term": {"f": {"value": 1, "_name": "n"}}}`).
fn query_name(body: &Value) -> Option<String> {
    let Value::Object(object) = body else {
        return None;
    };
    let named = |value: &Value| {
        value
            .get("_name")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    named(body).or_else(|| object.values().filter(|v| v.is_object()).find_map(named))
}

/// The one key of a query object and its value.
fn single<'v>(
    object: &'v Map<String, Value>,
    what: &str,
) -> Result<(&'v str, &'v Value), DslError> {
    let mut entries = object.iter();
    match (entries.next(), entries.next()) {
        (Some((key, value)), None) => Ok((key.as_str(), value)),
        _ => Err(parsing(format!(
            "[{what}] query must hold exactly one field, not {}",
            object.len()
        ))),
    }
}

/// A field's name in a keyword query: `status.keyword` is `status`.
impl Compiler<'_> {
    fn query(&self, query: &Value) -> Compiled {
        let Value::Object(object) = query else {
            return Err(parsing(format!(
                "a query must be a JSON object, not {query}"
            )));
        };
        let (kind, body) = single(object, "query")?;
        let compiled = match kind {
            "match_all" => Ok(Box::new(AllQuery) as Box<dyn Query>),
            "match_none" => Ok(Box::new(EmptyQuery) as Box<dyn Query>),
            "term" => self.field_query(kind, body, "value", |c, field, value, _| {
                Ok(c.term(field, value))
            }),
            "terms" => self.terms(body),
            "range" => self.range(body),
            "exists" => self.exists(body),
            "prefix" => self.field_query(kind, body, "value", |c, field, value, _| {
                c.pattern(field, value, false)
            }),
            "wildcard" => self.field_query(kind, body, "value", |c, field, value, _| {
                c.pattern(field, value, true)
            }),
            "regexp" => self.field_query(kind, body, "value", |c, field, value, _| {
                c.regexp(field, value)
            }),
            "match" => self.field_query(kind, body, "query", |c, field, value, options| {
                c.matching(field, value, options)
            }),
            "match_bool_prefix" => {
                self.field_query(kind, body, "query", |c, field, value, options| {
                    c.bool_prefix(field, value, options)
                })
            }
            "match_phrase" => self.field_query(kind, body, "query", |c, field, value, options| {
                c.phrase(field, value, options)
            }),
            "query_string" => self.query_string(body),
            "simple_query_string" => self.simple_query_string(body),
            "constant_score" => self.constant_score(body),
            "ids" => self.ids(body),
            "multi_match" => self.multi_match(body),
            "bool" => self.boolean(body),
            "geo_distance" => self.geo_distance(body),
            "geo_bounding_box" => self.geo_bounding_box(body),
            "knn" => self.knn(body),
            other => Err(DslError {
                kind: "parsing_exception",
                reason: format!("unknown query [{other}]"),
            }),
        }?;
        let compiled = boosted(compiled, body);
        if let Some(name) = query_name(body) {
            self.named.borrow_mut().push((name, compiled.box_clone()));
        }
        Ok(compiled)
    }

    /// `{field: value}` or `{field: {<value_key>: value, ...options}}`.
    fn field_query(
        &self,
        kind: &str,
        body: &Value,
        value_key: &str,
        build: impl Fn(&Self, &str, &Value, &Map<String, Value>) -> Compiled,
    ) -> Compiled {
        let Value::Object(object) = body else {
            return Err(parsing(format!("[{kind}] query must be an object")));
        };
        let (field, spec) = single(object, kind)?;
        let empty = Map::new();
        match spec {
            Value::Object(options) => {
                let value = options.get(value_key).ok_or_else(|| {
                    parsing(format!("[{kind}] query on [{field}] has no [{value_key}]"))
                })?;
                build(self, field, value, options)
            }
            value => build(self, field, value, &empty),
        }
    }

    fn keyword_term(&self, path: &str) -> Term {
        Term::from_field_json_path(self.schema.keyword, path, true)
    }

    fn text_term(&self, path: &str) -> Term {
        Term::from_field_json_path(self.schema.text, path, true)
    }

    /// Addresses of IP field `path` from `lower` to `upper` (see [`super::ip`]).
    fn ip_range(&self, path: &str, lower: Bound<u128>, upper: Bound<u128>) -> Box<dyn Query> {
        let bound = |b: Bound<u128>| {
            b.map(|n| {
                let mut term = Term::from_field_json_path(self.schema.ip, path, true);
                term.append_type_and_str(&ip::sortable(n));
                term
            })
        };
        Box::new(RangeQuery::new(bound(lower), bound(upper)))
    }

    /// Matches `value` exactly: as a keyword, and as the number, boolean or date it reads as.
    fn term(&self, field: &str, value: &Value) -> Box<dyn Query> {
        let path = self.schema.path(field);
        // On a range field: the ranges that hold the value.
        if let Some(kind) = self.schema.range_type(path) {
            let range = ranges::RangeField {
                schema: self.schema,
                path,
            };
            return match self.range_point(field, kind, value, false, &Map::new()) {
                Ok(point) => constant(range.query(
                    Bound::Included(point),
                    Bound::Included(point),
                    ranges::Relation::Intersects,
                )),
                Err(_) => Box::new(EmptyQuery),
            };
        }
        let mut alternatives: Vec<Box<dyn Query>> = Vec::new();
        let mut add = |term: Term| {
            alternatives.push(Box::new(TermQuery::new(term, IndexRecordOption::Basic)));
        };
        let text = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut keyword = self.keyword_term(path);
        keyword.append_type_and_str(&text);
        add(keyword);
        // Records hold numbers as i64 or f64, and tantivy indexes a double in its canonical
        // form (a whole one as an integer, as a u64 above i64::MAX): the query term does too.
        let number = match text.parse::<i64>() {
            Ok(n) => Some(NumericalValue::I64(n)),
            Err(_) => text
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(|f| NumericalValue::F64(f).normalize()),
        };
        // A half_float or float field holds its numbers at its precision: so does the query.
        // The value as written is looked for too, in document indexes built before fields were
        // rounded.
        let rounded = match (number, self.schema.rounding(path)) {
            (Some(number), Some(rounding)) => {
                let raw = match number {
                    NumericalValue::I64(n) => n as f64,
                    NumericalValue::U64(n) => n as f64,
                    NumericalValue::F64(f) => f,
                };
                Some(NumericalValue::F64(rounding.round(raw)).normalize())
            }
            _ => None,
        };
        for number in number.into_iter().chain(rounded) {
            let mut term = self.keyword_term(path);
            match number {
                NumericalValue::I64(n) => term.append_type_and_fast_value(n),
                NumericalValue::U64(n) => term.append_type_and_fast_value(n),
                NumericalValue::F64(f) => term.append_type_and_fast_value(f),
            }
            add(term);
        }
        if let Ok(b) = text.parse::<bool>() {
            let mut term = self.keyword_term(path);
            term.append_type_and_fast_value(b);
            add(term);
        }
        if let Some(ms) = parse_date_millis(&text) {
            alternatives.push(self.date_range(path, Bound::Included(ms), Bound::Included(ms)));
        }
        // An IP address, or a CIDR block of them.
        let addresses = ip::number(&text)
            .map(|n| (n, n))
            .or_else(|| ip::block(&text));
        if let Some((lo, hi)) = addresses {
            alternatives.push(self.ip_range(path, Bound::Included(lo), Bound::Included(hi)));
        }
        constant(any_of(alternatives))
    }

    fn terms(&self, body: &Value) -> Compiled {
        let Value::Object(object) = body else {
            return Err(parsing("[terms] query must be an object"));
        };
        let fields: Vec<(&String, &Value)> = object.iter().filter(|(k, _)| *k != "boost").collect();
        let [(field, values)] = fields.as_slice() else {
            return Err(parsing("[terms] query must hold exactly one field"));
        };
        let Value::Array(values) = values else {
            return Err(parsing(format!(
                "[terms] query on [{field}] needs an array of values"
            )));
        };
        Ok(constant(any_of(
            values.iter().map(|v| self.term(field, v)).collect(),
        )))
    }

    fn exists(&self, body: &Value) -> Compiled {
        let field = body
            .get("field")
            .and_then(Value::as_str)
            .ok_or_else(|| parsing("[exists] query needs a [field]"))?;
        let path = format!("{KEYWORD_FIELD}.{}", self.schema.path(field));
        Ok(Box::new(ConstScoreQuery::new(
            Box::new(ExistsQuery::new(path, true)),
            1.0,
        )))
    }

    /// A prefix (`wildcard` false) or a wildcard pattern (`*`, `?`) on a keyword.
    fn pattern(&self, field: &str, value: &Value, wildcard: bool) -> Compiled {
        let Some(text) = value.as_str() else {
            return Err(parsing(format!(
                "the pattern of [{field}] must be a string, not {value}"
            )));
        };
        let mut regex = String::new();
        for c in text.chars() {
            match c {
                '*' if wildcard => regex.push_str(".*"),
                '?' if wildcard => regex.push('.'),
                c => regex.push_str(&regex_syntax_escape(c)),
            }
        }
        if !wildcard {
            regex.push_str(".*");
        }
        // Terms of a JSON field are its path (segments joined by \x01), \x00, the type, the value.
        let path = self.schema.path(field).replace('.', "\u{1}");
        let pattern = format!("{}\u{0}s{regex}", regex_syntax_escape_str(&path));
        let query = RegexQuery::from_pattern(&pattern, self.schema.keyword)
            .map_err(|e| parsing(format!("invalid pattern [{text}]: {e}")))?;
        Ok(constant(Box::new(query)))
    }

    /// `regexp`: a regular expression that matches a whole keyword, or a whole word of the
    /// text.
    fn regexp(&self, field: &str, value: &Value) -> Compiled {
        let Some(regex) = value.as_str() else {
            return Err(parsing(format!(
                "the regular expression of [{field}] must be a string, not {value}"
            )));
        };
        check_regex_length(regex)?;
        // Terms of a JSON field are its path (segments joined by \x01), \x00, the type, the value.
        let path = regex_syntax_escape_str(&self.schema.path(field).replace('.', "\u{1}"));
        let pattern = format!("{path}\u{0}s(?:{regex})");
        let invalid = |e: tantivy::TantivyError| {
            parsing(format!("invalid regular expression [{regex}]: {e}"))
        };
        let keyword = RegexQuery::from_pattern(&pattern, self.schema.keyword).map_err(invalid)?;
        let text = RegexQuery::from_pattern(&pattern, self.schema.text).map_err(invalid)?;
        Ok(constant(any_of(vec![Box::new(keyword), Box::new(text)])))
    }

    /// `match`: the query's terms, any (or all, with `operator: and`) of them.
    fn matching(&self, field: &str, value: &Value, options: &Map<String, Value>) -> Compiled {
        let text = scalar_text(field, value)?;
        let path = self.schema.path(field);
        // A keyword-only field (`_id`) is not analyzed: its value is matched whole.
        if self.schema.is_keyword_only(path) {
            return Ok(self.term(field, value));
        }
        let tokens = analyze_with(&text, options)?;
        let mut clauses: Vec<Box<dyn Query>> = tokens
            .iter()
            .map(|token| self.word(path, token, options))
            .collect::<Result<_, _>>()?;
        // A number (or boolean, or date) field matches its value too.
        if !matches!(value, Value::String(_)) || tokens.len() <= 1 {
            let exact = self.term(field, value);
            if clauses.is_empty() {
                return Ok(exact);
            }
            if tokens.len() == 1 {
                clauses = vec![any_of(vec![clauses.remove(0), exact])];
            }
        }
        self.words_query(clauses, options)
    }

    /// A word of a match-family query on the text of `path`: the word itself, or within
    /// `fuzziness` edits of it.
    fn word(&self, path: &str, token: &str, options: &Map<String, Value>) -> Compiled {
        let mut term = self.text_term(path);
        term.append_type_and_str(token);
        Ok(match fuzziness(options, token)? {
            Some(distance) if distance > 0 => {
                let transpositions = options
                    .get("fuzzy_transpositions")
                    .and_then(Value::as_bool)
                    .unwrap_or(true);
                Box::new(FuzzyTermQuery::new(term, distance, transpositions))
            }
            _ => Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)),
        })
    }

    /// `match_bool_prefix`: the words of the text, the last one as a prefix, any (or all, with
    /// `operator: and`) of them.
    fn bool_prefix(&self, field: &str, value: &Value, options: &Map<String, Value>) -> Compiled {
        let text = scalar_text(field, value)?;
        let path = self.schema.path(field);
        // A keyword-only field's whole value is the one word, and so the prefix.
        if self.schema.is_keyword_only(path) {
            return self.pattern(field, &Value::String(text), false);
        }
        let mut tokens = analyze_with(&text, options)?;
        let Some(last) = tokens.pop() else {
            return Ok(Box::new(EmptyQuery));
        };
        let mut clauses: Vec<Box<dyn Query>> = tokens
            .iter()
            .map(|token| self.word(path, token, options))
            .collect::<Result<_, _>>()?;
        let mut term = self.text_term(path);
        term.append_type_and_str(&last);
        clauses.push(Box::new(FuzzyTermQuery::new_prefix(term, 0, true)));
        self.words_query(clauses, options)
    }

    /// The clauses of a match-family query joined as `operator` and `minimum_should_match`
    /// say.
    fn words_query(&self, clauses: Vec<Box<dyn Query>>, options: &Map<String, Value>) -> Compiled {
        if clauses.is_empty() {
            return Ok(Box::new(EmptyQuery));
        }
        let and = is_and(options.get("operator"));
        let occur = if and { Occur::Must } else { Occur::Should };
        let count = clauses.len();
        let mut query = BooleanQuery::new(clauses.into_iter().map(|q| (occur, q)).collect());
        if !and && let Some(minimum) = options.get("minimum_should_match") {
            query.set_minimum_number_should_match(minimum_should_match(minimum, count)?);
        }
        Ok(Box::new(query))
    }

    fn phrase(&self, field: &str, value: &Value, options: &Map<String, Value>) -> Compiled {
        let text = scalar_text(field, value)?;
        let path = self.schema.path(field);
        if self.schema.is_keyword_only(path) {
            return Ok(self.term(field, value));
        }
        let tokens = analyze(&text);
        let terms: Vec<(usize, Term)> = tokens
            .iter()
            .enumerate()
            .map(|(i, token)| {
                let mut term = self.text_term(path);
                term.append_type_and_str(token);
                (i, term)
            })
            .collect();
        match terms.len() {
            0 => Ok(Box::new(EmptyQuery)),
            1 => Ok(Box::new(TermQuery::new(
                terms[0].1.clone(),
                IndexRecordOption::WithFreqs,
            ))),
            _ => {
                let slop = options.get("slop").and_then(Value::as_u64).unwrap_or(0) as u32;
                Ok(Box::new(PhraseQuery::new_with_offset_and_slop(terms, slop)))
            }
        }
    }

    fn date_range(&self, path: &str, lower: Bound<i64>, upper: Bound<i64>) -> Box<dyn Query> {
        let bound = |b: Bound<i64>| {
            b.map(|ms| {
                let mut term = self.keyword_term(path);
                // A bound past what an index holds is its end.
                let ms = ms.clamp(dates::MIN_MILLIS, dates::MAX_MILLIS);
                term.append_type_and_fast_value(DateTime::from_timestamp_millis(ms));
                term
            })
        };
        Box::new(RangeQuery::new(bound(lower), bound(upper)))
    }

    fn range(&self, body: &Value) -> Compiled {
        let Value::Object(object) = body else {
            return Err(parsing("[range] query must be an object"));
        };
        let (field, spec) = single(object, "range")?;
        let Value::Object(spec) = spec else {
            return Err(parsing(format!(
                "[range] query on [{field}] must be an object"
            )));
        };
        let path = self.schema.path(field);
        if let Some(kind) = self.schema.range_type(path) {
            return self.range_field(field, path, kind, spec);
        }
        let mut lower = (Bound::Unbounded, None::<&Value>);
        let mut upper = (Bound::Unbounded, None::<&Value>);
        for (key, value) in spec {
            match key.as_str() {
                "gte" | "from" => lower = (Bound::Included(()), Some(value)),
                "gt" => lower = (Bound::Excluded(()), Some(value)),
                "lte" | "to" => upper = (Bound::Included(()), Some(value)),
                "lt" => upper = (Bound::Excluded(()), Some(value)),
                "format" | "time_zone" | "boost" | "relation" | "_name" => {}
                other => {
                    return Err(parsing(format!("[range] query does not support [{other}]")));
                }
            }
        }
        let bounds = [lower, upper].map(|(bound, value)| match value {
            Some(Value::Null) | None => Bound::Unbounded,
            Some(value) => bound.map(|()| value.clone()),
        });
        let [lower, upper] = bounds;
        let rounding_up = |b: &Bound<Value>| matches!(b, Bound::Included(_));
        let mut alternatives: Vec<Box<dyn Query>> = Vec::new();
        // As numbers.
        let number = |v: &Value| match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        if let (Some(lo), Some(hi)) = (convert(&lower, number), convert(&upper, number)) {
            let bound = |b: Bound<f64>| {
                b.map(|f| {
                    let mut term = self.keyword_term(path);
                    term.append_type_and_fast_value(f);
                    term
                })
            };
            alternatives.push(Box::new(RangeQuery::new(bound(lo), bound(hi))));
        }
        // As dates (in the query's `format`, or milliseconds, date strings, date math).
        let format = match spec.get("format").and_then(Value::as_str) {
            Some(text) => Some(
                dates::DateFormat::parse(text)
                    .map_err(|reason| parsing(format!("[range] [format]: {reason}")))?,
            ),
            None => None,
        };
        let formatted = |v: &Value| format.as_ref().and_then(|f| f.read(v));
        let now = self.now;
        let lower_date = convert(&lower, |v| {
            formatted(v).or_else(|| date_bound(v, now, false))
        });
        let upper_date = convert(&upper, |v| {
            formatted(v).or_else(|| date_bound(v, now, rounding_up(&upper)))
        });
        if let (Some(lo), Some(hi)) = (lower_date, upper_date) {
            alternatives.push(self.date_range(path, lo, hi));
        }
        // As IP addresses.
        let address = |v: &Value| v.as_str().and_then(ip::number);
        if let (Some(lo), Some(hi)) = (convert(&lower, address), convert(&upper, address)) {
            alternatives.push(self.ip_range(path, lo, hi));
        }
        // As keywords.
        let keyword = |v: &Value| v.as_str().map(str::to_owned);
        if let (Some(lo), Some(hi)) = (convert(&lower, keyword), convert(&upper, keyword)) {
            let bound = |b: Bound<String>| {
                b.map(|s| {
                    let mut term = self.keyword_term(path);
                    term.append_type_and_str(&s);
                    term
                })
            };
            alternatives.push(Box::new(RangeQuery::new(bound(lo), bound(hi))));
        }
        if alternatives.is_empty() {
            return Err(parsing(format!(
                "[range] query on [{field}]: the bounds are neither numbers, dates nor strings"
            )));
        }
        Ok(constant(any_of(alternatives)))
    }

    /// A `range` query on a range field: the records whose range relates to the query's as
    /// its `relation` says (see [`ranges`]).
    fn range_field(
        &self,
        field: &str,
        path: &str,
        kind: &str,
        spec: &Map<String, Value>,
    ) -> Compiled {
        let mut lower = Bound::Unbounded;
        let mut upper = Bound::Unbounded;
        for (key, value) in spec {
            let rounding_up = matches!(key.as_str(), "lte" | "to" | "gt");
            let point = || self.range_point(field, kind, value, rounding_up, spec);
            match key.as_str() {
                _ if value.is_null() => {}
                "gte" | "from" => lower = Bound::Included(point()?),
                "gt" => lower = Bound::Excluded(point()?),
                "lte" | "to" => upper = Bound::Included(point()?),
                "lt" => upper = Bound::Excluded(point()?),
                "format" | "time_zone" | "boost" | "relation" | "_name" | "include_lower"
                | "include_upper" => {}
                other => {
                    return Err(parsing(format!("[range] query does not support [{other}]")));
                }
            }
        }
        let relation = ranges::Relation::parse(spec.get("relation").and_then(Value::as_str))?;
        let range = ranges::RangeField {
            schema: self.schema,
            path,
        };
        Ok(constant(range.query(lower, upper, relation)))
    }

    /// A value of a query on the range field `field` of type `kind`, as its bounds' type: a
    /// date (in the query's `format`, date math, milliseconds), or a number.
    fn range_point(
        &self,
        field: &str,
        kind: &str,
        value: &Value,
        round_up: bool,
        spec: &Map<String, Value>,
    ) -> Result<ranges::Point, DslError> {
        let number = match value {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        let point = match kind {
            "date_range" => {
                let format = match spec.get("format").and_then(Value::as_str) {
                    Some(text) => Some(
                        dates::DateFormat::parse(text)
                            .map_err(|reason| parsing(format!("[range] [format]: {reason}")))?,
                    ),
                    None => None,
                };
                format
                    .and_then(|f| f.read(value))
                    .or_else(|| date_bound(value, self.now, round_up))
                    .map(ranges::Point::Date)
            }
            "long_range" | "integer_range" => number
                .filter(|f| f.fract() == 0.0)
                .map(|f| ranges::Point::Long(f as i64)),
            _ => number.map(ranges::Point::Double),
        };
        point.ok_or_else(|| {
            parsing(format!(
                "[range] query on the [{kind}] field [{field}]: {value} is not one of its values"
            ))
        })
    }

    fn boolean(&self, body: &Value) -> Compiled {
        let Value::Object(object) = body else {
            return Err(parsing("[bool] query must be an object"));
        };
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut should = 0;
        for (key, value) in object {
            let (occur, scores) = match key.as_str() {
                "must" => (Occur::Must, true),
                "filter" => (Occur::Must, false),
                "should" => (Occur::Should, true),
                "must_not" => (Occur::MustNot, false),
                "minimum_should_match" | "boost" | "_name" | "adjust_pure_negative" => continue,
                other => return Err(parsing(format!("[bool] query does not support [{other}]"))),
            };
            let queries: Vec<&Value> = match value {
                Value::Array(items) => items.iter().collect(),
                other => vec![other],
            };
            for query in queries {
                let compiled = self.query(query)?;
                let compiled: Box<dyn Query> = match scores {
                    true => compiled,
                    false => Box::new(ConstScoreQuery::new(compiled, 0.0)),
                };
                if occur == Occur::Should {
                    should += 1;
                }
                clauses.push((occur, compiled));
            }
        }
        let positive = clauses.iter().any(|(o, _)| *o != Occur::MustNot);
        if !positive {
            // Only exclusions: everything else matches.
            clauses.push((
                Occur::Must,
                Box::new(ConstScoreQuery::new(Box::new(AllQuery), 0.0)),
            ));
        }
        let mut query = BooleanQuery::new(clauses);
        if let Some(minimum) = object.get("minimum_should_match") {
            query.set_minimum_number_should_match(minimum_should_match(minimum, should)?);
        }
        Ok(Box::new(query))
    }

    /// `constant_score`: its `filter`, every match scoring the query's `boost` (1 by default;
    /// applied by the caller).
    fn constant_score(&self, body: &Value) -> Compiled {
        let filter = body
            .get("filter")
            .ok_or_else(|| parsing("[constant_score] requires a 'filter' element"))?;
        Ok(Box::new(ConstScoreQuery::new(self.query(filter)?, 1.0)))
    }

    /// `ids`: records whose `_id` is one of `values`.
    fn ids(&self, body: &Value) -> Compiled {
        let values = body
            .get("values")
            .and_then(Value::as_array)
            .ok_or_else(|| parsing("[ids] query needs a [values] array"))?;
        Ok(constant(any_of(
            values.iter().map(|v| self.term("_id", v)).collect(),
        )))
    }

    /// `multi_match`: `match` on each of `fields` (`name^boost` boosts one), the best field's
    /// score counting (`best_fields`, the default), or their sum (`most_fields`); `phrase`
    /// matches each field as a phrase. Without `fields`, every string of the record.
    fn multi_match(&self, body: &Value) -> Compiled {
        let Value::Object(options) = body else {
            return Err(parsing("[multi_match] query must be an object"));
        };
        let query = options
            .get("query")
            .ok_or_else(|| parsing("[multi_match] requires a [query]"))?;
        let kind = options
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("best_fields");
        let fields: Vec<String> = match options.get("fields") {
            None => Vec::new(),
            Some(Value::Array(fields)) => fields
                .iter()
                .map(|f| f.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| parsing("[multi_match] fields must be names"))?,
            Some(Value::String(one)) => vec![one.clone()],
            Some(other) => {
                return Err(parsing(format!(
                    "[multi_match] fields must be names, not {other}"
                )));
            }
        };
        let fields = match (
            fields.is_empty() || fields.iter().any(|f| f == "*"),
            self.schema.catch_all(),
        ) {
            // A reader who may not search some fields searches the others, not `all`.
            (true, Some([])) => return Ok(Box::new(EmptyQuery)),
            (true, Some(strings)) => strings.to_vec(),
            _ => fields,
        };
        if fields.is_empty() || fields.iter().any(|f| f == "*") {
            let text = scalar_text("*", query)?;
            let parser = self.all_strings_parser(is_and(options.get("operator")));
            let terms = analyze(&text).join(" ");
            return parser
                .parse_query(&terms)
                .map_err(|e| parsing(e.to_string()));
        }
        if kind == "bool_prefix" {
            for key in ["slop", "cutoff_frequency"] {
                if options.contains_key(key) {
                    return Err(parsing(format!(
                        "[{key}] not allowed for type [bool_prefix]"
                    )));
                }
            }
        }
        let mut per_field = Vec::with_capacity(fields.len());
        for field in &fields {
            if field.contains('*') {
                return Err(parsing(format!(
                    "[multi_match] field patterns such as [{field}] are not supported yet"
                )));
            }
            let (name, boost) = match field.split_once('^') {
                Some((name, boost)) => (
                    name,
                    boost
                        .parse::<f32>()
                        .map_err(|_| parsing(format!("invalid boost in [{field}]")))?,
                ),
                None => (field.as_str(), 1.0),
            };
            let compiled = match kind {
                "phrase" => self.phrase(name, query, options)?,
                "best_fields" | "most_fields" | "cross_fields" => {
                    self.matching(name, query, options)?
                }
                "bool_prefix" => self.bool_prefix(name, query, options)?,
                other => {
                    return Err(parsing(format!(
                        "[multi_match] type [{other}] is not supported"
                    )));
                }
            };
            per_field.push(match boost == 1.0 {
                true => compiled,
                false => Box::new(BoostQuery::new(compiled, boost)) as Box<dyn Query>,
            });
        }
        Ok(match kind {
            // bool_prefix scores as most_fields does.
            "most_fields" | "cross_fields" | "bool_prefix" => any_of(per_field),
            _ => Box::new(DisjunctionMaxQuery::new(per_field)),
        })
    }

    /// A query parser whose words without a field search every string of the record, all of
    /// them required with `and`.
    fn all_strings_parser(&self, and: bool) -> QueryParser {
        // A reader who may not search some fields has no field-less default: `rewrite` names
        // the fields it may search instead.
        let defaults = match self.schema.catch_all() {
            None => vec![self.schema.all],
            Some(_) => Vec::new(),
        };
        let mut parser = QueryParser::new(
            self.schema.schema.clone(),
            defaults,
            TokenizerManager::default(),
        );
        if and {
            parser.set_conjunction_by_default();
        }
        parser
    }

    fn query_string(&self, body: &Value) -> Compiled {
        let text = body
            .get("query")
            .and_then(Value::as_str)
            .ok_or_else(|| parsing("[query_string] needs a [query] string"))?;
        let default_field = body
            .get("default_field")
            .and_then(Value::as_str)
            .filter(|f| *f != "*")
            .map(str::to_owned);
        if nesting(text) > MAX_QUERY_STRING_DEPTH {
            return Err(parsing(format!(
                "[query_string] nests parentheses deeper than {MAX_QUERY_STRING_DEPTH} levels, the limit"
            )));
        }
        let ast = tantivy::query_grammar::parse_query(text).map_err(|_| DslError {
            kind: "query_shard_exception",
            reason: format!("Failed to parse query [{text}]"),
        })?;
        check_regexes(&ast)?;
        let ast = rewrite(ast, default_field.as_deref(), self.schema);
        let and = is_and(body.get("default_operator"));
        self.user_input(ast, &self.all_strings_parser(and), and, text)
    }

    /// A parsed `query_string` as a query: clauses and boosts as tantivy's parser builds them,
    /// each leaf by the parser but for regular expressions, which are `regexp` queries on the
    /// field (tantivy's parser takes none on a JSON field).
    fn user_input(
        &self,
        ast: UserInputAst,
        parser: &QueryParser,
        and: bool,
        text: &str,
    ) -> Compiled {
        Ok(match ast {
            UserInputAst::Clause(clauses) => {
                let default = if and { Occur::Must } else { Occur::Should };
                let mut subqueries = clauses
                    .into_iter()
                    .map(|(occur, ast)| {
                        Ok((
                            occur.unwrap_or(default),
                            self.user_input(ast, parser, and, text)?,
                        ))
                    })
                    .collect::<Result<Vec<(Occur, Box<dyn Query>)>, DslError>>()?;
                // Only exclusions: everything else.
                if subqueries.iter().all(|(occur, _)| *occur == Occur::MustNot) {
                    subqueries.push((Occur::Must, Box::new(AllQuery)));
                }
                Box::new(BooleanQuery::new(subqueries))
            }
            UserInputAst::Boost(inner, boost) => Box::new(BoostQuery::new(
                self.user_input(*inner, parser, and, text)?,
                boost.into_inner() as f32,
            )),
            UserInputAst::Leaf(leaf) => {
                let build = |leaf: UserInputLeaf| {
                    parser
                        .build_query_from_user_input_ast(UserInputAst::Leaf(Box::new(leaf)))
                        .map_err(|e| DslError {
                            kind: "query_shard_exception",
                            reason: format!("Failed to parse query [{text}]: {e}"),
                        })
                };
                match *leaf {
                    UserInputLeaf::Regex { field, pattern } => {
                        let field = field.ok_or_else(|| DslError {
                            kind: "query_shard_exception",
                            reason: format!(
                                "Failed to parse query [{text}]: a regular expression needs a field"
                            ),
                        })?;
                        self.regexp(&field, &Value::String(pattern))?
                    }
                    UserInputLeaf::Literal(literal) => match typed_value(&literal) {
                        // A value on a field, which `text` holds only if it is a string:
                        // numbers, booleans and dates are matched as `term` matches them, in
                        // `kw`.
                        Some((path, value)) => {
                            let exact = self.term(&path, &Value::String(value));
                            any_of(vec![build(UserInputLeaf::Literal(literal))?, exact])
                        }
                        None => build(UserInputLeaf::Literal(literal))?,
                    },
                    leaf => build(leaf)?,
                }
            }
        })
    }
}

/// The longest regular expression a query may hold (Elasticsearch's `index.max_regex_length`):
/// a longer one costs much to compile, for what is most likely a mistake.
const MAX_REGEX_LENGTH: usize = 1000;

fn check_regex_length(regex: &str) -> Result<(), DslError> {
    let length = regex.chars().count();
    if length > MAX_REGEX_LENGTH {
        return Err(DslError {
            kind: "illegal_argument_exception",
            reason: format!(
                "The length of regex [{length}] used in the Regexp Query request has exceeded the allowed maximum of [{MAX_REGEX_LENGTH}]. This maximum can be set by changing the [index.max_regex_length] index level setting."
            ),
        });
    }
    Ok(())
}

/// Checks the length of every regular expression of a query string.
fn check_regexes(ast: &UserInputAst) -> Result<(), DslError> {
    match ast {
        UserInputAst::Clause(clauses) => clauses.iter().try_for_each(|(_, ast)| check_regexes(ast)),
        UserInputAst::Boost(inner, _) => check_regexes(inner),
        UserInputAst::Leaf(leaf) => match &**leaf {
            UserInputLeaf::Regex { pattern, .. } => check_regex_length(pattern),
            _ => Ok(()),
        },
    }
}

/// Names the fields of a `query_string` as the document index has them: a word without a field
/// searches every string (`all`), or `default_field`; `field:word` searches `field` as text;
/// ranges, sets and `_exists_` read keywords and typed values.
fn rewrite(ast: UserInputAst, default_field: Option<&str>, schema: &DocsSchema) -> UserInputAst {
    let text_field = |field: Option<String>| match field.as_deref().or(default_field) {
        None => Some(ALL_FIELD.to_owned()),
        Some(name) => match name.strip_suffix(".keyword").is_some()
            || schema.is_keyword_only(schema.path(name))
        {
            true => Some(format!("{KEYWORD_FIELD}.{}", schema.path(name))),
            false => Some(format!("{TEXT_FIELD}.{}", schema.path(name))),
        },
    };
    let keyword_field = |field: Option<String>| {
        field
            .as_deref()
            .or(default_field)
            .map(|name| format!("{KEYWORD_FIELD}.{}", schema.path(name)))
    };
    match ast {
        UserInputAst::Clause(clauses) => UserInputAst::Clause(
            clauses
                .into_iter()
                .map(|(occur, ast)| (occur, rewrite(ast, default_field, schema)))
                .collect(),
        ),
        UserInputAst::Boost(inner, boost) => {
            UserInputAst::Boost(Box::new(rewrite(*inner, default_field, schema)), boost)
        }
        // A word without a field, for a reader who may not search some fields: any of those
        // it may search, not `all`.
        UserInputAst::Leaf(leaf)
            if matches!(&*leaf, UserInputLeaf::Literal(l) if l.field_name.is_none())
                && default_field.is_none()
                && schema.catch_all().is_some() =>
        {
            match (*leaf, schema.catch_all()) {
                (UserInputLeaf::Literal(literal), Some(strings)) => any_field(literal, strings),
                (other, _) => UserInputAst::Leaf(Box::new(other)),
            }
        }
        UserInputAst::Leaf(leaf) => UserInputAst::Leaf(Box::new(match *leaf {
            UserInputLeaf::Literal(mut literal) => {
                literal.field_name = text_field(literal.field_name.take());
                UserInputLeaf::Literal(literal)
            }
            UserInputLeaf::Range {
                field,
                lower,
                upper,
            } => UserInputLeaf::Range {
                field: keyword_field(field),
                lower,
                upper,
            },
            UserInputLeaf::Set { field, elements } => UserInputLeaf::Set {
                field: keyword_field(field),
                elements,
            },
            // Built as a `regexp` query (see `Compiler::user_input`): the field, resolved.
            UserInputLeaf::Regex { field, pattern } => UserInputLeaf::Regex {
                field: field
                    .as_deref()
                    .or(default_field)
                    .map(|name| schema.path(name).to_owned()),
                pattern,
            },
            UserInputLeaf::Exists { field } => UserInputLeaf::Exists {
                field: format!("{KEYWORD_FIELD}.{}", schema.path(&field)),
            },
            other => other,
        })),
    }
}

/// The field path and value of a `query_string` literal on a field's text (`text.<path>`,
/// after [`rewrite`]) whose value reads as a number, a boolean or a date: such values are in
/// `kw`, not in `text`.
fn typed_value(literal: &UserInputLiteral) -> Option<(String, String)> {
    let path = literal
        .field_name
        .as_deref()?
        .strip_prefix(TEXT_FIELD)?
        .strip_prefix('.')?;
    let value = literal.phrase.trim();
    let typed = value.parse::<f64>().is_ok_and(f64::is_finite)
        || value.parse::<bool>().is_ok()
        || parse_date_millis(value).is_some();
    (typed && !literal.prefix).then(|| (path.to_owned(), value.to_owned()))
}

/// A word of a `query_string` searched in the text of each of `fields`, any of them.
fn any_field(literal: UserInputLiteral, fields: &[String]) -> UserInputAst {
    let paths: Vec<String> = match fields.is_empty() {
        true => vec![UNMAPPED_PATH.to_owned()],
        false => fields.to_vec(),
    };
    UserInputAst::Clause(
        paths
            .into_iter()
            .map(|path| {
                let mut literal = literal.clone();
                literal.field_name = Some(format!("{TEXT_FIELD}.{path}"));
                (
                    Some(Occur::Should),
                    UserInputAst::Leaf(Box::new(UserInputLeaf::Literal(literal))),
                )
            })
            .collect(),
    )
}

/// The tokens of a query text, as the `text` field's analyzer makes them.
/// Whether an `operator` (or `default_operator`) is `and`, in any case.
fn is_and(operator: Option<&Value>) -> bool {
    operator
        .and_then(Value::as_str)
        .is_some_and(|o| o.eq_ignore_ascii_case("and"))
}

fn analyze(text: &str) -> Vec<String> {
    text::tokens(&mut text::analyzer(), text)
}

/// The words of `text` as a query's `analyzer` makes them: the standard analyzer's (the one
/// records are indexed with) by default, `whitespace` (split at white space, as written) or
/// `keyword` (the whole text, one word).
fn analyze_with(text: &str, options: &Map<String, Value>) -> Result<Vec<String>, DslError> {
    match options.get("analyzer").and_then(Value::as_str) {
        None | Some("standard" | "default" | "simple") => Ok(analyze(text)),
        Some("whitespace") => Ok(text.split_whitespace().map(str::to_owned).collect()),
        Some("keyword") => Ok(vec![text.to_owned()]),
        Some(other) => Err(parsing(format!(
            "[analyzer] [{other}] is not served: standard, simple, whitespace or keyword"
        ))),
    }
}

/// The edit distance `fuzziness` allows for `word`: a number of edits (0, 1, 2), or `AUTO`
/// (`AUTO:low,high`, by default 3 and 6): none below `low` characters, one below `high`, else
/// two.
fn fuzziness(options: &Map<String, Value>, word: &str) -> Result<Option<u8>, DslError> {
    let Some(value) = options.get("fuzziness") else {
        return Ok(None);
    };
    let text = match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => return Err(parsing(format!("invalid [fuzziness] {other}"))),
    };
    let invalid = || parsing(format!("invalid [fuzziness] [{text}]: 0, 1, 2 or AUTO"));
    if let Some(auto) = text
        .strip_prefix("AUTO")
        .or_else(|| text.strip_prefix("auto"))
    {
        let (low, high) = match auto.strip_prefix(':') {
            None if auto.is_empty() => (3, 6),
            Some(bounds) => {
                let (low, high) = bounds.split_once(',').ok_or_else(invalid)?;
                (
                    low.trim().parse::<usize>().map_err(|_| invalid())?,
                    high.trim().parse::<usize>().map_err(|_| invalid())?,
                )
            }
            None => return Err(invalid()),
        };
        let length = word.chars().count();
        return Ok(Some(match length {
            n if n < low => 0,
            n if n < high => 1,
            _ => 2,
        }));
    }
    match text.parse::<f64>() {
        Ok(n) if n.fract() == 0.0 && (0.0..=2.0).contains(&n) => Ok(Some(n as u8)),
        _ => Err(invalid()),
    }
}

fn scalar_text(field: &str, value: &Value) -> Result<String, DslError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(_) | Value::Bool(_) => Ok(value.to_string()),
        other => Err(parsing(format!(
            "the query of [{field}] must be a string, number or boolean, not {other}"
        ))),
    }
}

/// The records whose IP field `field` holds an address from `lower` to `upper` (an `ip_range`
/// aggregation's bucket).
pub fn ip_range_query(
    schema: &DocsSchema,
    field: &str,
    lower: Bound<u128>,
    upper: Bound<u128>,
) -> DslQuery {
    let compiler = Compiler {
        schema,
        now: 0,
        vectors: None,
        named: Default::default(),
    };
    compiler.ip_range(schema.path(field), lower, upper)
}

/// Records both queries match (a `filters` aggregation's bucket within a search's query).
pub fn both(a: DslQuery, b: DslQuery) -> DslQuery {
    Box::new(BooleanQuery::intersection(vec![a, b]))
}

/// The records `query` matches that `filter` matches too, scored by `query` alone (a search
/// limited to the records its reader may see).
pub fn within(query: DslQuery, filter: DslQuery) -> DslQuery {
    // A filter whose matches are kept is looked up for each match of the query.
    if let Some(kept) = filter.downcast_ref::<CachedFilter>() {
        return kept.restrict(query);
    }
    Box::new(BooleanQuery::new(vec![
        (Occur::Must, query),
        (Occur::Must, Box::new(ConstScoreQuery::new(filter, 0.0))),
    ]))
}

/// `query` with its scores multiplied by `boost` (a dataset's `indices_boost`).
pub fn scaled(query: DslQuery, boost: f32) -> DslQuery {
    Box::new(BoostQuery::new(query, boost))
}

/// Any of `queries` (a union: scores add up).
fn any_of(mut queries: Vec<Box<dyn Query>>) -> Box<dyn Query> {
    match queries.len() {
        0 => Box::new(EmptyQuery),
        1 => queries.remove(0),
        _ => Box::new(BooleanQuery::union(queries)),
    }
}

/// A filter-like query (term, range, ...): every match scores 1, as in Elasticsearch.
fn constant(query: Box<dyn Query>) -> Box<dyn Query> {
    Box::new(ConstScoreQuery::new(query, 1.0))
}

/// Applies a query's `boost`, if it has one.
fn boosted(query: Box<dyn Query>, body: &Value) -> Box<dyn Query> {
    let boost = body.get("boost").and_then(Value::as_f64).or_else(|| {
        // {field: {value, boost}} forms.
        body.as_object()
            .and_then(|o| o.values().next())
            .and_then(|v| v.get("boost"))
            .and_then(Value::as_f64)
    });
    match boost {
        Some(boost) if boost != 1.0 => Box::new(BoostQuery::new(query, boost as f32)),
        _ => query,
    }
}

/// `minimum_should_match`: a count, a negative count (all but), or a percentage, of `of`.
fn minimum_should_match(value: &Value, of: usize) -> Result<usize, DslError> {
    let text = match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.trim().to_owned(),
        other => return Err(parsing(format!("invalid minimum_should_match {other}"))),
    };
    let of = of as i64;
    let count = match text.strip_suffix('%') {
        Some(percent) => {
            let p: i64 = percent
                .parse()
                .map_err(|_| parsing(format!("invalid minimum_should_match [{text}]")))?;
            match p >= 0 {
                true => of * p / 100,
                false => of + of * p / 100,
            }
        }
        None => {
            let n: i64 = text
                .parse()
                .map_err(|_| parsing(format!("invalid minimum_should_match [{text}]")))?;
            if n < 0 { of + n } else { n }
        }
    };
    Ok(count.clamp(0, of) as usize)
}

/// A bound converted by `f`; `None` when a bound does not convert.
fn convert<T>(bound: &Bound<Value>, f: impl Fn(&Value) -> Option<T>) -> Option<Bound<T>> {
    match bound {
        Bound::Unbounded => Some(Bound::Unbounded),
        Bound::Included(v) => f(v).map(Bound::Included),
        Bound::Excluded(v) => f(v).map(Bound::Excluded),
    }
}

/// A date bound in Unix milliseconds: a number (milliseconds), a date, or date math
/// (`now-1h`, `now/d`, `2026-11-23||+1M`). `round_up` rounds `/unit` to the unit's last
/// millisecond (for an inclusive upper bound, as Elasticsearch does).
fn date_bound(value: &Value, now: i64, round_up: bool) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => date_math(s.trim(), now, round_up),
        _ => None,
    }
}

fn regex_syntax_escape(c: char) -> String {
    match c {
        '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$'
        | '#' | '&' | '-' | '~' => format!("\\{c}"),
        c => c.to_string(),
    }
}

fn regex_syntax_escape_str(text: &str) -> String {
    text.chars().map(regex_syntax_escape).collect()
}

/// The deepest a `query_string` may nest its parentheses: tantivy's query grammar recurses
/// once (and more) per level, so a deeper text could exhaust the stack of the thread parsing
/// it, which aborts the process.
pub const MAX_QUERY_STRING_DEPTH: usize = 1000;

/// How deep the parentheses of a query string nest, outside quoted phrases and escapes.
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut quoted, mut escaped) = (false, false);
    for c in text.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            '(' if !quoted => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' if !quoted => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_795_428_000_000; // 2026-11-23T10:00:00Z

    #[test]
    fn minimum_should_match_counts_and_percentages() {
        assert_eq!(minimum_should_match(&Value::from(2), 3), Ok(2));
        assert_eq!(minimum_should_match(&Value::from("-1"), 3), Ok(2));
        assert_eq!(minimum_should_match(&Value::from("50%"), 4), Ok(2));
        assert_eq!(minimum_should_match(&Value::from("-25%"), 4), Ok(3));
        assert_eq!(minimum_should_match(&Value::from(9), 3), Ok(3));
    }

    #[test]
    fn unknown_and_malformed_queries_are_refused() {
        let schema = DocsSchema::new();
        for (query, needle) in [
            (
                serde_json::json!({"fuzzy_thing": {}}),
                "unknown query [fuzzy_thing]",
            ),
            (
                serde_json::json!({"term": {"a": 1, "b": 2}}),
                "exactly one field",
            ),
            (
                serde_json::json!({"range": {"a": {"near": 1}}}),
                "does not support [near]",
            ),
            (
                serde_json::json!({"bool": {"must": [{"nope": {}}]}}),
                "unknown query [nope]",
            ),
            (serde_json::json!("match_all"), "must be a JSON object"),
            (serde_json::json!({"exists": {}}), "needs a [field]"),
        ] {
            let error = compile(&schema, &query, NOW).err().unwrap();
            assert!(error.reason.contains(needle), "{query}: {}", error.reason);
        }
    }

    #[test]
    fn query_string_nesting_is_bounded() {
        assert_eq!(nesting(r#"(a OR (b AND "(((")) \((c)"#), 2);
        // At the limit on the server's stack (32 MiB), with half of it: parsed. Past it: refused.
        std::thread::Builder::new()
            .stack_size(16 << 20)
            .spawn(|| {
                let schema = DocsSchema::new();
                let text = |n: usize| format!("{}a{}", "(".repeat(n), ")".repeat(n));
                let at =
                    serde_json::json!({"query_string": {"query": text(MAX_QUERY_STRING_DEPTH)}});
                assert!(compile(&schema, &at, NOW).is_ok());
                for n in [MAX_QUERY_STRING_DEPTH + 1, 100_000] {
                    let past = serde_json::json!({"query_string": {"query": text(n)}});
                    let error = compile(&schema, &past, NOW).err().unwrap();
                    assert!(
                        error.reason.contains("deeper than 1000 levels"),
                        "{}",
                        error.reason
                    );
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
