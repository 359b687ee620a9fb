//! Platform SQL (POST /sql): DataFusion over an account's datasets, the tables of its database
//! `default`.
//!
//! A statement is one of:
//! - a query (`SELECT`, `WITH`, `VALUES`): every dataset it names is scanned from a snapshot of
//!   its segments and memtable, bounded to `@timestamp` from `start_time` to `end_time` when the
//!   request gives them; `ST_POINT`, `ST_DISTANCE` and `KNN_SEARCH` are there beside DataFusion's
//!   own functions ([`functions`]);
//! - `SHOW TABLES`: the datasets; `DESCRIBE <dataset>`: its columns.
//!
//! Anything else is refused (400) before it runs, as is a statement DataFusion cannot plan: a
//! bad statement is the client's, never a 500.

mod functions;
mod insert;

use std::{collections::HashMap, sync::Arc};

use arrow::{
    array::{RecordBatch, StringArray},
    datatypes::{DataType, Field, Schema},
};
use datafusion::{
    logical_expr::{ScalarUDF, col, lit},
    prelude::SessionContext,
    scalar::ScalarValue,
    sql::{
        parser::Statement,
        sqlparser::ast::{self, Visit, Visitor},
    },
};
use strata_projections::{
    catalog::TableDef,
    table::{TableScan, TableSnapshot},
};

use super::{Action, Engine, Origin, PlatformPrincipal, TIMESTAMP_FIELD, datasets::check_name};
use crate::{
    documents::mapping,
    error::{Error, Result},
    query::{self, QueryResult},
};

/// What a statement comes to: rows, or how many rows an INSERT inserted or updated.
#[derive(Debug)]
pub enum SqlOutcome {
    Rows(QueryResult),
    Affected(u64),
}

/// The `@timestamp` bounds a request puts on every dataset it reads (Unix milliseconds, both
/// included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeBounds {
    pub start: Option<i64>,
    pub end: Option<i64>,
}

/// The type a column of an answer has in the platform's words: `string`, `long`, `double`,
/// `boolean`, `date`, `array`, `geo_point`, `object`.
pub fn type_name(data_type: &DataType) -> &'static str {
    match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string",
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => "long",
        DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Decimal128(..) => {
            "double"
        }
        DataType::Boolean => "boolean",
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => "date",
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => "array",
        DataType::Struct(fields) if fields.len() == 2 && fields[0].name() == "lat" => "geo_point",
        DataType::Null => "null",
        _ => "object",
    }
}

/// The datasets `KNN_SEARCH(...)` calls of a statement name (their first argument).
fn knn_datasets(statement: &ast::Statement) -> Vec<String> {
    struct Calls(Vec<String>);
    impl Visitor for Calls {
        type Break = ();
        fn pre_visit_table_factor(
            &mut self,
            factor: &ast::TableFactor,
        ) -> std::ops::ControlFlow<()> {
            if let ast::TableFactor::Function { name, args, .. } = factor
                && name.to_string().eq_ignore_ascii_case("knn_search")
                && let Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(
                    ast::Expr::Value(value),
                ))) = args.first()
                && let ast::Value::SingleQuotedString(dataset) = &value.value
            {
                self.0.push(dataset.clone());
            }
            if let ast::TableFactor::Table {
                name,
                args: Some(args),
                ..
            } = factor
                && name.to_string().eq_ignore_ascii_case("knn_search")
                && let Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(
                    ast::Expr::Value(value),
                ))) = args.args.first()
                && let ast::Value::SingleQuotedString(dataset) = &value.value
            {
                self.0.push(dataset.clone());
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut calls = Calls(Vec::new());
    let _ = statement.visit(&mut calls);
    calls.0
}

/// One column of strings.
fn strings(name: &str, values: Vec<String>) -> Result<QueryResult> {
    let schema = Arc::new(Schema::new(vec![Field::new(name, DataType::Utf8, false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(values))])
        .map_err(|e| Error::Internal(e.to_string()))?;
    Ok(QueryResult {
        schema,
        batches: vec![batch],
    })
}

/// `DESCRIBE <dataset>`: each column's name, its type in an answer, and its mapping's type.
fn describe(def: &TableDef) -> Result<QueryResult> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("column", DataType::Utf8, false),
        Field::new("type", DataType::Utf8, false),
        Field::new("mapping", DataType::Utf8, false),
    ]));
    let (mut names, mut types, mut mappings) = (Vec::new(), Vec::new(), Vec::new());
    for column in &def.columns {
        names.push(column.name.clone());
        types.push(type_name(&column.data_type.to_arrow()).to_owned());
        mappings.push(mapping::es_type(def, column));
    }
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(names)),
            Arc::new(StringArray::from(types)),
            Arc::new(StringArray::from(mappings)),
        ],
    )
    .map_err(|e| Error::Internal(e.to_string()))?;
    Ok(QueryResult {
        schema,
        batches: vec![batch],
    })
}

impl Engine {
    /// POST /sql: runs one statement over the account's datasets (see the module
    /// documentation). `scope`: the dataset of POST /{dataset}/sql, the only one an INSERT
    /// there may write.
    pub async fn platform_sql(
        &self,
        principal: &PlatformPrincipal,
        sql: &str,
        bounds: TimeBounds,
        scope: Option<&str>,
        origin: &Origin,
    ) -> Result<SqlOutcome> {
        if let Some(scope) = scope {
            check_name(scope)?;
        }
        let ctx = query::session(&self.queries);
        ctx.register_udf(ScalarUDF::from(functions::StPoint::new()));
        ctx.register_udf(ScalarUDF::from(functions::StDistance::new()));
        if sql.trim().is_empty() {
            return Err(Error::BadRequest("the query is empty".to_owned()));
        }
        let state = ctx.state();
        let dialect = state.config().options().sql_parser.dialect;
        query::check_sql_tokens(sql)?;
        let statement = state
            .sql_to_statement(sql, &dialect)
            .map_err(query::classify)?;
        query::check_statement_depth(&statement)?;
        let Statement::Statement(inner) = &statement else {
            return Err(unsupported());
        };
        let datasets = self
            .datasets_catalog(&principal.account)
            .await?
            .unwrap_or_default();
        let dataset = |name: &str| {
            datasets
                .tables
                .get(name)
                .filter(|def| def.dataset)
                .cloned()
                .ok_or_else(|| Error::BadRequest(format!("no dataset [{name}]")))
        };
        let rows = match inner.as_ref() {
            ast::Statement::Insert(insert) => {
                return Ok(SqlOutcome::Affected(
                    self.sql_insert(principal, insert, scope, origin).await?,
                ));
            }
            ast::Statement::ShowTables { .. } => {
                self.authorize(principal, Action::MetadataRead, "*")?;
                let names = datasets
                    .tables
                    .values()
                    .filter(|def| def.dataset)
                    .map(|def| def.name.clone())
                    .collect();
                strings("name", names)
            }
            ast::Statement::ExplainTable { table_name, .. } => {
                let name = object_name(table_name);
                self.authorize(principal, Action::MetadataRead, &name)?;
                describe(dataset(&name)?.as_ref())
            }
            ast::Statement::Query(_) => {
                let knn: HashMap<String, Arc<TableSnapshot>> = {
                    let mut found = HashMap::new();
                    for name in knn_datasets(inner) {
                        let snapshot = self.dataset_snapshot(principal, &dataset(&name)?).await?;
                        found.insert(name, snapshot);
                    }
                    found
                };
                // Table function names are as written (names are case-sensitive here).
                let knn = Arc::new(functions::KnnSearch {
                    datasets: knn,
                    bounds,
                });
                ctx.register_udtf("knn_search", knn.clone());
                ctx.register_udtf("KNN_SEARCH", knn);
                for name in query::table_names(&ctx, &statement)? {
                    // An unknown name is left for the planner, which says so (400).
                    let Ok(def) = dataset(&name) else {
                        continue;
                    };
                    let snapshot = self.dataset_snapshot(principal, &def).await?;
                    register(&ctx, &name, snapshot, bounds)?;
                }
                query::run(&ctx, statement).await
            }
            _ => Err(unsupported()),
        };
        rows.map(SqlOutcome::Rows)
    }

    /// A snapshot of dataset `def`'s records, once the user may read them.
    async fn dataset_snapshot(
        &self,
        principal: &PlatformPrincipal,
        def: &Arc<TableDef>,
    ) -> Result<Arc<TableSnapshot>> {
        self.authorize(principal, Action::RecordRead, &def.name)?;
        let (runtime, def) = self.dataset(&principal.account, &def.name).await?;
        Ok(self.table_runtime(&runtime, &def).await?.snapshot())
    }
}

fn unsupported() -> Error {
    Error::BadRequest(
        "only a query (SELECT, WITH, VALUES), SHOW TABLES, DESCRIBE and INSERT may run here"
            .to_owned(),
    )
}

/// A table name as written, without quotes (`"web-logs"` is `web-logs`).
fn object_name(name: &ast::ObjectName) -> String {
    name.0
        .iter()
        .filter_map(|part| part.as_ident())
        .map(|ident| ident.value.clone())
        .collect::<Vec<_>>()
        .join(".")
}

/// Makes dataset `name` a table of `ctx`: its columns but the hidden row id, its records
/// bounded to `bounds` of `@timestamp`.
fn register(
    ctx: &SessionContext,
    name: &str,
    snapshot: Arc<TableSnapshot>,
    bounds: TimeBounds,
) -> Result<()> {
    let columns: Vec<_> = snapshot
        .table
        .columns
        .iter()
        .map(|c| col(format!("\"{}\"", c.name.replace('"', "\"\""))))
        .collect();
    let scan = Arc::new(TableScan::new(snapshot));
    let at = |ms: i64| {
        lit(ScalarValue::TimestampMillisecond(
            Some(ms),
            Some("UTC".into()),
        ))
    };
    let timestamp = col(format!("\"{TIMESTAMP_FIELD}\""));
    let mut frame = ctx
        .read_table(scan)
        .and_then(|frame| frame.select(columns))
        .map_err(query::classify)?;
    if let Some(start) = bounds.start {
        frame = frame
            .filter(timestamp.clone().gt_eq(at(start)))
            .map_err(query::classify)?;
    }
    if let Some(end) = bounds.end {
        frame = frame
            .filter(timestamp.lt_eq(at(end)))
            .map_err(query::classify)?;
    }
    ctx.register_table(name, frame.into_view())
        .map_err(query::classify)?;
    Ok(())
}
