use std::{collections::HashMap, sync::Arc};

use arrow::{
    array::{ArrayRef, Int64Array, RecordBatch, UInt64Array},
    buffer::BooleanBuffer,
};
use proptest::prelude::*;
use roaring::RoaringTreemap;

use super::{Kept, Share, at_positions, share};

/// The positions a share reads, in a file of `rows` rows.
fn positions(share: &Share, rows: usize) -> Vec<u64> {
    match share {
        Share::All => (0..rows as u64).collect(),
        Share::Runs(selection) => {
            let mut out = Vec::new();
            let mut at = 0u64;
            for selector in selection.iter() {
                if !selector.skip {
                    out.extend(at..at + selector.row_count as u64);
                }
                at += selector.row_count as u64;
            }
            assert_eq!(at, rows as u64, "a selection covers the whole file");
            out
        }
        Share::Positions(set) => {
            assert_eq!(set.len(), rows, "positions cover the whole file");
            set.set_indices().map(|at| at as u64).collect()
        }
    }
}

proptest! {
    /// A segment file holds its ids in ascending order: the share of some of them reads
    /// their ranks, whatever the gaps between ids (across the 32-bit halves too), as runs or as
    /// positions.
    #[test]
    fn a_share_reads_the_positions_of_the_ids_asked_for(
        gaps in prop::collection::vec((1u64..5, any::<bool>(), any::<bool>()), 0..300),
        start in prop_oneof![Just(0u64), Just((1u64 << 32) - 100)],
    ) {
        let mut ids = RoaringTreemap::new();
        let mut hits = RoaringTreemap::new();
        let mut expected = Vec::new();
        let mut id = start;
        for (position, (gap, hit, far)) in gaps.into_iter().enumerate() {
            id += if far { gap << 20 } else { gap };
            ids.insert(id);
            if hit {
                hits.insert(id);
                expected.push(position as u64);
            }
        }
        let share = share(&ids, &hits);
        prop_assert_eq!(positions(&share, ids.len() as usize), expected);
    }

    /// Whatever positions a batch holds (one run or not), the mask says which are set.
    #[test]
    fn positions_of_a_batch_are_looked_up_in_the_set(
        set in prop::collection::vec(any::<bool>(), 1..400),
        start in 0usize..400,
        gaps in prop::collection::vec(prop_oneof![Just(1i64), 1i64..4], 0..100),
    ) {
        let kept = BooleanBuffer::from(set.clone());
        let mut numbers = vec![start as i64];
        numbers.extend(gaps.iter().scan(start as i64, |at, gap| { *at += gap; Some(*at) }));
        let answer = at_positions(&kept, &numbers);
        match numbers.iter().all(|&n| (n as usize) < set.len()) {
            true => {
                let mask = answer.unwrap();
                let expected: Vec<bool> = numbers.iter().map(|&n| set[n as usize]).collect();
                prop_assert_eq!(mask.iter().collect::<Vec<bool>>(), expected);
            }
            false => prop_assert!(answer.is_none()),
        }
    }
}

/// Scattered rows are kept by position; a block of rows is read as a selection, whose pages
/// the reader skips.
#[test]
fn scattered_rows_are_kept_by_position_and_a_block_by_runs() {
    let ids: RoaringTreemap = (0..10_000).collect();
    let scattered: RoaringTreemap = (0..10_000).filter(|id| id % 4 != 0).collect();
    assert!(matches!(share(&ids, &scattered), Share::Positions(_)));
    let block: RoaringTreemap = (2_000..7_000).collect();
    assert!(matches!(share(&ids, &block), Share::Runs(_)));
}

/// A batch may hold rows of several files: each segment's rows are looked up in its own
/// positions, and a segment not kept by position keeps all its rows.
#[test]
fn a_batch_of_several_segments_keeps_each_by_its_own_positions() {
    let kept = Kept::AtPositions {
        positions: Arc::new(HashMap::from([
            (1, BooleanBuffer::from(vec![true, false, true, false])),
            (2, BooleanBuffer::from(vec![false, true])),
        ])),
        segment_at: 0,
        position_at: 1,
    };
    let batch = |segments: Vec<u64>, positions: Vec<i64>| {
        RecordBatch::try_from_iter([
            ("segment", Arc::new(UInt64Array::from(segments)) as ArrayRef),
            (
                "position",
                Arc::new(Int64Array::from(positions)) as ArrayRef,
            ),
        ])
        .unwrap()
    };
    let mask = kept
        .mask(&batch(vec![1, 1, 2, 2, 3, 1], vec![0, 1, 0, 1, 0, 2]))
        .unwrap()
        .unwrap();
    assert_eq!(
        mask.values().iter().collect::<Vec<bool>>(),
        [true, false, false, true, true, true]
    );
    assert!(kept.mask(&batch(vec![3, 3], vec![0, 1])).unwrap().is_none());
    assert!(
        kept.mask(&batch(vec![1], vec![4])).is_err(),
        "out of the file"
    );
}
