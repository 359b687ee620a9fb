//! Segments: immutable Parquet files of a table's rows, sorted by `_row_id`, with min/max
//! statistics, and the in-memory bitmaps that go with each (rows it holds, rows deleted since,
//! rows with a vector).

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use arrow::array::RecordBatch;
use bytes::Bytes;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, local::LocalFileSystem, path::Path};
use parquet::{
    arrow::ArrowWriter,
    basic::{Compression, Encoding},
    file::properties::{EnabledStatistics, WriterProperties},
    schema::types::ColumnPath,
};
use roaring::RoaringTreemap;

use super::rows::ROW_ID;
use crate::error::{Error, Result};

/// Where a table's files live: an object store (the local data directory, or a bound bucket)
/// and the table's prefix in it.
#[derive(Clone, Debug)]
pub struct TableStore {
    pub store: Arc<dyn ObjectStore>,
    /// The URL DataFusion knows the store by (`strata://<database id>`).
    pub url: datafusion::execution::object_store::ObjectStoreUrl,
    /// `<table id>/` under the database's root in the store.
    pub prefix: Path,
    /// A local directory for the table's segment indexes (see [`super::index`]).
    pub index_dir: std::path::PathBuf,
    /// `store` itself when it is the machine's file system (the data directory, or a
    /// `file://` binding): segment files are then read in place, mapped into memory, by
    /// searches that fetch a few rows and by SQL scans (see [`SegmentFile::mapped`]).
    pub local: Option<Arc<LocalFileSystem>>,
}

impl TableStore {
    pub(crate) fn path(&self, relative: &str) -> Path {
        self.prefix.clone().join_parts_checked(relative)
    }

    /// A segment file of the table at `path` in the store.
    pub(crate) fn segment_file(&self, path: Path, bytes: u64) -> Arc<SegmentFile> {
        let local = self
            .local
            .as_ref()
            .and_then(|fs| fs.path_to_filesystem(&path).ok());
        Arc::new(SegmentFile {
            path,
            bytes,
            store: self.store.clone(),
            local,
            retired: AtomicBool::new(false),
            reader_metadata: std::sync::OnceLock::new(),
            mapped: std::sync::OnceLock::new(),
            scan_metadata: std::sync::OnceLock::new(),
        })
    }
}

trait JoinParts {
    fn join_parts_checked(self, relative: &str) -> Path;
}

impl JoinParts for Path {
    fn join_parts_checked(self, relative: &str) -> Path {
        relative
            .split('/')
            .fold(self, |path, part| path.clone().join(part))
    }
}

/// A segment file. Once retired (replaced by compaction, or its table dropped) it is deleted
/// when the last snapshot that can still read it goes away.
#[derive(Debug)]
pub struct SegmentFile {
    pub path: Path,
    pub bytes: u64,
    store: Arc<dyn ObjectStore>,
    /// Where the file is on this machine, when its store is the local file system.
    local: Option<std::path::PathBuf>,
    retired: AtomicBool,
    /// The file's footer and page index, decoded once by the first read by row id (see
    /// [`super::search`]): a search fetches a few rows, and decoding the footer each time
    /// would cost more than reading them.
    pub(crate) reader_metadata:
        std::sync::OnceLock<parquet::arrow::arrow_reader::ArrowReaderMetadata>,
    /// The local file mapped into memory, by the first read by row id or scan.
    mapped: std::sync::OnceLock<Bytes>,
    /// The footer with its page index (column and offset indexes) of the mapped file, decoded
    /// by its first scan or read by row id.
    scan_metadata: std::sync::OnceLock<Arc<parquet::file::metadata::ParquetMetaData>>,
}

impl SegmentFile {
    /// The whole file, mapped into memory, when it is on this machine; `None` when it lives
    /// in a bucket.
    ///
    /// A search reads a few rows, a page per column per row: through the object store each
    /// read opens the file and hands a `pread` to a blocking thread, which costs more than
    /// decoding the page. Mapped, a page is a slice of memory the page cache already holds.
    /// Segment files are immutable once written (written whole, then renamed into place),
    /// and a deleted file stays mapped until the last reader drops it, so the mapping never
    /// changes under a reader. The map is made with tantivy's `MmapDirectory`, which maps
    /// the index files the same way.
    pub(crate) fn mapped(&self) -> Result<Option<Bytes>> {
        let Some(local) = &self.local else {
            return Ok(None);
        };
        if let Some(bytes) = self.mapped.get() {
            return Ok(Some(bytes.clone()));
        }
        let unreadable =
            |error: String| Error::Index(format!("cannot map segment file {}: {error}", self.path));
        let (Some(dir), Some(name)) = (local.parent(), local.file_name()) else {
            return Err(unreadable("not a file path".to_owned()));
        };
        let dir = tantivy::directory::MmapDirectory::open(dir)
            .map_err(|error| unreadable(error.to_string()))?;
        let file = tantivy::Directory::open_read(&dir, std::path::Path::new(name))
            .map_err(|error| unreadable(error.to_string()))?;
        let bytes = file
            .read_bytes()
            .map_err(|error| unreadable(error.to_string()))?;
        if bytes.len() as u64 != self.bytes {
            return Err(unreadable(format!(
                "{} bytes where the manifest says {}",
                bytes.len(),
                self.bytes
            )));
        }
        Ok(Some(
            self.mapped.get_or_init(|| Bytes::from_owner(bytes)).clone(),
        ))
    }

    /// The footer of the file, `mapped` (what [`Self::mapped`] gave), with its page index:
    /// decoded once, for scans and reads by row id alike.
    pub(crate) fn scan_metadata(
        &self,
        mapped: &Bytes,
    ) -> Result<Arc<parquet::file::metadata::ParquetMetaData>> {
        if let Some(metadata) = self.scan_metadata.get() {
            return Ok(metadata.clone());
        }
        let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
            .with_page_index_policy(parquet::file::metadata::PageIndexPolicy::Optional)
            .parse_and_finish(mapped)?;
        Ok(self
            .scan_metadata
            .get_or_init(|| Arc::new(metadata))
            .clone())
    }

    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }
}

impl Drop for SegmentFile {
    fn drop(&mut self) {
        if !self.retired.load(Ordering::Acquire) {
            return;
        }
        let (store, path) = (self.store.clone(), self.path.clone());
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                match store.delete(&path).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(error) => {
                        tracing::warn!(%path, %error, "could not delete a retired segment")
                    }
                }
            });
        }
    }
}

/// A segment and its bitmaps.
#[derive(Clone, Debug)]
pub struct Segment {
    /// Order of creation: a later segment holds later versions of rows.
    pub seq: u64,
    pub file: Arc<SegmentFile>,
    pub rows: u64,
    /// The row ids the file holds.
    pub ids: Arc<RoaringTreemap>,
    /// Row ids of the file deleted since it was written.
    pub deleted: Arc<RoaringTreemap>,
    /// Row ids of the file with a vector.
    pub vectors: Arc<RoaringTreemap>,
    /// The segment's full-text and vector indexes, when the table has any.
    pub index: Option<Arc<super::index::SegmentIndex>>,
}

impl Segment {
    pub fn live_rows(&self) -> u64 {
        self.rows - self.deleted.len()
    }
}

/// How segments are written, in pages of about `page_bytes` (the default is
/// [`DEFAULT_PAGE_BYTES`]). Scans read whole columns; searches read a few rows by id through
/// the offset index, and pay for every page (and dictionary page) those rows sit in. So pages
/// are small, dictionaries stop at the same size (low-cardinality columns, the ones
/// dictionaries help, fit; unique values fall back to plain encoding early), and `_row_id`,
/// unique and ascending, is delta-encoded without a dictionary. The writer checks a page's
/// size every write batch, so the batch shrinks with the page: a column of wide values still
/// gets pages near the size.
///
/// Pages are LZ4-compressed: a search result decompresses a page per column per row, and LZ4
/// decompresses several times faster than zstd, for larger files (the trade Elasticsearch's
/// stored fields and ClickHouse make by default; docs/benchmarks.md has the figures).
pub fn segment_properties(page_bytes: usize) -> WriterProperties {
    let row_id = ColumnPath::from(ROW_ID);
    let page_bytes = page_bytes.max(MIN_PAGE_BYTES);
    WriterProperties::builder()
        .set_compression(Compression::LZ4_RAW)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(256 * 1024))
        .set_data_page_size_limit(page_bytes)
        .set_write_batch_size((page_bytes / 64).clamp(16, 1024))
        .set_dictionary_page_size_limit(page_bytes)
        .set_column_dictionary_enabled(row_id.clone(), false)
        .set_column_encoding(row_id, Encoding::DELTA_BINARY_PACKED)
        .build()
}

/// The data page size segments are written with unless `tables.segment_page_bytes` says
/// otherwise. Measured against 16 and 4 KiB (docs/benchmarks.md, instructions per request):
/// a search's ten rows cost 8 to 10% less than at 16 KiB, SQL scans within 4% of it, files
/// 2.6% larger; at 4 KiB searches gain twice that, but a filtered SQL scan costs 11% more.
pub const DEFAULT_PAGE_BYTES: usize = 8 << 10;

/// The smallest data page size taken: below it, page headers and the page index outweigh what
/// a read by row saves.
pub const MIN_PAGE_BYTES: usize = 1 << 10;

/// Encodes rows (already sorted by `_row_id`, deleted rows removed) as a Parquet file with
/// statistics on every column, in pages of about `page_bytes`.
pub(crate) fn encode_parquet(batches: &[RecordBatch], page_bytes: usize) -> Result<Vec<u8>> {
    let Some(first) = batches.first() else {
        return Err(Error::Arrow(
            "a segment needs at least one batch".to_owned(),
        ));
    };
    let properties = segment_properties(page_bytes);
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, first.schema(), Some(properties))?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.close()?;
    Ok(out)
}

/// Writes `bytes` to `path` in the store.
pub(crate) async fn put(store: &Arc<dyn ObjectStore>, path: &Path, bytes: Vec<u8>) -> Result<()> {
    store.put(path, PutPayload::from(bytes)).await?;
    Ok(())
}
