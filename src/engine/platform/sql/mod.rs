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
mod masks;

use std::{collections::HashMap, sync::Arc};

use arrow::{
    array::{RecordBatch, StringArray},
    datatypes::{DataType, Field, Schema},
};
use datafusion::{
    logical_expr::{Expr, ScalarUDF, col, lit},
    prelude::SessionContext,
    scalar::ScalarValue,
    sql::{
        parser::Statement,
        sqlparser::ast::{self, Visit, Visitor},
    },
};
use strata_projections::{catalog::TableDef, table::TableScan};

use crate::engine::{
    Action, Engine, Origin, PlatformPrincipal, TIMESTAMP_FIELD,
    access::{DatasetView, FieldPolicy, LabelFilter, Mask, Target},
    connections,
    datasets::check_name,
};
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
pub(in crate::engine) fn strings(name: &str, values: Vec<String>) -> Result<QueryResult> {
    let schema = Arc::new(Schema::new(vec![Field::new(name, DataType::Utf8, false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(values))])
        .map_err(|e| Error::Internal(e.to_string()))?;
    Ok(QueryResult {
        schema,
        batches: vec![batch],
    })
}

/// `DESCRIBE <dataset>`: each column's name, its type in an answer, and its mapping's type, as
/// the reader sees them (`def` without the fields hidden from it; a redacted field reads as
/// text).
fn describe(def: &TableDef, fields: &FieldPolicy) -> Result<QueryResult> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("column", DataType::Utf8, false),
        Field::new("type", DataType::Utf8, false),
        Field::new("mapping", DataType::Utf8, false),
    ]));
    let (mut names, mut types, mut mappings) = (Vec::new(), Vec::new(), Vec::new());
    for column in &def.columns {
        names.push(column.name.clone());
        types.push(match fields.shows(&column.name) {
            Some(Some(Mask::Redact)) => "string".to_owned(),
            _ => type_name(&column.data_type.to_arrow()).to_owned(),
        });
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

/// A session for a platform statement: the shared runtime's, with the platform's functions.
fn session(runtime: &Arc<datafusion::execution::runtime_env::RuntimeEnv>) -> SessionContext {
    let ctx = query::session(runtime);
    ctx.register_udf(ScalarUDF::from(functions::StPoint::new()));
    ctx.register_udf(ScalarUDF::from(functions::StDistance::new()));
    ctx
}

/// `sql` read as one statement, through the gates that keep a statement the server's stacks
/// can parse and walk.
fn read_statement(ctx: &SessionContext, sql: &str) -> Result<Statement> {
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
    Ok(statement)
}

/// A session for [`check_statement`], with the table `name` of `batch`.
pub(in crate::engine) fn fuzz_session(name: &str, batch: RecordBatch) -> Result<SessionContext> {
    let ctx = session(&query::runtime(64 << 20));
    let table = datafusion::datasource::MemTable::try_new(batch.schema(), vec![vec![batch]])
        .map_err(query::classify)?;
    ctx.register_table(name, Arc::new(table))
        .map_err(query::classify)?;
    Ok(ctx)
}

/// `sql` read as POST /sql reads it before it reaches a dataset (the gates, the parse, an
/// INSERT's upsert), and a query planned, logically and physically, over `ctx`'s tables, not
/// run: the fuzz targets' entry.
pub(in crate::engine) async fn check_statement(ctx: &SessionContext, sql: &str) -> Result<()> {
    let statement = read_statement(ctx, sql)?;
    let Statement::Statement(inner) = &statement else {
        return Err(unsupported());
    };
    match inner.as_ref() {
        ast::Statement::Insert(insert) => insert::read(insert).map(|_| ()),
        ast::Statement::Query(_) => {
            let plan = query::read_only_plan(ctx, statement, query::classify).await?;
            ctx.state()
                .create_physical_plan(&plan)
                .await
                .map_err(query::classify)?;
            Ok(())
        }
        _ => Ok(()),
    }
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
        self.platform_sql_via(principal, sql, bounds, scope, None, origin)
            .await
    }

    /// [`Engine::platform_sql`], or, with `connection` (an id or a name), the statement over
    /// that connection's datasets (SQL in place: a query, SHOW TABLES or DESCRIBE).
    pub async fn platform_sql_via(
        &self,
        principal: &PlatformPrincipal,
        sql: &str,
        bounds: TimeBounds,
        scope: Option<&str>,
        connection: Option<&str>,
        origin: &Origin,
    ) -> Result<SqlOutcome> {
        if let Some(scope) = scope {
            check_name(scope)?;
        }
        let ctx = session(&self.queries);
        let statement = read_statement(&ctx, sql)?;
        if let Some(connection) = connection {
            return self
                .connection_sql(principal, connection, statement, &ctx)
                .await
                .map(SqlOutcome::Rows);
        }
        let Statement::Statement(inner) = &statement else {
            return Err(unsupported());
        };
        // A name of no dataset is the statement's error (400), not a missing page (404).
        let no_dataset = |error: Error| match error {
            Error::DatasetNotFound(name) => Error::BadRequest(format!("no dataset [{name}]")),
            other => other,
        };
        let rows = match inner.as_ref() {
            ast::Statement::Insert(insert) => {
                return Ok(SqlOutcome::Affected(
                    self.sql_insert(principal, insert, scope, origin).await?,
                ));
            }
            ast::Statement::ShowTables { .. } => {
                let names = self
                    .reach(principal, Action::MetadataRead, Target::Every, true)
                    .await?
                    .into_iter()
                    .map(|seen| seen.name)
                    .collect();
                strings("name", names)
            }
            ast::Statement::ExplainTable { table_name, .. } => {
                let name = object_name(table_name);
                let view = self
                    .read_one(principal, Action::MetadataRead, &name)
                    .await
                    .map_err(no_dataset)?;
                describe(&view.visible_def(), &view.fields)
            }
            ast::Statement::Query(_) => {
                let knn: HashMap<String, DatasetView> = {
                    let mut found = HashMap::new();
                    for name in knn_datasets(inner) {
                        let view = self
                            .read_one(principal, Action::RecordRead, &name)
                            .await
                            .map_err(no_dataset)?;
                        found.insert(name, view);
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
                let mut connections = Vec::new();
                for reference in query::table_references(&ctx, &statement)? {
                    // `"<connection>"."<table>"`: a connected source's dataset.
                    if let Some(schema) = reference.schema()
                        && let Some(connection) = self
                            .current_control()
                            .await?
                            .connection_named(&principal.account, schema)
                            .cloned()
                    {
                        let table = reference.table().to_owned();
                        let registered = async {
                            let source = self.source_of(&connection).await?;
                            self.register_source_table(
                                &ctx,
                                principal,
                                &connection,
                                source.as_ref(),
                                &reference,
                                &table,
                            )
                            .await
                        }
                        .await;
                        self.record_use(&connection, registered.as_ref().err())
                            .await;
                        registered?;
                        connections.push(connection);
                        continue;
                    }
                    let name = reference.table().to_owned();
                    // A dataset, an alias (its datasets through its filters) or a pattern; an
                    // unknown name is left for the planner, which says so (400).
                    let view = match self
                        .read(
                            principal,
                            Action::RecordRead,
                            Target::Names(Some(&name)),
                            false,
                        )
                        .await
                    {
                        Ok(view) => view,
                        Err(Error::DatasetNotFound(_)) => continue,
                        Err(error) => return Err(error),
                    };
                    register(&ctx, &name, &view.datasets, bounds).await?;
                }
                if connections.is_empty() {
                    query::run(&ctx, statement).await
                } else {
                    let answer =
                        query::run_with(&ctx, statement, connections::sql::classify_sources).await;
                    for connection in &connections {
                        self.record_use(connection, answer.as_ref().err()).await;
                    }
                    answer
                }
            }
            _ => Err(unsupported()),
        };
        rows.map(SqlOutcome::Rows)
    }

    /// How many records of dataset `view` its reader may see.
    pub(in crate::engine) async fn visible_count(&self, view: &DatasetView) -> Result<u64> {
        if view.filter.is_none() {
            return Ok(view.snapshot.live_rows);
        }
        if !view.def.metrics
            && let Some(rows) = view.visible_rows().await?
        {
            return Ok(rows.rows().len());
        }
        let ctx = query::session(&self.queries);
        register(&ctx, "t", std::slice::from_ref(view), TimeBounds::default()).await?;
        let statement = query::parse(&ctx, "SELECT count(*) FROM t")?;
        let result = query::run(&ctx, statement).await?;
        let count = result
            .batches
            .first()
            .filter(|b| b.num_rows() > 0)
            .and_then(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<arrow::array::Int64Array>()
                    .map(|c| c.value(0))
            })
            .unwrap_or(0);
        Ok(u64::try_from(count).unwrap_or(0))
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

/// A record filter of a metrics dataset (`filter`, over the labels of `def`) as a condition on
/// its rows, true or false (never null) for each.
fn label_condition(filter: &LabelFilter, def: &TableDef) -> Expr {
    let column = |name: &str| {
        def.column(name)
            .map(|_| col(format!("\"{}\"", name.replace('"', "\"\""))))
    };
    match filter {
        LabelFilter::All => lit(true),
        LabelFilter::Nothing => lit(false),
        LabelFilter::Equals(name, values) => match column(name) {
            Some(c) => c
                .in_list(values.iter().map(|v| lit(v.as_str())).collect(), false)
                .is_true(),
            None => lit(false),
        },
        LabelFilter::Prefix(name, prefix) => match column(name) {
            Some(c) => datafusion::functions::string::expr_fn::starts_with(c, lit(prefix.as_str()))
                .is_true(),
            None => lit(false),
        },
        LabelFilter::Exists(name) => match column(name) {
            Some(c) => c.clone().is_not_null().and(c.not_eq(lit(""))).is_true(),
            None => lit(false),
        },
        LabelFilter::And(all) => all
            .iter()
            .map(|f| label_condition(f, def))
            .reduce(Expr::and)
            .unwrap_or_else(|| lit(true)),
        LabelFilter::Or(any) => any
            .iter()
            .map(|f| label_condition(f, def))
            .reduce(Expr::or)
            .unwrap_or_else(|| lit(false)),
        LabelFilter::Not(inner) => datafusion::logical_expr::not(label_condition(inner, def)),
    }
}

/// Makes the datasets of `views` one table `name` of `ctx`, as their reader sees them: the
/// records it may see, its fields hidden or masked, without the hidden row id, bounded to
/// `bounds` of `@timestamp`. Several datasets (an alias's, a pattern's) are one table of
/// their columns by name.
async fn register(
    ctx: &SessionContext,
    name: &str,
    views: &[DatasetView],
    bounds: TimeBounds,
) -> Result<()> {
    let at = |ms: i64| {
        lit(ScalarValue::TimestampMillisecond(
            Some(ms),
            Some("UTC".into()),
        ))
    };
    let timestamp = col(format!("\"{TIMESTAMP_FIELD}\""));
    let mut frames = Vec::with_capacity(views.len());
    for view in views {
        let snapshot = view.snapshot.clone();
        let def = snapshot.table.clone();
        let mut scan = TableScan::new(snapshot);
        if !def.metrics
            && let Some(rows) = view.visible_rows().await?
        {
            scan = scan.within(rows);
        }
        let mut frame = ctx.read_table(Arc::new(scan)).map_err(query::classify)?;
        if def.metrics
            && let Some(filter) = view.series_filter()?
        {
            frame = frame
                .filter(label_condition(&filter, &def))
                .map_err(query::classify)?;
        }
        if let Some(start) = bounds.start {
            frame = frame
                .filter(timestamp.clone().gt_eq(at(start)))
                .map_err(query::classify)?;
        }
        if let Some(end) = bounds.end {
            frame = frame
                .filter(timestamp.clone().lt_eq(at(end)))
                .map_err(query::classify)?;
        }
        let columns = masks::columns(&def, &view.fields)?;
        frames.push(frame.select(columns).map_err(query::classify)?);
    }
    let Some(frame) = frames
        .into_iter()
        .try_fold(
            None,
            |union: Option<datafusion::dataframe::DataFrame>, frame| match union {
                None => Ok(Some(frame)),
                Some(union) => union.union_by_name(frame).map(Some),
            },
        )
        .map_err(query::classify)?
    else {
        return Ok(());
    };
    ctx.register_table(name, frame.into_view())
        .map_err(query::classify)?;
    Ok(())
}
