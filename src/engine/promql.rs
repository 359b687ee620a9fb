//! PromQL over the metrics datasets of an account (ADR 7): the series of a set of dataset
//! snapshots as the evaluator's [`Queryable`].
//!
//! A query reads every metrics dataset the user may read, or the one it names. Each dataset's
//! series come from the series index of each of its segments and from its memtable batches
//! (grouped on first use); a series' samples from every part merge by time, and of two samples
//! at one time the one written last (the higher row id) is read. Deleted rows are never read.

use std::{collections::HashMap, sync::Arc, time::Duration};

use roaring::RoaringTreemap;
use strata_projections::table::{
    TableSnapshot,
    series::{Point, SeriesMeta, SeriesSet},
};

use super::{Action, Engine, PlatformPrincipal};
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

/// Runs `work` on a blocking thread (evaluation and index reads are CPU and disk work).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, PromqlError> + Send + 'static,
) -> Result<T, PromqlError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| PromqlError {
            kind: PromqlErrorKind::Internal,
            message: format!("a query task failed: {e}"),
        })?
}

/// The series of some metrics datasets, as of one snapshot of each.
#[derive(Debug, Default)]
pub struct DatasetSeries {
    tables: Vec<Arc<TableSnapshot>>,
}

impl DatasetSeries {
    pub fn new(tables: Vec<Arc<TableSnapshot>>) -> DatasetSeries {
        DatasetSeries { tables }
    }

    /// Calls `each` with every series set of the snapshots whose samples may fall between
    /// `mint` and `maxt`, and the rows deleted from it.
    fn each_set(
        &self,
        mint: i64,
        maxt: i64,
        each: &mut dyn FnMut(&SeriesSet, &RoaringTreemap) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let overlaps = |set: &SeriesSet| {
            let (lo, hi) = set.time_span();
            !set.series().is_empty() && hi >= mint && lo <= maxt
        };
        for table in &self.tables {
            for segment in &table.segments {
                let Some(set) = segment.index.as_ref().and_then(|i| i.series.as_ref()) else {
                    return Err(StorageError(format!(
                        "segment {} of dataset {:?} has no series index",
                        segment.seq, table.table.name
                    )));
                };
                if overlaps(set) {
                    each(set, &segment.deleted)?;
                }
            }
            for batch in &table.memtable {
                let set = batch
                    .series_set(table.index.as_deref())
                    .map_err(|e| StorageError(e.to_string()))?;
                if let Some(set) = set.filter(|s| overlaps(s)) {
                    each(&set, &batch.deleted)?;
                }
            }
        }
        Ok(())
    }
}

/// The label values the postings can answer for `matchers`: equality with a non-empty value.
fn equalities(matchers: &[Matcher]) -> Vec<(&str, &str)> {
    matchers
        .iter()
        .filter(|m| m.op == MatchOp::Equal && !m.value.is_empty())
        .map(|m| (m.name.as_str(), m.value.as_str()))
        .collect()
}

fn satisfies(meta: &SeriesMeta, matchers: &[Matcher]) -> bool {
    matchers
        .iter()
        .all(|m| m.matches(meta.label(&m.name).unwrap_or("")))
}

/// A series being read: its labels, its points so far, and whether its parts overlap in time.
struct Found {
    labels: Labels,
    floats: Vec<FPoint>,
    overlapped: bool,
}

/// The place in `found` of the series `meta` describes, added when new.
fn entry(index: &mut HashMap<u64, Vec<usize>>, found: &mut Vec<Found>, meta: &SeriesMeta) -> usize {
    let same = index.entry(meta.id).or_default();
    if let Some(&at) = same
        .iter()
        .find(|&&i| found[i].labels.same_pairs(&meta.labels))
    {
        return at;
    }
    found.push(Found {
        labels: Labels::from_pairs(meta.labels.iter().cloned()),
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
        equal: &[(&str, &str)],
        mint: i64,
        maxt: i64,
        index: &HashMap<u64, Vec<usize>>,
        found: &mut [Found],
    ) -> Result<(), StorageError> {
        let mut points: HashMap<usize, Vec<Point>> = HashMap::new();
        self.each_set(mint, maxt, &mut |set, deleted| {
            for slot in set.select(equal, |meta| satisfies(meta, matchers)) {
                let meta = &set.series()[slot];
                let Some(&at) = index.get(&meta.id).and_then(|same| {
                    same.iter()
                        .find(|&&i| found[i].overlapped && found[i].labels.same_pairs(&meta.labels))
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
        let equal = equalities(matchers);
        // Each series once, found by its id (label sets that share an id are told apart), its
        // points from every part in the order the parts were written. A part whose points do
        // not all come after the ones read before (a series written out of order, or a sample
        // written again) sets its series aside, to be read again and merged by row below.
        let mut index: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut found: Vec<Found> = Vec::new();
        let mut scratch: Vec<Point> = Vec::new();
        self.each_set(mint, maxt, &mut |set, deleted| {
            for slot in set.select(&equal, |meta| satisfies(meta, matchers)) {
                let meta = &set.series()[slot];
                if meta.max_t < mint || meta.min_t > maxt {
                    continue;
                }
                let at = entry(&mut index, &mut found, meta);
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
            self.merge_overlapped(matchers, &equal, mint, maxt, &index, &mut found)?;
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
        let equal = equalities(matchers);
        let mut found: std::collections::BTreeSet<Labels> = Default::default();
        self.each_set(mint, maxt, &mut |set, _| {
            for slot in set.select(&equal, |meta| satisfies(meta, matchers)) {
                let meta = &set.series()[slot];
                if meta.max_t >= mint && meta.min_t <= maxt {
                    found.insert(Labels::from_pairs(meta.labels.iter().cloned()));
                }
            }
            Ok(())
        })?;
        Ok(found.into_iter().collect())
    }
}

impl Engine {
    /// The series PromQL reads for `principal`: metrics dataset `index` alone, or every metrics
    /// dataset the principal may read when `None`.
    pub async fn metrics_series(
        &self,
        principal: &PlatformPrincipal,
        index: Option<&str>,
    ) -> Result<DatasetSeries> {
        let account = &principal.account;
        let mut tables = Vec::new();
        match index {
            Some(name) => {
                self.authorize(principal, Action::RecordRead, name)?;
                let (runtime, def) = self.dataset(account, name).await?;
                if !def.metrics {
                    return Err(Error::BadRequest(format!(
                        "dataset {name:?} holds records, not metrics: PromQL reads metrics datasets"
                    )));
                }
                tables.push(self.table_runtime(&runtime, &def).await?.snapshot());
            }
            None => {
                let Some(catalog) = self.datasets_catalog(account).await? else {
                    return Ok(DatasetSeries::default());
                };
                let Some(database) = self
                    .default_database(account, false, &super::Origin::system())
                    .await?
                else {
                    return Ok(DatasetSeries::default());
                };
                let runtime = self.runtime(&database).await?;
                for def in catalog.tables.values().filter(|d| d.dataset && d.metrics) {
                    // The datasets a user may not read are passed over, as a wildcard does.
                    if self
                        .authorize(principal, Action::RecordRead, &def.name)
                        .is_err()
                    {
                        continue;
                    }
                    tables.push(self.table_runtime(&runtime, def).await?.snapshot());
                }
            }
        }
        Ok(DatasetSeries::new(tables))
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
        blocking(move || {
            let output = match at {
                Evaluation::Instant { time } => instant_query(&series, &query, time, &options),
                Evaluation::Range { start, end, step } => {
                    range_query(&series, &query, start, end, step, &options)
                }
            };
            Ok(output?)
        })
        .await
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
        blocking(move || {
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
        .await
    }
}
