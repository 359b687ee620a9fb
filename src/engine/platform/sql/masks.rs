//! What a reader's grant does to the fields SQL reads ([`super::super::access`]): hidden or
//! masked ([`columns`] for a table's scan, [`mask_batch`] for rows read by id, as
//! `KNN_SEARCH` reads them). The records it may see are the scan's
//! ([`strata_projections::table::TableScan::within`]).

use std::sync::Arc;

use arrow::{
    array::{Array, ArrayRef, RecordBatch, StringArray, new_null_array},
    datatypes::{DataType, Field, Schema, SchemaRef},
    util::display::{ArrayFormatter, FormatOptions},
};
use datafusion::{
    common::{Result as DfResult, ScalarValue},
    logical_expr::{
        ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
        col, lit,
    },
};
use strata_projections::catalog::TableDef;

use crate::{
    engine::access::{FieldPolicy, Mask, redact},
    error::{Error, Result},
};

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
