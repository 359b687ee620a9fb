use proptest::prelude::*;

use super::*;

fn frames_of(batches: &[Vec<Vec<u8>>]) -> (Vec<u8>, Vec<usize>) {
    let mut buf = Vec::new();
    let mut ends = Vec::new();
    let mut offset = 0;
    for batch in batches {
        encode_frame(&mut buf, offset, batch);
        offset += batch.len() as u64;
        ends.push(buf.len());
    }
    (buf, ends)
}

fn records_of(buf: &[u8], scan: &Scan) -> Vec<Vec<u8>> {
    scan.frames
        .iter()
        .flat_map(|(at, body)| {
            body.records.iter().map(move |r| {
                buf[at + FRAME_HEADER_LEN + r.start..at + FRAME_HEADER_LEN + r.end].to_vec()
            })
        })
        .collect()
}

fn batches() -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
    prop::collection::vec(
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..5),
        1..12,
    )
}

#[test]
fn header_round_trips_and_rejects_damage() {
    let header = SegmentHeader {
        base_offset: 42,
        created_ms: 1_700_000_000_000,
    };
    let bytes = header.encode();
    assert_eq!(SegmentHeader::decode(&bytes), Ok(header));
    for i in 0..HEADER_LEN {
        let mut damaged = bytes;
        damaged[i] ^= 0x01;
        assert!(
            SegmentHeader::decode(&damaged).is_err(),
            "flip at byte {i} went unnoticed"
        );
    }
    assert!(SegmentHeader::decode(&bytes[..31]).is_err());
}

/// A frame whose checksum holds but whose record count is absurd is refused, not allocated for
/// (the fuzz target `log_frames` makes such frames; before, this asked for 64 GiB).
#[test]
fn a_huge_record_count_is_refused_without_allocating_for_it() {
    let mut body = Vec::new();
    body.extend_from_slice(&7u64.to_le_bytes());
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    let header = FrameHeader {
        body_len: body.len(),
        crc: crc32c::crc32c(&body),
    };
    let error = FrameBody::decode(&header, &body).unwrap_err();
    assert_eq!(error, "record length runs past the frame");
}

/// Found by the log_frames fuzz target: a checksummed frame at offset u64::MAX holding two
/// records overflowed the end offset the scan computes next.
#[test]
fn a_frame_whose_offsets_run_past_the_largest_is_refused() {
    let mut buf = Vec::new();
    encode_frame(&mut buf, u64::MAX, &[b"a".to_vec(), b"b".to_vec()]);
    let scan = scan_frames(&buf, u64::MAX);
    assert!(scan.frames.is_empty());
    assert_eq!(scan.valid_len, 0);
    let reason = scan.stopped.expect("the scan stops at the frame");
    assert!(reason.contains("past the largest offset"), "{reason}");

    // A frame that ends exactly at the largest offset is still read.
    let mut buf = Vec::new();
    encode_frame(&mut buf, u64::MAX - 1, &[b"a".to_vec()]);
    assert_eq!(scan_frames(&buf, u64::MAX - 1).frames.len(), 1);
}

#[test]
fn frame_len_matches_encoding() {
    let records = vec![b"a".to_vec(), vec![], vec![7u8; 1000]];
    let mut out = Vec::new();
    encode_frame(&mut out, 9, &records);
    assert_eq!(out.len(), frame_len(&records));
}

proptest! {
    #[test]
    fn frames_round_trip(batches in batches()) {
        let (buf, _) = frames_of(&batches);
        let scan = scan_frames(&buf, 0);
        prop_assert_eq!(&scan.stopped, &None);
        prop_assert_eq!(scan.valid_len, buf.len());
        let expected: Vec<Vec<u8>> = batches.concat();
        prop_assert_eq!(records_of(&buf, &scan), expected);
    }

    /// Truncating anywhere keeps exactly the frames that are whole, never a partial one.
    #[test]
    fn truncation_keeps_whole_frames_only(batches in batches(), cut in any::<prop::sample::Index>()) {
        let (buf, ends) = frames_of(&batches);
        let cut = cut.index(buf.len() + 1);
        let scan = scan_frames(&buf[..cut], 0);
        let whole = ends.iter().filter(|&&end| end <= cut).count();
        prop_assert_eq!(scan.frames.len(), whole);
        prop_assert_eq!(scan.valid_len, if whole == 0 { 0 } else { ends[whole - 1] });
        prop_assert_eq!(records_of(&buf, &scan), batches[..whole].concat());
    }

    /// Flipping bytes leaves every frame before the first flip intact and yields no record that
    /// was not written.
    #[test]
    fn flips_never_yield_a_corrupt_record(
        batches in batches(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
    ) {
        let (mut buf, ends) = frames_of(&batches);
        let mut first = usize::MAX;
        for (at, mask) in &flips {
            let at = at.index(buf.len());
            buf[at] ^= mask;
            first = first.min(at);
        }
        let scan = scan_frames(&buf, 0);
        let intact = ends.iter().filter(|&&end| end <= first).count();
        prop_assert!(scan.frames.len() >= intact);
        let written = batches.concat();
        let read = records_of(&buf, &scan);
        // Every frame the scan accepted is one that was written, unchanged (a flip that survives a
        // CRC32C check is astronomically unlikely and would fail here).
        prop_assert!(read.len() <= written.len());
        prop_assert_eq!(&read[..], &written[..read.len()]);
    }
}
