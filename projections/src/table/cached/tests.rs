use std::sync::Arc;

use tantivy::{
    Term,
    collector::DocSetCollector,
    query::{BooleanQuery, ConstScoreQuery, Occur, RangeQuery, TermQuery},
    schema::IndexRecordOption,
};

use super::*;
use crate::table::docs::{DocsIndex, DocsSchema, counted};

const ROWS: u64 = 12_000;

/// An index of `ROWS` rows (row ids from 100) over several tantivy segments: `n` counts up,
/// `s` is "even" or "odd".
fn index(dir: &std::path::Path) -> (DocsSchema, DocsIndex) {
    let docs = DocsSchema::new();
    docs.build_in_dir(dir, &counted(ROWS)).unwrap();
    let index = DocsIndex::open(dir).unwrap();
    (docs, index)
}

fn even(docs: &DocsSchema) -> Box<dyn Query> {
    let mut term = Term::from_field_json_path(docs.keyword, "s", true);
    term.append_type_and_str("even");
    Box::new(TermQuery::new(term, IndexRecordOption::Basic))
}

fn below(docs: &DocsSchema, n: i64) -> Box<dyn Query> {
    let bound = |value: i64| {
        let mut term = Term::from_field_json_path(docs.keyword, "n", true);
        term.append_type_and_fast_value(value);
        term
    };
    Box::new(RangeQuery::new(
        std::ops::Bound::Included(bound(0)),
        std::ops::Bound::Excluded(bound(n)),
    ))
}

/// The row ids `query` matches in `index`, ascending.
fn rows(index: &DocsIndex, query: &dyn Query) -> Vec<u64> {
    let mut ids: Vec<u64> = index
        .searcher
        .search(query, &DocSetCollector)
        .unwrap()
        .into_iter()
        .map(|address| index.row_id(address).unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

fn within(query: Box<dyn Query>, filter: Box<dyn Query>) -> BooleanQuery {
    BooleanQuery::new(vec![
        (Occur::Must, query),
        (Occur::Must, Box::new(ConstScoreQuery::new(filter, 0.0))),
    ])
}

fn is_kept(segment: SegmentId, key: &FilterKey) -> bool {
    CACHE.lock().entries.contains(&(segment, key.clone()))
}

#[test]
fn a_kept_filter_matches_what_it_was_compiled_from_and_is_found_once_per_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (docs, index) = index(dir.path());
    let segments: Vec<SegmentId> = index
        .searcher
        .segment_readers()
        .iter()
        .map(|r| r.segment_id())
        .collect();
    assert!(segments.len() > 1, "the index has several segments");
    let key = FilterKey::of(r#"{"term":{"s":"even"}} kept"#, docs.fingerprint()).unwrap();
    let expected = rows(&index, &within(below(&docs, 1000), even(&docs)));
    assert_eq!(expected, (100..1100).step_by(2).collect::<Vec<u64>>());
    assert!(segments.iter().all(|s| !is_kept(*s, &key)));

    let cached = || Box::new(CachedFilter::new(key.clone(), even(&docs))) as Box<dyn Query>;
    assert_eq!(
        rows(&index, &within(below(&docs, 1000), cached())),
        expected
    );
    assert!(segments.iter().all(|s| is_kept(*s, &key)));
    // Kept: the same answer again, to another query too.
    assert_eq!(
        rows(&index, &within(below(&docs, 1000), cached())),
        expected
    );
    assert_eq!(
        rows(&index, &within(below(&docs, 10), cached())),
        vec![100, 102, 104, 106, 108]
    );
}

#[test]
fn the_kept_row_ids_are_those_of_the_matching_documents() {
    let dir = tempfile::tempdir().unwrap();
    let (docs, index) = index(dir.path());
    let key = FilterKey::of(r#"{"term":{"s":"even"}} rows"#, docs.fingerprint()).unwrap();
    let filter = CachedFilter::new(key, even(&docs));
    let mut all = RoaringTreemap::new();
    for found in filter.segments(&index.searcher).unwrap() {
        assert_eq!(found.docs.len() as u64, found.rows.len());
        all |= &found.rows;
    }
    assert_eq!(
        all.iter().collect::<Vec<u64>>(),
        (100..100 + ROWS).step_by(2).collect::<Vec<u64>>()
    );
}

#[test]
fn a_filter_that_reads_the_clock_is_not_kept() {
    assert!(FilterKey::of(r#"{"range":{"t":{"gte":"now-1d"}}}"#, 0).is_none());
    assert!(FilterKey::of(r#"{"term":{"s":"even"}}"#, 0).is_some());
    // The schema it was compiled with is part of its key.
    assert_ne!(
        FilterKey::of(r#"{"term":{"s":"even"}}"#, 1),
        FilterKey::of(r#"{"term":{"s":"even"}}"#, 2)
    );
}

#[test]
fn past_its_budget_the_least_recently_used_matches_are_evicted() {
    let matches = |docs: u32| {
        Arc::new(Matches {
            docs: BitSet::with_max_value(docs),
            rows: RoaringTreemap::new(),
        })
    };
    let one = matches(8 * 1000);
    let size = one.bytes();
    let mut cache = Cache {
        entries: LruCache::unbounded(),
        bytes: 0,
    };
    let key = |n: u8| {
        (
            SegmentId::generate_random(),
            FilterKey::of(&format!("filter {n}"), 0).unwrap(),
        )
    };
    let (a, b, c) = (key(1), key(2), key(3));
    cache.keep(a.clone(), one.clone(), 2 * size);
    cache.keep(b.clone(), matches(8 * 1000), 2 * size);
    assert_eq!(cache.bytes, 2 * size);
    // `a` read again: `b` is the least recently used when `c` comes.
    assert!(cache.entries.get(&a).is_some());
    cache.keep(c.clone(), matches(8 * 1000), 2 * size);
    assert_eq!(cache.bytes, 2 * size);
    assert!(cache.entries.contains(&a) && cache.entries.contains(&c));
    assert!(!cache.entries.contains(&b));
    // Kept again under its key, an entry's bytes are not counted twice.
    cache.keep(c.clone(), matches(8 * 1000), 2 * size);
    assert_eq!((cache.entries.len(), cache.bytes), (2, 2 * size));
}

#[test]
fn a_query_within_a_kept_filter_keeps_the_query_s_scores() {
    let dir = tempfile::tempdir().unwrap();
    let (docs, index) = index(dir.path());
    let key = FilterKey::of(r#"{"term":{"s":"even"}} within"#, docs.fingerprint()).unwrap();
    let filter = CachedFilter::new(key, even(&docs));
    let scored = |query: &dyn Query| {
        let mut hits: Vec<(u64, Score)> = index
            .searcher
            .search(
                query,
                &tantivy::collector::TopDocs::with_limit(20_000).order_by_score(),
            )
            .unwrap()
            .into_iter()
            .map(|(score, address)| (index.row_id(address).unwrap(), score))
            .collect();
        hits.sort_by_key(|(row, _)| *row);
        hits
    };
    let plain = scored(&within(below(&docs, 1000), even(&docs)));
    let restricted = filter.restrict(below(&docs, 1000));
    assert_eq!(scored(&restricted), plain);
    assert_eq!(rows(&index, &restricted).len(), 500);
    // Searched within a query that leads, as within a conjunction.
    let both = BooleanQuery::new(vec![
        (Occur::Must, restricted.box_clone()),
        (Occur::Must, below(&docs, 100)),
    ]);
    assert_eq!(
        rows(&index, &both),
        (100..200).step_by(2).collect::<Vec<u64>>()
    );
    // `match_all` within the filter is the filter alone: the documents and scores (1, as
    // `match_all`'s own) of the query leading.
    let all = filter.restrict(Box::new(tantivy::query::AllQuery));
    assert!(all.downcast_ref::<CachedFilter>().is_some());
    let led = Within {
        query: Arc::new(tantivy::query::AllQuery),
        filter: filter.clone(),
    };
    assert_eq!(scored(all.as_ref()), scored(&led));
    assert_eq!(scored(&led).len(), rows(&index, even(&docs).as_ref()).len());
    assert!(scored(&led).iter().all(|(_, score)| *score == 1.0));
}

#[test]
fn a_snapshot_keeps_a_filter_s_rows_unless_they_are_too_large() {
    let kept = KeptWithin::default();
    let key = |text: &str| FilterKey::of(text, 1).unwrap();
    let finds = std::cell::Cell::new(0);
    let read = |text: &str, runs: usize| {
        kept.get_or_find(&key(text), || {
            finds.set(finds.get() + 1);
            Ok::<_, ()>(RowsWithin::of_runs(runs))
        })
        .unwrap()
    };
    let small = read("small", 1_000);
    assert!(Arc::ptr_eq(&small, &read("small", 1_000)));
    // Past the bound, each read finds them again.
    let runs = KEPT_ROWS_BYTES / std::mem::size_of::<parquet::arrow::arrow_reader::RowSelector>();
    let large = read("large", runs + 1);
    assert!(!Arc::ptr_eq(&large, &read("large", runs + 1)));
    assert_eq!(finds.get(), 3);
    // Past four filters, the oldest goes.
    for other in ["a", "b", "c", "d"] {
        read(other, 10);
    }
    read("small", 1_000);
    assert_eq!(finds.get(), 8);
}
