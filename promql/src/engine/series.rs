//! The evaluator's working values: series with one point per step ([`EvSeries`]), the
//! elements of the instant vector of one step ([`Sample`]), and the label manipulations the
//! operators share.

use std::sync::Arc;

use super::Hist;
use crate::value::{FPoint, HPoint, Labels, METRIC_NAME};

/// A series of an intermediate result. Labels are shared: the vector of every step refers to
/// them instead of copying them.
#[derive(Debug, Clone)]
pub(crate) struct EvSeries {
    pub labels: Arc<Labels>,
    pub floats: Vec<FPoint>,
    pub hists: Vec<HPoint>,
    /// The metric name (and the other metadata labels) is to be dropped at the end of the
    /// evaluation.
    pub drop_name: bool,
}

impl EvSeries {
    pub fn new(labels: Arc<Labels>, drop_name: bool) -> EvSeries {
        EvSeries {
            labels,
            floats: Vec::new(),
            hists: Vec::new(),
            drop_name,
        }
    }

    /// The number of points, histograms weighted as Prometheus weighs them.
    pub fn sample_count(&self) -> usize {
        self.floats.len() + self.hists.iter().map(|p| hist_size(&p.h)).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.floats.is_empty() && self.hists.is_empty()
    }

    /// Adds a point at `t`.
    pub fn push(&mut self, t: i64, f: f64, h: Option<Hist>) {
        match h {
            Some(h) => self.hists.push(HPoint { t, h }),
            None => self.floats.push(FPoint { t, f }),
        }
    }
}

/// How many float samples a histogram counts as toward the sample limit (its size in 16-byte
/// units, as Prometheus estimates it).
pub(crate) fn hist_size(h: &crate::histogram::FloatHistogram) -> usize {
    let bytes = 96
        + 8 * (h.positive_buckets.len() + h.negative_buckets.len() + h.custom_values.len())
        + 8 * (h.positive_spans.len() + h.negative_spans.len());
    bytes.div_ceil(16)
}

/// One element of the instant vector of a step.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub labels: Arc<Labels>,
    /// The time of the sample: the step, or the time of the raw sample for `timestamp()` over
    /// a selector.
    pub t: i64,
    pub f: f64,
    pub h: Option<Hist>,
    pub drop_name: bool,
}

impl Sample {
    pub fn float(labels: Arc<Labels>, t: i64, f: f64, drop_name: bool) -> Sample {
        Sample {
            labels,
            t,
            f,
            h: None,
            drop_name,
        }
    }
}

/// Whether `name` is one of the labels Prometheus drops together with the metric name
/// (`__name__`, `__type__`, `__unit__`).
pub(crate) fn is_metadata_label(name: &str) -> bool {
    matches!(name, METRIC_NAME | "__type__" | "__unit__")
}

/// The labels without the metric name and the other metadata labels.
pub(crate) fn drop_metadata(labels: &Labels) -> Labels {
    labels.filter(|n| !is_metadata_label(n))
}

/// Prometheus' `MatchLabels`: with `on`, only the listed labels; otherwise all but the
/// listed ones and the metric name.
pub(crate) fn match_labels(labels: &Labels, on: bool, names: &[String]) -> Labels {
    labels.filter(|n| {
        let listed = names.iter().any(|x| x == n);
        if on {
            listed
        } else {
            !listed && n != METRIC_NAME
        }
    })
}

/// The metric name of a label set ("" without one).
pub(crate) fn metric_name(labels: &Labels) -> &str {
    labels.name().unwrap_or("")
}
