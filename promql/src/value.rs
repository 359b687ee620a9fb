//! The values PromQL reads and computes: label sets, samples and series.

use std::{fmt, sync::Arc};

use super::histogram::FloatHistogram;

/// The label that holds a series' metric name.
pub const METRIC_NAME: &str = "__name__";

/// The bit pattern Prometheus writes for a staleness marker: a NaN no arithmetic produces.
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// Whether `value` is a staleness marker (and not any other NaN).
pub fn is_stale_nan(value: f64) -> bool {
    value.to_bits() == STALE_NAN_BITS
}

/// A staleness marker.
pub fn stale_nan() -> f64 {
    f64::from_bits(STALE_NAN_BITS)
}

/// A label set, sorted by name, each name once. Empty values are left out (Prometheus treats a
/// label with an empty value as absent).
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Labels(Vec<(String, String)>);

impl Labels {
    pub fn new() -> Labels {
        Labels(Vec::new())
    }

    /// The set of `pairs`: sorted, empty values left out, the last of a repeated name kept.
    pub fn from_pairs<I, N, V>(pairs: I) -> Labels
    where
        I: IntoIterator<Item = (N, V)>,
        N: Into<String>,
        V: Into<String>,
    {
        let mut labels = Labels::new();
        for (name, value) in pairs {
            labels.set(name, value);
        }
        labels
    }

    /// Whether this is the set of `pairs`, which are sorted by name with each name once (as a
    /// series index keeps them); a pair with an empty value is absent.
    pub fn same_pairs(&self, pairs: &[(String, String)]) -> bool {
        let mut mine = self.0.iter();
        for (name, value) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
            match mine.next() {
                Some((n, v)) if n == name && v == value => {}
                _ => return false,
            }
        }
        mine.next().is_none()
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.0[i].1.as_str())
    }

    /// The metric name, if the set has one.
    pub fn name(&self) -> Option<&str> {
        self.get(METRIC_NAME)
    }

    /// Sets `name` to `value`; an empty value removes it.
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let (name, value) = (name.into(), value.into());
        match self.0.binary_search_by(|(n, _)| n.as_str().cmp(&name)) {
            Ok(i) if value.is_empty() => {
                self.0.remove(i);
            }
            Ok(i) => self.0[i].1 = value,
            Err(_) if value.is_empty() => {}
            Err(i) => self.0.insert(i, (name, value)),
        }
    }

    pub fn remove(&mut self, name: &str) {
        if let Ok(i) = self.0.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
            self.0.remove(i);
        }
    }

    /// The set without its metric name.
    pub fn without_name(&self) -> Labels {
        let mut labels = self.clone();
        labels.remove(METRIC_NAME);
        labels
    }

    /// The labels of the set that `keep` says to keep.
    pub fn filter(&self, mut keep: impl FnMut(&str) -> bool) -> Labels {
        Labels(self.0.iter().filter(|(n, _)| keep(n)).cloned().collect())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// As Prometheus prints a label set: `{__name__="up", job="x"}`, values quoted.
impl fmt::Display for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (n, v)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n}={v:?}")?;
        }
        f.write_str("}")
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A float sample: Unix milliseconds and a value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FPoint {
    pub t: i64,
    pub f: f64,
}

/// A histogram sample: Unix milliseconds and a native histogram.
#[derive(Clone, Debug, PartialEq)]
pub struct HPoint {
    pub t: i64,
    pub h: Arc<FloatHistogram>,
}

/// A series as storage gives it: its labels and its samples in the time range asked, each kind
/// in time order, at most one sample (of either kind) per timestamp.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub labels: Labels,
    pub floats: Vec<FPoint>,
    pub histograms: Vec<HPoint>,
}

/// The value of one element of an instant vector: a float or a native histogram.
#[derive(Clone, Debug, PartialEq)]
pub enum SampleValue {
    Float(f64),
    Histogram(Arc<FloatHistogram>),
}
