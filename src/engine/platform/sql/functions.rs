//! The functions platform SQL adds to DataFusion's: `ST_POINT(lon, lat)` and
//! `ST_DISTANCE(a, b)` (metres on the sphere, as a `geo_distance` query measures them) over
//! points shaped as a dataset's `geo_point` column (a struct of `lat` and `lon`), and the table
//! function `KNN_SEARCH(dataset, field, vector, k)`: the `k` records whose vectors are nearest.

use std::{collections::HashMap, sync::Arc};

use arrow::{
    array::{Array, ArrayRef, AsArray, Float32Array, Float64Array, RecordBatch, StructArray},
    datatypes::{DataType, Field, Float64Type, Schema, SchemaRef},
};
use async_trait::async_trait;
use datafusion::{
    catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider},
    common::{DataFusionError, Result as DfResult, ScalarValue, plan_err},
    datasource::{TableType, memory::MemorySourceConfig},
    logical_expr::{ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility},
    physical_plan::ExecutionPlan,
};
use strata_projections::{
    schema::geo_point_fields,
    table::{TableSnapshot, geo},
};

use super::masks;
use crate::engine::access::{DatasetView, FieldPolicy};
use crate::engine::query_dsl::compile as dsl;

/// `ST_POINT(lon, lat)`: a point, as a `geo_point` column holds one (x first, as in WKT).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct StPoint {
    signature: Signature,
}

impl StPoint {
    pub fn new() -> StPoint {
        StPoint {
            signature: Signature::exact(
                vec![DataType::Float64, DataType::Float64],
                Volatility::Immutable,
            ),
        }
    }
}

/// A column of `rows` values from an argument (an array, or one value repeated).
fn column(value: &ColumnarValue, rows: usize) -> DfResult<ArrayRef> {
    value.to_array(rows)
}

impl ScalarUDFImpl for StPoint {
    fn name(&self) -> &str {
        "st_point"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Struct(geo_point_fields()))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let lon = column(&args.args[0], rows)?;
        let lat = column(&args.args[1], rows)?;
        let (lon, lat) = (
            lon.as_primitive::<Float64Type>(),
            lat.as_primitive::<Float64Type>(),
        );
        for row in 0..rows {
            if lat.is_valid(row) && lon.is_valid(row) {
                let (y, x) = (lat.value(row), lon.value(row));
                if !(-90.0..=90.0).contains(&y) || !(-180.0..=180.0).contains(&x) {
                    return plan_err!(
                        "ST_POINT({x}, {y}): a longitude is within ±180 and a latitude within ±90"
                    );
                }
            }
        }
        let nulls = arrow::buffer::NullBuffer::union(lat.nulls(), lon.nulls());
        let point = StructArray::try_new(
            geo_point_fields(),
            vec![
                Arc::new(Float64Array::new(lat.values().clone(), None)) as ArrayRef,
                Arc::new(Float64Array::new(lon.values().clone(), None)) as ArrayRef,
            ],
            nulls,
        )?;
        Ok(ColumnarValue::Array(Arc::new(point)))
    }
}

/// `ST_DISTANCE(a, b)`: the distance in metres between two points on the sphere (haversine,
/// the mean Earth radius), null when either is.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct StDistance {
    signature: Signature,
}

impl StDistance {
    pub fn new() -> StDistance {
        let point = DataType::Struct(geo_point_fields());
        StDistance {
            signature: Signature::exact(vec![point.clone(), point], Volatility::Immutable),
        }
    }
}

/// The points of a `geo_point` struct array, `None` where null.
fn points(array: &ArrayRef) -> DfResult<Vec<Option<geo::Point>>> {
    let points = array.as_struct_opt().ok_or_else(|| {
        DataFusionError::Plan("ST_DISTANCE takes points (ST_POINT, or a geo_point field)".into())
    })?;
    let lat = points.column(0).as_primitive::<Float64Type>();
    let lon = points.column(1).as_primitive::<Float64Type>();
    Ok((0..points.len())
        .map(|row| {
            points.is_valid(row).then(|| geo::Point {
                lat: lat.value(row),
                lon: lon.value(row),
            })
        })
        .collect())
}

impl ScalarUDFImpl for StDistance {
    fn name(&self) -> &str {
        "st_distance"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let a = points(&column(&args.args[0], rows)?)?;
        let b = points(&column(&args.args[1], rows)?)?;
        let distances: Float64Array = a
            .iter()
            .zip(&b)
            .map(|(a, b)| Some(geo::distance_m((*a)?, (*b)?)))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(distances)))
    }
}

/// `KNN_SEARCH(dataset, field, vector, k)`: a table of the `k` records of `dataset` whose
/// `field` vectors are nearest `vector` (a `[0.1, 0.2]` array or its text), with their
/// `_score`, best first. The datasets a statement names this way are resolved before it runs.
/// The request's `@timestamp` bounds hold here too: the nearest records among those in them.
/// Each dataset is read as its reader sees it: the records it may see, its fields hidden or
/// masked (a hidden vector field is no vector field).
#[derive(Debug)]
pub struct KnnSearch {
    pub datasets: HashMap<String, DatasetView>,
    pub bounds: super::TimeBounds,
}

/// A literal argument's value: a string, a number, or an array of numbers.
fn literal(expr: &Expr) -> Option<ScalarValue> {
    match expr {
        Expr::Literal(value, _) => Some(value.clone()),
        Expr::Cast(cast) => literal(&cast.expr),
        Expr::Alias(alias) => literal(&alias.expr),
        _ => None,
    }
}

/// The numbers of a vector argument: `[0.1, 0.2]` (an array of literals) or `'[0.1, 0.2]'`.
fn vector(expr: &Expr) -> Option<Vec<f32>> {
    if let Expr::ScalarFunction(call) = expr
        && call.name() == "make_array"
    {
        return call
            .args
            .iter()
            .map(|arg| match literal(arg)? {
                ScalarValue::Float64(Some(f)) => Some(f as f32),
                ScalarValue::Float32(Some(f)) => Some(f),
                ScalarValue::Int64(Some(n)) => Some(n as f32),
                _ => None,
            })
            .collect();
    }
    match literal(expr)? {
        ScalarValue::Utf8(Some(text)) => serde_json::from_str::<Vec<f32>>(&text).ok(),
        ScalarValue::List(list) if list.len() == 1 => {
            let values = arrow::compute::cast(&list.value(0), &DataType::Float32).ok()?;
            let values = values.as_primitive::<arrow::datatypes::Float32Type>();
            (values.null_count() == 0).then(|| values.values().to_vec())
        }
        _ => None,
    }
}

impl TableFunctionImpl for KnnSearch {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let usage = "KNN_SEARCH(dataset, field, vector, k): a dataset's name, its vector field's, a vector such as [0.1, 0.2], and how many records";
        let [dataset, field, query, k] = args.exprs() else {
            return plan_err!("{usage}");
        };
        let text = |expr: &Expr| match literal(expr) {
            Some(ScalarValue::Utf8(Some(text))) => Some(text),
            _ => None,
        };
        let (Some(dataset), Some(field), Some(query)) = (text(dataset), text(field), vector(query))
        else {
            return plan_err!("{usage}");
        };
        let k = match literal(k) {
            Some(ScalarValue::Int64(Some(k))) if (1..=10_000).contains(&k) => k as usize,
            _ => return plan_err!("{usage}; k from 1 to 10000"),
        };
        let Some(view) = self.datasets.get(&dataset) else {
            return plan_err!("KNN_SEARCH: no dataset [{dataset}]");
        };
        let snapshot = &view.snapshot;
        let table = &view.visible_def();
        if table.vector_column.as_deref() != Some(field.as_str()) {
            return plan_err!(
                "KNN_SEARCH: [{field}] is not the vector field of [{dataset}] ({})",
                table.vector_column.as_deref().unwrap_or("it has none")
            );
        }
        if Some(query.len()) != table.vector_dim() {
            return plan_err!(
                "KNN_SEARCH: the vector has {} numbers; [{field}] holds {}",
                query.len(),
                table.vector_dim().unwrap_or_default()
            );
        }
        // The dataset's columns as the reader sees them, without the hidden row id its
        // snapshot's rows begin with.
        let columns = Schema::new(
            snapshot
                .schema
                .fields()
                .iter()
                .skip(1)
                .cloned()
                .collect::<Vec<_>>(),
        );
        let mut fields: Vec<Field> = masks::masked_schema(&columns, &view.fields)
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new("_score", DataType::Float32, false));
        Ok(Arc::new(Nearest {
            snapshot: snapshot.clone(),
            query,
            k,
            bounds: self.bounds,
            filter: view.filter.clone(),
            fields: view.fields.clone(),
            schema: Arc::new(Schema::new(fields)),
        }))
    }
}

/// The table `KNN_SEARCH` makes: searched when it is scanned.
#[derive(Clone, Debug)]
struct Nearest {
    snapshot: Arc<TableSnapshot>,
    query: Vec<f32>,
    k: usize,
    bounds: super::TimeBounds,
    /// The records the reader may see (a Query DSL query; `None`: all).
    filter: Option<serde_json::Value>,
    /// How the reader sees the dataset's fields.
    fields: FieldPolicy,
    schema: SchemaRef,
}

impl Nearest {
    /// The `k` nearest rows among those within the bounds: (row id, distance), nearest first.
    fn search(&self) -> DfResult<Vec<(u64, f32)>> {
        let external = |e: String| DataFusionError::Execution(format!("KNN_SEARCH: {e}"));
        let super::TimeBounds { start, end } = self.bounds;
        // The window, as a range query over the dataset's document index, and the records the
        // reader may see.
        let window = match (start, end, &self.filter) {
            (None, None, None) => None,
            _ => {
                let schema = self
                    .snapshot
                    .index
                    .as_ref()
                    .and_then(|i| i.docs.clone())
                    .ok_or_else(|| external("the dataset has no document index".to_owned()))?;
                let mut range = serde_json::Map::new();
                if let Some(start) = start {
                    range.insert("gte".into(), start.into());
                }
                if let Some(end) = end {
                    range.insert("lte".into(), end.into());
                }
                let field = super::TIMESTAMP_FIELD;
                let mut filters = Vec::new();
                if !range.is_empty() {
                    filters.push(serde_json::json!({"range": {field: range}}));
                }
                filters.extend(self.filter.clone());
                let query = serde_json::json!({"bool": {"filter": filters}});
                let now = chrono::Utc::now().timestamp_millis();
                Some(dsl::compile(&schema, &query, now).map_err(|e| external(e.reason))?)
            }
        };
        dsl::Vectors::nearest(
            self.snapshot.as_ref(),
            &self.query,
            self.k,
            window.as_deref(),
        )
        .map_err(external)
    }
}

#[async_trait]
impl TableProvider for Nearest {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let external = |e: strata_projections::Error| DataFusionError::External(Box::new(e));
        let nearest = self.clone();
        let hits = tokio::task::spawn_blocking(move || nearest.search())
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))??;
        let ids: Vec<u64> = hits.iter().map(|(row, _)| *row).collect();
        let rows = self
            .snapshot
            .rows_by_id(&ids, None)
            .await
            .map_err(external)?;
        // The rows in the hits' order, each scored as a `knn` query scores it.
        let metric = self
            .snapshot
            .table
            .vector_metric
            .unwrap_or(strata_projections::catalog::VectorMetric::Cosine);
        let ids = rows
            .column(0)
            .as_primitive::<arrow::datatypes::UInt64Type>();
        let scores: Float32Array = (0..rows.num_rows())
            .map(|row| {
                let id = ids.value(row);
                hits.iter()
                    .find(|(row, _)| *row == id)
                    .map(|(_, distance)| dsl::vector_score(metric, *distance))
            })
            .collect();
        let data = rows
            .project(&(1..rows.num_columns()).collect::<Vec<_>>())
            .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?;
        let data = masks::mask_batch(&data, &self.fields)
            .map_err(|e| DataFusionError::Execution(e.to_string()))?;
        let mut columns = data.columns().to_vec();
        columns.push(Arc::new(scores));
        let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            self.schema.clone(),
            projection.cloned(),
        )?)
    }
}
