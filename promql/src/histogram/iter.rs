//! Bucket iteration with bounds: positive and negative buckets in either direction, and all
//! buckets (negative, zero, positive) in ascending or descending order.

use std::fmt;

use super::bounds::bucket_bound;
use super::layout::{Entry, entries, reduced};
use super::text::format_go_float;
use super::{FloatHistogram, is_custom_buckets_schema};

/// One bucket with its bounds and its (absolute) count. `index` is the bucket index within the
/// schema, meaningless for the zero bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub lower: f64,
    pub upper: f64,
    pub lower_inclusive: bool,
    pub upper_inclusive: bool,
    pub count: f64,
    pub index: i32,
}

/// Mathematical interval notation with the count, as Prometheus prints buckets:
/// `(0.5,1]:3`, `[-0.001,0.001]:2`.
impl fmt::Display for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{},{}{}:{}",
            if self.lower_inclusive { '[' } else { '(' },
            format_go_float(self.lower),
            format_go_float(self.upper),
            if self.upper_inclusive { ']' } else { ')' },
            format_go_float(self.count),
        )
    }
}

/// An iterator over buckets; see the `*_buckets` methods of [`FloatHistogram`].
#[derive(Debug, Clone)]
pub struct BucketIter {
    inner: std::vec::IntoIter<Bucket>,
}

impl Iterator for BucketIter {
    type Item = Bucket;

    fn next(&mut self) -> Option<Bucket> {
        self.inner.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl DoubleEndedIterator for BucketIter {
    fn next_back(&mut self) -> Option<Bucket> {
        self.inner.next_back()
    }
}

impl ExactSizeIterator for BucketIter {}

impl FloatHistogram {
    /// Positive buckets in ascending order (from next to the zero bucket upwards).
    pub fn positive_buckets(&self) -> BucketIter {
        self.side_buckets(true, self.schema)
    }

    /// Negative buckets in descending order (from next to the zero bucket downwards).
    pub fn negative_buckets(&self) -> BucketIter {
        self.side_buckets(false, self.schema)
    }

    /// Positive buckets in descending order.
    pub fn positive_buckets_reverse(&self) -> BucketIter {
        reversed(self.positive_buckets())
    }

    /// Negative buckets in ascending order (from the lowest up towards the zero bucket).
    pub fn negative_buckets_reverse(&self) -> BucketIter {
        reversed(self.negative_buckets())
    }

    /// All buckets in ascending order: negative, the zero bucket (if it has a positive count),
    /// positive. Buckets overlapping the zero bucket are cut at the zero threshold.
    pub fn all_buckets(&self) -> BucketIter {
        let mut out: Vec<Bucket> = self
            .negative_buckets_reverse()
            .map(|b| self.clamp_to_zero_bucket(b))
            .collect();
        if self.zero_count > 0.0 {
            out.push(self.zero_bucket());
        }
        out.extend(
            self.positive_buckets()
                .map(|b| self.clamp_to_zero_bucket(b)),
        );
        BucketIter {
            inner: out.into_iter(),
        }
    }

    /// All buckets in descending order: positive, zero, negative.
    pub fn all_buckets_reverse(&self) -> BucketIter {
        reversed(self.all_buckets())
    }

    /// Buckets of one side merged to `target` schema (at most the histogram's schema), in
    /// ascending order of absolute value.
    pub(super) fn side_buckets(&self, positive: bool, target: i32) -> BucketIter {
        let entries = self.side_entries(positive, target);
        let buckets = entries
            .into_iter()
            .map(|(index, count)| make_bucket(index, count, positive, target, &self.custom_values))
            .collect::<Vec<_>>();
        BucketIter {
            inner: buckets.into_iter(),
        }
    }

    /// The (index, count) entries of one side, merged to `target` schema if that is coarser.
    pub(super) fn side_entries(&self, positive: bool, target: i32) -> Vec<Entry> {
        let raw = if positive {
            entries(&self.positive_spans, &self.positive_buckets)
        } else {
            entries(&self.negative_spans, &self.negative_buckets)
        };
        if target < self.schema && !self.uses_custom_buckets() && !is_custom_buckets_schema(target)
        {
            reduced(&raw, self.schema, target)
        } else {
            raw
        }
    }

    /// `b` cut at the zero threshold where it overlaps the zero bucket.
    pub(super) fn clamp_to_zero_bucket(&self, mut b: Bucket) -> Bucket {
        let zt = self.zero_threshold;
        if b.upper < 0.0 && b.upper > -zt {
            b.upper = -zt;
        }
        if b.lower > 0.0 && b.lower < zt {
            b.lower = zt;
        }
        b
    }
}

pub(super) fn make_bucket(
    index: i32,
    count: f64,
    positive: bool,
    schema: i32,
    custom_values: &[f64],
) -> Bucket {
    let upper = bucket_bound(index, schema, custom_values);
    let lower = bucket_bound(index.wrapping_sub(1), schema, custom_values);
    let (lower, upper) = if positive {
        (lower, upper)
    } else {
        (-upper, -lower)
    };
    let (lower_inclusive, upper_inclusive) = if is_custom_buckets_schema(schema) {
        (index == 0, true)
    } else {
        (lower < 0.0, upper > 0.0)
    };
    Bucket {
        lower,
        upper,
        lower_inclusive,
        upper_inclusive,
        count,
        index,
    }
}

fn reversed(it: BucketIter) -> BucketIter {
    let mut v: Vec<Bucket> = it.collect();
    v.reverse();
    BucketIter {
        inner: v.into_iter(),
    }
}
