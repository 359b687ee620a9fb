use parquet::arrow::arrow_reader::RowSelection;
use proptest::prelude::*;
use roaring::RoaringTreemap;

use super::selection;

/// The positions a selection reads, in a file of `rows` rows.
fn positions(selection: &RowSelection, rows: usize) -> Vec<u64> {
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

proptest! {
    /// A segment file holds its ids in ascending order: the selection of some of them reads
    /// their ranks, whatever the gaps between ids (across the 32-bit halves too).
    #[test]
    fn a_selection_reads_the_positions_of_the_ids_asked_for(
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
        let selection = selection(&ids, &hits);
        prop_assert_eq!(positions(&selection, ids.len() as usize), expected);
    }
}
