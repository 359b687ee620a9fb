//! Native histograms as written in test files (`{{schema:1 sum:3 count:22 buckets:[5 10 7]}}`),
//! kept as a plain struct of their fields, and the bucket-wise `+`/`-` of the expanding
//! notation (`{{...}}+{{...}}x3`), done as Prometheus' float histogram arithmetic does it:
//! the finer schema is reduced to the coarser one and buckets are merged by index.

use std::collections::BTreeMap;

/// The schema of histograms with custom bucket boundaries (NHCB).
pub const CUSTOM_BUCKETS_SCHEMA: i32 = -53;

pub use crate::histogram::CounterResetHint;

/// One histogram of a series description; every field defaults to zero/empty.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HistogramItem {
    pub schema: i32,
    pub sum: f64,
    pub count: f64,
    /// Count of the zero bucket.
    pub z_bucket: f64,
    /// Width (threshold) of the zero bucket.
    pub z_bucket_w: f64,
    /// Positive buckets; `buckets[i]` has bucket index `offset + i`.
    pub buckets: Vec<f64>,
    pub offset: i32,
    /// Negative buckets; `n_buckets[i]` has bucket index `n_offset + i`.
    pub n_buckets: Vec<f64>,
    pub n_offset: i32,
    pub counter_reset_hint: CounterResetHint,
    /// Whether `counter_reset_hint` was written out (tests compare it only then).
    pub counter_reset_hint_set: bool,
    /// Upper bounds of the custom buckets (schema -53).
    pub custom_values: Vec<f64>,
}

impl HistogramItem {
    /// `self + other`, bucket-wise.
    pub fn add(&self, other: &HistogramItem) -> Result<HistogramItem, String> {
        self.combine(other, 1.0)
    }

    /// `self - other`, bucket-wise.
    pub fn sub(&self, other: &HistogramItem) -> Result<HistogramItem, String> {
        self.combine(other, -1.0)
    }

    fn combine(&self, other: &HistogramItem, sign: f64) -> Result<HistogramItem, String> {
        let custom = self.schema == CUSTOM_BUCKETS_SCHEMA;
        if custom != (other.schema == CUSTOM_BUCKETS_SCHEMA) {
            return Err(
                "cannot apply this operation on histograms with a mix of exponential and custom bucket schemas"
                    .into(),
            );
        }
        if custom && self.custom_values != other.custom_values {
            return Err("histograms have different custom bucket boundaries".into());
        }
        let schema = self.schema.min(other.schema);
        let mut out = self.clone();
        out.schema = schema;
        out.sum += sign * other.sum;
        out.count += sign * other.count;
        out.z_bucket += sign * other.z_bucket;
        out.z_bucket_w = self.z_bucket_w.max(other.z_bucket_w);
        out.counter_reset_hint = combine_hints(self.counter_reset_hint, other.counter_reset_hint);
        let pos = merge(
            bucket_map(&self.buckets, self.offset, self.schema, schema, custom),
            bucket_map(&other.buckets, other.offset, other.schema, schema, custom),
            sign,
        );
        (out.offset, out.buckets) = pos;
        let neg = merge(
            bucket_map(&self.n_buckets, self.n_offset, self.schema, schema, custom),
            bucket_map(
                &other.n_buckets,
                other.n_offset,
                other.schema,
                schema,
                custom,
            ),
            sign,
        );
        (out.n_offset, out.n_buckets) = neg;
        Ok(out)
    }
}

/// The hint of a sum, as Prometheus adjusts it when adding histograms.
fn combine_hints(a: CounterResetHint, b: CounterResetHint) -> CounterResetHint {
    use CounterResetHint as H;
    match (a, b) {
        (a, b) if a == b => a,
        (H::Gauge, _) | (_, H::Gauge) => H::Gauge,
        _ => H::Unknown,
    }
}

/// Buckets by index, reduced from `from` to the coarser schema `to`.
fn bucket_map(
    buckets: &[f64],
    offset: i32,
    from: i32,
    to: i32,
    custom: bool,
) -> BTreeMap<i32, f64> {
    let mut map = BTreeMap::new();
    let shift = if custom { 0 } else { (from - to).clamp(0, 31) };
    for (i, &v) in buckets.iter().enumerate() {
        let idx = offset + i as i32;
        let target = if shift == 0 {
            idx
        } else {
            ((idx - 1) >> shift) + 1
        };
        *map.entry(target).or_insert(0.0) += v;
    }
    map
}

/// `a + sign * b` as one contiguous run of buckets: (offset, buckets).
fn merge(mut a: BTreeMap<i32, f64>, b: BTreeMap<i32, f64>, sign: f64) -> (i32, Vec<f64>) {
    for (idx, v) in b {
        *a.entry(idx).or_insert(0.0) += sign * v;
    }
    let (Some(&first), Some(&last)) = (a.keys().next(), a.keys().next_back()) else {
        return (0, Vec::new());
    };
    let buckets = (first..=last)
        .map(|i| a.get(&i).copied().unwrap_or(0.0))
        .collect();
    (first, buckets)
}
