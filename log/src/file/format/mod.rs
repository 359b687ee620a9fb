//! The byte layout of FileLog segment files (written down in log/FORMAT.md): pure encoding and
//! decoding, no I/O.
//!
//! A segment is a 32-byte header followed by frames. A frame holds one appended batch:
//!
//! ```text
//! header:  magic "STRATLOG" | version u16 | header_len u16 | base_offset u64 | created_ms i64 | crc32c u32
//! frame:   body_len u32 | crc32c(body) u32 | body
//! body:    base_offset u64 | count u32 | count × (len u32 | protobuf Envelope)
//! ```
//! All integers little-endian. A frame is all-or-nothing: a torn or flipped frame fails its CRC.

use std::ops::Range;

pub(crate) const MAGIC: &[u8; 8] = b"STRATLOG";
pub(crate) const FORMAT_VERSION: u16 = 1;
pub(crate) const HEADER_LEN: usize = 32;
pub(crate) const FRAME_HEADER_LEN: usize = 8;
const BODY_HEADER_LEN: usize = 12;
/// The largest frame body the log writes or believes when it reads a length field.
pub(crate) const MAX_BODY_LEN: usize = 256 << 20;

/// The fixed header at the start of every segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    pub base_offset: u64,
    pub created_ms: i64,
}

impl SegmentHeader {
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(MAGIC);
        out[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[10..12].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        out[12..20].copy_from_slice(&self.base_offset.to_le_bytes());
        out[20..28].copy_from_slice(&self.created_ms.to_le_bytes());
        let crc = crc32c::crc32c(&out[0..28]);
        out[28..32].copy_from_slice(&crc.to_le_bytes());
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<SegmentHeader, String> {
        if bytes.len() < HEADER_LEN {
            return Err(format!(
                "header is {} bytes, expected {HEADER_LEN}",
                bytes.len()
            ));
        }
        if &bytes[0..8] != MAGIC {
            return Err("bad magic".to_owned());
        }
        let crc = u32_at(bytes, 28);
        if crc != crc32c::crc32c(&bytes[0..28]) {
            return Err("header checksum mismatch".to_owned());
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version != FORMAT_VERSION {
            return Err(format!("unsupported format version {version}"));
        }
        Ok(SegmentHeader {
            base_offset: u64_at(bytes, 12),
            created_ms: i64::from_le_bytes(bytes[20..28].try_into().unwrap_or_default()),
        })
    }
}

/// Appends one frame holding `records` (encoded envelopes) with offsets from `base_offset`.
pub(crate) fn encode_frame(out: &mut Vec<u8>, base_offset: u64, records: &[Vec<u8>]) {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_HEADER_LEN]);
    out.extend_from_slice(&base_offset.to_le_bytes());
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    for record in records {
        out.extend_from_slice(&(record.len() as u32).to_le_bytes());
        out.extend_from_slice(record);
    }
    let body_len = (out.len() - start - FRAME_HEADER_LEN) as u32;
    let crc = crc32c::crc32c(&out[start + FRAME_HEADER_LEN..]);
    out[start..start + 4].copy_from_slice(&body_len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// The size of the frame that [`encode_frame`] writes for `records`.
pub(crate) fn frame_len(records: &[Vec<u8>]) -> usize {
    FRAME_HEADER_LEN + BODY_HEADER_LEN + records.iter().map(|r| 4 + r.len()).sum::<usize>()
}

/// A frame header read from disk, before its body is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    pub body_len: usize,
    pub crc: u32,
}

impl FrameHeader {
    pub(crate) fn decode(bytes: &[u8; FRAME_HEADER_LEN]) -> Result<FrameHeader, String> {
        let body_len = u32_at(bytes, 0) as usize;
        if body_len < BODY_HEADER_LEN {
            return Err(format!("frame body of {body_len} bytes is too short"));
        }
        if body_len > MAX_BODY_LEN {
            return Err(format!(
                "frame body of {body_len} bytes exceeds {MAX_BODY_LEN}"
            ));
        }
        Ok(FrameHeader {
            body_len,
            crc: u32_at(bytes, 4),
        })
    }

    pub(crate) fn frame_len(&self) -> usize {
        FRAME_HEADER_LEN + self.body_len
    }
}

/// A checked frame body: where each record's bytes sit inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrameBody {
    pub base_offset: u64,
    pub records: Vec<Range<usize>>,
}

impl FrameBody {
    /// Checks `body` against the CRC of its header and splits it into records.
    pub(crate) fn decode(header: &FrameHeader, body: &[u8]) -> Result<FrameBody, String> {
        if body.len() != header.body_len {
            return Err(format!(
                "frame body is {} bytes, header says {}",
                body.len(),
                header.body_len
            ));
        }
        if crc32c::crc32c(body) != header.crc {
            return Err("frame checksum mismatch".to_owned());
        }
        let base_offset = u64_at(body, 0);
        let count = u32_at(body, 8) as usize;
        if count == 0 {
            return Err("frame holds no records".to_owned());
        }
        // Each record takes at least its 4-byte length: a count past that is read as far as
        // the frame goes, never allocated for.
        let mut records = Vec::with_capacity(count.min(body.len() / 4));
        let mut at = BODY_HEADER_LEN;
        for _ in 0..count {
            if at + 4 > body.len() {
                return Err("record length runs past the frame".to_owned());
            }
            let len = u32_at(body, at) as usize;
            at += 4;
            if at + len > body.len() {
                return Err("record runs past the frame".to_owned());
            }
            records.push(at..at + len);
            at += len;
        }
        if at != body.len() {
            return Err("frame has trailing bytes after its records".to_owned());
        }
        // The log never writes past u64::MAX; a frame that says it does is corrupt, and
        // refusing it here keeps every `end_offset` sum in range.
        if base_offset.checked_add(records.len() as u64).is_none() {
            return Err(format!(
                "frame's {} records from offset {base_offset} run past the largest offset",
                records.len()
            ));
        }
        Ok(FrameBody {
            base_offset,
            records,
        })
    }

    pub(crate) fn end_offset(&self) -> u64 {
        self.base_offset + self.records.len() as u64
    }
}

/// Outcome of scanning a buffer of frames (a whole segment after its header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scan {
    /// Every valid frame, in order: position in the buffer and its body.
    pub frames: Vec<(usize, FrameBody)>,
    /// Bytes of the buffer that hold valid frames; everything after is a torn or corrupt tail.
    pub valid_len: usize,
    /// Why the scan stopped before the end of the buffer, if it did.
    pub stopped: Option<String>,
}

/// Scans consecutive frames from the start of `buf`, expecting the first at `expected_offset`.
/// Stops at the first frame that is torn, fails its checksum, or breaks offset continuity.
pub(crate) fn scan_frames(buf: &[u8], mut expected_offset: u64) -> Scan {
    let mut frames = Vec::new();
    let mut at = 0usize;
    let stopped = loop {
        if at == buf.len() {
            break None;
        }
        let Some(header_bytes) = buf.get(at..at + FRAME_HEADER_LEN) else {
            break Some("torn frame header".to_owned());
        };
        let header = match FrameHeader::decode(header_bytes.try_into().unwrap_or(&[0u8; 8])) {
            Ok(header) => header,
            Err(reason) => break Some(reason),
        };
        let Some(body) = buf.get(at + FRAME_HEADER_LEN..at + header.frame_len()) else {
            break Some("torn frame body".to_owned());
        };
        let body = match FrameBody::decode(&header, body) {
            Ok(body) => body,
            Err(reason) => break Some(reason),
        };
        if body.base_offset != expected_offset {
            break Some(format!(
                "frame starts at offset {}, expected {expected_offset}",
                body.base_offset
            ));
        }
        expected_offset = body.end_offset();
        frames.push((at, body));
        at += header.frame_len();
    };
    Scan {
        frames,
        valid_len: at,
        stopped,
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests;
