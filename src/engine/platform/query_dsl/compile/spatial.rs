//! The Query DSL's spatial queries: `geo_bounding_box` and `geo_distance` over `geo_point`
//! fields (indexed as the numbers `<field>.lat` and `<field>.lon`), and `knn` over the dataset's
//! `knn_vector` field (searched in its vector index, then joined to the documents by row id).

use std::{collections::HashMap, ops::Bound, sync::Arc};

use serde_json::{Map, Value};
use tantivy::{
    SegmentReader, Term,
    query::{AllQuery, BooleanQuery, ConstScoreQuery, EmptyQuery, Query, RangeQuery},
};

use strata_projections::{
    catalog::VectorMetric,
    table::{
        TableSnapshot,
        docs::{KEYWORD_FIELD, ROW_ID_FIELD, UNMAPPED_PATH},
        filtered::{DocTest, Filtered, SegmentTest},
        geo::{self, GeoBox, Point},
    },
};

use super::{Compiled, Compiler, DslError, parsing};

/// What a `knn` query needs of the dataset it runs on.
pub trait Vectors {
    /// The `knn_vector` field: its name, dimension and metric; `None` when there is none.
    fn field(&self) -> Option<(String, usize, VectorMetric)>;

    /// The `k` nearest live records to `vector` (row id and distance, nearest first), among
    /// those `filter` matches when there is one.
    fn nearest(
        &self,
        vector: &[f32],
        k: usize,
        filter: Option<&dyn Query>,
    ) -> Result<Vec<(u64, f32)>, String>;
}

/// Options a spatial query takes besides its field.
const GEO_OPTIONS: &[&str] = &[
    "boost",
    "_name",
    "validation_method",
    "ignore_unmapped",
    "type",
    "distance",
    "distance_type",
];

/// The one field a geo query names, and its value.
fn geo_field<'v>(kind: &str, body: &'v Value) -> Result<(&'v str, &'v Value), DslError> {
    let Value::Object(object) = body else {
        return Err(parsing(format!("[{kind}] query must be an object")));
    };
    let mut fields = object
        .iter()
        .filter(|(key, _)| !GEO_OPTIONS.contains(&key.as_str()));
    match (fields.next(), fields.next()) {
        (Some((field, value)), None) => Ok((field, value)),
        (None, _) => Err(parsing(format!("[{kind}] query names no field"))),
        (Some(_), Some((other, _))) => Err(parsing(format!(
            "[{kind}] query names more than one field ([{other}] too)"
        ))),
    }
}

/// A geo query's refusal of its input, as Elasticsearch types it.
fn invalid(kind: &str, field: &str, reason: String) -> DslError {
    parsing(format!("[{kind}] on [{field}]: {reason}"))
}

/// A dataset's vectors, as its snapshot holds them.
impl Vectors for TableSnapshot {
    fn field(&self) -> Option<(String, usize, VectorMetric)> {
        let spec = self.index.as_ref()?.vector.as_ref()?;
        Some((spec.column.clone(), spec.dim, spec.metric))
    }

    fn nearest(
        &self,
        vector: &[f32],
        k: usize,
        filter: Option<&dyn tantivy::query::Query>,
    ) -> std::result::Result<Vec<(u64, f32)>, String> {
        let allowed = match filter {
            Some(filter) => Some(Arc::new(
                self.matching_rows(filter).map_err(|e| e.to_string())?,
            )),
            None => None,
        };
        Ok(self
            .knn(vector, k, &allowed)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|hit| (hit.row_id, hit.score))
            .collect())
    }
}

impl Compiler<'_> {
    /// Values of the number `path` between `low` and `high`, inclusive.
    fn number_between(&self, path: &str, low: f64, high: f64) -> Box<dyn Query> {
        let bound = |value: f64| {
            let mut term = Term::from_field_json_path(self.schema.keyword, path, true);
            term.append_type_and_fast_value(value);
            Bound::Included(term)
        };
        Box::new(RangeQuery::new(bound(low), bound(high)))
    }

    /// The points of `field` inside `area`.
    fn inside(&self, field: &str, area: &GeoBox) -> Box<dyn Query> {
        let lat = self.number_between(&format!("{field}.lat"), area.bottom, area.top);
        let lon_path = format!("{field}.lon");
        let lon: Box<dyn Query> = match area.left <= area.right {
            true => self.number_between(&lon_path, area.left, area.right),
            // Across the antimeridian: east of left, or west of right.
            false => Box::new(BooleanQuery::union(vec![
                self.number_between(&lon_path, area.left, 180.0),
                self.number_between(&lon_path, -180.0, area.right),
            ])),
        };
        Box::new(BooleanQuery::intersection(vec![lat, lon]))
    }

    /// `geo_bounding_box`: points of the field inside the box (every match scores 1).
    pub(super) fn geo_bounding_box(&self, body: &Value) -> Compiled {
        let (field, area) = geo_field("geo_bounding_box", body)?;
        let field = self.schema.path(field);
        let area =
            GeoBox::parse(area).map_err(|reason| invalid("geo_bounding_box", field, reason))?;
        Ok(Box::new(ConstScoreQuery::new(
            self.inside(field, &area),
            1.0,
        )))
    }

    /// `geo_distance`: points of the field within `distance` of a point, on the sphere (the
    /// bounding box of the circle by range queries, then each point's exact distance).
    pub(super) fn geo_distance(&self, body: &Value) -> Compiled {
        let (field, center) = geo_field("geo_distance", body)?;
        let field = self.schema.path(field);
        let meters = body
            .get("distance")
            .ok_or_else(|| invalid("geo_distance", field, "[distance] is missing".to_owned()))
            .and_then(|d| {
                geo::parse_distance(d).map_err(|reason| invalid("geo_distance", field, reason))
            })?;
        let center =
            geo::parse_point(center).map_err(|reason| invalid("geo_distance", field, reason))?;
        let area = GeoBox::around(center, meters);
        let test = Arc::new(WithinDistance {
            field: field.to_owned(),
            center,
            meters,
        });
        Ok(Box::new(Filtered::new(self.inside(field, &area), test)))
    }

    /// `knn`: the `k` records whose vectors are nearest the query's, scored as OpenSearch
    /// scores them for the field's space. Takes OpenSearch's form
    /// (`{field: {vector, k, filter}}`) and Elasticsearch's (`{field, query_vector, k, filter}`).
    pub(super) fn knn(&self, body: &Value) -> Compiled {
        let Value::Object(object) = body else {
            return Err(parsing("[knn] query must be an object"));
        };
        let (field, options, vector_key): (&str, &Map<String, Value>, &str) =
            match object.get("field") {
                Some(field) => (
                    field
                        .as_str()
                        .ok_or_else(|| parsing("[knn] [field] must be a name"))?,
                    object,
                    "query_vector",
                ),
                None => {
                    let mut fields = object
                        .iter()
                        .filter(|(k, _)| *k != "boost" && *k != "_name");
                    match (fields.next(), fields.next()) {
                        (Some((field, Value::Object(options))), None) => {
                            (field.as_str(), options, "vector")
                        }
                        _ => {
                            return Err(parsing(
                                "[knn] query must name exactly one field, whose value is an object",
                            ));
                        }
                    }
                }
            };
        let vectors = self
            .vectors
            .ok_or_else(|| parsing("[knn] queries are not allowed here"))?;
        // A vector field the reader may not search finds nothing.
        if self.schema.path(field) == UNMAPPED_PATH {
            return Ok(Box::new(EmptyQuery));
        }
        let Some((vector_field, dim, metric)) = vectors.field() else {
            return Err(DslError {
                kind: "illegal_argument_exception",
                reason: format!(
                    "field [{field}] is not a knn_vector field: this dataset has none (declare one in the mappings at creation)"
                ),
            });
        };
        if field != vector_field {
            return Err(DslError {
                kind: "illegal_argument_exception",
                reason: format!(
                    "field [{field}] is not a knn_vector field; this dataset's is [{vector_field}]"
                ),
            });
        }
        let vector: Vec<f32> = options
            .get(vector_key)
            .and_then(Value::as_array)
            .ok_or_else(|| parsing(format!("[knn] on [{field}] needs a [{vector_key}] array")))?
            .iter()
            .map(|v| v.as_f64().map(|f| f as f32).filter(|f| f.is_finite()))
            .collect::<Option<_>>()
            .ok_or_else(|| parsing(format!("[knn] [{vector_key}] must hold numbers")))?;
        if vector.len() != dim {
            return Err(DslError {
                kind: "illegal_argument_exception",
                reason: format!(
                    "query vector has {} dimensions; field [{field}] has {dim}",
                    vector.len()
                ),
            });
        }
        let k = match options.get("k") {
            None => 10,
            Some(k) => k
                .as_u64()
                .filter(|k| (1..=10_000).contains(k))
                .ok_or_else(|| parsing("[knn] [k] must be an integer from 1 to 10000"))?
                as usize,
        };
        // Elasticsearch's filter may be a list of queries, all of which must match.
        let filter = match options.get("filter") {
            None | Some(Value::Null) => None,
            Some(list @ Value::Array(_)) => {
                Some(self.query(&serde_json::json!({"bool": {"filter": list}}))?)
            }
            Some(one) => Some(self.query(one)?),
        };
        let nearest = vectors
            .nearest(&vector, k, filter.as_deref())
            .map_err(|reason| DslError {
                kind: "search_phase_execution_exception",
                reason,
            })?;
        let scores: HashMap<u64, f32> = nearest
            .into_iter()
            .map(|(row, distance)| (row, score(metric, distance)))
            .collect();
        if scores.is_empty() {
            return Ok(Box::new(EmptyQuery));
        }
        Ok(Box::new(Filtered::new(
            Box::new(AllQuery),
            Arc::new(NearestRows {
                scores: Arc::new(scores),
            }),
        )))
    }
}

/// OpenSearch's score of a distance in a space: `l2` 1 / (1 + d²); `cosinesimil`
/// (2 - (1 - cos)) / 2; `innerproduct` 1 + ip for a positive product, 1 / (1 - ip) for a
/// negative one (the inverse of strata's dot distance).
pub fn score(metric: VectorMetric, distance: f32) -> f32 {
    match metric {
        VectorMetric::L2 => 1.0 / (1.0 + distance * distance),
        VectorMetric::Cosine => (2.0 - distance) / 2.0,
        VectorMetric::Dot => 1.0 / distance.max(f32::MIN_POSITIVE),
    }
}

/// The points of `field` within `meters` of `center`.
#[derive(Debug)]
struct WithinDistance {
    field: String,
    center: Point,
    meters: f64,
}

impl DocTest for WithinDistance {
    fn segment(&self, reader: &SegmentReader) -> tantivy::Result<SegmentTest> {
        let fast = reader.fast_fields();
        let lat = fast.column_opt::<f64>(&format!("{KEYWORD_FIELD}.{}.lat", self.field))?;
        let lon = fast.column_opt::<f64>(&format!("{KEYWORD_FIELD}.{}.lon", self.field))?;
        let (center, meters) = (self.center, self.meters);
        Ok(Box::new(move |doc| {
            let point = Point {
                lat: lat.as_ref()?.first(doc)?,
                lon: lon.as_ref()?.first(doc)?,
            };
            (geo::distance_m(center, point) <= meters).then_some(1.0)
        }))
    }
}

/// The rows a vector search found, each with its score.
#[derive(Debug)]
struct NearestRows {
    scores: Arc<HashMap<u64, f32>>,
}

impl DocTest for NearestRows {
    fn segment(&self, reader: &SegmentReader) -> tantivy::Result<SegmentTest> {
        let rows = reader.fast_fields().u64(ROW_ID_FIELD)?;
        let scores = self.scores.clone();
        Ok(Box::new(move |doc| scores.get(&rows.first(doc)?).copied()))
    }
}
