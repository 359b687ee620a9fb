//! Where DataFusion's Parquet scan of a snapshot reads its segments from. A segment on this
//! machine is read in place, mapped (see [`SegmentFile::mapped`]), and its footer with its page
//! index is decoded once for the segment's life, not by every query: a segment file never
//! changes once written. A segment in a bucket is read through its object store, as
//! DataFusion's default reader does.

use std::{collections::HashMap, ops::Range, sync::Arc};

use bytes::Bytes;
use datafusion::{
    common::Result as DfResult,
    datasource::{
        listing::PartitionedFile,
        physical_plan::parquet::{DefaultParquetFileReaderFactory, ParquetFileReaderFactory},
    },
    error::DataFusionError,
    physical_plan::metrics::ExecutionPlanMetricsSet,
};
use futures::{FutureExt, future::BoxFuture};
use parquet::{
    arrow::{arrow_reader::ArrowReaderOptions, async_reader::AsyncFileReader},
    errors::ParquetError,
    file::metadata::ParquetMetaData,
};

use super::super::SegmentFile;

/// A scan's segments by their path in the store, and the reader of those not mapped.
#[derive(Debug)]
pub(super) struct SegmentFiles {
    files: HashMap<String, Arc<SegmentFile>>,
    store: DefaultParquetFileReaderFactory,
}

impl SegmentFiles {
    pub(super) fn new<'a>(
        files: impl IntoIterator<Item = &'a Arc<SegmentFile>>,
        store: DefaultParquetFileReaderFactory,
    ) -> SegmentFiles {
        let files = files
            .into_iter()
            .map(|file| (file.path.to_string(), file.clone()))
            .collect();
        SegmentFiles { files, store }
    }
}

impl ParquetFileReaderFactory for SegmentFiles {
    fn create_reader(
        &self,
        partition_index: usize,
        file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> DfResult<Box<dyn AsyncFileReader + Send>> {
        let external = |e: crate::error::Error| DataFusionError::External(Box::new(e));
        if let Some(segment) = self.files.get(file.object_meta.location.as_ref())
            && let Some(bytes) = segment.mapped().map_err(external)?
        {
            let footer = segment.scan_metadata(&bytes).map_err(external)?;
            return Ok(Box::new(Mapped { bytes, footer }));
        }
        self.store
            .create_reader(partition_index, file, metadata_size_hint, metrics)
    }
}

/// A mapped segment: its pages are slices of memory, its footer decoded already.
struct Mapped {
    bytes: Bytes,
    footer: Arc<ParquetMetaData>,
}

impl Mapped {
    fn range(&self, range: Range<u64>) -> parquet::errors::Result<Bytes> {
        let len = self.bytes.len() as u64;
        if range.start > range.end || range.end > len {
            return Err(ParquetError::EOF(format!(
                "bytes {}..{} asked of a segment of {len}",
                range.start, range.end
            )));
        }
        Ok(self.bytes.slice(range.start as usize..range.end as usize))
    }
}

impl AsyncFileReader for Mapped {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        futures::future::ready(self.range(range)).boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        let read = ranges.into_iter().map(|range| self.range(range)).collect();
        futures::future::ready(read).boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        futures::future::ready(Ok(self.footer.clone())).boxed()
    }
}
