//! One partition of a FileLog: its segments, and the writer that group-commits appends.
//!
//! Group commit: an append takes its offsets and queues its records, then waits for the durable
//! offset to pass them. One flusher at a time (a blocking thread) takes everything queued, frames
//! it, writes it with one `write`, makes it durable with one `fdatasync`, and publishes the new
//! durable offset, which wakes every waiter of the group at once. Appends that arrive meanwhile form the next
//! group. Because writers that were answered together come back together, the flusher waits a
//! short, bounded moment (at most half the last sync's duration, capped by
//! `group_commit_max_wait`) for the queue to reach the size of the previous group; without that,
//! closed-loop writers settle into alternating half-size groups.
//!
//! A failed write or sync (a full disk, an I/O error) fails its group and every append queued
//! behind it: none of them is acknowledged. The page cache can no longer be trusted past the last
//! durable frame, so the next append first cuts the active segment back to that frame and makes
//! the cut durable, as opening the log would, then writes again: the partition recovers by itself
//! once the disk has room. Offsets of the failed appends are given out again, so an appender
//! knows its outcome by the generation it was queued in (see [`Partition::append`]).

use std::{
    collections::BTreeMap,
    fs::{File, OpenOptions},
    io::Read,
    ops::Range,
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    sync::{
        Arc, Condvar, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use parking_lot::RwLock;
use tokio::sync::watch;

use super::{
    FileLogOptions,
    format::{self, HEADER_LEN, SegmentHeader},
    segment::{self, Segment},
    sync_dir,
};
use crate::{
    Envelope, PartitionId,
    error::{Error, Result},
    watermarks::Watermarks,
};

/// The file in a partition directory holding the partition's full name.
pub(crate) const NAME_FILE: &str = "NAME";

struct Pending {
    /// The offset of the first record, assigned when it was queued.
    base: u64,
    records: Vec<Vec<u8>>,
}

/// What appenders wait on.
#[derive(Clone, Debug, Default)]
struct Durable {
    /// One past the last durable offset.
    end: u64,
    /// Counts recoveries from failed writes: offsets past a failure's durable end are given out
    /// again in the next generation.
    generation: u64,
    /// Set when a write of this generation failed.
    failure: Option<Failure>,
}

/// Why appends stopped succeeding.
#[derive(Clone, Debug)]
struct Failure {
    cause: Arc<str>,
    /// The disk (or the quota) is full: the client may retry once an operator made room.
    storage_full: bool,
    /// The partition was deleted: it never takes a write again.
    permanent: bool,
    /// One past the last durable offset when it happened: appends below it were durable.
    durable_end: u64,
}

impl Failure {
    fn error(&self, partition: &PartitionId) -> Error {
        let partition = partition.to_string();
        let cause = self.cause.to_string();
        match self.storage_full {
            true => Error::StorageFull { partition, cause },
            false => Error::WriteFailed { partition, cause },
        }
    }
}

/// How many past generations' failures are remembered for appenders still waiting on them; an
/// appender older than that is told its write failed, which is never wrong for an unacknowledged
/// write (a client retries it).
const REMEMBERED_FAILURES: usize = 64;

#[derive(Default)]
struct Queue {
    pending: Vec<Pending>,
    /// The offset the next queued record gets.
    next_offset: u64,
    flushing: bool,
    /// The failure of the current generation, if its writes failed.
    failed: Option<Failure>,
    generation: u64,
    /// Failures of recent generations, by generation.
    past_failures: std::collections::VecDeque<(u64, Failure)>,
    /// The flusher must cut the active segment back to its durable length before writing.
    cut_tail: bool,
    last_group: usize,
    last_sync: Duration,
}

/// The segment being appended to. Only the flusher touches it.
struct Active {
    segment: Arc<Segment>,
    len: u64,
    next_offset: u64,
}

pub(crate) struct Partition {
    pub id: PartitionId,
    pub dir: PathBuf,
    options: FileLogOptions,
    watermarks: Arc<Watermarks>,
    segments: RwLock<BTreeMap<u64, Arc<Segment>>>,
    queue: Mutex<Queue>,
    arrivals: Condvar,
    active: parking_lot::Mutex<Active>,
    /// One past the last durable offset, for readers.
    durable: AtomicU64,
    /// The same, with the partition's failure, for appenders to wait on.
    durable_watch: watch::Sender<Durable>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition")
            .field("id", &self.id)
            .field("dir", &self.dir)
            .field("high_water_mark", &self.high_water_mark())
            .finish()
    }
}

impl Partition {
    /// Creates the directory of a new, empty partition under `parent`, atomically: it is built
    /// under a temporary name and renamed into place.
    pub(crate) fn create(
        parent: &Path,
        dir_name: &str,
        id: PartitionId,
        options: FileLogOptions,
        watermarks: Arc<Watermarks>,
    ) -> Result<Partition> {
        let dir = parent.join(dir_name);
        let tmp = parent.join(format!("{dir_name}.tmp"));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(Error::io(&tmp))?;
        }
        std::fs::create_dir(&tmp).map_err(Error::io(&tmp))?;
        let name_path = tmp.join(NAME_FILE);
        std::fs::write(&name_path, id.as_str()).map_err(Error::io(&name_path))?;
        File::open(&name_path)
            .and_then(|f| f.sync_all())
            .map_err(Error::io(&name_path))?;
        create_segment_file(&tmp, 0)?;
        sync_dir(&tmp)?;
        std::fs::rename(&tmp, &dir).map_err(Error::io(&dir))?;
        sync_dir(parent)?;
        Self::open(dir, id, options, watermarks)
    }

    /// Opens a partition directory: checks every segment header, and scans the last segment,
    /// truncating a torn or corrupt tail.
    pub(crate) fn open(
        dir: PathBuf,
        id: PartitionId,
        options: FileLogOptions,
        watermarks: Arc<Watermarks>,
    ) -> Result<Partition> {
        let mut bases = segment_bases(&dir)?;
        if bases.is_empty() {
            create_segment_file(&dir, 0)?;
            sync_dir(&dir)?;
            bases.push(0);
        }
        let (segments, last_base) = sealed_segments(&dir, &bases)?;
        let active = open_active(&dir, &id, last_base)?;
        Ok(Self::assemble(
            dir, id, options, watermarks, segments, active,
        ))
    }

    /// Opens a partition directory that its writer may be appending to, changing nothing: the
    /// last segment is read up to its last complete frame.
    pub(crate) fn open_read_only(
        dir: PathBuf,
        id: PartitionId,
        watermarks: Arc<Watermarks>,
    ) -> Result<Partition> {
        let bases = segment_bases(&dir)?;
        if bases.is_empty() {
            return Err(Error::Corrupt {
                path: dir,
                position: 0,
                reason: "the partition directory holds no segment".to_owned(),
            });
        }
        let (segments, last_base) = sealed_segments(&dir, &bases)?;
        let active = read_tail(&dir, last_base)?;
        Ok(Self::assemble(
            dir,
            id,
            FileLogOptions::default(),
            watermarks,
            segments,
            active,
        ))
    }

    fn assemble(
        dir: PathBuf,
        id: PartitionId,
        options: FileLogOptions,
        watermarks: Arc<Watermarks>,
        mut segments: BTreeMap<u64, Arc<Segment>>,
        active: Active,
    ) -> Partition {
        let next_offset = active.next_offset;
        segments.insert(active.segment.base, active.segment.clone());
        watermarks.publish(&id, next_offset);
        Partition {
            id,
            dir,
            options,
            watermarks,
            segments: RwLock::new(segments),
            queue: Mutex::new(Queue {
                next_offset,
                ..Queue::default()
            }),
            arrivals: Condvar::new(),
            active: parking_lot::Mutex::new(active),
            durable: AtomicU64::new(next_offset),
            durable_watch: watch::channel(Durable {
                end: next_offset,
                ..Durable::default()
            })
            .0,
        }
    }

    pub(crate) fn high_water_mark(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Queues `records` for the next group commit and returns their offsets once they are
    /// durable.
    ///
    /// The outcome is read from the durable end of the generation the records were queued in:
    /// if a later generation started meanwhile (a write failed and the partition recovered),
    /// the records were durable only if they lay below that failure's durable end.
    pub(crate) async fn append(self: &Arc<Self>, records: Vec<Vec<u8>>) -> Result<Range<u64>> {
        let (range, generation) = self.enqueue(records)?;
        let mut durable = self.durable_watch.subscribe();
        let state = durable
            .wait_for(|d| d.generation != generation || d.end >= range.end || d.failure.is_some())
            .await
            .map_err(|_| Error::Closed)?
            .clone();
        if state.generation == generation {
            return match (state.end >= range.end, &state.failure) {
                (true, _) => Ok(range),
                (false, Some(failure)) => Err(failure.error(&self.id)),
                (false, None) => Err(Error::Closed),
            };
        }
        let queue = self.lock_queue();
        let failure = queue
            .past_failures
            .iter()
            .find(|(g, _)| *g == generation)
            .map(|(_, failure)| failure.clone());
        drop(queue);
        match failure {
            Some(failure) if range.end <= failure.durable_end => Ok(range),
            Some(failure) => Err(failure.error(&self.id)),
            None => Err(Error::WriteFailed {
                partition: self.id.to_string(),
                cause: "an earlier write failed and its outcome is no longer known".to_owned(),
            }),
        }
    }

    /// Queues `records`; returns their offsets and the generation they were queued in. After a
    /// failed write, the first append starts the next generation: offsets start again at the
    /// durable end, and the flusher cuts the segment back to it before writing.
    fn enqueue(self: &Arc<Self>, records: Vec<Vec<u8>>) -> Result<(Range<u64>, u64)> {
        let mut queue = self.lock_queue();
        if let Some(failure) = queue.failed.take() {
            if failure.permanent {
                let error = failure.error(&self.id);
                queue.failed = Some(failure);
                return Err(error);
            }
            let generation = queue.generation;
            queue.past_failures.push_back((generation, failure));
            if queue.past_failures.len() > REMEMBERED_FAILURES {
                queue.past_failures.pop_front();
            }
            queue.generation += 1;
            queue.next_offset = self.high_water_mark();
            queue.cut_tail = true;
            let generation = queue.generation;
            self.durable_watch.send_modify(|durable| {
                durable.generation = generation;
                durable.failure = None;
            });
            tracing::info!(partition = %self.id, "writing again after a failed write");
        }
        let base = queue.next_offset;
        let range = base..base + records.len() as u64;
        queue.next_offset = range.end;
        queue.pending.push(Pending { base, records });
        if queue.flushing {
            // The flusher is writing, or gathering a group: it only needs waking once the group
            // it waits for is complete (every wake-up is a context switch the writers pay for).
            if queue.pending.len() >= queue.last_group {
                self.arrivals.notify_one();
            }
        } else {
            queue.flushing = true;
            let partition = Arc::clone(self);
            tokio::task::spawn_blocking(move || partition.flush_loop());
        }
        Ok((range, queue.generation))
    }

    /// Refuses every later append (the partition was deleted).
    pub(crate) fn retire(&self) {
        let mut queue = self.lock_queue();
        self.fail(
            &mut queue,
            "the partition was deleted".to_owned(),
            false,
            true,
        );
    }

    /// Fails every queued append of the current generation with `cause`; later appends start a
    /// new generation unless the failure is `permanent`. A permanent failure stays: a write
    /// that fails after the partition was deleted must not let the next append recover it.
    fn fail(&self, queue: &mut Queue, cause: String, storage_full: bool, permanent: bool) {
        queue.pending.clear();
        if queue.failed.as_ref().is_some_and(|failed| failed.permanent) {
            return;
        }
        let failure = Failure {
            cause: cause.into(),
            storage_full,
            permanent,
            durable_end: self.high_water_mark(),
        };
        queue.failed = Some(failure.clone());
        self.durable_watch
            .send_modify(|durable| durable.failure = Some(failure));
    }

    /// Reads durable events from `from` on, at most `max` of them.
    pub(crate) fn read(&self, from: u64, max: usize) -> Result<Vec<Envelope>> {
        let high_water_mark = self.high_water_mark();
        if from > high_water_mark {
            return Err(Error::OffsetOutOfRange {
                partition: self.id.to_string(),
                offset: from,
                high_water_mark,
            });
        }
        let mut out = Vec::new();
        if from == high_water_mark || max == 0 {
            return Ok(out);
        }
        let segments: Vec<Arc<Segment>> = {
            let segments = self.segments.read();
            let first = segments
                .range(..=from)
                .next_back()
                .map_or(0, |(&base, _)| base);
            segments.range(first..).map(|(_, s)| s.clone()).collect()
        };
        for segment in segments {
            if out.len() >= max || segment.base >= high_water_mark {
                break;
            }
            if segment.end_offset() <= from {
                continue;
            }
            segment.read_into(&self.id, from.max(segment.base), max, &mut out)?;
        }
        out.retain(|event| event.offset < high_water_mark);
        Ok(out)
    }

    fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding the lock cannot leave the queue inconsistent: every field is
        // updated by a single assignment.
        self.queue
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn flush_loop(&self) {
        loop {
            let (cut_tail, group) = {
                let mut queue = self.lock_queue();
                if !queue.pending.is_empty() && queue.pending.len() < queue.last_group {
                    let window = (queue.last_sync / 2).min(self.options.group_commit_max_wait);
                    let deadline = Instant::now() + window;
                    while queue.pending.len() < queue.last_group {
                        let now = Instant::now();
                        if now >= deadline {
                            break;
                        }
                        queue = self
                            .arrivals
                            .wait_timeout(queue, deadline - now)
                            .unwrap_or_else(|poison| poison.into_inner())
                            .0;
                    }
                }
                if queue.pending.is_empty() {
                    queue.flushing = false;
                    return;
                }
                queue.last_group = queue.pending.len();
                (
                    std::mem::take(&mut queue.cut_tail),
                    std::mem::take(&mut queue.pending),
                )
            };
            let started = Instant::now();
            let written = match cut_tail {
                true => self.cut_tail().and_then(|()| self.write_group(&group)),
                false => self.write_group(&group),
            };
            match written {
                Ok(end) => {
                    self.lock_queue().last_sync = started.elapsed();
                    // One send wakes every appender of the group.
                    self.durable_watch.send_modify(|durable| durable.end = end);
                    self.watermarks.publish(&self.id, end);
                }
                Err(error) => {
                    let storage_full = is_storage_full(&error);
                    match storage_full {
                        true => {
                            tracing::warn!(partition = %self.id, %error, "log write failed: no space left")
                        }
                        false => tracing::error!(partition = %self.id, %error, "log write failed"),
                    }
                    let mut queue = self.lock_queue();
                    // The next append starts the next generation and cuts the tail first. The
                    // cause goes to clients: the operating system's words, not the file's path.
                    let cause = match &error {
                        Error::Io { source, .. } => source.to_string(),
                        other => other.to_string(),
                    };
                    self.fail(&mut queue, cause, storage_full, false);
                    queue.flushing = false;
                    return;
                }
            }
        }
    }

    /// Cuts the active segment back to its last durable frame and makes the cut durable: bytes
    /// a failed write left behind it are gone, and a failed sync's pages can no longer reach
    /// the disk later. A roll that failed half-way is undone by the next roll (the new
    /// segment's file is created anew).
    fn cut_tail(&self) -> Result<()> {
        let active = self.active.lock();
        let segment = &active.segment;
        let file = segment.file();
        file.set_len(active.len)
            .and_then(|()| file.sync_all())
            .map_err(Error::io(&segment.path))
    }

    /// Writes and syncs a group; returns the new durable end offset.
    fn write_group(&self, group: &[Pending]) -> Result<u64> {
        let mut active = self.active.lock();
        let total: usize = group.iter().map(|p| format::frame_len(&p.records)).sum();
        if active.len > HEADER_LEN as u64 && active.len + total as u64 > self.options.segment_bytes
        {
            self.roll(&mut active)?;
        }
        let mut buf = Vec::with_capacity(total);
        let mut frames = Vec::with_capacity(group.len());
        let mut offset = active.next_offset;
        for pending in group {
            if pending.base != offset {
                return Err(Error::Corrupt {
                    path: active.segment.path.clone(),
                    position: active.len,
                    reason: format!(
                        "queued batch expects offset {}, the segment is at {offset}",
                        pending.base
                    ),
                });
            }
            frames.push((offset, active.len + buf.len() as u64));
            format::encode_frame(&mut buf, offset, &pending.records);
            offset += pending.records.len() as u64;
        }
        let segment = active.segment.clone();
        let file = segment.file();
        file.write_all_at(&buf, active.len)
            .map_err(Error::io(&segment.path))?;
        file.sync_data().map_err(Error::io(&segment.path))?;
        active.len += buf.len() as u64;
        active.next_offset = offset;
        segment.extend(&frames, active.len, offset);
        self.durable.store(offset, Ordering::Release);
        Ok(offset)
    }

    /// Seals the active segment and starts a new one at the next offset.
    fn roll(&self, active: &mut Active) -> Result<()> {
        let base = active.next_offset;
        let path = create_segment_file(&self.dir, base)?;
        sync_dir(&self.dir)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(Error::io(&path))?;
        let segment = Arc::new(Segment::scanned(
            base,
            path,
            file,
            [],
            HEADER_LEN as u64,
            base,
        ));
        self.segments.write().insert(base, segment.clone());
        *active = Active {
            segment,
            len: HEADER_LEN as u64,
            next_offset: base,
        };
        tracing::debug!(partition = %self.id, base, "rolled log segment");
        Ok(())
    }
}

/// Creates a segment file holding only its header, durably.
fn create_segment_file(dir: &Path, base: u64) -> Result<PathBuf> {
    let path = dir.join(segment::file_name(base));
    let header = SegmentHeader {
        base_offset: base,
        created_ms: now_ms(),
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(Error::io(&path))?;
    file.write_all_at(&header.encode(), 0)
        .and_then(|()| file.sync_all())
        .map_err(Error::io(&path))?;
    Ok(path)
}

fn check_header(path: &Path, file: &File, base: u64) -> Result<()> {
    let header = Segment::read_header(path, file)?;
    if header.base_offset != base {
        return Err(Error::Corrupt {
            path: path.to_owned(),
            position: 0,
            reason: format!(
                "header says base offset {}, file name says {base}",
                header.base_offset
            ),
        });
    }
    Ok(())
}

/// The base offsets of the segment files in `dir`, in order.
fn segment_bases(dir: &Path) -> Result<Vec<u64>> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(Error::io(dir))? {
        let entry = entry.map_err(Error::io(dir))?;
        if let Some(base) = entry
            .file_name()
            .to_str()
            .and_then(segment::parse_file_name)
        {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Every segment but the last (`bases` is not empty), header-checked; and the last one's base.
fn sealed_segments(dir: &Path, bases: &[u64]) -> Result<(BTreeMap<u64, Arc<Segment>>, u64)> {
    let mut segments = BTreeMap::new();
    for pair in bases.windows(2) {
        let (base, next) = (pair[0], pair[1]);
        let path = dir.join(segment::file_name(base));
        let file = File::open(&path).map_err(Error::io(&path))?;
        check_header(&path, &file, base)?;
        let len = file.metadata().map_err(Error::io(&path))?.len();
        segments.insert(base, Arc::new(Segment::sealed(base, path, file, len, next)));
    }
    Ok((segments, *bases.last().unwrap_or(&0)))
}

/// The last segment as a reader beside its writer sees it: its complete frames, read-only. A
/// header still being written reads as an empty segment.
fn read_tail(dir: &Path, base: u64) -> Result<Active> {
    let path = dir.join(segment::file_name(base));
    let file = File::open(&path).map_err(Error::io(&path))?;
    let mut buf = Vec::new();
    (&file).read_to_end(&mut buf).map_err(Error::io(&path))?;
    if let Err(error) = check_header(&path, &file, base) {
        if buf.len() > HEADER_LEN {
            return Err(error);
        }
        buf.truncate(HEADER_LEN.min(buf.len()));
    }
    let scan = format::scan_frames(buf.get(HEADER_LEN..).unwrap_or(&[]), base);
    Ok(active_of(path, file, base, &scan))
}

/// The segment whose frames (after its header) `scan` found, up to its last complete one.
fn active_of(path: PathBuf, file: File, base: u64, scan: &format::Scan) -> Active {
    let valid_len = (HEADER_LEN + scan.valid_len) as u64;
    let next_offset = scan
        .frames
        .last()
        .map_or(base, |(_, body)| body.end_offset());
    let frames = scan
        .frames
        .iter()
        .map(|(at, body)| (body.base_offset, (HEADER_LEN + at) as u64));
    let segment = Arc::new(Segment::scanned(
        base,
        path,
        file,
        frames,
        valid_len,
        next_offset,
    ));
    Active {
        segment,
        len: valid_len,
        next_offset,
    }
}

/// Opens the last segment for appending: recovers a header that a crash tore while the segment
/// was being created, and truncates a torn or corrupt tail of frames.
fn open_active(dir: &Path, id: &PartitionId, base: u64) -> Result<Active> {
    let path = dir.join(segment::file_name(base));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(Error::io(&path))?;
    let len = file.metadata().map_err(Error::io(&path))?.len();
    if let Err(error) = check_header(&path, &file, base) {
        // Frames are written only after the header is durable, so a file no longer than its
        // header holds no acknowledged event: it is a segment whose creation a crash cut short.
        if len > HEADER_LEN as u64 {
            return Err(error);
        }
        tracing::warn!(partition = %id, path = %path.display(), "rewriting a torn segment header");
        drop(file);
        create_segment_file(dir, base)?;
        file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(Error::io(&path))?;
    }
    let mut buf = Vec::new();
    (&file).read_to_end(&mut buf).map_err(Error::io(&path))?;
    let scan = format::scan_frames(buf.get(HEADER_LEN..).unwrap_or(&[]), base);
    let valid_len = (HEADER_LEN + scan.valid_len) as u64;
    if let Some(reason) = &scan.stopped {
        tracing::warn!(
            partition = %id,
            path = %path.display(),
            position = valid_len,
            dropped_bytes = buf.len() as u64 - valid_len,
            reason = %reason,
            "truncating the torn tail of a log segment"
        );
        file.set_len(valid_len)
            .and_then(|()| file.sync_all())
            .map_err(Error::io(&path))?;
    }
    Ok(active_of(path, file, base, &scan))
}

/// Whether a failed write found the disk (or the quota) full.
fn is_storage_full(error: &Error) -> bool {
    matches!(error, Error::Io { source, .. } if matches!(
        source.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    ))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
