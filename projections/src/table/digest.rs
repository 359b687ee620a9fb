//! Content digests of a table projection, for `strata-replay verify`: two projections of the same
//! partition agree when they hold the same live rows (by row id, every column) and when each
//! segment's indexes hold exactly the segment's rows. How the rows are split into segments and
//! memtable batches does not matter.

use std::{collections::BTreeMap, sync::Arc};

use arrow::{
    array::AsArray,
    datatypes::UInt64Type,
    row::{RowConverter, SortField},
};
use datafusion::prelude::SessionContext;
use roaring::RoaringTreemap;
use sha2::{Digest, Sha256};

use super::{TableScan, TableSnapshot, rows::ROW_ID};
use crate::error::{Error, Result};

/// A hash of every live row, by row id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableDigest {
    pub rows: BTreeMap<u64, [u8; 16]>,
}

impl TableDigest {
    /// Reads every live row of `snapshot` (segments and memtable, without deleted rows).
    pub async fn of(snapshot: Arc<TableSnapshot>) -> Result<TableDigest> {
        let ctx = SessionContext::new();
        ctx.register_object_store(snapshot.store.url.as_ref(), snapshot.store.store.clone());
        ctx.register_table("t", Arc::new(TableScan::new(snapshot)))?;
        let batches = ctx.sql("SELECT * FROM t").await?.collect().await?;
        let mut rows = BTreeMap::new();
        for batch in batches {
            let ids_at = batch
                .schema()
                .index_of(ROW_ID)
                .map_err(|e| Error::Arrow(e.to_string()))?;
            let ids = batch.column(ids_at).as_primitive::<UInt64Type>().clone();
            let columns: Vec<_> = (0..batch.num_columns())
                .filter(|i| *i != ids_at)
                .map(|i| batch.column(i).clone())
                .collect();
            let converter = RowConverter::new(
                columns
                    .iter()
                    .map(|c| SortField::new(c.data_type().clone()))
                    .collect(),
            )
            .map_err(|e| Error::Arrow(e.to_string()))?;
            let converted = converter
                .convert_columns(&columns)
                .map_err(|e| Error::Arrow(e.to_string()))?;
            for (i, row) in converted.iter().enumerate() {
                let hash = Sha256::digest(row.as_ref());
                let mut short = [0u8; 16];
                short.copy_from_slice(&hash[..16]);
                if rows.insert(ids.value(i), short).is_some() {
                    return Err(Error::Corrupt {
                        key: format!("row {}", ids.value(i)),
                        reason: "the row is live twice".to_owned(),
                    });
                }
            }
        }
        Ok(TableDigest { rows })
    }

    /// One hash of the whole content, as hex.
    pub fn hex(&self) -> String {
        let mut hasher = Sha256::new();
        for (id, row) in &self.rows {
            hasher.update(id.to_le_bytes());
            hasher.update(row);
        }
        hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Row ids present in only one of the two, or with different contents, in order.
    pub fn differing(&self, other: &TableDigest) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .rows
            .iter()
            .filter(|(id, row)| other.rows.get(id) != Some(row))
            .map(|(id, _)| *id)
            .collect();
        ids.extend(other.rows.keys().filter(|id| !self.rows.contains_key(id)));
        ids.sort_unstable();
        ids
    }
}

/// What is wrong with the segment indexes of `snapshot`: each full-text index must hold exactly
/// its segment's row ids, and each vector index exactly the ids of its segment's rows with a
/// vector. Empty when all is well.
pub fn index_problems(snapshot: &TableSnapshot) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(spec) = &snapshot.index else {
        return problems;
    };
    for segment in &snapshot.segments {
        let Some(index) = &segment.index else {
            problems.push(format!("segment {} has no index", segment.seq));
            continue;
        };
        if spec.segment_text().is_some() {
            match &index.text {
                None => problems.push(format!("segment {} has no full-text index", segment.seq)),
                Some(text) => {
                    let mut indexed = RoaringTreemap::new();
                    for (reader, ids) in text.searcher.segment_readers().iter().zip(&text.row_ids) {
                        indexed.extend(reader.doc_ids_alive().filter_map(|doc| ids.first(doc)));
                    }
                    if indexed != *segment.ids {
                        problems.push(format!(
                            "segment {}: the full-text index holds {} row ids, the segment {} ({} differ)",
                            segment.seq,
                            indexed.len(),
                            segment.ids.len(),
                            (&indexed ^ &*segment.ids).len()
                        ));
                    }
                }
            }
        }
        if spec.vector.is_some() {
            match &index.vectors {
                None => problems.push(format!("segment {} has no vector index", segment.seq)),
                Some(vectors) => {
                    let held = vectors.len() as u64;
                    if held != segment.vectors.len() {
                        problems.push(format!(
                            "segment {}: the vector index holds {held} vectors, the segment {}",
                            segment.seq,
                            segment.vectors.len()
                        ));
                    }
                }
            }
        }
    }
    problems
}
