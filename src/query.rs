//! SQL with DataFusion: read-only queries across a database's tables, and the predicates of
//! update and delete.
//!
//! Identifiers are case-sensitive as written (DataFusion's lower-casing of unquoted names is
//! off), because table and column names are. A query is one statement, and only a query: DDL,
//! DML, COPY and other statements are refused before anything runs. Errors in the query (syntax,
//! unknown names, types, division by zero) are the client's (400); only failures of the server
//! are 500.

use std::{ops::ControlFlow, sync::Arc};

use arrow::array::{AsArray, RecordBatch};
use arrow_schema::SchemaRef;
use datafusion::{
    common::{
        DFSchema, ScalarValue,
        tree_node::{TreeNode, TreeNodeRecursion},
    },
    error::DataFusionError,
    execution::{
        object_store::ObjectStoreUrl,
        runtime_env::{RuntimeEnv, RuntimeEnvBuilder},
    },
    logical_expr::{Expr, ExprSchemable, LogicalPlan, Operator, col, lit},
    prelude::{SessionConfig, SessionContext},
    sql::{
        parser::Statement,
        sqlparser::{
            ast::{self, Visit, Visitor},
            keywords::Keyword,
        },
    },
};
use object_store::ObjectStore;
use strata_projections::table::{
    TableScan, TableSnapshot, rows::ROW_ID, strings_as_declared, strings_as_declared_schema,
};

use crate::{
    error::{Error, Result},
    limits::{GATE_FACTOR, MAX_SQL_DEPTH, Shape, depth_bound, too_deep},
};

/// The rows a query produced.
#[derive(Debug)]
pub struct QueryResult {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

/// The DataFusion runtime every query shares: its object store registry (each active
/// database's store, under the database's URL), its memory pool, and its caches (Parquet footers
/// are read once, not on every query). The pool holds `memory_bytes` for every query of the
/// node together (sorts, joins, aggregations, as DataFusion counts them): past it, a query that
/// can spill does so to the system's temporary directory, and one that cannot fails with 503
/// `unavailable`. Listings of files (of connected object stores) are cached for 10 s.
pub fn runtime(memory_bytes: usize) -> Arc<RuntimeEnv> {
    RuntimeEnvBuilder::new()
        .with_memory_limit(memory_bytes, 1.0)
        // Listings of a connected object store's files are kept this long: files added to
        // a bucket are read within it.
        .with_object_list_cache_ttl(Some(std::time::Duration::from_secs(10)))
        .build_arc()
        .unwrap_or_else(|error| {
            // Only a disk manager that cannot start fails the build; run without spilling.
            tracing::warn!(%error, "the query runtime starts with its defaults");
            Arc::new(RuntimeEnv::default())
        })
}

/// Makes a database's store known to queries as `url`.
pub fn register_store(runtime: &RuntimeEnv, url: &ObjectStoreUrl, store: Arc<dyn ObjectStore>) {
    runtime.register_object_store(url.as_ref(), store);
}

/// A session for one query, on the shared runtime.
pub fn session(runtime: &Arc<RuntimeEnv>) -> SessionContext {
    let mut config = SessionConfig::new().with_information_schema(false);
    config.options_mut().sql_parser.enable_ident_normalization = false;
    SessionContext::new_with_config_rt(config, runtime.clone())
}

/// Parses `sql`: one statement, and a query.
pub fn parse(ctx: &SessionContext, sql: &str) -> Result<Statement> {
    if sql.trim().is_empty() {
        return Err(Error::BadRequest("the sql is empty".to_owned()));
    }
    let state = ctx.state();
    let dialect = state.config().options().sql_parser.dialect;
    check_sql_tokens(sql)?;
    let statement = state.sql_to_statement(sql, &dialect).map_err(classify)?;
    check_statement_depth(&statement)?;
    let is_query = matches!(
        &statement,
        Statement::Statement(inner) if matches!(**inner, datafusion::sql::sqlparser::ast::Statement::Query(_))
    );
    if !is_query {
        return Err(Error::BadRequest(
            "only a query (SELECT, WITH, VALUES) may run here; DDL, DML, COPY and other statements are refused"
                .to_owned(),
        ));
    }
    Ok(statement)
}

/// The names of the tables a statement reads.
pub fn table_names(ctx: &SessionContext, statement: &Statement) -> Result<Vec<String>> {
    let references = ctx
        .state()
        .resolve_table_references(statement)
        .map_err(classify)?;
    Ok(references.iter().map(|r| r.table().to_owned()).collect())
}

/// The tables a statement names, as written (`"pg"."orders"` has the schema `pg`).
pub fn table_references(
    ctx: &SessionContext,
    statement: &Statement,
) -> Result<Vec<datafusion::common::TableReference>> {
    ctx.state()
        .resolve_table_references(statement)
        .map_err(classify)
}

/// Plans and runs a parsed query against the tables registered in `ctx`.
pub async fn run(ctx: &SessionContext, statement: Statement) -> Result<QueryResult> {
    run_with(ctx, statement, classify).await
}

/// [`run`], with the errors of running (a connected source's among them) told apart by
/// `classify`.
pub async fn run_with(
    ctx: &SessionContext,
    statement: Statement,
    classify: impl Fn(DataFusionError) -> Error + Copy,
) -> Result<QueryResult> {
    let plan = read_only_plan(ctx, statement, classify).await?;
    let frame = ctx.execute_logical_plan(plan).await.map_err(classify)?;
    // Tables are scanned with their strings as views; answers come in the declared types.
    let schema = strings_as_declared_schema(&Arc::new(frame.schema().as_arrow().clone()));
    let batches = frame
        .collect()
        .await
        .and_then(|batches| batches.iter().map(strings_as_declared).collect())
        .map_err(classify)?;
    Ok(QueryResult { schema, batches })
}

/// The logical plan of `statement`, refused unless it only reads (no DDL, DML or other
/// statement).
pub async fn read_only_plan(
    ctx: &SessionContext,
    statement: Statement,
    classify: impl Fn(DataFusionError) -> Error,
) -> Result<LogicalPlan> {
    let plan = ctx
        .state()
        .statement_to_plan(statement)
        .await
        .map_err(&classify)?;
    datafusion::execution::context::SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
        .verify_plan(&plan)
        .map_err(classify)?;
    Ok(plan)
}

/// What a predicate matched: live row ids (ascending), how many of them have a vector, and the
/// row ids the predicate names explicitly (`_row_id = n`, `_row_id IN (...)`).
#[derive(Debug, Default)]
pub struct Matched {
    pub ids: Vec<u64>,
    pub vectors: u64,
    pub named: Vec<u64>,
}

/// Evaluates an update or delete predicate over a table snapshot.
pub async fn matching(
    ctx: &SessionContext,
    snapshot: Arc<TableSnapshot>,
    predicate: &str,
) -> Result<Matched> {
    matching_as(ctx, snapshot, predicate, "predicate").await
}

/// Evaluates a boolean SQL expression over a table snapshot; errors call it `what` (the
/// predicate of a write, the filter of a search).
pub async fn matching_as(
    ctx: &SessionContext,
    snapshot: Arc<TableSnapshot>,
    predicate: &str,
    what: &str,
) -> Result<Matched> {
    if predicate.trim().is_empty() {
        return Err(Error::BadRequest(format!("the {what} is empty")));
    }
    let schema = DFSchema::try_from(snapshot.schema.as_ref().clone())
        .map_err(|e| Error::Internal(e.to_string()))?;
    let invalid = |e: DataFusionError| match classify(e) {
        Error::BadRequest(message) => Error::BadRequest(format!("invalid {what}: {message}")),
        other => other,
    };
    check_sql_tokens(predicate)?;
    let state = ctx.state();
    let dialect = state.config().options().sql_parser.dialect;
    let parsed = state.sql_to_expr(predicate, &dialect).map_err(invalid)?;
    check_depth(&parsed)?;
    drop(parsed);
    let expr = ctx.parse_sql_expr(predicate, &schema).map_err(invalid)?;
    let kind = expr.get_type(&schema).map_err(invalid)?;
    if !matches!(
        kind,
        arrow_schema::DataType::Boolean | arrow_schema::DataType::Null
    ) {
        return Err(Error::BadRequest(format!(
            "invalid {what}: it is of type {kind}, not a boolean condition"
        )));
    }
    let named = named_row_ids(&expr);
    let has_vector = match &snapshot.table.vector_column {
        Some(name) => col(format!("\"{name}\"")).is_not_null(),
        None => lit(false),
    };
    let frame = ctx
        .read_table(Arc::new(TableScan::new(snapshot.clone())))
        .map_err(classify)?
        .filter(expr)
        .map_err(invalid)?
        .select(vec![col(ROW_ID), has_vector.alias("has_vector")])
        .map_err(invalid)?;
    let batches = frame.collect().await.map_err(invalid)?;
    let mut matched = Matched {
        named,
        ..Matched::default()
    };
    for batch in batches {
        let ids = batch
            .column(0)
            .as_primitive::<arrow::datatypes::UInt64Type>();
        let vectors = batch.column(1).as_boolean();
        matched.ids.extend(ids.values().iter().copied());
        matched.vectors += vectors.true_count() as u64;
    }
    matched.ids.sort_unstable();
    Ok(matched)
}

/// Row ids a predicate names as literals: `_row_id = n` (either way round) and
/// `_row_id IN (n, ...)`, anywhere in the expression.
pub fn named_row_ids(expr: &Expr) -> Vec<u64> {
    let is_row_id = |e: &Expr| matches!(e, Expr::Column(c) if c.name == ROW_ID);
    let literal = |e: &Expr| match e {
        Expr::Literal(value, _) => as_row_id(value),
        _ => None,
    };
    let mut named = Vec::new();
    let _ = expr.apply(|e| {
        match e {
            // `NOT (_row_id = 5)` does not name row 5 as one to find.
            Expr::Not(_) => return Ok(TreeNodeRecursion::Jump),
            Expr::BinaryExpr(b) if b.op == Operator::Eq => {
                if is_row_id(&b.left) {
                    named.extend(literal(&b.right));
                } else if is_row_id(&b.right) {
                    named.extend(literal(&b.left));
                }
            }
            Expr::InList(list) if !list.negated && is_row_id(&list.expr) => {
                named.extend(list.list.iter().filter_map(literal));
            }
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    });
    named.sort_unstable();
    named.dedup();
    named
}

fn as_row_id(value: &ScalarValue) -> Option<u64> {
    match value {
        ScalarValue::UInt64(Some(v)) => Some(*v),
        ScalarValue::UInt32(Some(v)) => Some(u64::from(*v)),
        ScalarValue::Int64(Some(v)) => u64::try_from(*v).ok(),
        ScalarValue::Int32(Some(v)) => u64::try_from(*v).ok(),
        _ => None,
    }
}

/// Refuses, before it is parsed, SQL whose tokens could build a tree too deep to parse, walk
/// or even drop on the server's stacks (see [`crate::limits`]).
pub fn check_sql_tokens(sql: &str) -> Result<()> {
    use datafusion::sql::sqlparser::{
        dialect::GenericDialect,
        tokenizer::{Token, Tokenizer},
    };
    // A text that does not tokenize is refused by the parser, which tokenizes first.
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return Ok(());
    };
    let shapes = tokens.iter().filter_map(|token| {
        Some(match token {
            Token::Whitespace(_) | Token::EOF => return None,
            Token::LParen | Token::LBracket | Token::LBrace => Shape::Open,
            Token::RParen | Token::RBracket | Token::RBrace => Shape::Close,
            Token::Comma | Token::SemiColon => Shape::Separator,
            Token::Word(word) if word.keyword == Keyword::NoKeyword => Shape::Operand,
            Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::Placeholder(_) => Shape::Operand,
            _ => Shape::Operator,
        })
    });
    if depth_bound(shapes) > GATE_FACTOR * MAX_SQL_DEPTH {
        return Err(Error::BadRequest(too_deep("SQL expression", MAX_SQL_DEPTH)));
    }
    Ok(())
}

/// Refuses a parsed statement whose expressions nest deeper than [`MAX_SQL_DEPTH`], before it
/// is planned.
pub fn check_statement_depth(statement: &Statement) -> Result<()> {
    match statement {
        Statement::Statement(inner) => check_depth(inner.as_ref()),
        // DataFusion's own statements (COPY, CREATE EXTERNAL TABLE, EXPLAIN) are refused later,
        // and the ones that hold a query are only as deep as the query's tokens allowed.
        _ => Ok(()),
    }
}

/// Refuses a parsed node (a statement, an expression) nesting deeper than [`MAX_SQL_DEPTH`].
pub fn check_depth<N: Visit>(node: &N) -> Result<()> {
    /// Counts the expressions and queries open on the way down; breaks past the limit, so its
    /// own recursion never goes deeper than that.
    struct Depth {
        open: usize,
    }
    impl Visitor for Depth {
        type Break = ();
        fn pre_visit_query(&mut self, _: &ast::Query) -> ControlFlow<()> {
            self.enter()
        }
        fn post_visit_query(&mut self, _: &ast::Query) -> ControlFlow<()> {
            self.open -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, _: &ast::Expr) -> ControlFlow<()> {
            self.enter()
        }
        fn post_visit_expr(&mut self, _: &ast::Expr) -> ControlFlow<()> {
            self.open -= 1;
            ControlFlow::Continue(())
        }
    }
    impl Depth {
        fn enter(&mut self) -> ControlFlow<()> {
            self.open += 1;
            if self.open > MAX_SQL_DEPTH {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }
    match node.visit(&mut Depth { open: 0 }) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(()) => Err(Error::BadRequest(too_deep("SQL expression", MAX_SQL_DEPTH))),
    }
}

/// Whose fault a DataFusion error is.
pub fn classify(error: DataFusionError) -> Error {
    let root = error.find_root();
    match root {
        DataFusionError::SQL(..)
        | DataFusionError::Plan(_)
        | DataFusionError::SchemaError(..)
        | DataFusionError::NotImplemented(_)
        | DataFusionError::Configuration(_)
        | DataFusionError::ArrowError(..)
        | DataFusionError::Execution(_) => Error::BadRequest(clean(&root.to_string())),
        DataFusionError::ResourcesExhausted(message) => Error::Unavailable(format!(
            "the query needs more resources than are free: {message}"
        )),
        _ => Error::Internal(error.to_string()),
    }
}

/// DataFusion prefixes messages with their kind ("Error during planning: ..."); keep the rest.
fn clean(message: &str) -> String {
    for prefix in [
        "SQL error: ",
        "Error during planning: ",
        "Schema error: ",
        "This feature is not implemented: ",
        "Arrow error: ",
        "Execution error: ",
        "Invalid or Unsupported Configuration: ",
    ] {
        if let Some(rest) = message.strip_prefix(prefix) {
            return unwrapped(rest);
        }
    }
    unwrapped(message)
}

/// The parser's message without its debug wrapping: `ParserError("Expected: ...")` is
/// `Expected: ...`.
fn unwrapped(message: &str) -> String {
    for wrapper in ["ParserError(\"", "TokenizerError(\""] {
        if let Some(inner) = message
            .strip_prefix(wrapper)
            .and_then(|rest| rest.strip_suffix("\")"))
        {
            return inner.replace("\\\"", "\"");
        }
    }
    message.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(sql: &str) -> bool {
        let refusal = |r: Result<()>| matches!(r, Err(Error::BadRequest(m)) if m.contains("nests deeper than 1000 levels"));
        if refusal(check_sql_tokens(sql)) {
            return true;
        }
        let ctx = SessionContext::new();
        let statement = ctx
            .state()
            .sql_to_statement(sql, &Default::default())
            .unwrap();
        refusal(check_statement_depth(&statement))
    }

    #[test]
    fn sql_nesting_is_bounded() {
        // As a query runs in the server: on a thread with its stack.
        std::thread::Builder::new()
            .stack_size(crate::limits::THREAD_STACK_BYTES)
            .spawn(sql_nesting_checks)
            .unwrap()
            .join()
            .unwrap();
    }

    fn sql_nesting_checks() {
        let chain = |n: usize| format!("SELECT {} AS x", vec!["1"; n].join(" + "));
        assert!(!refused(&chain(MAX_SQL_DEPTH - 1)));
        assert!(refused(&chain(MAX_SQL_DEPTH + 1)));
        // Refused by the bound over tokens, unparsed.
        assert!(check_sql_tokens(&chain(100_000)).is_err());
        let ors = (0..2000)
            .map(|i| format!("a = {i}"))
            .collect::<Vec<_>>()
            .join(" OR ");
        assert!(refused(&format!("SELECT * FROM t WHERE {ors}")));
        // Lists are flat.
        let list = (0..100_000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        assert!(!refused(&format!("SELECT * FROM t WHERE a IN ({list})")));
        let rows = vec!["(1, 'a', -2.5)"; 50_000].join(", ");
        assert!(check_sql_tokens(&format!("INSERT INTO t VALUES {rows}")).is_ok());
    }

    fn parse_expr(sql: &str) -> Expr {
        let schema = DFSchema::try_from(arrow_schema::Schema::new(vec![
            arrow_schema::Field::new(ROW_ID, arrow_schema::DataType::UInt64, false),
            arrow_schema::Field::new("n", arrow_schema::DataType::Int64, true),
        ]))
        .unwrap();
        SessionContext::new().parse_sql_expr(sql, &schema).unwrap()
    }

    #[test]
    fn named_row_ids_are_found_anywhere_in_a_predicate() {
        assert_eq!(named_row_ids(&parse_expr("_row_id = 5")), vec![5]);
        assert_eq!(named_row_ids(&parse_expr("7 = _row_id")), vec![7]);
        assert_eq!(
            named_row_ids(&parse_expr(
                "_row_id IN (3, 1, 3) OR (n > 2 AND _row_id = 9)"
            )),
            vec![1, 3, 9]
        );
        assert!(named_row_ids(&parse_expr("_row_id NOT IN (1, 2)")).is_empty());
        assert!(named_row_ids(&parse_expr("NOT (_row_id = 5)")).is_empty());
        assert_eq!(
            named_row_ids(&parse_expr("NOT (_row_id = 5) OR _row_id = 6")),
            vec![6]
        );
        assert!(named_row_ids(&parse_expr("_row_id > 5")).is_empty());
        assert!(named_row_ids(&parse_expr("n = 5")).is_empty());
    }

    #[test]
    fn only_single_queries_parse() {
        let ctx = SessionContext::new();
        assert!(parse(&ctx, "SELECT 1").is_ok());
        assert!(parse(&ctx, "WITH x AS (SELECT 1 AS a) SELECT a FROM x").is_ok());
        for sql in [
            "",
            "CREATE TABLE x (a INT)",
            "DROP TABLE t",
            "INSERT INTO t VALUES (1)",
            "DELETE FROM t",
            "COPY t TO '/tmp/x.parquet'",
            "SELECT 1; SELECT 2",
            "SET datafusion.execution.batch_size = 1",
            "SELEC 1",
        ] {
            assert!(
                matches!(parse(&ctx, sql), Err(Error::BadRequest(_))),
                "{sql} should be refused"
            );
        }
    }
}
