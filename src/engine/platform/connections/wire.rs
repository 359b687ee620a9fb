//! Sources of the SQL families: the PostgreSQL wire, the MySQL wire and SQLite files, read
//! through datafusion-table-providers. Their tables push filters, projections and limits down
//! to the source as SQL of its dialect.
//!
//! Dataset names: a MySQL or SQLite table by its name; a PostgreSQL table by its name when it
//! is in the connection's `schema` (default `public`), else as `schema.table`.

use std::{collections::HashMap, sync::Arc, time::Duration};

use arrow::{
    array::{AsArray, RecordBatch},
    compute::cast,
    datatypes::DataType,
};
use async_trait::async_trait;
use datafusion::{catalog::TableProvider, common::TableReference, execution::SessionState};
use datafusion_table_providers::{
    mysql::MySQLTableFactory,
    postgres::PostgresTableFactory,
    sql::db_connection_pool::{
        DbConnectionPool, Mode,
        dbconnection::query_arrow,
        mysqlpool::MySQLConnectionPool,
        postgrespool::PostgresConnectionPool,
        sqlitepool::{SqliteConnectionPool, SqliteConnectionPoolFactory},
    },
    sqlite::SqliteTableFactory,
};
use futures::TryStreamExt;
use secrecy::SecretString;
use serde_json::{Map, Value};

use super::{
    catalogue::{Connector, Family},
    config::text,
    source::{Source, failure},
};
use crate::error::{Error, Result};

enum Pool {
    Postgres(Arc<PostgresConnectionPool>),
    Mysql(Arc<MySQLConnectionPool>),
    Sqlite(Arc<SqliteConnectionPool>),
}

/// An opened SQL source.
pub struct Wire {
    pool: Pool,
    /// The schema whose tables go by their bare names (PostgreSQL) or the database (MySQL).
    schema: String,
}

fn flag(config: &Map<String, Value>, key: &str) -> Option<bool> {
    config.get(key).and_then(Value::as_bool)
}

/// The connection parameters datafusion-table-providers takes, from a config's keys.
fn params(connector: &Connector, config: &Map<String, Value>) -> HashMap<String, SecretString> {
    let mut params: HashMap<String, SecretString> = HashMap::new();
    let mut put = |key: &str, value: &str| {
        params.insert(key.to_owned(), SecretString::from(value.to_owned()));
    };
    let port = config
        .get("port")
        .and_then(Value::as_u64)
        .unwrap_or(u64::from(connector.default_port))
        .to_string();
    for (from, to) in [("host", "host"), ("username", "user"), ("database", "db")] {
        if let Some(value) = text(config, from) {
            put(to, value);
        }
    }
    if let Some(password) = text(config, "password") {
        put("pass", password);
    }
    let (ssl, verify) = (
        flag(config, "ssl"),
        flag(config, "ssl_verify").unwrap_or(true),
    );
    match connector.family {
        Family::Postgres => {
            put("port", &port);
            // Without `ssl`, TLS when the server offers it (libpq's default).
            let mode = match (ssl, verify) {
                (None, _) => "prefer",
                (Some(false), _) => "disable",
                (Some(true), true) => "verify-full",
                (Some(true), false) => "require",
            };
            put("sslmode", mode);
        }
        Family::Mysql => {
            put("tcp_port", &port);
            let mode = match (ssl, verify) {
                (None | Some(false), _) => "disabled",
                (Some(true), true) => "required",
                (Some(true), false) => "preferred",
            };
            put("sslmode", mode);
        }
        Family::Sqlite
        | Family::ObjectStore
        | Family::SearchEngine
        | Family::HttpJson
        | Family::Kafka
        | Family::Prometheus
        | Family::Nats
        | Family::Redis
        | Family::Amqp
        | Family::Mqtt => {}
    }
    params
}

impl Wire {
    /// Connects (a first connection proves the host and the credentials).
    pub async fn open(connector: &Connector, config: &Map<String, Value>) -> Result<Wire> {
        let stage = match connector.family {
            Family::Sqlite => format!("open {}", text(config, "path").unwrap_or_default()),
            _ => format!(
                "connect to {}:{}",
                text(config, "host").unwrap_or_default(),
                config
                    .get("port")
                    .and_then(Value::as_u64)
                    .unwrap_or(u64::from(connector.default_port))
            ),
        };
        let params = params(connector, config);
        match connector.family {
            Family::Postgres => {
                let pool = PostgresConnectionPool::new(params)
                    .await
                    .map_err(|e| failure(&stage, &e))?;
                Ok(Wire {
                    pool: Pool::Postgres(Arc::new(pool)),
                    schema: text(config, "schema").unwrap_or("public").to_owned(),
                })
            }
            Family::Mysql => {
                let pool = MySQLConnectionPool::new(params)
                    .await
                    .map_err(|e| failure(&stage, &e))?;
                Ok(Wire {
                    pool: Pool::Mysql(Arc::new(pool)),
                    schema: text(config, "database").unwrap_or_default().to_owned(),
                })
            }
            Family::Sqlite => {
                let path = text(config, "path").unwrap_or_default();
                // The pool would create a missing file: a connection reads what exists.
                if !std::path::Path::new(path).is_file() {
                    return Err(Error::SourceFailed(format!("{stage}: no such file")));
                }
                let pool = SqliteConnectionPoolFactory::new(path, Mode::File, SQLITE_BUSY)
                    .build()
                    .await
                    .map_err(|e| failure(&stage, e.as_ref()))?;
                Ok(Wire {
                    pool: Pool::Sqlite(Arc::new(pool)),
                    schema: "main".to_owned(),
                })
            }
            Family::ObjectStore
            | Family::SearchEngine
            | Family::HttpJson
            | Family::Kafka
            | Family::Prometheus
            | Family::Nats
            | Family::Redis
            | Family::Amqp
            | Family::Mqtt => Err(Error::Internal(format!(
                "a {} source is not a SQL source",
                connector.id
            ))),
        }
    }

    /// The (schema, name) of every table and view the source shows its user.
    async fn tables(&self) -> Result<Vec<(String, String)>> {
        let stage = "list tables";
        let streamed = match &self.pool {
            Pool::Postgres(pool) => {
                let conn = pool
                    .connect()
                    .await
                    .map_err(|e| failure(stage, e.as_ref()))?;
                query_arrow(conn, POSTGRES_TABLES.to_owned(), None).await
            }
            Pool::Mysql(pool) => {
                let conn = pool
                    .connect()
                    .await
                    .map_err(|e| failure(stage, e.as_ref()))?;
                query_arrow(conn, MYSQL_TABLES.to_owned(), None).await
            }
            Pool::Sqlite(pool) => {
                let conn = pool
                    .connect()
                    .await
                    .map_err(|e| failure(stage, e.as_ref()))?;
                query_arrow(conn, SQLITE_TABLES.to_owned(), None).await
            }
        };
        let batches: Vec<RecordBatch> = streamed
            .map_err(|e| failure(stage, &e))?
            .try_collect()
            .await
            .map_err(|e| failure(stage, &e))?;
        let mut tables = Vec::new();
        for batch in &batches {
            let text =
                |i: usize| cast(batch.column(i), &DataType::Utf8).map_err(|e| failure(stage, &e));
            let (schemas, names) = (text(0)?, text(1)?);
            let (schemas, names) = (schemas.as_string::<i32>(), names.as_string::<i32>());
            for row in 0..batch.num_rows() {
                tables.push((schemas.value(row).to_owned(), names.value(row).to_owned()));
            }
        }
        Ok(tables)
    }

    /// The table `name` refers to.
    fn reference(&self, name: &str) -> TableReference {
        match (&self.pool, name.split_once('.')) {
            (Pool::Postgres(_), Some((schema, table))) => {
                TableReference::partial(schema.to_owned(), table.to_owned())
            }
            (Pool::Postgres(_), None) => {
                TableReference::partial(self.schema.clone(), name.to_owned())
            }
            _ => TableReference::bare(name.to_owned()),
        }
    }
}

/// The tables and views of a PostgreSQL database (what `information_schema` shows the user).
const POSTGRES_TABLES: &str = "SELECT table_schema::text, table_name::text \
     FROM information_schema.tables \
     WHERE table_schema NOT IN ('pg_catalog', 'information_schema') \
     AND table_schema NOT LIKE 'pg\\_%'";

/// The tables and views of the connection's MySQL database.
const MYSQL_TABLES: &str = "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES \
     WHERE TABLE_SCHEMA = DATABASE()";

/// The tables and views of a SQLite file.
const SQLITE_TABLES: &str = "SELECT 'main', name FROM sqlite_master \
     WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'";

/// How long SQLite waits for a lock another process holds.
const SQLITE_BUSY: Duration = Duration::from_secs(5);

#[async_trait]
impl Source for Wire {
    async fn datasets(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .tables()
            .await?
            .into_iter()
            .map(|(schema, table)| match schema == self.schema {
                true => table,
                false => format!("{schema}.{table}"),
            })
            .collect();
        names.sort();
        Ok(names)
    }

    async fn table(&self, _state: &SessionState, name: &str) -> Result<Arc<dyn TableProvider>> {
        if !self.datasets().await?.iter().any(|n| n == name) {
            return Err(Error::DatasetNotFound(name.to_owned()));
        }
        let reference = self.reference(name);
        let stage = format!("read the schema of {name}");
        let table = match &self.pool {
            Pool::Postgres(pool) => {
                PostgresTableFactory::new(pool.clone())
                    .table_provider(reference)
                    .await
            }
            Pool::Mysql(pool) => {
                MySQLTableFactory::new(pool.clone())
                    .table_provider(reference)
                    .await
            }
            Pool::Sqlite(pool) => {
                SqliteTableFactory::new(pool.clone())
                    .table_provider(reference)
                    .await
            }
        };
        let table = table.map_err(|e| failure(&stage, e.as_ref()))?;
        Ok(Arc::new(CountableTable(table)))
    }
}

/// A table of datafusion-table-providers, whose scans of no column (`count(*)`) answer one
/// column where DataFusion planned none: such a scan reads the first column instead, and a
/// projection of no column drops it (the row count stays).
#[derive(Debug)]
pub struct CountableTable(pub Arc<dyn TableProvider>);

#[async_trait]
impl TableProvider for CountableTable {
    fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> datafusion::logical_expr::TableType {
        self.0.table_type()
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&datafusion::logical_expr::Expr],
    ) -> datafusion::error::Result<Vec<datafusion::logical_expr::TableProviderFilterPushDown>> {
        self.0.supports_filters_pushdown(filters)
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        filters: &[datafusion::logical_expr::Expr],
        limit: Option<usize>,
    ) -> datafusion::error::Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        match projection {
            Some(columns) if columns.is_empty() && !self.schema().fields().is_empty() => {
                let first = self.0.scan(state, Some(&vec![0]), filters, limit).await?;
                let none: Vec<datafusion::physical_expr::projection::ProjectionExpr> = Vec::new();
                Ok(Arc::new(
                    datafusion::physical_plan::projection::ProjectionExec::try_new(none, first)?,
                ))
            }
            _ => self.0.scan(state, projection, filters, limit).await,
        }
    }
}
