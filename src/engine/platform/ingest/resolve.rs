//! How a dataset's operations of one bulk request come out, applied in request order under the
//! dataset leader's permit: each `_id` resolved against the live records and the operations
//! before it (create of a present id is a 409 item, index replaces, delete of an absent one is a
//! 404, update merges its partial record into the stored or pending one, or creates its upsert).

use std::collections::HashMap;

use roaring::RoaringTreemap;
use serde_json::{Map, Value};
use strata_projections::{catalog::TableDef, table::TableSnapshot};

use super::{Outcome, document_missing};
use crate::{
    documents::{
        Document, ID_FIELD, Refusal,
        bulk::{self, Operation},
        columns::{self, Formats},
        source::{self, SourceFilter},
        update::{self, Update},
    },
    error::Result,
};

/// A dataset's operations of a request, read.
pub(super) struct Request<'a> {
    pub operations: &'a [&'a Operation],
    /// Each operation's `_id`, given or generated.
    pub ids: &'a [String],
    /// Whether the id was generated (it can name no stored record).
    pub generated: &'a [bool],
    /// Each operation's record (an update's: its upsert), in the request's batch.
    pub documents: &'a [Option<Document>],
    pub updates: &'a [Option<Update>],
    /// The upload time, Unix milliseconds.
    pub now: i64,
}

/// The resolution of one `_id` while a request's operations are applied in order.
enum Slot {
    /// Live rows of the dataset that hold it.
    Stored(RoaringTreemap),
    /// A record of this request, by its row: in the request's batch, or (past its end) among
    /// the updated records.
    Pending(usize),
    Absent,
}

/// What applying a dataset's operations in request order comes to.
pub(super) struct Resolved {
    /// Each operation's outcome.
    pub outcomes: Vec<Option<Outcome>>,
    /// Each update's record after it, as its `_source` asks.
    pub gets: Vec<Option<Value>>,
    /// Which rows are written: those of the request's batch, then those of `merged`.
    pub keep: Vec<bool>,
    /// Updated records (by their operation), written after the request's batch.
    pub merged: Vec<(usize, Document)>,
    /// Live rows replaced or deleted.
    pub tombstones: RoaringTreemap,
}

/// The live rows of `snapshot` whose `_id` is `id`.
fn lookup(snapshot: &TableSnapshot, id: &str) -> Result<Slot> {
    let rows = snapshot.exact_match(ID_FIELD, id, &None)?;
    Ok(match rows.is_empty() {
        true => Slot::Absent,
        false => Slot::Stored(rows),
    })
}

/// Reads an update's record line: the update, its partial record (for the columns it needs),
/// and the record to create when there is none to update.
pub(in crate::engine) fn read_update(
    record: &[u8],
    id: &str,
    now: i64,
) -> std::result::Result<(Update, Document, Option<Document>), Refusal> {
    let update = Update::parse(record)?;
    let doc = update.doc.clone().unwrap_or_default();
    let partial = Document::from_object(doc, id.to_owned(), now)?;
    let created = match update.created() {
        Some(object) => Some(Document::from_object(object.clone(), id.to_owned(), now)?),
        None => None,
    };
    Ok((update, partial, created))
}

/// The stored records the request's updates (those not yet decided) update, by `_id`, as JSON
/// objects.
pub(super) async fn stored_sources(
    request: &Request<'_>,
    outcomes: &[Option<Outcome>],
    snapshot: &TableSnapshot,
) -> Result<HashMap<String, Map<String, Value>>> {
    let mut rows: Vec<u64> = Vec::new();
    for (k, update) in request.updates.iter().enumerate() {
        if update.is_none() || outcomes[k].is_some() {
            continue;
        }
        if let Slot::Stored(found) = lookup(snapshot, &request.ids[k])? {
            rows.extend(found.iter().take(1));
        }
    }
    if rows.is_empty() {
        return Ok(HashMap::new());
    }
    rows.sort_unstable();
    rows.dedup();
    let batch = snapshot.rows_by_id(&rows, None).await?;
    let formats = Formats::of(&snapshot.table);
    let mut stored = HashMap::new();
    for row in 0..batch.num_rows() {
        if let (Some(id), Value::Object(record)) =
            source::record(&batch, row, &SourceFilter::default(), &formats)
        {
            stored.insert(id, record);
        }
    }
    Ok(stored)
}

/// Resolves each operation's `_id` against the live records of `snapshot` and the operations
/// before it. `decided` holds the operations already decided (failed); `placed`, each record's
/// row in the request's batch; `stored`, the records updates update.
pub(super) fn resolve(
    request: &Request<'_>,
    placed: &[columns::Placement],
    decided: &[Option<Outcome>],
    stored: &HashMap<String, Map<String, Value>>,
    table: &TableDef,
    snapshot: &TableSnapshot,
) -> Result<Resolved> {
    let mut outcomes = decided.to_vec();
    let mut gets: Vec<Option<Value>> = vec![None; decided.len()];
    let mut slots: HashMap<&str, Slot> = HashMap::new();
    let rows = placed.iter().filter(|p| p.is_ok()).count();
    // The request's records, by their row in its batch.
    let mut records: Vec<Option<&Document>> = vec![None; rows];
    for (placement, document) in placed.iter().zip(request.documents) {
        if let Ok(row) = placement {
            records[*row] = document.as_ref();
        }
    }
    let mut keep = vec![false; rows];
    let mut merged: Vec<(usize, Document)> = Vec::new();
    let mut tombstones = RoaringTreemap::new();
    for (k, operation) in request.operations.iter().enumerate() {
        if outcomes[k].is_some() {
            continue;
        }
        let row = match &placed[k] {
            Ok(row) => Some(*row),
            Err(Some(refusal)) => {
                outcomes[k] = Some(Outcome::Failed(refusal.clone()));
                continue;
            }
            Err(None) => None,
        };
        let id = request.ids[k].as_str();
        let slot = match slots.remove(id) {
            Some(slot) => slot,
            None if request.generated[k] => Slot::Absent,
            None => lookup(snapshot, id)?,
        };
        let (next, outcome) = match (operation.action, slot, row) {
            (bulk::Action::Update, slot, row) => {
                // The record as it is now.
                let current = match &slot {
                    Slot::Stored(_) => stored.get(id).cloned(),
                    Slot::Pending(at) if *at < rows => records[*at].map(Document::to_source),
                    Slot::Pending(at) => Some(merged[*at - rows].1.to_source()),
                    Slot::Absent => None,
                };
                let update = request.updates[k].as_ref();
                let show = |record: &Map<String, Value>| -> Option<Value> {
                    let asked = update
                        .and_then(|u| u.source.as_ref())
                        .or(operation.source.as_ref())?;
                    let filter = SourceFilter::parse(Some(asked)).ok()?;
                    source::filtered(record, &filter)
                };
                match (current, update) {
                    (None, _) => match (slot, row) {
                        // Created from its upsert.
                        (Slot::Absent, Some(row)) => {
                            keep[row] = true;
                            gets[k] = records[row].map(Document::to_source).and_then(|r| show(&r));
                            (Slot::Pending(row), Outcome::done("created", 201))
                        }
                        (slot, _) => (slot, Outcome::Failed(document_missing(id))),
                    },
                    (Some(mut record), Some(update)) => {
                        let doc = update.doc.clone().unwrap_or_default();
                        let changed = update::merge(&mut record, &doc);
                        gets[k] = show(&record);
                        if !changed && update.detect_noop {
                            (slot, Outcome::done("noop", 200))
                        } else {
                            match Document::from_object(record, id.to_owned(), request.now) {
                                Err(refusal) => (slot, Outcome::Failed(refusal)),
                                Ok(mut document) => {
                                    document.gather_points(&table.columns);
                                    columns::drop_malformed(
                                        &table.columns,
                                        &Formats::of(table),
                                        &mut document,
                                    );
                                    match slot {
                                        Slot::Stored(rows) => tombstones |= rows,
                                        Slot::Pending(previous) => keep[previous] = false,
                                        Slot::Absent => {}
                                    }
                                    merged.push((k, document));
                                    keep.push(true);
                                    (Slot::Pending(keep.len() - 1), Outcome::done("updated", 200))
                                }
                            }
                        }
                    }
                    (Some(_), None) => (
                        slot,
                        Outcome::Failed(Refusal::parsing("the update could not be read")),
                    ),
                }
            }
            (bulk::Action::Create, slot @ (Slot::Stored(_) | Slot::Pending(_)), _) => (
                slot,
                Outcome::Failed(Refusal::new(
                    "version_conflict_engine_exception",
                    409,
                    format!(
                        "[{id}]: version conflict, document already exists (current version [1])"
                    ),
                )),
            ),
            (bulk::Action::Create | bulk::Action::Index, slot, Some(row)) => {
                let (result, status) = match slot {
                    Slot::Stored(rows) => {
                        tombstones |= rows;
                        ("updated", 200)
                    }
                    Slot::Pending(previous) => {
                        keep[previous] = false;
                        ("updated", 200)
                    }
                    Slot::Absent => ("created", 201),
                };
                keep[row] = true;
                (Slot::Pending(row), Outcome::done(result, status))
            }
            (bulk::Action::Delete, Slot::Stored(rows), _) => {
                tombstones |= rows;
                (Slot::Absent, Outcome::done("deleted", 200))
            }
            (bulk::Action::Delete, Slot::Pending(previous), _) => {
                keep[previous] = false;
                (Slot::Absent, Outcome::done("deleted", 200))
            }
            (bulk::Action::Delete, Slot::Absent, _) => {
                (Slot::Absent, Outcome::done("not_found", 404))
            }
            (_, slot, _) => (
                slot,
                Outcome::Failed(Refusal::parsing("the record could not be read")),
            ),
        };
        slots.insert(id, next);
        outcomes[k] = Some(outcome);
    }
    Ok(Resolved {
        outcomes,
        gets,
        keep,
        merged,
        tombstones,
    })
}
