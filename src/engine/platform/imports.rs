//! Import jobs (spec section 4.2, API.md "Connections and imports"): PUT /import/{source_type}
//! copies a connection's table, a query's result, a file set or a topic into a dataset, as Arrow
//! batches written through the log by [`Engine::ingest_batch`] (column types kept).
//!
//! A job is events in the control partition: `ImportJobSet` when it is started, then an
//! `ImportJobProgress` after each batch the dataset's partition acknowledged, carrying the
//! counts and the cursor where the next batch starts, and one when it ends. The node that
//! serves the account runs it ([`run`]); a job that was running when its node stopped is taken
//! up again from its cursor, by the same node after a restart or by the next one.
//!
//! No record twice: every record a job writes has an id made of the job's id and the record's
//! place in the source (`<job>-<position>` for tables and queries, `<job>-<partition>-<offset>`
//! for topics), so a batch written again after a stop (its records acknowledged, its progress
//! not yet) replaces itself instead of adding copies. A record that has an `_id` of its own keeps
//! it.
//!
//! Rights: starting or removing a job takes the root user or `dataset:create` on
//! `<connection name>/*` (as managing connections does); each batch is read with the rights of
//! the job's author at that time (record read on the connection's dataset, Deny applied) and
//! written with them (record write on the target dataset). A user sees the jobs it started;
//! the root user sees all of its account's.

pub mod run;

use std::sync::Arc;

use chrono::Utc;
use serde_json::{Map, Value, json};
use strata_log::{
    envelope::Body,
    event::{ImportJobDeleted, ImportJobProgress, ImportJobSet},
};
use strata_projections::control::{ControlState, ImportJob};

use super::connections::catalogue::{self, Capability, Family};
use crate::{
    engine::{Engine, Origin, PlatformPrincipal, datasets::check_name, platform::iso_time},
    error::{Error, Result},
    query,
};

/// What a job copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImportSource {
    /// A dataset of the connection: a table, a file set (its path glob), an index.
    Table(String),
    /// A query's result, over the connection's datasets.
    Query(String),
    /// A dataset read as messages by a cursor: a topic (Kafka, MQTT), a stream (NATS), a
    /// queue (AMQP) or a key pattern (Redis); `key` is which.
    Messages { key: &'static str, name: String },
}

/// The keys of a job's `source`, and what each names.
const SOURCE_KEYS: &[&str] = &[
    "table",
    "query",
    "path",
    "topic",
    "stream",
    "queue",
    "key_pattern",
];

impl ImportSource {
    /// The `source` object of a job document (exactly one of its keys, a string).
    pub fn parse(value: &Value) -> Result<ImportSource> {
        let Some(fields) = value.as_object().filter(|f| f.len() == 1) else {
            return Err(Error::BadRequest(format!(
                "source must be an object with one of {}",
                SOURCE_KEYS.join(", ")
            )));
        };
        let Some((key, given)) = fields.iter().next() else {
            return Err(Error::BadRequest("source has no key".to_owned()));
        };
        let text = given
            .as_str()
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| Error::BadRequest(format!("source.{key} must be a non-empty string")))?
            .to_owned();
        match key.as_str() {
            "table" | "path" => Ok(ImportSource::Table(text)),
            "query" => Ok(ImportSource::Query(text)),
            "topic" => Ok(ImportSource::Messages {
                key: "topic",
                name: text,
            }),
            "stream" => Ok(ImportSource::Messages {
                key: "stream",
                name: text,
            }),
            "queue" => Ok(ImportSource::Messages {
                key: "queue",
                name: text,
            }),
            "key_pattern" => Ok(ImportSource::Messages {
                key: "key_pattern",
                name: text,
            }),
            other => Err(Error::BadRequest(format!(
                "source.{other} is not a source of an import ({})",
                SOURCE_KEYS.join(", ")
            ))),
        }
    }

    /// The source as a job keeps it.
    fn to_json(&self) -> Value {
        match self {
            ImportSource::Table(name) => json!({"table": name}),
            ImportSource::Query(sql) => json!({"query": sql}),
            ImportSource::Messages { key, name } => json!({ *key: name }),
        }
    }

    /// A job's kept source.
    pub fn of_job(job: &ImportJob) -> Result<ImportSource> {
        let value: Value = serde_json::from_str(&job.source_json)
            .map_err(|e| Error::Internal(format!("import {}: {e}", job.id)))?;
        match value.get("path") {
            Some(path) => ImportSource::parse(&json!({"table": path})),
            None => ImportSource::parse(&value),
        }
    }

    /// The source as a source of `family` reads it: a table of a source read as messages is
    /// read as messages (by cursor, resumable).
    fn for_family(self, family: Family) -> ImportSource {
        match (self, family.message_noun()) {
            (ImportSource::Table(name), Some(key)) => ImportSource::Messages { key, name },
            (source, _) => source,
        }
    }

    /// 400 unless a source of `family` can give it.
    fn check_family(&self, family: Family, source_type: &str) -> Result<()> {
        let fits = match self {
            ImportSource::Table(_) => true,
            ImportSource::Query(_) => family.capabilities().contains(&Capability::Sql),
            ImportSource::Messages { key, .. } => family.message_noun() == Some(key),
        };
        match fits {
            true => Ok(()),
            false => Err(Error::BadRequest(format!(
                "a {source_type} connection cannot give source.{}{}",
                self.key(),
                match family.message_noun() {
                    Some(noun) => format!(" (it gives source.{noun})"),
                    None => String::new(),
                }
            ))),
        }
    }

    fn key(&self) -> &'static str {
        match self {
            ImportSource::Table(_) => "table",
            ImportSource::Query(_) => "query",
            ImportSource::Messages { key, .. } => key,
        }
    }
}

/// A job as GET /import/jobs shows it; `rate` is records written per second of its run (until
/// now while it runs).
pub fn job_info(job: &ImportJob, now_micros: i64) -> Value {
    let source: Value = serde_json::from_str(&job.source_json).unwrap_or(Value::Null);
    let rate = job.started_at_micros.map_or(0.0, |started| {
        let end = job.finished_at_micros.unwrap_or(now_micros);
        let seconds = (end - started).max(1) as f64 / 1e6;
        (job.records_written as f64 / seconds * 10.0).round() / 10.0
    });
    json!({
        "job_id": job.id,
        "source_type": job.source_type,
        "connection_id": job.connection_id,
        "source": source,
        "dataset": job.dataset,
        "mode": job.mode,
        "follow": job.follow,
        "state": job.state,
        "records_read": job.records_read,
        "records_written": job.records_written,
        "bytes_read": job.bytes_read,
        "bytes_written": job.bytes_written,
        "rate": rate,
        "created_at": iso_time(Some(job.created_at_micros)),
        "started_at": iso_time(job.started_at_micros),
        "finished_at": iso_time(job.finished_at_micros),
        "error": match job.error.is_empty() {
            true => Value::Null,
            false => json!(job.error),
        },
        "author": job.author,
    })
}

/// The fields of a job document, or a 400 naming the one that is not.
fn job_fields(doc: &Value) -> Result<&Map<String, Value>> {
    const FIELDS: &[&str] = &["connection_id", "source", "dataset", "mode", "follow"];
    let Value::Object(fields) = doc else {
        return Err(Error::BadRequest(
            "the body must be a JSON object {connection_id, source, dataset, mode, follow}"
                .to_owned(),
        ));
    };
    if let Some(key) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(Error::BadRequest(format!(
            "{key} is not a field of an import ({})",
            FIELDS.join(", ")
        )));
    }
    Ok(fields)
}

/// Whether `principal` sees job `job`: the root user (or an unrestricted grant) sees all, a
/// user the jobs it started.
fn sees(principal: &PlatformPrincipal, job: &ImportJob) -> bool {
    principal.root || principal.grant.all || job.author == principal.user
}

impl Engine {
    /// PUT /import/{source_type}: checks the job against its connection and the caller's
    /// rights, and queues it (201 `{job_id, state}`).
    pub async fn start_import(
        &self,
        principal: &PlatformPrincipal,
        source_type: &str,
        doc: &Value,
        origin: &Origin,
    ) -> Result<Value> {
        let fields = job_fields(doc)?;
        let connector = catalogue::connector(source_type).ok_or_else(|| {
            Error::NotFound(format!(
                "unknown source type {source_type:?} (GET /sources lists them)"
            ))
        })?;
        let connection_id = fields
            .get("connection_id")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::BadRequest("connection_id is required (a string)".to_owned()))?;
        let connection = self.connection(principal, connection_id).await?;
        if connection.connector_id != connector.id {
            return Err(Error::BadRequest(format!(
                "connection {:?} is a {} connection, not {source_type}",
                connection.name, connection.connector_id
            )));
        }
        super::connections::permit_manage(principal, &connection.name)?;
        let source = ImportSource::parse(
            fields
                .get("source")
                .ok_or_else(|| Error::BadRequest("source is required".to_owned()))?,
        )?;
        let source = source.for_family(connector.family);
        source.check_family(connector.family, source_type)?;
        if let ImportSource::Query(sql) = &source {
            // A statement that cannot run is refused now, not when the job runs.
            let ctx = query::session(&self.queries);
            run::query_statement(&ctx, sql)?;
        }
        let dataset = fields
            .get("dataset")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::BadRequest("dataset is required (a string)".to_owned()))?;
        check_name(dataset)?;
        self.authorize_write(principal, dataset)?;
        let mode = match fields.get("mode") {
            None => "append",
            Some(Value::String(mode)) if mode == "append" || mode == "replace" => mode.as_str(),
            Some(other) => {
                return Err(Error::BadRequest(format!(
                    "mode must be \"append\" or \"replace\", not {other}"
                )));
            }
        };
        let follow = match fields.get("follow") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(follow)) => *follow,
            Some(other) => {
                return Err(Error::BadRequest(format!(
                    "follow must be true or false, not {other}"
                )));
            }
        };
        if follow
            && !connector
                .family
                .capabilities()
                .contains(&Capability::Stream)
        {
            return Err(Error::BadRequest(format!(
                "follow applies to a source that streams (Kafka, NATS, AMQP, MQTT); a {} \
                 connection is copied once",
                connector.id
            )));
        }
        let job_id = uuid::Uuid::now_v7().to_string();
        let event = ImportJobSet {
            account: principal.account.clone(),
            job_id: job_id.clone(),
            source_type: connector.id.to_owned(),
            connection_id: connection.id.clone(),
            source_json: source.to_json().to_string(),
            dataset: dataset.to_owned(),
            mode: mode.to_owned(),
            follow,
            author: principal.user.clone(),
        };
        let mut permit = self.control.permit().await?;
        let state = permit.write(Body::ImportJobSet(event), origin).await?;
        self.imports_changed.notify_one();
        let job = state
            .import(&principal.account, &job_id)
            .ok_or_else(|| Error::Internal("the import job just written is missing".to_owned()))?;
        Ok(json!({"job_id": job.id, "state": job.state}))
    }

    /// GET /import/jobs: the jobs `principal` sees, the newest first.
    pub async fn list_imports(&self, principal: &PlatformPrincipal) -> Result<Value> {
        let state = self.current_control().await?;
        let now = Utc::now().timestamp_micros();
        let mut jobs: Vec<&ImportJob> = state
            .imports_of(&principal.account)
            .filter(|job| sees(principal, job))
            .collect();
        jobs.sort_by_key(|job| std::cmp::Reverse(job.created_at_micros));
        let jobs: Vec<Value> = jobs.iter().map(|job| job_info(job, now)).collect();
        Ok(json!({"total": jobs.len(), "jobs": jobs}))
    }

    /// DELETE /import/jobs/{id}: cancels a queued or running job (what it wrote stays), or
    /// removes a finished one from the list.
    pub async fn delete_import(
        &self,
        principal: &PlatformPrincipal,
        id: &str,
        origin: &Origin,
    ) -> Result<Value> {
        let state = self.current_control().await?;
        let job = state
            .import(&principal.account, id)
            .filter(|job| sees(principal, job))
            .ok_or_else(|| Error::NotFound(format!("import job {id:?} not found")))?;
        if let Some(connection) = state.connection(&principal.account, &job.connection_id) {
            super::connections::permit_manage(principal, &connection.name)?;
        }
        let mut permit = self.control.permit().await?;
        let Some(job) = permit.snapshot().import(&principal.account, id).cloned() else {
            return Err(Error::NotFound(format!("import job {id:?} not found")));
        };
        if job.finished() {
            let event = ImportJobDeleted {
                account: job.account.clone(),
                job_id: job.id.clone(),
            };
            permit.write(Body::ImportJobDeleted(event), origin).await?;
            self.imports_changed.notify_one();
            return Ok(json!({"job_id": job.id, "result": "deleted"}));
        }
        let event = progress_of(&job, "cancelled", String::new());
        let state = permit.write(Body::ImportJobProgress(event), origin).await?;
        let job = state.import(&principal.account, id).unwrap_or(&job);
        Ok(json!({"job_id": job.id, "result": "cancelled", "state": job.state}))
    }

    /// The control state as this node applied it, for the runner.
    pub(in crate::engine) fn imports_state(&self) -> Arc<ControlState> {
        self.control_state()
    }

    /// Who a job reads and writes as: its author, with the grant its roles give now. A 403
    /// when that user is gone.
    fn import_author(&self, job: &ImportJob) -> Result<PlatformPrincipal> {
        self.acting_user(&job.account, &job.author).ok_or_else(|| {
            Error::Forbidden(format!(
                "user {} who started import {} no longer exists",
                job.author, job.id
            ))
        })
    }

    /// Appends how far a job got; the job as it is after it (`None` once removed).
    async fn record_import(&self, progress: ImportJobProgress) -> Result<Option<ImportJob>> {
        let (account, id) = (progress.account.clone(), progress.job_id.clone());
        let mut permit = self.control.permit().await?;
        if permit.snapshot().import(&account, &id).is_none() {
            return Ok(None);
        }
        let state = permit
            .write(Body::ImportJobProgress(progress), &Origin::system())
            .await?;
        Ok(state.import(&account, &id).cloned())
    }
}

/// A progress event that keeps `job`'s counts and cursor, in `state`.
fn progress_of(job: &ImportJob, state: &str, error: String) -> ImportJobProgress {
    ImportJobProgress {
        account: job.account.clone(),
        job_id: job.id.clone(),
        state: state.to_owned(),
        records_read: job.records_read,
        records_written: job.records_written,
        bytes_read: job.bytes_read,
        bytes_written: job.bytes_written,
        cursor_json: job.cursor_json.clone(),
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_one_key() {
        assert_eq!(
            ImportSource::parse(&json!({"table": "public.t"})).unwrap(),
            ImportSource::Table("public.t".to_owned())
        );
        assert_eq!(
            ImportSource::parse(&json!({"path": "logs/*.parquet"})).unwrap(),
            ImportSource::Table("logs/*.parquet".to_owned())
        );
        assert_eq!(
            ImportSource::parse(&json!({"query": "SELECT 1"})).unwrap(),
            ImportSource::Query("SELECT 1".to_owned())
        );
        for bad in [
            json!({}),
            json!({"table": "a", "query": "b"}),
            json!({"table": ""}),
            json!({"table": 3}),
            json!({"rows": "x"}),
            json!({"queues": "q"}),
            json!("t"),
        ] {
            assert!(ImportSource::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn messages_need_a_source_of_their_kind() {
        let topic = ImportSource::parse(&json!({"topic": "events"})).unwrap();
        assert!(topic.check_family(Family::Kafka, "kafka").is_ok());
        assert!(topic.check_family(Family::Mqtt, "mosquitto").is_ok());
        assert!(topic.check_family(Family::Postgres, "postgresql").is_err());
        assert!(topic.check_family(Family::Nats, "nats").is_err());
        let table = ImportSource::Table("orders".to_owned());
        assert_eq!(
            table.clone().for_family(Family::Amqp),
            ImportSource::Messages {
                key: "queue",
                name: "orders".to_owned()
            }
        );
        assert_eq!(table.clone().for_family(Family::Postgres), table);
        let query = ImportSource::Query("SELECT 1".to_owned());
        assert!(query.check_family(Family::Amqp, "rabbitmq").is_err());
        let query = ImportSource::Query("SELECT 1".to_owned());
        assert!(
            query
                .check_family(Family::SearchEngine, "opensearch")
                .is_err()
        );
    }

    #[test]
    fn the_rate_is_records_per_second_of_the_run() {
        let job = ImportJob {
            account: "a".into(),
            id: "j".into(),
            source_type: "postgresql".into(),
            connection_id: "c".into(),
            source_json: r#"{"table":"t"}"#.into(),
            dataset: "d".into(),
            mode: "append".into(),
            follow: false,
            author: "root".into(),
            created_at_micros: 0,
            state: "succeeded".into(),
            records_read: 500,
            records_written: 500,
            bytes_read: 10,
            bytes_written: 12,
            cursor_json: String::new(),
            error: String::new(),
            started_at_micros: Some(1_000_000),
            finished_at_micros: Some(3_000_000),
        };
        let info = job_info(&job, 9_000_000);
        assert_eq!(info["rate"], 250.0);
        assert_eq!(info["error"], Value::Null);
        assert_eq!(info["source"]["table"], "t");
        assert!(info["finished_at"].is_string());
    }
}
