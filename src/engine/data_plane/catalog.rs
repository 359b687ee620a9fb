//! Tables of a database: the writes of its `_catalog` partition, one change at a time.
//!
//! A catalog change that meets another in flight is refused as busy (409 with Retry-After), never
//! queued silently. The leader resolves everything that depends on current state before it
//! appends: a created table's id, and its partition's start offset, are in the event.

use std::{collections::HashSet, sync::Arc};

use serde::Deserialize;
use strata_log::{
    PartitionId,
    envelope::Body,
    event::{Column, TableCreated, TableDropped},
};
use strata_projections::{
    catalog::{TableDef, VectorMetric},
    control::{Database, DatabaseStatus},
    schema::ColumnType,
};

use crate::engine::{Engine, Origin, Principal};
use crate::{
    error::{Error, Result},
    names,
};

/// Most columns a table may have.
pub const MAX_COLUMNS: usize = 1024;

/// A create_table request, as the client sent it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTable {
    pub name: String,
    pub schema: Vec<ColumnSpec>,
    #[serde(default)]
    pub fts_columns: Vec<String>,
    #[serde(default)]
    pub exact_columns: Vec<String>,
    #[serde(default)]
    pub vector_column: Option<String>,
    #[serde(default)]
    pub vector_metric: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub data_type: String,
    #[serde(default = "nullable_by_default")]
    pub nullable: bool,
}

fn nullable_by_default() -> bool {
    true
}

impl CreateTable {
    /// Checks the request and turns it into the event body (without the ids and offsets the
    /// leader fills in).
    fn validate(self) -> Result<TableCreated> {
        names::check_table(&self.name)?;
        if self.schema.is_empty() {
            return Err(Error::BadRequest(
                "the schema must have at least one column".to_owned(),
            ));
        }
        if self.schema.len() > MAX_COLUMNS {
            return Err(Error::BadRequest(format!(
                "the schema has {} columns, more than the {MAX_COLUMNS} allowed",
                self.schema.len()
            )));
        }
        let mut seen = HashSet::new();
        let mut types = Vec::with_capacity(self.schema.len());
        for column in &self.schema {
            names::check_column(&column.name)?;
            if !seen.insert(column.name.as_str()) {
                return Err(Error::BadRequest(format!(
                    "column {:?} appears twice in the schema",
                    column.name
                )));
            }
            let parsed: ColumnType = column
                .data_type
                .parse()
                .map_err(|error| Error::BadRequest(format!("column {:?}: {error}", column.name)))?;
            types.push(parsed);
        }
        let type_of = |role: &str, name: &str| {
            self.schema
                .iter()
                .zip(&types)
                .find(|(column, _)| column.name == name)
                .map(|(_, data_type)| data_type)
                .ok_or_else(|| {
                    Error::BadRequest(format!("{role} column {name:?} is not in the schema"))
                })
        };
        check_unique("fts_columns", &self.fts_columns)?;
        for name in &self.fts_columns {
            let data_type = type_of("full-text", name)?;
            if *data_type != ColumnType::Utf8 {
                return Err(Error::BadRequest(format!(
                    "full-text column {name:?} has type {data_type}; full-text indexes need utf8"
                )));
            }
        }
        check_unique("exact_columns", &self.exact_columns)?;
        for name in &self.exact_columns {
            let data_type = type_of("exact-match", name)?;
            if !data_type.is_scalar() {
                return Err(Error::BadRequest(format!(
                    "exact-match column {name:?} has type {data_type}; exact match needs a scalar type"
                )));
            }
        }
        let metric = match (&self.vector_column, &self.vector_metric) {
            (None, Some(_)) => {
                return Err(Error::BadRequest(
                    "vector_metric is given without a vector_column".to_owned(),
                ));
            }
            (None, None) => None,
            (Some(name), metric) => {
                let data_type = type_of("vector", name)?;
                if !matches!(data_type, ColumnType::Vector { .. }) {
                    return Err(Error::BadRequest(format!(
                        "vector column {name:?} has type {data_type}; it needs vector<float32,N>"
                    )));
                }
                let metric = metric.as_deref().unwrap_or("cosine");
                Some(VectorMetric::parse(metric).ok_or_else(|| {
                    Error::BadRequest(format!(
                        "unknown vector_metric {metric:?}; use cosine, l2 or dot"
                    ))
                })?)
            }
        };
        Ok(TableCreated {
            name: self.name,
            columns: self
                .schema
                .into_iter()
                .zip(types)
                .map(|(column, data_type)| Column {
                    name: column.name,
                    r#type: data_type.to_string(),
                    nullable: column.nullable,
                })
                .collect(),
            fts_columns: self.fts_columns,
            exact_columns: self.exact_columns,
            vector_column: self.vector_column.unwrap_or_default(),
            vector_metric: metric.map(|m| m.as_str().to_owned()).unwrap_or_default(),
            ..Default::default()
        })
    }
}

fn check_unique(field: &str, names: &[String]) -> Result<()> {
    let mut seen = HashSet::new();
    match names.iter().find(|name| !seen.insert(name.as_str())) {
        Some(name) => Err(Error::BadRequest(format!(
            "{field} names column {name:?} twice"
        ))),
        None => Ok(()),
    }
}

impl Engine {
    /// The database `name` of the principal's account, if it exists and is not being deleted.
    pub(in crate::engine) fn ready_database(
        &self,
        principal: &Principal,
        name: &str,
    ) -> Result<Database> {
        principal.authorize(name)?;
        match self.control_state().database(&principal.account, name) {
            Some(database) if database.status == DatabaseStatus::Ready => Ok(database.clone()),
            Some(database) if database.status == DatabaseStatus::PendingVerification => {
                Err(Error::PendingVerification(format!(
                    "database {name:?} starts once its storage binding is verified: POST /v1/databases/{name}/storage/verify"
                )))
            }
            _ => Err(Error::DatabaseNotFound(name.to_owned())),
        }
    }

    fn catalog_busy(database: &str) -> Error {
        Error::Busy(format!(
            "another change to the catalog of database {database:?} is in flight; retry after the Retry-After interval"
        ))
    }

    pub async fn create_table(
        &self,
        principal: &Principal,
        database: &str,
        request: CreateTable,
        origin: &Origin,
    ) -> Result<Arc<TableDef>> {
        let database = self.ready_database(principal, database)?;
        let mut created = request.validate()?;
        let runtime = self.runtime(&database).await?;
        let mut permit = self
            .catalog_permit(&runtime, self.write_wait(), || {
                Self::catalog_busy(&database.name)
            })
            .await?;
        if permit.snapshot().tables.contains_key(&created.name) {
            return Err(Error::TableExists(created.name));
        }
        let partition = PartitionId::table(&database.account, &database.name, &created.name);
        created.table_id = uuid::Uuid::now_v7().to_string();
        created.database_id = database.id.clone();
        created.start_offset = self.log.high_water_mark(&partition).await?;
        let name = created.name.clone();
        let state = permit.write(Body::TableCreated(created), origin).await?;
        state
            .tables
            .get(&name)
            .cloned()
            .ok_or_else(|| Error::Internal(format!("table {name} missing after its creation")))
    }

    pub async fn drop_table(
        &self,
        principal: &Principal,
        database: &str,
        name: &str,
        origin: &Origin,
    ) -> Result<()> {
        let database = self.ready_database(principal, database)?;
        names::check_table(name)?;
        let runtime = self.runtime(&database).await?;
        let mut permit = self
            .catalog_permit(&runtime, self.write_wait(), || {
                Self::catalog_busy(&database.name)
            })
            .await?;
        let Some(table) = permit.snapshot().tables.get(name).cloned() else {
            return Err(Error::TableNotFound(name.to_owned()));
        };
        let body = Body::TableDropped(TableDropped {
            name: name.to_owned(),
            table_id: table.id.clone(),
            database_id: database.id.clone(),
        });
        permit.write(body, origin).await?;
        drop(permit);
        self.release_table(&runtime, &table);
        Ok(())
    }

    pub async fn list_tables(&self, principal: &Principal, database: &str) -> Result<Vec<String>> {
        let database = self.ready_database(principal, database)?;
        let runtime = self.runtime(&database).await?;
        Ok(runtime.catalog.snapshot().tables.keys().cloned().collect())
    }

    pub async fn table(
        &self,
        principal: &Principal,
        database: &str,
        name: &str,
    ) -> Result<Arc<TableDef>> {
        let database = self.ready_database(principal, database)?;
        names::check_table(name)?;
        let runtime = self.runtime(&database).await?;
        runtime
            .catalog
            .snapshot()
            .tables
            .get(name)
            .cloned()
            .ok_or_else(|| Error::TableNotFound(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(json: serde_json::Value) -> Result<TableCreated> {
        serde_json::from_value::<CreateTable>(json)
            .map_err(|e| Error::BadRequest(e.to_string()))?
            .validate()
    }

    #[test]
    fn a_full_request_becomes_an_event() {
        let created = request(serde_json::json!({
            "name": "docs",
            "schema": [
                {"name": "title", "type": "utf8", "nullable": false},
                {"name": "year", "type": "int32"},
                {"name": "embedding", "type": "vector< float32, 3 >"}
            ],
            "fts_columns": ["title"],
            "exact_columns": ["year"],
            "vector_column": "embedding"
        }))
        .unwrap();
        assert_eq!(created.name, "docs");
        assert_eq!(created.columns[2].r#type, "vector<float32,3>");
        assert!(!created.columns[0].nullable && created.columns[1].nullable);
        assert_eq!(created.vector_metric, "cosine");
    }

    #[test]
    fn bad_requests_name_what_is_wrong() {
        let schema = serde_json::json!([
            {"name": "title", "type": "utf8"},
            {"name": "n", "type": "int64"},
            {"name": "v", "type": "vector<float32,2>"}
        ]);
        for (extra, needle) in [
            (
                serde_json::json!({"fts_columns": ["nope"]}),
                "\"nope\" is not in the schema",
            ),
            (serde_json::json!({"fts_columns": ["n"]}), "need utf8"),
            (
                serde_json::json!({"fts_columns": ["title", "title"]}),
                "twice",
            ),
            (serde_json::json!({"exact_columns": ["v"]}), "scalar"),
            (
                serde_json::json!({"vector_column": "title"}),
                "vector<float32,N>",
            ),
            (
                serde_json::json!({"vector_metric": "l2"}),
                "without a vector_column",
            ),
            (
                serde_json::json!({"vector_column": "v", "vector_metric": "manhattan"}),
                "manhattan",
            ),
        ] {
            let mut body = serde_json::json!({"name": "t", "schema": schema});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            let error = request(body).unwrap_err().to_string();
            assert!(error.contains(needle), "{error} should mention {needle}");
        }
        for (body, needle) in [
            (
                serde_json::json!({"name": "t", "schema": []}),
                "at least one column",
            ),
            (
                serde_json::json!({"name": "t", "schema": [{"name": "a", "type": "int"}]}),
                "column \"a\"",
            ),
            (
                serde_json::json!({"name": "t", "schema": [{"name": "a", "type": "utf8"}, {"name": "a", "type": "utf8"}]}),
                "twice",
            ),
            (
                serde_json::json!({"name": "_t", "schema": [{"name": "a", "type": "utf8"}]}),
                "underscore",
            ),
            (
                serde_json::json!({"name": "t", "schema": [{"name": "_row_id", "type": "utf8"}]}),
                "reserved",
            ),
        ] {
            let error = request(body).unwrap_err().to_string();
            assert!(error.contains(needle), "{error} should mention {needle}");
        }
    }
}
