//! The series of a metrics table (ADR 7): which series a set of sample rows holds, and each
//! series' samples in time order.
//!
//! A metrics table's rows are samples: `@timestamp`, `_series` (the id of the series, a hash of
//! its label set), `value`, and one string column per label (the metric name is the label
//! `__name__`). A [`SeriesSet`] groups the rows of a segment or a memtable batch by series: the
//! series' label sets, the postings from each label value to the series holding it, and each
//! series' samples sorted by time (then row id), each with its row id so that deletions apply.
//!
//! A segment's set is written beside the segment, as its other indexes are, in the format
//! described in log/FORMAT.md ("Series index"); only its series table stays in memory, and a
//! query reads the samples of the series it selects from the file. A memtable batch's set is
//! built in memory when a query first needs it.

mod codec;
#[cfg(test)]
mod tests;

use std::{
    borrow::Cow,
    collections::{BTreeMap, HashMap},
    fs::File,
    path::Path,
    sync::Arc,
};

use arrow::{
    array::{Array, AsArray, RecordBatch},
    datatypes::{DataType, Float64Type, TimestampMillisecondType, UInt64Type},
};
use roaring::RoaringTreemap;

use super::rows::{ROW_ID, arrow_error};
use crate::error::{Error, Result};

/// The column of a sample's time (Unix milliseconds).
pub const TIME_COLUMN: &str = "@timestamp";
/// The column of a sample's series id.
pub const SERIES_COLUMN: &str = "_series";
/// The column of a sample's value.
pub const VALUE_COLUMN: &str = "value";
/// The prefix of the column of a label whose name is one of the columns above (or starts with
/// this prefix itself): a label `value` is column `label:value`.
pub const LABEL_ESCAPE: &str = "label:";

/// The label that holds a series' metric name.
pub const METRIC_NAME: &str = "__name__";

/// The column that holds label `name`.
pub fn column_of_label(name: &str) -> Cow<'_, str> {
    if [TIME_COLUMN, SERIES_COLUMN, VALUE_COLUMN, ROW_ID].contains(&name)
        || name.starts_with(LABEL_ESCAPE)
    {
        Cow::Owned(format!("{LABEL_ESCAPE}{name}"))
    } else {
        Cow::Borrowed(name)
    }
}

/// The label column `name` holds; `None` for the columns that hold no label.
pub fn label_of_column(name: &str) -> Option<&str> {
    if [TIME_COLUMN, SERIES_COLUMN, VALUE_COLUMN, ROW_ID].contains(&name) {
        return None;
    }
    Some(name.strip_prefix(LABEL_ESCAPE).unwrap_or(name))
}

/// The id of the series with `labels` (sorted by name, empty values left out): FNV-1a (64 bits)
/// over each name and value, each followed by 0xff (a byte no UTF-8 text holds). Stable: it is
/// stored in the log.
pub fn series_id<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for byte in bytes.iter().chain(&[0xff]) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(PRIME);
        }
    };
    for (name, value) in labels {
        eat(name.as_bytes());
        eat(value.as_bytes());
    }
    hash
}

/// One series of a set: its id, its labels (sorted by name) and the span of its samples.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesMeta {
    pub id: u64,
    pub labels: LabelSet,
    pub min_t: i64,
    pub max_t: i64,
    pub samples: u32,
}

impl SeriesMeta {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.labels[i].1.as_str())
    }
}

/// A label set, sorted by name.
pub type LabelSet = Vec<(String, String)>;

/// Where each series' samples block is in a file: (offset from the file's start, length).
pub(crate) type Blocks = Vec<(u64, u32)>;

/// One sample, with the row that holds it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub t: i64,
    pub v: f64,
    pub row: u64,
}

/// Where a set's samples are.
enum Samples {
    /// Decoded, a series' points in its slot.
    Memory(Vec<Vec<Point>>),
    /// Encoded in a file, mapped into memory (read through the page cache, without a read
    /// call or a copy per block): each series' block (offset from the file's start, length).
    File {
        bytes: tantivy::directory::OwnedBytes,
        blocks: Vec<(u64, u32)>,
    },
}

/// The series of a segment or a memtable batch (see the module's documentation).
pub struct SeriesSet {
    series: Vec<SeriesMeta>,
    /// Label name → value → the series (slots of `series`, ascending) with it.
    postings: HashMap<String, HashMap<String, Vec<u32>>>,
    min_t: i64,
    max_t: i64,
    samples: Samples,
}

impl std::fmt::Debug for SeriesSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeriesSet")
            .field("series", &self.series.len())
            .field("min_t", &self.min_t)
            .field("max_t", &self.max_t)
            .finish()
    }
}

/// The columns of sample rows.
struct SampleColumns<'a> {
    rows: &'a arrow::array::UInt64Array,
    times: &'a arrow::array::TimestampMillisecondArray,
    series: &'a arrow::array::UInt64Array,
    values: &'a arrow::array::Float64Array,
    labels: Vec<(&'a str, Cow<'a, arrow::array::StringArray>)>,
}

fn column<'a>(rows: &'a RecordBatch, name: &str) -> Result<&'a Arc<dyn Array>> {
    rows.column_by_name(name)
        .ok_or_else(|| Error::Index(format!("sample rows lack column {name:?}")))
}

fn typed<'a, T: 'static>(
    rows: &'a RecordBatch,
    name: &str,
    cast: impl Fn(&'a dyn Array) -> Option<&'a T>,
) -> Result<&'a T> {
    cast(column(rows, name)?.as_ref())
        .ok_or_else(|| Error::Index(format!("sample rows: column {name:?} has the wrong type")))
}

impl<'a> SampleColumns<'a> {
    fn of(rows: &'a RecordBatch) -> Result<SampleColumns<'a>> {
        let mut labels = Vec::new();
        for (field, array) in rows.schema_ref().fields().iter().zip(rows.columns()) {
            let Some(label) = label_of_column(field.name()) else {
                continue;
            };
            let strings = match array.data_type() {
                DataType::Utf8 => Cow::Borrowed(array.as_string::<i32>()),
                _ => {
                    let cast = arrow::compute::cast(array, &DataType::Utf8).map_err(arrow_error)?;
                    Cow::Owned(cast.as_string::<i32>().clone())
                }
            };
            labels.push((label, strings));
        }
        labels.sort_by(|a, b| a.0.cmp(b.0));
        Ok(SampleColumns {
            rows: typed(rows, ROW_ID, |a| a.as_primitive_opt::<UInt64Type>())?,
            times: typed(rows, TIME_COLUMN, |a| {
                a.as_primitive_opt::<TimestampMillisecondType>()
            })?,
            series: typed(rows, SERIES_COLUMN, |a| a.as_primitive_opt::<UInt64Type>())?,
            values: typed(rows, VALUE_COLUMN, |a| a.as_primitive_opt::<Float64Type>())?,
            labels,
        })
    }

    /// Whether row `i`'s label set is `set` (sorted by name), without making it.
    fn labels_are(&self, i: usize, set: &[(String, String)]) -> bool {
        let mut set = set.iter();
        for (name, values) in &self.labels {
            let Some(value) = label_value(values, i) else {
                continue;
            };
            match set.next() {
                Some((n, v)) if n == name && v == value => {}
                _ => return false,
            }
        }
        set.next().is_none()
    }

    /// Row `i`'s label set, sorted by name.
    fn labels(&self, i: usize) -> Vec<(String, String)> {
        self.labels
            .iter()
            .filter_map(|(name, values)| {
                label_value(values, i).map(|value| ((*name).to_owned(), value.to_owned()))
            })
            .collect()
    }
}

/// Row `i`'s value of a label column, if it has the label: a null or empty value is no label,
/// as in Prometheus.
fn label_value(values: &arrow::array::StringArray, i: usize) -> Option<&str> {
    (values.is_valid(i) && !values.value(i).is_empty()).then(|| values.value(i))
}

impl SeriesSet {
    /// The series of sample `rows` (`_row_id`, then a metrics table's columns). Rows without a
    /// series id, a time or a value hold no sample and are left out.
    pub fn build(rows: &RecordBatch) -> Result<SeriesSet> {
        let columns = SampleColumns::of(rows)?;
        // Each series (two label sets may share an id) with its rows; a series' label set is
        // made once, when its first row is seen, and compared in place for the others.
        let mut groups: Vec<(u64, LabelSet, Vec<Point>)> = Vec::new();
        // Series id → the groups with it.
        let mut by_id: HashMap<u64, Vec<usize>> = HashMap::new();
        // The group of the row before: a series' rows mostly come together.
        let mut last: Option<usize> = None;
        for i in 0..rows.num_rows() {
            if columns.series.is_null(i) || columns.times.is_null(i) || columns.values.is_null(i) {
                continue;
            }
            let point = Point {
                t: columns.times.value(i),
                v: columns.values.value(i),
                row: columns.rows.value(i),
            };
            let id = columns.series.value(i);
            let is_it = |g: &usize| groups[*g].0 == id && columns.labels_are(i, &groups[*g].1);
            let found = last.filter(is_it).or_else(|| {
                by_id
                    .get(&id)
                    .and_then(|same| same.iter().copied().find(is_it))
            });
            let group = match found {
                Some(group) => group,
                None => {
                    groups.push((id, columns.labels(i), Vec::new()));
                    by_id.entry(id).or_default().push(groups.len() - 1);
                    groups.len() - 1
                }
            };
            groups[group].2.push(point);
            last = Some(group);
        }
        let mut series: Vec<(SeriesMeta, Vec<Point>)> = groups
            .into_iter()
            .map(|(id, labels, mut points)| {
                points.sort_by_key(|p| (p.t, p.row));
                let meta = SeriesMeta {
                    id,
                    labels,
                    min_t: points.first().map_or(0, |p| p.t),
                    max_t: points.last().map_or(0, |p| p.t),
                    samples: points.len() as u32,
                };
                (meta, points)
            })
            .collect();
        series.sort_by(|a, b| a.0.labels.cmp(&b.0.labels));
        let (series, points): (Vec<_>, Vec<_>) = series.into_iter().unzip();
        Ok(SeriesSet::assemble(series, Samples::Memory(points)))
    }

    fn assemble(series: Vec<SeriesMeta>, samples: Samples) -> SeriesSet {
        let mut postings: HashMap<String, HashMap<String, Vec<u32>>> = HashMap::new();
        for (slot, meta) in series.iter().enumerate() {
            for (name, value) in &meta.labels {
                postings
                    .entry(name.clone())
                    .or_default()
                    .entry(value.clone())
                    .or_default()
                    .push(slot as u32);
            }
        }
        SeriesSet {
            min_t: series.iter().map(|s| s.min_t).min().unwrap_or(0),
            max_t: series.iter().map(|s| s.max_t).max().unwrap_or(0),
            series,
            postings,
            samples,
        }
    }

    /// Writes the set to `path` (see log/FORMAT.md) and opens it from there.
    pub fn write(&self, path: &Path) -> Result<SeriesSet> {
        let Samples::Memory(points) = &self.samples else {
            return Err(Error::Index(
                "a series set read from a file is written already".into(),
            ));
        };
        let bytes = codec::encode(&self.series, points);
        std::fs::write(path, &bytes).map_err(|e| io_error(path, e))?;
        SeriesSet::open(path)
    }

    /// Opens the set written at `path`: reads its series table, leaves the samples in the file
    /// (mapped, by tantivy's memory-mapped directory, as the document indexes beside it are).
    pub fn open(path: &Path) -> Result<SeriesSet> {
        use tantivy::directory::{Directory, MmapDirectory};
        let file = File::open(path).map_err(|e| io_error(path, e))?;
        let (series, blocks) = codec::read_table(&file, path)?;
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(Error::Index(format!(
                "series index {}: not a file in a directory",
                path.display()
            )));
        };
        let mapped =
            |reason: String| Error::Index(format!("series index {}: {reason}", path.display()));
        let bytes = MmapDirectory::open(dir)
            .map_err(|e| mapped(e.to_string()))?
            .open_read(Path::new(name))
            .map_err(|e| mapped(e.to_string()))?
            .read_bytes()
            .map_err(|e| io_error(path, e))?;
        if let Some(&(offset, len)) = blocks.last()
            && offset + u64::from(len) > bytes.len() as u64
        {
            return Err(mapped("series blocks run past the end of the file".into()));
        }
        Ok(SeriesSet::assemble(series, Samples::File { bytes, blocks }))
    }

    pub fn series(&self) -> &[SeriesMeta] {
        &self.series
    }

    /// The values label `name` takes, each with the series (slots, ascending) that have it.
    pub fn postings(&self, name: &str) -> Option<&HashMap<String, Vec<u32>>> {
        self.postings.get(name)
    }

    /// The label names of the set's series.
    pub fn label_names(&self) -> impl Iterator<Item = &str> {
        self.postings.keys().map(String::as_str)
    }

    /// The earliest and latest sample time of the set.
    pub fn time_span(&self) -> (i64, i64) {
        (self.min_t, self.max_t)
    }

    /// Appends the samples of series `slot` from `mint` to `maxt` (inclusive) to `out`, in time
    /// order, but those of `deleted` rows; of samples at the same time, only the last written.
    pub fn read(
        &self,
        slot: usize,
        mint: i64,
        maxt: i64,
        deleted: &RoaringTreemap,
        out: &mut Vec<Point>,
    ) -> Result<()> {
        let Some(meta) = self.series.get(slot) else {
            return Err(Error::Index(format!("no series in slot {slot}")));
        };
        if meta.max_t < mint || meta.min_t > maxt {
            return Ok(());
        }
        // The series' points are appended to `out`, then those outside the range, deleted, or
        // overwritten at the same time are compacted away in place.
        let base = out.len();
        match &self.samples {
            Samples::Memory(all) => {
                let points = &all[slot];
                let from = points.partition_point(|p| p.t < mint);
                let to = points.partition_point(|p| p.t <= maxt);
                out.extend_from_slice(&points[from..to.max(from)]);
            }
            Samples::File { bytes, blocks } => {
                let (offset, len) = blocks[slot];
                let block = bytes
                    .as_slice()
                    .get(offset as usize..offset as usize + len as usize)
                    .ok_or_else(|| {
                        Error::Index(format!("series block {slot} is out of its file"))
                    })?;
                codec::decode_block_range(block, meta.samples as usize, mint, maxt, out)?;
            }
        }
        let check_deleted = !deleted.is_empty();
        let mut kept = base;
        for i in base..out.len() {
            let point = out[i];
            if point.t < mint || point.t > maxt || (check_deleted && deleted.contains(point.row)) {
                continue;
            }
            match kept.checked_sub(1).map(|last| out[last].t) {
                Some(t) if t == point.t => out[kept - 1] = point,
                _ => {
                    out[kept] = point;
                    kept += 1;
                }
            }
        }
        out.truncate(kept);
        Ok(())
    }

    /// The slots of the series whose labels `keep` keeps, using the postings of `equal` (a
    /// label name and the value it must have) when given.
    pub fn select(
        &self,
        equal: &[(&str, &str)],
        mut keep: impl FnMut(&SeriesMeta) -> bool,
    ) -> Vec<usize> {
        let mut candidates: Option<Vec<u32>> = None;
        for (name, value) in equal {
            let Some(slots) = self.postings.get(*name).and_then(|p| p.get(*value)) else {
                return Vec::new();
            };
            candidates = Some(match candidates {
                None => slots.clone(),
                Some(before) => intersect(&before, slots),
            });
        }
        let mut keep = |slot: usize| keep(&self.series[slot]);
        match candidates {
            Some(slots) => slots
                .into_iter()
                .map(|s| s as usize)
                .filter(|s| keep(*s))
                .collect(),
            None => (0..self.series.len()).filter(|s| keep(*s)).collect(),
        }
    }

    /// The label values of every series, by name, for label listings.
    pub fn label_values(&self) -> BTreeMap<&str, Vec<&str>> {
        self.postings
            .iter()
            .map(|(name, values)| (name.as_str(), values.keys().map(String::as_str).collect()))
            .collect()
    }
}

/// The slots in both ascending lists.
fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j) = (0, 0);
    let mut both = Vec::with_capacity(a.len().min(b.len()));
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                both.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    both
}

fn io_error(path: &Path, error: std::io::Error) -> Error {
    Error::Index(format!("series index {}: {error}", path.display()))
}
