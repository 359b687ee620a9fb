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
///
/// Histograms come back with the counter-reset hints Prometheus' TSDB gives them when it reads
/// them back from its chunks (see [`as_read_from_chunks`]), so that the conformance scripts see
/// what they would see from Prometheus.
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
                let histograms: Vec<HPoint> = as_read_from_chunks(s)
                    .into_iter()
                    .filter(|p| p.t >= mint && p.t <= maxt)
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

/// Prometheus' TSDB cuts a series' histogram samples into chunks and, reading them back, hints
/// each sample by where it sits (`counterResetHint` in tsdb/chunkenc): every sample of a gauge
/// chunk is a gauge; the first of a counter chunk is a reset when the chunk was cut for one,
/// unknown otherwise; the others are not resets. A chunk is cut at a series' first histogram,
/// after a float, after a stale marker, when a counter histogram resets (an explicit hint, or
/// one detected against the previous sample), when the bucket layout cannot be appended (the
/// schema or the zero threshold changes), when the sample switches between gauge and counter,
/// and after 120 samples. This reproduces those hints from the samples as they were added.
fn as_read_from_chunks(series: &Series) -> Vec<HPoint> {
    use super::histogram::CounterResetHint;
    use super::value::is_stale_nan;
    const SAMPLES_PER_CHUNK: usize = 120;
    let mut out = Vec::with_capacity(series.histograms.len());
    // The previous histogram of the current chunk, whether the chunk is a gauge chunk, and
    // how many samples it holds.
    let mut chunk: Option<(&super::histogram::FloatHistogram, bool, usize)> = None;
    let mut floats = series.floats.iter().peekable();
    for point in &series.histograms {
        // A float sample between two histograms ends the chunk.
        let mut after_float = false;
        while floats.next_if(|f| f.t < point.t).is_some() {
            after_float = true;
        }
        if after_float {
            chunk = None;
        }
        let h = &point.h;
        let gauge = h.counter_reset_hint == CounterResetHint::Gauge;
        let stale = is_stale_nan(h.sum);
        let (cut, reset) = match chunk {
            None => (true, h.counter_reset_hint == CounterResetHint::Reset),
            Some((prev, prev_gauge, n)) => {
                if stale {
                    (false, false)
                } else if is_stale_nan(prev.sum) || n >= SAMPLES_PER_CHUNK || gauge != prev_gauge {
                    (
                        true,
                        !gauge && h.counter_reset_hint == CounterResetHint::Reset,
                    )
                } else if gauge {
                    (
                        h.schema != prev.schema || h.zero_threshold != prev.zero_threshold,
                        false,
                    )
                } else {
                    let mut unhinted = (**h).clone();
                    unhinted.counter_reset_hint = CounterResetHint::Unknown;
                    if h.counter_reset_hint == CounterResetHint::Reset {
                        (true, true)
                    } else if unhinted.detect_reset(prev) {
                        (true, false)
                    } else {
                        (
                            h.schema != prev.schema || h.zero_threshold != prev.zero_threshold,
                            false,
                        )
                    }
                }
            }
        };
        let gauge_chunk = if cut {
            gauge
        } else {
            chunk.is_some_and(|c| c.1)
        };
        let n = if cut { 1 } else { chunk.map_or(1, |c| c.2 + 1) };
        let hint = if gauge_chunk {
            CounterResetHint::Gauge
        } else if n > 1 {
            CounterResetHint::NotReset
        } else if reset {
            CounterResetHint::Reset
        } else {
            CounterResetHint::Unknown
        };
        let read = if stale || h.counter_reset_hint == hint {
            point.clone()
        } else {
            let mut h = (**h).clone();
            h.counter_reset_hint = hint;
            HPoint {
                t: point.t,
                h: std::sync::Arc::new(h),
            }
        };
        out.push(read);
        chunk = Some((h, gauge_chunk, n));
    }
    out
}
