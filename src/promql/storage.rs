//! The seam between the evaluator and where samples are: [`Queryable`], implemented by the
//! metrics datasets of an account (in the engine) and by [`MemStorage`] (the conformance
//! runner's store, and a reference for the others).

use std::collections::BTreeMap;

use super::{
    ast::Matcher,
    value::{FPoint, HPoint, Labels, Series},
};

/// Why storage could not answer (the evaluator reports it as an execution error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StorageError(pub String);

/// Series, selected by label matchers and a time range.
pub trait Queryable: Send + Sync {
    /// The series whose labels satisfy every one of `matchers` (an absent label reads as the
    /// empty value), with their samples from `mint` to `maxt` (Unix milliseconds, both
    /// included). A series without samples in the range may be left out. Series come back
    /// sorted by labels.
    fn select(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
    ) -> Result<Vec<Series>, StorageError>;

    /// The label sets of the series [`select`](Queryable::select) would return, without their
    /// samples (for the label and series listings).
    fn series_labels(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
    ) -> Result<Vec<Labels>, StorageError> {
        Ok(self
            .select(matchers, mint, maxt)?
            .into_iter()
            .map(|s| s.labels)
            .collect())
    }
}

/// Whether `labels` satisfy every one of `matchers`.
pub fn matches_all(labels: &Labels, matchers: &[Matcher]) -> bool {
    matchers
        .iter()
        .all(|m| m.matches(labels.get(&m.name).unwrap_or("")))
}

/// Series in memory, by label set.
#[derive(Clone, Debug, Default)]
pub struct MemStorage {
    series: BTreeMap<Labels, Series>,
}

impl MemStorage {
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    /// Adds a float sample; one at the same time of the same series is replaced.
    pub fn add_float(&mut self, labels: &Labels, t: i64, f: f64) {
        let series = self.entry(labels);
        remove_at(series, t);
        let at = series.floats.partition_point(|p| p.t < t);
        series.floats.insert(at, FPoint { t, f });
    }

    /// Adds a histogram sample; one at the same time of the same series is replaced.
    pub fn add_histogram(
        &mut self,
        labels: &Labels,
        t: i64,
        h: std::sync::Arc<super::histogram::FloatHistogram>,
    ) {
        let series = self.entry(labels);
        remove_at(series, t);
        let at = series.histograms.partition_point(|p| p.t < t);
        series.histograms.insert(at, HPoint { t, h });
    }

    /// Drops everything.
    pub fn clear(&mut self) {
        self.series.clear();
    }

    fn entry(&mut self, labels: &Labels) -> &mut Series {
        self.series.entry(labels.clone()).or_insert_with(|| Series {
            labels: labels.clone(),
            ..Series::default()
        })
    }
}

fn remove_at(series: &mut Series, t: i64) {
    series.floats.retain(|p| p.t != t);
    series.histograms.retain(|p| p.t != t);
}

impl Queryable for MemStorage {
    fn select(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
    ) -> Result<Vec<Series>, StorageError> {
        Ok(self
            .series
            .values()
            .filter(|s| matches_all(&s.labels, matchers))
            .filter_map(|s| {
                let floats: Vec<FPoint> = s
                    .floats
                    .iter()
                    .filter(|p| p.t >= mint && p.t <= maxt)
                    .copied()
                    .collect();
                let histograms: Vec<HPoint> = s
                    .histograms
                    .iter()
                    .filter(|p| p.t >= mint && p.t <= maxt)
                    .cloned()
                    .collect();
                (!floats.is_empty() || !histograms.is_empty()).then(|| Series {
                    labels: s.labels.clone(),
                    floats,
                    histograms,
                })
            })
            .collect())
    }
}
