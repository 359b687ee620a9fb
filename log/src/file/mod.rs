//! `FileLog`: the embedded commit log, a directory of segment files per partition.
//!
//! ```text
//! <root>/LOCK                     held (flock) by the one process that has the log open
//! <root>/FORMAT                   "strata-filelog 1"
//! <root>/partitions/<dir>/NAME    the partition's full name (<dir> is its percent-encoding)
//! <root>/partitions/<dir>/<base offset, 20 digits>.log   segments, see FORMAT.md
//! ```
//!
//! Durability: an append is answered after `fdatasync` of the segment (group commit shares one
//! sync among concurrent appends); new files and directories are synced with their parent.
//! Recovery: on open the last segment of each partition is scanned and a torn or corrupt tail is
//! truncated; older segments are checked frame by frame (CRC32C) as they are read.
//!
//! [`FileLog::open_read_only`] gives tools a view of a log another process is writing: it takes
//! no lock and changes nothing, and sees each partition up to its last complete frame at the
//! moment of opening.

pub(crate) mod format;
mod partition;
mod segment;

use std::{
    collections::HashMap,
    fs::File,
    ops::Range,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use async_trait::async_trait;
use parking_lot::RwLock;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use prost::Message;

use self::partition::{NAME_FILE, Partition};
use crate::{
    CommitLog, Envelope, PartitionId,
    error::{Error, Result},
    watermarks::Watermarks,
};

const FORMAT_FILE: &str = "FORMAT";
const FORMAT_TEXT: &str = "strata-filelog 1\n";

#[derive(Debug, Clone)]
pub struct FileLogOptions {
    /// A segment is rolled once appending would take it past this size.
    pub segment_bytes: u64,
    /// Longest a group commit waits for writers to rejoin (see the partition module).
    pub group_commit_max_wait: Duration,
}

impl Default for FileLogOptions {
    fn default() -> Self {
        FileLogOptions {
            segment_bytes: 64 << 20,
            group_commit_max_wait: Duration::from_millis(2),
        }
    }
}

/// The embedded, file-backed [`CommitLog`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FileLog {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    partitions_dir: PathBuf,
    options: FileLogOptions,
    partitions: RwLock<HashMap<PartitionId, Arc<Partition>>>,
    /// Serializes creating and deleting partition directories.
    layout: tokio::sync::Mutex<()>,
    watermarks: Arc<Watermarks>,
    /// The exclusive lock of a writable log; `None` for a read-only view.
    lock: Option<File>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.watermarks.close();
    }
}

impl FileLog {
    /// Opens (creating if needed) the log in `root`, recovering every partition. Blocking.
    pub fn open(root: impl AsRef<Path>, options: FileLogOptions) -> Result<FileLog> {
        let root = root.as_ref().to_owned();
        std::fs::create_dir_all(&root).map_err(Error::io(&root))?;
        let lock_path = root.join("LOCK");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(Error::io(&lock_path))?;
        lock.try_lock().map_err(|error| match error {
            std::fs::TryLockError::WouldBlock => Error::Locked { path: root.clone() },
            std::fs::TryLockError::Error(source) => Error::Io {
                path: lock_path.clone(),
                source,
            },
        })?;
        check_format(&root, Mode::Write)?;
        let partitions_dir = root.join("partitions");
        if !partitions_dir.exists() {
            std::fs::create_dir(&partitions_dir).map_err(Error::io(&partitions_dir))?;
            sync_dir(&root)?;
        }
        Self::load(root, partitions_dir, options, Some(lock))
    }

    /// Opens a read-only view of the log in `root`, which another process may be appending to:
    /// no lock is taken and no file is created, repaired or truncated. Each partition is seen up
    /// to its last complete frame at the moment of opening (a frame being written is left out);
    /// partitions created later are not seen. Appends and deletions fail with
    /// [`Error::ReadOnly`]. Blocking.
    pub fn open_read_only(root: impl AsRef<Path>) -> Result<FileLog> {
        let root = root.as_ref().to_owned();
        check_format(&root, Mode::Read)?;
        let partitions_dir = root.join("partitions");
        Self::load(root, partitions_dir, FileLogOptions::default(), None)
    }

    fn load(
        root: PathBuf,
        partitions_dir: PathBuf,
        options: FileLogOptions,
        lock: Option<File>,
    ) -> Result<FileLog> {
        let mode = match lock {
            Some(_) => Mode::Write,
            None => Mode::Read,
        };
        let watermarks = Arc::new(Watermarks::default());
        let mut partitions = HashMap::new();
        let entries: Vec<std::fs::DirEntry> = match std::fs::read_dir(&partitions_dir) {
            Ok(entries) => entries
                .collect::<std::io::Result<_>>()
                .map_err(Error::io(&partitions_dir))?,
            // A log no process has written yet.
            Err(error) if mode == Mode::Read && error.kind() == std::io::ErrorKind::NotFound => {
                Vec::new()
            }
            Err(error) => return Err(Error::io(&partitions_dir)(error)),
        };
        for entry in entries {
            let path = entry.path();
            let dir_name = entry.file_name().to_string_lossy().into_owned();
            if dir_name.ends_with(".tmp") {
                // A partition whose creation a crash cut short (or, for a reader, is under way):
                // it never held an event.
                if mode == Mode::Write {
                    std::fs::remove_dir_all(&path).map_err(Error::io(&path))?;
                }
                continue;
            }
            let name_path = path.join(NAME_FILE);
            let name = match std::fs::read_to_string(&name_path) {
                Ok(name) => name,
                // Deleted by the writer since it was listed.
                Err(error)
                    if mode == Mode::Read && error.kind() == std::io::ErrorKind::NotFound =>
                {
                    continue;
                }
                Err(error) => return Err(Error::io(&name_path)(error)),
            };
            let id = PartitionId::new(name)?;
            if dir_name != dir_name_of(&id) {
                return Err(Error::Corrupt {
                    path: name_path,
                    position: 0,
                    reason: format!("names partition {id}, which belongs in another directory"),
                });
            }
            let partition = match mode {
                Mode::Write => {
                    Partition::open(path, id.clone(), options.clone(), watermarks.clone())?
                }
                Mode::Read => match Partition::open_read_only(path, id.clone(), watermarks.clone())
                {
                    Ok(partition) => partition,
                    Err(Error::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        continue;
                    }
                    Err(error) => return Err(error),
                },
            };
            partitions.insert(id, Arc::new(partition));
        }
        Ok(FileLog {
            inner: Arc::new(Inner {
                root,
                partitions_dir,
                options,
                partitions: RwLock::new(partitions),
                layout: tokio::sync::Mutex::new(()),
                watermarks,
                lock,
            }),
        })
    }

    /// Whether this is a read-only view ([`FileLog::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.inner.lock.is_none()
    }

    fn check_writable(&self) -> Result<()> {
        match self.is_read_only() {
            true => Err(Error::ReadOnly {
                path: self.inner.root.clone(),
            }),
            false => Ok(()),
        }
    }

    /// The directory the log lives in.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    fn partition(&self, id: &PartitionId) -> Option<Arc<Partition>> {
        self.inner.partitions.read().get(id).cloned()
    }

    async fn partition_or_create(&self, id: &PartitionId) -> Result<Arc<Partition>> {
        if let Some(partition) = self.partition(id) {
            return Ok(partition);
        }
        let _layout = self.inner.layout.lock().await;
        if let Some(partition) = self.partition(id) {
            return Ok(partition);
        }
        let inner = self.inner.clone();
        let id = id.clone();
        let partition = tokio::task::spawn_blocking(move || {
            Partition::create(
                &inner.partitions_dir,
                &dir_name_of(&id),
                id,
                inner.options.clone(),
                inner.watermarks.clone(),
            )
        })
        .await
        .map_err(|_| Error::Closed)??;
        let partition = Arc::new(partition);
        self.inner
            .partitions
            .write()
            .insert(partition.id.clone(), partition.clone());
        Ok(partition)
    }
}

#[async_trait]
impl CommitLog for FileLog {
    async fn append(&self, partition: &PartitionId, events: Vec<Envelope>) -> Result<Range<u64>> {
        self.check_writable()?;
        if events.is_empty() {
            let end = self.high_water_mark(partition).await?;
            return Ok(end..end);
        }
        // Offsets and partitions are implied by where a record sits: stored as empty.
        let records: Vec<Vec<u8>> = events
            .into_iter()
            .map(|mut event| {
                event.offset = 0;
                event.partition.clear();
                event.encode_to_vec()
            })
            .collect();
        let bytes = format::frame_len(&records) - format::FRAME_HEADER_LEN;
        if bytes > format::MAX_BODY_LEN {
            return Err(Error::BatchTooLarge {
                bytes,
                max: format::MAX_BODY_LEN,
            });
        }
        let partition = self.partition_or_create(partition).await?;
        partition.append(records).await
    }

    async fn read(
        &self,
        partition: &PartitionId,
        from: u64,
        max_events: usize,
    ) -> Result<Vec<Envelope>> {
        let Some(found) = self.partition(partition) else {
            return match from {
                0 => Ok(Vec::new()),
                _ => Err(Error::OffsetOutOfRange {
                    partition: partition.to_string(),
                    offset: from,
                    high_water_mark: 0,
                }),
            };
        };
        tokio::task::spawn_blocking(move || found.read(from, max_events))
            .await
            .map_err(|_| Error::Closed)?
    }

    async fn high_water_mark(&self, partition: &PartitionId) -> Result<u64> {
        Ok(self.partition(partition).map_or(0, |p| p.high_water_mark()))
    }

    async fn wait_for(&self, partition: &PartitionId, offset: u64) -> Result<()> {
        self.inner.watermarks.wait_for(partition, offset).await
    }

    async fn partitions(&self) -> Result<Vec<PartitionId>> {
        let mut ids: Vec<PartitionId> = self.inner.partitions.read().keys().cloned().collect();
        ids.sort();
        Ok(ids)
    }

    async fn delete_partition(&self, partition: &PartitionId) -> Result<()> {
        self.check_writable()?;
        let _layout = self.inner.layout.lock().await;
        let Some(removed) = self.inner.partitions.write().remove(partition) else {
            return Ok(());
        };
        removed.retire();
        let parent = self.inner.partitions_dir.clone();
        tokio::task::spawn_blocking(move || {
            std::fs::remove_dir_all(&removed.dir).map_err(Error::io(&removed.dir))?;
            sync_dir(&parent)
        })
        .await
        .map_err(|_| Error::Closed)??;
        self.inner.watermarks.publish(partition, 0);
        Ok(())
    }
}

/// Bytes kept as they are in directory names; everything else is percent-encoded, so a
/// directory name never contains `.` (no `..`, no hidden names, no clash with `*.tmp`) or `~`.
const DIR_NAME_KEEP: &AsciiSet = &NON_ALPHANUMERIC.remove(b'_').remove(b'-');

/// The directory name of a partition: its percent-encoding, or for long names a prefix of it
/// and a hash of the whole name (file names are limited to 255 bytes).
fn dir_name_of(id: &PartitionId) -> String {
    let encoded = utf8_percent_encode(id.as_str(), DIR_NAME_KEEP).to_string();
    if encoded.len() <= 200 {
        return encoded;
    }
    let hash = crate::partition::name_hash(id.as_str());
    format!("{}~{hash:016x}", &encoded[..150])
}

/// How a log directory is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// By its one writer: locked, created and repaired as needed.
    Write,
    /// By a reader beside the writer: nothing is changed.
    Read,
}

fn check_format(root: &Path, mode: Mode) -> Result<()> {
    let path = root.join(FORMAT_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) if text == FORMAT_TEXT => Ok(()),
        Ok(text) => Err(Error::Corrupt {
            path,
            position: 0,
            reason: format!("unsupported log format {:?}", text.trim()),
        }),
        Err(error) if mode == Mode::Read => Err(Error::io(&path)(error)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::write(&path, FORMAT_TEXT).map_err(Error::io(&path))?;
            File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(Error::io(&path))?;
            sync_dir(root)
        }
        Err(error) => Err(Error::io(&path)(error)),
    }
}

/// Makes a directory's entries durable (new files, renames, removals).
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(Error::io(dir))
}

#[cfg(test)]
mod tests;
