//! One segment file of a partition: its header, a sparse in-memory index from offsets to file
//! positions, and reads of the durable part.

use std::{
    fs::File,
    io::{BufReader, Read, Seek, SeekFrom},
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
};

use bytes::Bytes;
use parking_lot::RwLock;

use super::format::{FRAME_HEADER_LEN, FrameBody, FrameHeader, HEADER_LEN, SegmentHeader};
use crate::{
    Envelope, PartitionId,
    error::{Error, Result},
};

/// An index entry is kept every this many bytes of frames.
const INDEX_INTERVAL: u64 = 64 << 10;

/// The name of the segment file whose first offset is `base`.
pub(crate) fn file_name(base: u64) -> String {
    format!("{base:020}.log")
}

/// The base offset of a segment file name, if it is one.
pub(crate) fn parse_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".log")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

#[derive(Debug)]
struct SegmentState {
    /// Bytes of the file readers may read (fsynced whole frames).
    durable_len: u64,
    /// One past the last durable offset in this segment.
    end_offset: u64,
    /// (frame base offset, file position), ascending; complete up to `durable_len` when
    /// `indexed`.
    index: Vec<(u64, u64)>,
    indexed: bool,
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub base: u64,
    pub path: PathBuf,
    file: File,
    state: RwLock<SegmentState>,
}

impl Segment {
    /// A segment whose frames are known: the active one, scanned at open or freshly created.
    pub(crate) fn scanned(
        base: u64,
        path: PathBuf,
        file: File,
        frames: impl IntoIterator<Item = (u64, u64)>,
        durable_len: u64,
        end_offset: u64,
    ) -> Segment {
        let mut index = Vec::new();
        for (offset, position) in frames {
            push_index(&mut index, offset, position);
        }
        Segment {
            base,
            path,
            file,
            state: RwLock::new(SegmentState {
                durable_len,
                end_offset,
                index,
                indexed: true,
            }),
        }
    }

    /// A sealed segment found at open: indexed lazily on its first read.
    pub(crate) fn sealed(base: u64, path: PathBuf, file: File, len: u64, end_offset: u64) -> Self {
        Segment {
            base,
            path,
            file,
            state: RwLock::new(SegmentState {
                durable_len: len,
                end_offset,
                index: Vec::new(),
                indexed: false,
            }),
        }
    }

    /// Reads and checks the header of a segment file.
    pub(crate) fn read_header(path: &Path, file: &File) -> Result<SegmentHeader> {
        let mut bytes = [0u8; HEADER_LEN];
        file.read_exact_at(&mut bytes, 0).map_err(Error::io(path))?;
        SegmentHeader::decode(&bytes).map_err(|reason| Error::Corrupt {
            path: path.to_owned(),
            position: 0,
            reason,
        })
    }

    /// Records frames the writer made durable at the end of this segment.
    pub(crate) fn extend(&self, frames: &[(u64, u64)], durable_len: u64, end_offset: u64) {
        let mut state = self.state.write();
        for &(offset, position) in frames {
            push_index(&mut state.index, offset, position);
        }
        state.durable_len = durable_len;
        state.end_offset = end_offset;
    }

    /// The file handle (opened read-write for the active segment).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    pub(crate) fn end_offset(&self) -> u64 {
        self.state.read().end_offset
    }

    /// Appends to `out` the events of this segment from offset `from` on, until `out` holds
    /// `max` events or the durable end of the segment.
    pub(crate) fn read_into(
        &self,
        partition: &PartitionId,
        from: u64,
        max: usize,
        out: &mut Vec<Envelope>,
    ) -> Result<()> {
        self.ensure_indexed()?;
        let (mut position, durable_len) = {
            let state = self.state.read();
            let start = match state.index.partition_point(|&(offset, _)| offset <= from) {
                0 => HEADER_LEN as u64,
                i => state.index[i - 1].1,
            };
            (start, state.durable_len)
        };
        while position < durable_len && out.len() < max {
            let (body, frame, header) = self.read_frame(position)?;
            let body = Bytes::from(body);
            for (i, range) in frame.records.iter().enumerate() {
                let offset = frame.base_offset + i as u64;
                if offset < from || out.len() >= max {
                    continue;
                }
                out.push(Envelope::decode_stored(
                    body.slice(range.clone()),
                    partition,
                    offset,
                )?);
            }
            position += header.frame_len() as u64;
        }
        Ok(())
    }

    fn read_frame(&self, position: u64) -> Result<(Vec<u8>, FrameBody, FrameHeader)> {
        let corrupt = |reason: String| Error::Corrupt {
            path: self.path.clone(),
            position,
            reason,
        };
        let mut header_bytes = [0u8; FRAME_HEADER_LEN];
        self.file
            .read_exact_at(&mut header_bytes, position)
            .map_err(Error::io(&self.path))?;
        let header = FrameHeader::decode(&header_bytes).map_err(corrupt)?;
        let mut body = vec![0u8; header.body_len];
        self.file
            .read_exact_at(&mut body, position + FRAME_HEADER_LEN as u64)
            .map_err(Error::io(&self.path))?;
        let frame = FrameBody::decode(&header, &body).map_err(corrupt)?;
        Ok((body, frame, header))
    }

    /// Builds the sparse index of a sealed segment by walking its frame headers once.
    fn ensure_indexed(&self) -> Result<()> {
        if self.state.read().indexed {
            return Ok(());
        }
        let mut state = self.state.write();
        if state.indexed {
            return Ok(());
        }
        let mut reader = BufReader::with_capacity(1 << 20, &self.file);
        reader
            .seek(SeekFrom::Start(HEADER_LEN as u64))
            .map_err(Error::io(&self.path))?;
        let mut position = HEADER_LEN as u64;
        let mut offset = self.base;
        let mut index = Vec::new();
        while position < state.durable_len {
            let corrupt = |reason: String| Error::Corrupt {
                path: self.path.clone(),
                position,
                reason,
            };
            let mut header_bytes = [0u8; FRAME_HEADER_LEN];
            reader
                .read_exact(&mut header_bytes)
                .map_err(Error::io(&self.path))?;
            let header = FrameHeader::decode(&header_bytes).map_err(corrupt)?;
            let mut counts = [0u8; 12];
            reader
                .read_exact(&mut counts)
                .map_err(Error::io(&self.path))?;
            let base = u64::from_le_bytes(counts[0..8].try_into().unwrap_or_default());
            let count = u32::from_le_bytes(counts[8..12].try_into().unwrap_or_default());
            if base != offset {
                return Err(corrupt(format!(
                    "frame starts at offset {base}, expected {offset}"
                )));
            }
            push_index(&mut index, offset, position);
            offset += u64::from(count);
            reader
                .seek_relative(header.body_len as i64 - 12)
                .map_err(Error::io(&self.path))?;
            position += header.frame_len() as u64;
        }
        state.index = index;
        state.indexed = true;
        Ok(())
    }
}

fn push_index(index: &mut Vec<(u64, u64)>, offset: u64, position: u64) {
    match index.last() {
        Some(&(_, last)) if position < last + INDEX_INTERVAL => {}
        _ => index.push((offset, position)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip() {
        assert_eq!(file_name(42), "00000000000000000042.log");
        assert_eq!(parse_file_name(&file_name(42)), Some(42));
        assert_eq!(parse_file_name(&file_name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_file_name("42.log"), None);
        assert_eq!(parse_file_name("0000000000000000004x.log"), None);
        assert_eq!(parse_file_name("00000000000000000042.tmp"), None);
    }
}
