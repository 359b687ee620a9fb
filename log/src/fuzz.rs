//! The entries of the fuzz targets (fuzz/, issue 28): a segment file's bytes read as the
//! FileLog reads them when it opens a partition, each record decoded as an event. Any input
//! must end in a count of what was read, however torn or corrupt: never a panic.

use prost::Message;

use crate::{
    Envelope,
    file::format::{FRAME_HEADER_LEN, HEADER_LEN, SegmentHeader, scan_frames},
};

/// `bytes` read as a segment file: its header, then its frames from the header's base offset,
/// each record decoded as an event. How many events decoded.
pub fn segment(bytes: &[u8]) -> usize {
    match SegmentHeader::decode(bytes) {
        Ok(header) => events(&bytes[HEADER_LEN..], header.base_offset),
        Err(_) => 0,
    }
}

/// `body` read as the body of a frame whose checksum holds (as a frame the log wrote does, so
/// that what follows the checksum is read: its offsets, record lengths and events). How many
/// events decoded.
pub fn frame(body: &[u8]) -> usize {
    let mut framed = Vec::with_capacity(body.len() + 8);
    framed.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes());
    framed.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    framed.extend_from_slice(body);
    let base = body
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes);
    events(&framed, base)
}

fn events(frames: &[u8], base_offset: u64) -> usize {
    let scan = scan_frames(frames, base_offset);
    scan.frames
        .iter()
        .flat_map(|(at, body)| {
            // A record's range is within its frame's body, which follows the frame's header.
            let start = at + FRAME_HEADER_LEN;
            body.records
                .iter()
                .map(move |range| (start + range.start)..(start + range.end))
        })
        .filter(|range| {
            frames
                .get(range.clone())
                .is_some_and(|record| Envelope::decode(record).is_ok())
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs the fuzz targets crashed on, each read again here.
    #[test]
    fn the_inputs_that_crashed_the_fuzz_targets_are_read_without_a_panic() {
        // A frame at offset u64::MAX holding two records (CI, 2026-11-29): its end offset
        // overflowed.
        let frame_past_the_largest_offset: &[u8] =
            b"\xff\xff\xff\xff\xff\xff\xff\xff\x02\x00\x00\x00\
            \x15\x00\x00\x00\xc2\x01\xef\x92\xf1\xffc^/aeodft/l$ugs\x00\x00\x00\x00";
        assert_eq!(frame(frame_past_the_largest_offset), 0);
        assert_eq!(segment(frame_past_the_largest_offset), 0);
    }
}
