//! SQL in place: a statement over a connection's datasets (POST /sql with `connection_id`), and
//! a connection's datasets in a statement over the account's own (`"<connection>"."<table>"`).
//!
//! Each dataset a statement names is registered as its reader sees it: the fields a role
//! denies are not columns of it, so they are never asked of the source; the rest of the
//! query (filters, the columns it reads, a limit) is pushed to the source by its table
//! provider. Mask directives are not applied to SQL sources (spec: only the service's own
//! datasets and search sources are masked); a role's record filter (a Query DSL query) is a
//! condition sent to the source with the rest, and a filter outside the subset a SQL source
//! takes refuses the read.

use std::sync::Arc;

use arrow::{
    array::{RecordBatch, StringArray},
    datatypes::{DataType, Field, Schema},
};
use datafusion::{
    catalog::{MemorySchemaProvider, TableProvider},
    common::TableReference,
    error::DataFusionError,
    prelude::SessionContext,
    sql::{parser::Statement, sqlparser::ast},
};
use strata_projections::control::Connection;

use super::source::{Source, failure, failure_text};
use crate::{
    engine::{Action, Engine, PlatformPrincipal, sql::strings, sql_type_name},
    error::{Error, Result},
    query::{self, QueryResult},
};

/// What a failure while running a statement over connection `name` means: a source's own
/// error (wrapped by DataFusion as external) names the stage; the rest is the statement's.
fn classify_for(name: &str) -> impl Fn(DataFusionError) -> Error + Copy + '_ {
    move |error: DataFusionError| classify_source(&format!("query {name}"), error)
}

/// A source's own failure as a connection's error; DataFusion's other errors as a statement's.
/// The table providers report what the source said as external errors, or as execution
/// errors in their own words ("Failed to execute query").
pub(in crate::engine) fn classify_source(stage: &str, error: DataFusionError) -> Error {
    match error.find_root() {
        DataFusionError::External(inner) => failure(stage, inner.as_ref()),
        DataFusionError::ObjectStore(inner) => failure(stage, inner.as_ref()),
        DataFusionError::Execution(text) if text.contains("Failed to execute query") => {
            let text = text
                .lines()
                .filter(|line| !line.starts_with("For details, refer to"))
                .collect::<Vec<_>>()
                .join(" ");
            failure_text(stage, &text)
        }
        _ => query::classify(error),
    }
}

/// The name a statement gives a dataset of a connection, as the source knows it.
fn dataset_name(reference: &TableReference) -> String {
    match reference.schema() {
        Some(schema) => format!("{schema}.{}", reference.table()),
        None => reference.table().to_owned(),
    }
}

/// A dataset the source does not have, as a 404 naming the connection.
pub(in crate::engine) fn no_dataset(connection: &Connection, error: Error) -> Error {
    match error {
        Error::DatasetNotFound(name) => Error::NotFound(format!(
            "connection {:?} has no dataset [{name}]",
            connection.name
        )),
        other => other,
    }
}

impl Engine {
    /// Dataset `dataset` of `connection` as `principal` sees it (for record read): the source's
    /// table without the fields denied to it. A 403 when no role grants the read.
    pub(in crate::engine) async fn source_table(
        &self,
        ctx: &SessionContext,
        principal: &PlatformPrincipal,
        connection: &Connection,
        source: &dyn Source,
        dataset: &str,
        action: Action,
    ) -> Result<Arc<dyn TableProvider>> {
        // The right first: a user who may not read it learns nothing of the source.
        if !principal.grant.all
            && principal
                .grant
                .source_view(action, &connection.name, dataset, &[])
                .is_none()
        {
            return Err(self
                .read_source(principal, action, &connection.name, dataset, &[])
                .err()
                .unwrap_or_else(|| Error::Forbidden("not granted".to_owned())));
        }
        let table = source
            .table(&ctx.state(), dataset)
            .await
            .map_err(|error| no_dataset(connection, error))?;
        self.viewed_table(ctx, principal, connection, dataset, table, action)
    }

    /// `table`, dataset `dataset` of `connection`, as `principal` sees it: its record filter
    /// applied, the fields denied to it left out.
    pub(in crate::engine) fn viewed_table(
        &self,
        ctx: &SessionContext,
        principal: &PlatformPrincipal,
        connection: &Connection,
        dataset: &str,
        table: Arc<dyn TableProvider>,
        action: Action,
    ) -> Result<Arc<dyn TableProvider>> {
        let columns: Vec<String> = table
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let view = self.read_source(principal, action, &connection.name, dataset, &columns)?;
        if view.filter.is_none() && view.fields.hidden.is_empty() {
            return Ok(table);
        }
        // The records of the reader's record filter (a condition the source is sent), then
        // the fields it may see.
        let mut frame = ctx.read_table(table.clone()).map_err(query::classify)?;
        if let Some(filter) = &view.filter {
            let condition = super::dsl::filter_expr(filter, &table.schema()).map_err(|e| {
                Error::Forbidden(format!(
                    "the record filter of user {} on {}/{dataset} cannot be applied to a SQL \
                     source ({e}): the read is refused",
                    principal.user, connection.name
                ))
            })?;
            frame = frame.filter(condition).map_err(query::classify)?;
        }
        let shown: Vec<&str> = columns
            .iter()
            .map(String::as_str)
            .filter(|c| view.fields.shows(c).is_some())
            .collect();
        let frame = frame.select_columns(&shown).map_err(query::classify)?;
        Ok(frame.into_view())
    }

    /// Registers dataset `reference` of `connection` in `ctx` as `principal` sees it, under
    /// `reference` as the statement wrote it.
    pub(in crate::engine) async fn register_source_table(
        &self,
        ctx: &SessionContext,
        principal: &PlatformPrincipal,
        connection: &Connection,
        source: &dyn Source,
        reference: &TableReference,
        dataset: &str,
    ) -> Result<()> {
        // A name of no dataset is the statement's error (400), not a missing page.
        let table = self
            .source_table(
                ctx,
                principal,
                connection,
                source,
                dataset,
                Action::RecordRead,
            )
            .await
            .map_err(|error| match error {
                Error::NotFound(message) => Error::BadRequest(message),
                other => other,
            })?;
        if let Some(schema) = reference.schema() {
            let catalog = ctx
                .catalog("datafusion")
                .ok_or_else(|| Error::Internal("no default catalog".to_owned()))?;
            if catalog.schema(schema).is_none() {
                catalog
                    .register_schema(schema, Arc::new(MemorySchemaProvider::new()))
                    .map_err(query::classify)?;
            }
        }
        ctx.register_table(reference.clone(), table)
            .map_err(query::classify)?;
        Ok(())
    }

    /// GET /source/{id}/{dataset}/metadata: the dataset's fields as `principal` sees them.
    pub async fn connection_dataset_metadata(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        dataset: &str,
    ) -> Result<serde_json::Value> {
        let connection = self.connection(principal, id).await?;
        // The right first: a user who may not read it learns nothing of the source.
        self.read_source(
            principal,
            Action::MetadataRead,
            &connection.name,
            dataset,
            &[],
        )?;
        let ctx = query::session(&self.queries);
        let described = async {
            let source = self.source_of(&connection).await?;
            source
                .describe(&ctx.state(), dataset)
                .await
                .map_err(|error| no_dataset(&connection, error))
        }
        .await;
        self.record_use(&connection, described.as_ref().err()).await;
        let described = described?;
        let columns: Vec<String> = described.iter().map(|(name, _)| name.clone()).collect();
        let view = self.read_source(
            principal,
            Action::MetadataRead,
            &connection.name,
            dataset,
            &columns,
        )?;
        let fields: Vec<serde_json::Value> = described
            .iter()
            .filter(|(name, _)| view.fields.shows(name).is_some())
            .map(|(name, kind)| serde_json::json!({"name": name, "type": kind}))
            .collect();
        Ok(serde_json::json!({
            "connection_id": connection.id,
            "connection": connection.name,
            "dataset": dataset,
            "fields": fields,
        }))
    }

    /// POST /sql with `connection_id`: `statement` over the datasets of connection `id`, bare
    /// names being the source's (`schema.table` for another schema of a PostgreSQL source).
    pub async fn connection_sql(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        statement: Statement,
        ctx: &SessionContext,
    ) -> Result<QueryResult> {
        let connection = self.connection(principal, id).await?;
        let answer = self
            .run_in_place(principal, &connection, statement, ctx)
            .await;
        self.record_use(&connection, answer.as_ref().err()).await;
        answer
    }

    async fn run_in_place(
        &self,
        principal: &PlatformPrincipal,
        connection: &Connection,
        statement: Statement,
        ctx: &SessionContext,
    ) -> Result<QueryResult> {
        let source = self.source_of(connection).await?;
        let Statement::Statement(inner) = &statement else {
            return Err(refused());
        };
        match inner.as_ref() {
            ast::Statement::ShowTables { .. } => {
                let names = source
                    .datasets()
                    .await?
                    .into_iter()
                    .filter(|name| {
                        [Action::MetadataRead, Action::RecordRead]
                            .iter()
                            .any(|action| {
                                principal
                                    .grant
                                    .source_view(*action, &connection.name, name, &[])
                                    .is_some()
                            })
                    })
                    .collect();
                strings("name", names)
            }
            ast::Statement::ExplainTable { table_name, .. } => {
                let dataset = table_name
                    .0
                    .iter()
                    .filter_map(|part| part.as_ident())
                    .map(|ident| ident.value.clone())
                    .collect::<Vec<_>>()
                    .join(".");
                let table = self
                    .source_table(
                        ctx,
                        principal,
                        connection,
                        source.as_ref(),
                        &dataset,
                        Action::MetadataRead,
                    )
                    .await?;
                let schema = table.schema();
                let names = schema.fields().iter().map(|f| f.name().clone()).collect();
                let types = schema
                    .fields()
                    .iter()
                    .map(|f| sql_type_name(f.data_type()).to_owned())
                    .collect();
                describe(names, types)
            }
            ast::Statement::Query(_) => {
                for reference in query::table_references(ctx, &statement)? {
                    let dataset = dataset_name(&reference);
                    self.register_source_table(
                        ctx,
                        principal,
                        connection,
                        source.as_ref(),
                        &reference,
                        &dataset,
                    )
                    .await?;
                }
                query::run_with(ctx, statement, classify_for(&connection.name)).await
            }
            _ => Err(refused()),
        }
    }
}

/// `DESCRIBE`'s answer: each column's name and its type in an answer.
fn describe(names: Vec<String>, types: Vec<String>) -> Result<QueryResult> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("column", DataType::Utf8, false),
        Field::new("type", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(names)),
            Arc::new(StringArray::from(types)),
        ],
    )
    .map_err(|e| Error::Internal(e.to_string()))?;
    Ok(QueryResult {
        schema,
        batches: vec![batch],
    })
}

fn refused() -> Error {
    Error::BadRequest(
        "through a connection only a query (SELECT, WITH, VALUES), SHOW TABLES and DESCRIBE \
         may run: a connected source is read, never written"
            .to_owned(),
    )
}

/// [`classify_for`], for statements over the account's datasets that also read connections.
pub(in crate::engine) fn classify_sources(error: DataFusionError) -> Error {
    classify_source("query a connection", error)
}
