//! What a Query DSL search answers, typed: its hits (ids, scores, sort values, sources as
//! maps) and its aggregations as a tree. A monitor or the assistant reads these as they are;
//! the HTTP layer renders Elasticsearch's JSON of them (`src/http/search.rs`).

use serde_json::{Map, Number, Value};
use strata_projections::table::docs::SortValue;

/// A search's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchResult {
    /// How long it took, in milliseconds.
    pub took_ms: u64,
    /// Its `timeout` passed before every index was searched: the hits are those found before.
    pub timed_out: bool,
    /// How many datasets it searched (Elasticsearch's shards: one per dataset).
    pub shards: usize,
    /// How many records match; `None` when the search asked not to count
    /// (`track_total_hits: false`).
    pub total: Option<TotalHits>,
    /// The best score, when hits are ranked by score first.
    pub max_score: Option<f32>,
    /// The page of hits, in the search's order.
    pub hits: Vec<Hit>,
    /// With `terminate_after`: whether it stopped at that many matches.
    pub terminated_early: Option<bool>,
    pub aggregations: Option<Aggregations>,
    /// With `profile: true`: Elasticsearch's `profile` object, a shard per dataset.
    pub profile: Option<serde_json::Value>,
}

/// How many records a search matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TotalHits {
    pub value: u64,
    /// At least `value`: counting stopped at the search's `track_total_hits`.
    pub at_least: bool,
}

/// One record a search found.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The dataset it is a record of.
    pub index: String,
    pub id: Option<String>,
    /// `None` when the search ranks by something else than the score.
    pub score: Option<f32>,
    /// The record as its reader sees it; `None` when the search asked for none (`_source:
    /// false`).
    pub source: Option<Map<String, Value>>,
    /// Its fields whose values were malformed and left out (`_ignored`).
    pub ignored: Vec<String>,
    /// The named parts of the query (`_name`) that match it, with their scores.
    pub matched_queries: Vec<(String, f32)>,
    /// The fields the search asked back by name (`fields`, `docvalue_fields`), each a list of
    /// values.
    pub fields: Map<String, Value>,
    /// Its sort values, when the search sorts.
    pub sort: Option<Vec<Option<SortValue>>>,
}

/// A search's aggregations, by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Aggregations(pub Vec<(String, Aggregation)>);

/// One aggregation's result.
#[derive(Clone, Debug, PartialEq)]
pub enum Aggregation {
    /// A single-value metric (`avg`, `sum`, `min`, `max`, `value_count`, `cardinality`, a
    /// bucket pipeline): `None` when no record had a value. `rest`: what else it shows
    /// (`value_as_string`, `meta`).
    Value {
        value: Option<Number>,
        rest: Map<String, Value>,
    },
    /// A bucket aggregation (`terms`, `histogram`, `range`, `filters`, ...): its buckets in
    /// order, shown as an object by key when `keyed`. `rest`: what else it shows
    /// (`sum_other_doc_count`, `meta`).
    Buckets {
        buckets: Vec<Bucket>,
        keyed: bool,
        rest: Map<String, Value>,
    },
    /// A single-bucket aggregation (`filter`, `missing`, `global`): how many records, and its
    /// sub-aggregations.
    Single {
        doc_count: u64,
        aggregations: Aggregations,
        rest: Map<String, Value>,
    },
    /// A multi-value metric (`stats`, `extended_stats`, `percentiles`): its values as
    /// Elasticsearch names them.
    Values(Map<String, Value>),
}

/// One bucket of a bucket aggregation.
#[derive(Clone, Debug, PartialEq)]
pub struct Bucket {
    /// Its key (a term, a number, a range's or a filter's name).
    pub key: Value,
    pub doc_count: u64,
    /// Its sub-aggregations.
    pub aggregations: Aggregations,
    /// What else it shows (`key_as_string`, `from`, `to`).
    pub rest: Map<String, Value>,
}

impl Aggregations {
    /// The aggregation named `name`.
    pub fn get(&self, name: &str) -> Option<&Aggregation> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }

    /// The tree of the aggregations' JSON, as the aggregation code makes it (an object of
    /// named results).
    pub(super) fn from_json(value: Value) -> Aggregations {
        let Value::Object(named) = value else {
            return Aggregations::default();
        };
        Aggregations(
            named
                .into_iter()
                .map(|(name, result)| (name, Aggregation::from_json(result)))
                .collect(),
        )
    }
}

/// The entries of `object` whose values are objects (sub-aggregations), and the rest.
fn split_nested(object: Map<String, Value>) -> (Aggregations, Map<String, Value>) {
    let (nested, rest): (Map<String, Value>, Map<String, Value>) = object
        .into_iter()
        .partition(|(key, value)| value.is_object() && key != "meta");
    (Aggregations::from_json(Value::Object(nested)), rest)
}

fn count(value: Option<Value>) -> u64 {
    value.and_then(|v| v.as_u64()).unwrap_or(0)
}

impl Aggregation {
    /// A single-value metric's value.
    pub fn value(&self) -> Option<f64> {
        match self {
            Aggregation::Value { value, .. } => value.as_ref().and_then(Number::as_f64),
            _ => None,
        }
    }

    /// A bucket aggregation's buckets (none for another).
    pub fn buckets(&self) -> &[Bucket] {
        match self {
            Aggregation::Buckets { buckets, .. } => buckets,
            _ => &[],
        }
    }

    fn from_json(value: Value) -> Aggregation {
        let Value::Object(mut object) = value else {
            return Aggregation::Values(Map::new());
        };
        if let Some(buckets) = object.remove("buckets") {
            let (keyed, buckets) = match buckets {
                Value::Object(by_key) => (
                    true,
                    by_key
                        .into_iter()
                        .map(|(key, bucket)| Bucket::from_json(Value::String(key), bucket))
                        .collect(),
                ),
                Value::Array(list) => (
                    false,
                    list.into_iter()
                        .map(|mut bucket| {
                            let key = bucket
                                .as_object_mut()
                                .and_then(|b| b.remove("key"))
                                .unwrap_or(Value::Null);
                            Bucket::from_json(key, bucket)
                        })
                        .collect(),
                ),
                _ => (false, Vec::new()),
            };
            return Aggregation::Buckets {
                buckets,
                keyed,
                rest: object,
            };
        }
        if object.contains_key("doc_count") {
            let doc_count = count(object.remove("doc_count"));
            let (aggregations, rest) = split_nested(object);
            return Aggregation::Single {
                doc_count,
                aggregations,
                rest,
            };
        }
        let single = object.contains_key("value")
            && object
                .iter()
                .all(|(k, _)| matches!(k.as_str(), "value" | "value_as_string" | "meta"));
        if single {
            let value = match object.remove("value") {
                Some(Value::Number(n)) => Some(n),
                _ => None,
            };
            return Aggregation::Value {
                value,
                rest: object,
            };
        }
        Aggregation::Values(object)
    }
}

impl Bucket {
    fn from_json(key: Value, bucket: Value) -> Bucket {
        let Value::Object(mut object) = bucket else {
            return Bucket {
                key,
                doc_count: 0,
                aggregations: Aggregations::default(),
                rest: Map::new(),
            };
        };
        let doc_count = count(object.remove("doc_count"));
        let (aggregations, rest) = split_nested(object);
        Bucket {
            key,
            doc_count,
            aggregations,
            rest,
        }
    }
}
