//! Log events as JSON, the one format every reader outside the server gets them in: the change
//! streams of `/v1/changes/{database}` and `strata-replay dump` (docs/change-streams.md).
//!
//! An event is `{"partition", "offset", "time", "principal", "request_id", "event_id", "epoch",
//! "kind", "table", "body"}`; `table` is the table's name for the events of a table partition.
//! Bodies keep their protobuf field names, except that row payloads are decoded: an append or an
//! update carries `rows` (JSON objects with `_row_id` first), a delete its `row_ids`. Secrets are
//! never shown (a storage binding's credentials become `"***"`, an API key only its hash).

use arrow::array::RecordBatch;
use chrono::{DateTime, SecondsFormat};
use serde_json::{Map, Value, json};
use strata_log::{Envelope, PartitionId, envelope::Body};

use crate::{
    error::{Error, Result},
    table::rows::{ROW_ID, decode_ipc},
};

/// The table a partition holds the rows of, for the partitions of tables.
pub fn table_of(partition: &str) -> Option<&str> {
    let mut parts = partition.split('/');
    let (_account, _database, table) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && !table.starts_with('_')).then_some(table)
}

/// An event as one JSON object. Rows that cannot be decoded are an error (the log is corrupt).
pub fn event_json(event: &Envelope) -> Result<Value> {
    let time = DateTime::from_timestamp_micros(event.timestamp_micros)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Micros, true));
    Ok(json!({
        "partition": event.partition,
        "offset": event.offset,
        "time": time,
        "principal": event.principal,
        "request_id": event.request_id,
        "event_id": event.event_id,
        "epoch": event.epoch,
        "kind": event.kind(),
        "table": table_of(&event.partition),
        "body": body_json(event.body.as_ref())?,
    }))
}

/// Dataset aliases, each `{"alias", "dataset", "table_id"}` with its `filter` (a query) and
/// `is_write_index` where set.
fn aliases_json(aliases: &[strata_log::event::DatasetAlias]) -> Value {
    aliases
        .iter()
        .map(|a| {
            let mut entry = json!({"alias": a.alias, "dataset": a.dataset, "table_id": a.table_id});
            if !a.filter.is_empty() {
                entry["filter"] = serde_json::from_str(&a.filter).unwrap_or(json!(a.filter));
            }
            if let Some(write) = a.is_write_index {
                entry["is_write_index"] = json!(write);
            }
            entry
        })
        .collect()
}

/// A JSON document kept as text in an event, parsed; kept as a string when it does not parse.
fn json_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

/// The body of an event (see the module documentation).
pub fn body_json(body: Option<&Body>) -> Result<Value> {
    Ok(match body {
        None => Value::Null,
        Some(Body::LeaderEpoch(b)) => json!({"epoch": b.epoch, "node": b.node}),
        Some(Body::NodeHeartbeat(b)) => json!({
            "node": b.node,
            "data_addr": b.data_addr,
            "platform_addr": b.platform_addr,
            "incarnation": b.incarnation,
            "lease_ms": b.lease_ms,
            "leaving": b.leaving,
        }),
        Some(Body::AccountCreated(b)) => json!({"name": b.name, "enterprise": b.enterprise}),
        Some(Body::PaymentMethodSet(b)) => json!({"account": b.account}),
        Some(Body::ApiKeyCreated(b)) => json!({
            "key_id": b.key_id,
            "account": b.account,
            "key_sha256": hex(&b.key_sha256),
            "databases_pattern": b.databases_pattern,
        }),
        // The sealed secret stays out of change streams and dumps.
        Some(Body::UserCreated(b)) => json!({
            "account": b.account,
            "name": b.name,
            "access_key": b.access_key,
            "root": b.root,
            "roles": b.roles,
        }),
        // Nor does a password's hash, nor a rotated secret.
        Some(Body::UserChanged(b)) => json!({
            "account": b.account,
            "name": b.name,
            "roles": b.roles,
            "password_set": !b.password_hash.is_empty(),
        }),
        Some(Body::UserKeysRotated(b)) => json!({
            "account": b.account,
            "name": b.name,
            "old_access_key": b.old_access_key,
            "access_key": b.access_key,
        }),
        Some(Body::UserDeleted(b)) => json!({"account": b.account, "name": b.name}),
        Some(Body::RoleSet(b)) => json!({
            "account": b.account,
            "name": b.name,
            "version": b.version,
            "permissions": b.permissions.iter().map(|p| json!({
                "resource_type": p.resource_type,
                "actions": p.actions,
                "resources": p.resources,
                "fields": p.fields.as_ref().map(|f| json!({
                    "allow": f.has_allow.then_some(&f.allow),
                    "deny": f.deny,
                    "mask": f.mask.iter().map(|m| (m.field.clone(), Value::from(m.mask.clone())))
                        .collect::<serde_json::Map<_, _>>(),
                })),
                "filter": (!p.filter_json.is_empty()).then(|| {
                    serde_json::from_str::<Value>(&p.filter_json)
                        .unwrap_or_else(|_| Value::from(p.filter_json.clone()))
                }),
            })).collect::<Vec<_>>(),
            "notifications": b.notifications.iter().map(|n| json!({
                "kind": n.kind,
                "actions": n.actions,
                "resources": n.resources,
            })).collect::<Vec<_>>(),
        }),
        Some(Body::RoleDeleted(b)) => json!({"account": b.account, "name": b.name}),
        Some(Body::DatabaseCreated(b)) => json!({
            "account": b.account,
            "name": b.name,
            "database_id": b.database_id,
            "storage": b.storage.as_ref().map(|s| json!({
                "url": s.url,
                "region": s.region,
                "endpoint": s.endpoint,
                "access_key_id": (!s.access_key_id.is_empty()).then_some("***"),
                "secret_access_key": (!s.secret_access_key.is_empty()
                    || !s.sealed_secret_access_key.is_empty())
                .then_some("***"),
            })),
        }),
        Some(Body::StorageVerified(b)) => {
            json!({"account": b.account, "name": b.name, "database_id": b.database_id})
        }
        Some(Body::DatabaseDeleted(b)) => {
            json!({"account": b.account, "name": b.name, "database_id": b.database_id})
        }
        Some(Body::DatabasePurged(b)) => {
            json!({"account": b.account, "name": b.name, "database_id": b.database_id})
        }
        Some(Body::TableCreated(b)) => json!({
            "name": b.name,
            "table_id": b.table_id,
            "database_id": b.database_id,
            "schema": schema_json(&b.columns),
            "fts_columns": b.fts_columns,
            "exact_columns": b.exact_columns,
            "vector_column": (!b.vector_column.is_empty()).then_some(&b.vector_column),
            "vector_metric": (!b.vector_metric.is_empty()).then_some(&b.vector_metric),
            "start_offset": b.start_offset,
            "aliases": aliases_json(&b.aliases),
        }),
        Some(Body::TableDropped(b)) => {
            json!({"name": b.name, "table_id": b.table_id, "database_id": b.database_id})
        }
        Some(Body::TableColumnsChanged(b)) => json!({
            "name": b.name,
            "table_id": b.table_id,
            "database_id": b.database_id,
            "schema": schema_json(&b.columns),
        }),
        Some(Body::AliasesChanged(b)) => json!({
            "database_id": b.database_id,
            "added": aliases_json(&b.added),
            "removed": aliases_json(&b.removed),
        }),
        Some(Body::RowsAppended(b)) => {
            let ids = (b.first_row_id..b.first_row_id + b.row_count).collect::<Vec<_>>();
            let mut body = json!({
                "table_id": b.table_id,
                "first_row_id": b.first_row_id,
                "row_count": b.row_count,
                "vector_count": b.vector_count,
                "rows": rows_json(&b.arrow_ipc, &ids)?,
            });
            if !b.tombstoned_row_ids.is_empty() {
                body["tombstoned_row_ids"] = json!(b.tombstoned_row_ids);
                body["tombstoned_vector_count"] = json!(b.tombstoned_vector_count);
            }
            body
        }
        Some(Body::RowsDeleted(b)) => json!({
            "table_id": b.table_id,
            "row_ids": b.row_ids,
            "vector_count": b.vector_count,
        }),
        Some(Body::RowsUpdated(b)) => json!({
            "table_id": b.table_id,
            "row_ids": b.row_ids,
            "rows": rows_json(&b.arrow_ipc, &b.row_ids)?,
            "vectors_removed": b.vectors_removed,
            "vectors_added": b.vectors_added,
        }),
        Some(Body::AlertingChanged(b)) => json!({
            "account": b.account,
            "channels": b.channels.iter().map(|c| json!({
                "channel_id": c.channel_id,
                "config": json_text(&c.config_json),
            })).collect::<Vec<_>>(),
            "templates": b.templates.iter().map(|t| json!({
                "template_id": t.template_id, "name": t.name, "source": t.source,
            })).collect::<Vec<_>>(),
            "monitors": b.monitors.iter().map(|m| json!({
                "monitor_id": m.monitor_id,
                "version": m.version,
                "monitor": json_text(&m.monitor_json),
                "author": m.author,
            })).collect::<Vec<_>>(),
            "deleted_channels": b.deleted_channels,
            "deleted_monitors": b.deleted_monitors,
        }),
        Some(Body::MonitorRan(b)) => json!({
            "monitor_id": b.monitor_id,
            "monitor_version": b.monitor_version,
            "run_id": b.run_id,
            "planned_micros": b.planned_micros,
            "started_micros": b.started_micros,
            "ended_micros": b.ended_micros,
            "result": json_text(&b.result_json),
            "alerts": b.alerts.iter().map(|a| json!({
                "trigger": a.trigger,
                "action_id": a.action_id,
                "channel_id": a.channel_id,
                "alert": json_text(&a.alert_json),
            })).collect::<Vec<_>>(),
        }),
        Some(Body::AlertDelivered(b)) => json!({
            "monitor_id": b.monitor_id,
            "run_id": b.run_id,
            "trigger": b.trigger,
            "action_id": b.action_id,
            "channel_id": b.channel_id,
            "delivered": b.delivered,
            "attempts": b.attempts,
            "error": b.error,
        }),
        // The sealed secrets stay out of change streams and dumps.
        Some(Body::ConnectionSet(b)) => json!({
            "account": b.account,
            "connection_id": b.connection_id,
            "connector_id": b.connector_id,
            "name": b.name,
            "config": json_text(&b.config_json),
            "has_secrets": !b.sealed_secrets.is_empty(),
            "author": b.author,
            "created_at_micros": b.created_at_micros,
        }),
        Some(Body::ConnectionDeleted(b)) => json!({
            "account": b.account,
            "connection_id": b.connection_id,
        }),
        Some(Body::ConnectionStatus(b)) => json!({
            "account": b.account,
            "connection_id": b.connection_id,
            "status": b.status,
            "message": b.message,
        }),
        Some(Body::ImportJobSet(b)) => json!({
            "account": b.account,
            "job_id": b.job_id,
            "source_type": b.source_type,
            "connection_id": b.connection_id,
            "source": json_text(&b.source_json),
            "dataset": b.dataset,
            "mode": b.mode,
            "follow": b.follow,
            "author": b.author,
        }),
        Some(Body::ImportJobProgress(b)) => json!({
            "account": b.account,
            "job_id": b.job_id,
            "state": b.state,
            "records_read": b.records_read,
            "records_written": b.records_written,
            "bytes_read": b.bytes_read,
            "bytes_written": b.bytes_written,
            "cursor": json_text(&b.cursor_json),
            "error": b.error,
        }),
        Some(Body::ImportJobDeleted(b)) => json!({
            "account": b.account,
            "job_id": b.job_id,
        }),
        Some(Body::ThreadSet(b)) => json!({
            "thread_id": b.thread_id,
            "name": b.name,
            "index_name": b.index_name,
            "status": b.status,
            "viz_context": json_text(&b.viz_context_json),
            "workflow_name": b.workflow_name,
            "owner": b.owner,
            "created_micros": b.created_micros,
        }),
        Some(Body::ThreadDeleted(b)) => json!({"thread_id": b.thread_id}),
        Some(Body::MessageAdded(b)) => json!({
            "thread_id": b.thread_id,
            "message_id": b.message_id,
            "role": b.role,
            "content": json_text(&b.content_json),
            "author": b.author,
            "reply_to": b.reply_to,
        }),
        Some(Body::MessagesCleared(b)) => json!({"thread_id": b.thread_id}),
        // Who signed in and until when; never the token's or the CSRF token's hash.
        Some(Body::ConsoleSessionStarted(b)) => json!({
            "account": b.account,
            "user": b.user,
            "session_id": b.session_id,
            "expires_micros": b.expires_micros,
        }),
        Some(Body::ConsoleSessionEnded(b)) => json!({
            "account": b.account,
            "session_id": b.session_id,
        }),
    })
}

/// The rows of an event's Arrow IPC payload as JSON objects, `_row_id` first, nulls written out.
pub fn rows_json(ipc: &[u8], row_ids: &[u64]) -> Result<Vec<Value>> {
    let batch = decode_ipc(ipc)?;
    if batch.num_rows() != row_ids.len() {
        return Err(Error::Corrupt {
            key: "rows".to_owned(),
            reason: format!(
                "an event holds {} rows for {} row ids",
                batch.num_rows(),
                row_ids.len()
            ),
        });
    }
    let objects = batch_objects(&batch)?;
    Ok(objects
        .into_iter()
        .zip(row_ids)
        .map(|(fields, id)| {
            let mut row = Map::with_capacity(fields.len() + 1);
            row.insert(ROW_ID.to_owned(), json!(id));
            row.extend(fields);
            Value::Object(row)
        })
        .collect())
}

fn batch_objects(batch: &RecordBatch) -> Result<Vec<Map<String, Value>>> {
    let mut out = Vec::new();
    let mut writer = arrow::json::WriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, arrow::json::writer::JsonArray>(&mut out);
    writer
        .write(batch)
        .and_then(|()| writer.finish())
        .map_err(|e| Error::Arrow(e.to_string()))?;
    drop(writer);
    if out.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_slice(&out).map_err(|e| Error::Arrow(e.to_string()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The partitions of one database: its catalog first, then its tables, in name order.
pub fn database_partitions(all: &[PartitionId], account: &str, database: &str) -> Vec<PartitionId> {
    let prefix = PartitionId::database_prefix(account, database);
    let catalog = PartitionId::catalog(account, database);
    let mut found: Vec<PartitionId> = all
        .iter()
        .filter(|p| p.as_str().starts_with(&prefix) && **p != catalog)
        .cloned()
        .collect();
    found.insert(0, catalog);
    found
}

/// A table's columns as change streams show them: `[{name, type, nullable}]`.
fn schema_json(columns: &[strata_log::event::Column]) -> Vec<Value> {
    columns
        .iter()
        .map(|c| json!({"name": c.name, "type": c.r#type, "nullable": c.nullable}))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use strata_log::event::{RowsAppended, RowsDeleted};

    use super::*;
    use crate::table::rows::encode_ipc;

    #[test]
    fn table_partitions_name_their_table() {
        assert_eq!(table_of("acme/shop/orders"), Some("orders"));
        assert_eq!(table_of("acme/shop/_catalog"), None);
        assert_eq!(table_of("_control"), None);
    }

    #[test]
    fn appends_carry_their_rows_and_deletes_their_ids() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("title", DataType::Utf8, true),
            Field::new("n", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec![Some("a"), None])),
                Arc::new(Int64Array::from(vec![1, 2])),
            ],
        )
        .unwrap();
        let append = Envelope {
            partition: "acme/shop/orders".into(),
            offset: 7,
            body: Some(Body::RowsAppended(RowsAppended {
                table_id: "t1".into(),
                first_row_id: 40,
                row_count: 2,
                arrow_ipc: encode_ipc(&batch).unwrap().into(),
                vector_count: 0,
                ..Default::default()
            })),
            ..Default::default()
        };
        let json = event_json(&append).unwrap();
        assert_eq!(json["table"], "orders");
        assert_eq!(json["kind"], "rows_appended");
        assert_eq!(
            json["body"]["rows"],
            json!([
                {"_row_id": 40, "title": "a", "n": 1},
                {"_row_id": 41, "title": null, "n": 2},
            ])
        );
        let delete = Envelope {
            partition: "acme/shop/orders".into(),
            body: Some(Body::RowsDeleted(RowsDeleted {
                table_id: "t1".into(),
                row_ids: vec![40],
                vector_count: 0,
            })),
            ..Default::default()
        };
        assert_eq!(event_json(&delete).unwrap()["body"]["row_ids"], json!([40]));
    }

    #[test]
    fn a_row_count_that_disagrees_with_the_payload_is_corrupt() {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1]))]).unwrap();
        let error = rows_json(&encode_ipc(&batch).unwrap(), &[1, 2]).unwrap_err();
        assert!(
            error.to_string().contains("1 rows for 2 row ids"),
            "{error}"
        );
    }
}
