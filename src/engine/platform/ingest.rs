//! Records written to platform datasets: the operations of a bulk request (index, create,
//! delete), applied by each dataset's table leader.
//!
//! For each dataset a request names, in one turn of its leader:
//! 1. the records are read and their columns planned outside the leader's permit (the costly
//!    part, so that concurrent requests overlap it); a record with a field the dataset lacks, or
//!    a value its column cannot take, first grows the dataset's columns by a catalog change
//!    (ADR 5), and the plan is made again against them;
//! 2. under the permit, each operation's `_id` is resolved in request order against the live
//!    records (through the exact-match index on `_id`) and the operations before it: create of
//!    a present id is a 409 item, index of one replaces it, delete of an absent one is a 404;
//! 3. one event (ADR 2): a `RowsAppended` of the records to add that also tombstones the
//!    records replaced or deleted (`tombstoned_row_ids`), or a `RowsDeleted` when the request
//!    adds nothing. A replaced record gets a new row id.
//!
//! Nothing a request refuses as a whole is written; an item that fails is left out alone.

pub(in crate::engine) mod resolve;

use std::{collections::HashMap, sync::Arc, time::Duration};

use arrow::array::{BooleanArray, RecordBatch};
use roaring::RoaringTreemap;
use strata_log::{
    envelope::Body,
    event::{RowsAppended, RowsDeleted},
};
use strata_projections::{
    catalog::{TableDef, WriteIndex},
    table::{TableSnapshot, rows as table_rows},
};

use crate::engine::{
    Action, DatabaseGuard, Engine, Origin, PlatformPrincipal, TableRuntime, aliases,
    datasets::{Kind, check_name},
    leader::Permit,
    quota::Counts,
};
use crate::{
    documents::{
        self, Document, Refusal,
        bulk::{self, Operation},
        columns,
        update::Update,
    },
    error::{Error, Result},
};
use resolve::{Request, Resolved, read_update, resolve, stored_sources};

/// How long a bulk request waits for a dataset's leader (or the catalog's, to create a dataset or
/// grow its columns) busy with another write before its items fail with 429 (Elasticsearch
/// queues bulk requests too, and rejects them when its queue is full).
pub(in crate::engine) const BULK_WAIT: Duration = Duration::from_secs(30);

/// What became of one operation of a bulk request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `created` (201), `updated` (200), `deleted` (200) or `not_found` (404).
    Done {
        result: &'static str,
        status: u16,
    },
    Failed(Refusal),
}

/// One item of a bulk response.
#[derive(Clone, Debug)]
pub struct BulkItem {
    pub action: bulk::Action,
    pub index: String,
    pub id: Option<String>,
    pub outcome: Outcome,
    /// An update's record as it is after the update, as its `_source` asks (`get._source`).
    pub get: Option<serde_json::Value>,
}

/// What became of one operation of a dataset's: its `_id`, its outcome, and an update's `get`.
pub(in crate::engine) type Applied = (String, Outcome, Option<serde_json::Value>);

/// How a request applied all at once, or not at all (an SQL statement), takes its
/// operations' failures: every failure refuses it, but for a create of a record that exists
/// when `conflicts_skip` (`ON CONFLICT DO NOTHING`).
#[derive(Clone, Copy, Debug)]
pub(in crate::engine) struct AllOrNothing {
    pub conflicts_skip: bool,
}

/// The refusal of an update of a record that does not exist (and no upsert).
fn document_missing(id: &str) -> Refusal {
    Refusal::new(
        "document_missing_exception",
        404,
        format!("[{id}]: document missing"),
    )
}

impl Outcome {
    fn done(result: &'static str, status: u16) -> Outcome {
        Outcome::Done { result, status }
    }
}

/// The item error of an error that failed all of a dataset's operations.
fn refusal_of(error: &Error, index: &str) -> Refusal {
    let reason = error.to_string();
    match error {
        Error::Forbidden(_) => Refusal::new("security_exception", 403, reason),
        Error::LimitReached { .. } => Refusal::new("limit_exceeded_exception", 403, reason),
        Error::DatasetNotFound(_) => Refusal::new(
            "index_not_found_exception",
            404,
            format!("no such index [{index}]"),
        ),
        Error::InvalidName(_) | Error::BadRequest(_) => {
            Refusal::new("invalid_index_name_exception", 400, reason)
        }
        Error::Busy(_) => Refusal::new("es_rejected_execution_exception", 429, reason),
        Error::Log(strata_log::Error::StorageFull { .. }) => {
            Refusal::new("insufficient_storage_exception", 507, reason)
        }
        Error::Unavailable(_) | Error::Log(_) => {
            Refusal::new("unavailable_shards_exception", 503, reason)
        }
        _ => Refusal::new("exception", 500, reason),
    }
}

impl Engine {
    /// Applies a bulk request's operations; `path_index` is the dataset of the path, for the
    /// operations that name none. Items come back in request order.
    pub async fn bulk(
        &self,
        principal: &PlatformPrincipal,
        path_index: Option<&str>,
        operations: Vec<Operation>,
        origin: &Origin,
    ) -> Vec<BulkItem> {
        let now = chrono::Utc::now().timestamp_millis();
        let mut items = Vec::with_capacity(operations.len());
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        // Aliases, to send each write to its dataset.
        let catalog = match self.datasets_catalog(&principal.account).await {
            Ok(catalog) => catalog.unwrap_or_default(),
            Err(error) => {
                let refusal = refusal_of(&error, path_index.unwrap_or_default());
                return operations
                    .iter()
                    .map(|operation| BulkItem {
                        action: operation.action,
                        index: operation
                            .index
                            .clone()
                            .or_else(|| path_index.map(str::to_owned))
                            .unwrap_or_default(),
                        id: operation.id.clone(),
                        outcome: Outcome::Failed(refusal.clone()),
                        get: None,
                    })
                    .collect();
            }
        };
        for (i, operation) in operations.iter().enumerate() {
            let mut index = operation
                .index
                .clone()
                .or_else(|| path_index.map(str::to_owned));
            let alias = index.as_deref().map(|name| catalog.write_index(name));
            let refusal = match (index.as_deref(), alias) {
                (None, _) => Some(Refusal::new(
                    "action_request_validation_exception",
                    400,
                    "Validation Failed: 1: index is missing;",
                )),
                (Some(name), Some(WriteIndex::None)) => Some(Refusal::new(
                    "illegal_argument_exception",
                    400,
                    aliases::no_write_index(name),
                )),
                (Some(_), Some(WriteIndex::Dataset(_))) => operation.refusal.clone(),
                (Some(name), _) => match check_name(name) {
                    Err(error) => Some(refusal_of(&error, name)),
                    Ok(()) if operation.require_alias == Some(true) => Some(Refusal::new(
                        "index_not_found_exception",
                        404,
                        format!(
                            "no such index [{name}] and [require_alias] request flag is [true] and [{name}] is not an alias"
                        ),
                    )),
                    Ok(()) => operation.refusal.clone(),
                },
            };
            // A write to an alias is a write to its write index.
            if let Some(WriteIndex::Dataset(dataset)) = alias {
                index = Some(dataset.to_owned());
            }
            let index = index.unwrap_or_default();
            match refusal {
                Some(refusal) => items.push(BulkItem {
                    action: operation.action,
                    index,
                    id: operation.id.clone(),
                    outcome: Outcome::Failed(refusal),
                    get: None,
                }),
                None => {
                    match groups.iter_mut().find(|(name, _)| *name == index) {
                        Some((_, members)) => members.push(i),
                        None => groups.push((index.clone(), vec![i])),
                    }
                    items.push(BulkItem {
                        action: operation.action,
                        index,
                        id: operation.id.clone(),
                        outcome: Outcome::done("noop", 200),
                        get: None,
                    });
                }
            }
        }
        for (name, members) in groups {
            let operations: Vec<&Operation> = members.iter().map(|&i| &operations[i]).collect();
            let outcome = self
                .bulk_into(principal, &name, &operations, now, origin, None)
                .await;
            match outcome {
                Ok(done) => {
                    for (&i, (id, outcome, get)) in members.iter().zip(done) {
                        items[i].id = Some(id);
                        items[i].outcome = outcome;
                        items[i].get = get;
                    }
                }
                Err(error) => {
                    let refusal = refusal_of(&error, &name);
                    for &i in &members {
                        // As in Elasticsearch, an update finds no record in a dataset that
                        // does not exist.
                        items[i].outcome = Outcome::Failed(match (&error, items[i].action) {
                            (Error::DatasetNotFound(_), bulk::Action::Update) => {
                                document_missing(items[i].id.as_deref().unwrap_or_default())
                            }
                            _ => refusal.clone(),
                        });
                    }
                }
            }
        }
        items
    }

    /// Applies `operations` on dataset `name` all at once, or none of them (see
    /// [`AllOrNothing`]): what became of each.
    pub(in crate::engine) async fn bulk_all_or_nothing(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        operations: Vec<Operation>,
        origin: &Origin,
        rule: AllOrNothing,
    ) -> Result<Vec<Applied>> {
        check_name(name)?;
        let now = chrono::Utc::now().timestamp_millis();
        let operations: Vec<&Operation> = operations.iter().collect();
        self.bulk_into(principal, name, &operations, now, origin, Some(rule))
            .await
    }

    /// Applies the operations on dataset `name`, creating it for an index or create (or an
    /// update with an upsert): what became of each.
    async fn bulk_into(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        operations: &[&Operation],
        now: i64,
        origin: &Origin,
        all_or_nothing: Option<AllOrNothing>,
    ) -> Result<Vec<Applied>> {
        self.authorize_write(principal, name)?;
        // The records, read once, before any permit. An update's record is its upsert; its
        // partial record is planned for columns beside the records.
        let mut ids = Vec::with_capacity(operations.len());
        let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(operations.len());
        let mut documents: Vec<Option<Document>> = Vec::with_capacity(operations.len());
        let mut updates: Vec<Option<Update>> = Vec::with_capacity(operations.len());
        let mut partials: Vec<Option<Document>> = Vec::with_capacity(operations.len());
        let mut generated = vec![false; operations.len()];
        for (k, operation) in operations.iter().enumerate() {
            let id = operation.id.clone().unwrap_or_else(|| {
                generated[k] =
                    matches!(operation.action, bulk::Action::Index | bulk::Action::Create);
                documents::generate_id()
            });
            let mut update = None;
            let mut partial = None;
            let (document, outcome) = match (operation.action, &operation.record) {
                (bulk::Action::Update, _) if operation.id.is_none() => (
                    None,
                    Some(Outcome::Failed(Refusal::new(
                        "action_request_validation_exception",
                        400,
                        "Validation Failed: 1: id is missing;",
                    ))),
                ),
                (bulk::Action::Update, Some(record)) => match read_update(record, &id, now) {
                    Ok((read, doc, created)) => {
                        update = Some(read);
                        partial = Some(doc);
                        (created, None)
                    }
                    Err(refusal) => (None, Some(Outcome::Failed(refusal))),
                },
                (bulk::Action::Delete, _) if operation.id.is_none() => (
                    None,
                    Some(Outcome::Failed(Refusal::new(
                        "action_request_validation_exception",
                        400,
                        "Validation Failed: 1: id is missing;",
                    ))),
                ),
                (bulk::Action::Delete, _) => (None, None),
                (_, Some(record)) => match Document::parse(record, id.clone(), now) {
                    Ok(document) => (Some(document), None),
                    Err(refusal) => (None, Some(Outcome::Failed(refusal))),
                },
                (_, None) => (
                    None,
                    Some(Outcome::Failed(Refusal::parsing(
                        "the record line is missing",
                    ))),
                ),
            };
            ids.push(id);
            documents.push(document);
            outcomes.push(outcome);
            updates.push(update);
            partials.push(partial);
        }
        let writes = documents.iter().filter(|d| d.is_some()).count() as u64;
        let account = &principal.account;
        let (runtime, mut def) = match writes {
            0 => self.dataset(account, name).await?,
            _ => self.records_dataset(principal, name, origin).await?,
        };
        if def.metrics {
            return Err(holds_metrics(name));
        }
        // A geo point written as an object was flattened like any object: gather it again.
        // Values of fields declared `ignore_malformed` that do not fit are left out.
        let formats = columns::Formats::of(&def);
        for document in documents.iter_mut().chain(partials.iter_mut()).flatten() {
            document.gather_points(&def.columns);
            columns::drop_malformed(&def.columns, &formats, document);
        }
        // An update writes its record again.
        let rewrites = updates.iter().filter(|u| u.is_some()).count() as u64;
        let _reservation = match writes + rewrites {
            0 => None,
            rows => {
                // At most one vector a record, in a dataset with a vector field.
                let vectors = if def.vector_column.is_some() { rows } else { 0 };
                Some(self.reserve(account, Counts { rows, vectors }).await?)
            }
        };
        // Planning again because the columns changed meanwhile means another request grew them:
        // progress, so this request keeps trying as long as it would wait for a busy writer.
        let deadline = tokio::time::Instant::now() + BULK_WAIT;
        while tokio::time::Instant::now() < deadline {
            // An empty dataset may have taken samples meanwhile.
            if def.metrics {
                return Err(holds_metrics(name));
            }
            // Plan the columns (of the records, then of the updates' partial records); grow
            // them first when the records need it.
            let candidates: Vec<Option<&Document>> = documents
                .iter()
                .zip(&outcomes)
                .chain(partials.iter().zip(&outcomes))
                .map(|(d, o)| d.as_ref().filter(|_| o.is_none()))
                .collect();
            let (columns, refusals) =
                columns::grow(&def.columns, &columns::Formats::of(&def), &candidates);
            let count = operations.len();
            for (k, refusal) in refusals.into_iter().enumerate() {
                if let Some(refusal) = refusal {
                    outcomes[k % count] = Some(Outcome::Failed(refusal));
                }
            }
            if columns != def.columns {
                self.grow_dataset(&runtime, &def, &columns, origin, BULK_WAIT)
                    .await?;
                def = self.dataset(account, name).await?.1;
                continue;
            }
            let candidates: Vec<Option<&Document>> = documents
                .iter()
                .zip(&outcomes)
                .map(|(d, o)| d.as_ref().filter(|_| o.is_none()))
                .collect();
            let (batch, placed) = columns::rows(&def, &candidates)
                .map_err(|refusal| Error::BadRequest(refusal.reason))?;
            let table = self.table_runtime(&runtime, &def).await?;
            let Some(mut permit) = dataset_permit(&table, name).await? else {
                continue;
            };
            if let Some(current) = self.columns_changed(&runtime, &table, &def)? {
                def = current;
                continue;
            }
            let snapshot = permit.snapshot();
            let request = Request {
                operations,
                ids: &ids,
                generated: &generated,
                documents: &documents,
                updates: &updates,
                now,
            };
            let stored = stored_sources(&request, &outcomes, &snapshot).await?;
            // An updated record that does not fit the columns (they changed meanwhile) fails
            // its item; the request is resolved again without it.
            let mut decided = outcomes.clone();
            let (resolved, batch) = loop {
                let resolved = resolve(&request, &placed, &decided, &stored, &def, &snapshot)?;
                let merged: Vec<Option<&Document>> =
                    resolved.merged.iter().map(|(_, d)| Some(d)).collect();
                let (extra, fits) = columns::rows(&def, &merged)
                    .map_err(|refusal| Error::BadRequest(refusal.reason))?;
                match fits
                    .into_iter()
                    .zip(&resolved.merged)
                    .find(|(f, _)| f.is_err())
                {
                    Some((Err(refusal), (k, _))) => {
                        decided[*k] = Some(Outcome::Failed(
                            refusal.unwrap_or_else(|| Refusal::parsing("not applied")),
                        ));
                    }
                    _ => {
                        let batch =
                            arrow::compute::concat_batches(&batch.schema(), [&batch, &extra])
                                .map_err(|e| Error::Internal(e.to_string()))?;
                        break (resolved, batch);
                    }
                }
            };
            // All or nothing: an operation that failed refuses them all, and nothing is written.
            if let Some(rule) = all_or_nothing
                && let Some(refusal) = resolved.outcomes.iter().flatten().find_map(|o| match o {
                    Outcome::Failed(r) if !(rule.conflicts_skip && r.status == 409) => Some(r),
                    _ => None,
                })
            {
                return Err(Error::BadRequest(format!(
                    "refused whole, nothing written: [{}] {}",
                    refusal.kind, refusal.reason
                )));
            }
            let written = self
                .commit(&mut permit, &runtime, &def, batch, &resolved, origin)
                .await;
            match written {
                Ok(()) => {
                    let outcomes = resolved.outcomes.into_iter().map(|o| {
                        o.unwrap_or_else(|| Outcome::Failed(Refusal::parsing("not applied")))
                    });
                    return Ok(ids
                        .into_iter()
                        .zip(outcomes)
                        .zip(resolved.gets)
                        .map(|((id, outcome), get)| (id, outcome, get))
                        .collect());
                }
                // Another leader of the partition took it over meanwhile (on this node, the
                // runtime that replaced this one): the event is void or was never written. Again.
                Err(Error::Unavailable(_)) => continue,
                Err(error) => return Err(error),
            }
        }
        Err(Error::Busy(format!(
            "the columns of dataset {name:?} kept changing under this request for {}s; retry it",
            BULK_WAIT.as_secs()
        )))
    }

    /// Writes what `resolved` comes to, as one event (ADR 2): a `RowsAppended` of the records
    /// of `batch` kept that also tombstones the records replaced or deleted; a `RowsDeleted`
    /// when nothing is added.
    async fn commit(
        &self,
        permit: &mut Permit<'_, Arc<TableSnapshot>>,
        runtime: &DatabaseGuard,
        def: &TableDef,
        batch: RecordBatch,
        resolved: &Resolved,
        origin: &Origin,
    ) -> Result<()> {
        let tombstoned: Vec<u64> = resolved.tombstones.iter().collect();
        let tombstoned_vectors = vectors_among(&permit.snapshot(), &resolved.tombstones);
        let kept = resolved.keep.iter().filter(|k| **k).count();
        let body = if kept > 0 {
            let batch = match kept == batch.num_rows() {
                true => batch,
                false => {
                    let mask = BooleanArray::from(resolved.keep.clone());
                    arrow::compute::filter_record_batch(&batch, &mask)
                        .map_err(|e| Error::Internal(e.to_string()))?
                }
            };
            Body::RowsAppended(RowsAppended {
                table_id: def.id.clone(),
                first_row_id: permit.snapshot().next_row_id,
                row_count: kept as u64,
                arrow_ipc: table_rows::encode_ipc(&batch)?.into(),
                vector_count: strata_projections::table::count_vectors(
                    &batch,
                    def.vector_column.as_deref(),
                ),
                tombstoned_row_ids: tombstoned,
                tombstoned_vector_count: tombstoned_vectors,
            })
        } else if !tombstoned.is_empty() {
            Body::RowsDeleted(RowsDeleted {
                table_id: def.id.clone(),
                row_ids: tombstoned,
                vector_count: tombstoned_vectors,
            })
        } else {
            return Ok(());
        };
        let after = permit.write(body, origin).await?;
        self.record_usage(&runtime.account, &runtime.id, &def.id, Counts::of(&after));
        Ok(())
    }
}

impl Engine {
    /// Dataset `name`, to write records to: created when it does not exist (as Elasticsearch
    /// creates an index on its first write), given the kind of records when it is empty; a
    /// dataset that holds samples is refused.
    pub(in crate::engine) async fn records_dataset(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        origin: &Origin,
    ) -> Result<(DatabaseGuard, Arc<TableDef>)> {
        let account = &principal.account;
        let (runtime, def) = match self.dataset(account, name).await {
            Ok(found) => found,
            Err(Error::DatasetNotFound(_)) => {
                match self
                    .make_dataset(principal, name, Default::default(), origin, BULK_WAIT)
                    .await
                {
                    Ok(()) | Err(Error::DatasetExists(_)) => {}
                    Err(error) => return Err(error),
                }
                self.dataset(account, name).await?
            }
            Err(error) => return Err(error),
        };
        if !def.metrics {
            return Ok((runtime, def));
        }
        // A dataset never written yet takes records as well as samples.
        let retyped = self
            .retype_empty(&runtime, &def, Kind::Records, origin, BULK_WAIT)
            .await?;
        let (runtime, def) = self.dataset(account, name).await?;
        if !retyped || def.metrics {
            return Err(holds_metrics(name));
        }
        Ok((runtime, def))
    }
}

impl Engine {
    /// Once a write to dataset `def` holds the permit of `table` (its runtime): the dataset's
    /// current definition when its columns changed since the write planned its rows (grown by
    /// another request; or the runtime was opened before they grew, and its replacement is
    /// opening alongside), to plan again; `None` when the rows may be written. An error when
    /// the database or the dataset is gone.
    pub(in crate::engine) fn columns_changed(
        &self,
        runtime: &DatabaseGuard,
        table: &TableRuntime,
        def: &TableDef,
    ) -> Result<Option<Arc<TableDef>>> {
        self.still_ready(runtime)?;
        match runtime.catalog.snapshot().tables.get(&def.name) {
            Some(current) if current.id == def.id => {
                let changed = table.retired()
                    || current.columns != def.columns
                    || table.def.columns != current.columns;
                Ok(changed.then(|| current.clone()))
            }
            _ => Err(Error::DatasetNotFound(def.name.clone())),
        }
    }
}

/// The refusal of records written to a metrics dataset.
fn holds_metrics(name: &str) -> Error {
    Error::BadRequest(format!(
        "dataset {name:?} holds metrics: write its samples to POST /{name}/metrics or by remote write"
    ))
}

/// The permit of dataset `name`'s leader, waiting at most [`BULK_WAIT`] for writes in flight;
/// `None` when the leader could not take the partition because another took it at the same
/// moment (on this node: a runtime with grown columns replacing `table`): plan again.
pub(in crate::engine) async fn dataset_permit<'a>(
    table: &'a TableRuntime,
    name: &str,
) -> Result<Option<Permit<'a, Arc<TableSnapshot>>>> {
    if !table.handle().wait_for_room(BULK_WAIT).await {
        return Err(Error::Busy(format!(
            "dataset {name:?} takes records in faster than it writes them to segments; retry \
             after the Retry-After interval"
        )));
    }
    match table.leader.try_permit(BULK_WAIT).await {
        Err(Error::Unavailable(_)) => Ok(None),
        Err(error) => Err(error),
        Ok(Some(permit)) => Ok(Some(permit)),
        Ok(None) => Err(Error::Busy(format!(
            "dataset {name:?} is busy with other writes; retry after the Retry-After interval"
        ))),
    }
}

/// How many of `ids` hold a vector in `snapshot`.
pub(in crate::engine) fn vectors_among(snapshot: &TableSnapshot, ids: &RoaringTreemap) -> u64 {
    let memtable = snapshot.memtable.iter().map(|m| (&*m.vectors, &*m.deleted));
    let segments = snapshot.segments.iter().map(|s| (&*s.vectors, &*s.deleted));
    memtable
        .chain(segments)
        .map(|(vectors, deleted)| ((vectors - deleted) & ids).len())
        .sum()
}

/// How far a delete by query goes: at most `max_docs` of the matching records (the oldest
/// writes first), tombstoned `batch` records to an event (all in one event when `None`), in
/// `slices` parts (by row id) when above 1, each with its own batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeleteLimits {
    pub max_docs: Option<u64>,
    pub batch: Option<usize>,
    pub slices: usize,
}

/// What a delete by query (or one slice of it) did: records deleted, in how many events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deleted {
    pub deleted: u64,
    pub batches: u64,
    /// Each slice's part, when the request was sliced.
    pub slices: Vec<Deleted>,
}

impl Engine {
    /// Deletes, for good, the records of dataset `name` that the Query DSL `query` matches
    /// (within `limits`). Matched and tombstoned in one turn of the dataset's leader.
    pub async fn delete_by_query(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        query: &serde_json::Value,
        limits: DeleteLimits,
        origin: &Origin,
    ) -> Result<Deleted> {
        self.authorize_write(principal, name)?;
        // It matches only what the user may read.
        let view = self.read_one(principal, Action::RecordRead, name).await?;
        let (runtime, def) = self.dataset(&principal.account, name).await?;
        if def.metrics {
            return Err(Error::BadRequest(format!(
                "dataset {name:?} holds metrics, not documents: a query cannot select its samples"
            )));
        }
        let (compiled, ..) = crate::engine::query_dsl::prepare(&view, query).await?;
        let deadline = tokio::time::Instant::now() + BULK_WAIT;
        while tokio::time::Instant::now() < deadline {
            let table = self.table_runtime(&runtime, &def).await?;
            let Some(mut permit) = dataset_permit(&table, name).await? else {
                continue;
            };
            self.still_ready(&runtime)?;
            let snapshot = permit.snapshot();
            let mut matched = {
                let snapshot = snapshot.clone();
                let compiled = compiled.box_clone();
                crate::engine::blocking(move || snapshot.matching_rows(compiled.as_ref())).await??
            };
            if let Some(max) = limits.max_docs
                && matched.len() > max
            {
                matched = matched.iter().take(max as usize).collect();
            }
            let rows: Vec<u64> = matched.iter().collect();
            let slices = limits.slices.max(1);
            let mut parts: Vec<Vec<u64>> = vec![Vec::new(); slices];
            for row in &rows {
                parts[(row % slices as u64) as usize].push(*row);
            }
            let batch = limits.batch.unwrap_or(rows.len()).max(1);
            let mut chunks: Vec<(usize, &[u64])> = Vec::new();
            for (slice, part) in parts.iter().enumerate() {
                chunks.extend(part.chunks(batch).map(|chunk| (slice, chunk)));
            }
            let mut done = Deleted::default();
            let mut sliced = vec![Deleted::default(); slices];
            for (slice, chunk) in chunks {
                let ids: RoaringTreemap = chunk.iter().copied().collect();
                let body = Body::RowsDeleted(RowsDeleted {
                    table_id: def.id.clone(),
                    row_ids: chunk.to_vec(),
                    vector_count: vectors_among(&snapshot, &ids),
                });
                match permit.write(body, origin).await {
                    Ok(after) => {
                        self.record_usage(
                            &runtime.account,
                            &runtime.id,
                            &def.id,
                            Counts::of(&after),
                        );
                        done.deleted += chunk.len() as u64;
                        done.batches += 1;
                        sliced[slice].deleted += chunk.len() as u64;
                        sliced[slice].batches += 1;
                    }
                    // Nothing written yet: match again under a new permit.
                    Err(Error::Unavailable(_)) if done.batches == 0 => break,
                    Err(error) if done.batches == 0 => return Err(error),
                    Err(error) => {
                        return Err(Error::Unavailable(format!(
                            "the delete by query stopped after {} of {} records: {error}",
                            done.deleted,
                            rows.len()
                        )));
                    }
                }
            }
            if done.batches > 0 || rows.is_empty() {
                if slices > 1 {
                    done.slices = sliced;
                }
                return Ok(done);
            }
        }
        Err(Error::Busy(format!(
            "dataset {name:?} stayed busy for {}s; retry",
            BULK_WAIT.as_secs()
        )))
    }
}

/// An enrich policy: records of the target gain `enrich_fields` from the record of `source`
/// whose `match_field` equals theirs.
#[derive(Clone, Debug)]
pub struct EnrichPolicy {
    /// The dataset enrich values come from; `None`: the target itself.
    pub source: Option<String>,
    pub match_field: String,
    pub enrich_fields: Vec<String>,
}

/// A match value as a key: strings as they are, other values as their JSON text.
fn match_key(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Engine {
    /// Every live row of `snapshot` (those of `rows` alone, when given), in write order.
    async fn all_rows(
        &self,
        snapshot: Arc<TableSnapshot>,
        rows: Option<Arc<strata_projections::table::RowsWithin>>,
    ) -> Result<Vec<RecordBatch>> {
        let ctx = crate::query::session(&self.queries);
        let mut scan = strata_projections::table::TableScan::new(snapshot);
        if let Some(rows) = rows {
            scan = scan.within(rows);
        }
        ctx.register_table("t", Arc::new(scan))
            .map_err(crate::query::classify)?;
        let statement = crate::query::parse(&ctx, "SELECT * FROM t ORDER BY _row_id")?;
        Ok(crate::query::run(&ctx, statement).await?.batches)
    }

    /// POST /{dataset}/enrich_dataset: sets `policy.enrich_fields` on every record of `target`
    /// whose `match_field` equals that of a record of the source (the first such record, in
    /// write order); how many records changed. Each change is an index of the whole record.
    pub async fn enrich_dataset(
        &self,
        principal: &PlatformPrincipal,
        target: &str,
        policy: &EnrichPolicy,
        origin: &Origin,
    ) -> Result<u64> {
        use crate::documents::source::{SourceFilter, insert, json_value, record};
        let source_name = policy.source.as_deref().unwrap_or(target);
        self.authorize_write(principal, target)?;
        // It copies only what the user may read, as it is (a masked field is not there).
        let source = self
            .read_one(principal, Action::RecordRead, source_name)
            .await?;
        if policy.enrich_fields.is_empty() {
            return Err(Error::BadRequest(
                "the enrich policy names no enrich_fields".to_owned(),
            ));
        }
        let source_rows = self
            .all_rows(source.snapshot.clone(), source.visible_rows().await?)
            .await?;
        for field in std::iter::once(&policy.match_field).chain(&policy.enrich_fields) {
            let copied = source.fields.shows(field) == Some(None);
            if !copied || !source.def.columns.iter().any(|c| &c.name == field) {
                return Err(Error::BadRequest(format!(
                    "the source dataset {source_name:?} has no field {field:?}"
                )));
            }
        }
        // The values of the first source record of each match value.
        let mut values: HashMap<String, Vec<(String, serde_json::Value)>> = HashMap::new();
        for batch in &source_rows {
            let Some(keys) = batch.column_by_name(&policy.match_field) else {
                continue;
            };
            for row in 0..batch.num_rows() {
                let Some(key) = json_value(keys.as_ref(), row) else {
                    continue;
                };
                values.entry(match_key(&key)).or_insert_with(|| {
                    policy
                        .enrich_fields
                        .iter()
                        .filter_map(|f| {
                            let column = batch.column_by_name(f)?;
                            Some((f.clone(), json_value(column.as_ref(), row)?))
                        })
                        .collect()
                });
            }
        }
        // The target's records are written again whole.
        let (target_def, snapshot) = self.dataset_snapshot(&principal.account, target).await?;
        let target_rows = self.all_rows(snapshot, None).await?;
        let formats = crate::documents::columns::Formats::of(&target_def);
        let mut operations = Vec::new();
        for batch in &target_rows {
            let Some(keys) = batch.column_by_name(&policy.match_field) else {
                continue;
            };
            for row in 0..batch.num_rows() {
                let Some(found) =
                    json_value(keys.as_ref(), row).and_then(|key| values.get(&match_key(&key)))
                else {
                    continue;
                };
                let unchanged = found.iter().all(|(field, value)| {
                    batch
                        .column_by_name(field)
                        .and_then(|c| json_value(c.as_ref(), row))
                        .is_some_and(|current| &current == value)
                });
                if unchanged {
                    continue;
                }
                let (id, source) = record(batch, row, &SourceFilter::default(), &formats);
                let serde_json::Value::Object(mut source) = source else {
                    continue;
                };
                for (field, value) in found {
                    remove_path(&mut source, field);
                    insert(&mut source, field, value.clone());
                }
                operations.push(bulk::Operation {
                    action: bulk::Action::Index,
                    index: None,
                    id,
                    record: Some(
                        serde_json::to_vec(&source)
                            .map_err(|e| Error::Internal(e.to_string()))?
                            .into(),
                    ),
                    refusal: None,
                    require_alias: None,
                    source: None,
                });
            }
        }
        let items = self.bulk(principal, Some(target), operations, origin).await;
        if let Some(BulkItem {
            outcome: Outcome::Failed(refusal),
            ..
        }) = items
            .iter()
            .find(|item| matches!(item.outcome, Outcome::Failed(_)))
        {
            return Err(Error::Internal(format!(
                "enriching a record failed: {}",
                refusal.reason
            )));
        }
        Ok(items.len() as u64)
    }
}

/// Removes the dotted `path` from a nested object (before it is set again).
fn remove_path(object: &mut serde_json::Map<String, serde_json::Value>, path: &str) {
    if object.remove(path).is_some() {
        return;
    }
    if let Some((head, rest)) = path.split_once('.')
        && let Some(serde_json::Value::Object(inner)) = object.get_mut(head)
    {
        remove_path(inner, rest);
    }
}
