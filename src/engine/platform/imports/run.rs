//! Running import jobs: the runner that starts the jobs of the accounts this node serves, and
//! each job's copy, batch by batch.
//!
//! The runner looks at the control state every `imports.tick_ms`, and at once when a job is
//! started or deleted on its node: a job that is queued, or running with no task on this node
//! (its node stopped), gets a task, at most `imports.max_concurrent_jobs` at once; a task whose
//! job was cancelled or removed is told to stop, and stops at its next batch (a batch being
//! written is written and counted).
//!
//! A task reads from the job's cursor: a table or a query's result is read through DataFusion
//! from record `position` on (the source is asked for the same statement each time, so a
//! table that changes while it is imported is copied as it is when each part is read); a
//! topic from each partition's next offset. A job that is not following a stream ends when the
//! source has no more: a table's last record, or a topic's end as it was when the job read it
//! (and what arrives meanwhile).

use std::{collections::HashMap, sync::Arc, time::Duration};

use arrow::{
    array::{ArrayRef, RecordBatch, StringArray, StringBuilder},
    datatypes::{DataType, Field, Schema},
};
use datafusion::{
    dataframe::DataFrame,
    prelude::SessionContext,
    sql::{parser::Statement, sqlparser::ast},
};
use futures::StreamExt;
use serde_json::{Value, json};
use strata_log::event::ImportJobProgress;
use strata_projections::control::{Connection, ImportJob};
use tokio::{sync::watch, task::JoinHandle};

use super::{ImportSource, progress_of};
use crate::{
    documents::ID_FIELD,
    engine::{
        Action, DEFAULT_DATABASE, Engine, PlatformPrincipal,
        connections::{
            messages::{Messages, Reader, dataset_name},
            sql::classify_source,
        },
        database_key,
        ingest::DeleteLimits,
    },
    error::{Error, Result},
    query,
};

/// How long a read of messages waits for a first record.
const MESSAGE_WAIT: Duration = Duration::from_secs(1);

/// How long a table's or a query's progress goes unrecorded, at most (see
/// `imports.record_batches`).
const RECORD_EVERY: Duration = Duration::from_secs(1);

/// The statement of a job's `source.query`: one query (a connected source is only read).
pub fn query_statement(ctx: &SessionContext, sql: &str) -> Result<Statement> {
    let statement = query::parse(ctx, sql)?;
    match &statement {
        Statement::Statement(inner) if matches!(inner.as_ref(), ast::Statement::Query(_)) => {
            Ok(statement)
        }
        _ => Err(Error::BadRequest(
            "source.query must be a query (SELECT, WITH, VALUES): a connected source is read, \
             never written"
                .to_owned(),
        )),
    }
}

/// A job task of this node: what tells it to stop, and the task, aborted when the runner
/// stops (a batch cut short is written again, under the same ids, when the job resumes).
struct Task {
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

impl Drop for Task {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// Starts the runner of `engine`'s node.
pub fn spawn(engine: Arc<Engine>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let config = engine.config().imports.clone();
        let tick = Duration::from_millis(config.tick_ms.max(10));
        let mut tasks: HashMap<(String, String), Task> = HashMap::new();
        loop {
            // A job started or deleted on this node is looked at now, others at the next tick.
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                _ = engine.imports_changed.notified() => {}
            }
            let state = engine.imports_state();
            tasks.retain(|key, task| {
                let live = state.imports.get(key).is_some_and(|job| !job.finished());
                if !live {
                    task.stop.send_replace(true);
                }
                !task.handle.is_finished()
            });
            for (key, job) in &state.imports {
                if job.finished()
                    || tasks.contains_key(key)
                    || tasks.len() >= config.max_concurrent_jobs.max(1)
                    || engine
                        .owner_elsewhere(&database_key(&job.account, DEFAULT_DATABASE))
                        .is_some()
                {
                    continue;
                }
                let (stop, stopped) = watch::channel(false);
                let handle = tokio::spawn(run_job(engine.clone(), job.clone(), stopped));
                tasks.insert(key.clone(), Task { stop, handle });
            }
        }
    })
}

/// How a job's copy ended.
enum Ended {
    /// The source has no more.
    Done,
    /// The job was cancelled or removed (what says so is already written).
    Stopped,
}

/// Runs `job` from its cursor until it ends, and records how it ended.
async fn run_job(engine: Arc<Engine>, job: ImportJob, mut stop: watch::Receiver<bool>) {
    let mut copy = Copy {
        engine: &engine,
        position: position_of(&job),
        new_from: new_from(&job),
        job,
        unrecorded: None,
    };
    let ended = copy.run(&mut stop).await;
    // What the last batches wrote counts, however the job ended.
    let job = copy.with_unrecorded();
    let (state, error) = match ended {
        // A cancelled job keeps its state; its counts take in the batches written before.
        Ok(Ended::Stopped) if job != copy.job => ("running", String::new()),
        Ok(Ended::Stopped) => return,
        Ok(Ended::Done) => ("succeeded", String::new()),
        Err(error) => {
            tracing::warn!(job = %job.id, %error, "an import job failed");
            ("failed", error.to_string())
        }
    };
    let event = progress_of(&job, state, error);
    if let Err(error) = engine.record_import(event).await {
        tracing::warn!(job = %copy.job.id, %error, "cannot record the end of an import job");
    }
}

/// The records of a table or a query a job has written (its cursor's `position`).
fn position_of(job: &ImportJob) -> u64 {
    serde_json::from_str::<Value>(&job.cursor_json)
        .ok()
        .and_then(|c| c["position"].as_u64())
        .unwrap_or(0)
}

/// Where a table's or a query's records are known new when `job` is taken up again: past its
/// cursor and the records written after it unrecorded, at most as many as the cursor's `batch`
/// says (unknown: no record is taken as new).
fn new_from(job: &ImportJob) -> u64 {
    let cursor = serde_json::from_str::<Value>(&job.cursor_json).unwrap_or(Value::Null);
    match cursor["batch"].as_u64() {
        Some(batch) => position_of(job).saturating_add(batch),
        None => u64::MAX,
    }
}

/// One job's copy: the job as last recorded, and its cursor.
struct Copy<'a> {
    engine: &'a Engine,
    job: ImportJob,
    position: u64,
    /// The position of a table's or a query's records from which none was written before
    /// (their ids name no record yet: no lookup of the records they would replace).
    new_from: u64,
    /// A table's or a query's progress written and not recorded yet, and since when.
    unrecorded: Option<(ImportJobProgress, std::time::Instant)>,
}

impl Copy<'_> {
    async fn run(&mut self, stop: &mut watch::Receiver<bool>) -> Result<Ended> {
        let engine = self.engine;
        let principal = engine.import_author(&self.job)?;
        let connection = engine
            .imports_state()
            .connection(&self.job.account, &self.job.connection_id)
            .cloned()
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "connection {} of the import was deleted",
                    self.job.connection_id
                ))
            })?;
        if self.job.state == "queued" {
            // Nothing written yet: every record is new. The cursor says how large a batch
            // this run writes, for a run that takes the job up after a stop.
            let mut running = progress_of(&self.job, "running", String::new());
            running.cursor_json = self.cursor().to_string();
            self.new_from = 0;
            match self.record(running).await? {
                true => {}
                false => return Ok(Ended::Stopped),
            }
            if self.job.mode == "replace" {
                self.empty_dataset(&principal).await?;
            }
        }
        let copied = match ImportSource::of_job(&self.job)? {
            ImportSource::Messages { name, .. } => {
                self.messages(&principal, &connection, &name, stop).await
            }
            source => self.rows(&principal, &connection, &source, stop).await,
        };
        engine.record_use(&connection, copied.as_ref().err()).await;
        copied
    }

    /// Mode replace: the dataset's records are deleted before the first batch.
    async fn empty_dataset(&self, principal: &PlatformPrincipal) -> Result<()> {
        let dataset = &self.job.dataset;
        if self
            .engine
            .dataset(&principal.account, dataset)
            .await
            .is_err()
        {
            return Ok(());
        }
        let origin = principal.origin(&self.job.id);
        self.engine
            .delete_by_query(
                principal,
                dataset,
                &json!({"match_all": {}}),
                DeleteLimits::default(),
                &origin,
            )
            .await?;
        Ok(())
    }

    /// Appends `progress`; whether the job goes on (it was not cancelled or removed).
    async fn record(&mut self, progress: ImportJobProgress) -> Result<bool> {
        match self.engine.record_import(progress).await? {
            Some(job) => {
                let goes_on = !job.finished();
                self.job = job;
                Ok(goes_on)
            }
            None => Ok(false),
        }
    }

    /// A table, a file set or a query's result, from record `position` on.
    async fn rows(
        &mut self,
        principal: &PlatformPrincipal,
        connection: &Connection,
        source: &ImportSource,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<Ended> {
        let engine = self.engine;
        let stage = format!("import from {}", connection.name);
        let ctx = query::session(&engine.queries);
        let opened = engine.source_of(connection).await?;
        let frame = match source {
            ImportSource::Table(dataset) => {
                let table = engine
                    .source_table(
                        &ctx,
                        principal,
                        connection,
                        opened.as_ref(),
                        dataset,
                        Action::RecordRead,
                    )
                    .await?;
                ctx.read_table(table).map_err(query::classify)?
            }
            ImportSource::Query(sql) => {
                let statement = query_statement(&ctx, sql)?;
                for reference in query::table_references(&ctx, &statement)? {
                    let dataset = match reference.schema() {
                        Some(schema) => format!("{schema}.{}", reference.table()),
                        None => reference.table().to_owned(),
                    };
                    engine
                        .register_source_table(
                            &ctx,
                            principal,
                            connection,
                            opened.as_ref(),
                            &reference,
                            &dataset,
                        )
                        .await?;
                }
                let state = ctx.state();
                let plan = state
                    .statement_to_plan(statement)
                    .await
                    .map_err(|e| classify_source(&stage, e))?;
                DataFrame::new(state, plan)
            }
            ImportSource::Messages { .. } => {
                return Err(Error::Internal("messages are no table".into()));
            }
        };
        let frame = frame
            .limit(self.position as usize, None)
            .map_err(query::classify)?;
        let stream = frame
            .execute_stream()
            .await
            .map_err(|e| classify_source(&stage, e))?;
        let mut batches = ReadAhead::start(stream, stage);
        let batch_rows = engine.config().imports.batch_rows.max(1);
        loop {
            let next = tokio::select! {
                next = batches.next() => next,
                _ = stop.changed() => return Ok(Ended::Stopped),
            };
            let Some(batch) = next else {
                return Ok(Ended::Done);
            };
            let batch = batch?;
            let mut offset = 0;
            while offset < batch.num_rows() {
                let part = batch.slice(offset, batch_rows.min(batch.num_rows() - offset));
                offset += part.num_rows();
                let first = self.position;
                let ids = self.table_ids(first, part.num_rows());
                if self.cancelled() {
                    return Ok(Ended::Stopped);
                }
                let new = first >= self.new_from;
                let written = self.write(principal, &part, ids, new).await?;
                self.position += part.num_rows() as u64;
                if !self.advance_rows(&part, written, batch_rows).await? {
                    return Ok(Ended::Stopped);
                }
            }
        }
    }

    /// A dataset read as messages (a topic, a stream, a queue, a key set), from the job's
    /// cursor on: to the source's end as the reads find it, or on and on when the job follows
    /// it. Each batch is written, then its cursor recorded, then acknowledged to the source.
    async fn messages(
        &mut self,
        principal: &PlatformPrincipal,
        connection: &Connection,
        name: &str,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<Ended> {
        let engine = self.engine;
        let opened = engine.source_of(connection).await?;
        let source = opened.messages().ok_or_else(|| {
            Error::BadRequest(format!(
                "connection {:?} is not read as messages",
                connection.name
            ))
        })?;
        // The right first: a user who may not read the dataset learns nothing of it.
        engine.read_source(principal, Action::RecordRead, &connection.name, name, &[])?;
        let gone = |error| super::super::connections::sql::no_dataset(connection, error);
        let cursor: Value = serde_json::from_str(&self.job.cursor_json).unwrap_or(Value::Null);
        let mut reader = source
            .reader(name, &self.job.id, &cursor)
            .await
            .map_err(gone)?;
        let ended = self
            .read_messages(principal, connection, name, source, reader.as_mut(), stop)
            .await;
        // Over, however it ended here (a node that stops aborts the task before this point).
        if let Err(error) = reader.end().await {
            tracing::warn!(job = %self.job.id, %error, "the source kept what it held for the job");
        }
        ended.map_err(gone)
    }

    /// The loop of [`Copy::messages`]: batches until the source's end (when the job does not
    /// follow) or until the job is stopped.
    async fn read_messages(
        &mut self,
        principal: &PlatformPrincipal,
        connection: &Connection,
        name: &str,
        source: &dyn Messages,
        reader: &mut (dyn Reader + '_),
        stop: &mut watch::Receiver<bool>,
    ) -> Result<Ended> {
        let engine = self.engine;
        let mut cursor: Value = serde_json::from_str(&self.job.cursor_json).unwrap_or(Value::Null);
        let batch_rows = engine.config().imports.batch_rows.max(1);
        let ctx = query::session(&engine.queries);
        loop {
            if *stop.borrow() {
                return Ok(Ended::Stopped);
            }
            let read = tokio::select! {
                read = reader.next(batch_rows, MESSAGE_WAIT) => read?,
                _ = stop.changed() => return Ok(Ended::Stopped),
            };
            if read.rows.is_empty() {
                if read.cursor != cursor && !read.cursor.is_null() {
                    let empty = RecordBatch::new_empty(Arc::new(Schema::empty()));
                    if !self.advance(&empty, 0, read.cursor.clone()).await? {
                        return Ok(Ended::Stopped);
                    }
                    cursor = read.cursor;
                }
                match read.at_end && !self.job.follow {
                    true => return Ok(Ended::Done),
                    false => continue,
                }
            }
            let ids: StringArray = read
                .rows
                .iter()
                .map(|row| Some(row[ID_FIELD].as_str().unwrap_or_default()))
                .collect();
            let rows = super::super::connections::kafka::with_fields(read.rows);
            let table = super::super::connections::http_json::table_of(name, &rows)?;
            let table = engine.viewed_table(
                &ctx,
                principal,
                connection,
                name,
                table,
                Action::RecordRead,
            )?;
            let frame = ctx.read_table(table).map_err(query::classify)?;
            // The reader's record filter may leave records out: ids follow the rows kept.
            let kept = frame.collect().await.map_err(query::classify)?;
            let batch = arrow::compute::concat_batches(
                &kept
                    .first()
                    .map(|b| b.schema())
                    .unwrap_or_else(|| Arc::new(Schema::empty())),
                &kept,
            )
            .map_err(|e| Error::Internal(e.to_string()))?;
            let batch = with_record_names(&batch, source.prefix())?;
            // Cancelled while the batch was read: it is neither written nor acknowledged.
            if self.cancelled() {
                return Ok(Ended::Stopped);
            }
            let written = match batch.num_rows() {
                0 => 0,
                _ => self.write(principal, &batch, ids, false).await?,
            };
            if !self.advance(&batch, written, read.cursor.clone()).await? {
                return Ok(Ended::Stopped);
            }
            cursor = read.cursor;
            reader.acknowledge().await?;
        }
    }

    /// Whether the job was cancelled or removed since the runner last looked (it tells the task
    /// at its next tick; a batch read meanwhile is not written).
    fn cancelled(&self) -> bool {
        self.engine
            .imports_state()
            .import(&self.job.account, &self.job.id)
            .is_none_or(ImportJob::finished)
    }

    /// The cursor of a table or a query after the records written: their count, and how many
    /// records this run writes at most after a cursor before it records the next (`batch`).
    fn cursor(&self) -> Value {
        json!({"position": self.position, "batch": self.unrecorded_span()})
    }

    /// How many records of a table or a query are written at most after the last recorded
    /// cursor: `imports.record_batches` batches.
    fn unrecorded_span(&self) -> u64 {
        let imports = &self.engine.config().imports;
        (imports.batch_rows.max(1) * imports.record_batches.max(1)) as u64
    }

    /// Counts a batch of a table or a query written (`written` bytes of `batch`'s records),
    /// and records the progress and the cursor after it when the next batch (of at most
    /// `batch_rows`) could take the records written since the last record past
    /// [`Copy::unrecorded_span`], or when the last record is [`RECORD_EVERY`] old; whether
    /// the job goes on.
    async fn advance_rows(
        &mut self,
        batch: &RecordBatch,
        written: u64,
        batch_rows: usize,
    ) -> Result<bool> {
        let (mut progress, since) = self.unrecorded.take().unwrap_or_else(|| {
            (
                progress_of(&self.job, "running", String::new()),
                std::time::Instant::now(),
            )
        });
        count_batch(&mut progress, batch, written, self.cursor());
        let pending = progress.records_written - self.job.records_written;
        if pending + batch_rows as u64 <= self.unrecorded_span() && since.elapsed() < RECORD_EVERY {
            self.unrecorded = Some((progress, since));
            return Ok(!self.cancelled());
        }
        self.record(progress).await
    }

    /// The job with the progress written and not yet recorded counted in (recorded with the
    /// job's end).
    fn with_unrecorded(&mut self) -> ImportJob {
        let mut job = self.job.clone();
        if let Some((progress, _)) = self.unrecorded.take() {
            job.records_read = progress.records_read;
            job.records_written = progress.records_written;
            job.bytes_read = progress.bytes_read;
            job.bytes_written = progress.bytes_written;
            job.cursor_json = progress.cursor_json;
        }
        job
    }

    /// Writes `batch` to the job's dataset with the record ids `ids` (unless it has an `_id`
    /// column of its own); the Arrow bytes written. `new`: the job's ids of these records
    /// were never written before (their replacements are not looked up).
    async fn write(
        &self,
        principal: &PlatformPrincipal,
        batch: &RecordBatch,
        ids: StringArray,
        new: bool,
    ) -> Result<u64> {
        let (batch, new) = match batch.schema().column_with_name(ID_FIELD) {
            Some(_) => (batch.clone(), false),
            None => (with_ids(batch, ids)?, new),
        };
        let origin = principal.origin(&self.job.id);
        let dataset = &self.job.dataset;
        match new {
            true => {
                self.engine
                    .ingest_new_records(principal, dataset, &batch, &origin)
                    .await?
            }
            false => {
                self.engine
                    .ingest_batch(principal, dataset, &batch, &origin)
                    .await?
            }
        };
        Ok(batch.get_array_memory_size() as u64)
    }

    /// The record ids of `rows` rows of a table or a query from `first` on: the job's id and
    /// each row's place (built in one buffer: an import writes millions of them).
    fn table_ids(&self, first: u64, rows: usize) -> StringArray {
        use std::fmt::Write;
        let job = &self.job.id;
        let mut ids = StringBuilder::with_capacity(rows, rows * (job.len() + 8));
        for place in first..first + rows as u64 {
            // Writing into an Arrow string builder cannot fail.
            let _ = write!(ids, "{job}-{place}");
            ids.append_value("");
        }
        ids.finish()
    }

    /// Records a batch written (`written` bytes of `batch`'s records) and the cursor after it;
    /// whether the job goes on.
    async fn advance(&mut self, batch: &RecordBatch, written: u64, cursor: Value) -> Result<bool> {
        let mut progress = progress_of(&self.job, "running", String::new());
        count_batch(&mut progress, batch, written, cursor);
        self.record(progress).await
    }
}

/// `progress` with a batch written counted in (`written` bytes of `batch`'s records), and the
/// cursor after it.
fn count_batch(progress: &mut ImportJobProgress, batch: &RecordBatch, written: u64, cursor: Value) {
    let rows = batch.num_rows() as u64;
    progress.records_read += rows;
    progress.records_written += rows;
    progress.bytes_read += batch.get_array_memory_size() as u64;
    progress.bytes_written += written;
    progress.cursor_json = cursor.to_string();
}

/// A source's record batches read ahead of the writes, on a task of their own: reading the
/// next batch from the source (its network round trips, its decoding into Arrow) overlaps
/// writing this one. At most [`ReadAhead::DEPTH`] batches wait; the reading stops when this
/// is dropped.
struct ReadAhead {
    batches: tokio::sync::mpsc::Receiver<Result<RecordBatch>>,
    reader: JoinHandle<()>,
}

impl ReadAhead {
    const DEPTH: usize = 2;

    fn start(
        mut stream: datafusion::physical_plan::SendableRecordBatchStream,
        stage: String,
    ) -> Self {
        let (sender, batches) = tokio::sync::mpsc::channel(Self::DEPTH);
        let reader = tokio::spawn(async move {
            while let Some(batch) = stream.next().await {
                let batch = batch.map_err(|e| classify_source(&stage, e));
                let failed = batch.is_err();
                if sender.send(batch).await.is_err() || failed {
                    break;
                }
            }
        });
        ReadAhead { batches, reader }
    }

    /// The next batch; `None` after the last.
    async fn next(&mut self) -> Option<Result<RecordBatch>> {
        self.batches.recv().await
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// `batch` with the columns of a message's place named as in a dataset (no field of a dataset
/// may begin with `_`: `_offset` becomes `<prefix>.offset`, `_timestamp` `@timestamp`).
fn with_record_names(batch: &RecordBatch, prefix: &str) -> Result<RecordBatch> {
    let fields: Vec<Arc<Field>> = batch
        .schema()
        .fields()
        .iter()
        .map(|field| match dataset_name(prefix, field.name()) {
            Some(name) => Arc::new(field.as_ref().clone().with_name(name)),
            None => field.clone(),
        })
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), batch.columns().to_vec())
        .map_err(|e| Error::Internal(format!("an import batch: {e}")))
}

/// `batch` with an `_id` column of `ids`.
fn with_ids(batch: &RecordBatch, ids: StringArray) -> Result<RecordBatch> {
    let mut fields: Vec<Arc<Field>> = batch.schema().fields().iter().cloned().collect();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    fields.push(Arc::new(Field::new(ID_FIELD, DataType::Utf8, false)));
    columns.push(Arc::new(ids));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| Error::Internal(format!("an import batch: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(cursor: &str) -> ImportJob {
        ImportJob {
            account: "a".into(),
            id: "j".into(),
            source_type: "kafka".into(),
            connection_id: "c".into(),
            source_json: r#"{"topic":"t"}"#.into(),
            dataset: "d".into(),
            mode: "append".into(),
            follow: false,
            author: "root".into(),
            created_at_micros: 0,
            state: "running".into(),
            records_read: 0,
            records_written: 0,
            bytes_read: 0,
            bytes_written: 0,
            cursor_json: cursor.into(),
            error: String::new(),
            started_at_micros: None,
            finished_at_micros: None,
        }
    }

    #[test]
    fn cursors_are_read_back() {
        assert_eq!(position_of(&job("")), 0);
        assert_eq!(position_of(&job(r#"{"position": 42}"#)), 42);
        // A batch of at most 10 may follow the cursor unrecorded: its records are looked up.
        assert_eq!(new_from(&job(r#"{"position": 42, "batch": 10}"#)), 52);
        assert_eq!(new_from(&job(r#"{"position": 42}"#)), u64::MAX);
        assert_eq!(new_from(&job("")), u64::MAX);
    }

    #[test]
    fn only_queries_are_imported() {
        let ctx = SessionContext::new();
        assert!(query_statement(&ctx, "SELECT a FROM t WHERE a > 1").is_ok());
        assert!(query_statement(&ctx, "DELETE FROM t").is_err());
        assert!(query_statement(&ctx, "").is_err());
    }

    #[test]
    fn a_record_s_place_is_named_as_in_a_dataset() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("_partition", DataType::Int64, false),
            Field::new("_offset", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(arrow::array::Int64Array::from(vec![0, 1])),
                Arc::new(arrow::array::Int64Array::from(vec![7, 3])),
            ],
        )
        .unwrap();
        let with = with_ids(&batch, StringArray::from(vec!["x", "y"])).unwrap();
        assert_eq!(with.schema().field(2).name(), ID_FIELD);
        let named = with_record_names(&batch, "kafka").unwrap();
        assert_eq!(named.schema().field(0).name(), "kafka.partition");
        assert_eq!(named.schema().field(1).name(), "kafka.offset");
    }
}
