use std::{ops::Range, path::Path};

use async_trait::async_trait;
use proptest::prelude::*;
use tempfile::TempDir;

use super::*;
use crate::conformance::event;

/// A FileLog in a temporary directory that lives as long as the log.
#[derive(Debug)]
struct TempLog {
    log: FileLog,
    _dir: TempDir,
}

#[async_trait]
impl CommitLog for TempLog {
    async fn append(&self, p: &PartitionId, events: Vec<Envelope>) -> Result<Range<u64>> {
        self.log.append(p, events).await
    }
    async fn read(&self, p: &PartitionId, from: u64, max: usize) -> Result<Vec<Envelope>> {
        self.log.read(p, from, max).await
    }
    async fn high_water_mark(&self, p: &PartitionId) -> Result<u64> {
        self.log.high_water_mark(p).await
    }
    async fn wait_for(&self, p: &PartitionId, offset: u64) -> Result<()> {
        self.log.wait_for(p, offset).await
    }
    async fn partitions(&self) -> Result<Vec<PartitionId>> {
        self.log.partitions().await
    }
    async fn delete_partition(&self, p: &PartitionId) -> Result<()> {
        self.log.delete_partition(p).await
    }
}

mod conformance_default {
    use super::*;
    crate::commit_log_conformance!(|| async {
        let dir = tempfile::tempdir().unwrap();
        let log = FileLog::open(dir.path(), FileLogOptions::default()).unwrap();
        TempLog { log, _dir: dir }
    });
}

/// The same suite with tiny segments, so that every case crosses segment boundaries.
mod conformance_small_segments {
    use super::*;
    crate::commit_log_conformance!(|| async {
        let dir = tempfile::tempdir().unwrap();
        let log = FileLog::open(dir.path(), small_segments()).unwrap();
        TempLog { log, _dir: dir }
    });
}

fn small_segments() -> FileLogOptions {
    FileLogOptions {
        segment_bytes: 256,
        ..FileLogOptions::default()
    }
}

fn table() -> PartitionId {
    PartitionId::table("a", "d", "t")
}

fn ids(events: &[Envelope]) -> Vec<String> {
    events.iter().map(|e| e.event_id.clone()).collect()
}

fn segment_files(root: &Path, id: &PartitionId) -> Vec<PathBuf> {
    let dir = root.join("partitions").join(dir_name_of(id));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn reopening_keeps_every_acknowledged_event_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    {
        let log = FileLog::open(dir.path(), small_segments()).unwrap();
        for i in 0..40 {
            let e = event(&format!("e{i}"), 0);
            written.push(e.event_id.clone());
            log.append(&table(), vec![e]).await.unwrap();
        }
    }
    assert!(
        segment_files(dir.path(), &table()).len() > 5,
        "segments should have rolled"
    );
    let log = FileLog::open(dir.path(), small_segments()).unwrap();
    assert_eq!(log.high_water_mark(&table()).await.unwrap(), 40);
    assert_eq!(ids(&log.read(&table(), 0, 100).await.unwrap()), written);
    // Reads that start inside a sealed segment, and appends after reopening.
    assert_eq!(
        ids(&log.read(&table(), 17, 3).await.unwrap()),
        written[17..20]
    );
    assert_eq!(
        log.append(&table(), vec![event("after", 0)]).await.unwrap(),
        40..41
    );
    assert_eq!(log.partitions().await.unwrap(), vec![table()]);
}

#[tokio::test]
async fn a_second_open_of_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _log = FileLog::open(dir.path(), FileLogOptions::default()).unwrap();
    assert!(matches!(
        FileLog::open(dir.path(), FileLogOptions::default()),
        Err(Error::Locked { .. })
    ));
}

#[tokio::test]
async fn a_torn_tail_is_truncated_on_open_and_writing_resumes() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = FileLog::open(dir.path(), FileLogOptions::default()).unwrap();
        log.append(&table(), vec![event("a", 0), event("b", 0)])
            .await
            .unwrap();
    }
    let file = segment_files(dir.path(), &table()).pop().unwrap();
    let good_len = std::fs::metadata(&file).unwrap().len();
    // Half of a frame: a length that promises more bytes than follow.
    let mut torn = Vec::new();
    format::encode_frame(&mut torn, 2, &[event("c", 0).encode_to_vec()]);
    torn.truncate(torn.len() / 2);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(&torn);
    std::fs::write(&file, bytes).unwrap();

    let log = FileLog::open(dir.path(), FileLogOptions::default()).unwrap();
    assert_eq!(std::fs::metadata(&file).unwrap().len(), good_len);
    assert_eq!(log.high_water_mark(&table()).await.unwrap(), 2);
    assert_eq!(
        log.append(&table(), vec![event("d", 0)]).await.unwrap(),
        2..3
    );
    assert_eq!(
        ids(&log.read(&table(), 0, 10).await.unwrap()),
        vec!["a", "b", "d"]
    );
}

#[tokio::test]
async fn corruption_in_a_sealed_segment_is_reported_with_its_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = FileLog::open(dir.path(), small_segments()).unwrap();
        for i in 0..10 {
            log.append(&table(), vec![event(&format!("e{i}"), 0)])
                .await
                .unwrap();
        }
    }
    let first = segment_files(dir.path(), &table()).remove(0);
    let mut bytes = std::fs::read(&first).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&first, bytes).unwrap();

    let log = FileLog::open(dir.path(), small_segments()).unwrap();
    match log.read(&table(), 0, 100).await {
        Err(Error::Corrupt { path, position, .. }) => {
            assert_eq!(path, first);
            assert!(position >= format::HEADER_LEN as u64);
        }
        other => panic!("expected a corruption error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_segment_cut_short_while_being_created_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = FileLog::open(dir.path(), small_segments()).unwrap();
        for i in 0..6 {
            log.append(&table(), vec![event(&format!("e{i}"), 0)])
                .await
                .unwrap();
        }
    }
    // A crash right after creating the next segment file, before its header reached the disk.
    let files = segment_files(dir.path(), &table());
    let end = 6u64;
    let next = files[0].with_file_name(segment::file_name(end));
    std::fs::write(&next, b"STRAT").unwrap();

    let log = FileLog::open(dir.path(), small_segments()).unwrap();
    assert_eq!(log.high_water_mark(&table()).await.unwrap(), 6);
    assert_eq!(
        log.append(&table(), vec![event("e6", 0)]).await.unwrap(),
        6..7
    );
    assert_eq!(log.read(&table(), 0, 100).await.unwrap().len(), 7);
}

#[test]
fn long_and_odd_partition_names_make_valid_distinct_directory_names() {
    let names = [
        "_control".to_owned(),
        "a/b/c".to_owned(),
        "a/b.c".to_owned(),
        "..".to_owned(),
        "x".repeat(1000),
        format!("{}y", "x".repeat(999)),
    ];
    let dirs: BTreeSet<String> = names
        .iter()
        .map(|n| dir_name_of(&PartitionId::new(n.clone()).unwrap()))
        .collect();
    assert_eq!(dirs.len(), names.len());
    for dir in dirs {
        assert!(
            dir.len() <= 200 && !dir.contains('.') && !dir.contains('/'),
            "{dir}"
        );
    }
}

use std::collections::BTreeSet;

#[derive(Debug, Clone)]
enum Damage {
    /// The crash cut the file at this many bytes past the acknowledged end.
    Truncate(prop::sample::Index),
    /// Bytes past the acknowledged end were flipped (a write that never fully reached the disk).
    Flip(Vec<(prop::sample::Index, u8)>),
    /// Garbage was left after the end.
    Garbage(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Damage::Truncate),
        prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..6)
            .prop_map(Damage::Flip),
        prop::collection::vec(any::<u8>(), 1..64).prop_map(Damage::Garbage),
    ]
}

fn batches(max: usize) -> impl Strategy<Value = Vec<Vec<String>>> {
    prop::collection::vec(prop::collection::vec("[a-z]{0,40}", 1..4), 0..max)
}

fn run<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

async fn append_all(log: &FileLog, batches: &[Vec<String>], tag: &str) -> Vec<String> {
    let mut written = Vec::new();
    for (b, batch) in batches.iter().enumerate() {
        let events: Vec<Envelope> = batch
            .iter()
            .enumerate()
            .map(|(i, text)| event(&format!("{tag}{b}.{i}:{text}"), 0))
            .collect();
        written.extend(ids(&events));
        log.append(&table(), events).await.unwrap();
    }
    written
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Whatever happens after the last acknowledged record (a cut, flipped bytes, garbage, in a
    /// log whose segments roll), reopening keeps every acknowledged record, yields nothing but
    /// records that were written, and accepts appends again.
    #[test]
    fn recovery_never_loses_an_acknowledged_record_nor_yields_a_corrupt_one(
        acked in batches(8),
        unacked in batches(4),
        damage in damage(),
        segment_bytes in prop_oneof![Just(200u64), Just(1000), Just(64 << 20)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let options = FileLogOptions { segment_bytes, ..FileLogOptions::default() };
        let (acknowledged, unacknowledged, acked_file, acked_len) = run(async {
            let log = FileLog::open(dir.path(), options.clone()).unwrap();
            let acknowledged = append_all(&log, &acked, "a").await;
            let files = segment_files(dir.path(), &table());
            let acked_file = files.last().cloned();
            let acked_len = acked_file.as_ref().map_or(0, |f| std::fs::metadata(f).unwrap().len());
            let unacknowledged = append_all(&log, &unacked, "u").await;
            (acknowledged, unacknowledged, acked_file, acked_len)
        });
        if let Some(last) = segment_files(dir.path(), &table()).pop() {
            // Damage goes only after the acknowledged end, in the last segment (sealed segments
            // were fully synced before the next one began).
            let floor = if Some(&last) == acked_file.as_ref() { acked_len } else { 0 };
            let mut bytes = std::fs::read(&last).unwrap();
            let floor = floor as usize;
            match &damage {
                Damage::Truncate(at) => {
                    let keep = floor + at.index(bytes.len() - floor + 1);
                    bytes.truncate(keep);
                }
                Damage::Flip(flips) => {
                    let lowest = floor.max(format::HEADER_LEN);
                    if bytes.len() > lowest {
                        let span = bytes.len() - lowest;
                        for (at, mask) in flips {
                            bytes[lowest + at.index(span)] ^= mask;
                        }
                    }
                }
                Damage::Garbage(garbage) => bytes.extend_from_slice(garbage),
            }
            std::fs::write(&last, bytes).unwrap();
        }
        let read = run(async {
            let log = FileLog::open(dir.path(), options.clone()).unwrap();
            let read = ids(&log.read(&table(), 0, 10_000).await.unwrap());
            let end = read.len() as u64;
            prop_assert_eq!(log.high_water_mark(&table()).await.unwrap(), end);
            let range = log.append(&table(), vec![event("again", 0)]).await.unwrap();
            prop_assert_eq!(range, end..end + 1);
            let last = log.read(&table(), end, 1).await.unwrap();
            prop_assert_eq!(ids(&last), vec!["again".to_owned()]);
            Ok(read)
        })?;
        prop_assert!(read.len() >= acknowledged.len());
        prop_assert_eq!(&read[..acknowledged.len()], &acknowledged[..]);
        let extra = &read[acknowledged.len()..];
        prop_assert!(extra.len() <= unacknowledged.len());
        prop_assert_eq!(extra, &unacknowledged[..extra.len()]);
    }
}

/// The frozen format-1 fixture: a log written by the first released FileLog, kept as it was.
fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/filelog-v1")
}

/// What the fixture holds: two partitions, one spread over several segments.
fn fixture_events() -> Vec<(PartitionId, Vec<Envelope>)> {
    let table = PartitionId::table("acme", "shop", "orders");
    let control = PartitionId::control();
    let mut marker = event("marker", 1);
    marker.body = Some(crate::envelope::Body::LeaderEpoch(crate::LeaderEpoch {
        epoch: 1,
        node: "n1".into(),
    }));
    vec![
        (
            control,
            vec![marker.clone(), event("acme", 1), event("beta", 1)],
        ),
        (
            table,
            (0..12).map(|i| event(&format!("order-{i}"), 1)).collect(),
        ),
    ]
}

/// Regenerates the fixture. Run only when a new format version is introduced, for that version:
/// `cargo test -p strata-log write_v1_fixture -- --ignored`.
#[tokio::test]
#[ignore]
async fn write_v1_fixture() {
    let dir = fixture_dir();
    let _ = std::fs::remove_dir_all(&dir);
    let log = FileLog::open(&dir, small_segments()).unwrap();
    for (partition, events) in fixture_events() {
        for event in events {
            log.append(&partition, vec![event]).await.unwrap();
        }
    }
}

#[tokio::test]
async fn the_frozen_v1_fixture_still_reads() {
    let copy = tempfile::tempdir().unwrap();
    let source = fixture_dir().join("partitions");
    assert!(source.exists(), "missing fixture {}", source.display());
    std::fs::create_dir_all(copy.path().join("partitions")).unwrap();
    std::fs::copy(fixture_dir().join("FORMAT"), copy.path().join("FORMAT")).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        let target = copy.path().join("partitions").join(entry.file_name());
        std::fs::create_dir_all(&target).unwrap();
        for file in std::fs::read_dir(entry.path()).unwrap() {
            let file = file.unwrap();
            std::fs::copy(file.path(), target.join(file.file_name())).unwrap();
        }
    }
    let log = FileLog::open(copy.path(), small_segments()).unwrap();
    for (partition, events) in fixture_events() {
        let read = log.read(&partition, 0, 100).await.unwrap();
        assert_eq!(ids(&read), ids(&events), "{partition}");
        for (i, (got, want)) in read.iter().zip(&events).enumerate() {
            assert_eq!(got.offset, i as u64);
            assert_eq!(got.body, want.body);
        }
    }
    assert!(segment_files(copy.path(), &PartitionId::table("acme", "shop", "orders")).len() > 2);
}

#[tokio::test]
async fn a_read_only_view_beside_the_writer_sees_complete_frames_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let writer = FileLog::open(dir.path(), small_segments()).unwrap();
    for i in 0..30 {
        writer
            .append(&table(), vec![event(&format!("e{i}"), 0)])
            .await
            .unwrap();
    }
    // A frame being written: half of it is on disk.
    let file = segment_files(dir.path(), &table()).pop().unwrap();
    let before = std::fs::read(&file).unwrap();
    let mut torn = Vec::new();
    format::encode_frame(&mut torn, 30, &[event("half", 0).encode_to_vec()]);
    torn.truncate(torn.len() / 2);
    let mut bytes = before.clone();
    bytes.extend_from_slice(&torn);
    std::fs::write(&file, &bytes).unwrap();

    let view = FileLog::open_read_only(dir.path()).unwrap();
    assert!(view.is_read_only());
    assert_eq!(view.partitions().await.unwrap(), vec![table()]);
    assert_eq!(view.high_water_mark(&table()).await.unwrap(), 30);
    let read = view.read(&table(), 0, 100).await.unwrap();
    assert_eq!(
        ids(&read),
        (0..30).map(|i| format!("e{i}")).collect::<Vec<_>>()
    );
    // Nothing was repaired behind the writer's back.
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    assert!(matches!(
        view.append(&table(), vec![event("x", 0)]).await,
        Err(Error::ReadOnly { .. })
    ));
    assert!(matches!(
        view.delete_partition(&table()).await,
        Err(Error::ReadOnly { .. })
    ));
    assert_eq!(view.high_water_mark(&table()).await.unwrap(), 30);
}

#[tokio::test]
async fn a_read_only_view_of_a_directory_that_holds_no_log_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        FileLog::open_read_only(dir.path()),
        Err(Error::Io { .. })
    ));
    assert!(!dir.path().join("LOCK").exists());
}
