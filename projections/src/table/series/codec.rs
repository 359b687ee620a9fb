//! The byte layout of a series index file (log/FORMAT.md, "Series index"): a header, the series
//! table, then one block of samples per series, each with its checksum.

use std::{fs::File, os::unix::fs::FileExt, path::Path};

use super::{Blocks, Point, SeriesMeta};
use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"STSX";
const VERSION: u32 = 1;
const HEADER: usize = 24;

/// The file of `series` with their `points`, slot by slot.
pub(super) fn encode(series: &[SeriesMeta], points: &[Vec<Point>]) -> Vec<u8> {
    let blocks: Vec<Vec<u8>> = points.iter().map(|p| encode_block(p)).collect();
    let mut table = Vec::new();
    put_varint(&mut table, series.len() as u64);
    for (meta, block) in series.iter().zip(&blocks) {
        table.extend_from_slice(&meta.id.to_le_bytes());
        put_signed(&mut table, meta.min_t);
        put_signed(&mut table, meta.max_t.wrapping_sub(meta.min_t));
        put_varint(&mut table, u64::from(meta.samples));
        put_varint(&mut table, block.len() as u64);
        put_varint(&mut table, meta.labels.len() as u64);
        for (name, value) in &meta.labels {
            put_bytes(&mut table, name.as_bytes());
            put_bytes(&mut table, value.as_bytes());
        }
    }
    let mut file =
        Vec::with_capacity(HEADER + table.len() + blocks.iter().map(Vec::len).sum::<usize>());
    file.extend_from_slice(MAGIC);
    file.extend_from_slice(&VERSION.to_le_bytes());
    file.extend_from_slice(&(table.len() as u64).to_le_bytes());
    file.extend_from_slice(&crc32c::crc32c(&table).to_le_bytes());
    file.extend_from_slice(&0u32.to_le_bytes());
    file.extend_from_slice(&table);
    for block in &blocks {
        file.extend_from_slice(block);
    }
    file
}

/// Reads the header and series table of a file: the series and where each one's block is.
pub(super) fn read_table(file: &File, path: &Path) -> Result<(Vec<SeriesMeta>, Blocks)> {
    let corrupt = |offset: u64, reason: &str| Error::Corrupt {
        key: format!("{}@{offset}", path.display()),
        reason: reason.to_owned(),
    };
    let mut header = [0u8; HEADER];
    file.read_exact_at(&mut header, 0)
        .map_err(|e| corrupt(0, &format!("cannot read the header: {e}")))?;
    if &header[0..4] != MAGIC {
        return Err(corrupt(0, "not a series index (bad magic)"));
    }
    let version = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if version != VERSION {
        return Err(corrupt(
            4,
            &format!("unknown series index version {version}"),
        ));
    }
    let mut word = [0u8; 8];
    word.copy_from_slice(&header[8..16]);
    let table_len = u64::from_le_bytes(word);
    let crc = u32::from_le_bytes([header[16], header[17], header[18], header[19]]);
    let size = file
        .metadata()
        .map_err(|e| corrupt(0, &e.to_string()))?
        .len();
    if table_len > size.saturating_sub(HEADER as u64) {
        return Err(corrupt(8, "the series table runs past the end of the file"));
    }
    let mut table = vec![0u8; table_len as usize];
    file.read_exact_at(&mut table, HEADER as u64)
        .map_err(|e| corrupt(HEADER as u64, &e.to_string()))?;
    if crc32c::crc32c(&table) != crc {
        return Err(corrupt(HEADER as u64, "series table checksum mismatch"));
    }
    let mut reader = Reader::new(&table);
    let count = reader.varint()? as usize;
    let mut series = Vec::with_capacity(count.min(table.len()));
    let mut blocks = Vec::with_capacity(count.min(table.len()));
    let mut offset = HEADER as u64 + table_len;
    for _ in 0..count {
        let id = reader.u64_le()?;
        let min_t = reader.signed()?;
        let max_t = min_t.wrapping_add(reader.signed()?);
        let samples = reader.varint()? as u32;
        let len = reader.varint()? as u32;
        let labels = (0..reader.varint()?)
            .map(|_| Ok((reader.string()?, reader.string()?)))
            .collect::<Result<Vec<_>>>()?;
        blocks.push((offset, len));
        offset += u64::from(len);
        series.push(SeriesMeta {
            id,
            labels,
            min_t,
            max_t,
            samples,
        });
    }
    if offset > size {
        return Err(corrupt(size, "series blocks run past the end of the file"));
    }
    Ok((series, blocks))
}

/// A series' samples: times as a first value, a first delta and deltas of deltas; values as
/// the XOR of each with the one before, bytes of zeros at either end left out; row ids as a
/// first value and deltas. Then a CRC32C of all that.
fn encode_block(points: &[Point]) -> Vec<u8> {
    let mut out = Vec::with_capacity(points.len() * 4 + 16);
    let (mut before, mut delta) = (0i64, 0i64);
    for (i, point) in points.iter().enumerate() {
        match i {
            0 => put_signed(&mut out, point.t),
            1 => {
                delta = point.t.wrapping_sub(before);
                put_signed(&mut out, delta);
            }
            _ => {
                let next = point.t.wrapping_sub(before);
                put_signed(&mut out, next.wrapping_sub(delta));
                delta = next;
            }
        }
        before = point.t;
    }
    let mut bits_before = 0u64;
    for (i, point) in points.iter().enumerate() {
        let bits = point.v.to_bits();
        if i == 0 {
            out.extend_from_slice(&bits.to_le_bytes());
        } else {
            let xor = bits ^ bits_before;
            if xor == 0 {
                out.push(0);
            } else {
                let lead = (xor.leading_zeros() / 8).min(7);
                let trail = (xor.trailing_zeros() / 8).min(7);
                out.push(0x80 | ((lead as u8) << 3) | trail as u8);
                let bytes = xor.to_be_bytes();
                out.extend_from_slice(&bytes[lead as usize..8 - trail as usize]);
            }
        }
        bits_before = bits;
    }
    let mut row_before = 0u64;
    for point in points {
        put_signed(&mut out, point.row.wrapping_sub(row_before) as i64);
        row_before = point.row;
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[cfg(test)]
pub(super) fn encode_block_for_tests(points: &[Point]) -> Vec<u8> {
    encode_block(points)
}

/// Appends the `n` points of a block [`encode_block`] wrote to `points`.
#[cfg(test)]
pub(super) fn decode_block_into(block: &[u8], n: usize, points: &mut Vec<Point>) -> Result<()> {
    decode_block_range(block, n, i64::MIN, i64::MAX, points)
}

/// Appends the points of a block [`encode_block`] wrote whose times are in `[mint, maxt]` to
/// `points` (every point of a block whose times are out of order, for the caller to sift).
/// Every time is read, but values are set and row ids read only up to the last point kept.
pub(super) fn decode_block_range(
    block: &[u8],
    n: usize,
    mint: i64,
    maxt: i64,
    points: &mut Vec<Point>,
) -> Result<()> {
    let corrupt = |reason: &str| Error::Corrupt {
        key: "series index block".to_owned(),
        reason: reason.to_owned(),
    };
    let Some(body_len) = block.len().checked_sub(4) else {
        return Err(corrupt("block shorter than its checksum"));
    };
    let (body, crc) = block.split_at(body_len);
    if crc32c::crc32c(body) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) {
        return Err(corrupt("block checksum mismatch"));
    }
    let mut reader = Reader::new(body);
    let base = points.len();
    // The kept points are `lo..hi` of the block's: a run, as the block is sorted by time. A
    // time in range after the run has ended means it is not: then every point is kept.
    let (mut lo, mut hi) = (None::<usize>, None::<usize>);
    let (mut t, mut delta) = (0i64, 0i64);
    for i in 0..n {
        let read = reader.signed()?;
        match i {
            0 => t = read,
            1 => {
                delta = read;
                t = t.wrapping_add(delta);
            }
            _ => {
                delta = delta.wrapping_add(read);
                t = t.wrapping_add(delta);
            }
        }
        let inside = (mint..=maxt).contains(&t);
        if inside && hi.is_some() {
            // Out of order: decode the whole block again, every point kept.
            points.truncate(base);
            return decode_block_range(block, n, i64::MIN, i64::MAX, points);
        }
        if inside {
            lo.get_or_insert(i);
            points.push(Point { t, v: 0.0, row: 0 });
        } else if lo.is_some() && hi.is_none() {
            hi = Some(i);
        }
    }
    let (lo, hi) = match lo {
        None => (n, n),
        Some(lo) => (lo, hi.unwrap_or(n)),
    };
    let mut bits = 0u64;
    for i in 0..n {
        if i == 0 {
            bits = reader.u64_le()?;
        } else {
            let head = reader.byte()?;
            if head != 0 {
                let lead = usize::from((head >> 3) & 7);
                let trail = usize::from(head & 7);
                let middle = reader.take(8 - lead - trail)?;
                if i < hi {
                    let mut bytes = [0u8; 8];
                    bytes[lead..8 - trail].copy_from_slice(middle);
                    bits ^= u64::from_be_bytes(bytes);
                }
            }
        }
        if (lo..hi).contains(&i) {
            points[base + i - lo].v = f64::from_bits(bits);
        }
    }
    let mut row = 0u64;
    for i in 0..hi {
        row = row.wrapping_add(reader.signed()? as u64);
        if i >= lo {
            points[base + i - lo].row = row;
        }
    }
    Ok(())
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_signed(out: &mut Vec<u8>, value: i64) {
    put_varint(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Reads what the `put_*` functions wrote; running out is corruption.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    fn short(&self) -> Error {
        Error::Corrupt {
            key: "series index".to_owned(),
            reason: format!("truncated at byte {}", self.at),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len());
        let Some(end) = end else {
            return Err(self.short());
        };
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8> {
        let byte = *self.bytes.get(self.at).ok_or_else(|| self.short())?;
        self.at += 1;
        Ok(byte)
    }

    fn u64_le(&mut self) -> Result<u64> {
        let mut word = [0u8; 8];
        word.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(word))
    }

    fn varint(&mut self) -> Result<u64> {
        // Most numbers here (deltas of deltas of regular times, row deltas) are one byte.
        if let Some(&byte) = self.bytes.get(self.at)
            && byte < 0x80
        {
            self.at += 1;
            return Ok(u64::from(byte));
        }
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(self.short())
    }

    fn signed(&mut self) -> Result<i64> {
        let raw = self.varint()?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    fn string(&mut self) -> Result<String> {
        let len = self.varint()? as usize;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| Error::Corrupt {
            key: "series index".to_owned(),
            reason: "a label is not UTF-8".to_owned(),
        })
    }
}
