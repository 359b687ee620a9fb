//! PromQL over the metrics datasets of an account (ADR 7): the series of a set of dataset
//! snapshots as the evaluator's [`Queryable`].
//!
//! A query reads every metrics dataset the user may read, or the one it names. Each dataset's
//! series come from the series index of each of its segments and from its memtable batches
//! (grouped on first use); a series' samples from every part merge by time, and of two samples
//! at one time the one written last (the higher row id) is read. Deleted rows are never read.

use std::{borrow::Cow, collections::HashMap, sync::Arc, time::Duration};

use roaring::RoaringTreemap;
use strata_projections::table::{
    TableSnapshot,
    series::{LabelSet, Point, SeriesMeta, SeriesSet, series_id},
};

use crate::engine::{
    Action, Engine, PlatformPrincipal,
    access::{FieldPolicy, LabelFilter, Target},
    blocking,
};
use crate::{
    error::{Error, Result},
    promql::{
        ast::{MatchOp, Matcher},
        engine::{EngineOptions, QueryError, QueryOutput, instant_query, range_query},
        parser::parse_metric_selector,
        storage::{Queryable, StorageError},
        value::{FPoint, Labels, Series},
    },
};

/// When a query is evaluated: at one time, or at each step of a range (Unix milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evaluation {
    Instant { time: i64 },
    Range { start: i64, end: i64, step: i64 },
}

/// The kinds of error of Prometheus' HTTP API (`errorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromqlErrorKind {
    BadData,
    Execution,
    Timeout,
    Internal,
    NotFound,
    Forbidden,
    Unavailable,
}

impl PromqlErrorKind {
    /// The `errorType` of the answer.
    pub fn as_str(self) -> &'static str {
        match self {
            PromqlErrorKind::BadData => "bad_data",
            PromqlErrorKind::Execution => "execution",
            PromqlErrorKind::Timeout => "timeout",
            PromqlErrorKind::Internal => "internal",
            PromqlErrorKind::NotFound => "not_found",
            PromqlErrorKind::Forbidden => "forbidden",
            PromqlErrorKind::Unavailable => "unavailable",
        }
    }
}

/// Why a PromQL request failed, as Prometheus' API reports it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PromqlError {
    pub kind: PromqlErrorKind,
    pub message: String,
}

impl PromqlError {
    pub fn bad_data(message: impl Into<String>) -> PromqlError {
        PromqlError {
            kind: PromqlErrorKind::BadData,
            message: message.into(),
        }
    }
}

impl From<Error> for PromqlError {
    fn from(error: Error) -> PromqlError {
        let kind = match &error {
            Error::BadRequest(_) | Error::InvalidName(_) => PromqlErrorKind::BadData,
            Error::DatasetNotFound(_) => PromqlErrorKind::NotFound,
            Error::Forbidden(_) => PromqlErrorKind::Forbidden,
            Error::Busy(_) | Error::Unavailable(_) => PromqlErrorKind::Unavailable,
            _ => PromqlErrorKind::Internal,
        };
        PromqlError {
            kind,
            message: error.public_message(),
        }
    }
}

impl From<QueryError> for PromqlError {
    fn from(error: QueryError) -> PromqlError {
        let kind = match &error {
            QueryError::BadData(_) => PromqlErrorKind::BadData,
            QueryError::Execution(_) | QueryError::TooManySamples => PromqlErrorKind::Execution,
            QueryError::Timeout => PromqlErrorKind::Timeout,
            QueryError::Storage(_) => PromqlErrorKind::Internal,
        };
        PromqlError {
            kind,
            message: error.to_string(),
        }
    }
}

/// How a reader sees a metrics dataset's series: its labels hidden or masked (a redacted
/// label's value starred; a nullified or removed one gone), and which series it may see.
/// Series that become alike merge, as Prometheus merges series of one label set.
#[derive(Clone, Debug, Default)]
pub struct SeriesSeen {
    pub fields: FieldPolicy,
    pub filter: Option<LabelFilter>,
}

impl SeriesSeen {
    /// The labels of `meta` the reader sees, still sorted by name.
    fn labels(&self, meta: &SeriesMeta) -> LabelSet {
        meta.labels
            .iter()
            .filter_map(|(name, value)| Some((name.clone(), self.fields.label(name, value)?)))
            .collect()
    }

    /// Whether a matcher on label `name` may use the postings of its real values.
    fn indexed(&self, name: &str) -> bool {
        self.fields.shows(name) == Some(None)
    }
}

/// The id and labels of series `meta` as the reader sees it (`seen`: `None` as it is).
fn seen_as<'m>(
    meta: &'m SeriesMeta,
    seen: Option<&SeriesSeen>,
) -> (u64, Cow<'m, [(String, String)]>) {
    match seen {
        None => (meta.id, Cow::Borrowed(meta.labels.as_slice())),
        Some(seen) => {
            let labels = seen.labels(meta);
            let id = series_id(labels.iter().map(|(n, v)| (n.as_str(), v.as_str())));
            (id, Cow::Owned(labels))
        }
    }
}

/// What reads a series set: the set, its deleted rows, and how its reader sees it.
type EachSet<'a> =
    dyn FnMut(&SeriesSet, &RoaringTreemap, Option<&SeriesSeen>) -> Result<(), StorageError> + 'a;

/// The series of some metrics datasets, as of one snapshot of each, as their reader sees them.
#[derive(Debug, Default)]
pub struct DatasetSeries {
    tables: Vec<(Arc<TableSnapshot>, Option<SeriesSeen>)>,
}

impl DatasetSeries {
    /// The series of `tables`, as they are.
    pub fn new(tables: Vec<Arc<TableSnapshot>>) -> DatasetSeries {
        DatasetSeries {
            tables: tables.into_iter().map(|t| (t, None)).collect(),
        }
    }

    /// The series of `tables`, each as its reader sees it (`None`: as it is).
    pub fn seen(tables: Vec<(Arc<TableSnapshot>, Option<SeriesSeen>)>) -> DatasetSeries {
        DatasetSeries { tables }
    }

    /// Calls `each` with every series set of the snapshots whose samples may fall between
    /// `mint` and `maxt`, and the rows deleted from it.
    fn each_set(&self, mint: i64, maxt: i64, each: &mut EachSet<'_>) -> Result<(), StorageError> {
        let overlaps = |set: &SeriesSet| {
            let (lo, hi) = set.time_span();
            !set.series().is_empty() && hi >= mint && lo <= maxt
        };
        for (table, seen) in &self.tables {
            let seen = seen.as_ref();
            for segment in &table.segments {
                let Some(set) = segment.index.as_ref().and_then(|i| i.series.as_ref()) else {
                    return Err(StorageError(format!(
                        "segment {} of dataset {:?} has no series index",
                        segment.seq, table.table.name
                    )));
                };
                if overlaps(set) {
                    each(set, &segment.deleted, seen)?;
                }
            }
            for batch in &table.memtable {
                let set = batch
                    .series_set(table.index.as_deref())
                    .map_err(|e| StorageError(e.to_string()))?;
                if let Some(set) = set.filter(|s| overlaps(s)) {
                    each(&set, &batch.deleted, seen)?;
                }
            }
        }
        Ok(())
    }
}

/// The label values the postings can answer for `matchers`: equality with a non-empty value
/// of a label the reader sees as it is.
fn equalities<'m>(matchers: &'m [Matcher], seen: Option<&SeriesSeen>) -> Vec<(&'m str, &'m str)> {
    matchers
        .iter()
        .filter(|m| m.op == MatchOp::Equal && !m.value.is_empty())
        .filter(|m| seen.is_none_or(|seen| seen.indexed(&m.name)))
        .map(|m| (m.name.as_str(), m.value.as_str()))
        .collect()
}

/// Whether series `meta` is one the reader may see, and `matchers` match it as the reader
/// sees it (a label hidden from it is not there).
fn satisfies(meta: &SeriesMeta, matchers: &[Matcher], seen: Option<&SeriesSeen>) -> bool {
    let Some(seen) = seen else {
        return matchers
            .iter()
            .all(|m| m.matches(meta.label(&m.name).unwrap_or("")));
    };
    seen.filter
        .as_ref()
        .is_none_or(|filter| filter.matches(&|name| meta.label(name)))
        && matchers.iter().all(|m| {
            let value = meta
                .label(&m.name)
                .and_then(|value| seen.fields.label(&m.name, value));
            m.matches(value.as_deref().unwrap_or(""))
        })
}

/// A series being read: its labels, its points so far, and whether its parts overlap in time.
struct Found {
    labels: Labels,
    floats: Vec<FPoint>,
    overlapped: bool,
}

/// The place in `found` of the series of `id` and `labels`, added when new.
fn entry(
    index: &mut HashMap<u64, Vec<usize>>,
    found: &mut Vec<Found>,
    id: u64,
    labels: &[(String, String)],
) -> usize {
    let same = index.entry(id).or_default();
    if let Some(&at) = same.iter().find(|&&i| found[i].labels.same_pairs(labels)) {
        return at;
    }
    found.push(Found {
        labels: Labels::from_pairs(labels.iter().cloned()),
        floats: Vec::new(),
        overlapped: false,
    });
    same.push(found.len() - 1);
    found.len() - 1
}

/// About how many of a part's samples of a series fall between `mint` and `maxt`, taking them
/// as spread evenly over the part's time span.
fn expected_points(meta: &SeriesMeta, mint: i64, maxt: i64) -> usize {
    let span = (meta.max_t - meta.min_t).max(0) as f64 + 1.0;
    let covered = (maxt.min(meta.max_t) - mint.max(meta.min_t)).max(0) as f64 + 1.0;
    (f64::from(meta.samples) * (covered / span).min(1.0)) as usize
}

impl DatasetSeries {
    /// Reads the series whose parts overlap in time again, every part's points with their rows,
    /// and merges them by time, the last written winning.
    fn merge_overlapped(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        index: &HashMap<u64, Vec<usize>>,
        found: &mut [Found],
    ) -> Result<(), StorageError> {
        let mut points: HashMap<usize, Vec<Point>> = HashMap::new();
        self.each_set(mint, maxt, &mut |set, deleted, seen| {
            let equal = equalities(matchers, seen);
            for slot in set.select(&equal, |meta| satisfies(meta, matchers, seen)) {
                let meta = &set.series()[slot];
                let (id, labels) = seen_as(meta, seen);
                let Some(&at) = index.get(&id).and_then(|same| {
                    same.iter()
                        .find(|&&i| found[i].overlapped && found[i].labels.same_pairs(&labels))
                }) else {
                    continue;
                };
                set.read(slot, mint, maxt, deleted, points.entry(at).or_default())
                    .map_err(|e| StorageError(e.to_string()))?;
            }
            Ok(())
        })?;
        for (at, mut points) in points {
            points.sort_by_key(|p| (p.t, p.row));
            let floats = &mut found[at].floats;
            for point in points {
                match floats.last_mut() {
                    Some(last) if last.t == point.t => last.f = point.v,
                    _ => floats.push(FPoint {
                        t: point.t,
                        f: point.v,
                    }),
                }
            }
        }
        Ok(())
    }
}

impl Queryable for DatasetSeries {
    fn select(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
    ) -> Result<Vec<Series>, StorageError> {
        // Each series once, found by its id (label sets that share an id are told apart), its
        // points from every part in the order the parts were written. A part whose points do
        // not all come after the ones read before (a series written out of order, or a sample
        // written again) sets its series aside, to be read again and merged by row below.
        let mut index: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut found: Vec<Found> = Vec::new();
        let mut scratch: Vec<Point> = Vec::new();
        self.each_set(mint, maxt, &mut |set, deleted, seen| {
            let equal = equalities(matchers, seen);
            for slot in set.select(&equal, |meta| satisfies(meta, matchers, seen)) {
                let meta = &set.series()[slot];
                if meta.max_t < mint || meta.min_t > maxt {
                    continue;
                }
                let (id, labels) = seen_as(meta, seen);
                let at = entry(&mut index, &mut found, id, &labels);
                let series = &mut found[at];
                if series.overlapped {
                    continue;
                }
                scratch.clear();
                set.read(slot, mint, maxt, deleted, &mut scratch)
                    .map_err(|e| StorageError(e.to_string()))?;
                match (series.floats.last(), scratch.first()) {
                    (Some(last), Some(first)) if first.t <= last.t => {
                        series.overlapped = true;
                        series.floats = Vec::new();
                    }
                    _ => {
                        series.floats.reserve(expected_points(meta, mint, maxt));
                        series
                            .floats
                            .extend(scratch.iter().map(|p| FPoint { t: p.t, f: p.v }));
                    }
                }
            }
            Ok(())
        })?;
        if found.iter().any(|s| s.overlapped) {
            self.merge_overlapped(matchers, mint, maxt, &index, &mut found)?;
        }
        found.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(found
            .into_iter()
            .filter(|s| !s.floats.is_empty())
            .map(|s| Series {
                labels: s.labels,
                floats: s.floats,
                histograms: Vec::new(),
            })
            .collect())
    }

    fn series_labels(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
    ) -> Result<Vec<Labels>, StorageError> {
        let mut found: std::collections::BTreeSet<Labels> = Default::default();
        self.each_set(mint, maxt, &mut |set, _, seen| {
            let equal = equalities(matchers, seen);
            for slot in set.select(&equal, |meta| satisfies(meta, matchers, seen)) {
                let meta = &set.series()[slot];
                if meta.max_t >= mint && meta.min_t <= maxt {
                    let (_, labels) = seen_as(meta, seen);
                    found.insert(Labels::from_pairs(labels.iter().cloned()));
                }
            }
            Ok(())
        })?;
        Ok(found.into_iter().collect())
    }
}

impl Engine {
    /// The series PromQL reads for `principal`: metrics dataset `index` alone, or every metrics
    /// dataset the principal may read when `None`, each as it sees them.
    pub async fn metrics_series(
        &self,
        principal: &PlatformPrincipal,
        index: Option<&str>,
    ) -> Result<DatasetSeries> {
        let views = match index {
            // A dataset, or an alias of some (through its filters).
            Some(name) => {
                let views = self
                    .read(
                        principal,
                        Action::RecordRead,
                        Target::Names(Some(name)),
                        false,
                    )
                    .await?
                    .datasets;
                if let Some(records) = views.iter().find(|view| !view.def.metrics) {
                    return Err(Error::BadRequest(format!(
                        "dataset {:?} holds records, not metrics: PromQL reads metrics datasets",
                        records.name
                    )));
                }
                views
            }
            // The datasets a user may not read are passed over, as a wildcard does.
            None => {
                self.read(principal, Action::RecordRead, Target::Metrics, true)
                    .await?
                    .datasets
            }
        };
        let mut tables = Vec::with_capacity(views.len());
        for view in views {
            let filter = view.series_filter()?;
            let seen = match (view.fields.is_open(), &filter) {
                (true, None) => None,
                _ => Some(SeriesSeen {
                    fields: view.fields.clone(),
                    filter,
                }),
            };
            tables.push((view.snapshot, seen));
        }
        Ok(DatasetSeries::seen(tables))
    }

    /// Evaluates PromQL `query` over the series of [`metrics_series`](Engine::metrics_series),
    /// giving up after `timeout`.
    pub async fn promql_query(
        &self,
        principal: &PlatformPrincipal,
        index: Option<&str>,
        query: &str,
        at: Evaluation,
        timeout: Duration,
    ) -> Result<QueryOutput, PromqlError> {
        let series = self.metrics_series(principal, index).await?;
        let options = EngineOptions {
            deadline: Some(std::time::Instant::now() + timeout),
            ..EngineOptions::default()
        };
        let query = query.to_owned();
        // Evaluation and index reads are CPU and disk work.
        let output = blocking(move || match at {
            Evaluation::Instant { time } => instant_query(&series, &query, time, &options),
            Evaluation::Range { start, end, step } => {
                range_query(&series, &query, start, end, step, &options)
            }
        })
        .await?;
        Ok(output?)
    }

    /// The label sets of the series that match any of the selectors `matches` (every series
    /// when there are none) with samples from `start` to `end`, sorted.
    pub async fn promql_series(
        &self,
        principal: &PlatformPrincipal,
        index: Option<&str>,
        matches: &[String],
        start: i64,
        end: i64,
    ) -> Result<Vec<Labels>, PromqlError> {
        let selectors = matches
            .iter()
            .map(|text| {
                parse_metric_selector(text).map_err(|e| {
                    PromqlError::bad_data(format!("invalid parameter \"match[]\": {e}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let series = self.metrics_series(principal, index).await?;
        blocking(move || -> Result<Vec<Labels>, PromqlError> {
            let mut found = std::collections::BTreeSet::new();
            let storage_error = |e: StorageError| PromqlError {
                kind: PromqlErrorKind::Internal,
                message: e.to_string(),
            };
            if selectors.is_empty() {
                found.extend(
                    series
                        .series_labels(&[], start, end)
                        .map_err(storage_error)?,
                );
            }
            for matchers in &selectors {
                found.extend(
                    series
                        .series_labels(matchers, start, end)
                        .map_err(storage_error)?,
                );
            }
            Ok(found.into_iter().collect())
        })
        .await?
    }
}
