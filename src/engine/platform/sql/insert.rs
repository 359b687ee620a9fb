//! `INSERT INTO <dataset> (<columns>) VALUES (...), ...`, with PostgreSQL's upsert:
//! `ON CONFLICT (<key>) DO NOTHING` or `DO UPDATE SET <column> = EXCLUDED.<column> | <literal>`.
//!
//! The statement becomes the operations of a bulk request on the dataset, applied all at once
//! or not at all by its leader, as one event (tombstones plus an append), so that replay
//! reproduces it without reading anything back:
//! - a plain insert creates each record (a given `_id` that exists refuses the statement);
//! - on `_id`, a conflict is resolved under the leader's permit: `DO NOTHING` skips the row,
//!   `DO UPDATE` merges its `SET` into the stored record (an update with the row as upsert);
//! - on other columns, the record a row's key names is found when the statement starts (one
//!   at most), and then updated by its `_id` as above.

use datafusion::sql::sqlparser::ast;
use serde_json::{Map, Value, json};

use super::object_name;
use crate::{
    documents::{
        ID_FIELD,
        bulk::{Action, Operation},
    },
    engine::{Engine, Origin, Outcome, PlatformPrincipal, SearchOptions, ingest::AllOrNothing},
    error::{Error, Result},
};

fn bad(reason: impl Into<String>) -> Error {
    Error::BadRequest(reason.into())
}

/// A literal of a `VALUES` row or a `SET` as JSON: numbers, strings, booleans, `NULL`, negative
/// numbers and arrays of them.
fn literal(expr: &ast::Expr) -> Result<Value> {
    match expr {
        ast::Expr::Value(value) => match &value.value {
            ast::Value::Number(text, _) => text
                .parse::<i64>()
                .map(Value::from)
                .or_else(|_| text.parse::<f64>().map(Value::from))
                .map_err(|_| bad(format!("{text} is not a number"))),
            ast::Value::SingleQuotedString(text) | ast::Value::DoubleQuotedString(text) => {
                Ok(Value::from(text.clone()))
            }
            ast::Value::Boolean(flag) => Ok(Value::from(*flag)),
            ast::Value::Null => Ok(Value::Null),
            other => Err(bad(format!("{other} is not a value an INSERT takes"))),
        },
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => match literal(expr)? {
            Value::Number(n) if n.is_i64() => Ok(Value::from(-n.as_i64().unwrap_or_default())),
            Value::Number(n) => Ok(Value::from(-n.as_f64().unwrap_or_default())),
            other => Err(bad(format!("-{other} is not a number"))),
        },
        ast::Expr::Array(array) => array
            .elem
            .iter()
            .map(literal)
            .collect::<Result<_>>()
            .map(Value::Array),
        ast::Expr::Nested(inner) => literal(inner),
        other => Err(bad(format!(
            "[{other}]: the values of an INSERT are literals (numbers, strings, booleans, NULL, arrays)"
        ))),
    }
}

/// What a row's conflicting record gets.
enum OnConflict {
    /// A plain insert: a conflict refuses the statement.
    Refuse,
    Nothing,
    /// Each column set to the row's value (`EXCLUDED.c`) or a literal.
    Update(Vec<(String, Assigned)>),
}

enum Assigned {
    Excluded(String),
    Literal(Value),
}

/// The statement, read.
pub(super) struct Insert {
    dataset: String,
    rows: Vec<Map<String, Value>>,
    key: Vec<String>,
    on_conflict: OnConflict,
}

fn column_name(name: &ast::ObjectName) -> String {
    name.0
        .last()
        .and_then(|part| part.as_ident())
        .map(|ident| ident.value.clone())
        .unwrap_or_default()
}

pub(super) fn read(insert: &ast::Insert) -> Result<Insert> {
    let ast::TableObject::TableName(table) = &insert.table else {
        return Err(bad(
            "INSERT names a dataset: INSERT INTO <dataset> (...) VALUES (...)",
        ));
    };
    let dataset = object_name(table);
    let columns: Vec<String> = insert.columns.iter().map(column_name).collect();
    if columns.is_empty() {
        return Err(bad(
            "name the columns: INSERT INTO <dataset> (<columns>) VALUES (...)",
        ));
    }
    let Some(ast::SetExpr::Values(values)) = insert.source.as_ref().map(|q| q.body.as_ref()) else {
        return Err(bad(
            "an INSERT takes VALUES rows (INSERT ... SELECT is not served)",
        ));
    };
    let mut rows = Vec::with_capacity(values.rows.len());
    for (i, row) in values.rows.iter().enumerate() {
        let row = &row.content;
        if row.len() != columns.len() {
            return Err(bad(format!(
                "row {} has {} values for {} columns",
                i + 1,
                row.len(),
                columns.len()
            )));
        }
        let mut record = Map::new();
        for (column, expr) in columns.iter().zip(row) {
            record.insert(column.clone(), literal(expr)?);
        }
        rows.push(record);
    }
    let (key, on_conflict) = match &insert.on {
        None => (vec![ID_FIELD.to_owned()], OnConflict::Refuse),
        Some(ast::OnInsert::OnConflict(conflict)) => {
            let key: Vec<String> = match &conflict.conflict_target {
                Some(ast::ConflictTarget::Columns(columns)) => {
                    columns.iter().map(|c| c.value.clone()).collect()
                }
                _ => {
                    return Err(bad(
                        "ON CONFLICT names its key columns: ON CONFLICT (<columns>)",
                    ));
                }
            };
            if let Some(missing) = key.iter().find(|k| !columns.contains(k)) {
                return Err(bad(format!(
                    "the key column [{missing}] is not among the inserted columns"
                )));
            }
            let action = match &conflict.action {
                ast::OnConflictAction::DoNothing => OnConflict::Nothing,
                ast::OnConflictAction::DoUpdate(update) => {
                    if update.selection.is_some() {
                        return Err(bad("DO UPDATE ... WHERE is not served"));
                    }
                    let mut set = Vec::new();
                    for assignment in &update.assignments {
                        let ast::AssignmentTarget::ColumnName(name) = &assignment.target else {
                            return Err(bad("DO UPDATE SET assigns columns one by one"));
                        };
                        let column = column_name(name);
                        let value = match &assignment.value {
                            ast::Expr::CompoundIdentifier(parts)
                                if parts.len() == 2 && parts[0].value.eq_ignore_ascii_case("excluded") =>
                            {
                                Assigned::Excluded(parts[1].value.clone())
                            }
                            other => Assigned::Literal(literal(other).map_err(|_| {
                                bad(format!(
                                    "SET {column} = {other}: a value is EXCLUDED.<column> or a literal"
                                ))
                            })?),
                        };
                        set.push((column, value));
                    }
                    OnConflict::Update(set)
                }
            };
            (key, action)
        }
        Some(_) => {
            return Err(bad(
                "ON DUPLICATE KEY is not served: use ON CONFLICT (<key>)",
            ));
        }
    };
    Ok(Insert {
        dataset,
        rows,
        key,
        on_conflict,
    })
}

/// A bulk operation of one record.
fn operation(action: Action, id: Option<String>, record: &Value) -> Operation {
    Operation {
        action,
        index: None,
        id,
        record: Some(record.to_string().into()),
        refusal: None,
        require_alias: None,
        source: None,
    }
}

impl Engine {
    /// Runs an INSERT (see the module documentation): how many rows it inserted or updated.
    pub(super) async fn sql_insert(
        &self,
        principal: &PlatformPrincipal,
        statement: &ast::Insert,
        scope: Option<&str>,
        origin: &Origin,
    ) -> Result<u64> {
        let insert = read(statement)?;
        if let Some(scope) = scope.filter(|scope| *scope != insert.dataset) {
            return Err(Error::BadRequest(format!(
                "this path writes dataset [{scope}]; the statement inserts into [{}]",
                insert.dataset
            )));
        }
        let by_id = insert.key == [ID_FIELD];
        let mut operations = Vec::with_capacity(insert.rows.len());
        for row in &insert.rows {
            let given_id = match row.get(ID_FIELD) {
                None | Some(Value::Null) => None,
                Some(Value::String(id)) => Some(id.clone()),
                Some(other) => Some(other.to_string()),
            };
            // The record a row's key names, by its `_id`.
            let existing = match (by_id, &insert.on_conflict) {
                (true, _) | (_, OnConflict::Refuse) => given_id.clone(),
                (false, _) => self.keyed_record(principal, &insert, row).await?,
            };
            let record = Value::Object(
                row.iter()
                    .filter(|(k, _)| *k != ID_FIELD)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            );
            let operation = match (&insert.on_conflict, existing) {
                (OnConflict::Refuse, id) => operation(Action::Create, id, &record),
                // A key found before the statement, or an `_id`: resolved by the leader.
                (OnConflict::Nothing, Some(id)) if by_id => {
                    operation(Action::Create, Some(id), &record)
                }
                (OnConflict::Nothing, Some(_)) => continue,
                (OnConflict::Nothing, None) => operation(Action::Create, given_id, &record),
                (OnConflict::Update(set), Some(id)) => {
                    let mut doc = Map::new();
                    for (column, value) in set {
                        let value = match value {
                            Assigned::Excluded(name) => {
                                row.get(name).cloned().unwrap_or(Value::Null)
                            }
                            Assigned::Literal(value) => value.clone(),
                        };
                        doc.insert(column.clone(), value);
                    }
                    let body = json!({"doc": doc, "upsert": record, "detect_noop": false});
                    operation(Action::Update, Some(id), &body)
                }
                (OnConflict::Update(_), None) => operation(Action::Create, given_id, &record),
            };
            operations.push(operation);
        }
        if operations.is_empty() {
            return Ok(0);
        }
        let rule = AllOrNothing {
            conflicts_skip: matches!(insert.on_conflict, OnConflict::Nothing),
        };
        let applied = self
            .bulk_all_or_nothing(principal, &insert.dataset, operations, origin, rule)
            .await?;
        Ok(applied
            .iter()
            .filter(|(_, outcome, _)| {
                matches!(
                    outcome,
                    Outcome::Done {
                        result: "created" | "updated",
                        ..
                    }
                )
            })
            .count() as u64)
    }

    /// The `_id` of the one record of the dataset whose key columns hold `row`'s values, as
    /// the dataset is now; `None` when none does.
    async fn keyed_record(
        &self,
        principal: &PlatformPrincipal,
        insert: &Insert,
        row: &Map<String, Value>,
    ) -> Result<Option<String>> {
        let filters: Vec<Value> = insert
            .key
            .iter()
            .map(
                |column| json!({"term": {column: row.get(column).cloned().unwrap_or(Value::Null)}}),
            )
            .collect();
        let body = json!({"query": {"bool": {"filter": filters}}, "size": 2, "_source": false});
        let result = match self
            .search_dataset(
                principal,
                Some(&insert.dataset),
                &body,
                &SearchOptions::default(),
            )
            .await
        {
            Ok(result) => result,
            Err(Error::DatasetNotFound(_)) => return Ok(None),
            Err(error) => return Err(error),
        };
        match result.hits.as_slice() {
            [] => Ok(None),
            [hit] => Ok(hit.id.clone()),
            _ => Err(bad(format!(
                "the key ({}) of a row names several records of [{}]; ON CONFLICT needs a key that names one",
                insert.key.join(", "),
                insert.dataset
            ))),
        }
    }
}
