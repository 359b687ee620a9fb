use proptest::prelude::*;
use roaring::RoaringTreemap;

use super::visible;

proptest! {
    /// Whatever the ids' high halves, each is looked up as the bitmap would answer it.
    #[test]
    fn visible_rows_answer_as_their_bitmap(
        ids in proptest::collection::vec(0u64..5_000, 0..400),
        highs in proptest::collection::vec(0u64..3, 0..4),
        probes in proptest::collection::vec((0u64..4, 0u64..6_000), 0..200),
        nulls in proptest::collection::vec(any::<bool>(), 200),
    ) {
        let mut rows: RoaringTreemap = ids.into_iter().collect();
        for high in highs {
            rows.insert((high << 32) | 7);
        }
        let probes: Vec<Option<u64>> = probes
            .into_iter()
            .zip(nulls)
            .map(|((high, low), null)| (!null).then_some((high << 32) | low))
            .collect();
        let found = visible(&rows, probes.iter().copied());
        for (at, probe) in probes.iter().enumerate() {
            let expected = probe.is_some_and(|id| rows.contains(id));
            prop_assert_eq!(found.value(at), expected, "{:?}", probe);
        }
    }
}
