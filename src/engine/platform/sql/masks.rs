//! What a reader's grant does to the rows SQL reads ([`super::super::access`]): the records it
//! may see (row ids, [`RowsIn`]) and its fields, hidden or masked ([`columns`] for a table's
//! scan, [`mask_batch`] for rows read by id, as `KNN_SEARCH` reads them).

use std::sync::Arc;

use arrow::{
    array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, StringArray, new_null_array},
    datatypes::{DataType, Field, Schema, SchemaRef, UInt64Type},
    util::display::{ArrayFormatter, FormatOptions},
};
use datafusion::{
    common::{Result as DfResult, ScalarValue},
    logical_expr::{
        ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
        col, lit,
    },
};
use roaring::RoaringTreemap;
use strata_projections::catalog::TableDef;

use crate::{
    engine::access::{FieldPolicy, Mask, redact},
    error::{Error, Result},
};

/// Whether each of `ids` is one of `rows`. The 32-bit bitmap of an id's high half is found
/// once for each run of ids that share it (a whole batch, in practice), not once per id.
fn visible(rows: &RoaringTreemap, ids: impl Iterator<Item = Option<u64>>) -> BooleanArray {
    let mut current: Option<(u32, Option<&roaring::RoaringBitmap>)> = None;
    ids.map(|id| {
        let Some(id) = id else {
            return Some(false);
        };
        let (high, low) = ((id >> 32) as u32, id as u32);
        let bitmap = match current {
            Some((at, bitmap)) if at == high => bitmap,
            _ => {
                let bitmap = rows
                    .bitmaps()
                    .find(|(at, _)| *at == high)
                    .map(|(_, bitmap)| bitmap);
                current = Some((high, bitmap));
                bitmap
            }
        };
        Some(bitmap.is_some_and(|bitmap| bitmap.contains(low)))
    })
    .collect()
}

/// `_rows_in(_row_id)`: whether a row is one of a set (the records a reader may see).
#[derive(Debug)]
pub struct RowsIn {
    rows: Arc<RoaringTreemap>,
    signature: Signature,
}

impl PartialEq for RowsIn {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.rows, &other.rows)
    }
}

impl Eq for RowsIn {}

impl std::hash::Hash for RowsIn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.rows).hash(state);
    }
}

impl RowsIn {
    /// The filter expression of `rows` over a scan's `_row_id`.
    pub fn expr(rows: Arc<RoaringTreemap>) -> Expr {
        let udf = ScalarUDF::from(RowsIn {
            rows,
            signature: Signature::exact(vec![DataType::UInt64], Volatility::Immutable),
        });
        udf.call(vec![col(strata_projections::table::rows::ROW_ID)])
    }
}

impl ScalarUDFImpl for RowsIn {
    fn name(&self) -> &str {
        "_rows_in"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let ids = args.args[0].to_array(args.number_rows)?;
        let ids = ids.as_primitive::<UInt64Type>();
        let found = visible(&self.rows, ids.iter());
        Ok(ColumnarValue::Array(Arc::new(found)))
    }
}

/// Every value of `array` redacted (see [`redact`]), as text; nulls stay null.
pub fn redacted(array: &dyn Array) -> Result<ArrayRef> {
    let formatter = ArrayFormatter::try_new(array, &FormatOptions::default())
        .map_err(|e| Error::Internal(format!("a masked value cannot be shown: {e}")))?;
    let values: StringArray = (0..array.len())
        .map(|row| (!array.is_null(row)).then(|| redact(&formatter.value(row).to_string())))
        .collect();
    Ok(Arc::new(values))
}

/// `_redact(value)`: a value redacted, as text.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Redact {
    signature: Signature,
}

impl Redact {
    pub fn udf() -> ScalarUDF {
        ScalarUDF::from(Redact {
            signature: Signature::any(1, Volatility::Immutable),
        })
    }
}

impl ScalarUDFImpl for Redact {
    fn name(&self) -> &str {
        "_redact"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let values = args.args[0].to_array(args.number_rows)?;
        let redacted = redacted(values.as_ref())
            .map_err(|e| datafusion::error::DataFusionError::Execution(e.to_string()))?;
        Ok(ColumnarValue::Array(redacted))
    }
}

/// A column reference by its exact name.
fn column(name: &str) -> Expr {
    col(format!("\"{}\"", name.replace('"', "\"\"")))
}

/// The columns of `def` a reader sees, as expressions over its scan: hidden and removed
/// fields left out, redacted ones as their redacted text, nullified ones null.
pub fn columns(def: &TableDef, fields: &FieldPolicy) -> Result<Vec<Expr>> {
    let mut out = Vec::with_capacity(def.columns.len());
    for c in &def.columns {
        let expr = match fields.shows(&c.name) {
            None | Some(Some(Mask::Remove)) => continue,
            Some(None) => column(&c.name),
            Some(Some(Mask::Redact)) => Redact::udf().call(vec![column(&c.name)]).alias(&c.name),
            Some(Some(Mask::Nullify)) => {
                let null = ScalarValue::try_from(&c.data_type.to_arrow())
                    .map_err(|e| Error::Internal(e.to_string()))?;
                lit(null).alias(&c.name)
            }
        };
        out.push(expr);
    }
    Ok(out)
}

/// The schema of `schema`'s rows as a reader sees them (see [`mask_batch`]).
pub fn masked_schema(schema: &Schema, fields: &FieldPolicy) -> SchemaRef {
    let kept: Vec<Field> = schema
        .fields()
        .iter()
        .filter_map(|field| match fields.shows(field.name()) {
            None | Some(Some(Mask::Remove)) => None,
            Some(None) => Some(field.as_ref().clone()),
            Some(Some(Mask::Redact)) => Some(Field::new(field.name(), DataType::Utf8, true)),
            Some(Some(Mask::Nullify)) => Some(field.as_ref().clone().with_nullable(true)),
        })
        .collect();
    Arc::new(Schema::new(kept))
}

/// `batch` as a reader sees it: hidden and removed fields left out, redacted ones as their
/// redacted text, nullified ones null.
pub fn mask_batch(batch: &RecordBatch, fields: &FieldPolicy) -> Result<RecordBatch> {
    if fields.is_open() {
        return Ok(batch.clone());
    }
    let schema = masked_schema(&batch.schema(), fields);
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (field, array) in batch.schema().fields().iter().zip(batch.columns()) {
        match fields.shows(field.name()) {
            None | Some(Some(Mask::Remove)) => {}
            Some(None) => columns.push(array.clone()),
            Some(Some(Mask::Redact)) => columns.push(redacted(array.as_ref())?),
            Some(Some(Mask::Nullify)) => {
                columns.push(new_null_array(field.data_type(), array.len()))
            }
        }
    }
    RecordBatch::try_new(schema, columns).map_err(|e| Error::Internal(e.to_string()))
}

#[cfg(test)]
mod tests;
