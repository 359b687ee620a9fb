//! The segment store against a model: random appends, deletes and updates, with flushes,
//! compactions and restarts in between, must read back exactly what a map of row id to row says.

use std::{collections::BTreeMap, sync::Arc};

use arrow::{
    array::{AsArray, FixedSizeListBuilder, Float32Builder, Int64Array, RecordBatch, StringArray},
    datatypes::{Int64Type, UInt64Type},
};
use datafusion::{execution::object_store::ObjectStoreUrl, prelude::SessionContext};
use object_store::{local::LocalFileSystem, path::Path};
use proptest::prelude::*;
use strata_log::{
    CommitLog, Envelope, MemoryLog, PartitionId,
    envelope::Body,
    event::{RowsAppended, RowsDeleted, RowsUpdated},
};

use super::*;
use crate::{
    Projector,
    catalog::{ColumnDef, TableDef, VectorMetric},
    schema::ColumnType,
};

/// A row of the test table: (name, n, vector present).
type Row = (String, i64, bool);

fn table() -> Arc<TableDef> {
    Arc::new(TableDef {
        name: "t".into(),
        id: "t1".into(),
        columns: vec![
            ColumnDef {
                name: "name".into(),
                data_type: ColumnType::Utf8,
                nullable: false,
            },
            ColumnDef {
                name: "n".into(),
                data_type: ColumnType::Int64,
                nullable: true,
            },
            ColumnDef {
                name: "v".into(),
                data_type: ColumnType::Vector { dim: 2 },
                nullable: true,
            },
        ],
        vector_column: Some("v".into()),
        vector_metric: Some(VectorMetric::L2),
        ..Default::default()
    })
}

/// The table of [`table`] as a platform dataset (with a document index).
fn dataset() -> Arc<TableDef> {
    Arc::new(TableDef {
        dataset: true,
        ..(*table()).clone()
    })
}

fn batch(rows: &[Row]) -> RecordBatch {
    let mut vectors = FixedSizeListBuilder::new(Float32Builder::new(), 2);
    for (_, n, has) in rows {
        if *has {
            vectors.values().append_value(*n as f32);
            vectors.values().append_value(1.0);
            vectors.append(true);
        } else {
            vectors.values().append_null();
            vectors.values().append_null();
            vectors.append(false);
        }
    }
    RecordBatch::try_new(
        rows::data_schema(&table()),
        vec![
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.0.clone()),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(vectors.finish()),
        ],
    )
    .unwrap()
}

fn event(body: Body) -> Envelope {
    Envelope {
        body: Some(body),
        ..Default::default()
    }
}

struct Harness {
    /// The table's definition the projection opens with (a restart picks up a new one).
    table: Arc<TableDef>,
    dir: tempfile::TempDir,
    log: Arc<dyn CommitLog>,
    options: TableOptions,
    projector: Option<Projector<Arc<TableSnapshot>>>,
    handle: Option<TableHandle>,
    /// Whether the store is known as the local file system, so segments are read mapped
    /// into memory; when not, they are read through the object store, as from a bucket.
    mapped: bool,
}

impl Harness {
    async fn new(options: TableOptions) -> Harness {
        Self::of(table(), options).await
    }

    async fn of(table: Arc<TableDef>, options: TableOptions) -> Harness {
        let mut harness = Harness {
            table,
            dir: tempfile::tempdir().unwrap(),
            log: Arc::new(MemoryLog::new()),
            options,
            projector: None,
            handle: None,
            mapped: true,
        };
        harness.start().await;
        harness
    }

    fn store(&self) -> TableStore {
        let local = Arc::new(LocalFileSystem::new_with_prefix(self.dir.path()).unwrap());
        TableStore {
            store: local.clone(),
            url: ObjectStoreUrl::parse("strata://db1").unwrap(),
            prefix: Path::from("db1/t1"),
            index_dir: self.dir.path().join("indexes"),
            local: self.mapped.then_some(local),
        }
    }

    /// Removes the rows segments store whole, as if they were written before they did.
    fn forget_stored_rows(&self) {
        let Ok(segments) = std::fs::read_dir(self.dir.path().join("indexes")) else {
            return;
        };
        // A retired segment's index goes when its last reader does, which may be now: one
        // that is gone meanwhile has nothing to forget.
        for segment in segments.flatten() {
            match std::fs::remove_file(segment.path().join("rows.schema")) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    panic!("cannot remove {}: {error}", segment.path().display())
                }
                _ => {}
            }
        }
    }

    fn partition() -> PartitionId {
        PartitionId::table("a", "db", "t")
    }

    async fn start(&mut self) {
        let (projection, handle) = TableProjection::open(
            self.table.clone(),
            Self::partition(),
            self.store(),
            self.options.clone(),
        )
        .await
        .unwrap();
        self.projector = Some(
            Projector::start(self.log.clone(), projection)
                .await
                .unwrap(),
        );
        self.handle = Some(handle);
    }

    /// Drops the running projection (as a crash would: nothing is flushed) and starts again.
    async fn restart(&mut self) {
        self.handle.as_ref().unwrap().close().await;
        self.projector = None;
        self.handle = None;
        self.start().await;
    }

    async fn write(&self, body: Body) {
        let range = self
            .log
            .append(&Self::partition(), vec![event(body)])
            .await
            .unwrap();
        self.projector
            .as_ref()
            .unwrap()
            .wait_for(range.start)
            .await
            .unwrap();
    }

    fn snapshot(&self) -> Arc<TableSnapshot> {
        self.projector.as_ref().unwrap().snapshot()
    }

    async fn query(&self) -> BTreeMap<u64, Row> {
        self.query_scan(TableScan::new(self.snapshot())).await
    }

    /// What a scan of the rows with ids in `rows` alone reads.
    async fn query_within(&self, rows: RoaringTreemap) -> BTreeMap<u64, Row> {
        self.query_within_where(rows, "true").await
    }

    /// What a scan of the rows with ids in `rows` alone reads of those where `condition`
    /// holds (a filter the scan prunes row groups and pages by).
    async fn query_within_where(
        &self,
        rows: RoaringTreemap,
        condition: &str,
    ) -> BTreeMap<u64, Row> {
        let snapshot = self.snapshot();
        let within = RowsWithin::new(&snapshot, Arc::new(rows));
        let scan = TableScan::new(snapshot).within(Arc::new(within));
        self.query_scan_where(scan, condition).await
    }

    /// What reading the rows with ids in `rows` by id (as a search reads its hits) returns.
    async fn query_by_id(&self, rows: &RoaringTreemap) -> BTreeMap<u64, Row> {
        let ids: Vec<u64> = rows.iter().collect();
        let columns = ["name".to_owned(), "n".to_owned(), "v".to_owned()];
        let batch = self.snapshot().rows_by_id(&ids, Some(&columns)).await;
        let batch = crate::table::provider::strings_as_declared(&batch.unwrap()).unwrap();
        let ids = batch.column(0).as_primitive::<UInt64Type>();
        let names = batch.column(1).as_string::<i32>();
        let ns = batch.column(2).as_primitive::<Int64Type>();
        let mut out = BTreeMap::new();
        for i in 0..batch.num_rows() {
            let row = (
                names.value(i).to_owned(),
                ns.value(i),
                !batch.column(3).is_null(i),
            );
            let previous = out.insert(ids.value(i), row);
            assert!(previous.is_none(), "row id {} read twice", ids.value(i));
        }
        out
    }

    async fn query_scan(&self, scan: TableScan) -> BTreeMap<u64, Row> {
        self.query_scan_where(scan, "true").await
    }

    async fn query_scan_where(&self, scan: TableScan, condition: &str) -> BTreeMap<u64, Row> {
        let snapshot = self.snapshot();
        let ctx = SessionContext::new();
        ctx.register_object_store(snapshot.store.url.as_ref(), snapshot.store.store.clone());
        ctx.register_table("t", Arc::new(scan)).unwrap();
        let batches = ctx
            .sql(&format!(
                "SELECT _row_id, name, n, v IS NOT NULL AS has_v FROM t WHERE {condition}"
            ))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let mut out = BTreeMap::new();
        for batch in batches {
            let ids = batch.column(0).as_primitive::<UInt64Type>();
            let names = batch.column(1).as_string_view();
            let ns = batch.column(2).as_primitive::<Int64Type>();
            let has = batch.column(3).as_boolean();
            for i in 0..batch.num_rows() {
                let previous = out.insert(
                    ids.value(i),
                    (names.value(i).to_owned(), ns.value(i), has.value(i)),
                );
                assert!(previous.is_none(), "row id {} read twice", ids.value(i));
            }
        }
        out
    }
}

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<Row>),
    Delete(Vec<prop::sample::Index>),
    Update(Vec<prop::sample::Index>, i64),
    Flush,
    Compact,
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    let row = ("[a-z]{1,6}", -100i64..100, any::<bool>());
    prop_oneof![
        4 => prop::collection::vec(row, 1..20).prop_map(Op::Append),
        2 => prop::collection::vec(any::<prop::sample::Index>(), 1..6).prop_map(Op::Delete),
        2 => (prop::collection::vec(any::<prop::sample::Index>(), 1..4), -100i64..100)
            .prop_map(|(i, n)| Op::Update(i, n)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Restart),
    ]
}

/// Picks existing row ids of the model by index, deduplicated and ascending.
fn pick(model: &BTreeMap<u64, Row>, picks: &[prop::sample::Index]) -> Vec<u64> {
    if model.is_empty() {
        return Vec::new();
    }
    let keys: Vec<u64> = model.keys().copied().collect();
    let mut ids: Vec<u64> = picks.iter().map(|p| keys[p.index(keys.len())]).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Rows `10 i .. 10 i + 10`, named `r<i>`, appended as one event.
fn ten_rows(i: u64) -> Body {
    let rows: Vec<Row> = (0..10).map(|j| (format!("r{i}"), j, false)).collect();
    Body::RowsAppended(RowsAppended {
        table_id: "t1".into(),
        first_row_id: i * 10,
        row_count: 10,
        arrow_ipc: rows::encode_ipc(&batch(&rows)).unwrap().into(),
        ..Default::default()
    })
}

/// The live row ids a document search finds (a dataset's: every segment's document index and
/// every memtable batch's, merged in the background or not).
fn documents(snapshot: &TableSnapshot) -> Vec<u64> {
    let found = snapshot
        .search_documents(
            &tantivy::query::AllQuery,
            100_000,
            docs::Deadline::default(),
        )
        .unwrap();
    let mut ids: Vec<u64> = found.hits.iter().map(|h| h.row_id).collect();
    ids.sort_unstable();
    assert_eq!(found.total, ids.len() as u64);
    ids
}

async fn run(ops: Vec<Op>, options: TableOptions) {
    run_on(table(), ops, options).await
}

async fn run_on(table: Arc<TableDef>, ops: Vec<Op>, options: TableOptions) {
    let dataset = table.dataset;
    let mut harness = Harness::of(table, options).await;
    let mut model: BTreeMap<u64, Row> = BTreeMap::new();
    let mut next_id = 0u64;
    for op in ops {
        match op {
            Op::Append(rows) => {
                let ipc = rows::encode_ipc(&batch(&rows)).unwrap();
                harness
                    .write(Body::RowsAppended(RowsAppended {
                        table_id: "t1".into(),
                        first_row_id: next_id,
                        row_count: rows.len() as u64,
                        arrow_ipc: ipc.into(),
                        vector_count: rows.iter().filter(|r| r.2).count() as u64,
                        ..Default::default()
                    }))
                    .await;
                for row in rows {
                    model.insert(next_id, row);
                    next_id += 1;
                }
            }
            Op::Delete(picks) => {
                let ids = pick(&model, &picks);
                harness
                    .write(Body::RowsDeleted(RowsDeleted {
                        table_id: "t1".into(),
                        row_ids: ids.clone(),
                        vector_count: 0,
                    }))
                    .await;
                for id in ids {
                    model.remove(&id);
                }
            }
            Op::Update(picks, n) => {
                let ids = pick(&model, &picks);
                let rows: Vec<Row> = ids
                    .iter()
                    .map(|id| (format!("u{id}"), n, model[id].2))
                    .collect();
                let ipc = rows::encode_ipc(&batch(&rows)).unwrap();
                harness
                    .write(Body::RowsUpdated(RowsUpdated {
                        table_id: "t1".into(),
                        row_ids: ids.clone(),
                        arrow_ipc: ipc.into(),
                        vectors_removed: 0,
                        vectors_added: 0,
                    }))
                    .await;
                for (id, row) in ids.into_iter().zip(rows) {
                    model.insert(id, row);
                }
            }
            Op::Flush => harness.handle.as_ref().unwrap().flush().await.unwrap(),
            Op::Compact => harness.handle.as_ref().unwrap().compact().await.unwrap(),
            Op::Restart => harness.restart().await,
        }
        let snapshot = harness.snapshot();
        if dataset {
            let live: Vec<u64> = model.keys().copied().collect();
            assert_eq!(documents(&snapshot), live);
        }
        assert_eq!(snapshot.live_rows, model.len() as u64);
        assert_eq!(
            snapshot.live_vectors,
            model.values().filter(|r| r.2).count() as u64
        );
    }
    assert_eq!(harness.query().await, model);
    // A scan within some rows: every third id left out, and ids of deleted rows and of rows
    // never written asked for too.
    let asked: RoaringTreemap = (0..next_id + 5).filter(|id| id % 3 != 0).collect();
    let within: BTreeMap<u64, Row> = model
        .iter()
        .filter(|(id, _)| asked.contains(**id))
        .map(|(id, row)| (*id, row.clone()))
        .collect();
    assert_eq!(harness.query_within(asked.clone()).await, within);
    assert_eq!(harness.query_by_id(&asked).await, within, "by row id");
    // Within them, and with a condition the scan prunes row groups and pages by.
    let mut ns: Vec<i64> = within.values().map(|row| row.1).collect();
    ns.sort();
    let least = ns.get(ns.len() / 2).copied().unwrap_or(0);
    let some: BTreeMap<u64, Row> = (within.iter())
        .filter(|(_, row)| row.1 >= least)
        .map(|(id, row)| (*id, row.clone()))
        .collect();
    assert_eq!(
        harness
            .query_within_where(asked.clone(), &format!("n >= {least}"))
            .await,
        some
    );
    // And one block of ids: segments wholly in it, and segments that it cuts.
    let block: RoaringTreemap = (next_id / 3..next_id * 2 / 3).collect();
    let in_block: BTreeMap<u64, Row> = model
        .range(next_id / 3..next_id * 2 / 3)
        .map(|(id, row)| (*id, row.clone()))
        .collect();
    assert_eq!(harness.query_within(block.clone()).await, in_block);
    // Segments written before they stored their rows whole: hits are read from the Parquet
    // files, mapped; then through the object store, as from a bucket, after the restart.
    let stored = |harness: &Harness| {
        let snapshot = harness.snapshot();
        let segments = snapshot.segments.iter();
        segments
            .map(|s| (s.seq, s.index.as_ref().is_some_and(|i| i.rows.is_some())))
            .collect::<BTreeMap<u64, bool>>()
    };
    let before = stored(&harness);
    assert!(before.values().all(|s| *s), "every segment stores its rows");
    harness.forget_stored_rows();
    harness.restart().await;
    // A segment the restart's replay flushes stores its rows; the others no longer do.
    let after = stored(&harness);
    assert!(
        after
            .iter()
            .all(|(seq, s)| !*s || !before.contains_key(seq)),
        "a segment whose stored rows are gone reads from Parquet"
    );
    assert_eq!(
        harness.query_by_id(&asked).await,
        within,
        "by row id, from Parquet"
    );
    harness.mapped = false;
    harness.restart().await;
    assert_eq!(harness.query().await, model, "after a final restart");
    assert_eq!(
        harness.query_by_id(&asked).await,
        within,
        "by row id, through the object store"
    );
    assert_eq!(
        harness.query_within(asked).await,
        within,
        "after a final restart"
    );
    assert_eq!(
        harness.query_within(block).await,
        in_block,
        "after a final restart"
    );
}

fn small() -> TableOptions {
    TableOptions {
        flush_rows: 25,
        flush_bytes: 1 << 30,
        memtable_batches: 4,
        compact_min_segments: 3,
        small_segment_rows: 40,
        ..TableOptions::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn the_segment_store_reads_back_what_a_model_holds(ops in prop::collection::vec(op(), 1..40)) {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(run(ops, small()));
    }

    /// The same for a dataset, whose memtable merges in the background with its document
    /// index built there: what a document search finds matches the model too.
    #[test]
    fn a_datasets_documents_read_back_what_a_model_holds(ops in prop::collection::vec(op(), 1..40)) {
        let dataset = dataset();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(run_on(dataset, ops, TableOptions { flush_rows: 120, ..small() }));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_replays_only_what_follows_the_manifest() {
    let mut harness = Harness::new(TableOptions::default()).await;
    for i in 0..5 {
        let ipc = rows::encode_ipc(&batch(&[(format!("r{i}"), i, true)])).unwrap();
        harness
            .write(Body::RowsAppended(RowsAppended {
                table_id: "t1".into(),
                first_row_id: i as u64,
                row_count: 1,
                arrow_ipc: ipc.into(),
                vector_count: 1,
                ..Default::default()
            }))
            .await;
    }
    harness.handle.as_ref().unwrap().flush().await.unwrap();
    let (projection, _) = TableProjection::open(
        table(),
        Harness::partition(),
        harness.store(),
        TableOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(projection.checkpoint().next_offset, 5);
    harness.restart().await;
    let snapshot = harness.snapshot();
    assert_eq!((snapshot.segments.len(), snapshot.memtable.len()), (1, 0));
    assert_eq!(harness.query().await.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_another_incarnation_are_ignored() {
    let harness = Harness::new(TableOptions::default()).await;
    let ipc = rows::encode_ipc(&batch(&[("x".into(), 1, false)])).unwrap();
    harness
        .write(Body::RowsAppended(RowsAppended {
            table_id: "an-older-table".into(),
            first_row_id: 0,
            row_count: 1,
            arrow_ipc: ipc.into(),
            vector_count: 0,
            ..Default::default()
        }))
        .await;
    assert!(harness.query().await.is_empty());
}

/// A table whose columns grew, as a dataset's do: a column added (nullable) and one retyped to
/// text. Its older rows (in a segment, and in the log after the manifest) read in the new
/// schema, through SQL, by row id and after a compaction: nulls for the new column, the old
/// numbers as text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_written_before_the_columns_grew_read_in_the_new_schema() {
    let mut harness = Harness::new(TableOptions {
        compact_min_segments: 2,
        ..TableOptions::default()
    })
    .await;
    let append = |first: u64, rows: Vec<Row>| {
        let ipc = rows::encode_ipc(&batch(&rows)).unwrap();
        Body::RowsAppended(RowsAppended {
            table_id: "t1".into(),
            first_row_id: first,
            row_count: rows.len() as u64,
            arrow_ipc: ipc.into(),
            vector_count: 0,
            ..Default::default()
        })
    };
    harness
        .write(append(
            0,
            vec![("a".into(), 1, false), ("b".into(), 2, false)],
        ))
        .await;
    harness.handle.as_ref().unwrap().flush().await.unwrap();
    harness.write(append(2, vec![("c".into(), 3, false)])).await;

    let mut grown = (*table()).clone();
    grown.columns[1].data_type = ColumnType::Utf8;
    grown.columns.push(ColumnDef {
        name: "extra".into(),
        data_type: ColumnType::Utf8,
        nullable: true,
    });
    harness.table = Arc::new(grown);
    harness.restart().await;
    let snapshot = harness.snapshot();
    assert_eq!((snapshot.segments.len(), snapshot.memtable.len()), (1, 1));

    // A row written in the new schema.
    let new_row = RecordBatch::try_new(
        rows::data_schema(&harness.table),
        vec![
            Arc::new(StringArray::from(vec!["d"])),
            Arc::new(StringArray::from(vec!["four"])),
            Arc::new(vectors_of(1)),
            Arc::new(StringArray::from(vec!["e"])),
        ],
    )
    .unwrap();
    harness
        .write(Body::RowsAppended(RowsAppended {
            table_id: "t1".into(),
            first_row_id: 3,
            row_count: 1,
            arrow_ipc: rows::encode_ipc(&new_row).unwrap().into(),
            vector_count: 0,
            ..Default::default()
        }))
        .await;

    let expected = vec![
        (0, "a", "1", None),
        (1, "b", "2", None),
        (2, "c", "3", None),
        (3, "d", "four", Some("e")),
    ];
    assert_eq!(grown_rows_by_sql(&harness).await, expected, "by SQL");
    assert_eq!(grown_rows_by_id(&harness).await, expected, "by row id");
    let handle = harness.handle.as_ref().unwrap();
    handle.flush().await.unwrap();
    handle.compact().await.unwrap();
    harness.restart().await;
    assert_eq!(harness.snapshot().segments.len(), 1, "compacted into one");
    assert_eq!(
        grown_rows_by_sql(&harness).await,
        expected,
        "after compaction"
    );
    assert_eq!(
        grown_rows_by_id(&harness).await,
        expected,
        "by id after compaction"
    );
}

#[tokio::test]
async fn rows_with_a_column_the_definition_lacks_stop_the_projection_rather_than_lose_it() {
    let harness = Harness::new(TableOptions::default()).await;
    let mut grown = (*table()).clone();
    grown.columns.push(ColumnDef {
        name: "extra".into(),
        data_type: ColumnType::Utf8,
        nullable: true,
    });
    let batch = RecordBatch::try_new(
        rows::data_schema(&grown),
        vec![
            Arc::new(StringArray::from(vec!["d"])),
            Arc::new(arrow::array::Int64Array::from(vec![4])),
            Arc::new(vectors_of(1)),
            Arc::new(StringArray::from(vec!["kept"])),
        ],
    )
    .unwrap();
    let body = Body::RowsAppended(RowsAppended {
        table_id: "t1".into(),
        first_row_id: 0,
        row_count: 1,
        arrow_ipc: rows::encode_ipc(&batch).unwrap().into(),
        vector_count: 0,
        ..Default::default()
    });
    let range = harness
        .log
        .append(&Harness::partition(), vec![event(body)])
        .await
        .unwrap();
    let error = harness
        .projector
        .as_ref()
        .unwrap()
        .wait_for(range.start)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("column \"extra\", which the table's definition lacks"),
        "{error}"
    );
}

/// `n` null vectors of the test table's vector column.
fn vectors_of(n: usize) -> arrow::array::FixedSizeListArray {
    let mut vectors = FixedSizeListBuilder::new(Float32Builder::new(), 2);
    for _ in 0..n {
        vectors.values().append_null();
        vectors.values().append_null();
        vectors.append(false);
    }
    vectors.finish()
}

type GrownRow = (u64, &'static str, &'static str, Option<&'static str>);

fn leak(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

fn grown_rows(batches: &[RecordBatch]) -> Vec<GrownRow> {
    let mut out = Vec::new();
    for batch in batches {
        let batch = crate::table::provider::strings_as_declared(batch).unwrap();
        let ids = batch.column(0).as_primitive::<UInt64Type>();
        let (names, ns, extras) = (
            batch.column(1).as_string::<i32>(),
            batch.column(2).as_string::<i32>(),
            batch.column(3).as_string::<i32>(),
        );
        for i in 0..batch.num_rows() {
            out.push((
                ids.value(i),
                leak(names.value(i)),
                leak(ns.value(i)),
                (!extras.is_null(i)).then(|| leak(extras.value(i))),
            ));
        }
    }
    out.sort();
    out
}

async fn grown_rows_by_sql(harness: &Harness) -> Vec<GrownRow> {
    let snapshot = harness.snapshot();
    let ctx = SessionContext::new();
    ctx.register_object_store(snapshot.store.url.as_ref(), snapshot.store.store.clone());
    ctx.register_table("t", Arc::new(TableScan::new(snapshot)))
        .unwrap();
    let batches = ctx
        .sql("SELECT _row_id, name, n, extra FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    grown_rows(&batches)
}

async fn grown_rows_by_id(harness: &Harness) -> Vec<GrownRow> {
    let columns = ["name".to_owned(), "n".to_owned(), "extra".to_owned()];
    let batch = harness
        .snapshot()
        .rows_by_id(&[0, 1, 2, 3], Some(&columns))
        .await
        .unwrap();
    grown_rows(&[batch])
}

fn metrics_table() -> Arc<TableDef> {
    let column = |name: &str, data_type: ColumnType, nullable: bool| ColumnDef {
        name: name.into(),
        data_type,
        nullable,
    };
    Arc::new(TableDef {
        name: "t".into(),
        id: "t1".into(),
        columns: vec![
            column(
                "@timestamp",
                ColumnType::Timestamp {
                    unit: crate::schema::TimestampUnit::Milliseconds,
                    utc: true,
                },
                false,
            ),
            column("_series", ColumnType::UInt64, false),
            column("value", ColumnType::Float64, false),
            column("__name__", ColumnType::Utf8, true),
            column("job", ColumnType::Utf8, true),
        ],
        dataset: true,
        metrics: true,
        ..Default::default()
    })
}

/// Samples of `up{job=...}`: (job, time, value), from row id `first`.
fn samples(first: u64, rows: &[(&str, i64, f64)]) -> Body {
    use arrow::array::{Float64Array, TimestampMillisecondArray, UInt64Array};
    let batch = RecordBatch::try_new(
        rows::data_schema(&metrics_table()),
        vec![
            Arc::new(
                TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.1))
                    .with_timezone("UTC"),
            ),
            Arc::new(UInt64Array::from_iter_values(
                rows.iter()
                    .map(|r| series::series_id([("__name__", "up"), ("job", r.0)])),
            )),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|_| "up"))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        ],
    )
    .unwrap();
    Body::RowsAppended(RowsAppended {
        table_id: "t1".into(),
        first_row_id: first,
        row_count: rows.len() as u64,
        arrow_ipc: rows::encode_ipc(&batch).unwrap().into(),
        ..Default::default()
    })
}

/// Every sample of the table's series with `job`, through the series sets of its memtable
/// and segments, merged by time (the later row winning).
fn series_samples(snapshot: &TableSnapshot, job: &str) -> Vec<(i64, f64)> {
    let spec = snapshot.index.as_deref();
    let mut points = Vec::new();
    for segment in &snapshot.segments {
        let set = segment
            .index
            .as_ref()
            .and_then(|i| i.series.as_ref())
            .unwrap();
        for slot in set.select(&[("job", job)], |_| true) {
            set.read(slot, i64::MIN, i64::MAX, &segment.deleted, &mut points)
                .unwrap();
        }
    }
    for batch in &snapshot.memtable {
        let set = batch.series_set(spec).unwrap().unwrap();
        for slot in set.select(&[("job", job)], |_| true) {
            set.read(slot, i64::MIN, i64::MAX, &batch.deleted, &mut points)
                .unwrap();
        }
    }
    points.sort_by_key(|p| (p.t, p.row));
    let mut merged: Vec<(i64, f64)> = Vec::new();
    for p in points {
        match merged.last_mut() {
            Some(last) if last.0 == p.t => last.1 = p.v,
            _ => merged.push((p.t, p.v)),
        }
    }
    merged
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_table_keeps_its_series_in_the_memtable_segments_and_compactions() {
    let mut harness = Harness {
        table: metrics_table(),
        dir: tempfile::tempdir().unwrap(),
        log: Arc::new(MemoryLog::new()),
        options: TableOptions {
            compact_min_segments: 2,
            ..TableOptions::default()
        },
        projector: None,
        handle: None,
        mapped: true,
    };
    harness.start().await;
    harness
        .write(samples(
            0,
            &[("a", 1000, 1.0), ("b", 1000, 10.0), ("a", 2000, 2.0)],
        ))
        .await;
    assert_eq!(
        series_samples(&harness.handle.as_ref().unwrap().snapshot(), "a"),
        [(1000, 1.0), (2000, 2.0)]
    );
    harness.handle.as_ref().unwrap().flush().await.unwrap();
    let snapshot = harness.handle.as_ref().unwrap().snapshot();
    assert!(snapshot.memtable.is_empty());
    let set = snapshot.segments[0]
        .index
        .as_ref()
        .unwrap()
        .series
        .as_ref()
        .unwrap();
    assert_eq!(set.series().len(), 2);
    assert!(snapshot.segments[0].index.as_ref().unwrap().docs.is_none());
    // A rewrite of a time, in a later segment, wins.
    harness
        .write(samples(3, &[("a", 2000, 20.0), ("a", 3000, 3.0)]))
        .await;
    harness.handle.as_ref().unwrap().flush().await.unwrap();
    assert_eq!(
        series_samples(&harness.handle.as_ref().unwrap().snapshot(), "a"),
        [(1000, 1.0), (2000, 20.0), (3000, 3.0)]
    );
    // Deleted rows are not read; the index comes back after a restart, and a compaction's
    // segment has the series of both.
    harness
        .write(Body::RowsDeleted(RowsDeleted {
            table_id: "t1".into(),
            row_ids: vec![0],
            vector_count: 0,
        }))
        .await;
    harness.restart().await;
    assert_eq!(
        series_samples(&harness.handle.as_ref().unwrap().snapshot(), "a"),
        [(2000, 20.0), (3000, 3.0)]
    );
    harness.handle.as_ref().unwrap().compact().await.unwrap();
    let snapshot = harness.handle.as_ref().unwrap().snapshot();
    assert_eq!(snapshot.segments.len(), 1, "{:?}", snapshot.segments);
    assert_eq!(series_samples(&snapshot, "a"), [(2000, 20.0), (3000, 3.0)]);
    assert_eq!(series_samples(&snapshot, "b"), [(1000, 10.0)]);
}

/// A dataset's memtable merges in the background once it holds more than `memtable_batches`
/// batches, into a batch whose document index is built before it is published: no search
/// builds it. Rows deleted meanwhile stay deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_datasets_memtable_merges_in_the_background_with_its_index_built() {
    let dataset = dataset();
    let options = TableOptions {
        flush_rows: 1_000_000,
        memtable_batches: 4,
        ..TableOptions::default()
    };
    let harness = Harness::of(dataset, options).await;
    // A searched dataset indexes its batches as they are applied and merged.
    documents(&harness.handle.as_ref().unwrap().snapshot());
    for i in 0..12u64 {
        harness.write(ten_rows(i)).await;
    }
    harness
        .write(Body::RowsDeleted(RowsDeleted {
            table_id: "t1".into(),
            row_ids: vec![0, 55, 119],
            vector_count: 0,
        }))
        .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let merged = loop {
        // What the table published; readers get it at the next write or maintenance tick.
        let snapshot = harness.handle.as_ref().unwrap().snapshot();
        let big = snapshot.memtable.iter().find(|m| m.batch.num_rows() > 10);
        if let Some(big) = big.filter(|_| snapshot.memtable.len() <= 4) {
            break (snapshot.clone(), big.docs.lock().is_some());
        }
        assert!(std::time::Instant::now() < deadline, "no merge happened");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let (snapshot, built) = merged;
    assert!(
        built,
        "the merged batch's document index is built before it is published"
    );
    let live: Vec<u64> = (0..120).filter(|id| ![0, 55, 119].contains(id)).collect();
    assert_eq!(documents(&snapshot), live);
    assert_eq!(harness.query().await.len(), live.len());
}

/// A memtable's size counts the indexes built over its rows, not its rows alone: a dataset's
/// rows that stay under `flush_bytes` flush once their document index is counted with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memtables_size_counts_the_indexes_over_its_rows() {
    let dataset = Arc::new(TableDef {
        dataset: true,
        fts_columns: vec!["name".into()],
        ..(*table()).clone()
    });
    let rows: Vec<Row> = (0..50)
        .map(|j| (format!("row {j} of the memtable"), j, false))
        .collect();
    let append = || {
        Body::RowsAppended(RowsAppended {
            table_id: "t1".into(),
            first_row_id: 0,
            row_count: 50,
            arrow_ipc: rows::encode_ipc(&batch(&rows)).unwrap().into(),
            ..Default::default()
        })
    };
    let unbounded = TableOptions {
        flush_rows: 1_000_000,
        flush_bytes: usize::MAX,
        ..TableOptions::default()
    };
    let harness = Harness::of(dataset.clone(), unbounded.clone()).await;
    documents(&harness.handle.as_ref().unwrap().snapshot());
    harness.write(append()).await;
    let snapshot = harness.handle.as_ref().unwrap().snapshot();
    let [mem] = &snapshot.memtable[..] else {
        panic!("one memtable batch, not {}", snapshot.memtable.len());
    };
    let rows_alone = batch_bytes(&mem.batch);
    let docs = mem.docs.lock().as_ref().unwrap().memory_bytes;
    let text = mem.text.lock().as_ref().unwrap().memory_bytes();
    assert!(docs > 0 && text > 0, "docs {docs}, text {text}");
    assert_eq!(mem.memory_bytes, rows_alone + docs + text);

    let bounded = TableOptions {
        flush_bytes: rows_alone + 1,
        ..unbounded
    };
    let harness = Harness::of(dataset, bounded).await;
    // Searched, so that its writes are indexed as they are applied and their indexes counted.
    documents(&harness.handle.as_ref().unwrap().snapshot());
    harness.write(append()).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while harness
        .handle
        .as_ref()
        .unwrap()
        .snapshot()
        .segments
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no flush past flush_bytes"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A dataset nobody has searched takes its rows in without indexing them as they are applied:
/// the first search indexes what it reads and marks the dataset searched, so the batches after
/// it are indexed as they are applied; a flush builds a segment's index from the rows of batches
/// that have none. Every search finds every live row either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsearched_dataset_indexes_its_rows_when_searched_or_flushed() {
    let dataset = dataset();
    let options = TableOptions {
        flush_rows: 1_000_000,
        memtable_batches: 1_000,
        ..TableOptions::default()
    };
    let harness = Harness::of(dataset, options).await;
    let built = |snapshot: &TableSnapshot| -> Vec<bool> {
        snapshot
            .memtable
            .iter()
            .map(|m| m.docs.lock().is_some())
            .collect()
    };
    let handle = harness.handle.clone().unwrap();
    for i in 0..3 {
        harness.write(ten_rows(i)).await;
    }
    assert_eq!(
        built(&handle.snapshot()),
        [false; 3],
        "indexed before any search"
    );
    assert!(!handle.snapshot().index.as_ref().unwrap().index_at_apply());

    // The first search builds what it reads, and the next batches come indexed.
    assert_eq!(documents(&handle.snapshot()), (0..30).collect::<Vec<_>>());
    assert_eq!(built(&handle.snapshot()), [true; 3]);
    harness.write(ten_rows(3)).await;
    assert_eq!(built(&handle.snapshot()), [true; 4], "not indexed at apply");

    // A flush of batches with and without an index: the segment's is complete.
    let unsearched = Harness::of(harness.table.clone(), harness.options.clone()).await;
    let other = unsearched.handle.clone().unwrap();
    for i in 0..4 {
        unsearched.write(ten_rows(i)).await;
    }
    other.snapshot().memtable[1]
        .docs_index(other.snapshot().index.as_deref())
        .unwrap();
    assert_eq!(built(&other.snapshot()), [false, true, false, false]);
    other.flush().await.unwrap();
    let flushed = other.snapshot();
    assert_eq!((flushed.segments.len(), flushed.memtable.len()), (1, 0));
    assert_eq!(documents(&flushed), (0..40).collect::<Vec<_>>());
}

/// A dataset nobody searches indexes its batches in the background, `index_rows` rows or more
/// at a time, and its flush copies those indexes into its segment's as they are: the segment's
/// index is then several tantivy segments, with the rows deleted from them marked deleted.
/// Searches find every live row after the flush, after a restart (which opens the copied index
/// from its files) and after a compaction (which merges such indexes into one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsearched_datasets_rows_are_indexed_in_the_background_and_copied_by_its_flush() {
    let dataset = dataset();
    let options = TableOptions {
        flush_rows: 1_000_000,
        memtable_batches: 1_000,
        index_rows: 30,
        compact_min_segments: 2,
        ..TableOptions::default()
    };
    let mut harness = Harness::of(dataset.clone(), options.clone()).await;
    let handle = harness.handle.clone().unwrap();
    for i in 0..10 {
        harness.write(ten_rows(i)).await;
    }
    let unbuilt = |snapshot: &TableSnapshot| -> usize {
        let memtable = snapshot.memtable.iter();
        memtable
            .filter(|m| m.docs.lock().is_none())
            .map(|m| m.batch.num_rows())
            .sum()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while unbuilt(&handle.snapshot()) >= 30 {
        assert!(
            std::time::Instant::now() < deadline,
            "no background indexing"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let snapshot = handle.snapshot();
    assert!(!snapshot.index.as_ref().unwrap().index_at_apply());
    let indexed = snapshot.memtable.iter().filter(|m| m.docs.lock().is_some());
    assert!(indexed.clone().all(|m| m.batch.num_rows() >= 30));
    assert!(indexed.count() >= 2, "{:?}", snapshot.memtable);

    let gone = [0, 41, 55, 99];
    harness
        .write(Body::RowsDeleted(RowsDeleted {
            table_id: "t1".into(),
            row_ids: gone.to_vec(),
            vector_count: 0,
        }))
        .await;
    handle.flush().await.unwrap();
    let live: Vec<u64> = (0..100).filter(|id| !gone.contains(id)).collect();
    let tantivy_segments = |snapshot: &TableSnapshot| -> Vec<usize> {
        let segments = snapshot.segments.iter();
        segments
            .map(|s| {
                let docs = s.index.as_ref().unwrap().docs.as_ref().unwrap();
                docs.searcher.segment_readers().len()
            })
            .collect()
    };
    let flushed = handle.snapshot();
    assert_eq!((flushed.segments.len(), flushed.memtable.len()), (1, 0));
    let [copied] = tantivy_segments(&flushed)[..] else {
        panic!("one segment");
    };
    assert!(copied >= 2, "the batches' indexes copied, not merged");
    assert_eq!(documents(&flushed), live);

    harness.restart().await;
    assert_eq!(tantivy_segments(&harness.snapshot()), [copied], "opened");
    assert_eq!(documents(&harness.snapshot()), live, "after a restart");

    harness.write(ten_rows(10)).await;
    let handle = harness.handle.clone().unwrap();
    handle.flush().await.unwrap();
    handle.compact().await.unwrap();
    let compacted = handle.snapshot();
    assert_eq!(
        tantivy_segments(&compacted),
        [1],
        "merged by the compaction"
    );
    let mut all = live.clone();
    all.extend(100..110);
    assert_eq!(documents(&compacted), all);

    // A flush while a background job runs waits for it, and loses nothing.
    let busy = Harness::of(dataset, options).await;
    let handle = busy.handle.clone().unwrap();
    for i in 0..10 {
        busy.write(ten_rows(i)).await;
    }
    handle.flush().await.unwrap();
    assert_eq!(documents(&handle.snapshot()), (0..100).collect::<Vec<_>>());
}

/// A flush that comes while a background indexing job runs takes the job's batches and, once
/// the job ends, its index, without indexing those rows again; rows deleted from them while
/// the job ran are deleted in the segment's index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The lock is held across writes on purpose: it holds the job back while the flush comes.
#[allow(clippy::await_holding_lock)]
async fn a_flush_takes_the_index_of_a_running_background_job() {
    let options = TableOptions {
        flush_rows: 1_000_000,
        memtable_batches: 1_000,
        index_rows: 30,
        ..TableOptions::default()
    };
    let harness = Harness::of(dataset(), options).await;
    let handle = harness.handle.clone().unwrap();
    for i in 0..2 {
        harness.write(ten_rows(i)).await;
    }
    // The job, started by the third batch, waits on the first batch's text tail while this
    // holds it (it merges the tails of the batches it takes; nothing else reads it here).
    let first = handle.snapshot().memtable[0].text.clone();
    let held = first.lock();
    harness.write(ten_rows(2)).await;
    harness
        .write(Body::RowsDeleted(RowsDeleted {
            table_id: "t1".into(),
            row_ids: vec![3, 24],
            vector_count: 0,
        }))
        .await;
    let flush = tokio::spawn({
        let handle = handle.clone();
        async move { handle.flush().await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!flush.is_finished(), "the flush waits for the job's index");
    // It took the memtable without waiting: a batch written now is not the segment's.
    harness.write(ten_rows(3)).await;
    drop(held);
    flush.await.unwrap().unwrap();
    let flushed = handle.snapshot();
    assert_eq!((flushed.segments.len(), flushed.memtable.len()), (1, 1));
    assert_eq!(flushed.segments[0].rows, 28);
    let docs = flushed.segments[0]
        .index
        .as_ref()
        .unwrap()
        .docs
        .clone()
        .unwrap();
    assert_eq!(
        docs.searcher.segment_readers().len(),
        1,
        "the job's index alone"
    );
    assert_eq!(docs.searcher.num_docs(), 28);
    let live: Vec<u64> = (0..40).filter(|id| ![3, 24].contains(id)).collect();
    assert_eq!(documents(&flushed), live);
}

/// A dataset nobody has searched keeps no exact-match map of its batches either: a lookup
/// builds the maps of the batches it reads, and finds every live row; a searched dataset builds
/// them as its rows are applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsearched_datasets_exact_maps_are_built_by_the_first_lookup() {
    let dataset = Arc::new(TableDef {
        dataset: true,
        exact_columns: vec!["name".into()],
        ..(*table()).clone()
    });
    let options = TableOptions {
        flush_rows: 1_000_000,
        memtable_batches: 1_000,
        ..TableOptions::default()
    };
    let harness = Harness::of(dataset, options).await;
    let handle = harness.handle.clone().unwrap();
    let built = |snapshot: &TableSnapshot| -> Vec<bool> {
        snapshot
            .memtable
            .iter()
            .map(|m| m.text.lock().is_some())
            .collect()
    };
    for i in 0..3 {
        harness.write(ten_rows(i)).await;
    }
    assert_eq!(built(&handle.snapshot()), [false; 3], "built at apply");
    let found = handle.snapshot().exact_match("name", "r1", &None).unwrap();
    assert_eq!(
        found.iter().collect::<Vec<_>>(),
        (10..20).collect::<Vec<_>>()
    );
    assert_eq!(built(&handle.snapshot()), [true; 3]);
    // A lookup does not make the dataset searched: the next batch comes without its map.
    harness.write(ten_rows(3)).await;
    assert_eq!(built(&handle.snapshot()), [true, true, true, false]);
    // A search does, and the batches after it come with theirs.
    documents(&handle.snapshot());
    harness.write(ten_rows(4)).await;
    assert_eq!(built(&handle.snapshot()), [true, true, true, false, true]);
    let found = handle.snapshot().exact_match("name", "r3", &None).unwrap();
    assert_eq!(found.len(), 10);
}

/// A dataset's segments keep no exact-match index of their own: a lookup reads the value as a
/// keyword of the segment's document index, and finds the live rows there and in the memtable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_datasets_segments_answer_exact_matches_from_their_document_index() {
    let dataset = Arc::new(TableDef {
        dataset: true,
        exact_columns: vec!["name".into()],
        ..(*table()).clone()
    });
    let mut harness = Harness::of(dataset, TableOptions::default()).await;
    for i in 0..3 {
        harness.write(ten_rows(i)).await;
    }
    harness.handle.as_ref().unwrap().flush().await.unwrap();
    // r1 again, in the memtable, and two rows of the segment's r1 deleted.
    harness
        .write(Body::RowsAppended(RowsAppended {
            table_id: "t1".into(),
            first_row_id: 30,
            row_count: 2,
            arrow_ipc: rows::encode_ipc(&batch(&[
                ("r1".into(), 0, false),
                ("r9".into(), 1, false),
            ]))
            .unwrap()
            .into(),
            ..Default::default()
        }))
        .await;
    harness
        .write(Body::RowsDeleted(RowsDeleted {
            table_id: "t1".into(),
            row_ids: vec![11, 12],
            vector_count: 0,
        }))
        .await;
    let check = |snapshot: &TableSnapshot| {
        assert_eq!(snapshot.segments.len(), 1);
        let found = |value: &str| {
            let rows = snapshot.exact_match("name", value, &None).unwrap();
            rows.iter().collect::<Vec<_>>()
        };
        let mut r1: Vec<u64> = (10..20).filter(|id| ![11, 12].contains(id)).collect();
        r1.push(30);
        assert_eq!(found("r1"), r1);
        assert_eq!(found("r2"), (20..30).collect::<Vec<_>>());
        assert_eq!(found("r9"), [31]);
        assert_eq!(found("r"), Vec::<u64>::new(), "a keyword matches whole");
        let allowed = Some(Arc::new(roaring::RoaringTreemap::from_iter([13, 30])));
        let rows = snapshot.exact_match("name", "r1", &allowed).unwrap();
        assert_eq!(rows.iter().collect::<Vec<_>>(), [13, 30]);
    };
    let snapshot = harness.handle.as_ref().unwrap().snapshot();
    let index = snapshot.segments[0].index.as_ref().unwrap();
    assert!(index.text.is_none() && index.docs.is_some());
    let segment_dir = harness
        .dir
        .path()
        .join("indexes")
        .join(format!("{:012}", snapshot.segments[0].seq));
    assert!(segment_dir.join("docs").is_dir());
    assert!(
        !segment_dir.join("text").exists(),
        "an exact-match index built"
    );
    check(&snapshot);
    assert!(digest::index_problems(&snapshot).is_empty());
    // The same after a restart, from the segment read back.
    harness.restart().await;
    check(&harness.handle.as_ref().unwrap().snapshot());
}

/// Writers find no room while a table holds `BACKLOG_FLUSHES` flushes' worth of rows not in a
/// segment, and find it again once a flush has written them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_find_room_once_flushes_catch_up() {
    let options = TableOptions {
        flush_rows: 10,
        ..TableOptions::default()
    };
    let short = std::time::Duration::from_millis(50);
    // Flushes refused (as after `close`): the backlog stays.
    let stuck = Harness::new(options.clone()).await;
    let handle = stuck.handle.clone().unwrap();
    assert!(handle.wait_for_room(short).await);
    handle.close().await;
    for i in 0..BACKLOG_FLUSHES as u64 {
        stuck.write(ten_rows(i)).await;
    }
    assert!(!handle.wait_for_room(short).await, "room past the backlog");

    let flowing = Harness::new(options).await;
    let handle = flowing.handle.clone().unwrap();
    for i in 0..BACKLOG_FLUSHES as u64 {
        flowing.write(ten_rows(i)).await;
    }
    assert!(
        handle
            .wait_for_room(std::time::Duration::from_secs(30))
            .await,
        "no room after the flushes"
    );
    assert!(!handle.snapshot().segments.is_empty());
}

/// A reader's rows within a kept filter are found once per snapshot: a second read of the same
/// snapshot shares them, and the next write's snapshot finds them again, without what it
/// deleted; a scan within them reads exactly them, from segments and the memtable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_within_a_kept_filter_are_found_once_per_snapshot() {
    use tantivy::{Term, query::TermQuery, schema::IndexRecordOption};
    let dataset = dataset();
    let harness = Harness::of(dataset, small()).await;
    let append = |first: u64, count: u64| {
        let rows: Vec<Row> = (first..first + count)
            .map(|id| (format!("r{id}"), (id % 3) as i64, false))
            .collect();
        Body::RowsAppended(RowsAppended {
            table_id: "t1".into(),
            first_row_id: first,
            row_count: count,
            arrow_ipc: rows::encode_ipc(&batch(&rows)).unwrap().into(),
            ..Default::default()
        })
    };
    harness.write(append(0, 60)).await;
    // A flush may be running already (60 rows are past `flush_rows`): wait for its segment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let in_segments = |s: &TableSnapshot| s.segments.iter().map(|s| s.live_rows()).sum::<u64>();
    while in_segments(&harness.handle.as_ref().unwrap().snapshot()) < 60 {
        harness.handle.as_ref().unwrap().flush().await.unwrap();
        assert!(std::time::Instant::now() < deadline, "no flush happened");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    harness.write(append(60, 10)).await;
    let filter = |snapshot: &TableSnapshot| {
        let docs = snapshot
            .index
            .as_ref()
            .and_then(|i| i.docs.clone())
            .unwrap();
        let mut term = Term::from_field_json_path(docs.keyword, "n", true);
        term.append_type_and_fast_value(0i64);
        let query = Box::new(TermQuery::new(term, IndexRecordOption::Basic));
        cached::CachedFilter::new(
            cached::FilterKey::of("n:0", docs.fingerprint()).unwrap(),
            query,
        )
    };
    let read = |snapshot: Arc<TableSnapshot>, within: Arc<RowsWithin>| {
        harness.query_scan(TableScan::new(snapshot).within(within))
    };

    let snapshot = harness.handle.as_ref().unwrap().snapshot();
    assert!(
        !snapshot.segments.is_empty() && !snapshot.memtable.is_empty(),
        "{} segments, {} memtable batches",
        snapshot.segments.len(),
        snapshot.memtable.len()
    );
    let first = snapshot.kept_within(&filter(&snapshot)).unwrap();
    assert!(Arc::ptr_eq(
        &first,
        &snapshot.kept_within(&filter(&snapshot)).unwrap()
    ));
    let expected: Vec<u64> = (0..70).filter(|id| id % 3 == 0).collect();
    let read_ids = |rows: BTreeMap<u64, Row>| rows.into_keys().collect::<Vec<u64>>();
    assert_eq!(
        read_ids(read(snapshot.clone(), first.clone()).await),
        expected
    );

    harness
        .write(Body::RowsDeleted(RowsDeleted {
            table_id: "t1".into(),
            row_ids: vec![3, 63],
            vector_count: 0,
        }))
        .await;
    let snapshot = harness.handle.as_ref().unwrap().snapshot();
    let second = snapshot.kept_within(&filter(&snapshot)).unwrap();
    assert!(!Arc::ptr_eq(&first, &second));
    let expected: Vec<u64> = expected
        .into_iter()
        .filter(|id| ![3, 63].contains(id))
        .collect();
    assert_eq!(second.rows().iter().collect::<Vec<u64>>(), expected);
    assert_eq!(read_ids(read(snapshot, second).await), expected);
}

/// Segments are written in data pages of the configured size: a quarter of the size gives
/// about four times the pages of a wide column, and the rows read back the same either way.
#[test]
fn segments_are_written_in_pages_of_the_configured_size() {
    use arrow::{
        array::UInt64Array,
        datatypes::{DataType, Field, Schema},
    };
    use parquet::{
        arrow::arrow_reader::{
            ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
        },
        file::metadata::PageIndexPolicy,
    };

    let rows = 20_000u64;
    let schema = Arc::new(Schema::new(vec![
        Field::new(rows::ROW_ID, DataType::UInt64, false),
        Field::new("message", DataType::Utf8, false),
    ]));
    // Distinct values, so the dictionary falls back to plain pages early.
    let messages: StringArray = (0..rows)
        .map(|i| {
            Some(format!(
                "{:016x} request {i} took {} ms",
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                i % 977
            ))
        })
        .collect();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(UInt64Array::from_iter_values(0..rows)),
            Arc::new(messages),
        ],
    )
    .unwrap();
    let pages = |page_bytes: usize| {
        let file = bytes::Bytes::from(
            segment::encode_parquet(std::slice::from_ref(&batch), page_bytes).unwrap(),
        );
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
        let metadata = ArrowReaderMetadata::load(&file, options).unwrap();
        let offsets = metadata.metadata().offset_index().unwrap();
        let read: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
            .collect::<std::result::Result<_, _>>()
            .unwrap();
        let read = arrow::compute::concat_batches(&batch.schema(), &read).unwrap();
        assert_eq!(read, batch, "pages of {page_bytes} bytes read back");
        offsets[0][1].page_locations().len()
    };
    let (small, large) = (pages(4 << 10), pages(16 << 10));
    assert!(large >= 20, "{large} pages of 16 KiB");
    assert!(
        small >= 3 * large && small <= 5 * large,
        "{small} pages of 4 KiB against {large} of 16 KiB"
    );
    let default = pages(segment::DEFAULT_PAGE_BYTES);
    assert!(
        small > default && default > large,
        "{default} pages by default"
    );
}

/// k-NN over a segment's graph leaves out deleted rows and rows a filter does not allow, both
/// where few rows are deleted (the graph is searched without a filter, for more, and the
/// deleted dropped) and where many are (searched with one). The graph is searched with `ef`
/// above its size, so the answers are exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn knn_over_a_graph_leaves_out_deleted_and_filtered_rows() {
    let options = TableOptions {
        flush_rows: 1000,
        vectors: vector::VectorOptions {
            graph_min_rows: 0,
            ef_search: 1000,
            ..Default::default()
        },
        ..small()
    };
    let harness = Harness::new(options).await;
    // Row n's vector is (n, 1): its distance to the query is |n - 100.3|.
    let rows: Vec<Row> = (0..200).map(|n| (format!("r{n}"), n, true)).collect();
    harness
        .write(Body::RowsAppended(RowsAppended {
            table_id: "t1".into(),
            first_row_id: 0,
            row_count: rows.len() as u64,
            arrow_ipc: rows::encode_ipc(&batch(&rows)).unwrap().into(),
            vector_count: rows.len() as u64,
            ..Default::default()
        }))
        .await;
    harness.handle.as_ref().unwrap().flush().await.unwrap();
    let delete = |ids: Vec<u64>| {
        harness.write(Body::RowsDeleted(RowsDeleted {
            table_id: "t1".into(),
            row_ids: ids,
            vector_count: 0,
        }))
    };
    let nearest = |allowed: search::Allowed| {
        let snapshot = harness.handle.as_ref().unwrap().snapshot();
        assert_eq!(snapshot.segments.len(), 1);
        assert!(snapshot.memtable.is_empty());
        let hits = snapshot.knn(&[100.3, 1.0], 5, &allowed).unwrap();
        hits.iter().map(|h| h.row_id).collect::<Vec<u64>>()
    };
    assert_eq!(nearest(None), [100, 101, 99, 102, 98]);
    delete(vec![100, 101]).await;
    assert_eq!(nearest(None), [99, 102, 98, 103, 97]);
    delete((92..=108).filter(|n| *n != 100 && *n != 101).collect()).await;
    let snapshot = harness.handle.as_ref().unwrap().snapshot();
    assert_eq!(snapshot.segments[0].deleted.len(), 17);
    assert_eq!(nearest(None), [109, 91, 110, 90, 111]);
    let even: RoaringTreemap = (0..200).filter(|n| n % 2 == 0).collect();
    assert_eq!(nearest(Some(Arc::new(even))), [110, 90, 112, 88, 114]);
}
