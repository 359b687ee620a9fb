//! The table manifest: which segments hold a table's rows, their bitmaps, and the checkpoint
//! they reflect. Written as a new object after every flush and compaction; the newest valid one
//! wins on load.
//!
//! ```text
//! magic "STRATAMF" | format version u16 LE (1) | CRC32C of the body u32 LE | body (JSON)
//! ```
//! Bitmaps are roaring treemaps in their portable serialization, base64-encoded.

use base64::{Engine as _, engine::general_purpose::STANDARD};
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

use crate::{
    error::{Error, Result},
    projection::Checkpoint,
};

const MAGIC: &[u8; 8] = b"STRATAMF";
const VERSION: u16 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub table_id: String,
    /// The state below reflects every event before `checkpoint.next_offset`.
    pub checkpoint: Checkpoint,
    pub next_row_id: u64,
    pub next_segment: u64,
    pub segments: Vec<SegmentEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SegmentEntry {
    pub seq: u64,
    /// Relative to the table's prefix.
    pub file: String,
    pub bytes: u64,
    pub rows: u64,
    pub ids: String,
    pub deleted: String,
    pub vectors: String,
}

pub(crate) fn bitmap_to_text(bitmap: &RoaringTreemap) -> Result<String> {
    let mut bytes = Vec::with_capacity(bitmap.serialized_size());
    bitmap
        .serialize_into(&mut bytes)
        .map_err(|e| Error::Arrow(e.to_string()))?;
    Ok(STANDARD.encode(bytes))
}

pub(crate) fn bitmap_from_text(text: &str) -> Result<RoaringTreemap> {
    let bytes = STANDARD.decode(text).map_err(|e| corrupt(e.to_string()))?;
    RoaringTreemap::deserialize_from(&bytes[..]).map_err(|e| corrupt(e.to_string()))
}

fn corrupt(reason: String) -> Error {
    Error::Corrupt {
        key: "table manifest".to_owned(),
        reason,
    }
}

impl Manifest {
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        let body = serde_json::to_vec(self).map_err(|e| corrupt(e.to_string()))?;
        let mut out = Vec::with_capacity(body.len() + 14);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        out.extend_from_slice(&body);
        Ok(out)
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Manifest> {
        if bytes.len() < 14 || &bytes[0..8] != MAGIC {
            return Err(corrupt("bad magic".to_owned()));
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version != VERSION {
            return Err(corrupt(format!("unsupported manifest version {version}")));
        }
        let crc = u32::from_le_bytes([bytes[10], bytes[11], bytes[12], bytes[13]]);
        let body = &bytes[14..];
        if crc32c::crc32c(body) != crc {
            return Err(corrupt("checksum mismatch".to_owned()));
        }
        serde_json::from_slice(body).map_err(|e| corrupt(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_round_trip_and_refuse_damage() {
        let mut ids = RoaringTreemap::new();
        ids.insert_range(0..1000);
        let manifest = Manifest {
            table_id: "t".into(),
            checkpoint: Checkpoint {
                next_offset: 7,
                epoch: 2,
            },
            next_row_id: 1000,
            next_segment: 2,
            segments: vec![SegmentEntry {
                seq: 1,
                file: "segments/000000000001.parquet".into(),
                bytes: 10,
                rows: 1000,
                ids: bitmap_to_text(&ids).unwrap(),
                deleted: bitmap_to_text(&RoaringTreemap::new()).unwrap(),
                vectors: bitmap_to_text(&ids).unwrap(),
            }],
        };
        let bytes = manifest.encode().unwrap();
        assert_eq!(Manifest::decode(&bytes).unwrap(), manifest);
        assert_eq!(bitmap_from_text(&manifest.segments[0].ids).unwrap(), ids);
        for at in [0, 9, 12, 20, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1;
            assert!(
                Manifest::decode(&damaged).is_err(),
                "flip at {at} went unnoticed"
            );
        }
    }
}
