//! Records written as Arrow record batches: what a connector or an import job writes, its
//! typed columns kept, with no JSON on the way (bulk reads one JSON document per record).
//!
//! Each column of a batch becomes a column of the dataset: integers `int64`, floats `float64`,
//! decimals `decimal(P,S)`, dates and timestamps `timestamp[ms,UTC]` (Elasticsearch's `date`,
//! milliseconds), booleans `bool`, strings `utf8`, lists lists of those, and a struct's fields
//! dotted names (`address.city`), as bulk flattens an object. A column `_id` names the records:
//! a record of that id is replaced, as an index action replaces it; without it, ids are made.
//!
//! New columns grow the dataset first, as a bulk request's new fields do. A column whose type
//! differs from the dataset's widens as bulk widens it (an `int64` column meeting floats becomes
//! `float64`, a number column meeting strings `utf8`); a value that does not fit is refused
//! with the column's name. A batch is written as one event by the dataset's leader, or not at
//! all.

use std::{collections::HashSet, sync::Arc};

use arrow::{
    array::{Array, ArrayRef, AsArray, ListArray, RecordBatch, StringArray, new_null_array},
    buffer::OffsetBuffer,
    compute::{CastOptions, cast_with_options},
    datatypes::{DataType, Field, TimeUnit},
    util::display::FormatOptions,
};
use roaring::RoaringTreemap;
use serde_json::json;
use strata_log::{envelope::Body, event::RowsAppended};
use strata_projections::{
    catalog::{ColumnDef, TableDef},
    schema::{ColumnType, TimestampUnit},
    table::{TableSnapshot, rows as table_rows},
};

use crate::{
    documents::{self, ID_FIELD, TIMESTAMP_FIELD},
    engine::{
        Engine, Origin, PlatformPrincipal, blocking,
        datasets::check_name,
        ingest::{BULK_WAIT, dataset_permit, vectors_among},
        query_dsl::compile,
        quota::Counts,
    },
    error::{Error, Result},
};

/// A dataset's date columns: milliseconds since the epoch, UTC.
const DATE: ColumnType = ColumnType::Timestamp {
    unit: TimestampUnit::Milliseconds,
    utc: true,
};

/// One column of a batch as the dataset takes it: its name, the type it asks for, its values.
struct Incoming {
    name: String,
    wanted: ColumnType,
    values: ArrayRef,
}

fn refused(name: &str, reason: impl std::fmt::Display) -> Error {
    Error::BadRequest(format!("column {name:?}: {reason}"))
}

/// The dataset column type of Arrow values of `data_type` (in column `name`).
fn wanted(name: &str, data_type: &DataType) -> Result<ColumnType> {
    use DataType::*;
    Ok(match data_type {
        Boolean => ColumnType::Bool,
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => ColumnType::Int64,
        Float16 | Float32 | Float64 => ColumnType::Float64,
        Decimal128(precision, scale) | Decimal256(precision, scale)
            if *precision <= 38 && *scale >= 0 =>
        {
            ColumnType::Decimal {
                precision: *precision,
                scale: *scale,
            }
        }
        Utf8 | LargeUtf8 | Utf8View => ColumnType::Utf8,
        Dictionary(_, value) if matches!(**value, Utf8 | LargeUtf8 | Utf8View) => ColumnType::Utf8,
        Date32 | Date64 | Timestamp(..) => DATE,
        Struct(fields) if is_point(fields) => ColumnType::GeoPoint,
        List(item) | LargeList(item) | FixedSizeList(item, _) => {
            match wanted(name, item.data_type())? {
                ColumnType::List(_) => return Err(refused(name, "a list of lists has no column")),
                item => ColumnType::List(Box::new(item)),
            }
        }
        other => {
            return Err(refused(
                name,
                format!(
                    "{other} values have no dataset column (numbers, decimals, dates, booleans, strings and lists of them have)"
                ),
            ));
        }
    })
}

/// Whether a struct's fields are a point's: `lat` and `lon`, numbers.
fn is_point(fields: &arrow::datatypes::Fields) -> bool {
    let mut names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
    names.sort_unstable();
    names == ["lat", "lon"] && fields.iter().all(|f| f.data_type().is_floating())
}

/// The columns of `batch` by dotted name, structs flattened (but points), `_id` apart.
fn incoming(batch: &RecordBatch) -> Result<(Vec<Incoming>, Option<ArrayRef>)> {
    let mut out = Vec::new();
    let mut id = None;
    let mut pending: Vec<(String, ArrayRef)> = batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, values)| (field.name().clone(), values.clone()))
        .collect();
    while let Some((name, values)) = pending.pop() {
        if name == ID_FIELD {
            id = Some(values);
            continue;
        }
        check_name_of_field(&name)?;
        match values.data_type() {
            DataType::Struct(fields) if !is_point(fields) => {
                let parent = values.as_struct();
                for (field, child) in fields.iter().zip(parent.columns()) {
                    // A null struct makes its fields null.
                    let child = match parent.nulls() {
                        Some(nulls) if nulls.null_count() > 0 => {
                            let absent = arrow::array::BooleanArray::new(!nulls.inner(), None);
                            arrow::compute::nullif(child.as_ref(), &absent)
                                .map_err(|e| refused(&name, e))?
                        }
                        _ => child.clone(),
                    };
                    pending.push((format!("{name}.{}", field.name()), child));
                }
            }
            DataType::Null => {}
            data_type => out.push(Incoming {
                wanted: wanted(&name, data_type)?,
                name,
                values,
            }),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((out, id))
}

/// A field name a record may have: not empty, and not one of the metadata fields' (`_id`
/// apart, they begin with `_`).
fn check_name_of_field(name: &str) -> Result<()> {
    if name.is_empty() || name.starts_with('_') {
        return Err(refused(
            name,
            "a field name may not be empty or begin with _",
        ));
    }
    Ok(())
}

/// The type a `current` column takes to hold `incoming` values too; `None` when it keeps its
/// own.
fn widened(current: &ColumnType, incoming: &ColumnType) -> Option<ColumnType> {
    use ColumnType::*;
    match (current, incoming) {
        (a, b) if a == b => None,
        // A vector or a point column keeps its type: its values are read as such, or refused.
        (Vector { .. } | GeoPoint, _) => None,
        // A column of one value meeting lists: a list of its type, widened to fit.
        (List(item), List(other)) => widened(item, other).map(|t| List(Box::new(t))),
        (List(item), other) => widened(item, other).map(|t| List(Box::new(t))),
        (one, List(other)) => Some(List(Box::new(
            widened(one, other).unwrap_or_else(|| one.clone()),
        ))),
        (Float64, Int64 | Decimal { .. }) => None,
        (Decimal { scale, .. }, Int64) if *scale == 0 => None,
        (Int64 | Decimal { .. }, Float64 | Int64 | Decimal { .. }) => Some(Float64),
        (Utf8, _) => None,
        (_, _) => Some(Utf8),
    }
}

/// `values` as the Arrow type of a `column` column, checked value by value.
fn fitted(name: &str, values: &ArrayRef, column: &ColumnType) -> Result<ArrayRef> {
    let strict = CastOptions {
        safe: false,
        format_options: FormatOptions::default(),
    };
    let target = column.to_arrow();
    if values.data_type() == &target {
        return Ok(values.clone());
    }
    // One value where the column holds lists: a list of one.
    if let (ColumnType::List(item), false) = (
        column,
        matches!(
            values.data_type(),
            DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)
        ),
    ) {
        let items = fitted(name, values, item)?;
        let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(1, items.len()));
        let nulls = items.nulls().cloned();
        let list = ListArray::try_new(
            Arc::new(Field::new("item", item.to_arrow(), true)),
            offsets,
            items,
            nulls,
        )
        .map_err(|e| refused(name, e))?;
        return Ok(Arc::new(list));
    }
    // Finer times than milliseconds are kept to the millisecond, as a `date` field keeps them
    // (a `date_nanos` field's column keeps nanoseconds).
    let values = match values.data_type() {
        DataType::Timestamp(TimeUnit::Microsecond | TimeUnit::Nanosecond, zone)
            if !matches!(target, DataType::Timestamp(TimeUnit::Nanosecond, _)) =>
        {
            let coarse = CastOptions {
                safe: false,
                format_options: FormatOptions::default(),
            };
            cast_with_options(
                values,
                &DataType::Timestamp(TimeUnit::Millisecond, zone.clone()),
                &coarse,
            )
            .map_err(|e| refused(name, e))?
        }
        _ => values.clone(),
    };
    cast_with_options(&values, &target, &strict).map_err(|e| {
        refused(
            name,
            format!(
                "{} values do not fit its {column} column: {e}",
                values.data_type()
            ),
        )
    })
}

/// The record ids of a batch: its `_id` column's (distinct, none null), or made ones.
fn record_ids(id: Option<&ArrayRef>, rows: usize, given: Ids) -> Result<(ArrayRef, bool)> {
    let Some(id) = id else {
        let made: StringArray = (0..rows).map(|_| Some(documents::generate_id())).collect();
        return Ok((Arc::new(made), false));
    };
    let ids = fitted(ID_FIELD, id, &ColumnType::Utf8)?;
    let text = ids.as_string::<i32>();
    if text.null_count() > 0 {
        return Err(refused(ID_FIELD, "a record's id may not be null"));
    }
    if given == Ids::New {
        // The caller made them, each once (an import's ids: its id and the record's place).
        return Ok((ids, true));
    }
    let mut seen = HashSet::with_capacity(rows);
    if let Some(twice) = text.iter().flatten().find(|id| !seen.insert(*id)) {
        return Err(refused(
            ID_FIELD,
            format!("id {twice:?} names two records of the batch"),
        ));
    }
    Ok((ids, true))
}

/// Whether the ids of a batch may name records the dataset holds (which the batch replaces).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ids {
    MayExist,
    New,
}

/// The live rows of `snapshot` whose record ids are among `ids`.
async fn rows_of_ids(snapshot: Arc<TableSnapshot>, ids: &StringArray) -> Result<RoaringTreemap> {
    let docs = snapshot
        .index
        .as_ref()
        .and_then(|i| i.docs.clone())
        .ok_or_else(|| Error::Internal("a dataset has no document index".to_owned()))?;
    let values: Vec<&str> = ids.iter().flatten().collect();
    let query = compile::compile(&docs, &json!({"terms": {ID_FIELD: values}}), 0)
        .map_err(|e| Error::Internal(e.reason))?;
    Ok(blocking(move || snapshot.matching_rows(query.as_ref())).await??)
}

impl Engine {
    /// Writes the rows of `batch` as records of dataset `name` (created when it does not
    /// exist), its typed columns kept (see the module documentation): how many.
    pub async fn ingest_batch(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        batch: &RecordBatch,
        origin: &Origin,
    ) -> Result<u64> {
        self.ingest_records(principal, name, batch, origin, Ids::MayExist)
            .await
    }

    /// [`Engine::ingest_batch`] of records whose ids the caller knows name no record of the
    /// dataset yet, nor two records of the batch (an import's records beyond what it may have
    /// written before): the lookup of the records they would replace, a search of every id, and
    /// the check that the batch names each id once are left out.
    pub(in crate::engine) async fn ingest_new_records(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        batch: &RecordBatch,
        origin: &Origin,
    ) -> Result<u64> {
        self.ingest_records(principal, name, batch, origin, Ids::New)
            .await
    }

    async fn ingest_records(
        &self,
        principal: &PlatformPrincipal,
        name: &str,
        batch: &RecordBatch,
        origin: &Origin,
        given: Ids,
    ) -> Result<u64> {
        check_name(name)?;
        self.authorize_write(principal, name)?;
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(0);
        }
        let (columns, id) = incoming(batch)?;
        let (ids, named) = record_ids(id.as_ref(), rows, given)?;
        let (runtime, mut def) = self.records_dataset(principal, name, origin).await?;
        let vectors = if def.vector_column.is_some() {
            rows as u64
        } else {
            0
        };
        let _reservation = self
            .reserve(
                &principal.account,
                Counts {
                    rows: rows as u64,
                    vectors,
                },
            )
            .await?;
        let deadline = tokio::time::Instant::now() + BULK_WAIT;
        while tokio::time::Instant::now() < deadline {
            // The columns first: new ones added, others widened, as one catalog change.
            let grown = grown_columns(&def, &columns);
            if grown != def.columns {
                self.grow_dataset(&runtime, &def, &grown, origin, BULK_WAIT)
                    .await?;
                def = self.dataset(&principal.account, name).await?.1;
                continue;
            }
            let now = chrono::Utc::now().timestamp_millis();
            let rows_batch = table_batch(&def, &columns, &ids, now)?;
            let table = self.table_runtime(&runtime, &def).await?;
            let Some(mut permit) = dataset_permit(&table, name).await? else {
                continue;
            };
            if let Some(current) = self.columns_changed(&runtime, &table, &def)? {
                def = current;
                continue;
            }
            let snapshot = permit.snapshot();
            let replaced = match (named, given) {
                (true, Ids::MayExist) => {
                    rows_of_ids(snapshot.clone(), ids.as_string::<i32>()).await?
                }
                _ => RoaringTreemap::new(),
            };
            let body = Body::RowsAppended(RowsAppended {
                table_id: def.id.clone(),
                first_row_id: snapshot.next_row_id,
                row_count: rows as u64,
                arrow_ipc: table_rows::encode_ipc(&rows_batch)?.into(),
                vector_count: strata_projections::table::count_vectors(
                    &rows_batch,
                    def.vector_column.as_deref(),
                ),
                tombstoned_row_ids: replaced.iter().collect(),
                tombstoned_vector_count: vectors_among(&snapshot, &replaced),
            });
            match permit.write(body, origin).await {
                Ok(after) => {
                    self.record_usage(&runtime.account, &runtime.id, &def.id, Counts::of(&after));
                    return Ok(rows as u64);
                }
                // Another leader took the partition over meanwhile: nothing was written.
                Err(Error::Unavailable(_)) => continue,
                Err(error) => return Err(error),
            }
        }
        Err(Error::Busy(format!(
            "the columns of dataset {name:?} kept changing under this batch for {}s; retry it",
            BULK_WAIT.as_secs()
        )))
    }
}

/// The columns of dataset `def` once they hold `columns` too: new ones after its own, its own
/// widened where the batch needs it.
fn grown_columns(def: &TableDef, columns: &[Incoming]) -> Vec<ColumnDef> {
    let mut grown = def.columns.clone();
    for column in columns {
        match grown.iter_mut().find(|c| c.name == column.name) {
            // A record's time stays a date: its values are read as one, or refused.
            Some(current) if current.name == TIMESTAMP_FIELD => {}
            Some(current) => {
                if let Some(wider) = widened(&current.data_type, &column.wanted) {
                    current.data_type = wider;
                }
            }
            None => grown.push(ColumnDef {
                name: column.name.clone(),
                data_type: column.wanted.clone(),
                nullable: true,
            }),
        }
    }
    grown
}

/// The rows of a batch in dataset `def`'s columns (each value fitted to its column's type,
/// absent columns null), with their record ids; a record without `@timestamp` gets `now`, as
/// bulk gives it.
fn table_batch(
    def: &TableDef,
    columns: &[Incoming],
    ids: &ArrayRef,
    now: i64,
) -> Result<RecordBatch> {
    let schema = table_rows::data_schema(def);
    let rows = ids.len();
    let mut arrays = Vec::with_capacity(def.columns.len());
    for column in &def.columns {
        let given = columns.iter().find(|c| c.name == column.name);
        let array = match (column.name.as_str(), given) {
            (ID_FIELD, _) => ids.clone(),
            (name, Some(incoming)) => fitted(name, &incoming.values, &column.data_type)?,
            (_, None) => new_null_array(&column.data_type.to_arrow(), rows),
        };
        let array = match column.name.as_str() {
            TIMESTAMP_FIELD if array.null_count() > 0 => {
                let times = array.as_primitive::<arrow::datatypes::TimestampMillisecondType>();
                let filled: arrow::array::TimestampMillisecondArray =
                    times.iter().map(|t| Some(t.unwrap_or(now))).collect();
                Arc::new(filled.with_timezone("UTC")) as ArrayRef
            }
            _ => array,
        };
        arrays.push(array);
    }
    RecordBatch::try_new(schema, arrays)
        .map_err(|e| Error::BadRequest(format!("invalid rows: {e}")))
}

#[cfg(test)]
mod tests;
