//! PUT /{index}/_mapping: fields declared on datasets that exist (Elasticsearch's put mapping).
//!
//! A new field adds its column; a field that already holds values (a dynamic column) may be
//! declared as the type its mapping shows, and from then on keeps it; another type is refused,
//! as Elasticsearch refuses changing a field's type. A dataset's change is one
//! `TableColumnsChanged` carrying the declared fields; every dataset the request names is
//! checked before any is changed.

use std::collections::HashMap;

use serde_json::Value;
use strata_log::{
    envelope::Body,
    event::{Column, TableColumnsChanged},
};
use strata_projections::catalog::{DeclaredField, TableDef};

use crate::engine::{Action, Engine, Origin, PlatformPrincipal, access::Target};
use crate::{
    documents::mapping::{self, Declared},
    error::{Error, Result},
};

/// What declaring fields changes of a dataset.
struct Change {
    /// Its columns, whole.
    columns: Vec<Column>,
    /// The declared fields and date formats to add.
    fields: HashMap<String, DeclaredField>,
    formats: HashMap<String, String>,
}

/// What declaring `declared` on `table` changes; `None` when it declares nothing new.
fn plan(table: &TableDef, declared: &Declared) -> Result<Option<Change>> {
    mapping::check_aliases(declared, |name| table.column(name).is_some())?;
    let refuse = |field: &str, from: &str, to: &str| {
        Error::BadRequest(format!(
            "[illegal_argument_exception] mapper [{field}] cannot be changed from type [{from}] to [{to}]"
        ))
    };
    let mut columns = table.columns.clone();
    for column in &declared.columns {
        let to = declared
            .fields
            .get(&column.name)
            .map_or("?", |d| d.es_type.as_str());
        match table.column(&column.name) {
            None => columns.push(column.clone()),
            // A field shows its type in the mapping (one value or several alike).
            Some(existing) => {
                let from = mapping::es_type(table, existing);
                if from != to {
                    return Err(refuse(&column.name, &from, to));
                }
            }
        }
    }
    let mut fields = HashMap::new();
    for (name, field) in &declared.fields {
        match table.declared.get(name) {
            Some(current) if current.es_type != field.es_type => {
                return Err(refuse(name, &current.es_type, &field.es_type));
            }
            Some(current) if current == field => {}
            _ => {
                fields.insert(name.clone(), field.clone());
            }
        }
    }
    let formats: HashMap<String, String> = declared
        .date_formats
        .iter()
        .filter(|(name, format)| table.date_formats.get(*name) != Some(*format))
        .map(|(name, format)| (name.clone(), format.clone()))
        .collect();
    if columns == table.columns && fields.is_empty() && formats.is_empty() {
        return Ok(None);
    }
    let columns = columns
        .iter()
        .map(|c| Column {
            name: c.name.clone(),
            r#type: c.data_type.to_string(),
            nullable: c.nullable,
        })
        .collect();
    Ok(Some(Change {
        columns,
        fields,
        formats,
    }))
}

impl Engine {
    /// PUT /{index}/_mapping: declares the fields of `mappings` (`{"properties": ...}`) on
    /// every dataset `names` names (by name, pattern or alias).
    pub async fn put_mapping(
        &self,
        principal: &PlatformPrincipal,
        names: &str,
        mappings: &Value,
        origin: &Origin,
    ) -> Result<()> {
        let declared = mapping::declared_columns(mappings, false)?;
        if declared.vector.is_some() {
            return Err(Error::BadRequest(
                "invalid mappings: a vector field is declared when its dataset is created"
                    .to_owned(),
            ));
        }
        let targets = self
            .reach(
                principal,
                Action::DatasetCreate,
                Target::Names(Some(names)),
                false,
            )
            .await?;
        // Every dataset is checked before any changes.
        for target in &targets {
            let (_, def) = self.dataset(&principal.account, &target.name).await?;
            plan(&def, &declared)?;
        }
        for target in &targets {
            let (runtime, def) = self.dataset(&principal.account, &target.name).await?;
            let mut permit = self
                .catalog_permit(&runtime, self.write_wait(), || {
                    crate::engine::datasets::busy(&principal.account)
                })
                .await?;
            let Some(current) = permit
                .snapshot()
                .tables
                .get(&def.name)
                .filter(|t| t.id == def.id)
                .cloned()
            else {
                return Err(Error::DatasetNotFound(def.name.clone()));
            };
            let Some(change) = plan(&current, &declared)? else {
                continue;
            };
            let body = Body::TableColumnsChanged(TableColumnsChanged {
                name: current.name.clone(),
                table_id: current.id.clone(),
                database_id: runtime.id.clone(),
                columns: change.columns,
                declared: change
                    .fields
                    .iter()
                    .map(|(name, field)| (name.clone(), field.to_event()))
                    .collect(),
                date_formats: change.formats,
                ..Default::default()
            });
            permit.write(body, origin).await?;
        }
        Ok(())
    }
}
