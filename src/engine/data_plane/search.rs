//! Searches of a table: BM25, token match, exact match, count and hybrid (BM25 and vector
//! candidates fused by reciprocal-rank fusion). Each reads the leader's latest snapshot, so it
//! sees every acknowledged write, and returns rows read back from the segment store by row id.
//!
//! Every request is checked against the table before anything runs: a column that is not
//! indexed the way the search needs, a vector of the wrong dimension, a bad filter or a limit out
//! of range is a 400 that names it.

use std::{collections::HashMap, sync::Arc};

use arrow::array::{ArrayRef, Float32Array, RecordBatch, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use roaring::RoaringTreemap;
use serde::Deserialize;
use strata_projections::{
    catalog::TableDef,
    table::{
        TableSnapshot,
        search::{Allowed, Hit},
        text::exact_values,
    },
};

use crate::engine::{Engine, Principal};
use crate::{
    error::{Error, Result},
    query,
    rows::RowsBody,
};

/// The most rows one search returns (limit + offset).
pub const MAX_RESULTS: usize = 10_000;

fn default_limit() -> usize {
    10
}
fn default_candidates() -> usize {
    100
}
fn default_rrf_k() -> f64 {
    60.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bm25Search {
    pub table: String,
    pub query: String,
    pub column: Option<String>,
    #[serde(default = "default_limit")]
    pub limit: usize,
    #[serde(default)]
    pub offset: usize,
    pub filter: Option<String>,
    pub columns: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TokenMode {
    #[default]
    Any,
    All,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenMatch {
    pub table: String,
    pub column: String,
    pub tokens: Vec<String>,
    #[serde(default)]
    pub mode: TokenMode,
    #[serde(default = "default_limit")]
    pub limit: usize,
    pub filter: Option<String>,
    pub columns: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExactMatch {
    pub table: String,
    pub column: String,
    pub value: serde_json::Value,
    #[serde(default = "default_limit")]
    pub limit: usize,
    pub filter: Option<String>,
    pub columns: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct Weights {
    #[serde(default = "one")]
    pub bm25: f64,
    #[serde(default = "one")]
    pub vector: f64,
}

fn one() -> f64 {
    1.0
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            bm25: 1.0,
            vector: 1.0,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HybridSearch {
    pub table: String,
    pub query: String,
    pub vector: Vec<f32>,
    pub column: Option<String>,
    #[serde(default = "default_limit")]
    pub limit: usize,
    #[serde(default = "default_candidates")]
    pub candidates: usize,
    #[serde(default = "default_rrf_k")]
    pub rrf_k: f64,
    #[serde(default)]
    pub weights: Weights,
    pub filter: Option<String>,
    pub columns: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountRequest {
    pub table: String,
    pub query: String,
    pub column: Option<String>,
}

/// One fused result of a hybrid search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fused {
    pub row_id: u64,
    pub score: f64,
    pub bm25_rank: Option<u32>,
    pub vector_rank: Option<u32>,
}

/// Reciprocal-rank fusion: each list contributes weight / (k + rank), ranks counted from 1;
/// best first, equal scores in row-id order.
pub fn reciprocal_rank_fusion(
    bm25: &[u64],
    vector: &[u64],
    k: f64,
    weights: Weights,
) -> Vec<Fused> {
    let mut fused: HashMap<u64, Fused> = HashMap::new();
    let entry = |fused: &mut HashMap<u64, Fused>, id: u64| {
        *fused.entry(id).or_insert(Fused {
            row_id: id,
            score: 0.0,
            bm25_rank: None,
            vector_rank: None,
        })
    };
    for (i, id) in bm25.iter().enumerate() {
        let rank = i as u32 + 1;
        let mut f = entry(&mut fused, *id);
        f.score += weights.bm25 / (k + f64::from(rank));
        f.bm25_rank = Some(rank);
        fused.insert(*id, f);
    }
    for (i, id) in vector.iter().enumerate() {
        let rank = i as u32 + 1;
        let mut f = entry(&mut fused, *id);
        f.score += weights.vector / (k + f64::from(rank));
        f.vector_rank = Some(rank);
        fused.insert(*id, f);
    }
    let mut out: Vec<Fused> = fused.into_values().collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.row_id.cmp(&b.row_id)));
    out
}

fn check_limit(name: &str, value: usize) -> Result<()> {
    if value > MAX_RESULTS {
        return Err(Error::BadRequest(format!(
            "{name} is {value}; at most {MAX_RESULTS} rows can be asked for"
        )));
    }
    Ok(())
}

fn full_text_columns(def: &TableDef, column: Option<&str>) -> Result<Vec<String>> {
    if def.fts_columns.is_empty() {
        return Err(Error::BadRequest(format!(
            "table {:?} has no full-text columns (fts_columns at create_table)",
            def.name
        )));
    }
    match column {
        None => Ok(def.fts_columns.clone()),
        Some(column) if def.fts_columns.iter().any(|c| c == column) => Ok(vec![column.to_owned()]),
        Some(column) => Err(Error::BadRequest(format!(
            "column {column:?} is not full-text indexed; the full-text columns of {:?} are {:?}",
            def.name, def.fts_columns
        ))),
    }
}

fn check_columns(def: &TableDef, columns: Option<&[String]>) -> Result<()> {
    for column in columns.into_iter().flatten() {
        if column != "_row_id" && !def.columns.iter().any(|c| &c.name == column) {
            return Err(Error::BadRequest(format!(
                "column {column:?} is not a column of table {:?}",
                def.name
            )));
        }
    }
    Ok(())
}

fn check_vector(def: &TableDef, vector: &[f32]) -> Result<()> {
    let Some(name) = &def.vector_column else {
        return Err(Error::BadRequest(format!(
            "table {:?} has no vector column (vector_column at create_table)",
            def.name
        )));
    };
    let dim = def.vector_dim().unwrap_or(0);
    if vector.len() != dim {
        return Err(Error::BadRequest(format!(
            "vector has {} values; column {name:?} has dimension {dim}",
            vector.len()
        )));
    }
    if vector.iter().any(|v| !v.is_finite()) {
        return Err(Error::BadRequest(
            "vector holds a value that is not finite".to_owned(),
        ));
    }
    Ok(())
}

/// A search error of the index layer is the caller's when it names what they asked for.
fn index_error(error: strata_projections::Error) -> Error {
    Error::Internal(error.to_string())
}

impl Engine {
    /// The leader's latest snapshot of a table, after checking the caller may read it.
    async fn search_snapshot(
        &self,
        principal: &Principal,
        database: &str,
        table: &str,
    ) -> Result<(Arc<TableSnapshot>, Arc<TableDef>)> {
        let (database, def) = self.table_of(principal, database, table).await?;
        let runtime = self.table_runtime(&database, &def).await?;
        Ok((runtime.snapshot(), def))
    }

    /// The rows a filter allows (`None`: no filter).
    async fn filter(&self, snapshot: &Arc<TableSnapshot>, filter: Option<&str>) -> Result<Allowed> {
        let Some(filter) = filter else {
            return Ok(None);
        };
        let ctx = query::session(&self.queries);
        let matched = query::matching_as(&ctx, snapshot.clone(), filter, "filter").await?;
        Ok(Some(Arc::new(matched.ids.into_iter().collect())))
    }

    pub async fn bm25_search(
        &self,
        principal: &Principal,
        database: &str,
        request: Bm25Search,
    ) -> Result<RecordBatch> {
        check_limit(
            "limit + offset",
            request.limit.saturating_add(request.offset),
        )?;
        let (snapshot, def) = self
            .search_snapshot(principal, database, &request.table)
            .await?;
        let columns = full_text_columns(&def, request.column.as_deref())?;
        check_columns(&def, request.columns.as_deref())?;
        let allowed = self.filter(&snapshot, request.filter.as_deref()).await?;
        let started = std::time::Instant::now();
        let hits = snapshot
            .bm25(
                &request.query,
                &columns,
                &allowed,
                request.limit + request.offset,
            )
            .map_err(index_error)?;
        let searched = started.elapsed();
        let hits: Vec<Hit> = hits.into_iter().skip(request.offset).collect();
        let ids: Vec<u64> = hits.iter().map(|h| h.row_id).collect();
        let rows = snapshot
            .rows_by_id(&ids, request.columns.as_deref())
            .await
            .map_err(index_error)?;
        tracing::debug!(
            table = %def.name,
            search_us = searched.as_micros() as u64,
            rows_us = (started.elapsed() - searched).as_micros() as u64,
            "bm25_search"
        );
        let scores: HashMap<u64, f32> = hits.iter().map(|h| (h.row_id, h.score)).collect();
        with_columns(
            rows,
            |id| {
                vec![Some(Extra::Score(f64::from(
                    scores.get(&id).copied().unwrap_or(0.0),
                )))]
            },
            &[("_score", DataType::Float32, false)],
        )
    }

    pub async fn count(
        &self,
        principal: &Principal,
        database: &str,
        request: CountRequest,
    ) -> Result<u64> {
        let (snapshot, def) = self
            .search_snapshot(principal, database, &request.table)
            .await?;
        let columns = full_text_columns(&def, request.column.as_deref())?;
        snapshot
            .count_matches(&request.query, &columns)
            .map_err(index_error)
    }

    pub async fn token_match(
        &self,
        principal: &Principal,
        database: &str,
        request: TokenMatch,
    ) -> Result<RecordBatch> {
        check_limit("limit", request.limit)?;
        let (snapshot, def) = self
            .search_snapshot(principal, database, &request.table)
            .await?;
        full_text_columns(&def, Some(&request.column))?;
        check_columns(&def, request.columns.as_deref())?;
        let mut tokens = Vec::new();
        let mut analyzer = strata_projections::table::text::analyzer();
        for token in &request.tokens {
            tokens.extend(strata_projections::table::text::tokens(
                &mut analyzer,
                token,
            ));
        }
        tokens.sort();
        tokens.dedup();
        if tokens.is_empty() {
            return Err(Error::BadRequest(
                "tokens is empty (or holds no word characters)".to_owned(),
            ));
        }
        let allowed = self.filter(&snapshot, request.filter.as_deref()).await?;
        let ids = snapshot
            .token_match(
                &request.column,
                &tokens,
                request.mode == TokenMode::All,
                &allowed,
            )
            .map_err(index_error)?;
        self.rows_of(&snapshot, &ids, request.limit, request.columns.as_deref())
            .await
    }

    pub async fn exact_match(
        &self,
        principal: &Principal,
        database: &str,
        request: ExactMatch,
    ) -> Result<RecordBatch> {
        check_limit("limit", request.limit)?;
        let (snapshot, def) = self
            .search_snapshot(principal, database, &request.table)
            .await?;
        if !def.exact_columns.iter().any(|c| c == &request.column) {
            return Err(Error::BadRequest(format!(
                "column {:?} is not exact-match indexed; the exact-match columns of {:?} are {:?}",
                request.column, def.name, def.exact_columns
            )));
        }
        check_columns(&def, request.columns.as_deref())?;
        let value = exact_value(&snapshot, &request.column, request.value)?;
        let allowed = self.filter(&snapshot, request.filter.as_deref()).await?;
        let ids = snapshot
            .exact_match(&request.column, &value, &allowed)
            .map_err(index_error)?;
        self.rows_of(&snapshot, &ids, request.limit, request.columns.as_deref())
            .await
    }

    pub async fn hybrid_search(
        &self,
        principal: &Principal,
        database: &str,
        request: HybridSearch,
    ) -> Result<RecordBatch> {
        check_limit("limit", request.limit)?;
        check_limit("candidates", request.candidates)?;
        if !(request.rrf_k.is_finite() && request.rrf_k >= 0.0) {
            return Err(Error::BadRequest(
                "rrf_k must be a number of at least 0".to_owned(),
            ));
        }
        let Weights { bm25, vector } = request.weights;
        if !(bm25.is_finite() && vector.is_finite() && bm25 >= 0.0 && vector >= 0.0) {
            return Err(Error::BadRequest(
                "weights must be numbers of at least 0".to_owned(),
            ));
        }
        let (snapshot, def) = self
            .search_snapshot(principal, database, &request.table)
            .await?;
        let columns = full_text_columns(&def, request.column.as_deref())?;
        check_vector(&def, &request.vector)?;
        check_columns(&def, request.columns.as_deref())?;
        let allowed = self.filter(&snapshot, request.filter.as_deref()).await?;
        let candidates = request.candidates.max(request.limit);
        let started = std::time::Instant::now();
        let text = snapshot
            .bm25(&request.query, &columns, &allowed, candidates)
            .map_err(index_error)?;
        let texts = started.elapsed();
        let near = snapshot
            .knn(&request.vector, candidates, &allowed)
            .map_err(index_error)?;
        let searched = started.elapsed();
        let text: Vec<u64> = text.iter().map(|h| h.row_id).collect();
        let near: Vec<u64> = near.iter().map(|h| h.row_id).collect();
        let mut fused = reciprocal_rank_fusion(&text, &near, request.rrf_k, request.weights);
        fused.truncate(request.limit);
        let ids: Vec<u64> = fused.iter().map(|f| f.row_id).collect();
        let rows = snapshot
            .rows_by_id(&ids, request.columns.as_deref())
            .await
            .map_err(index_error)?;
        tracing::debug!(
            table = %def.name,
            bm25_us = texts.as_micros() as u64,
            knn_us = (searched - texts).as_micros() as u64,
            rows_us = (started.elapsed() - searched).as_micros() as u64,
            "hybrid_search"
        );
        let by_id: HashMap<u64, Fused> = fused.iter().map(|f| (f.row_id, *f)).collect();
        with_columns(
            rows,
            |id| {
                let f = by_id.get(&id);
                vec![
                    f.map(|f| Extra::Score(f.score)),
                    f.and_then(|f| f.bm25_rank).map(Extra::Rank),
                    f.and_then(|f| f.vector_rank).map(Extra::Rank),
                ]
            },
            &[
                ("_score", DataType::Float32, false),
                ("_bm25_rank", DataType::UInt32, true),
                ("_vector_rank", DataType::UInt32, true),
            ],
        )
    }

    /// The first `limit` rows of `ids` (ascending), read back from the segment store.
    async fn rows_of(
        &self,
        snapshot: &TableSnapshot,
        ids: &RoaringTreemap,
        limit: usize,
        columns: Option<&[String]>,
    ) -> Result<RecordBatch> {
        let ids: Vec<u64> = ids.iter().take(limit).collect();
        snapshot
            .rows_by_id(&ids, columns)
            .await
            .map_err(index_error)
    }
}

/// A query value as an exact-match term: coerced to the column's type as an appended value
/// would be, then rendered as the index renders stored values.
fn exact_value(snapshot: &TableSnapshot, column: &str, value: serde_json::Value) -> Result<String> {
    if !(value.is_string() || value.is_number() || value.is_boolean()) {
        return Err(Error::BadRequest(format!(
            "value must be a string, a number or a boolean (a scalar of column {column:?})"
        )));
    }
    let field = snapshot
        .schema
        .field_with_name(column)
        .map_err(|e| Error::Internal(e.to_string()))?;
    let schema = Arc::new(Schema::new(vec![field.clone().with_nullable(true)]));
    let body = serde_json::to_vec(&serde_json::json!({ "data": [{ column: value }] }))
        .map_err(|e| Error::Internal(e.to_string()))?;
    let batch = RowsBody::Json(body)
        .into_batch(&schema)
        .map_err(|error| match error {
            Error::BadRequest(message) => Error::BadRequest(format!("invalid value: {message}")),
            other => other,
        })?;
    exact_values(batch.column(0).as_ref())
        .map_err(index_error)?
        .into_iter()
        .next()
        .flatten()
        .ok_or_else(|| Error::BadRequest("value must not be null".to_owned()))
}

/// A value of an added result column.
enum Extra {
    Score(f64),
    Rank(u32),
}

/// `rows` with more columns, their values per row id.
fn with_columns(
    rows: RecordBatch,
    values: impl Fn(u64) -> Vec<Option<Extra>>,
    columns: &[(&str, DataType, bool)],
) -> Result<RecordBatch> {
    let ids = rows
        .column_by_name("_row_id")
        .and_then(|c| c.as_any().downcast_ref::<arrow::array::UInt64Array>())
        .ok_or_else(|| Error::Internal("search rows have no _row_id".to_owned()))?;
    let per_row: Vec<Vec<Option<Extra>>> = ids.values().iter().map(|id| values(*id)).collect();
    let mut fields: Vec<Arc<Field>> = rows.schema().fields().iter().cloned().collect();
    let mut arrays: Vec<ArrayRef> = rows.columns().to_vec();
    for (i, (name, data_type, nullable)) in columns.iter().enumerate() {
        let array: ArrayRef = match data_type {
            DataType::Float32 => {
                Arc::new(Float32Array::from_iter(per_row.iter().map(
                    |r| match r.get(i) {
                        Some(Some(Extra::Score(s))) => Some(*s as f32),
                        _ => None,
                    },
                )))
            }
            _ => Arc::new(UInt32Array::from_iter(per_row.iter().map(
                |r| match r.get(i) {
                    Some(Some(Extra::Rank(r))) => Some(*r),
                    _ => None,
                },
            ))),
        };
        fields.push(Arc::new(Field::new(*name, data_type.clone(), *nullable)));
        arrays.push(array);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .map_err(|e| Error::Internal(e.to_string()))
}
