//! Bucket layouts: spans plus a bucket list, read as a sorted list of (absolute index, count)
//! entries and written back. Merging, compaction and resolution reduction work on entries,
//! which keeps them independent of how the spans of the inputs happen to be cut.

use super::Span;
use super::bounds::target_index;

/// One bucket: its absolute index and its count.
pub(super) type Entry = (i32, f64);

/// The entries of `spans`/`buckets`, in index order. Reading stops where the buckets run out;
/// surplus buckets are ignored.
pub(super) fn entries(spans: &[Span], buckets: &[f64]) -> Vec<Entry> {
    let mut out = Vec::with_capacity(buckets.len());
    let mut next = 0i32;
    let mut values = buckets.iter();
    for (i, span) in spans.iter().enumerate() {
        next = if i == 0 {
            span.offset
        } else {
            next.wrapping_add(span.offset)
        };
        for _ in 0..span.length {
            let Some(value) = values.next() else {
                return out;
            };
            out.push((next, *value));
            next = next.wrapping_add(1);
        }
    }
    out
}

/// Spans and buckets holding exactly `entries` (sorted by index), one span per run of
/// consecutive indices.
pub(super) fn from_entries(entries: &[Entry]) -> (Vec<Span>, Vec<f64>) {
    let mut spans: Vec<Span> = Vec::new();
    let mut buckets = Vec::with_capacity(entries.len());
    let mut last: Option<i32> = None;
    for &(index, value) in entries {
        match (last, spans.last_mut()) {
            (Some(prev), Some(span)) if index == prev.wrapping_add(1) => span.length += 1,
            (Some(prev), _) => spans.push(Span::new(index.wrapping_sub(prev).wrapping_sub(1), 1)),
            (None, _) => spans.push(Span::new(index, 1)),
        }
        buckets.push(value);
        last = Some(index);
    }
    (spans, buckets)
}

/// The compacted layout of `entries`: empty buckets (as `is_empty` says) are dropped except
/// within runs of at most `max_empty` empty buckets between populated ones, which are kept as
/// explicit zeros (gaps between spans count as empty buckets too).
pub(super) fn compacted<T: Copy>(
    entries: &[(i32, T)],
    max_empty: usize,
    is_empty: impl Fn(&T) -> bool,
    zero: T,
) -> (Vec<Span>, Vec<T>) {
    let mut spans: Vec<Span> = Vec::new();
    let mut values: Vec<T> = Vec::new();
    let mut last: Option<i32> = None;
    for &(index, value) in entries {
        if is_empty(&value) {
            continue;
        }
        match (last, spans.last_mut()) {
            (Some(prev), Some(span)) => {
                let gap = i64::from(index) - i64::from(prev) - 1;
                let limit = i64::try_from(max_empty)
                    .unwrap_or(i64::MAX)
                    .min(i64::from(u32::MAX) - 1);
                if gap >= 0 && gap <= limit {
                    for _ in 0..gap {
                        values.push(zero);
                    }
                    span.length = span.length.saturating_add(gap as u32 + 1);
                } else {
                    spans.push(Span::new(index.wrapping_sub(prev).wrapping_sub(1), 1));
                }
            }
            _ => spans.push(Span::new(index, 1)),
        }
        values.push(value);
        last = Some(index);
    }
    (spans, values)
}

/// `entries` merged into the buckets of the coarser `target` schema, counts summed.
pub(super) fn reduced(entries: &[Entry], origin: i32, target: i32) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
    for &(index, value) in entries {
        let t = target_index(index, origin, target);
        match out.last_mut() {
            Some(last) if last.0 == t => last.1 += value,
            _ => out.push((t, value)),
        }
    }
    out
}

/// Whether two span lists describe the same bucket indices.
pub(super) fn same_layout(a: &[Span], b: &[Span]) -> bool {
    let indices = |spans: &[Span]| {
        let mut out = Vec::new();
        let mut next = 0i32;
        for (i, span) in spans.iter().enumerate() {
            next = if i == 0 {
                span.offset
            } else {
                next.wrapping_add(span.offset)
            };
            if span.length > 0 {
                out.push((next, span.length));
            }
            next = next.wrapping_add(span.length as i32);
        }
        // Merge runs that touch.
        let mut merged: Vec<(i32, u32)> = Vec::new();
        for (start, len) in out {
            match merged.last_mut() {
                Some((s, l)) if s.wrapping_add(*l as i32) == start => *l += len,
                _ => merged.push((start, len)),
            }
        }
        merged
    };
    indices(a) == indices(b)
}
